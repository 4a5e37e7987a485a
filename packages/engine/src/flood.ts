import {
  ForcedReason,
  MAX_HOPS,
  MessageType,
  TreeRole,
  bloomContains,
  bloomOr,
  type FloodMessage,
  type PeerId,
} from '@chunkycast/wire';
import type { PhaseHost } from './phase-host.js';
import type { SliceState } from './state.js';
import type { SwitchHost } from './switching.js';

/**
 * Ranks of flood senders (floodDecide): one at its ML only after every one below it, one above its
 * ULT after those within it, and otherwise in the order their floods came (a tiny weight per place).
 */
const FLOOD_FULL_PENALTY = 100;
const FLOOD_BUSY_PENALTY = 0.5;
const FLOOD_ARRIVAL_ORDER_WEIGHT = 1e-3;
/**
 * The hops a slice source's own flood carries; each forwarder adds one. A sender at this count is
 * the new root itself, which is below nobody: our view of its path (its last advert's filter) may
 * still be of the tree it belonged to before it was made root, where it may have been our
 * descendant. Judged by that, a member whose old subtree held the new root refused the root's own
 * flood and fell back on neighbours still advertising the dead tree (seconds without the slice).
 */
export const ROOT_FLOOD_HOPS = 1;
/** Flood senders remembered per slice, in arrival order. */
const MAX_FLOOD_SENDERS = 16;

/** What tree construction by flooding needs from its member engine, beyond what switching does. */
export interface FloodHost
  extends Pick<PhaseHost, 'sendForced'>, Omit<SwitchHost, 'isBelow' | 'relayedRank'> {
  /** Ask a neighbour to be our parent (switching.ts). */
  requestParent(s: number, reason: ForcedReason, exclude: readonly PeerId[]): void;
  /** A slice will decide on its flood at `atMs`: the engine's floodDecision deadline moves up if sooner. */
  floodDecisionAt(atMs: number): void;
}

/**
 * Initial tree construction and re-construction by controlled flooding (thesis §4.2, initial tree
 * construction and forced parent selection). A new slice source floods its neighbours; each member
 * forwards the first flood of each epoch once, collects who sent it for `floodCollectMs`, and then
 * asks one sender at the fewest hops (so every choice points towards the root) to be its parent.
 */
export class Flooding {
  constructor(private readonly host: FloodHost) {}

  private slice(s: number): SliceState {
    return this.host.slices[s] as SliceState;
  }

  onFlood(from: PeerId, msg: FloodMessage): void {
    const s = msg.slice;
    const st = this.slice(s);
    if (!this.host.isNeighbour(from)) return;
    if (msg.epoch > st.floodEpoch) {
      st.floodEpoch = msg.epoch;
      st.floodHeardAt = this.host.now;
      st.floodSenders = [];
      // Controlled flooding (Chainsaw-like, thesis §4.2, initial tree construction and forced parent selection): forward the first copy of each epoch once.
      const out: FloodMessage = {
        type: MessageType.Flood,
        slice: s,
        epoch: msg.epoch,
        bloom: bloomOr(msg.bloom, this.host.mask),
        hops: Math.min(MAX_HOPS, msg.hops + 1),
      };
      for (const n of this.host.neighbours()) if (n !== from) this.host.send(n, out);
      if (!st.isSliceSource && !this.fedByTree(s, st))
        st.floodDecideAt = this.host.now + this.host.config.protocol.floodCollectMs;
      this.host.floodDecisionAt(st.floodDecideAt);
    }
    if (
      msg.epoch === st.floodEpoch &&
      st.floodDecideAt !== Infinity &&
      st.floodSenders.length < MAX_FLOOD_SENDERS
    ) {
      if (!bloomContains(msg.bloom, this.host.mask))
        st.floodSenders.push({ peer: from, bloom: msg.bloom, hops: msg.hops });
    }
  }

  /** Pick a parent among the neighbours the flood came from (thesis §4.2, initial tree construction and forced parent selection). */
  decide(s: number): void {
    const st = this.slice(s);
    st.floodDecideAt = Infinity;
    if (st.isSliceSource || this.fedByTree(s, st)) return;
    if (st.pending !== null) {
      // A switch or request made before the flood reached us was made in the tree the flood
      // replaces (after a failure burst: often to a member that died with the root, held for the
      // request timeout while the new tree formed without us and our subtree). A reply that still
      // comes is undone as a late acceptance (switching.ts, onSwitchReply).
      if (st.pending.sentAt >= st.floodHeardAt) return;
      st.pending = null;
    }
    if (st.parent !== null) {
      // Our parent belongs to the dead tree the flood replaces.
      this.host.send(st.parent, { type: MessageType.TreeLeave, slice: s, role: TreeRole.Child });
      st.parent = null;
    }
    if (st.floodSenders.length === 0) {
      this.host.requestParent(s, ForcedReason.Join, []);
      return;
    }
    // Only senders one level closer to the slice source than we are (the fewest flood hops): then
    // every choice points strictly towards the root and the new tree cannot close a cycle even
    // before any data flows. Among them, room under ML by the latest adverts, and at random among
    // the best few so the slice source's neighbours are not all asked at once (thesis §4.2, fine-tuning latency).
    let minHops = Infinity;
    for (const sender of st.floodSenders) minHops = Math.min(minHops, sender.hops);
    let scored = st.floodSenders
      .map((sender, index) => {
        const q = this.host.peers.get(sender.peer);
        const full = q?.hasAdvert === true && q.load + 1 > q.maxLoad ? FLOOD_FULL_PENALTY : 0;
        const busy = q?.hasAdvert === true && q.load + 1 > q.upperLatencyThreshold ? FLOOD_BUSY_PENALTY : 0;
        return {
          index,
          peer: sender.peer,
          hops: sender.hops,
          score: full + busy + index * FLOOD_ARRIVAL_ORDER_WEIGHT,
        };
      })
      .filter((c) => c.hops === minHops && !this.senderBelow(c.peer, c.hops, s, st));
    // Senders over relayed links only when no direct one is at that level (relayedLinkPenaltyMs).
    if (scored.some((c) => this.relayedRank(c.peer) === 0))
      scored = scored.filter((c) => this.relayedRank(c.peer) === 0);
    if (scored.length === 0) {
      // Every sender at that level is in our own subtree: the tree above us is not there yet. Ask
      // the neighbours that qualify now (none, usually: acquireMissingParents asks again each round;
      // a root that handed its slice back keeps asking as a planned hand-off, see handBackRoot).
      st.floodLevel = minHops + 1;
      st.floodSenders = [];
      this.host.requestParent(
        s,
        st.lostReason === ForcedReason.ParentQuit ? ForcedReason.ParentQuit : ForcedReason.Join,
        [],
      );
      return;
    }
    scored.sort((a, b) => a.score - b.score);
    const best =
      scored[this.host.random.int(Math.min(this.host.config.protocol.candidateSetSize, scored.length))]
        ?.index ?? 0;
    st.floodLevel = minHops + 1;
    const [chosen] = st.floodSenders.splice(best, 1);
    if (chosen === undefined) return;
    // Until data flows, the chosen sender's flood path stands in for our received filter, so we
    // refuse as children the nodes upstream of us on it.
    st.filter = chosen.bloom;
    this.host.sendForced(s, chosen.peer, ForcedReason.Flood);
  }

  /**
   * Whether the tree still feeds us slice `s`: we receive it, and our parent says it does too. A
   * parent that has none (a root that handed the slice back and is looking for a place in the new
   * tree, itself below all of us) belongs to the dead tree a flood replaces, even while our last
   * packet is younger than the receiving timeout — 5 s in a live stream, longer than a re-flood
   * takes: its children kept it, it could not rejoin below them, and the slice stopped for good.
   */
  private fedByTree(s: number, st: SliceState): boolean {
    if (!this.host.sliceReceiving(st)) return false;
    // A new epoch's flood means the tree we had lost its root (or never had one): only data that
    // came after the flood reached us can be the new tree's. What came before is the dead tree's
    // last packets, still inside the receiving timeout when the true source replaces a root
    // quickly (rootFailureTimeoutMs); counting them left members in the dead tree when its flood
    // passed, to starve until their own timeouts.
    if (st.lastDataAt <= st.floodHeardAt) return false;
    if (st.isSliceSource || st.parent === null) return true;
    const parent = this.host.peers.get(st.parent);
    return parent?.hasAdvert !== true || parent.receiving(s);
  }

  /**
   * Whether `peer` is in our own subtree of slice `s` (our child, or its advertised filter holds our
   * mask). The flood passes through our subtree too — a root that handed its slice back keeps its
   * children, and so does a dead root's child — and asking a descendant to be our parent only earns
   * a Loop refusal and a reject back-off on a neighbour we may need later.
   */
  isBelow(peer: PeerId, s: number, st: SliceState): boolean {
    return st.children.has(peer) || this.host.peers.get(peer)?.filterContains(s, this.host.mask) === true;
  }

  /** Whether a flood sender `hops` from the new root is in our own subtree (never the root itself). */
  senderBelow(peer: PeerId, hops: number, s: number, st: SliceState): boolean {
    return hops !== ROOT_FLOOD_HOPS && this.isBelow(peer, s, st);
  }

  /** 1 if tree edges should avoid the link to `peer` (relayed), else 0. */
  relayedRank(peer: PeerId): number {
    const q = this.host.peers.get(peer);
    return q !== undefined && this.host.avoidLink(q) ? 1 : 0;
  }
}
