import { sha256 } from '@noble/hashes/sha2.js';
import {
  PACKET_HASH_HEX,
  announcementSigningBytes,
  packetRange,
  planOf,
  type MediaPacket,
  type SignedAnnouncement,
} from '@chunkycast/wire';

/**
 * Segments kept at once. A live playlist lists a handful of segments (ffmpeg's default is 5, the
 * tools' stream lists 10) and hls.js plays inside that window, 3 segments from its edge by default,
 * so neither this viewer's player nor a neighbour catching up asks for an older one. 12 covers a
 * 10-segment window plus the segment being written, while bounding memory to ~12 × segment size
 * whatever peers send.
 * (It was 24: 2.7 MB more JS heap per viewer of a ~0.9 Mbit/s stream, for segments nobody asked
 * for; issue 17's memory goal.)
 */
export const MAX_SEGMENTS_KEPT = 12;
/** Packets for a segment this far ahead of the newest announcement are refused (bounds memory). */
const MAX_SEQUENCE_AHEAD = 4;
/**
 * A segment announced this long ago that is still incomplete is given up for the mesh: with no
 * repair (issue 4) the missing packets are not coming; the loader goes to the origin at once.
 */
export const INCOMPLETE_GIVE_UP_MS = 2500;
/**
 * Byte-range waiters per segment at most (LL-HLS parts: hls.js asks for one part at a time, a few
 * with retries), so a page cannot make the store keep an unbounded list.
 */
const MAX_RANGE_WAITERS = 16;

export type SegmentVerdict = 'complete' | 'waiting' | 'failed';

/**
 * What `offer` did with an announcement: `added` (verified and placed), `known` (this sequence was
 * announced already; the first one stays), `badSignature` (forged or corrupt: ignored and counted),
 * `refused` (another stream, or outside the window of kept segments).
 */
export type AnnounceOutcome = 'added' | 'known' | 'badSignature' | 'refused';

interface RangeWaiter {
  readonly start: number;
  readonly end: number;
  readonly resolve: (bytes: Uint8Array | null) => void;
}

interface Entry {
  readonly sequence: number;
  announcement: SignedAnnouncement | null;
  /** Local time the announcement arrived (ms, host clock). */
  announcedAt: number;
  /** Packets in the segment; 0 while unknown (a segment cut while written, before its announcement). */
  count: number;
  /**
   * The fixed packet size of a segment cut while written (from its first signed packet or its
   * announcement); null for a segment cut whole or not known yet.
   */
  packetBytes: number | null;
  /**
   * The stream-wide number of the segment's first packet as its signed packets give it, before the
   * announcement does (null until one came).
   */
  firstPacketNumber: number | null;
  rangeWaiters: RangeWaiter[];
  /**
   * The packets' bytes as they came: a mesh packet's are a view into its payload, which the
   * engine's slice ring holds too (ringPayloadMaxAgeMs), so a finished segment kept as its packets
   * costs no second copy. Assembling it on each read is one copy, which the loader makes anyway.
   * (The store kept the assembled segment: ~2 MiB of JS heap per viewer beside the rings, issue 17.)
   */
  packets: (Uint8Array | undefined)[];
  received: number;
  /** Verified whole. */
  complete: boolean;
  /** The verified segment in one piece, when it came so (`keepWhole`); else null, and `packets` hold it. */
  whole: Uint8Array | null;
  /** Local time the segment was verified whole (ms, host clock); NaN until then. */
  heldAtMs: number;
  failed: boolean;
  verifying: boolean;
  waiters: Set<(bytes: Uint8Array | null) => void>;
}

export interface SegmentStoreCounters {
  packetsReceived: number;
  bytesReceived: number;
  duplicatePackets: number;
  refusedPackets: number;
  segmentsComplete: number;
  hashMismatches: number;
  badSignatures: number;
  /** Packets completed from the origin (byte ranges) instead of the mesh. */
  packetsFilledFromOrigin: number;
  /** Packets (and their bytes) that neighbours sent on request, outside the trees. */
  packetsRepaired: number;
  bytesRepaired: number;
  /** Whole segments the player fetched from the origin and the store kept (verified) for neighbours. */
  segmentsKeptFromOrigin: number;
}

export interface SegmentStoreOptions {
  readonly stream: string;
  /** Broadcaster's Ed25519 public key (raw, 32 bytes); null accepts unsigned-verified announcements. */
  readonly publicKey: CryptoKey | null;
  readonly now: () => number;
  readonly onProblem?: (message: string) => void;
  /** A verified announcement was placed (first time for its segment). */
  readonly onAnnounced?: (announcement: SignedAnnouncement) => void;
}

/**
 * Assembles segments from media packets and releases a segment only when its bytes match the
 * SHA-256 in an announcement whose Ed25519 signature is valid: no unverified byte leaves here.
 */
export class SegmentStore {
  readonly counters: SegmentStoreCounters = {
    packetsReceived: 0,
    bytesReceived: 0,
    duplicatePackets: 0,
    refusedPackets: 0,
    segmentsComplete: 0,
    hashMismatches: 0,
    segmentsKeptFromOrigin: 0,
    badSignatures: 0,
    packetsFilledFromOrigin: 0,
    packetsRepaired: 0,
    bytesRepaired: 0,
  };
  private readonly entries = new Map<number, Entry>();
  private newestAnnounced = -1;
  /** Newest sequence announced before we joined: nothing older comes through the mesh to us. */
  private joinedAfter = -1;
  /**
   * The segment of the first packet the mesh brought us (null before): the trees reach a joining
   * viewer while a segment is being written, and that segment's earlier packets went by before.
   */
  private firstMeshSegment: number | null = null;
  /** Per data slice, the stream-wide number of the first packet its tree brought us. */
  private readonly firstTreePacketBySlice = new Map<number, number>();
  /**
   * Once every data slice's tree has brought a packet, the largest of those first numbers: from
   * that packet on, every slice's packets come down a tree we are in (or by repair), so a part
   * starting there is worth waiting for even in the segment the trees reached us in. Null before.
   */
  private treesFlowFromPacket: number | null = null;

  constructor(private readonly options: SegmentStoreOptions) {}

  /** Announcements the tracker had before we joined: placed, but not expected from the mesh. */
  async seed(announcements: readonly SignedAnnouncement[]): Promise<void> {
    for (const a of announcements) {
      await this.announce(a);
      this.joinedAfter = Math.max(this.joinedAfter, a.sequence);
    }
  }

  async announce(a: SignedAnnouncement): Promise<boolean> {
    const outcome = await this.offer(a);
    return outcome === 'added' || outcome === 'known';
  }

  /** Whether announcements are signature-checked (a broadcaster key was given). */
  get verifiesSignatures(): boolean {
    return this.options.publicKey !== null;
  }

  /** The newest announced sequence, or -1 before any. */
  get newestAnnouncedSequence(): number {
    return this.newestAnnounced;
  }

  /**
   * Verifies an announcement's signature and places it, telling why not when it does not. A bad
   * signature from the tracker is a verification failure (counted, `onProblem`); one from a peer
   * (`from: 'peer'`) is that peer's forgery, which the caller counts and holds against it.
   */
  async offer(a: SignedAnnouncement, from: 'tracker' | 'peer' = 'tracker'): Promise<AnnounceOutcome> {
    if (a.stream !== this.options.stream) return 'refused';
    if (a.packets < 1) return 'refused';
    if (this.options.publicKey !== null) {
      let valid = false;
      try {
        valid = await crypto.subtle.verify(
          'Ed25519',
          this.options.publicKey,
          base64ToBytes(a.signature),
          Uint8Array.from(announcementSigningBytes(a)),
        );
      } catch {
        valid = false;
      }
      if (!valid) {
        if (from === 'peer') return 'badSignature';
        this.counters.badSignatures++;
        this.options.onProblem?.(`announcement of segment ${a.sequence} has a bad signature: ignored`);
        return 'badSignature';
      }
    }
    const entry = this.entry(a.sequence, a.packets, true);
    if (entry === null) return 'refused';
    if (entry.announcement !== null) return 'known';
    if (entry.packetBytes !== (a.packetBytes ?? null) || (entry.count !== a.packets && entry.count !== 0)) {
      // Packets arrived claiming another size or count: they cannot be this segment's; start over.
      entry.packets = new Array<Uint8Array | undefined>(a.packets);
      entry.received = 0;
    }
    entry.count = a.packets;
    entry.packetBytes = a.packetBytes ?? null;
    // Signed packets came before anyone knew how many there would be: any beyond the count are not
    // this segment's (the source's signature says otherwise only if it contradicts itself).
    if (entry.packets.length > a.packets) {
      entry.packets.length = a.packets;
      entry.received = entry.packets.reduce((n, p) => (p === undefined ? n : n + 1), 0);
    }
    entry.announcement = a;
    entry.announcedAt = this.options.now();
    this.newestAnnounced = Math.max(this.newestAnnounced, a.sequence);
    this.prune();
    this.tryComplete(a.sequence, entry);
    this.options.onAnnounced?.(a);
    return 'added';
  }

  /**
   * A media packet from the mesh, already checked against its signed announcement or, for a segment
   * still being written, its own signature (the caller's `inspectPacket`). Returns false if it was
   * refused or a duplicate.
   */
  addPacket(packet: MediaPacket): boolean {
    const entry = this.entry(packet.segment, packet.count, false);
    if (entry === null || entry.failed || !this.fits(entry, packet)) {
      this.counters.refusedPackets++;
      return false;
    }
    if (entry.packets[packet.index] !== undefined || entry.complete) {
      this.counters.duplicatePackets++;
      return false;
    }
    // Not copied: a view into the packet's payload, which the engine's ring holds as well (Entry.packets).
    entry.packets[packet.index] = packet.bytes;
    entry.received++;
    if (packet.signed !== undefined) entry.firstPacketNumber ??= packet.signed.packetNumber - packet.index;
    this.firstMeshSegment ??= packet.segment;
    this.counters.packetsReceived++;
    this.counters.bytesReceived += packet.bytes.length;
    this.wakeRanges(entry);
    this.tryComplete(packet.segment, entry);
    return true;
  }

  /**
   * A data packet a tree brought us (not repair, parity or the origin), at `seq` in `slice`: its
   * stream-wide number is `seq × dataSlices + slice` (wire's packetPlace). Only the first per slice
   * counts.
   */
  treePacket(slice: number, seq: number, dataSlices: number): void {
    if (this.treesFlowFromPacket !== null || !(slice >= 0 && slice < dataSlices)) return;
    if (this.firstTreePacketBySlice.has(slice)) return;
    this.firstTreePacketBySlice.set(slice, seq * dataSlices + slice);
    if (this.firstTreePacketBySlice.size === dataSlices)
      this.treesFlowFromPacket = Math.max(...this.firstTreePacketBySlice.values());
  }

  /**
   * Whether every packet of a range from `start` on comes down trees we are in: its first packet is
   * at or after each slice's first tree packet. The segment's first packet number comes from its
   * announcement or its signed packets.
   */
  private treesBring(sequence: number, start: number): boolean {
    const from = this.treesFlowFromPacket;
    const e = this.entries.get(sequence);
    if (from === null || e === undefined) return false;
    const first = e.announcement?.firstPacket ?? e.firstPacketNumber;
    const packetBytes = packetBytesOf(e);
    if (first === null || packetBytes === null) return false;
    return first + Math.floor(start / packetBytes) >= from;
  }

  /**
   * Whether a packet belongs in an entry, sizing an entry nothing was known about: a signed packet
   * (count 0) of a segment cut while written needs the same packet size and an index within the
   * announced count once there is one; a packet cut whole needs the entry's count.
   */
  private fits(entry: Entry, packet: MediaPacket): boolean {
    const fresh = entry.announcement === null && entry.received === 0;
    const signed = packet.signed;
    if (signed !== undefined) {
      if (fresh && entry.packetBytes === null) {
        entry.packetBytes = signed.packetBytes;
        entry.count = 0;
      }
      return entry.packetBytes === signed.packetBytes && (entry.count === 0 || packet.index < entry.count);
    }
    if (fresh && entry.count === 0 && entry.packetBytes === null) {
      // Created by a waiter before anything was known about the segment: the first packet sizes it.
      entry.count = packet.count;
      entry.packets = new Array<Uint8Array | undefined>(packet.count);
    }
    return entry.count === packet.count;
  }

  verdict(sequence: number): SegmentVerdict {
    const e = this.entries.get(sequence);
    if (e === undefined) return 'waiting';
    if (e.complete) return 'complete';
    return e.failed ? 'failed' : 'waiting';
  }

  expects(sequence: number): boolean {
    if (sequence <= this.joinedAfter) return false;
    const e = this.entries.get(sequence);
    if (e === undefined) return sequence > this.newestAnnounced - MAX_SEGMENTS_KEPT;
    if (e.complete) return true;
    if (e.failed) return false;
    // Partly here: worth waiting for, the missing packets can be completed from the origin.
    if (e.announcement !== null && e.received > 0) return true;
    if (e.announcement !== null && this.options.now() - e.announcedAt > INCOMPLETE_GIVE_UP_MS) return false;
    return true;
  }

  /**
   * Byte ranges [start, end) of the segment's missing packets, merged where adjacent; null unless
   * the segment is announced, partly received and not complete (then the origin can fill the gaps).
   */
  missingRanges(sequence: number): { start: number; end: number; indexes: number[] }[] | null {
    const e = this.entries.get(sequence);
    const a = e?.announcement ?? null;
    if (e === undefined || a === null || e.complete || e.failed || e.verifying || e.received === 0)
      return null;
    const plan = planOf(a);
    const runs: { start: number; end: number; indexes: number[] }[] = [];
    for (let i = 0; i < e.count; i++) {
      if (e.packets[i] !== undefined) continue;
      const [start, end] = packetRange(plan, a.bytes, i);
      const last = runs.at(-1);
      if (last?.end === start) {
        last.end = end;
        last.indexes.push(i);
      } else runs.push({ start, end, indexes: [i] });
    }
    return runs;
  }

  /** Indexes of the packets still missing of an announced, incomplete segment (all of them if none came). */
  missingIndexes(sequence: number): number[] | null {
    const a = this.announcement(sequence);
    if (a === null) return null;
    const e = this.entry(sequence, a.packets, true);
    if (e === null || e.complete || e.failed || e.verifying) return null;
    if (e.count === 0) {
      e.count = a.packets;
      e.packets = new Array<Uint8Array | undefined>(a.packets);
    }
    const out: number[] = [];
    for (let i = 0; i < e.count; i++) if (e.packets[i] === undefined) out.push(i);
    return out;
  }

  /**
   * Places bytes fetched from the origin (or a neighbour's repair) for packet `index` (not counted
   * as mesh bytes), if they match the packet's announced hash: every packet held is checked, so a
   * byte range can be served before the segment is complete (`range`). The segment is released
   * only if the whole then matches the signed hash, as for mesh packets. `digest`: the bytes'
   * SHA-256 if the caller has it (computed off the main thread, sha256OffThread), or 'checked' if the
   * caller has just checked them against this announcement's hash (`inspectPacket`); otherwise they
   * are hashed here, synchronously.
   */
  fillPacket(
    sequence: number,
    index: number,
    bytes: Uint8Array,
    from: 'origin' | 'repair' = 'origin',
    digest: Uint8Array | 'checked' | null = null,
  ): boolean {
    const e = this.entries.get(sequence);
    if (e === undefined || e.announcement === null || e.failed || e.complete) return false;
    if (index < 0 || index >= e.count || e.packets[index] !== undefined) return false;
    if (digest !== 'checked' && !matchesPacketHash(e.announcement, index, digest ?? sha256(bytes))) {
      this.counters.hashMismatches++;
      return false;
    }
    e.packets[index] = bytes.slice();
    e.received++;
    this.wakeRanges(e);
    if (from === 'origin') this.counters.packetsFilledFromOrigin++;
    else {
      this.counters.packetsRepaired++;
      this.counters.bytesRepaired += bytes.length;
    }
    this.tryComplete(sequence, e);
    return true;
  }

  /**
   * Keeps a whole segment the player fetched from the origin, so that neighbours catching up can
   * have it (a joining viewer's first segments, from before it joined, are in no tree): only if it is
   * announced and not held yet, and only once its SHA-256 matches the signed one. Resolves whether
   * it was kept. Any packets of it already here are superseded by the verified whole.
   */
  async keepWhole(sequence: number, bytes: Uint8Array<ArrayBuffer>): Promise<boolean> {
    const e = this.entries.get(sequence);
    const a = e?.announcement ?? null;
    if (e === undefined || a === null || e.complete || e.verifying || bytes.length !== a.bytes) return false;
    e.verifying = true;
    const matches = await matchesSignedHash(bytes, a);
    e.verifying = false;
    // Pruned meanwhile? (Its packets cannot complete it meanwhile: their check waits for ours.)
    if (this.entries.get(sequence) !== e) return false;
    if (!matches) {
      // Not the announced bytes (another rendition, or a bad origin): nothing kept, nothing lost.
      this.counters.hashMismatches++;
      this.tryComplete(sequence, e);
      return false;
    }
    this.counters.segmentsKeptFromOrigin++;
    this.release(e, bytes, true);
    return true;
  }

  /** Whether packet `index` of the segment is held (or the whole segment is). */
  hasPacket(sequence: number, index: number): boolean {
    const e = this.entries.get(sequence);
    return e !== undefined && (e.complete || e.packets[index] !== undefined);
  }

  /** The announcements held (at most MAX_SEGMENTS_KEPT-ish), newest first. */
  announcements(): SignedAnnouncement[] {
    const out: SignedAnnouncement[] = [];
    for (const e of this.entries.values()) if (e.announcement !== null) out.push(e.announcement);
    return out.sort((x, y) => y.sequence - x.sequence);
  }

  announcement(sequence: number): SignedAnnouncement | null {
    return this.entries.get(sequence)?.announcement ?? null;
  }

  /** When the segment was verified whole (host clock, ms), or null while it is not. */
  heldAtMs(sequence: number): number | null {
    const e = this.entries.get(sequence);
    return e === undefined || !e.complete ? null : e.heldAtMs;
  }

  /** Verified bytes now (a copy of their own, but for a segment kept whole), or null. */
  bytes(sequence: number): Uint8Array | null {
    const e = this.entries.get(sequence);
    if (e === undefined || !e.complete) return null;
    if (e.whole !== null) return e.whole;
    const a = e.announcement;
    return a === null ? null : assemble(e, a);
  }

  /**
   * Waits for the verified segment. A segment the trees will not bring (`expects` false) resolves
   * null at once, unless `requested`: its packets were asked of neighbours (repair).
   */
  wait(
    sequence: number,
    timeoutMs: number,
    signal?: AbortSignal,
    requested = false,
  ): Promise<Uint8Array | null> {
    const ready = this.bytes(sequence);
    if (ready !== null) return Promise.resolve(ready);
    if (timeoutMs <= 0 || signal?.aborted === true || (!requested && !this.expects(sequence)))
      return Promise.resolve(null);
    const entry = this.entry(sequence, 0, true);
    if (entry === null) return Promise.resolve(null);
    return waitFor(timeoutMs, signal, (finish) => {
      entry.waiters.add(finish);
      return () => entry.waiters.delete(finish);
    });
  }

  /**
   * Verified bytes [start, end) of a segment before it is complete (an LL-HLS part): every packet
   * covering them is here, each one checked on arrival (its announced hash, or for a segment still
   * being written its own signature). Null while any is missing, or when the segment's packet
   * layout is not known yet (a segment cut whole, before its announcement).
   */
  range(sequence: number, start: number, end: number): Uint8Array | null {
    const e = this.entries.get(sequence);
    if (e === undefined || e.failed || !(start >= 0 && end > start)) return null;
    if (e.whole !== null) return end <= e.whole.length ? e.whole.slice(start, end) : null;
    const a = e.announcement;
    const packetBytes = packetBytesOf(e);
    if (packetBytes === null || (a !== null && end > a.bytes)) return null;
    const first = Math.floor(start / packetBytes);
    const last = Math.floor((end - 1) / packetBytes);
    const out = new Uint8Array(end - start);
    for (let i = first; i <= last; i++) {
      const packet = e.packets[i];
      if (packet === undefined) return null;
      const packetStart = i * packetBytes;
      const from = Math.max(start, packetStart);
      const to = Math.min(end, packetStart + packet.length);
      // A short packet is the segment's last data packet: nothing lies beyond it.
      if (to < Math.min(end, packetStart + packetBytes)) return null;
      out.set(packet.subarray(from - packetStart, to - packetStart), from - start);
    }
    return out;
  }

  /** Waits for `range(sequence, start, end)`; null at the timeout, an abort, or a failed segment. */
  waitRange(
    sequence: number,
    start: number,
    end: number,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<Uint8Array | null> {
    const ready = this.range(sequence, start, end);
    if (ready !== null) return Promise.resolve(ready);
    if (timeoutMs <= 0 || signal?.aborted === true || !this.expects(sequence)) return Promise.resolve(null);
    // Until the trees bring a first packet, and for the segment they were in the middle of then, a
    // part's packets went by before we were in the trees: waiting for them only drains an LL
    // player's ~1 s of buffer (bench:compare ll, N = 8: every viewer's stalls came in its first
    // seconds). Those parts come from the origin at once, unless every slice's tree already
    // flows from before the part's first packet (bench:compare ll, N = 16: after its first
    // frame a viewer still took 0–8 parts from the origin, 67 of the swarm's 141).
    const afterFirstMeshSegment = this.firstMeshSegment !== null && sequence > this.firstMeshSegment;
    if (!afterFirstMeshSegment && !this.treesBring(sequence, start)) return Promise.resolve(null);
    const entry = this.entry(sequence, 0, true);
    if (entry === null || entry.rangeWaiters.length >= MAX_RANGE_WAITERS) return Promise.resolve(null);
    return waitFor(timeoutMs, signal, (finish) => {
      const waiter: RangeWaiter = { start, end, resolve: finish };
      entry.rangeWaiters.push(waiter);
      return () => {
        const at = entry.rangeWaiters.indexOf(waiter);
        if (at >= 0) entry.rangeWaiters.splice(at, 1);
      };
    });
  }

  /** Releases every waiter (with null): the session is closing. */
  close(): void {
    for (const e of this.entries.values()) {
      for (const w of [...e.waiters]) w(null);
      for (const w of [...e.rangeWaiters]) w.resolve(null);
    }
  }

  /** Hands byte ranges now available to their waiters (after a packet or the whole segment). */
  private wakeRanges(entry: Entry): void {
    // Called for every packet: nothing to do (and no copy to make) without a range waiter.
    if (entry.rangeWaiters.length === 0) return;
    for (const w of [...entry.rangeWaiters]) {
      const bytes = entry.failed ? null : this.range(entry.sequence, w.start, w.end);
      if (bytes !== null || entry.failed) w.resolve(bytes);
    }
  }

  private entry(sequence: number, count: number, announced: boolean): Entry | null {
    let e = this.entries.get(sequence);
    if (e !== undefined) return e;
    // Without an announcement, only accept packets near the live edge we know of.
    if (!announced && this.newestAnnounced >= 0 && sequence > this.newestAnnounced + MAX_SEQUENCE_AHEAD)
      return null;
    if (this.newestAnnounced >= 0 && sequence < this.newestAnnounced - MAX_SEGMENTS_KEPT) return null;
    e = {
      sequence,
      announcement: null,
      announcedAt: 0,
      count,
      packetBytes: null,
      firstPacketNumber: null,
      rangeWaiters: [],
      packets: new Array<Uint8Array | undefined>(count),
      received: 0,
      complete: false,
      whole: null,
      heldAtMs: Number.NaN,
      failed: false,
      verifying: false,
      waiters: new Set(),
    };
    this.entries.set(sequence, e);
    this.prune();
    return e;
  }

  private prune(): void {
    if (this.entries.size <= MAX_SEGMENTS_KEPT) return;
    const sequences = [...this.entries.keys()].sort((a, b) => a - b);
    for (const s of sequences.slice(0, sequences.length - MAX_SEGMENTS_KEPT)) {
      const e = this.entries.get(s);
      if (e !== undefined) {
        for (const w of [...e.waiters]) w(null);
        for (const w of [...e.rangeWaiters]) w.resolve(null);
      }
      this.entries.delete(s);
    }
  }

  private tryComplete(sequence: number, entry: Entry): void {
    const a = entry.announcement;
    if (a === null || entry.verifying || entry.complete || entry.count === 0 || entry.received < entry.count)
      return;
    entry.verifying = true;
    void this.verify(sequence, entry, a);
  }

  private async verify(sequence: number, entry: Entry, a: SignedAnnouncement): Promise<void> {
    const out = assemble(entry, a);
    const matches = out !== null && (await matchesSignedHash(out, a));
    entry.verifying = false;
    if (!matches) {
      entry.failed = true;
      entry.packets = [];
      this.counters.hashMismatches++;
      this.options.onProblem?.(`segment ${sequence} does not match its signed hash: dropped`);
      for (const w of [...entry.waiters]) w(null);
      this.wakeRanges(entry);
      return;
    }
    this.counters.segmentsComplete++;
    this.release(entry, out, false);
  }

  /**
   * The segment is verified, and everyone waiting gets its bytes. Kept as its packets (Entry.packets),
   * or, when it came whole (`keepWhole`), as that one piece, which replaces any packets.
   */
  private release(entry: Entry, bytes: Uint8Array<ArrayBuffer>, cameWhole: boolean): void {
    entry.complete = true;
    entry.whole = cameWhole ? bytes : null;
    entry.heldAtMs = this.options.now();
    if (cameWhole) entry.packets = [];
    entry.failed = false;
    for (const w of [...entry.waiters]) w(bytes);
    this.wakeRanges(entry);
  }
}

/** A segment's packets in one piece, or null if any is missing or not the size its plan says. */
function assemble(entry: Entry, a: SignedAnnouncement): Uint8Array<ArrayBuffer> | null {
  const plan = planOf(a);
  const out = new Uint8Array(a.bytes);
  for (let i = 0; i < a.packets; i++) {
    const [start, end] = packetRange(plan, a.bytes, i);
    const p = entry.packets[i];
    if (p?.length !== end - start) return null;
    out.set(p, start);
  }
  return out;
}

/** Whether the whole segment's SHA-256 (WebCrypto, off the main thread) is the signed one. */
async function matchesSignedHash(bytes: Uint8Array<ArrayBuffer>, a: SignedAnnouncement): Promise<boolean> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return bytesToHex(digest) === a.sha256;
}

/**
 * The size of an entry's packets (all but the last): fixed for a segment cut while written, else
 * its announcement's plan; null for a segment cut whole before its announcement.
 */
function packetBytesOf(e: Entry): number | null {
  return e.packetBytes ?? (e.announcement === null ? null : planOf(e.announcement).packetBytes);
}

/**
 * A wait that `register` hooks up (it returns how to unhook): resolved by the `finish` it is given,
 * or with null at the timeout or on an abort, unhooked either way.
 */
function waitFor(
  timeoutMs: number,
  signal: AbortSignal | undefined,
  register: (finish: (bytes: Uint8Array | null) => void) => () => void,
): Promise<Uint8Array | null> {
  return new Promise((resolve) => {
    const finish = (bytes: Uint8Array | null): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      unregister();
      resolve(bytes);
    };
    const onAbort = (): void => {
      finish(null);
    };
    const timer = setTimeout(onAbort, timeoutMs);
    signal?.addEventListener('abort', onAbort);
    const unregister = register(finish);
  });
}

/** Two lowercase hex digits per byte value: every packet's hash is compared as hex. */
const HEX_OF_BYTE: readonly string[] = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

/**
 * Whether `digest` (a SHA-256) is packet `index`'s hash in announcement `a` (its first
 * PACKET_HASH_HEX hex digits, as the announcement lists them).
 */
export function matchesPacketHash(a: SignedAnnouncement, index: number, digest: Uint8Array): boolean {
  const expected = a.packetHashes.slice(index * PACKET_HASH_HEX, (index + 1) * PACKET_HASH_HEX);
  return bytesToHex(digest.subarray(0, PACKET_HASH_HEX / 2)) === expected;
}

export function bytesToHex(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += HEX_OF_BYTE[b] ?? '';
  return s;
}

function base64ToBytes(b64: string): Uint8Array<ArrayBuffer> {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function bytesToBase64(bytes: Uint8Array): string {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** Imports a raw base64 Ed25519 public key for verification. */
export async function importPublicKey(base64: string): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', base64ToBytes(base64), { name: 'Ed25519' }, false, ['verify']);
}
