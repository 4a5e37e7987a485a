/**
 * Follows one plain packager's playlist and the segment it is writing: polls the playlist, predicts
 * the next segment's file from the last URI, reads that file (or its `.tmp`, for ffmpeg's
 * `-hls_flags temp_file`) as it grows, scans it and cuts parts. A segment is complete once the
 * playlist lists it. Memory is bounded: no segment bytes are kept (readers read the file), only
 * the parts of segments still listed.
 */
import { open, readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { PartCutter, type Part } from './parts.js';
import {
  parsePackagerPlaylist,
  predictNextUri,
  renderLowLatencyPlaylist,
  type DeliveryState,
  type PackagerPlaylist,
} from './playlist.js';
import { TICKS_PER_SECOND, TsScanner } from './ts-scanner.js';

/** A media playlist is a few KiB; anything past this is not one this origin extends. */
export const MAX_PLAYLIST_BYTES = 1 << 20;
/** Bytes read from a growing segment per poll: a few seconds of a high-bitrate stream. */
const MAX_READ_PER_POLL_BYTES = 4 << 20;
/** A segment past this size stops being scanned (its parts are dropped): no live segment is this big. */
const MAX_SEGMENT_BYTES = 512 << 20;
/**
 * Parts per segment: a 10 s segment (a long but common target duration) at the smallest part
 * target, 100 ms, has 100; four times that covers any segment a player would still call live.
 */
export const MAX_PARTS_PER_SEGMENT = 400;
/**
 * Finished segments whose parts are kept. Parts are listed only within three target durations of
 * the end (RFC 8216bis §4.4.4.9), a handful of segments; 16 covers segments down to a fifth of the
 * target duration, and bounds memory even for an EVENT playlist that never drops a segment.
 */
export const MAX_SEGMENTS_WITH_PARTS = 16;

export interface WatcherOptions {
  readonly playlistFile: string;
  readonly partTargetMs: number;
  readonly pollMs: number;
  readonly onProblem?: (message: string, fields: Record<string, unknown>) => void;
}

interface Growing {
  readonly uri: string;
  readonly file: string;
  readonly scanner: TsScanner;
  readonly cutter: PartCutter;
  /** Bytes scanned so far: what readers of the growing segment may be given. */
  bytes: number;
  failed: boolean;
}

/** How a reader of a segment being written sees it. */
export interface SegmentProgress {
  /** Path of the final file; while written it may still be `<file>.tmp`. */
  readonly file: string;
  readonly availableBytes: number;
  /** Final size once the segment is listed; null while it grows. */
  readonly finalBytes: number | null;
}

export class PlaylistWatcher {
  private raw: string | null = null;
  private parsed: PackagerPlaylist | null = null;
  /** The LL-HLS text for the current state; null when it has to be rendered again. */
  private rendered: string | null = null;
  private readonly done = new Map<string, readonly Part[]>();
  /** Sizes of segments completed while a reader may still be following them, by file path. */
  private readonly finished = new Map<string, number>();
  private growing: Growing | null = null;
  private readonly listeners = new Set<() => void>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;
  private polling: Promise<void> | null = null;
  private readonly dir: string;

  constructor(private readonly options: WatcherOptions) {
    this.dir = dirname(options.playlistFile);
  }

  /** Polls once now and then every pollMs until stop(). */
  start(): Promise<void> {
    const first = this.poll();
    const loop = (): void => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        void this.poll().finally(loop);
      }, this.options.pollMs);
    };
    void first.finally(loop);
    return first;
  }

  /** Polls now (or joins the poll under way): for a request that found no playlist yet. */
  refresh(): Promise<void> {
    return this.poll();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.growing = null;
    this.rendered = null;
    this.done.clear();
    this.finished.clear();
    for (const l of [...this.listeners]) l();
    this.listeners.clear();
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** Called after every change (and once at stop); returns the unsubscribe function. */
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The playlist to serve: the LL-HLS view, the packager's own text (LL-HLS already, or not understood), or null. */
  playlistText(): string | null {
    const p = this.parsed;
    if (p === null || p.lowLatency) return this.raw;
    const g = this.growing;
    // Rendered once per change, however many requests read it.
    return (this.rendered ??= renderLowLatencyPlaylist({
      playlist: p,
      partTargetMs: this.options.partTargetMs,
      partsByUri: this.done,
      inProgress:
        g === null || g.failed
          ? null
          : { uri: g.uri, parts: g.cutter.parts, nextPartOffset: g.cutter.nextPartOffset ?? 0 },
    }));
  }

  targetDurationS(): number | null {
    return this.parsed?.targetDurationS ?? null;
  }

  deliveryState(): DeliveryState | null {
    const p = this.parsed;
    if (p === null) return null;
    const lastMsn = p.mediaSequence + p.segments.length - 1;
    if (p.lowLatency)
      return { lastMsn, partsAfter: p.trailingParts, partTargetMs: this.options.partTargetMs };
    const g = this.growing;
    return {
      lastMsn,
      partsAfter: g === null || g.failed || p.endList ? 0 : g.cutter.parts.length,
      partTargetMs: this.options.partTargetMs,
    };
  }

  /** The segment at `file` if it is being written (or just finished while followed); else null. */
  progress(file: string): SegmentProgress | null {
    const g = this.growing;
    if (g !== null && g.file === file) return { file, availableBytes: g.bytes, finalBytes: null };
    const size = this.finished.get(file);
    return size === undefined ? null : { file, availableBytes: size, finalBytes: size };
  }

  private poll(): Promise<void> {
    this.polling ??= this.pollOnce()
      .catch((e: unknown) => {
        this.options.onProblem?.('LL-HLS watcher poll failed', { error: String(e) });
      })
      .finally(() => {
        this.polling = null;
      });
    return this.polling;
  }

  private async pollOnce(): Promise<void> {
    if (this.stopped) return;
    let changed = false;
    const text = await readSmallFile(this.options.playlistFile);
    if (text !== this.raw) {
      let parsed: PackagerPlaylist | null = null;
      try {
        parsed = text === null ? null : parsePackagerPlaylist(text);
      } catch (e) {
        if (this.parsed !== null)
          this.options.onProblem?.('playlist not extended to LL-HLS', { error: String(e) });
      }
      await this.onPlaylist(text, parsed);
      changed = true;
    }
    if (await this.advance()) changed = true;
    if (changed) this.rendered = null;
    if (changed && !this.isStopped) for (const l of [...this.listeners]) l();
  }

  /**
   * The playlist changed: complete what it now lists, forget what left it, predict the next file.
   * Reading the rest of a finished segment comes first; the switch to the new playlist is then one
   * synchronous step, so a request never sees the new playlist with the old segment in progress.
   */
  private async onPlaylist(text: string | null, p: PackagerPlaylist | null): Promise<void> {
    const listed = new Set(p === null || p.lowLatency ? [] : p.segments.map((s) => s.uri));
    const g = this.growing;
    const finishedSize = g !== null && listed.has(g.uri) ? await this.readToEnd(g) : null;
    // From here on, no await: one consistent step.
    this.raw = text;
    this.parsed = p;
    this.rendered = null;
    if (p === null || p.lowLatency) {
      this.growing = null;
      this.done.clear();
      this.finished.clear();
      return;
    }
    if (g !== null && listed.has(g.uri)) {
      this.growing = null;
      if (finishedSize !== null) this.finishSegment(g, finishedSize);
    }
    for (const uri of this.done.keys()) if (!listed.has(uri)) this.done.delete(uri);
    for (const file of this.finished.keys())
      if (!listed.has(file.slice(this.dir.length + 1))) this.finished.delete(file);
    const last = p.segments.at(-1);
    const next = p.endList || last === undefined ? null : predictNextUri(last.uri);
    if (next === null || listed.has(next)) {
      this.growing = null;
      return;
    }
    if (this.growing?.uri !== next) {
      const targetTicks = Math.round((this.options.partTargetMs * TICKS_PER_SECOND) / 1000);
      this.growing = {
        uri: next,
        file: join(this.dir, next),
        scanner: new TsScanner(),
        cutter: new PartCutter(targetTicks, MAX_PARTS_PER_SEGMENT),
        bytes: 0,
        failed: false,
      };
    }
  }

  /** Reads the rest of a segment the playlist now lists; its final size, or null if it is gone. */
  private async readToEnd(g: Growing): Promise<number | null> {
    const size = (await stat(g.file).catch(() => null))?.size ?? null;
    if (size === null) return null;
    while (g.bytes < size) if (!(await this.readMore(g, g.file, size))) break;
    return size;
  }

  /** Closes a finished segment's last part and keeps its parts (of the latest few segments). */
  private finishSegment(g: Growing, size: number): void {
    // Readers following it get its final size from here until it leaves the playlist.
    this.finished.set(g.file, size);
    if (g.failed || g.bytes !== size || g.scanner.end() !== null) return;
    g.cutter.finish(size);
    const parts = g.cutter.parts;
    if (parts.length > 0) this.done.set(g.uri, parts);
    // Maps iterate in insertion order: the first keys are the oldest segments.
    for (const uri of this.done.keys()) if (this.done.size > MAX_SEGMENTS_WITH_PARTS) this.done.delete(uri);
  }

  /** Scans new bytes of the growing segment; true if any arrived. */
  private async advance(): Promise<boolean> {
    const g = this.growing;
    if (g === null) return false;
    for (const file of [g.file, `${g.file}.tmp`]) {
      const size = (await stat(file).catch(() => null))?.size;
      if (size === undefined) continue;
      if (size <= g.bytes) return false;
      return this.readMore(g, file, size);
    }
    return false;
  }

  private async readMore(g: Growing, file: string, size: number): Promise<boolean> {
    if (!g.failed && size > MAX_SEGMENT_BYTES) {
      g.failed = true;
      this.options.onProblem?.('segment too large for LL-HLS parts', { uri: g.uri, size });
    }
    if (g.failed) {
      // No parts for this one; readers following it still get its bytes.
      g.bytes = size;
      return true;
    }
    const want = Math.min(size - g.bytes, MAX_READ_PER_POLL_BYTES);
    const buffer = Buffer.alloc(want);
    let got = 0;
    try {
      const handle = await open(file, 'r');
      try {
        ({ bytesRead: got } = await handle.read(buffer, 0, want, g.bytes));
      } finally {
        await handle.close();
      }
    } catch {
      // Renamed (temp_file) or deleted between stat and open: the next poll looks again.
      return false;
    }
    if (got === 0 || this.growing !== g) return false;
    for (const pes of g.scanner.push(buffer.subarray(0, got))) g.cutter.add(pes);
    g.bytes += got;
    if (g.scanner.error !== null || g.cutter.overflow) {
      g.failed = true;
      this.options.onProblem?.('segment not cut into LL-HLS parts', {
        uri: g.uri,
        error: g.scanner.error?.message ?? 'too many parts',
      });
    }
    return true;
  }
}

/** A file's text if it exists and is at most MAX_PLAYLIST_BYTES; null otherwise. */
async function readSmallFile(file: string): Promise<string | null> {
  try {
    const s = await stat(file);
    if (!s.isFile() || s.size > MAX_PLAYLIST_BYTES) return null;
    const text = await readFile(file, 'utf8');
    return text.length > MAX_PLAYLIST_BYTES ? null : text;
  } catch {
    return null;
  }
}
