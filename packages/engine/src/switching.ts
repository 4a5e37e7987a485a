import {
  MAX_LOAD_FIELD,
  ForcedReason,
  MessageType,
  RejectReason,
  SEQ_NONE,
  SwitchReason,
  TreeRole,
  bloomContains,
  type Bloom128,
  type ForcedParentRequestMessage,
  type PeerId,
  type SwitchCompleteMessage,
  type SwitchReplyMessage,
  type SwitchRequestMessage,
} from '@chunkycast/wire';
import type { PhaseHost } from './phase-host.js';
import type { PeerState, PendingKind, SliceState } from './state.js';
import type { EngineCounters, EngineEvent, SwitchKind } from './types.js';

/** Ranks a candidate parent that would go above its ULT after every one that stays within it (hops ≤ 255). */
const OVER_ULT_RANK_PENALTY = 1000;
/**
 * A member without a parent asks a neighbour silent for this many heartbeats only when no other
 * qualifies (the engine's eligibleParent excludes one silent for three): after a failure burst,
 * neighbours that died with our parent are still undetected when we detect the parent, and a
 * request to one waits out requestTimeoutMs (3 s). A preference, not a rule: under a congested
 * uplink a live neighbour's adverts queue behind its data and can come late.
 */
const FORCED_SILENCE_HEARTBEATS = 2;
/** Random part of a candidate's rank: below one hop, so it only orders candidates at equal hops. */
const HOP_TIE_JITTER = 0.5;
/**
 * A slice's latency backoff doubles with each latency switch, up to 2^10 × latencyBackoffMs: a slice
 * that keeps switching is frozen for at most 1024 × latencyBackoffMs, never for good.
 */
const MAX_LATENCY_BACKOFF_DOUBLINGS = 10;

/** What parent switching needs from its member engine, beyond what the load and latency phases do. */
export interface SwitchHost extends Omit<PhaseHost, 'sendForced' | 'sendSwitchRequest'> {
  readonly counters: EngineCounters;
  /** Our own Bloom mask. */
  readonly mask: Bloom128;
  /** Load as admission counts it: tree streams plus repair upload (Engine.effectiveLoad). */
  readonly effectiveLoad: number;
  /** Active children over every slice that have been silent for PARENT_SILENCE_HEARTBEATS. */
  silentChildren(): number;
  /** A child became active (+1) or stopped being one (−1) on some slice. */
  addLoad(delta: number): void;
  emit(event: EngineEvent): void;
  maskOf(peer: PeerId): Bloom128;
  /** Whether we receive slice `st` now (a parent or root, and data within the receiving timeout). */
  sliceReceiving(st: SliceState): boolean;
  /** Send a new child what we hold of slice `s` from `fromSeq` on, no older than `maxAgeMs`. */
  resend(st: SliceState, s: number, child: PeerId, fromSeq: number, maxAgeMs: number): void;
  /** The newest sequence number we can play out to (the audit starts past it). */
  liveEdgeSeq(): number;
  /** The PeerState of `peer`, created if we hold none. */
  touchPeer(peer: PeerId): PeerState;
  /** A loop probe down our subtree on slice `s`. */
  sendProbe(s: number): void;
  /** Whether `peer` is below us on slice `s` (a child, or our mask in its filter). */
  isBelow(peer: PeerId, s: number, st: SliceState): boolean;
  /** Whether a flood sender `hops` from the slice source is below us (flood.ts, senderBelow). */
  floodSenderBelow(peer: PeerId, hops: number, s: number, st: SliceState): boolean;
  /** 1 for a peer over a relayed link we avoid, 0 otherwise (sorts direct links first). */
  relayedRank(peer: PeerId): number;
  /** Whether `peer` is distrusted now (trust.ts). */
  isSuspect(peer: PeerId): boolean;
}

/**
 * Parent switching, both sides of the handshake. A member without a parent asks a neighbour with a
 * forced request, refused only above ML or on a loop (thesis §4.2, initial tree construction and
 * forced parent selection); a load or latency switch asks the target to take over at a hand-off
 * point one lead ahead, and tells the old parent to stop there (thesis §4.2, fine-tuning load). The
 * phases decide who should move (load-phase.ts, latency-phase.ts); this file carries the move out.
 */
export class Switching {
  constructor(private readonly host: SwitchHost) {}

  private slice(s: number): SliceState {
    return this.host.slices[s] as SliceState;
  }

  // ── the child side: finding and changing parents ──

  /** Periodic requests for every slice without a parent, until each has one (thesis §4.2, initial tree construction and forced parent selection). */
  acquireMissingParents(): void {
    for (let s = 0; s < this.host.slices.length; s++) {
      const st = this.slice(s);
      if (st.parent === null && st.pending === null && !st.isSliceSource && st.floodDecideAt === Infinity) {
        this.requestParent(
          s,
          st.lostReason ?? (st.everHadParent ? ForcedReason.ParentLost : ForcedReason.Join),
          [],
        );
      }
    }
  }

  /**
   * Ask a neighbour to be our parent; it may refuse only above ML or on a loop (thesis §4.2, initial tree construction and forced parent selection).
   * Prefers neighbours with room under ULT and short paths, at random among the best few so
   * simultaneous orphans do not all ask the same node (thesis §4.2, fine-tuning latency). Neighbours over relayed links
   * are asked only when no direct one qualifies (relayedLinkPenaltyMs).
   */
  requestParent(s: number, reason: ForcedReason, exclude: readonly PeerId[]): void {
    const st = this.slice(s);
    if (st.pending !== null || st.isSliceSource) return;
    const scored: { peer: PeerId; score: number; relayed: boolean; silent: boolean }[] = [];
    const silentAfterMs = FORCED_SILENCE_HEARTBEATS * this.host.config.protocol.heartbeatMs;
    for (const peerId of this.host.neighbours()) {
      if (exclude.includes(peerId) || peerId === st.parent) continue;
      const q = this.host.peers.get(peerId);
      if (q === undefined || !this.host.eligibleParent(q, peerId, s, st)) continue;
      if (q.load + 1 > q.maxLoad) continue;
      const overUpper = q.load + 1 > q.upperLatencyThreshold ? OVER_ULT_RANK_PENALTY : 0;
      scored.push({
        peer: peerId,
        score: overUpper + (q.sliceHops[s] ?? 0) + this.host.random.nextFloat() * HOP_TIE_JITTER,
        relayed: this.host.avoidLink(q),
        silent: q.silentLongerThan(this.host.now, silentAfterMs),
      });
    }
    if (scored.length === 0) return;
    // A score penalty alone would not do: the pick is uniform among the best few, so a relayed (or
    // silent) neighbour would still be asked whenever fewer direct ones rank above it.
    const heard = scored.some((c) => !c.silent) ? scored.filter((c) => !c.silent) : scored;
    const pool = heard.some((c) => !c.relayed) ? heard.filter((c) => !c.relayed) : heard;
    pool.sort((a, b) => a.score - b.score);
    const pick =
      pool[this.host.random.int(Math.min(this.host.config.protocol.candidateSetSize, pool.length))];
    if (pick === undefined) return;
    this.sendForced(s, pick.peer, reason);
  }

  sendForced(s: number, target: PeerId, reason: ForcedReason): void {
    const st = this.slice(s);
    // With a live parent (neighbour change, parent quitting) we hand off ahead; otherwise we ask for
    // everything from the first packet we miss.
    const liveParent =
      st.parent !== null && (reason === ForcedReason.NeighbourChange || reason === ForcedReason.ParentQuit);
    const fromSeq = liveParent ? st.handoffSeq(this.host.config.protocol.handoffLeadMs) : st.nextSeqWanted();
    st.pending = { kind: 'forced', target, handoffSeq: fromSeq, sentAt: this.host.now, forcedReason: reason };
    this.host.send(target, { type: MessageType.ForcedParentRequest, slice: s, reason, fromSeq });
  }

  /** Ask `target` to take over `slice` at a hand-off point one lead ahead (thesis §4.2, fine-tuning load). */
  sendSwitchRequest(s: number, target: PeerId, q: PeerState, parent: PeerId, kind: 'load' | 'latency'): void {
    const st = this.slice(s);
    const handoffSeq = st.handoffSeq(this.host.config.protocol.handoffLeadMs);
    if (handoffSeq === SEQ_NONE) return;
    st.pending = { kind, target, handoffSeq, sentAt: this.host.now, forcedReason: null };
    this.host.send(target, {
      type: MessageType.SwitchRequest,
      slice: s,
      reason: kind === 'load' ? SwitchReason.Load : SwitchReason.Latency,
      handoffSeq,
      targetLoadSeen: Math.min(MAX_LOAD_FIELD, q.load),
      parentLoadSeen: Math.min(MAX_LOAD_FIELD, this.host.peers.get(parent)?.load ?? 0),
    });
  }

  onSwitchReply(from: PeerId, msg: SwitchReplyMessage): void {
    const s = msg.slice;
    const st = this.slice(s);
    const pending = st.pending;
    if (pending === null || pending.target !== from || pending.kind === 'permission') {
      // A late acceptance we no longer want: undo it so the sender does not count us as load.
      if (msg.accepted && st.parent !== from)
        this.host.send(from, { type: MessageType.TreeLeave, slice: s, role: TreeRole.Child });
      return;
    }
    st.pending = null;
    if (!msg.accepted) {
      this.host.counters.switchRejections++;
      st.rejectUntil(from, this.host.now + this.host.config.protocol.rejectBackoffMs);
      this.host.emit({ type: 'switchRejected', slice: s, by: from, rejectReason: msg.rejectReason });
      if (pending.kind === 'forced') this.retryForced(s, pending.forcedReason ?? ForcedReason.ParentLost);
      return;
    }
    this.adoptParent(s, from, msg.handoffSeq, pending.kind);
  }

  private retryForced(s: number, reason: ForcedReason): void {
    const st = this.slice(s);
    if (reason === ForcedReason.Flood) {
      let minHops = Infinity;
      for (const sender of st.floodSenders) minHops = Math.min(minHops, sender.hops);
      st.floodSenders = st.floodSenders
        .filter(
          (sender) =>
            sender.hops === minHops &&
            sender.hops < st.floodLevel &&
            !this.host.floodSenderBelow(sender.peer, sender.hops, s, st),
        )
        .sort((a, b) => this.host.relayedRank(a.peer) - this.host.relayedRank(b.peer)); // direct first (stable)
      while (st.floodSenders.length > 0) {
        const next = st.floodSenders.shift();
        if (next === undefined) break;
        const until = st.rejectedUntil(next.peer);
        if (this.host.isNeighbour(next.peer) && until <= this.host.now && !this.host.isSuspect(next.peer)) {
          st.filter = next.bloom;
          this.sendForced(s, next.peer, reason);
          return;
        }
      }
    }
    this.requestParent(s, reason === ForcedReason.Flood ? ForcedReason.Join : reason, []);
  }

  private adoptParent(s: number, parent: PeerId, handoffSeq: number, kind: PendingKind): void {
    const st = this.slice(s);
    const previous = st.parent;
    if (previous !== null && previous !== parent) {
      // Tell the old parent where to stop; it keeps sending until then (thesis §4.2, fine-tuning load).
      this.host.send(previous, { type: MessageType.SwitchComplete, slice: s, handoffSeq, newParent: parent });
      st.oldParent = previous;
      st.oldParentUntilSeq = handoffSeq;
    }
    // What the new parent owes us: every packet past our live edge (older ones it may not hold:
    // after a failure it resends only the last hand-off lead), and none before the hand-off.
    st.adoptParent(parent, handoffSeq, Math.max(handoffSeq, this.host.liveEdgeSeq() + 1), this.host.now);
    this.host.touchPeer(parent);
    const switchKind: SwitchKind = kind === 'permission' ? 'latency' : kind;
    if (switchKind === 'load') this.host.counters.switchesLoad++;
    else if (switchKind === 'latency') {
      this.host.counters.switchesLatency++;
      st.latencySwitches++;
      st.latencyFrozenUntil =
        this.host.now +
        this.host.config.protocol.latencyBackoffMs *
          2 ** Math.min(MAX_LATENCY_BACKOFF_DOUBLINGS, st.latencySwitches - 1);
    } else {
      this.host.counters.switchesForced++;
      st.placedAt = this.host.now;
    }
    if (switchKind !== 'forced') this.host.counters.lastOptimisingSwitchAt = this.host.now;
    this.host.emit({ type: 'parentChanged', slice: s, parent, previous, switchKind });
    // Filters change only with data, and in a live stream a slice carries one packet per 2 s
    // segment: until the first packet on the new path, we and our subtree would advertise the old
    // path, and a neighbour that is now our ancestor could take one of us as its parent (a loop;
    // seen every few seconds in a 4-member swarm). So our filter takes in the new path as the new
    // parent advertises it (the old one too until then: more refusals, never a loop), and our
    // subtree takes it in from our adverts (onAdvert), a hop per heartbeat.
    const q = this.host.peers.get(parent);
    if (q?.hasAdvert === true) st.takeInPath(q.filter(s), this.host.maskOf(parent));
    // Meanwhile a loop we closed ourselves, reading stale filters, is silent: the old parent stops at
    // the hand-off, so no packet ever goes round it to expose it (thesis §4.2, loop avoidance and detection). A probe does, within
    // a few hops' latency, and comes back to us (not to another node of the loop, which would cut
    // off the slice below it): we then return to the old parent (leaveLoop).
    if (st.activeChildren > 0) this.host.sendProbe(s);
  }

  // ── the parent side: taking and releasing children ──

  onForcedParentRequest(from: PeerId, msg: ForcedParentRequestMessage): void {
    const s = msg.slice;
    const st = this.slice(s);
    // The root this slice was moved from: its subtree can only come back to the tree through us.
    const predecessor = st.isSliceSource && from === st.predecessor;
    if (!predecessor && !this.host.isNeighbour(from)) {
      this.reject(from, s, msg.fromSeq, RejectReason.NotNeighbour);
      return;
    }
    // Refused only above ML or on a loop (thesis §4.2, initial tree construction and forced parent selection), even while we wait for a parent ourselves:
    // during a flood that is what lets a tree grow faster than one request round trip per level.
    const existing = st.children.get(from);
    if (existing === undefined || existing.untilSeq !== Infinity) {
      // A child we are still handing off comes back when its new parent turned out to be in its own
      // subtree (leaveLoop): taking it back only restores our load of a moment ago, while a refusal
      // above ML (after `setLoad`) left its whole subtree without the slice for seconds.
      if (
        existing === undefined &&
        !predecessor &&
        this.host.effectiveLoad + 1 > this.host.config.maxLoad &&
        // Children silent for three heartbeats are probably dead (after a failure burst, for up to
        // the failure timeout): their streams go nowhere, and the orphans of a re-flooded tree need
        // the room now. The load phase sheds any excess should one turn out alive.
        this.host.effectiveLoad - this.host.silentChildren() + 1 > this.host.config.maxLoad
      ) {
        this.reject(from, s, msg.fromSeq, RejectReason.OverMaxLoad);
        return;
      }
      if (
        from === st.parent ||
        from === st.pending?.target ||
        bloomContains(st.filter, this.host.maskOf(from))
      ) {
        this.reject(from, s, msg.fromSeq, RejectReason.Loop);
        return;
      }
    }
    // "From the next one" starts with the newest packet we hold: a joiner gets data one packet
    // interval sooner.
    const fromSeq = msg.fromSeq === SEQ_NONE ? Math.max(0, st.highestSeq) : msg.fromSeq;
    if (predecessor) st.predecessor = null;
    const planned = msg.reason === ForcedReason.NeighbourChange || msg.reason === ForcedReason.ParentQuit;
    this.acceptChild(from, s, fromSeq, planned ? Infinity : this.host.config.protocol.handoffLeadMs);
  }

  onSwitchRequest(from: PeerId, msg: SwitchRequestMessage): void {
    const s = msg.slice;
    const st = this.slice(s);
    const existing = st.children.get(from);
    if (existing !== undefined && existing.untilSeq === Infinity) {
      // Already our child (a repeated request): just confirm.
      this.acceptChild(from, s, Math.min(existing.fromSeq, msg.handoffSeq));
      return;
    }
    if (!this.host.isNeighbour(from)) {
      this.reject(from, s, msg.handoffSeq, RejectReason.NotNeighbour);
      return;
    }
    if (!this.host.sliceReceiving(st)) {
      this.reject(from, s, msg.handoffSeq, RejectReason.NotReceiving);
      return;
    }
    // Nor one we are asking to be our own parent (as for forced requests): two nodes told by their
    // parents to move under each other in the same round each saw a loop-free target.
    if (
      from === st.parent ||
      from === st.pending?.target ||
      bloomContains(st.filter, this.host.maskOf(from))
    ) {
      this.reject(from, s, msg.handoffSeq, RejectReason.Loop);
      return;
    }
    if (this.host.effectiveLoad + 1 > this.host.config.maxLoad) {
      this.reject(from, s, msg.handoffSeq, RejectReason.OverMaxLoad);
      return;
    }
    if (msg.reason === SwitchReason.Load) {
      // A load switch must raise an underloaded node (thesis §4.2, fine-tuning load); re-checked here, where it is
      // current. "Underloaded" is below TL, not only below LLT as the thesis states it: with Lat2,
      // few nodes sit below LLT, and a parent above ULT whose children had no such neighbour stayed
      // overloaded for good (a large maximum excess at 5000 nodes). Below TL keeps the convergence
      // argument: each switch lowers a node above ULT and raises one below TL, never past TL.
      if (this.host.load >= this.host.config.targetLoad) {
        this.reject(from, s, msg.handoffSeq, RejectReason.NotUnderloaded);
        return;
      }
    } else {
      if (this.host.load + 1 > this.host.config.upperLatencyThreshold) {
        this.reject(from, s, msg.handoffSeq, RejectReason.OverUpperThreshold);
        return;
      }
      if (this.host.load > msg.targetLoadSeen + this.host.config.protocol.switchAbortLoadDelta) {
        this.reject(from, s, msg.handoffSeq, RejectReason.LoadChanged);
        return;
      }
    }
    const handoff = msg.handoffSeq === SEQ_NONE ? Math.max(0, st.highestSeq + 1) : msg.handoffSeq;
    this.acceptChild(from, s, handoff);
  }

  /**
   * `maxResendAgeMs` bounds what we resend from our ring: all of it for a planned hand-off (the new
   * child loses nothing), only the last hand-off lead after a failure (older packets are late for
   * playback anyway, and a burst of them would delay every live packet behind it on our uplink).
   */
  acceptChild(child: PeerId, s: number, fromSeq: number, maxResendAgeMs = Infinity): void {
    const st = this.slice(s);
    const existing = st.children.get(child);
    // A child that asks again for what it already gets (its acceptance crossed a retry) is resent
    // what we hold at most once per request timeout: a flooder asking 25 times a second had each
    // honest neighbour resend to it 25 times, and their uplinks overflowed (trust.ts).
    const resendAgain =
      existing === undefined ||
      existing.untilSeq !== Infinity ||
      this.host.now - existing.resentAt >= this.host.config.protocol.requestTimeoutMs;
    this.addChild(s, child, fromSeq);
    this.host.send(child, {
      type: MessageType.SwitchReply,
      slice: s,
      handoffSeq: fromSeq,
      accepted: true,
      rejectReason: RejectReason.None,
      load: this.host.load,
    });
    if (!resendAgain) return;
    const entry = st.children.get(child);
    if (entry !== undefined) entry.resentAt = this.host.now;
    this.host.resend(st, s, child, fromSeq, maxResendAgeMs);
  }

  reject(to: PeerId, s: number, handoffSeq: number, reason: RejectReason): void {
    this.host.send(to, {
      type: MessageType.SwitchReply,
      slice: s,
      handoffSeq,
      accepted: false,
      rejectReason: reason,
      load: Math.min(MAX_LOAD_FIELD, this.host.load),
    });
  }

  onSwitchComplete(from: PeerId, msg: SwitchCompleteMessage): void {
    if (!this.slice(msg.slice).drainChild(from, msg.handoffSeq, this.host.now)) return;
    this.host.addLoad(-1);
    // The draining entry stays until the next packet (forward) or requestTimeoutMs (expireStale),
    // even when the hand-off packet has passed: should the child find it closed a loop, it comes
    // back to us (leaveLoop) and we take it back (onForcedParentRequest).
  }

  private addChild(s: number, child: PeerId, fromSeq: number): void {
    if (!this.slice(s).addChild(child, fromSeq)) return;
    this.host.touchPeer(child);
    this.host.addLoad(1);
  }

  removeChild(s: number, child: PeerId): void {
    if (this.slice(s).removeChild(child)) this.host.addLoad(-1);
  }
}
