/**
 * The live test stream: an ffmpeg test pattern packaged as live HLS into a directory the tracker
 * serves as its origin, and a watcher that records when each segment was finished and how big it is
 * (the benchmarks' "one stream copy" and live delay are measured against it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stopProcess, prioritiseBroadcaster, tieToParent } from '../lib/process.js';
import { Ring, waitFor } from '../lib/wait.js';

/** How often the watcher reads the playlist. */
const WATCH_INTERVAL_MS = 200;
/** Video frames per second of the test pattern (a keyframe starts every segment). */
const FRAMES_PER_S = 30;

export interface PlaylistSegment {
  readonly sequence: number;
  readonly uri: string;
  /** EXTINF, seconds. */
  readonly duration: number;
}

/** Parses the media sequence and segment URIs of a media playlist. */
export function parsePlaylist(text: string): { sequence: number; segments: PlaylistSegment[] } {
  let sequence = 0;
  let duration = 0;
  const segments: PlaylistSegment[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('#EXT-X-MEDIA-SEQUENCE:')) sequence = Number(line.slice(22));
    else if (line.startsWith('#EXTINF:')) duration = Number.parseFloat(line.slice(8));
    else if (line !== '' && !line.startsWith('#')) {
      segments.push({ sequence: sequence + segments.length, uri: line, duration });
    }
  }
  return { sequence, segments };
}

export interface FinishedSegment extends PlaylistSegment {
  readonly bytes: number;
  /** Wall time (ms) the packager finished the segment. */
  readonly readyAt: number;
}

export interface LiveStream {
  /** The origin directory (live.m3u8 and its segments). */
  readonly dir: string;
  readonly playlist: string;
  /** Every finished segment seen, by media sequence number. */
  readonly segments: ReadonlyMap<number, FinishedSegment>;
  readonly proc: ChildProcess;
  readonly stderr: Ring;
  /** Sum of the bytes (and count) of segments finished in [fromMs, toMs]. */
  bytesProduced(fromMs: number, toMs?: number): { bytes: number; count: number };
  /** Waits until the playlist lists `n` segments. */
  waitForSegments(n: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface StreamOptions {
  /** The origin directory (a fresh temp dir, removed on stop, by default). */
  dir?: string;
  segmentSeconds?: number;
  /** Segments the playlist lists. */
  listSize?: number;
  /** Do not echo ffmpeg's errors to stderr (they are still kept for error messages). */
  quiet?: boolean;
  /**
   * ffmpeg's muxer. 'segment' (default) writes each segment file as it encodes (flushing every
   * packet), so the origin can stream a segment in progress and the true source push it while it is
   * written (issue 14); it lists the playlist window and the stack deletes older files. 'hls' is
   * ffmpeg's HLS muxer, which in Debian's ffmpeg 5.1 writes each segment in one go when it ends
   * (measured: the file, or its .tmp with temp_file, appears whole): nothing can be pushed early.
   */
  muxer?: 'segment' | 'hls';
}

/** Segment files kept on disk behind the playlist's window, for late joiners and slow readers. */
const SEGMENTS_KEPT_BEHIND_WINDOW = 6;

/**
 * Starts an ffmpeg test pattern (640x360 30 fps H.264 800 kbit/s + 440 Hz AAC), packaged as live
 * HLS with 2 s segments into `dir` (a fresh temp dir by default). The playlist lists 10 segments and
 * 6 more are kept on disk for late joiners. A watcher records every finished segment: its size and
 * when it appeared in the playlist (the moment the packager finished it).
 */
export function startStream({
  dir,
  segmentSeconds = 2,
  listSize = 10,
  quiet = false,
  muxer = 'segment',
}: StreamOptions = {}): Promise<LiveStream> {
  const origin = dir ?? mkdtempSync(join(tmpdir(), 'chunkycast-origin-'));
  const ownsDir = dir === undefined;
  const stderr = new Ring(50);
  const keyframeInterval = String(FRAMES_PER_S * segmentSeconds);
  // prettier-ignore
  const args = [
    '-hide_banner', '-loglevel', 'error', '-nostdin',
    '-re', '-f', 'lavfi', '-i', `testsrc=size=640x360:rate=${FRAMES_PER_S}`,
    '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000',
    '-c:v', 'libx264', '-preset', 'veryfast', '-tune', 'zerolatency',
    '-g', keyframeInterval, '-keyint_min', keyframeInterval, '-sc_threshold', '0',
    '-b:v', '800k', '-maxrate', '800k', '-bufsize', '1600k', '-pix_fmt', 'yuv420p',
    '-c:a', 'aac', '-b:a', '96k',
    ...(muxer === 'hls'
      ? [
          '-f', 'hls', '-hls_time', String(segmentSeconds), '-hls_list_size', String(listSize),
          '-hls_delete_threshold', String(SEGMENTS_KEPT_BEHIND_WINDOW),
          '-hls_flags', 'delete_segments+independent_segments+temp_file',
          join(origin, 'live.m3u8'),
        ]
      : [
          // Unshifted timestamps: shifting the AAC priming (-21 ms) made the first segment 2.021 s
          // and the segment muxer's TARGETDURATION 3 for good (players hold back in its units).
          // The TS muxer's own 1.4 s offset keeps every timestamp positive.
          '-avoid_negative_ts', 'disabled',
          '-f', 'segment', '-segment_time', String(segmentSeconds),
          '-segment_list', join(origin, 'live.m3u8'), '-segment_list_type', 'm3u8',
          '-segment_list_size', String(listSize), '-segment_list_flags', '+live',
          '-segment_format', 'mpegts', '-segment_format_options', 'flush_packets=1',
          join(origin, 'live%d.ts'),
        ]),
  ];
  const proc = spawn('ffmpeg', args, { cwd: origin, stdio: ['ignore', 'ignore', 'pipe'] });
  tieToParent(proc);
  prioritiseBroadcaster(proc);
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (chunk: string) => {
    for (const line of chunk.split('\n')) if (line.trim() !== '') stderr.push(line);
    if (!quiet) process.stderr.write(`ffmpeg: ${chunk}`);
  });
  const spawnError = new Promise<never>((_, reject) => proc.once('error', reject));
  spawnError.catch(() => undefined);

  const segments = new Map<number, FinishedSegment>();
  const playlistPath = join(origin, 'live.m3u8');
  /** The segment muxer deletes nothing: files this far behind the window go (the hls muxer's rule). */
  let prunedThrough = -1;
  const prune = (mediaSequence: number): void => {
    if (muxer !== 'segment') return;
    for (let seq = prunedThrough + 1; seq < mediaSequence - SEGMENTS_KEPT_BEHIND_WINDOW; seq++) {
      rmSync(join(origin, `live${seq}.ts`), { force: true });
      prunedThrough = seq;
    }
  };
  const poll = (): void => {
    if (!existsSync(playlistPath)) return;
    let text: string;
    try {
      text = readFileSync(playlistPath, 'utf8');
    } catch {
      return;
    }
    const now = Date.now();
    const playlist = parsePlaylist(text);
    prune(playlist.sequence);
    for (const s of playlist.segments) {
      if (segments.has(s.sequence)) continue;
      try {
        const st = statSync(join(origin, s.uri));
        // Its mtime is when it was finished: the last write (segment muxer) or the rename into
        // place (hls muxer's temp_file).
        segments.set(s.sequence, { ...s, bytes: st.size, readyAt: Math.min(now, st.mtimeMs) });
      } catch {
        // deleted already (we were slower than the playlist window): nothing to record
      }
    }
  };
  const watcher = setInterval(poll, WATCH_INTERVAL_MS);

  return Promise.resolve({
    dir: origin,
    playlist: playlistPath,
    segments,
    proc,
    stderr,
    bytesProduced(fromMs: number, toMs = Date.now()) {
      poll();
      let bytes = 0;
      let count = 0;
      for (const s of segments.values())
        if (s.readyAt >= fromMs && s.readyAt <= toMs) {
          bytes += s.bytes;
          count++;
        }
      return { bytes, count };
    },
    async waitForSegments(n: number, timeoutMs = 30_000) {
      await Promise.race([
        spawnError,
        waitFor(
          `${n} HLS segments from ffmpeg in ${origin}`,
          () => {
            if (proc.exitCode !== null) throw new Error(`ffmpeg exited (${proc.exitCode}): ${stderr.text()}`);
            poll();
            return segments.size >= n;
          },
          { timeoutMs, intervalMs: WATCH_INTERVAL_MS },
        ),
      ]);
    },
    async stop() {
      clearInterval(watcher);
      // ffmpeg finishes its files on SIGINT (SIGTERM works too); SIGKILL after 3 s.
      await stopProcess(proc, { signal: 'SIGINT', graceMs: 3000 });
      if (ownsDir) rmSync(origin, { recursive: true, force: true });
    },
  });
}
