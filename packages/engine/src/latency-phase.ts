import {
  MAX_LOAD_FIELD,
  MessageType,
  SEQ_NONE,
  type LatencyPermissionReplyMessage,
  type LatencyPermissionRequestMessage,
  type PeerId,
} from '@chunkycast/wire';
import { LatencyEstimate } from './config.js';
import { expectedArrivalVia, type PhaseHost } from './phase-host.js';
import type { PeerState, SliceState } from './state.js';

/** A grant's key: slice × this + child id (ids are u32, slices < 256: well inside 2^53). */
const GRANT_KEY_SLICE = 2 ** 32;
/**
 * A grant lapses after this many request timeouts: the child asks its target at once, the target
 * answers within a request timeout, and the child then tells us where to stop.
 */
const GRANT_LAPSE_REQUEST_TIMEOUTS = 2;

/**
 * Whether a latency switch away from `parent` may fill its target only to its TL: with
 * latencyPhaseEnds, unless the parent is over a relayed link (such switches only ever go from
 * relayed to direct links, so they are finite). The thesis, and the default: up to its ULT. Why TL:
 * this engine's load phase moves children off a parent above its TL onto a neighbour below its LLT
 * (load-phase.ts), so a latency switch that filled a target past its TL invited a load switch away.
 */
function onlyToTargetLoad(host: PhaseHost, parent: PeerState): boolean {
  return host.config.protocol.latencyPhaseEnds === 1 && !host.avoidLink(parent);
}

/** The most load a latency switch may bring `q` to (onlyToTargetLoad). */
export function latencyRoom(
  q: { readonly targetLoad: number; readonly upperLatencyThreshold: number },
  onlyToTarget: boolean,
): number {
  return onlyToTarget ? q.targetLoad : q.upperLatencyThreshold;
}

/**
 * The latency phase (thesis §4.2, fine-tuning latency): a member whose parent is inside its LLT–ULT
 * range asks the parent's permission (`run`), then a neighbour that delivers the slice earlier by
 * more than the margin (`onPermissionReply`); a parent grants while losing the child keeps it in
 * its range (`onPermissionRequest`).
 */
export class LatencyPhase {
  /**
   * Permissions granted: slice × 2^32 + child → when granted. Each lowers the load we may still
   * give away. By default they count for the decision round only (as the thesis's one decision a
   * round): a grant whose switch takes longer than a round is forgotten while the child still
   * counts in our load, so a parent at LLT + 1 may grant twice and fall below LLT, and the load phase
   * then moves a child back onto it from a neighbour above TL; the two phases trade children without
   * end, which keeps improving latency. With latencyPhaseEnds a grant counts until the child leaves
   * (its SwitchComplete ends it as an active child) or lapses, and the trading stops.
   */
  private readonly grants = new Map<number, number>();

  constructor(private readonly host: PhaseHost) {}

  private slice(s: number): SliceState {
    return this.host.slices[s] as SliceState;
  }

  /** A new decision round: grants whose child left, or that lapsed, no longer count (all, by default). */
  newRound(): void {
    if (this.grants.size === 0) return;
    if (this.host.config.protocol.latencyPhaseEnds !== 1) {
      this.grants.clear();
      return;
    }
    const lapseMs = GRANT_LAPSE_REQUEST_TIMEOUTS * this.host.config.protocol.requestTimeoutMs;
    for (const [key, grantedAt] of this.grants) {
      const s = Math.floor(key / GRANT_KEY_SLICE);
      const child = key - s * GRANT_KEY_SLICE;
      if (this.host.now - grantedAt > lapseMs || this.slice(s).children.get(child)?.untilSeq !== Infinity)
        this.grants.delete(key);
    }
  }

  onPermissionRequest(from: PeerId, msg: LatencyPermissionRequestMessage): void {
    const entry = this.slice(msg.slice).children.get(from);
    const active = entry?.untilSeq === Infinity;
    const key = msg.slice * GRANT_KEY_SLICE + from;
    // Grant only if losing this child keeps us inside LLT–ULT, counting grants already given and
    // not yet used (a repeated request is the same grant); a child over a relayed link may go in
    // any case (latencyPhase: it leaves for a direct parent).
    const child = this.host.peers.get(from);
    const others = this.grants.size - (this.grants.has(key) ? 1 : 0);
    const granted =
      active &&
      ((child !== undefined && this.host.avoidLink(child)) ||
        this.host.load - 1 - others >= this.host.config.lowerLatencyThreshold);
    if (granted) this.grants.set(key, this.host.now);
    this.host.send(from, {
      type: MessageType.LatencyPermissionReply,
      slice: msg.slice,
      target: msg.target,
      granted,
    });
  }

  onPermissionReply(from: PeerId, msg: LatencyPermissionReplyMessage): void {
    const s = msg.slice;
    const st = this.slice(s);
    const pending = st.pending;
    if (pending?.kind !== 'permission' || st.parent !== from || pending.target !== msg.target) return;
    st.pending = null;
    if (!msg.granted) return;
    const q = this.host.peers.get(msg.target);
    if (
      q === undefined ||
      !this.host.isNeighbour(msg.target) ||
      !this.host.eligibleParent(q, msg.target, s, st)
    )
      return;
    const parent = this.host.peers.get(from);
    if (parent === undefined || q.load + 1 > latencyRoom(q, onlyToTargetLoad(this.host, parent))) return;
    this.host.sendSwitchRequest(s, msg.target, q, from, 'latency');
  }

  /**
   * Latency phase (thesis §4.2, fine-tuning latency): for a slice whose parent is inside its LLT–ULT range, move it to a
   * neighbour that receives it earlier, by more than the margin, if the parent stays in its range and
   * the neighbour within its room (latencyRoom). Expected arrival via X = X's advertised path estimate (or
   * relative offset, ProtocolConfig.latencyEstimate) for the slice + half our RTT to X.
   */
  run(): void {
    const slices = this.host.slices.length;
    const p = this.host.config.protocol;
    const byPath = p.latencyEstimate === LatencyEstimate.Path;
    // At most latencySwitchesInFlight latency switches in flight at a time, to distinct parents and
    // targets (a parent grants by its own load, a target admits by its advertised one).
    let inFlight = 0;
    const busy = new Set<PeerId>();
    for (const st of this.host.slices)
      if (st.pending?.kind === 'permission' || st.pending?.kind === 'latency') {
        inFlight++;
        busy.add(st.pending.target);
        if (st.parent !== null) busy.add(st.parent);
      }
    if (inFlight >= p.latencySwitchesInFlight) return;
    const options: { slice: number; parent: PeerId; target: PeerId; gain: number }[] = [];
    const neighbours = this.host.neighbours();
    // A slice's latency window counts from its placement, or from our newest neighbour if later
    // (latencyWindowFromNeighbours).
    const windowReopenedAt = p.latencyWindowFromNeighbours === 1 ? this.host.newestNeighbourAt : -Infinity;
    for (let s = 0; s < slices; s++) {
      const st = this.slice(s);
      if (st.isSliceSource || st.parent === null || st.pending !== null || st.oldParent !== null) continue;
      // With offsets, our own measurement must have caught up with the current parent first.
      if (!byPath && !st.offsetSettled()) continue;
      if (this.host.now < st.latencyFrozenUntil) continue;
      if (
        p.latencyWindowMs > 0 &&
        this.host.now - Math.max(st.placedAt, windowReopenedAt) > p.latencyWindowMs
      )
        continue;
      const parent = this.host.peers.get(st.parent);
      // The parent must be inside its range and stay there without us (thesis §4.2, fine-tuning latency). We gate per
      // slice: requiring all 16 parents in range at once would, with 10% of nodes outside, leave
      // (0.9)^16 ≈ 18% of nodes eligible and the latency phase would barely run.
      if (parent?.hasAdvert !== true || parent.load > parent.upperLatencyThreshold) continue;
      // A parent over a relayed link may be left even below its LLT (not in the thesis): the flood
      // and the load phase leave relayed edges on parents at or under LLT, which this rule would
      // keep for good. It still converges: such a switch goes to a direct target that stays within
      // its ULT, so it creates no overload, and only an overload (a parent above ULT) is ever
      // relieved onto a relayed link (childLoadReports).
      if (parent.load - 1 < parent.lowerLatencyThreshold && !this.host.avoidLink(parent)) continue;
      // What the current parent costs: its path estimate and half our round trip to it, or our
      // measured offset; plus the penalty if its link is relayed, so a relayed parent is left for a
      // direct neighbour of similar arrival.
      const current = byPath
        ? expectedArrivalVia(this.host, parent, s)
        : st.offsetMs + this.host.linkPenalty(parent);
      if (current === Infinity) continue;
      // Hysteresis: each latency switch this slice made raises the gain the next one needs.
      const margin = p.latencySwitchMarginMs * p.latencyMarginGrowth ** Math.min(st.latencySwitches, 16);
      const onlyToTarget = onlyToTargetLoad(this.host, parent);
      for (const qId of neighbours) {
        if (qId === st.parent) continue;
        const q = this.host.peers.get(qId);
        if (q === undefined || q.load + 1 > latencyRoom(q, onlyToTarget)) continue;
        if (!this.host.eligibleParent(q, qId, s, st)) continue;
        const viaQ = expectedArrivalVia(this.host, q, s);
        if (viaQ === Infinity) continue;
        // Offsets are relative to each node's own mean arrival, so comparing ours with a
        // neighbour's is off by the difference of the two means (±hundreds of ms, above the margin).
        // Where the neighbour already feeds us some slice we measure that difference; elsewhere we
        // take it as zero, as the thesis's trick does. Path estimates need no such correction.
        const gain = current - viaQ - (byPath ? 0 : this.host.offsets.neighbourBias(qId, q));
        if (gain > margin) options.push({ slice: s, parent: st.parent, target: qId, gain });
      }
    }
    options.sort((a, b) => b.gain - a.gain);
    while (inFlight < p.latencySwitchesInFlight) {
      // A slice picked below has its parent busy from then on, so it is not picked twice.
      const open = options.filter((o) => !busy.has(o.target) && !busy.has(o.parent));
      if (open.length === 0) return;
      const pick = open[this.host.random.int(Math.min(p.candidateSetSize, open.length))];
      if (pick === undefined) return;
      const parentId = pick.parent;
      this.slice(pick.slice).pending = {
        kind: 'permission',
        target: pick.target,
        handoffSeq: SEQ_NONE,
        sentAt: this.host.now,
        forcedReason: null,
      };
      this.host.send(parentId, {
        type: MessageType.LatencyPermissionRequest,
        slice: pick.slice,
        target: pick.target,
        parentLoadSeen: Math.min(MAX_LOAD_FIELD, this.host.peers.get(parentId)?.load ?? 0),
      });
      inFlight++;
      busy.add(pick.target);
      busy.add(parentId);
    }
  }
}
