/**
 * Delay from production to the audience: for each packet, from the moment the packager finished
 * writing its bytes (its write time w) to the moments members receive it. Under progressive
 * production the source publishes at w; under segment production up to a segment later, and that
 * wait is part of what this measures.
 *
 * Which members count for a packet: those that were receiving every slice when the packet was
 * published (all slices had delivered a first packet, `completeAt` ≤ publish time) and stayed at
 * least `packetLifeMs` after it (neither left nor reached the run's end before publish +
 * `packetLifeMs`). A member joining or leaving mid-packet is not held against the trees. Packets
 * published less than `packetLifeMs` before the run's end, and packets no member counts for, are
 * not measured. A counted member that never received the packet makes it "not held by all".
 *
 * Memory: one buffer of arrival delays for one packet at a time, and a histogram of whole
 * milliseconds for the per-member distribution, whatever the population. The member logs read here
 * are the ones `measurement.ts` keeps anyway (a Uint16 delay per member, slice and packet).
 */
import { NOT_RECEIVED, type MemberRecord } from './measurement.js';
import { percentile } from './stats.js';

/** How long after its publish a packet is followed (the default playback buffer: later is useless). */
export const PACKET_LIFE_MS = 5000;
/** Histogram bins (1 ms each) for the per-member distribution; larger delays land in the last. */
const HISTOGRAM_BINS = 1 << 17;

/** What `productionDelay` reads of a run (a subset of SimResult, so tests can build one by hand). */
export interface ProductionInput {
  readonly members: readonly MemberRecord[];
  readonly emitTimes: readonly Float64Array[];
  readonly writeTimes: readonly Float64Array[];
}

export interface DelayFigures {
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** Values the figures are over (packets, or member × packet pairs). */
  count: number;
}

export interface ProductionWindow {
  /** Packets written at or after this time (ms) were measured. */
  fromWriteMs: number;
  /** Packets measured: published at least packetLifeMs before the end, with a member that counts. */
  packets: number;
  /** Of those, packets some counted member never received / fewer than 90% of them received. */
  packetsNotHeldByAll: number;
  packetsNotHeldBy90Pct: number;
  /** Members counted per packet: the fewest and the mean. */
  membersMin: number;
  membersMean: number;
  /** Publish − write time: the source's wait before a packet enters the trees. */
  sourceWaitMs: { mean: number; max: number };
  /** Write → the last counted member holds it, over packets held by all. */
  writeToLastMemberMs: DelayFigures;
  /** Write → 90% of counted members hold it (the ⌈0.9·n⌉-th arrival), over packets held by 90%. */
  writeTo90PctMs: DelayFigures;
  /** Write → arrival at each counted member, over every (member, packet) pair that arrived. */
  writeToEachMemberMs: DelayFigures;
}

function round1(value: number): number {
  return Number.isFinite(value) ? Math.round(value * 10) / 10 : value;
}

function figures(values: Float64Array): DelayFigures {
  if (values.length === 0) return { mean: 0, p50: 0, p90: 0, p99: 0, max: 0, count: 0 };
  const sorted = values.slice().sort();
  let total = 0;
  for (const v of sorted) total += v;
  return {
    mean: round1(total / sorted.length),
    p50: round1(percentile(sorted, 50)),
    p90: round1(percentile(sorted, 90)),
    p99: round1(percentile(sorted, 99)),
    max: round1(sorted[sorted.length - 1] ?? 0),
    count: sorted.length,
  };
}

/** The value of 0-based rank `rank` in the multiset the histogram counts (bin i holds value i). */
function histogramRank(histogram: Float64Array, rank: number): number {
  let seen = 0;
  for (let i = 0; i < histogram.length; i++) {
    seen += histogram[i] ?? 0;
    if (seen > rank) return i;
  }
  return histogram.length - 1;
}

/** stats.percentile's definition (linear between closest ranks), on a histogram of whole ms. */
function histogramPercentile(histogram: Float64Array, count: number, p: number): number {
  const r = (p / 100) * (count - 1);
  const lo = Math.floor(r);
  const a = histogramRank(histogram, lo);
  if (lo === r) return a;
  const b = histogramRank(histogram, lo + 1);
  return a + (r - lo) * (b - a);
}

/**
 * The figures over packets written in [fromWriteMs, ∞) and published by endMs − packetLifeMs.
 * Delays are whole ms (the simulator's clock and the members' logs are), so the histogram is exact.
 */
export function productionDelay(
  input: ProductionInput,
  fromWriteMs: number,
  endMs: number,
  packetLifeMs: number = PACKET_LIFE_MS,
): ProductionWindow {
  const members = input.members;
  const arrivals = new Float64Array(members.length);
  const histogram = new Float64Array(HISTOGRAM_BINS);
  const toLast: number[] = [];
  const to90: number[] = [];
  let eachCount = 0;
  let eachSum = 0;
  let eachMax = 0;
  let packets = 0;
  let notAll = 0;
  let not90 = 0;
  let membersMin = Infinity;
  let membersSum = 0;
  let waitSum = 0;
  let waitMax = 0;
  for (let s = 0; s < input.emitTimes.length; s++) {
    const emitted = input.emitTimes[s];
    const written = input.writeTimes[s];
    if (emitted === undefined || written === undefined) continue;
    for (let seq = 0; seq < emitted.length; seq++) {
      const publishedAt = emitted[seq] ?? Number.NaN;
      const writtenAt = written[seq] ?? Number.NaN;
      if (Number.isNaN(publishedAt) || Number.isNaN(writtenAt)) continue;
      if (writtenAt < fromWriteMs || publishedAt + packetLifeMs > endMs) continue;
      const waitMs = publishedAt - writtenAt;
      let n = 0;
      let received = 0;
      for (const m of members) {
        if (m.completeAt > publishedAt || Math.min(m.leftAt, endMs) < publishedAt + packetLifeMs) continue;
        n++;
        const idx = seq - m.baseSeq;
        const delay = idx < 0 ? NOT_RECEIVED : (m.delays[s]?.[idx] ?? NOT_RECEIVED);
        if (delay === NOT_RECEIVED) continue;
        const fromWrite = waitMs + delay;
        arrivals[received++] = fromWrite;
        const bin = Math.min(HISTOGRAM_BINS - 1, Math.max(0, Math.round(fromWrite)));
        histogram[bin] = (histogram[bin] ?? 0) + 1;
        eachSum += fromWrite;
        if (fromWrite > eachMax) eachMax = fromWrite;
      }
      if (n === 0) continue;
      packets++;
      eachCount += received;
      membersSum += n;
      if (n < membersMin) membersMin = n;
      waitSum += waitMs;
      if (waitMs > waitMax) waitMax = waitMs;
      const sorted = arrivals.subarray(0, received).sort();
      if (received === n) toLast.push(sorted[n - 1] ?? 0);
      else notAll++;
      // The moment 90% hold it: the ⌈0.9·n⌉-th arrival (1-based).
      const rank90 = Math.ceil(0.9 * n) - 1;
      if (rank90 < received) to90.push(sorted[rank90] ?? 0);
      else not90++;
    }
  }
  return {
    fromWriteMs,
    packets,
    packetsNotHeldByAll: notAll,
    packetsNotHeldBy90Pct: not90,
    membersMin: packets === 0 ? 0 : membersMin,
    membersMean: packets === 0 ? 0 : round1(membersSum / packets),
    sourceWaitMs: { mean: packets === 0 ? 0 : round1(waitSum / packets), max: waitMax },
    writeToLastMemberMs: figures(Float64Array.from(toLast)),
    writeTo90PctMs: figures(Float64Array.from(to90)),
    writeToEachMemberMs:
      eachCount === 0
        ? { mean: 0, p50: 0, p90: 0, p99: 0, max: 0, count: 0 }
        : {
            mean: round1(eachSum / eachCount),
            p50: round1(histogramPercentile(histogram, eachCount, 50)),
            p90: round1(histogramPercentile(histogram, eachCount, 90)),
            p99: round1(histogramPercentile(histogram, eachCount, 99)),
            max: round1(eachMax),
            count: eachCount,
          },
  };
}
