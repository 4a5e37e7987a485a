import type { PeerId } from '@chunkycast/wire';
import type { PeerState, SliceState } from './state.js';

/** Blocks of arrival times kept for the relative-offset measurement. */
const OFFSET_BLOCKS = 8;

/**
 * Relative arrival offsets without clock synchronisation (thesis §4.2, fine-tuning latency): the
 * packets with the same sequence number on every slice form a block; each slice's arrival minus the
 * block's mean arrival is its offset, smoothed into `SliceState.offsetMs`. Comparing our offset for
 * a slice with a neighbour's advertised one (plus half the round trip) says whether that neighbour
 * would deliver the slice earlier: the latency phase's measure.
 */
export class ArrivalOffsets {
  /** Sequence number of the block in each row, −1 for a free row. */
  private readonly blockSeq = new Float64Array(OFFSET_BLOCKS).fill(-1);
  /** Arrival times, one row of M slices per block, NaN where the slice has not arrived. */
  private readonly blockArrivals: Float64Array;
  private readonly blockCounts = new Uint8Array(OFFSET_BLOCKS);
  /** neighbourBias per peer, valid for the current decision round only. */
  private readonly biasThisRound = new Map<PeerId, number>();

  constructor(
    private readonly slices: readonly SliceState[],
    /** Weight of the newest block in the moving average (ProtocolConfig.offsetSmoothing). */
    private readonly smoothing: number,
  ) {
    this.blockArrivals = new Float64Array(OFFSET_BLOCKS * slices.length).fill(Number.NaN);
  }

  /** Packet `seq` of slice `s` arrived (first copy) at `nowMs`. */
  record(s: number, seq: number, nowMs: number): void {
    const row = seq % OFFSET_BLOCKS;
    const slices = this.slices.length;
    if (this.blockSeq[row] !== seq) {
      if ((this.blockSeq[row] ?? -1) >= 0) this.finishBlock(row);
      this.blockSeq[row] = seq;
      this.blockCounts[row] = 0;
      this.blockArrivals.fill(Number.NaN, row * slices, (row + 1) * slices);
    }
    const cell = row * slices + s;
    if (Number.isNaN(this.blockArrivals[cell] ?? 0)) {
      this.blockArrivals[cell] = nowMs;
      const count = (this.blockCounts[row] ?? 0) + 1;
      this.blockCounts[row] = count;
      if (count === slices) {
        this.finishBlock(row);
        this.blockSeq[row] = -1;
      }
    }
  }

  private finishBlock(row: number): void {
    const slices = this.slices.length;
    const count = this.blockCounts[row] ?? 0;
    // With fewer than half the slices the block mean would be biased by which slices are missing.
    if (count < Math.max(2, slices / 2)) return;
    let sum = 0;
    for (let s = 0; s < slices; s++) {
      const a = this.blockArrivals[row * slices + s] ?? Number.NaN;
      if (!Number.isNaN(a)) sum += a;
    }
    const mean = sum / count;
    for (let s = 0; s < slices; s++) {
      const a = this.blockArrivals[row * slices + s] ?? Number.NaN;
      if (!Number.isNaN(a)) this.slices[s]?.foldOffset(a - mean, this.smoothing);
    }
  }

  /** A new decision round: neighbour biases are measured afresh. */
  newRound(): void {
    this.biasThisRound.clear();
  }

  /**
   * Mean arrival at `q` minus mean arrival here (both relative measures), from the slices `q`
   * supplies us: for such a slice t, our offset = q's offset + half the RTT + (mean_q − mean_us).
   * Where q supplies no settled slice we take it as zero, as the thesis's trick does. Computed once
   * per peer per decision round (both the load reports and the latency phase ask).
   */
  neighbourBias(qId: PeerId, q: PeerState): number {
    const cached = this.biasThisRound.get(qId);
    if (cached !== undefined) return cached;
    const bias = this.measureBias(qId, q);
    this.biasThisRound.set(qId, bias);
    return bias;
  }

  private measureBias(qId: PeerId, q: PeerState): number {
    let sum = 0;
    let count = 0;
    for (let t = 0; t < this.slices.length; t++) {
      const st = this.slices[t];
      if (st === undefined || st.parent !== qId || !st.offsetSettled()) continue;
      const theirs = q.sliceOffsets[t] ?? Number.NaN;
      if (Number.isNaN(theirs) || Number.isNaN(q.rttMs)) continue;
      sum += st.offsetMs - theirs - q.rttMs / 2;
      count++;
    }
    return count === 0 ? 0 : sum / count;
  }
}

/**
 * When `slice` would reach us through `q`, relative to our other slices: q's advertised relative
 * offset plus half the round trip to q (no clock sync, thesis §4.2, fine-tuning latency). Infinity
 * while unknown.
 */
export function arrivalVia(q: PeerState, slice: number): number {
  const offset = q.sliceOffsets[slice] ?? Number.NaN;
  const value = offset + q.rttMs / 2;
  return Number.isNaN(value) ? Infinity : value;
}
