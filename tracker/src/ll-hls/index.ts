/**
 * The origin's LL-HLS view of a plain packager (`--ll-hls`): parts of the segment being written as
 * byte ranges, a preload hint, blocking playlist reload (RFC 8216bis §6.2.5.2) and the growing
 * segment streamed as it is written. The origin (../origin.ts) delegates playlists and segments
 * being written here; everything else it serves as before.
 *
 * HTTP contract for the segment being written (the URI of the PRELOAD-HINT, `liveN.ts`):
 *   - `GET liveN.ts` (no Range) or `Range: bytes=0-` → 200, no Content-Length (chunked), the body is
 *     the whole segment, sent as the packager writes it; the response ends exactly when the
 *     playlist lists the segment (its final size). This is the contract the true source uses:
 *     `GET` with `Range: bytes=0-` and `x-chunkycast-role: source`, counted as source bytes.
 *   - `Range: bytes=N-` (N > 0, the preload hint's BYTERANGE-START) → 206, chunked, the bytes from N
 *     to the end of the segment as they are written. There is no Content-Range: the last byte is
 *     not known yet, and the header has no syntax for that.
 *   - `Range: bytes=a-b` → held until byte b is written (or the segment ends), then 206 with
 *     `Content-Range: bytes a-b/*` (or the final size once known) and its Content-Length.
 *   - A packager that stalls: the response is cut (the socket is destroyed) after STALL_MS without a
 *     new byte, so a client sees a failed download rather than a truncated "complete" one.
 * A segment that is neither listed nor being written is not handled here (the origin's 404).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { sendStatus } from '../origin.js';
import { deliveryDecision, parseDeliveryDirective } from './playlist.js';
import { PlaylistWatcher, type SegmentProgress } from './watcher.js';

export { TsScanner, TsScanError, type VideoPesStart } from './ts-scanner.js';
export { PartCutter, type Part } from './parts.js';
export * from './playlist.js';
export { PlaylistWatcher } from './watcher.js';

/**
 * Blocked playlist requests and growing-segment streams held at once; beyond it, 503. An LL-HLS
 * player holds one playlist request and a part or two; the origin is the mesh's fallback, so 256
 * covers a hundred viewers on it at once, and bounds memory (a 64 KiB read buffer per stream).
 */
export const DEFAULT_MAX_HELD_REQUESTS = 256;
/** Playlists followed at once: one per rendition, and a packager writes a handful at most. */
const MAX_WATCHERS = 8;
/** A playlist nobody asked for in this long stops being followed (idle cost: a stat per poll). */
const WATCHER_IDLE_MS = 30_000;
/**
 * Poll period of the playlist and the growing segment: a twentieth of the default part target,
 * so a part is published at most 5% of its duration late; a stat and a small read per poll.
 */
const DEFAULT_POLL_MS = 25;
/**
 * §6.2.5.2 lets a client give up on a blocked request after three target durations; answering
 * by then (503) lets it retry instead of waiting on a dead socket.
 */
const BLOCK_TARGET_DURATIONS = 3;
/**
 * Cache lifetime of a blocking reload's answer: Apple's LL-HLS deployment guidance ("Enabling
 * Low-Latency HLS") asks for six target durations, so a CDN collapses the many identical requests.
 */
const BLOCKED_CACHE_TARGET_DURATIONS = 6;
/**
 * No new byte of a growing segment for this long ends its stream (the packager stalled): longer
 * than the longest gap between writes of a live packager (a segment of a few seconds).
 */
const STALL_MS = 10_000;
/** Bytes read from the growing file per write: a few parts' worth, and little memory per reader. */
const READ_CHUNK_BYTES = 64 * 1024;

/**
 * Response header on a segment streamed while it is written to its end (no Range, or an open-ended
 * one): the true source takes the end of such a body for the end of the segment and pushes its
 * packets as they come (tracker/src/source/progressive.ts). A plain file server never sends it.
 */
export const GROWING_HEADER = 'x-chunkycast-growing';

export interface LlHlsOptions {
  readonly partTargetMs: number;
  /**
   * Publish the LL-HLS playlist (`--ll-hls`). False: the packager's playlist is served as written
   * (no blocking reload) and only the segment in progress is streamed, for the true source to push
   * it while it is written (issue 14); players see exactly the packager's output.
   */
  readonly publishParts?: boolean;
  readonly pollMs?: number;
  readonly maxHeldRequests?: number;
  readonly log?: (level: 'warn' | 'debug', message: string, fields?: Record<string, unknown>) => void;
}

/** The origin's counters, for the bytes this module sends. */
export interface Counting {
  readonly onStart: () => void;
  readonly onBytes: (n: number) => void;
}

export class LlHlsOrigin {
  private readonly watchers = new Map<
    string,
    { watcher: PlaylistWatcher; ready: Promise<void>; usedMs: number }
  >();
  private held = 0;
  private closed = false;
  private readonly maxHeld: number;
  private readonly idleTimer: ReturnType<typeof setInterval>;

  constructor(private readonly options: LlHlsOptions) {
    this.maxHeld = options.maxHeldRequests ?? DEFAULT_MAX_HELD_REQUESTS;
    this.idleTimer = setInterval(() => {
      this.dropIdle();
    }, WATCHER_IDLE_MS / 3);
    this.idleTimer.unref();
  }

  close(): void {
    this.closed = true;
    clearInterval(this.idleTimer);
    for (const { watcher } of this.watchers.values()) watcher.stop();
    this.watchers.clear();
  }

  /** Answers a playlist request; false if it cannot (no such playlist: the origin answers). */
  async servePlaylist(
    req: IncomingMessage,
    res: ServerResponse,
    file: string,
    count: Counting,
  ): Promise<boolean> {
    const entry = await this.watcherFor(file);
    if (entry === null) return false;
    await entry.ready;
    // Followed (its segment in progress can be streamed), but served as the packager wrote it.
    if (this.options.publishParts === false) return false;
    const { watcher } = entry;
    const query = (req.url ?? '').split('?')[1] ?? '';
    const directive = parseDeliveryDirective(query);
    if (directive.kind === 'bad') {
      sendStatus(res, 400, directive.reason);
      return true;
    }
    // The packager may have written its first playlist since the last poll: look before a 404.
    if (watcher.playlistText() === null) await watcher.refresh();
    if (watcher.playlistText() === null) return false;
    let blocked = false;
    if (directive.kind === 'block') {
      const outcome = await this.waitFor(watcher, res, directive.msn, directive.part);
      if (outcome === 'gone') return true;
      if (outcome !== 'ready') {
        const status = outcome === 'too-far' ? 400 : 503;
        sendStatus(res, status, outcome === 'busy' ? 'too many held requests' : outcome);
        return true;
      }
      // Cacheable only when it was an answer for that msn/part (not a playlist that cannot block).
      blocked = watcher.deliveryState() !== null;
    }
    const text = watcher.playlistText();
    if (text === null) return false;
    const body = Buffer.from(text, 'utf8');
    const targetS = watcher.targetDurationS() ?? 1;
    res.writeHead(200, {
      'Content-Type': 'application/vnd.apple.mpegurl',
      'Content-Length': body.length,
      // A blocked answer is for that msn/part for good; a plain reload must not be cached.
      'Cache-Control': blocked ? `max-age=${BLOCKED_CACHE_TARGET_DURATIONS * targetS}` : 'no-cache',
    });
    if (req.method === 'HEAD') {
      res.end();
      return true;
    }
    count.onStart();
    count.onBytes(body.length);
    res.end(body);
    return true;
  }

  /** Streams a segment that is being written; false if `file` is not one (the origin answers). */
  async serveSegment(
    req: IncomingMessage,
    res: ServerResponse,
    file: string,
    contentType: string,
    count: Counting,
  ): Promise<boolean> {
    const found = this.growingSegment(file);
    if (found === null) return false;
    const range = parseGrowingRange(req.headers.range);
    if (range === null) {
      sendStatus(res, 416, 'unsupported range for a segment being written');
      return true;
    }
    if (this.held >= this.maxHeld) {
      sendStatus(res, 503, 'too many held requests');
      return true;
    }
    this.held++;
    try {
      await streamGrowing(req, res, found.watcher, file, range, contentType, count);
    } finally {
      this.held--;
    }
    return true;
  }

  private growingSegment(file: string): { watcher: PlaylistWatcher; progress: SegmentProgress } | null {
    for (const entry of this.watchers.values()) {
      const progress = entry.watcher.progress(file);
      if (progress !== null && progress.finalBytes === null) {
        entry.usedMs = Date.now();
        return { watcher: entry.watcher, progress };
      }
    }
    return null;
  }

  private async watcherFor(file: string): Promise<{ watcher: PlaylistWatcher; ready: Promise<void> } | null> {
    const existing = this.watchers.get(file);
    if (existing !== undefined) {
      existing.usedMs = Date.now();
      return existing;
    }
    // Only a playlist that exists gets a watcher: requests for made-up names must not take the slots.
    const isFile = (await stat(file).catch(() => null))?.isFile() ?? false;
    if (!isFile || this.closed || this.watchers.size >= MAX_WATCHERS) return null;
    const raced = this.watchers.get(file);
    if (raced !== undefined) return raced;
    const watcher = new PlaylistWatcher({
      playlistFile: file,
      partTargetMs: this.options.partTargetMs,
      pollMs: this.options.pollMs ?? DEFAULT_POLL_MS,
      onProblem: (message, fields) => this.options.log?.('warn', message, { playlist: file, ...fields }),
    });
    const entry = { watcher, ready: watcher.start(), usedMs: Date.now() };
    this.watchers.set(file, entry);
    return entry;
  }

  private dropIdle(): void {
    const now = Date.now();
    for (const [file, entry] of this.watchers)
      if (now - entry.usedMs > WATCHER_IDLE_MS && this.held === 0) {
        entry.watcher.stop();
        this.watchers.delete(file);
      }
  }

  /** Holds a blocking reload until its msn/part is listed, bounded in time and in number. */
  private async waitFor(
    watcher: PlaylistWatcher,
    res: ServerResponse,
    msn: number,
    part: number | null,
  ): Promise<'ready' | 'too-far' | 'timeout' | 'busy' | 'gone'> {
    const decide = (): 'ready' | 'too-far' | 'wait' => {
      const state = watcher.deliveryState();
      return state === null ? 'wait' : deliveryDecision(state, msn, part);
    };
    // A playlist this module cannot read does not advertise blocking reload: answer at once.
    if (watcher.deliveryState() === null) return 'ready';
    const first = decide();
    if (first !== 'wait') return first;
    if (this.held >= this.maxHeld) return 'busy';
    const timeoutMs = BLOCK_TARGET_DURATIONS * (watcher.targetDurationS() ?? 2) * 1000;
    this.held++;
    try {
      return await new Promise((resolve) => {
        const finish = (outcome: 'ready' | 'too-far' | 'timeout' | 'gone'): void => {
          clearTimeout(timer);
          unsubscribe();
          res.off('close', onClose);
          resolve(outcome);
        };
        const onClose = (): void => {
          finish('gone');
        };
        const timer = setTimeout(() => {
          finish('timeout');
        }, timeoutMs);
        const unsubscribe = watcher.subscribe(() => {
          if (watcher.isStopped) {
            finish('timeout');
            return;
          }
          const d = decide();
          if (d !== 'wait') finish(d);
        });
        res.on('close', onClose);
      });
    } finally {
      this.held--;
    }
  }
}

type GrowingRange = { readonly start: number; readonly end: number | null; readonly partial: boolean };

/** No Range, `bytes=N-` or `bytes=a-b`; null for what a growing resource cannot answer (suffix, lists). */
export function parseGrowingRange(header: string | undefined): GrowingRange | null {
  if (header === undefined) return { start: 0, end: null, partial: false };
  const m = /^bytes=(\d{1,15})-(\d{0,15})$/.exec(header.trim());
  if (m === null) return null;
  const start = Number(m[1]);
  const end = m[2] === '' || m[2] === undefined ? null : Number(m[2]);
  if (end !== null && end < start) return null;
  return { start, end, partial: start > 0 || end !== null };
}

async function streamGrowing(
  req: IncomingMessage,
  res: ServerResponse,
  watcher: PlaylistWatcher,
  file: string,
  range: GrowingRange,
  contentType: string,
  count: Counting,
): Promise<void> {
  // An object, so the checks after each await read the current value.
  const client = { closed: false };
  let wake: (() => void) | null = null;
  res.on('close', () => {
    client.closed = true;
    wake?.();
  });
  const unsubscribe = watcher.subscribe(() => wake?.());
  /** Waits for the watcher's next change (or a stall); false on a stall or a closed client. */
  const nextChange = (): Promise<boolean> =>
    new Promise((resolve) => {
      const timer = setTimeout(() => {
        wake = null;
        resolve(false);
      }, STALL_MS);
      wake = () => {
        clearTimeout(timer);
        wake = null;
        resolve(!client.closed);
      };
    });
  let handle: FileHandle | null = null;
  try {
    // A closed range is answered once its bytes are there, with its exact length.
    const stateNow = (): SegmentProgress | null => watcher.progress(file);
    if (range.end !== null) {
      for (;;) {
        const p = stateNow();
        if (p === null || client.closed) {
          destroy(res);
          return;
        }
        if (p.finalBytes !== null || p.availableBytes > range.end) break;
        if (!(await nextChange())) {
          destroy(res);
          return;
        }
      }
    }
    const first = stateNow();
    if (first === null) {
      destroy(res);
      return;
    }
    const endExclusive = (p: SegmentProgress): number =>
      Math.min(range.end === null ? Infinity : range.end + 1, p.finalBytes ?? p.availableBytes);
    if (range.end !== null || first.finalBytes !== null) {
      const final = first.finalBytes;
      const end = endExclusive(first);
      if (range.start >= end && (final !== null || range.end !== null)) {
        res.writeHead(416, { 'Content-Range': `bytes */${final ?? '*'}`, 'Content-Length': 0 });
        res.end();
        return;
      }
    }
    res.setHeader('Content-Type', contentType);
    res.setHeader('Cache-Control', 'no-cache');
    if (range.end !== null) {
      const end = endExclusive(first);
      res.setHeader('Content-Range', `bytes ${range.start}-${end - 1}/${first.finalBytes ?? '*'}`);
      res.setHeader('Content-Length', end - range.start);
    } else res.setHeader(GROWING_HEADER, '1');
    res.statusCode = range.partial ? 206 : 200;
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    res.flushHeaders();
    count.onStart();
    let pos = range.start;
    const limit = range.end === null ? null : endExclusive(first);
    const buffer = Buffer.alloc(READ_CHUNK_BYTES);
    for (;;) {
      if (client.closed) return;
      const p = stateNow();
      if (p === null) {
        destroy(res);
        return;
      }
      const available = limit ?? endExclusive(p);
      if (pos < available) {
        handle ??= await openGrowing(file);
        if (handle === null) {
          destroy(res);
          return;
        }
        const want = Math.min(available - pos, READ_CHUNK_BYTES);
        const { bytesRead } = await handle.read(buffer, 0, want, pos);
        if (bytesRead === 0) {
          destroy(res);
          return;
        }
        pos += bytesRead;
        count.onBytes(bytesRead);
        // A copy: `buffer` is reused while the socket may still hold the chunk.
        if (!res.write(Buffer.from(buffer.subarray(0, bytesRead))))
          await new Promise<void>((resolve) => {
            const done = (): void => {
              res.off('drain', done);
              res.off('close', done);
              resolve();
            };
            res.on('drain', done);
            res.on('close', done);
          });
        continue;
      }
      if ((limit !== null && pos >= limit) || (p.finalBytes !== null && pos >= p.finalBytes)) {
        res.end();
        return;
      }
      if (!(await nextChange())) {
        destroy(res);
        return;
      }
    }
  } catch {
    destroy(res);
  } finally {
    unsubscribe();
    await handle?.close().catch(() => undefined);
  }
}

/** The growing file: its final name, or `.tmp` while ffmpeg's temp_file mode writes it. */
async function openGrowing(file: string): Promise<FileHandle | null> {
  for (const path of [file, `${file}.tmp`, file])
    try {
      return await open(path, 'r');
    } catch {
      // Not there under this name (renamed just now): the next one.
    }
  return null;
}

function destroy(res: ServerResponse): void {
  if (!res.headersSent) sendStatus(res, 503, 'segment not available');
  else res.destroy();
}
