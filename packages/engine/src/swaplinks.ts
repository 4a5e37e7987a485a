import {
  LinkDirection,
  LinkOp,
  MessageType,
  WalkPurpose,
  type LinkMessage,
  type Message,
  type PeerId,
  type SwapMessage,
  type WalkMessage,
} from '@chunkycast/wire';
import type { Random } from './random.js';

/**
 * Hops a repair walk may go on after its walkLength, looking for a member with a link to spare of
 * the kind it repairs (not in ref. [66]). Where an in-repair walk ends, that member gives one of its
 * own in-links to the walk's origin (the swap), which leaves it one short in turn unless it had one
 * too many: the deficit moved on like a token, a walk and a swap each step, and every swap cut a
 * link that might carry tree edges (at 1000 members joining, forced switches for lost neighbours
 * went on for minutes after the last join). So an in-repair walk ends at the first member with an
 * in-link to spare (those out-repair walks ended at, and those concurrent joins left with surplus),
 * and one that finds none ends with its last member linking to the origin itself (endWalk), one
 * out-link over its degree; an out-repair walk likewise ends at the first member with an out-link to
 * spare, which the in-link it brings lets shed the pair (shedSurplus).
 */
export const REPAIR_SEARCH_HOPS = 24;

/**
 * Swaplinks: the random graph under the trees (thesis §4.2, the Swaplinks graph; the algorithm itself is ref. [66],
 * summarised in shared/briefs/chunkyspread.md §5). Every node keeps multisets of out-links and
 * in-links with |out| = |in| = L, where L follows its capacity. Because in-degree equals out-degree
 * everywhere, a random walk's stationary distribution is proportional to L: walks sample nodes in
 * proportion to their capacity without any correction.
 */
export interface SwaplinksHost {
  readonly id: PeerId;
  readonly random: Random;
  send(to: PeerId, message: Message): void;
  /** A peer became a neighbour (its first link in either direction). */
  neighbourAdded(peer: PeerId): void;
  /** A peer stopped being a neighbour (its last link went away). */
  neighbourRemoved(peer: PeerId): void;
  /** A sampling walk we started ended at `peer`. */
  sampled(walkId: number, peer: PeerId): void;
  /** Ask the rendezvous server for peers to start walks from. */
  needBootstrap(): void;
}

interface PendingWalk {
  readonly purpose: WalkPurpose;
  readonly expiresAt: number;
  /** Links this walk still owes us. */
  awaitingOut: boolean;
  awaitingIn: boolean;
}

function addCount(map: Map<PeerId, number>, peer: PeerId, delta: number): void {
  const next = (map.get(peer) ?? 0) + delta;
  if (next > 0) map.set(peer, next);
  else map.delete(peer);
}

function total(map: Map<PeerId, number>): number {
  let sum = 0;
  for (const count of map.values()) sum += count;
  return sum;
}

/** A peer drawn with probability proportional to its link multiplicity, `exclude` left out. */
function weightedPick(map: Map<PeerId, number>, random: Random, exclude: PeerId): PeerId | undefined {
  let weight = 0;
  for (const [peer, count] of map) if (peer !== exclude) weight += count;
  if (weight === 0) return undefined;
  let pick = random.int(weight);
  for (const [peer, count] of map) {
    if (peer === exclude) continue;
    if (pick < count) return peer;
    pick -= count;
  }
  return undefined;
}

export class Swaplinks {
  /** Out-links: this node → peer, with multiplicity. */
  readonly out = new Map<PeerId, number>();
  /** In-links: peer → this node, with multiplicity. */
  readonly in = new Map<PeerId, number>();
  private readonly pending = new Map<number, PendingWalk>();
  private bootstrapPeers: PeerId[] = [];
  private lastBootstrapRequestAt = -Infinity;
  /** Counters for stats and tests. */
  readonly counters = {
    walksStarted: 0,
    walksForwarded: 0,
    walksEnded: 0,
    swaps: 0,
    walksExpired: 0,
    /** Repair walks that ended here because we had a link to spare of their kind (REPAIR_SEARCH_HOPS). */
    deficitsAbsorbed: 0,
  };

  constructor(
    private readonly host: SwaplinksHost,
    /** L: out-links wanted, and in-links wanted. */
    readonly linksPerDirection: number,
    private readonly walkLength: number,
    private readonly walkTimeoutMs: number,
  ) {}

  /** Sampling walks started and neither answered nor expired. */
  pendingSamples(): number {
    let count = 0;
    for (const walk of this.pending.values()) if (walk.purpose === WalkPurpose.Sample) count++;
    return count;
  }

  isNeighbour(peer: PeerId): boolean {
    return this.out.has(peer) || this.in.has(peer);
  }

  get outDegree(): number {
    return total(this.out);
  }

  get inDegree(): number {
    return total(this.in);
  }

  private neighbourCache: PeerId[] | null = null;

  /** Distinct neighbours (union of out- and in-link peers). Cached; do not mutate the result. */
  neighbours(): readonly PeerId[] {
    if (this.neighbourCache === null) {
      const result = [...this.out.keys()];
      for (const peer of this.in.keys()) if (!this.out.has(peer)) result.push(peer);
      this.neighbourCache = result;
    }
    return this.neighbourCache;
  }

  /** Simulator bootstrap: links already agreed by both ends (a pre-built graph). */
  install(out: readonly PeerId[], inbound: readonly PeerId[]): void {
    for (const peer of out) this.changeOut(peer, 1);
    for (const peer of inbound) this.changeIn(peer, 1);
    // A host-built graph (e.g. with extra nearest neighbours) is kept as given: never shed below it.
    this.keepOut = Math.max(this.linksPerDirection, this.outDegree);
    this.keepIn = Math.max(this.linksPerDirection, this.inDegree);
  }

  private keepOut = 0;
  private keepIn = 0;

  setBootstrap(peers: readonly PeerId[]): void {
    this.bootstrapPeers = peers.filter((p) => p !== this.host.id);
  }

  /**
   * Keep the degree: start walks for missing links (thesis §4.2, the Swaplinks graph). A join walk brings one out-
   * and one in-link; lone deficits (after a neighbour failed) get repair walks. Lost walks expire
   * and are retried.
   */
  maintain(now: number): void {
    for (const [walkId, walk] of this.pending) {
      if (walk.expiresAt <= now) {
        this.pending.delete(walkId);
        this.counters.walksExpired++;
      }
    }
    let owedOut = 0;
    let owedIn = 0;
    for (const walk of this.pending.values()) {
      if (walk.awaitingOut) owedOut++;
      if (walk.awaitingIn) owedIn++;
    }
    this.shedSurplus();
    let missingOut = this.linksPerDirection - this.outDegree - owedOut;
    let missingIn = this.linksPerDirection - this.inDegree - owedIn;
    if (missingOut <= 0 && missingIn <= 0) return;
    const hasLinks = this.out.size > 0 || this.in.size > 0;
    if (!hasLinks && this.bootstrapPeers.length === 0) {
      // Alone: ask the rendezvous server again, at most once per walk timeout.
      if (now - this.lastBootstrapRequestAt >= this.walkTimeoutMs) {
        this.lastBootstrapRequestAt = now;
        this.host.needBootstrap();
      }
      return;
    }
    while (missingOut > 0 && missingIn > 0) {
      this.startWalk(now, WalkPurpose.Join);
      missingOut--;
      missingIn--;
    }
    while (missingOut > 0) {
      this.startWalk(now, WalkPurpose.OutRepair);
      missingOut--;
    }
    while (missingIn > 0) {
      this.startWalk(now, WalkPurpose.InRepair);
      missingIn--;
    }
  }

  /**
   * Concurrent joins can leave a node with more than L links each way (a joining node links to
   * walkers it cannot swap for, and its own walks then land too). Splice the surplus out: for an
   * in-link A→us and an out-link us→B, A re-points its link to B. A and B keep their degrees; we
   * lose one link each way.
   */
  private shedSurplus(): void {
    const keepOut = Math.max(this.keepOut, this.linksPerDirection);
    const keepIn = Math.max(this.keepIn, this.linksPerDirection);
    for (let guard = 0; guard < 64 && this.outDegree > keepOut && this.inDegree > keepIn; guard++) {
      const b = weightedPick(this.out, this.host.random, this.host.id);
      if (b === undefined) return;
      const a = weightedPick(this.in, this.host.random, b);
      if (a === undefined) return;
      this.changeIn(a, -1);
      this.changeOut(b, -1);
      this.host.send(b, link(LinkOp.Remove, LinkDirection.Out, 0));
      this.host.send(a, { type: MessageType.Swap, walkId: 0, newTarget: b });
    }
  }

  /** Start a sampling walk; the end node answers with SampleResult. Returns false when there is nowhere to start. */
  sample(now: number): number | undefined {
    const first = this.firstHop(WalkPurpose.Sample);
    if (first === undefined) return undefined;
    const walkId = this.newWalkId();
    this.counters.walksStarted++;
    this.pending.set(walkId, {
      purpose: WalkPurpose.Sample,
      expiresAt: now + this.walkTimeoutMs,
      awaitingOut: false,
      awaitingIn: false,
    });
    this.host.send(first, {
      type: MessageType.Walk,
      walkId,
      origin: this.host.id,
      purpose: WalkPurpose.Sample,
      ttl: this.walkLength,
    });
    return walkId;
  }

  private newWalkId(): number {
    for (;;) {
      const id = this.host.random.nextU32();
      if (id !== 0 && !this.pending.has(id)) return id;
    }
  }

  /** Where a walk of ours begins: a bootstrap peer while we have no links, else a neighbour. */
  private firstHop(purpose: WalkPurpose): PeerId | undefined {
    const viaIn = purpose === WalkPurpose.Join || purpose === WalkPurpose.OutRepair;
    const fromLinks =
      weightedPick(viaIn ? this.in : this.out, this.host.random, this.host.id) ??
      weightedPick(viaIn ? this.out : this.in, this.host.random, this.host.id);
    if (fromLinks !== undefined) return fromLinks;
    if (this.bootstrapPeers.length === 0) return undefined;
    return this.bootstrapPeers[this.host.random.int(this.bootstrapPeers.length)];
  }

  private startWalk(now: number, purpose: WalkPurpose): void {
    const first = this.firstHop(purpose);
    if (first === undefined) return;
    const walkId = this.newWalkId();
    this.counters.walksStarted++;
    this.pending.set(walkId, {
      purpose,
      expiresAt: now + this.walkTimeoutMs,
      awaitingOut: purpose !== WalkPurpose.InRepair,
      awaitingIn: purpose !== WalkPurpose.OutRepair,
    });
    this.host.send(first, {
      type: MessageType.Walk,
      walkId,
      origin: this.host.id,
      purpose,
      ttl:
        this.walkLength +
        (purpose === WalkPurpose.InRepair || purpose === WalkPurpose.OutRepair ? REPAIR_SEARCH_HOPS : 0),
    });
  }

  /** More in-links than we keep: we can give one away without repairing our own degree after. */
  private hasInLinkToSpare(): boolean {
    return this.inDegree > Math.max(this.keepIn, this.linksPerDirection);
  }

  /**
   * More out-links than we keep (an in-repair walk that found no spare ended here): an out-repair
   * walk that ends here gives us the in-link to match, and shedSurplus then splices the pair out.
   */
  private hasOutLinkToSpare(): boolean {
    return this.outDegree > Math.max(this.keepOut, this.linksPerDirection);
  }

  /**
   * One step of someone's walk. Join and out-repair walks travel backwards over in-links; in-repair
   * and sampling walks travel over out-links; both sample in proportion to degree.
   */
  onWalk(walk: WalkMessage): void {
    if (walk.origin === this.host.id) return;
    // Past its walkLength hops, a repair walk ends at the first member with a link to spare of the
    // kind it repairs: an in-link for an in-repair walk, an out-link for an out-repair walk.
    const searching = walk.ttl <= REPAIR_SEARCH_HOPS + 1;
    if (
      searching &&
      ((walk.purpose === WalkPurpose.InRepair && this.hasInLinkToSpare()) ||
        (walk.purpose === WalkPurpose.OutRepair && this.hasOutLinkToSpare()))
    ) {
      this.counters.walksEnded++;
      this.counters.deficitsAbsorbed++;
      this.endWalk(walk);
      return;
    }
    if (walk.ttl > 1) {
      const viaIn = walk.purpose === WalkPurpose.Join || walk.purpose === WalkPurpose.OutRepair;
      // A node that is itself still joining may have no links in the walk's direction yet; walking
      // on over its other links beats ending every such walk here (which piled links onto joiners).
      const next =
        weightedPick(viaIn ? this.in : this.out, this.host.random, walk.origin) ??
        weightedPick(viaIn ? this.out : this.in, this.host.random, walk.origin);
      if (next !== undefined) {
        this.counters.walksForwarded++;
        this.host.send(next, { ...walk, ttl: walk.ttl - 1 });
        return;
      }
    }
    this.counters.walksEnded++;
    this.endWalk(walk);
  }

  private endWalk(walk: WalkMessage): void {
    const origin = walk.origin;
    switch (walk.purpose) {
      case WalkPurpose.Sample:
        this.host.send(origin, { type: MessageType.SampleResult, walkId: walk.walkId });
        return;
      case WalkPurpose.OutRepair:
        // The origin lost an out-link: it links to us (no swap). The Link goes out before our own
        // state changes, because the change sends our introduction advert, which must not overtake it.
        this.host.send(origin, link(LinkOp.Add, LinkDirection.In, walk.walkId));
        this.changeIn(origin, 1);
        return;
      case WalkPurpose.Join: {
        // We take the origin as an in-neighbour and give it one of ours in exchange (the swap), so
        // our degree is unchanged. With no in-neighbour to give we link to it ourselves, but only
        // while below our own degree; otherwise the walk goes unanswered and the origin retries
        // (linking anyway is what piled surplus links onto nodes that were still joining).
        const donor = weightedPick(this.in, this.host.random, origin);
        if (donor === undefined && this.outDegree >= this.linksPerDirection) return;
        this.host.send(origin, link(LinkOp.Add, LinkDirection.In, walk.walkId));
        this.changeIn(origin, 1);
        this.giveInLink(origin, walk.walkId, donor);
        return;
      }
      case WalkPurpose.InRepair:
        // A spare in-link of ours goes to the origin (the swap leaves us at our degree). Else no
        // member on the way could spare one (REPAIR_SEARCH_HOPS): we link to the origin
        // ourselves, one out-link over our degree, rather than give up an in-link we need. That
        // swap left us a link short, so the deficit went on as a token, a walk and a swap each
        // step, and every swap cut a link that may carry tree edges: after 1000 members joined,
        // 15-20 deficits kept walking to the end of the run and their forced switches kept the
        // trees from settling (issue 16). One out-link over L is what ref. [66]'s invariant
        // (|out| = |in| = L) gives up here; it is bounded (a member one over swaps as before), and
        // the next failure among its out-neighbours takes it back.
        if (!this.hasInLinkToSpare() && !this.hasOutLinkToSpare()) {
          this.host.send(origin, link(LinkOp.Add, LinkDirection.Out, walk.walkId));
          this.changeOut(origin, 1);
          return;
        }
        this.giveInLink(origin, walk.walkId, weightedPick(this.in, this.host.random, origin));
        return;
    }
  }

  /** The swap step: one of our in-neighbours re-points its link at `origin`, or we link to it ourselves. */
  private giveInLink(origin: PeerId, walkId: number, donor: PeerId | undefined): void {
    if (donor !== undefined && donor !== this.host.id) {
      this.changeIn(donor, -1);
      this.counters.swaps++;
      const swap: SwapMessage = { type: MessageType.Swap, walkId, newTarget: origin };
      this.host.send(donor, swap);
      return;
    }
    // No in-neighbour to give: link to the origin ourselves, but only while we are below our own
    // degree; otherwise the origin's walk goes unanswered and is retried (no permanent surplus).
    if (this.outDegree >= this.linksPerDirection && this.linksPerDirection > 0) return;
    this.host.send(origin, link(LinkOp.Add, LinkDirection.Out, walkId));
    this.changeOut(origin, 1);
  }

  /** Our out-link to `from` moves to `newTarget`. */
  onSwap(from: PeerId, swap: SwapMessage): void {
    if (swap.newTarget === this.host.id || (this.out.get(from) ?? 0) === 0) return;
    this.changeOut(from, -1);
    this.host.send(swap.newTarget, link(LinkOp.Add, LinkDirection.Out, swap.walkId));
    this.changeOut(swap.newTarget, 1);
  }

  onLink(from: PeerId, message: LinkMessage): void {
    const delta = message.op === LinkOp.Add ? 1 : -1;
    if (message.direction === LinkDirection.Out) {
      // The sender's out-link to us: an in-link here.
      if (delta < 0 && !this.in.has(from)) return;
      this.changeIn(from, delta);
      if (delta > 0) this.settle(message.walkId, 'in');
    } else {
      if (delta < 0 && !this.out.has(from)) return;
      this.changeOut(from, delta);
      if (delta > 0) this.settle(message.walkId, 'out');
    }
  }

  onSampleResult(from: PeerId, walkId: number): void {
    const walk = this.pending.get(walkId);
    if (walk?.purpose !== WalkPurpose.Sample) return;
    this.pending.delete(walkId);
    this.host.sampled(walkId, from);
  }

  private settle(walkId: number, direction: 'out' | 'in'): void {
    const walk = this.pending.get(walkId);
    if (walk === undefined) return;
    if (direction === 'out') walk.awaitingOut = false;
    else walk.awaitingIn = false;
    if (!walk.awaitingOut && !walk.awaitingIn) this.pending.delete(walkId);
  }

  /** A peer failed or left: drop every link with it. `maintain` repairs the degree on the next tick. */
  dropPeer(peer: PeerId): void {
    const had = this.isNeighbour(peer);
    this.out.delete(peer);
    this.in.delete(peer);
    if (had) this.neighbourCache = null;
    if (had) this.host.neighbourRemoved(peer);
  }

  private changeOut(peer: PeerId, delta: number): void {
    const before = this.isNeighbour(peer);
    addCount(this.out, peer, delta);
    this.notify(peer, before);
  }

  private changeIn(peer: PeerId, delta: number): void {
    const before = this.isNeighbour(peer);
    addCount(this.in, peer, delta);
    this.notify(peer, before);
  }

  private notify(peer: PeerId, before: boolean): void {
    const after = this.isNeighbour(peer);
    if (before !== after) this.neighbourCache = null;
    if (!before && after) this.host.neighbourAdded(peer);
    else if (before && !after) this.host.neighbourRemoved(peer);
  }
}

function link(op: LinkOp, direction: LinkDirection, walkId: number): LinkMessage {
  return { type: MessageType.Link, op, direction, walkId };
}
