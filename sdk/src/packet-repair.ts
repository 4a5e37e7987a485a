import { encodeMediaPacket, packetRange, planOf, type SignedAnnouncement } from '@chunkycast/wire';
import { matchesPacketHash } from './segments.js';
import { sha256OffThread } from './packet-hasher.js';
import { MeshError } from './types.js';

/**
 * Which repair a viewer runs (issue 14): `segment`, the session's own repair of whole segments
 * (neighbours asked for a segment's missing packets, then the origin's byte ranges, both driven by
 * the loader's wait); or `engine`, the engine's deadline-aware packet repair (earliest deadline
 * first, helpers chosen by Bloom filter, the origin as its last resort), given a playout clock
 * derived from the player's deadlines.
 */
export type PacketRepairMode = 'engine' | 'segment';

/**
 * `engine` (issue 14, docs/low-latency.md). With real players at steady pace the engine's path took
 * 54% fewer bytes from the origin than segment repair (0.25 against 0.53 stream copies to the
 * viewers; 8 viewers, 120 s, 2% of received media dropped, one run per path, no stall in either).
 * It was held back by the Node live test of a late joiner, where the engine also chased the packets
 * of a segment from before joining and took them from the origin; such a segment is now left to
 * neighbours' stores. `segment` stays an option.
 */
export const DEFAULT_PACKET_REPAIR: PacketRepairMode = 'engine';

/** Resolves and checks `packetRepair` (hosts may pass unchecked JSON). */
export function resolvePacketRepair(raw: unknown): PacketRepairMode {
  if (raw === undefined) return DEFAULT_PACKET_REPAIR;
  if (raw === 'engine' || raw === 'segment') return raw;
  throw new MeshError('config', `packetRepair must be "engine" or "segment", got ${JSON.stringify(raw)}`);
}

/** What the mapping needs of an announcement. */
export type AnnouncedSpan = Pick<SignedAnnouncement, 'sequence' | 'firstPacket' | 'packets'>;

/**
 * The segment and index of the packet the true source dealt on `slice` under `seq`: stream-wide
 * packet n = seq·D + slice (wire `packetPlace` inverted), found in the announcement whose packets
 * [firstPacket, firstPacket + packets) hold it. Null when no announcement given holds it (not
 * announced yet, forgotten, or a number the source skipped).
 */
export function locatePacket(
  announcements: Iterable<AnnouncedSpan>,
  slice: number,
  seq: number,
  dataSlices: number,
): { segment: number; index: number } | null {
  if (!isPlace(slice, seq, dataSlices)) return null;
  const n = seq * dataSlices + slice;
  for (const a of announcements) {
    const index = n - a.firstPacket;
    if (index >= 0 && index < a.packets) return { segment: a.sequence, index };
  }
  return null;
}

/** Whether (slice, seq) is a place some packet could have (whole numbers, slice below D). */
export function isPlace(slice: number, seq: number, dataSlices: number): boolean {
  return (
    Number.isInteger(slice) &&
    Number.isInteger(seq) &&
    Number.isInteger(dataSlices) &&
    slice >= 0 &&
    seq >= 0 &&
    dataSlices > 0 &&
    slice < dataSlices
  );
}

/** The engine's playout clock (its `playout` input, without `kind`). */
export interface PlayoutClock {
  readonly zeroAtMs: number;
  readonly packetIntervalMs: number;
  readonly fromMs: number;
  readonly originRttMs?: number;
}

/**
 * The playout clock for a player that needs this segment by `deadlineMs`. The engine's clock is
 * linear: packet `seq` of `slice` plays at zeroAtMs + (seq + slice/D)·interval, i.e. stream-wide
 * packet n at zeroAtMs + (n/D)·interval. One slice's interval is the segment's pace over its packets
 * per slice (D·pace/packets; the pace is `segmentPaceMs`, the measured gap between segments, else
 * the announced duration), so the clock runs at the rate segments really come and later segments
 * fall that much later each, as the player will want them. It is anchored on the segment's
 * first packet, so no packet of the segment plays before the deadline: hls.js needs the segment
 * whole, every packet of it at the deadline, which the host says with a `deadline` span
 * (`segmentDeadline`). A clock that already put the later packets earlier (anchored on the last
 * packet, as it was) made the early packets look due up to a segment's duration early, and sent them
 * to the origin before any neighbour was asked. Null when the announcement cannot give a rate (no
 * duration or no packets).
 */
export function playoutFor(
  a: Pick<SignedAnnouncement, 'firstPacket' | 'packets' | 'durationMs'>,
  deadlineMs: number,
  dataSlices: number,
  nowMs: number,
  segmentPaceMs: number | null = null,
): PlayoutClock | null {
  const segmentMs = segmentPaceMs !== null && segmentPaceMs > 0 ? segmentPaceMs : a.durationMs;
  if (
    !(segmentMs > 0) ||
    !(a.packets > 0) ||
    !(dataSlices > 0) ||
    !Number.isFinite(deadlineMs) ||
    !Number.isFinite(nowMs)
  )
    return null;
  const packetIntervalMs = (dataSlices * segmentMs) / a.packets;
  const zeroAtMs = deadlineMs - (a.firstPacket / dataSlices) * packetIntervalMs;
  return { zeroAtMs, packetIntervalMs, fromMs: nowMs };
}

/**
 * The pace segments really come at, from the true source's signed publication times of consecutive
 * segments, smoothed: a source that falls behind its packager (or a packager slower than its
 * EXTINF) publishes slower than the announced duration says, and a clock at the announced rate then
 * runs ahead of the trees, so every packet looks late. Gaps outside [¼, 8]× the duration (a pause,
 * a restart) are left out.
 */
export class SegmentPace {
  private paceMs: number | null = null;
  private last: { sequence: number; publishedAtMs: number } | null = null;

  get ms(): number | null {
    return this.paceMs;
  }

  announced(a: Pick<SignedAnnouncement, 'sequence' | 'publishedAtMs' | 'durationMs'>): void {
    const last = this.last;
    if (last !== null && a.sequence <= last.sequence) return;
    this.last = { sequence: a.sequence, publishedAtMs: a.publishedAtMs };
    if (last === null || a.sequence !== last.sequence + 1 || !(a.durationMs > 0)) return;
    const gapMs = a.publishedAtMs - last.publishedAtMs;
    if (!(gapMs >= a.durationMs / 4 && gapMs <= a.durationMs * 8)) return;
    this.paceMs = this.paceMs === null ? gapMs : this.paceMs + PACE_SMOOTHING * (gapMs - this.paceMs);
  }
}

/** Weight of a new gap in the pace: follows a change within a few segments, smooths jitter. */
const PACE_SMOOTHING = 0.25;

/** The engine's `deadline` input (without `kind`): every packet of the segment by the deadline. */
export interface DeadlineSpan {
  readonly firstPacket: number;
  readonly packets: number;
  readonly atMs: number;
}

/** The span that tells the engine a whole segment is needed by `deadlineMs` (null if it has no packets). */
export function segmentDeadline(
  a: Pick<SignedAnnouncement, 'firstPacket' | 'packets'>,
  deadlineMs: number,
): DeadlineSpan | null {
  if (!(a.packets > 0) || !Number.isFinite(deadlineMs)) return null;
  return { firstPacket: a.firstPacket, packets: a.packets, atMs: deadlineMs };
}

/** One origin request: a run of adjacent packets of a segment. */
interface Run {
  readonly segment: number;
  readonly url: string;
  readonly start: number;
  readonly end: number;
  readonly indexes: readonly number[];
  readonly places: readonly { readonly slice: number; readonly seq: number }[];
}

export interface OriginRepairOptions {
  /** The verified announcement of a segment (null: not announced or forgotten). */
  readonly announcement: (segment: number) => SignedAnnouncement | null;
  /** Announcements to look a packet up in, newest first (the store's). */
  readonly announcements: () => Iterable<SignedAnnouncement>;
  readonly dataSlices: () => number;
  /**
   * Whether the store already holds this packet (it came down the tree after the engine asked):
   * then it is not fetched. Default: never.
   */
  readonly held?: (segment: number, index: number) => boolean;
  /** Hands the engine a checked packet (MeshNode.originPacket). */
  readonly deliver: (slice: number, seq: number, payload: Uint8Array) => void;
  /** `fetch` (tests stub it). */
  readonly fetch: (url: string, init: RequestInit) => Promise<Response>;
  /** The session's clock, for the origin's round trip. */
  readonly now: () => number;
  /** Requests in flight at once (default ORIGIN_CONCURRENCY). */
  readonly maxConcurrent?: number;
  /** SHA-256 of a packet's bytes (default sha256OffThread: WebCrypto; tests give a synchronous one). */
  readonly digest?: (bytes: Uint8Array) => Promise<Uint8Array>;
}

export interface OriginRepairCounters {
  /** Packets the engine asked the origin for. */
  packetsRequested: number;
  /** Of those, fetched, checked against their announced hash and handed to the engine. */
  packetsDelivered: number;
  /** Bytes the origin sent for them (bodies). */
  bytesFetched: number;
  /** Packets whose bytes failed their announced hash, or requests the origin answered wrongly. */
  packetsRefused: number;
  /**
   * Packets not fetched: bad (slice, seq), no announcement placed them, or their segment's URL did
   * not become known, within MAX_URL_WAIT_MS.
   */
  packetsUnplaced: number;
  /** Packets not fetched because the store held them by then (the tree's copy was late, not lost). */
  packetsAlreadyHeld: number;
  requestsFailed: number;
}

/** Requests in flight at once: the origin and the viewer's downlink are shared with the player. */
export const ORIGIN_CONCURRENCY = 4;
/** Packets waiting for their segment's URL, at most (beyond, the oldest are given up). */
const MAX_PACKETS_AWAITING_URL = 1024;
/**
 * A packet waits at most this long for its segment's announcement and URL: the loader waits for a
 * segment at most 4 s (its maxWaitMs), so the engine's deadline for the packet has passed by then.
 * The engine may ask before the announcement exists: its clock makes a segment's packets due up to
 * a segment duration early, and it asks the origin within its origin lead of that.
 */
const MAX_URL_WAIT_MS = 4000;
/** Segment URLs remembered (the loader names each segment it waits for). */
const MAX_URLS = 64;
/** Weight of a new round-trip sample. */
const RTT_SMOOTHING = 0.25;

/**
 * The packets `indexes` of segment `a` cut from `part`, the origin's bytes from `runStart` of the
 * segment (null: a run of empty packets), each with its SHA-256, all hashed at once by `digest`
 * (default sha256OffThread: WebCrypto, off the main thread).
 */
export async function runPacketDigests(
  a: SignedAnnouncement,
  runStart: number,
  part: Uint8Array | null,
  indexes: readonly number[],
  digest: (bytes: Uint8Array) => Promise<Uint8Array> = sha256OffThread,
): Promise<{ index: number; bytes: Uint8Array; digest: Uint8Array }[]> {
  const plan = planOf(a);
  return Promise.all(
    indexes.map(async (index) => {
      const [start, end] = packetRange(plan, a.bytes, index);
      const bytes = part === null ? new Uint8Array(0) : part.subarray(start - runStart, end - runStart);
      return { index, bytes, digest: await digest(bytes) };
    }),
  );
}

/**
 * The host side of the engine's last resort (`fetchOrigin {slice, seqs}`): each (slice, seq) is
 * placed in its segment through the announcements, the packets of one segment are fetched as byte
 * ranges of the segment's URL (adjacent packets merged into one range, a bounded number of requests
 * at once), each packet is checked against its announced hash, and handed to the engine as the
 * media packet the tree would have carried (`originPacket`). The engine asks per slice and for all
 * its slices in one step, so the asks of one step are gathered (a microtask) before merging.
 */
export class OriginRepair {
  readonly counters: OriginRepairCounters = {
    packetsRequested: 0,
    packetsDelivered: 0,
    bytesFetched: 0,
    packetsRefused: 0,
    packetsUnplaced: 0,
    packetsAlreadyHeld: 0,
    requestsFailed: 0,
  };
  private readonly urls = new Map<number, string>();
  /** Asked for, waiting to be placed (announcement) and gathered into runs (URL). */
  private pending: { slice: number; seq: number; askedAtMs: number }[] = [];
  private gatherScheduled = false;
  private readonly queue: Run[] = [];
  private inFlight = 0;
  private rttMs: number | null = null;
  private closed = false;

  constructor(private readonly options: OriginRepairOptions) {}

  /** Smoothed time from request to body of origin range requests (null before the first). */
  get originRttMs(): number | null {
    return this.rttMs;
  }

  /** The loader named this segment's URL (waitForSegment): packets waiting for it are fetched. */
  setUrl(segment: number, url: string): void {
    if (this.urls.get(segment) === url) return;
    this.urls.delete(segment);
    this.urls.set(segment, url);
    if (this.urls.size > MAX_URLS) {
      const oldest = this.urls.keys().next();
      if (oldest.done !== true) this.urls.delete(oldest.value);
    }
    if (this.pending.length > 0) this.scheduleGather();
  }

  /** A new announcement: packets asked before it can now be placed. */
  announced(): void {
    if (this.pending.length > 0) this.scheduleGather();
  }

  /** The engine's `fetchOrigin`. Bad input is counted as unplaced, never thrown. */
  fetchOrigin(slice: number, seqs: readonly number[]): void {
    if (this.closed) return;
    const dataSlices = this.options.dataSlices();
    const askedAtMs = this.options.now();
    for (const seq of seqs) {
      this.counters.packetsRequested++;
      // A place no packet can have: refused now (an announcement would not place it later either).
      if (!isPlace(slice, seq, dataSlices)) {
        this.counters.packetsUnplaced++;
        continue;
      }
      this.pending.push({ slice, seq, askedAtMs });
    }
    if (this.pending.length > MAX_PACKETS_AWAITING_URL) {
      const dropped = this.pending.length - MAX_PACKETS_AWAITING_URL;
      this.pending.splice(0, dropped);
      this.counters.packetsUnplaced += dropped;
    }
    this.scheduleGather();
  }

  close(): void {
    this.closed = true;
    this.pending = [];
    this.queue.length = 0;
  }

  /**
   * The URL of a segment: the loader's, or else its announced URI resolved against the URL of another
   * segment the loader named (both are relative to the same playlist), so the engine can fetch
   * packets of a segment the player has not asked for yet. Null when neither is known.
   */
  private urlFor(segment: number): string | null {
    const named = this.urls.get(segment);
    if (named !== undefined) return named;
    const uri = this.options.announcement(segment)?.uri;
    if (uri === undefined) return null;
    for (const [other, url] of this.urls) {
      const otherUri = this.options.announcement(other)?.uri;
      // Only where the sibling's URL really is its URI resolved (not a rewritten or signed URL).
      if (otherUri === undefined || !url.endsWith(otherUri)) continue;
      try {
        return new URL(uri, url).href;
      } catch {
        return null;
      }
    }
    return null;
  }

  private scheduleGather(): void {
    if (this.gatherScheduled) return;
    this.gatherScheduled = true;
    queueMicrotask(() => {
      this.gatherScheduled = false;
      this.gather();
    });
  }

  /**
   * Pending packets placed by an announcement and with a known URL become runs of adjacent packets,
   * per segment; the others wait (at most MAX_URL_WAIT_MS).
   */
  private gather(): void {
    if (this.closed) return;
    const bySegment = new Map<number, Map<number, { slice: number; seq: number }>>();
    const waiting: typeof this.pending = [];
    const now = this.options.now();
    const dataSlices = this.options.dataSlices();
    const announcements = [...this.options.announcements()];
    for (const p of this.pending) {
      if (now - p.askedAtMs > MAX_URL_WAIT_MS) {
        this.counters.packetsUnplaced++;
        continue;
      }
      const place = locatePacket(announcements, p.slice, p.seq, dataSlices);
      if (place === null || this.urlFor(place.segment) === null) {
        waiting.push(p);
        continue;
      }
      if (this.options.held?.(place.segment, place.index) === true) {
        this.counters.packetsAlreadyHeld++;
        continue;
      }
      let indexes = bySegment.get(place.segment);
      if (indexes === undefined)
        bySegment.set(place.segment, (indexes = new Map<number, { slice: number; seq: number }>()));
      indexes.set(place.index, { slice: p.slice, seq: p.seq });
    }
    this.pending = waiting;
    for (const [segment, indexes] of bySegment) {
      const a = this.options.announcement(segment);
      const url = this.urlFor(segment);
      if (a === null || url === null) {
        this.counters.packetsUnplaced += indexes.size;
        continue;
      }
      const plan = planOf(a);
      let run: {
        start: number;
        end: number;
        indexes: number[];
        places: { slice: number; seq: number }[];
      } | null = null;
      const flush = (): void => {
        if (run !== null) this.queue.push({ segment, url, ...run });
        run = null;
      };
      for (const index of [...indexes.keys()].sort((x, y) => x - y)) {
        const [start, end] = packetRange(plan, a.bytes, index);
        const place = indexes.get(index) ?? { slice: 0, seq: 0 };
        if (run !== null && run.end === start && run.indexes.at(-1) === index - 1) {
          run.end = end;
          run.indexes.push(index);
          run.places.push(place);
        } else {
          flush();
          run = { start, end, indexes: [index], places: [place] };
        }
      }
      flush();
    }
    this.pump();
  }

  private pump(): void {
    const limit = this.options.maxConcurrent ?? ORIGIN_CONCURRENCY;
    while (!this.closed && this.inFlight < limit) {
      const run = this.queue.shift();
      if (run === undefined) return;
      this.inFlight++;
      this.fetchRun(run)
        .catch(() => {
          // A host callback that threw: this run's packets are lost to the engine, nothing else.
          this.counters.requestsFailed++;
        })
        .finally(() => {
          this.inFlight--;
          this.pump();
        });
    }
  }

  private async fetchRun(run: Run): Promise<void> {
    const a = this.options.announcement(run.segment);
    if (a === null) {
      this.counters.packetsUnplaced += run.indexes.length;
      return;
    }
    let part: Uint8Array | null = null;
    if (run.end > run.start) {
      const startedAt = this.options.now();
      try {
        const response = await this.options.fetch(run.url, {
          headers: { Range: `bytes=${run.start}-${run.end - 1}` },
        });
        const body = new Uint8Array(await response.arrayBuffer());
        this.counters.bytesFetched += body.length;
        const sample = this.options.now() - startedAt;
        this.rttMs = this.rttMs === null ? sample : this.rttMs + RTT_SMOOTHING * (sample - this.rttMs);
        // 206 with exactly the range; a server that ignores Range sends the whole segment (200).
        part =
          response.status === 206 && body.length === run.end - run.start
            ? body
            : response.status === 200 && body.length === a.bytes
              ? body.subarray(run.start, run.end)
              : null;
      } catch {
        this.counters.requestsFailed++;
        return; // the engine's deadline passes; the loader's whole-segment fallback remains
      }
      if (part === null) {
        this.counters.requestsFailed++;
        this.counters.packetsRefused += run.indexes.length;
        return;
      }
    }
    // Off the main thread, all at once: the engine asks the origin when a deadline is near, and a
    // main thread busy hashing delays the player as much as the packet it waits for.
    const packets = await runPacketDigests(a, run.start, part, run.indexes, this.options.digest);
    // Closed while fetching or hashing: nothing more goes to the engine.
    if (this.closed) return;
    for (const [k, { index, bytes, digest }] of packets.entries()) {
      const place = run.places[k];
      if (place === undefined) continue;
      // Checked here, before the engine forwards it down the tree: the origin may be a CDN edge
      // serving a stale or damaged object, and our children would blame us for it.
      if (!matchesPacketHash(a, index, digest)) {
        this.counters.packetsRefused++;
        continue;
      }
      // The whole segment's count, never the open segment's 0: a count-0 packet must carry the
      // source's own signature, which only the tree copy has. Both counts pass inspectPacket once
      // the segment is announced, and the origin is asked only for announced segments.
      const payload = encodeMediaPacket({ segment: run.segment, index, count: a.packets, bytes });
      this.counters.packetsDelivered++;
      this.options.deliver(place.slice, place.seq, payload);
    }
  }
}
