import {
  EMPTY_BLOOM,
  SEQ_NONE,
  bitCount32,
  bloomOr,
  type Bloom128,
  type ForcedReason,
  type PeerId,
} from '@chunkycast/wire';
import type { SwitchKind } from './types.js';

/**
 * Blocks measured since a slice's parent changed before its moving-average offset is trusted
 * (1 − 0.2)^8 ≈ 17% of the old path's weight remains; fewer made latency switches chase their own
 * transients.
 */
const OFFSET_SETTLE_BLOCKS = 8;

/**
 * The packet interval a hand-off assumes before the slice's own is measured (one packet a second):
 * a lead counted in packets at this interval errs long, which only hands off later, where one
 * that errs short could hand off before the new parent sends anything.
 */
const UNMEASURED_SEQ_INTERVAL_MS = 1000;

/** The fields of one slot of SliceState's packet ring, in order. */
const RING_SEQ = 0;
const RING_ARRIVED_AT = 1;
const RING_SENDER = 2;
const RING_FROM_PARENT = 3;
const RING_FIELDS = 4;

/** What `children` is while a slice has never had a child (nothing ever writes through it). */
const NO_CHILDREN: ReadonlyMap<PeerId, ChildEntry> = new Map();

/** Bits of PeerState.sliceFlags, from the peer's advert. */
export const SLICE_FLAG_RECEIVING = 1;
export const SLICE_FLAG_ROOT = 2;

/** What we know of one peer: liveness, and the latest advertisement if it is a neighbour. */
export class PeerState {
  lastHeardAt: number;
  hasAdvert = false;
  load = 0;
  targetLoad = 0;
  lowerLatencyThreshold = 0;
  upperLatencyThreshold = 0;
  maxLoad = 0;
  /** Per slice: SLICE_FLAG_RECEIVING | SLICE_FLAG_ROOT. */
  readonly sliceFlags: Uint8Array;
  readonly sliceHops: Uint8Array;
  /** Per slice relative arrival offset (ms), NaN when unknown. */
  readonly sliceOffsets: Float32Array;
  /** Per slice path estimate from the slice's root (ms, AdvertSliceEntry.pathMs), NaN when unknown. */
  readonly slicePaths: Float32Array;
  /** Per slice 128-bit received filter, 4 words each. */
  readonly sliceFilters: Uint32Array;
  /** The host's transport to this peer goes through a relay (`linkRoute`); false until told. */
  relayed = false;
  /** Smoothed round-trip time, NaN until measured. */
  rttMs = Number.NaN;
  /** The peer's last `sentAtMs`, echoed back in our next advert. */
  echoSentAtMs: number | null = null;
  echoReceivedAt = 0;
  needsFullAdvert = true;
  lastFullAdvertAt = -Infinity;
  violations = 0;
  quitting = false;
  /** Our out-going heartbeat to a non-neighbour tree peer was last sent at. */
  lastHeartbeatSentAt = -Infinity;

  constructor(now: number, slices: number) {
    this.lastHeardAt = now;
    // Five views of one buffer: a member keeps one of these per neighbour (dozens), and each
    // typed array of its own is an ArrayBuffer and a backing store more for the collector and the
    // caches (the simulator holds thousands of members).
    const offsetsAt = Math.ceil((2 * slices) / 4) * 4;
    const pathsAt = offsetsAt + 4 * slices;
    const filtersAt = pathsAt + 4 * slices;
    const buffer = new ArrayBuffer(filtersAt + 16 * slices);
    this.sliceFlags = new Uint8Array(buffer, 0, slices);
    this.sliceHops = new Uint8Array(buffer, slices, slices);
    this.sliceOffsets = new Float32Array(buffer, offsetsAt, slices).fill(Number.NaN);
    this.slicePaths = new Float32Array(buffer, pathsAt, slices).fill(Number.NaN);
    this.sliceFilters = new Uint32Array(buffer, filtersAt, slices * 4);
  }

  /** Whether nothing came from this peer for more than `ms` before `now`. */
  silentLongerThan(now: number, ms: number): boolean {
    return now - this.lastHeardAt > ms;
  }

  receiving(slice: number): boolean {
    return ((this.sliceFlags[slice] ?? 0) & SLICE_FLAG_RECEIVING) !== 0;
  }

  /** True when every bit of `mask` is in the filter this peer advertised for `slice`. */
  filterContains(slice: number, mask: Bloom128): boolean {
    const f = this.sliceFilters;
    const o = slice * 4;
    return (
      ((f[o] ?? 0) & mask[0]) >>> 0 === mask[0] &&
      ((f[o + 1] ?? 0) & mask[1]) >>> 0 === mask[1] &&
      ((f[o + 2] ?? 0) & mask[2]) >>> 0 === mask[2] &&
      ((f[o + 3] ?? 0) & mask[3]) >>> 0 === mask[3]
    );
  }

  /** Bits this peer's advertised filter for `slice` shares with `filter` (common ancestry). */
  sharedFilterBits(slice: number, filter: Bloom128): number {
    const f = this.sliceFilters;
    const o = slice * 4;
    return (
      bitCount32((f[o] ?? 0) & filter[0]) +
      bitCount32((f[o + 1] ?? 0) & filter[1]) +
      bitCount32((f[o + 2] ?? 0) & filter[2]) +
      bitCount32((f[o + 3] ?? 0) & filter[3])
    );
  }

  /** The filter this peer advertised for `slice`. */
  filter(slice: number): Bloom128 {
    const f = this.sliceFilters;
    const o = slice * 4;
    return [f[o] ?? 0, f[o + 1] ?? 0, f[o + 2] ?? 0, f[o + 3] ?? 0];
  }

  setFilter(slice: number, filter: Bloom128): void {
    const o = slice * 4;
    this.sliceFilters[o] = filter[0];
    this.sliceFilters[o + 1] = filter[1];
    this.sliceFilters[o + 2] = filter[2];
    this.sliceFilters[o + 3] = filter[3];
  }

  resetSlices(): void {
    this.sliceFlags.fill(0);
    this.sliceHops.fill(0);
    this.sliceOffsets.fill(Number.NaN);
    this.slicePaths.fill(Number.NaN);
    this.sliceFilters.fill(0);
  }
}

/** A child on one slice: forward packets with fromSeq ≤ seq < untilSeq. */
export interface ChildEntry {
  fromSeq: number;
  /** Infinity while active; the hand-off sequence number once the child has moved on (draining). */
  untilSeq: number;
  drainingSince: number;
  /** When we last resent it what we hold (acceptChild). */
  resentAt: number;
}

export type PendingKind = SwitchKind | 'permission';

/** A parent change in flight for one slice. */
export interface PendingSwitch {
  readonly kind: PendingKind;
  readonly target: PeerId;
  readonly handoffSeq: number;
  readonly sentAt: number;
  readonly forcedReason: ForcedReason | null;
}

export interface FloodSender {
  readonly peer: PeerId;
  readonly bloom: Bloom128;
  readonly hops: number;
}

/** What this node advertised for a slice last time, to send only changes. */
export interface AdvertisedSlice {
  receiving: boolean;
  isSliceSource: boolean;
  hops: number;
  offsetMs: number | null;
  pathMs: number | null;
  filter: Bloom128;
}

export class SliceState {
  parent: PeerId | null = null;
  /** Packets from the parent are taken from this sequence number on. */
  parentFromSeq = 0;
  parentSince = -Infinity;
  /** During a hand-off, the previous parent still supplies seq < oldParentUntilSeq. */
  oldParent: PeerId | null = null;
  oldParentUntilSeq = 0;
  /** Made on the first child: most members are leaves in most slices' trees. */
  private childEntries: Map<PeerId, ChildEntry> | null = null;
  private activeChildCount = 0;
  /** Filter of the packets we receive (ancestors' masks), advertised to neighbours. */
  filter: Bloom128 = EMPTY_BLOOM;
  hops = 0;
  lastDataAt = -Infinity;
  highestSeq = -1;
  lastHighestAt = -Infinity;
  /** When highestSeq last rose, the first packet included (for the sequence window). */
  highestSeqAt = -Infinity;
  /** Smoothed packet interval on this slice, for hand-off sequence numbers. */
  seqIntervalMs = Number.NaN;
  /**
   * Ring of recent packets: dedupe and resend to a new child. Slot = seq mod size. One Float64Array
   * of RING_FIELDS numbers per slot (a slot's fields share a cache line, and a slice keeps one
   * buffer, not four: the simulator holds 16 slices of thousands of members):
   * - the sequence number, −1 empty (Float64: a u32 would wrap in an Int32Array, 2³²−1 became −1);
   * - when it arrived;
   * - the peer whose tree packet filled it, −1 when it came by repair, origin or parity;
   * - 1 when our current parent delivered it (its copy may have come second), else 0.
   */
  private readonly ring: Float64Array;
  private readonly ringPayload: (Uint8Array | undefined)[];
  /**
   * The audit of the current parent (trust.ts): the parent being audited, the next sequence to
   * judge, and the packets judged and missed in the current window.
   */
  auditParent: PeerId | null = null;
  auditNextSeq = 0;
  auditCount = 0;
  auditMisses = 0;
  /** When we last told the true source this slice starves (trust.ts). */
  lastStarvedNoticeAt = -Infinity;
  /** The last judgements, newest in bit 0 (1 = missed). */
  auditHistory = 0;
  /** The tree sender of the packet that set highestSeq, −1 when none did (repair, origin). */
  highestSeqFrom = -1;
  /** Smoothed arrival offset relative to the other slices (offsets.ts), NaN until measured. */
  offsetMs = Number.NaN;
  /** Latency switches of this slice so far, and until when the next one must wait. */
  latencySwitches = 0;
  latencyFrozenUntil = -Infinity;
  /** When a forced choice (join, flood, lost parent) last placed us in this slice's tree (latencyWindowMs). */
  placedAt = -Infinity;
  /** Blocks folded into offsetMs since the parent last changed. */
  private offsetBlocks = 0;
  pending: PendingSwitch | null = null;
  isSliceSource = false;
  /**
   * While we root the slice: the first sequence the true source sent us as its root (Infinity until
   * it comes). Older packets went down the tree before we rooted it, so its members may hold them.
   */
  rootFromSeq = Infinity;
  /**
   * The root we took a moved slice over from (SliceSourceAssign's peer): it may ask to be our child
   * though not a neighbour, and above our ML (its subtree has no other way in). Null once it did.
   */
  predecessor: PeerId | null = null;
  epoch = 0;
  floodEpoch = 0;
  /** When the flood of `floodEpoch` first reached us (flood.ts, fedByTree). */
  floodHeardAt = -Infinity;
  floodSenders: FloodSender[] = [];
  floodDecideAt = Infinity;
  /** Our level in the flood (fewest hops heard + 1); fallback parents must be above it. */
  floodLevel = Infinity;
  /** Peers that refused us on this slice, and until when we leave them alone (made on first use). */
  private rejections: Map<PeerId, number> | null = null;
  lastProbeSentAt = -Infinity;
  lastProbeSeen = -1;
  lastStrayNoticeAt = -Infinity;
  /** Why we are looking for a parent, when we are. */
  lostReason: ForcedReason | null = null;
  everHadParent = false;
  advertised: AdvertisedSlice | null = null;

  /**
   * @param payloadMaxAgeMs ProtocolConfig.ringPayloadMaxAgeMs: a packet's bytes are let go this long
   *   after it arrived (0: kept as long as the slot).
   */
  constructor(
    ringSize: number,
    private readonly payloadMaxAgeMs = 0,
  ) {
    this.ring = new Float64Array(ringSize * RING_FIELDS);
    this.clearRing();
    this.ringPayload = new Array<Uint8Array | undefined>(ringSize).fill(undefined);
  }

  private clearRing(): void {
    const ring = this.ring;
    for (let o = 0; o < ring.length; o += RING_FIELDS) {
      ring[o + RING_SEQ] = -1;
      ring[o + RING_ARRIVED_AT] = -Infinity;
      ring[o + RING_SENDER] = -1;
      ring[o + RING_FROM_PARENT] = 0;
    }
  }

  /** Our children on this slice: active ones (untilSeq Infinity) and ones draining after a hand-off. */
  get children(): ReadonlyMap<PeerId, ChildEntry> {
    return this.childEntries ?? NO_CHILDREN;
  }

  /** Until when `peer` is left alone after refusing us on this slice (−Infinity: not refused). */
  rejectedUntil(peer: PeerId): number {
    return this.rejections?.get(peer) ?? -Infinity;
  }

  /** `peer` refused us: leave it alone on this slice until `untilMs`. */
  rejectUntil(peer: PeerId, untilMs: number): void {
    (this.rejections ??= new Map<PeerId, number>()).set(peer, untilMs);
  }

  /** Forget refusals that ran out by `now`. */
  expireRejections(now: number): void {
    const rejections = this.rejections;
    if (rejections === null) return;
    for (const [peer, until] of rejections) if (until <= now) rejections.delete(peer);
    if (rejections.size === 0) this.rejections = null;
  }

  /** Children we forward to without end (not draining): each counts one in our load. */
  get activeChildren(): number {
    return this.activeChildCount;
  }

  /**
   * Take `child` from `fromSeq` on. An active child keeps its entry (from the earlier of the two
   * sequences); a draining one is replaced. True when the child became active (our load grows).
   */
  addChild(child: PeerId, fromSeq: number): boolean {
    const entries = (this.childEntries ??= new Map<PeerId, ChildEntry>());
    const existing = entries.get(child);
    if (existing !== undefined && existing.untilSeq === Infinity) {
      existing.fromSeq = Math.min(existing.fromSeq, fromSeq);
      return false;
    }
    entries.set(child, {
      fromSeq,
      untilSeq: Infinity,
      drainingSince: Infinity,
      resentAt: -Infinity,
    });
    this.activeChildCount++;
    return true;
  }

  /** An active child moved on at `untilSeq`: forward up to it, then drop it. True if it was active. */
  drainChild(child: PeerId, untilSeq: number, now: number): boolean {
    const entry = this.childEntries?.get(child);
    if (entry?.untilSeq !== Infinity) return false;
    entry.untilSeq = untilSeq;
    entry.drainingSince = now;
    this.activeChildCount--;
    return true;
  }

  /** Drop `child` whatever its state. True if it was active (our load shrinks). */
  removeChild(child: PeerId): boolean {
    const entries = this.childEntries;
    const entry = entries?.get(child);
    if (entries === null || entry === undefined) return false;
    entries.delete(child);
    if (entry.untilSeq !== Infinity) return false;
    this.activeChildCount--;
    return true;
  }

  /**
   * The true source made us this slice's root for `epoch`: our parent is the true source from its
   * first packet on, unaudited (it is trusted), and our path is empty (we are the top of the tree).
   */
  becomeRoot(trueSource: PeerId, epoch: number, now: number): void {
    this.pending = null;
    this.isSliceSource = true;
    this.rootFromSeq = Infinity;
    this.predecessor = null;
    this.parent = trueSource;
    this.parentFromSeq = 0;
    this.parentSince = now;
    this.startAudit(null, 0);
    this.oldParent = null;
    this.filter = EMPTY_BLOOM;
    this.hops = 0;
    this.floodDecideAt = Infinity;
    this.everHadParent = true;
    this.floodEpoch = epoch;
  }

  /** We no longer root this slice (handed back or unassigned) and have no parent for it yet. */
  stopRooting(): void {
    this.isSliceSource = false;
    this.rootFromSeq = Infinity;
    this.predecessor = null;
    this.parent = null;
  }

  /**
   * `parent` feeds us from `handoffSeq` on; the audit judges it from `auditFromSeq` on. The old
   * parent's hand-off (oldParent) is the caller's: it tells the old parent where to stop.
   */
  adoptParent(parent: PeerId, handoffSeq: number, auditFromSeq: number, now: number): void {
    this.parent = parent;
    this.parentFromSeq = handoffSeq;
    this.parentSince = now;
    this.startAudit(parent, auditFromSeq);
    this.resetOffset();
    this.lostReason = null;
    this.everHadParent = true;
    this.floodSenders = [];
  }

  /** Fold one block's offset into the moving average with weight `alpha`. */
  foldOffset(offsetMs: number, alpha: number): void {
    this.offsetMs = Number.isNaN(this.offsetMs)
      ? offsetMs
      : this.offsetMs + alpha * (offsetMs - this.offsetMs);
    this.offsetBlocks++;
  }

  /** Whether offsetMs measures the current parent's path (OFFSET_SETTLE_BLOCKS since it changed). */
  offsetSettled(): boolean {
    return this.offsetBlocks >= OFFSET_SETTLE_BLOCKS && !Number.isNaN(this.offsetMs);
  }

  /** A new parent: the offset keeps its value but must settle again before it is trusted. */
  resetOffset(): void {
    this.offsetBlocks = 0;
  }

  /** The first sequence we still want on this slice: the next after the newest we hold (SEQ_NONE before any). */
  nextSeqWanted(): number {
    return this.highestSeq >= 0 ? this.highestSeq + 1 : SEQ_NONE;
  }

  /**
   * Where a planned parent change hands over: `leadMs` of stream past the newest packet we hold,
   * at this slice's measured packet interval (SEQ_NONE before any packet).
   */
  handoffSeq(leadMs: number): number {
    if (this.highestSeq < 0) return SEQ_NONE;
    const interval =
      Number.isNaN(this.seqIntervalMs) || this.seqIntervalMs <= 0
        ? UNMEASURED_SEQ_INTERVAL_MS
        : this.seqIntervalMs;
    const lead = Math.max(1, Math.ceil(leadMs / interval));
    return Math.min(SEQ_NONE - 1, this.highestSeq + lead);
  }

  /** Our filter takes in our parent's path (`parentFilter`) and the parent itself (`parentMask`). */
  takeInPath(parentFilter: Bloom128, parentMask: Bloom128): void {
    this.filter = bloomOr(this.filter, bloomOr(parentFilter, parentMask));
  }

  get ringSize(): number {
    return this.ringPayload.length;
  }

  /** The ring offset of `seq`'s slot if the ring holds `seq`, else −1. */
  private heldAt(seq: number): number {
    const o = (seq % this.ringPayload.length) * RING_FIELDS;
    return this.ring[o + RING_SEQ] === seq ? o : -1;
  }

  /** Record a packet; false if it is a duplicate or older than the ring remembers. */
  remember(seq: number, payload: Uint8Array, now: number): boolean {
    const size = this.ringPayload.length;
    if (this.highestSeq >= 0 && seq <= this.highestSeq - size) return false;
    const slot = seq % size;
    const o = slot * RING_FIELDS;
    const ring = this.ring;
    if (ring[o + RING_SEQ] === seq) return false;
    ring[o + RING_SEQ] = seq;
    ring[o + RING_ARRIVED_AT] = now;
    ring[o + RING_SENDER] = -1;
    ring[o + RING_FROM_PARENT] = 0;
    this.ringPayload[slot] = payload;
    if (this.payloadMaxAgeMs > 0) this.dropOldPayloads(now - this.payloadMaxAgeMs);
    return true;
  }

  /**
   * Lets go of the bytes of packets that arrived before `before` (ringPayloadMaxAgeMs): their slots
   * still dedupe them, but they are no longer resent or served. A scan of the ring per packet
   * remembered, only on hosts that set an age (a browser's ring is a few dozen slots).
   */
  private dropOldPayloads(before: number): void {
    const ring = this.ring;
    const payloads = this.ringPayload;
    for (let slot = 0; slot < payloads.length; slot++)
      if (payloads[slot] !== undefined && (ring[slot * RING_FIELDS + RING_ARRIVED_AT] ?? -Infinity) < before)
        payloads[slot] = undefined;
  }

  /** A tree packet we hold came from `from`; `fromParent` when that is our current parent. */
  markTreeCopy(seq: number, from: PeerId, fromParent: boolean, first: boolean): void {
    const o = this.heldAt(seq);
    if (o < 0) return;
    if (first) this.ring[o + RING_SENDER] = from;
    if (fromParent) this.ring[o + RING_FROM_PARENT] = 1;
  }

  /** The peer whose tree copy of `seq` came first, −1 if none did or it is no longer held. */
  senderOf(seq: number): number {
    const o = this.heldAt(seq);
    return o < 0 ? -1 : (this.ring[o + RING_SENDER] ?? -1);
  }

  /** Whether our current parent delivered `seq` (false if it is not held at all). */
  deliveredByParent(seq: number): boolean {
    const o = this.heldAt(seq);
    return o >= 0 && this.ring[o + RING_FROM_PARENT] === 1;
  }

  /** Start the audit of a parent from `fromSeq` on (trust.ts). */
  startAudit(parent: PeerId | null, fromSeq: number): void {
    this.auditParent = parent;
    this.auditNextSeq = fromSeq;
    this.auditCount = 0;
    this.auditMisses = 0;
    this.auditHistory = 0;
  }

  /**
   * Forget every packet and the sequence we have reached: that sequence was forged by the packet
   * that set it (trust.ts, a poisoned slice).
   */
  forgetSequence(): void {
    this.clearRing();
    this.ringPayload.fill(undefined);
    this.highestSeq = -1;
    this.highestSeqAt = -Infinity;
    this.lastHighestAt = -Infinity;
    this.highestSeqFrom = -1;
    this.seqIntervalMs = Number.NaN;
    this.startAudit(this.auditParent, 0);
  }

  /** Whether the ring remembers `seq` (its bytes may have been let go: ringPayloadMaxAgeMs). */
  holds(seq: number): boolean {
    return this.heldAt(seq) >= 0;
  }

  /** When a remembered packet arrived here (−Infinity if not held). */
  arrivedAt(seq: number): number {
    const o = this.heldAt(seq);
    return o < 0 ? -Infinity : (this.ring[o + RING_ARRIVED_AT] ?? -Infinity);
  }

  payloadOf(seq: number): Uint8Array | undefined {
    const o = this.heldAt(seq);
    return o < 0 ? undefined : this.ringPayload[o / RING_FIELDS];
  }
}
