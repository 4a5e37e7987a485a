import { EMPTY_BLOOM, MessageType, type Message, type PeerId } from '@chunkycast/wire';
import type { ProtocolConfig } from './config.js';
import { TIMEOUT_PAST_MS } from './deadlines.js';
import { ParitySwitch, encodeParity } from './parity.js';
import { shuffleInPlace, type Random } from './random.js';
import type { Swaplinks } from './swaplinks.js';
import { ROOT_COMPLAINTS, ROOT_COMPLAINT_GRACE_MS, ROOT_COMPLAINT_WINDOW_MS, SUSPECT_MS } from './trust.js';
import type { EngineEvent } from './types.js';

/** A slice source that has not acknowledged its assignment within this time is replaced. */
const ASSIGN_CONFIRM_MS = 2000;
/** A sampled spare slice source older than this may have left; it is no longer used. */
const SPARE_SHELF_LIFE_MS = 30_000;
/**
 * Spares sampled ahead of need, so a failed slice source is replaced without waiting for a walk.
 * Not in the thesis (its true source samples on demand); two cover the common case of one failure
 * plus one spare that itself went stale.
 */
const SPARES_AHEAD = 2;
/**
 * A member that declined or handed back a root is not asked to root again for this long. Not in
 * the thesis (its loads never change); here loads do (setLoad: a re-measured uplink), so
 * a member that could not feed a tree then may well now, and a receive-only one asked again only
 * declines again (one message). As long as a spare's shelf life: walks find it again by then.
 */
const ROOT_DECLINE_HOLD_MS = 30_000;
/**
 * ...unless nobody else can root a slice: when a slice has waited this long for a spare (walks
 * find fresh ones meanwhile), the member that declined longest ago (at least this long ago) is asked
 * again rather than leaving the slice without a tree for the whole hold (in a four-viewer swarm
 * whose forwarders all handed back roots at a slow start, the slices they gave back otherwise
 * reached nobody for the whole hold). 5 s lets a re-measured uplink (or the hand-back's load phase)
 * settle first; a receive-only member asked again only declines again (one message per 5 s while no
 * other member can take the slice).
 */
const ROOT_RETRY_MS = 5_000;
/** The payload of a parity packet while parity is off: keeps the parity tree alive for a header. */
const EMPTY_PAYLOAD: Uint8Array = new Uint8Array(0);

/** What the true source's part needs from its engine: identity, randomness, the graph and the way out. */
export interface TrueSourceHost {
  readonly id: PeerId;
  readonly protocol: ProtocolConfig;
  /** Slices carrying the stream; the rest (at most one) carry parity. */
  readonly dataSlices: number;
  readonly random: Random;
  /** The engine's counters of roots replaced because their slice starved, and of roots spread. */
  readonly counters: { rootsReplacedForStarving: number; rootsSpread: number };
  now(): number;
  send(to: PeerId, message: Message): void;
  emit(event: EngineEvent): void;
  requestBootstrap(count: number): void;
  /** The true source has no Swaplinks links; it only samples members by random walks. */
  readonly swaplinks: Pick<Swaplinks, 'onSampleResult' | 'pendingSamples' | 'sample' | 'maintain'>;
}

interface Spare {
  readonly peer: PeerId;
  readonly at: number;
}

/**
 * The true source's role (thesis §4.2, slice sources): it deals each published packet to one slice
 * in turn, sends it once to that slice's source, keeps exactly M slice sources (one per slice,
 * replaced when they fail, decline, or starve their slice), and switches the parity slice on and off
 * by measured loss. Members never allocate one.
 */
export class TrueSource {
  private readonly sliceSources: (PeerId | null)[];
  private readonly sliceEpochs: number[];
  private readonly nextSeq: number[];
  private publishedPackets = 0;
  private readonly lastPublished: (Uint8Array | undefined)[] = [];
  private spares: Spare[] = [];
  private readonly lastHeardAt = new Map<PeerId, number>();
  private nextRootCheckAt = Infinity;
  private readonly sliceAssignedAt: number[] = [];
  /** When each slice last lost its root (for ROOT_RETRY_MS). */
  private readonly sliceUnrootedAt: number[] = [];
  /** Per slice, when its last root that fell silent was last heard (-Infinity: it did not fail). */
  private readonly sliceRootSilentSince: number[] = [];
  /** The latest of those over all slices. */
  private lastRootSilentSince = -Infinity;
  /** When a slice whose root failed was last given a new root, which floods a new tree. */
  private lastFloodAssignedAt = -Infinity;
  private lastBootstrapRequestAt = -Infinity;
  /** When spreadRoots last moved a root. */
  private lastSpreadAt = -Infinity;
  /**
   * Roots being moved (spreadRoots), by slice: the old root and the epoch it rooted in. Make before
   * break: the old root keeps the slice's packets until the new root confirms, then it is told to
   * become the new root's child, so its subtree hangs under the new root and nobody re-joins.
   */
  private readonly handovers = new Map<number, { readonly from: PeerId; readonly epoch: number }>();
  private readonly sliceConfirmed: boolean[] = [];
  /** Per slice, members that said it starves, and when (onStarvedSlice). */
  private readonly rootComplaints = new Map<number, Map<PeerId, number>>();
  /** Roots replaced because their slice starved, and when: not made roots again for SUSPECT_MS. */
  private readonly suspectRoots = new Map<PeerId, number>();
  /** Members that declined or handed back a root, and when: not asked again for ROOT_DECLINE_HOLD_MS. */
  private readonly declinedRoots = new Map<PeerId, number>();
  /** Whether parity is real (by measured loss) or empty. */
  private readonly paritySwitch: ParitySwitch;
  /** Parity packets sent with a real payload, and empty ones (parity off). */
  readonly parityCounters = { active: 0, idle: 0 };

  constructor(private readonly host: TrueSourceHost) {
    const p = host.protocol;
    this.sliceSources = new Array<PeerId | null>(p.slices).fill(null);
    this.sliceEpochs = new Array<number>(p.slices).fill(0);
    this.nextSeq = new Array<number>(p.slices).fill(0);
    this.paritySwitch = new ParitySwitch(p.parityOnLossFraction, p.parityOffLossFraction, p.parityOffHoldMs);
    if (p.parityOnLossFraction === 0) this.paritySwitch.active = true;
  }

  private get now(): number {
    return this.host.now();
  }

  /** The slice source of each slice (null while a slice has none). */
  currentSliceSources(): (PeerId | null)[] {
    return [...this.sliceSources];
  }

  /**
   * Adds the members the true source has a use for now: its slice sources, the spares it may make
   * ones, and old roots still feeding a slice being moved. Every other member it holds a link to
   * (a walk's first hop, a member that declined) it may let go (the host closes idle links).
   */
  addRelations(into: Set<PeerId>): void {
    for (const root of this.sliceSources) if (root !== null) into.add(root);
    for (const spare of this.spares) into.add(spare.peer);
    for (const handover of this.handovers.values()) into.add(handover.from);
  }

  /** Stream-wide number of the next packet `publish` deals. */
  get packetsPublished(): number {
    return this.publishedPackets;
  }

  /** Whether the parity slice carries real parity now. */
  get parityActive(): boolean {
    return this.paritySwitch.active && this.host.dataSlices < this.host.protocol.slices;
  }

  /** Sequence number the next published packet of `slice` will carry. */
  nextSequence(slice: number): number {
    return this.nextSeq[slice] ?? 0;
  }

  /** The host's measured loss among members: switches parity on or off (an event when it does). */
  measureLoss(fraction: number): void {
    if (this.host.protocol.paritySlices > 0 && this.paritySwitch.measure(this.now, fraction))
      this.host.emit({ type: 'parity', active: this.paritySwitch.active });
  }

  publish(payload: Uint8Array): void {
    const dataSlices = this.host.dataSlices;
    const s = this.publishedPackets % dataSlices;
    this.publishedPackets++;
    this.publishOn(s, payload);
    if (s === dataSlices - 1 && dataSlices < this.host.protocol.slices) {
      // The stripe is complete: its parity goes out on the last slice (empty while parity is off).
      let parity: Uint8Array = EMPTY_PAYLOAD;
      if (this.paritySwitch.active) {
        parity = encodeParity(this.lastPublished.slice(0, dataSlices).map((p) => p ?? EMPTY_PAYLOAD));
        this.parityCounters.active++;
      } else this.parityCounters.idle++;
      this.publishOn(dataSlices, parity);
    }
  }

  /**
   * The host numbers its packets (`publish` with `packet`): numbers it skipped are never dealt, and
   * every slice's next sequence is where round-robin dealing of packet `packet` puts it.
   */
  skipTo(packet: number): void {
    if (!Number.isSafeInteger(packet) || packet < this.publishedPackets)
      throw new Error(`publish: packet ${packet} is not a whole number ≥ ${this.publishedPackets}`);
    if (packet === this.publishedPackets) return;
    const dataSlices = this.host.dataSlices;
    const withParity = dataSlices < this.host.protocol.slices;
    // A parity stripe must hold the packets it protects: a skip may only start a new stripe.
    if (withParity && (packet % dataSlices !== 0 || this.publishedPackets % dataSlices !== 0))
      throw new Error(`publish: with parity on, packet ${packet} must start a stripe of ${dataSlices}`);
    this.publishedPackets = packet;
    const row = Math.floor(packet / dataSlices);
    for (let s = 0; s < dataSlices; s++) this.nextSeq[s] = row + (s < packet % dataSlices ? 1 : 0);
    if (withParity) this.nextSeq[dataSlices] = row;
  }

  private publishOn(s: number, payload: Uint8Array): void {
    const seq = this.nextSeq[s] ?? 0;
    this.nextSeq[s] = seq + 1;
    this.lastPublished[s] = payload;
    const target = this.sliceSources[s];
    if (target === null || target === undefined) return;
    // Each packet of each slice is sent exactly once, to that slice's source (thesis §4.2, overview),
    // and while a root is being moved also to the old one (handovers), until the new one confirms.
    const packet = { type: MessageType.Data, slice: s, seq, bloom: EMPTY_BLOOM, hops: 0, payload } as const;
    this.host.send(target, packet);
    const handover = this.handovers.get(s);
    if (handover !== undefined) this.host.send(handover.from, packet);
  }

  /** Every message a member sends the true source; it takes part in no tree (requests were rate-limited). */
  onMessage(from: PeerId, message: Message): void {
    if (message.type === MessageType.SampleResult) {
      this.host.swaplinks.onSampleResult(from, message.walkId);
      return;
    }
    if (message.type === MessageType.SliceSourceAssign && !message.assigned) {
      // A member declined to root a slice (receive-only) or handed one back (it cannot feed it):
      // not asked again for a while; reassign now.
      const s = message.slice;
      this.declinedRoots.set(from, this.now);
      this.spares = this.spares.filter((sp) => sp.peer !== from);
      if (this.sliceSources[s] === from && this.sliceEpochs[s] === message.epoch) {
        this.unroot(s);
        this.host.emit({ type: 'sliceSource', slice: s, epoch: message.epoch, assigned: false });
        this.assignSliceSources();
      }
      return;
    }
    if (message.type === MessageType.SliceSourceAssign && message.assigned) {
      // A new root accepts a move (it heard who its predecessor is): the old root may let go. Only
      // this answer counts, not any message: a heartbeat it sent before the assignment reached it
      // would have the old root ask to be the child of a member that is not a root yet.
      const s = message.slice;
      if (this.sliceSources[s] === from && this.sliceEpochs[s] === message.epoch)
        this.finishHandover(s, from);
    }
    if (message.type === MessageType.ForcedParentRequest && message.slice < this.sliceSources.length) {
      this.onStarvedSlice(from, message.slice);
      return;
    }
    if (this.lastHeardAt.has(from)) {
      this.lastHeardAt.set(from, this.now);
      for (let s = 0; s < this.sliceSources.length; s++)
        if (this.sliceSources[s] === from) this.sliceConfirmed[s] = true;
    }
  }

  /** A sampling walk found `peer`: a spare slice source. */
  onSampled(peer: PeerId): void {
    if (this.declinedRecently(peer)) return;
    this.spares.push({ peer, at: this.now });
    this.assignSliceSources();
  }

  /**
   * For a slice without a spare for ROOT_RETRY_MS: the member that declined or handed back a root
   * longest ago, if that was at least ROOT_RETRY_MS ago, as a spare (and no longer held back: later
   * bootstrap answers may give it more slices if it takes this one). Undefined if there is none.
   */
  private retryDecliner(): Spare | undefined {
    let oldest: PeerId | null = null;
    let oldestAt = Infinity;
    for (const [peer, at] of this.declinedRoots)
      if (this.now - at >= ROOT_RETRY_MS && at < oldestAt) {
        oldest = peer;
        oldestAt = at;
      }
    if (oldest === null) return undefined;
    this.declinedRoots.delete(oldest);
    return { peer: oldest, at: this.now };
  }

  /** Whether `peer` declined or handed back a root within ROOT_DECLINE_HOLD_MS, or was replaced for starving its slice. */
  private declinedRecently(peer: PeerId): boolean {
    const suspectAt = this.suspectRoots.get(peer);
    if (suspectAt !== undefined) {
      if (this.now - suspectAt < SUSPECT_MS) return true;
      this.suspectRoots.delete(peer);
    }
    const at = this.declinedRoots.get(peer);
    if (at === undefined) return false;
    if (this.now - at < ROOT_DECLINE_HOLD_MS) return true;
    this.declinedRoots.delete(peer);
    return false;
  }

  /**
   * A member says slice `s` starves (the member's reportStarvedSlices). Once ROOT_COMPLAINTS distinct
   * members said so within ROOT_COMPLAINT_WINDOW_MS, the root is replaced and not made a root again
   * for a while: it feeds nobody, whatever it tells us.
   */
  private onStarvedSlice(from: PeerId, s: number): void {
    const root = this.sliceSources[s] ?? null;
    if (root === null || from === root) return;
    if (this.now - (this.sliceAssignedAt[s] ?? -Infinity) < ROOT_COMPLAINT_GRACE_MS) return;
    let complaints = this.rootComplaints.get(s);
    if (complaints === undefined) this.rootComplaints.set(s, (complaints = new Map<PeerId, number>()));
    for (const [peer, at] of complaints)
      if (this.now - at > ROOT_COMPLAINT_WINDOW_MS) complaints.delete(peer);
    complaints.set(from, this.now);
    if (complaints.size < ROOT_COMPLAINTS) return;
    complaints.clear();
    this.host.counters.rootsReplacedForStarving++;
    this.suspectRoots.set(root, this.now);
    this.spares = this.spares.filter((sp) => sp.peer !== root);
    this.unroot(s);
    this.host.emit({ type: 'sliceSource', slice: s, epoch: this.sliceEpochs[s] ?? 0, assigned: false });
    this.assignSliceSources();
    this.sample();
  }

  /** `silentSince`: when a root that failed was last heard (checkRoots), else -Infinity. */
  private unroot(s: number, silentSince = -Infinity): void {
    this.sliceSources[s] = null;
    this.sliceUnrootedAt[s] = this.now;
    this.sliceRootSilentSince[s] = silentSince;
    this.lastRootSilentSince = Math.max(this.lastRootSilentSince, silentSince);
  }

  /** The true source keeps exactly M neighbours, each rooting one slice's tree (thesis §4.2, slice sources). */
  private assignSliceSources(): void {
    for (let s = 0; s < this.sliceSources.length; s++) {
      if (this.sliceSources[s] !== null) continue;
      // A move that did not complete (the new root declined, failed or never confirmed): the old
      // root, which still roots the slice as far as it knows, takes it back.
      const handover = this.handovers.get(s);
      if (handover !== undefined) {
        this.handovers.delete(s);
        this.assignRoot(s, handover.from);
        continue;
      }
      // A root that fell silent may have failed with others (a burst): a spare sampled before it
      // went silent may be gone too (a dead one costs every member of the slice ASSIGN_CONFIRM_MS
      // more), so a spare heard from since comes first. Without any spare (at 5000 members a 10%
      // burst took four roots and the spares ran out), a live root (heard within two heartbeats)
      // takes the slice for now, and spreadRoots moves it on to a spare later without a re-flood.
      // Not in the thesis (its true source takes a random node, sampled on demand). A live root
      // does not come before older spares: rooting two slices on an uplink sized for one load,
      // it queued both trees' packets (1000 members: p90 maximum latency 5.3 → 8.3 × the median
      // link latency when it came first).
      const silentSince = this.sliceRootSilentSince[s] ?? -Infinity;
      // Else, once the slice has waited ROOT_RETRY_MS for one, a decliner again.
      const waitedMs = this.now - (this.sliceUnrootedAt[s] ?? -Infinity);
      const peer =
        this.takeSpare(silentSince)?.peer ??
        this.takeSpare(-Infinity)?.peer ??
        (silentSince === -Infinity ? undefined : this.liveRoot()) ??
        (waitedMs >= ROOT_RETRY_MS ? this.retryDecliner()?.peer : undefined);
      if (peer === undefined) continue;
      this.assignRoot(s, peer);
    }
  }

  /**
   * The spare sampled after `sampledAfter` rooting the fewest slices now, the freshest of those
   * (rootSpreadIntervalMs: a slice that needs a root does not go back to a member that roots many
   * while another roots fewer).
   */
  private takeSpare(sampledAfter: number): Spare | undefined {
    const best = this.spareRootingFewest(this.rootCounts(), Infinity, (spare) => spare.at > sampledAfter);
    return best < 0 ? undefined : this.spares.splice(best, 1)[0];
  }

  /**
   * The confirmed root heard from within two heartbeats (so not failing now) rooting the fewest
   * slices, the most recently heard of those; undefined if there is none.
   */
  private liveRoot(): PeerId | undefined {
    const counts = new Map<PeerId, number>();
    for (let s = 0; s < this.sliceSources.length; s++) {
      const root = this.sliceSources[s];
      if (root === null || root === undefined || this.sliceConfirmed[s] !== true || this.handovers.has(s))
        continue;
      counts.set(root, (counts.get(root) ?? 0) + 1);
    }
    let best: PeerId | undefined;
    let bestCount = Infinity;
    let bestHeardAt = -Infinity;
    for (const [root, count] of counts) {
      const heardAt = this.lastHeardAt.get(root) ?? -Infinity;
      if (this.now - heardAt >= 2 * this.host.protocol.heartbeatMs || this.declinedRecently(root)) continue;
      if (count < bestCount || (count === bestCount && heardAt > bestHeardAt)) {
        best = root;
        bestCount = count;
        bestHeardAt = heardAt;
      }
    }
    return best;
  }

  /**
   * The index in `spares` of the one that roots the fewest slices by `counts`, fewer than `below`,
   * among those `usable` accepts; the freshest of equals. −1 if none qualifies.
   */
  private spareRootingFewest(
    counts: ReadonlyMap<PeerId, number>,
    below: number,
    usable: (spare: Spare) => boolean,
  ): number {
    let best = -1;
    let fewest = below;
    for (let i = this.spares.length - 1; i >= 0; i--) {
      const spare = this.spares[i] as Spare;
      const count = counts.get(spare.peer) ?? 0;
      // `usable` first, for every spare: it may forget expired refusals (declinedRecently).
      if (usable(spare) && count < fewest) {
        best = i;
        fewest = count;
      }
    }
    return best;
  }

  /**
   * Make `peer` the root of slice `s` (a new epoch): it floods the slice's new tree, or, told its
   * `predecessor` (a move), keeps the tree and takes the old root as a child.
   */
  private assignRoot(s: number, peer: PeerId, predecessor?: PeerId): void {
    const epoch = (this.sliceEpochs[s] ?? 0) + 1;
    this.sliceEpochs[s] = epoch;
    this.sliceSources[s] = peer;
    this.sliceAssignedAt[s] = this.now;
    this.sliceConfirmed[s] = false;
    if (!this.lastHeardAt.has(peer)) this.lastHeardAt.set(peer, this.now);
    this.nextRootCheckAt = Math.min(this.nextRootCheckAt, this.now + ASSIGN_CONFIRM_MS + TIMEOUT_PAST_MS);
    // A replacement for a root that failed (the first roots and hand-backs are not waited for).
    if (predecessor === undefined && (this.sliceRootSilentSince[s] ?? -Infinity) !== -Infinity)
      this.lastFloodAssignedAt = this.now;
    this.host.send(peer, {
      type: MessageType.SliceSourceAssign,
      slice: s,
      epoch,
      assigned: true,
      ...(predecessor === undefined ? {} : { peer: predecessor }),
    });
    // A new root gets the newest packet at once rather than at the next publish, so its re-flooded
    // tree has data to carry as soon as it stands (up to one packet interval sooner).
    const latest = this.lastPublished[s];
    const latestSeq = (this.nextSeq[s] ?? 0) - 1;
    if (latest !== undefined && latestSeq >= 0) {
      this.host.send(peer, {
        type: MessageType.Data,
        slice: s,
        seq: latestSeq,
        bloom: EMPTY_BLOOM,
        hops: 0,
        payload: latest,
      });
    }
    this.host.emit({ type: 'sliceSource', slice: s, epoch, assigned: true });
  }

  /** Slices rooted by each member that roots any. */
  private rootCounts(): Map<PeerId, number> {
    const counts = new Map<PeerId, number>();
    for (const root of this.sliceSources) if (root !== null) counts.set(root, (counts.get(root) ?? 0) + 1);
    return counts;
  }

  /**
   * rootSpreadIntervalMs: move one slice from the member rooting the most slices to the fresh
   * spare rooting the fewest, if that is at least two fewer (a move then narrows the spread). The
   * slice moved is the busiest root's most recently assigned one (its tree is the youngest). True
   * when a move is wanted but no spare qualifies (the caller then asks the rendezvous for members).
   */
  private spreadRoots(): boolean {
    const intervalMs = this.host.protocol.rootSpreadIntervalMs;
    if (intervalMs === 0 || this.handovers.size > 0 || this.sliceSources.includes(null)) return false;
    const counts = this.rootCounts();
    let busiest: PeerId | null = null;
    let most = 1;
    for (const [root, count] of counts)
      if (count > most || (count === most && busiest !== null && root < busiest)) {
        busiest = root;
        most = count;
      }
    if (busiest === null) return false; // every root roots one slice
    // A move must leave the spare with fewer than the busiest had, and go to a spare heard from
    // since the last root fell silent: one sampled before may have failed with it (a burst), and a
    // move to a dead spare costs the confirmation timeout and a re-flood by the old root.
    const best = this.spareRootingFewest(
      counts,
      most - 1,
      (spare) =>
        this.now - spare.at < SPARE_SHELF_LIFE_MS &&
        spare.at > this.lastRootSilentSince &&
        !this.declinedRecently(spare.peer),
    );
    if (best < 0) return true;
    if (this.now - this.lastSpreadAt < intervalMs) return false;
    // Nor while a replaced root's new tree is being flooded: a move hands a root a new parent while
    // the members below are still choosing theirs.
    if (this.now - this.lastFloodAssignedAt < 2 * intervalMs) return false;
    let slice = -1;
    for (let s = 0; s < this.sliceSources.length; s++)
      if (
        this.sliceSources[s] === busiest &&
        (slice < 0 || (this.sliceAssignedAt[s] ?? -Infinity) >= (this.sliceAssignedAt[slice] ?? -Infinity))
      )
        slice = s;
    const [spare] = this.spares.splice(best, 1);
    if (spare === undefined) return false;
    this.lastSpreadAt = this.now;
    this.host.counters.rootsSpread++;
    this.handovers.set(slice, { from: busiest, epoch: this.sliceEpochs[slice] ?? 0 });
    this.assignRoot(slice, spare.peer, busiest);
    return false;
  }

  /**
   * The new root of a slice being moved answered: the old root stops getting the slice from us and
   * is told to become the new root's child (keeping its own children), from its next packet on.
   */
  private finishHandover(s: number, newRoot: PeerId): void {
    const handover = this.handovers.get(s);
    if (handover === undefined) return;
    this.handovers.delete(s);
    this.host.send(handover.from, {
      type: MessageType.SliceSourceAssign,
      slice: s,
      epoch: handover.epoch,
      assigned: false,
      peer: newRoot,
    });
    this.host.emit({ type: 'sliceSource', slice: s, epoch: handover.epoch, assigned: false });
  }

  /**
   * The rendezvous server's random members root the first trees at once (a sampling walk would add
   * ~6 one-way latencies, ~2.5 s, to every viewer's startup); walks then keep load-proportional
   * spares for replacements.
   */
  onBootstrap(peers: readonly PeerId[]): void {
    const fresh = shuffleInPlace(
      peers.filter(
        (p) => p !== this.host.id && !this.declinedRecently(p) && !this.spares.some((sp) => sp.peer === p),
      ),
      this.host.random,
    );
    for (const peer of fresh) this.spares.push({ peer, at: this.now });
    this.assignSliceSources();
    this.sample();
  }

  private sample(): void {
    const now = this.now;
    const missing = this.sliceSources.filter((p) => p === null).length;
    // Keep fresh spares sampled ahead; a spare is refreshed at half its shelf life, before it goes stale.
    const fresh = this.spares.filter((sp) => now - sp.at < SPARE_SHELF_LIFE_MS / 2).length;
    const wanted = missing + SPARES_AHEAD - fresh - this.host.swaplinks.pendingSamples();
    if (
      missing > this.spares.length &&
      now - this.lastBootstrapRequestAt >= this.host.protocol.decisionIntervalMs
    ) {
      // More trees lost their roots than we hold spares (a large failure burst): ask the rendezvous
      // server, which knows who is connected now, instead of waiting for walks through a graph
      // that is itself half broken (after a large burst, walks found replacements tens of seconds late).
      this.lastBootstrapRequestAt = now;
      this.host.requestBootstrap(missing + SPARES_AHEAD);
    }
    for (let i = 0; i < wanted; i++) {
      if (this.host.swaplinks.sample(now) === undefined) {
        this.host.requestBootstrap(this.host.protocol.bootstrapPeers);
        return;
      }
    }
  }

  /**
   * The host lost its transport to a peer. If it rooted slices, what we sent it may be lost with the
   * connection (an assignment included): give its slices new roots now rather than after the
   * failure timeout.
   */
  peerUnreachable(peer: PeerId): void {
    this.spares = this.spares.filter((sp) => sp.peer !== peer);
    this.declinedRoots.delete(peer); // gone: never to be asked again
    this.lastHeardAt.delete(peer);
    for (const [s, handover] of this.handovers) if (handover.from === peer) this.handovers.delete(s);
    let lost = false;
    for (let s = 0; s < this.sliceSources.length; s++) {
      if (this.sliceSources[s] !== peer) continue;
      this.unroot(s);
      lost = true;
      this.host.emit({ type: 'sliceSource', slice: s, epoch: this.sliceEpochs[s] ?? 0, assigned: false });
    }
    if (!lost) return;
    this.assignSliceSources();
    this.sample();
  }

  /** When a slice source may next fall silent or unconfirmed (checkRoots); Infinity with none. */
  get rootCheckAt(): number {
    return this.nextRootCheckAt;
  }

  /**
   * Replace silent or unconfirmed slice sources, the moment one falls due (the engine's failureCheck
   * deadline is `rootCheckAt`) and in every round (which moves it ahead while the roots talk, as for
   * members' failureCheck); `rootCheckAt` moves to the next.
   */
  checkRoots(): void {
    const now = this.now;
    // Roots beat every rootHeartbeatMs and are given up sooner than other peers (config.ts).
    const timeoutMs = Math.min(this.host.protocol.rootFailureTimeoutMs, this.host.protocol.failureTimeoutMs);
    let nextMs = Infinity;
    let lost = false;
    for (let s = 0; s < this.sliceSources.length; s++) {
      const src = this.sliceSources[s];
      if (src === null || src === undefined) continue;
      const heardAt = this.lastHeardAt.get(src) ?? -Infinity;
      // A new slice source acknowledges at once; a spare that died since it was sampled (say, in
      // the same failure burst) is given up after ASSIGN_CONFIRM_MS instead of the full timeout.
      const confirmBy =
        this.sliceConfirmed[s] === true ? Infinity : (this.sliceAssignedAt[s] ?? now) + ASSIGN_CONFIRM_MS;
      if (now - heardAt > timeoutMs || now > confirmBy) {
        // Slice source failed: a new random node roots the tree and re-floods it (thesis §4.2, slice sources).
        this.unroot(s, Math.max(heardAt, this.sliceAssignedAt[s] ?? -Infinity));
        this.host.emit({ type: 'sliceSource', slice: s, epoch: this.sliceEpochs[s] ?? 0, assigned: false });
        lost = true;
        continue;
      }
      nextMs = Math.min(nextMs, heardAt + timeoutMs + TIMEOUT_PAST_MS, confirmBy + TIMEOUT_PAST_MS);
    }
    this.nextRootCheckAt = nextMs;
    if (!lost) return;
    this.assignSliceSources();
    this.sample();
  }

  /** The periodic round: replace silent or unconfirmed slice sources, heartbeat the others, sample spares. */
  tick(): void {
    const now = this.now;
    const p = this.host.protocol;
    this.host.swaplinks.maintain(now); // the source has no links: this only expires lost sampling walks
    // Spares go stale: a node sampled long ago may have left.
    this.spares = this.spares.filter((sp) => now - sp.at < SPARE_SHELF_LIFE_MS);
    this.checkRoots();
    const sources = new Set<PeerId>();
    for (const src of this.sliceSources) if (src !== null) sources.add(src);
    for (const src of this.lastHeardAt.keys()) if (!sources.has(src)) this.lastHeardAt.delete(src);
    this.assignSliceSources();
    const spreadNeedsSpare = this.spreadRoots();
    for (const src of sources) this.host.send(src, { type: MessageType.Heartbeat });
    if (spreadNeedsSpare && now - this.lastBootstrapRequestAt >= p.rootSpreadIntervalMs) {
      // No spare roots fewer than the busiest root: ask the rendezvous server, which knows who is
      // connected (in a swarm of a few, walks end at the busiest root as often as not).
      this.lastBootstrapRequestAt = now;
      this.host.requestBootstrap(p.bootstrapPeers);
    }
    this.sample();
  }
}
