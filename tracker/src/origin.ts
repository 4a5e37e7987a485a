/**
 * Static files over HTTP: the HLS origin (/live/*, with the byte counters that show what the mesh
 * saves) and the demo's files. Paths are resolved segment by segment from the raw request path, so
 * no decoding or normalisation step can smuggle a `..` past the check.
 */
import { open, realpath, type FileHandle } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { LlHlsOrigin, type Counting, type LlHlsOptions } from './ll-hls/index.js';

/** Header the true source sets on its own origin fetches, so its bytes are told apart from viewers'. */
export const ROLE_HEADER = 'x-chunkycast-role';

export const MEDIA_TYPES: Readonly<Record<string, string>> = {
  '.m3u8': 'application/vnd.apple.mpegurl',
  '.ts': 'video/mp2t',
  '.m4s': 'video/mp4',
  '.mp4': 'video/mp4',
  '.aac': 'audio/aac',
  '.vtt': 'text/vtt; charset=utf-8',
};

export const STATIC_TYPES: Readonly<Record<string, string>> = {
  ...MEDIA_TYPES,
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

export interface OriginStats {
  /** Body bytes of media (non-playlist) responses, all requesters. */
  readonly mediaBytes: number;
  readonly mediaRequests: number;
  readonly playlistBytes: number;
  readonly playlistRequests: number;
  /** The media counters for requests carrying `X-Chunkycast-Role: source` (the true source's ingest). */
  readonly sourceMediaBytes: number;
  readonly sourceMediaRequests: number;
  /** The media counters for everyone else (viewers falling back to the origin). */
  readonly viewerMediaBytes: number;
  readonly viewerMediaRequests: number;
  /** Requests under /live/ answered 404. */
  readonly notFound: number;
  /** Unix ms at which counting started (creation or the last reset). */
  readonly sinceMs: number;
}

type MutableStats = { -readonly [K in keyof OriginStats]: OriginStats[K] };

function zeroStats(): MutableStats {
  return {
    mediaBytes: 0,
    mediaRequests: 0,
    playlistBytes: 0,
    playlistRequests: 0,
    sourceMediaBytes: 0,
    sourceMediaRequests: 0,
    viewerMediaBytes: 0,
    viewerMediaRequests: 0,
    notFound: 0,
    sinceMs: Date.now(),
  };
}

/** Result of mapping a request path under a root: a file path, or why not. */
export type Resolved =
  { readonly ok: true; readonly file: string } | { readonly ok: false; readonly status: 400 | 404 };

/**
 * Maps the raw (still percent-encoded) path below a mount point to a file inside `root`. Any `.`
 * or `..` segment, a decoded `/`, `\` or NUL, or bad percent-encoding is refused with 400.
 */
export function resolveInside(root: string, rawRelative: string): Resolved {
  const segments: string[] = [];
  for (const encoded of rawRelative.split('/')) {
    if (encoded === '') continue;
    let segment: string;
    try {
      segment = decodeURIComponent(encoded);
    } catch {
      return { ok: false, status: 400 };
    }
    if (segment === '.' || segment === '..' || /[/\\\0]/.test(segment)) return { ok: false, status: 400 };
    segments.push(segment);
  }
  if (segments.length === 0) return { ok: false, status: 404 };
  return { ok: true, file: join(root, ...segments) };
}

/** A byte range to send, or the whole file. */
type RangeChoice =
  | { readonly kind: 'whole' }
  | { readonly kind: 'range'; readonly start: number; readonly end: number }
  | { readonly kind: 'unsatisfiable' };

/**
 * One `bytes=` range (first-last, first-, -suffix). Several ranges are answered with the whole file,
 * which HTTP allows and saves writing multipart bodies nobody here asks for. Anything else that
 * is not a valid range gets 416 rather than silently the whole file, so a buggy client sees it.
 */
export function parseRange(header: string | undefined, size: number): RangeChoice {
  if (header === undefined) return { kind: 'whole' };
  const m = /^bytes=(.+)$/.exec(header.trim());
  if (m === null) return { kind: 'unsatisfiable' };
  const spec = m[1] ?? '';
  if (spec.includes(',')) return { kind: 'whole' };
  const r = /^\s*(\d*)-(\d*)\s*$/.exec(spec);
  if (r === null) return { kind: 'unsatisfiable' };
  const first = r[1] ?? '';
  const last = r[2] ?? '';
  if (first === '' && last === '') return { kind: 'unsatisfiable' };
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'range', start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  if (start >= size) return { kind: 'unsatisfiable' };
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (end < start) return { kind: 'unsatisfiable' };
  return { kind: 'range', start, end };
}

export interface SendOptions {
  readonly contentType: string;
  readonly cacheControl?: string;
  /** Called once the status is known, before any body byte (only for 200/206 answers to GET). */
  readonly onStart?: () => void;
  /** Called with each body chunk's length as it is handed to the socket. */
  readonly onBytes?: (n: number) => void;
}

/** Sends a file (GET or HEAD, honouring Range); false if it is not a readable regular file. */
export async function sendFile(
  req: IncomingMessage,
  res: ServerResponse,
  file: string,
  options: SendOptions,
): Promise<boolean> {
  let handle: FileHandle;
  try {
    handle = await open(file, 'r');
  } catch {
    return false;
  }
  try {
    // fstat on the open handle: a packager replacing the file by rename cannot change the size
    // under us between the stat and the read.
    const stat = await handle.stat();
    if (!stat.isFile()) return false;
    const size = stat.size;
    const range = parseRange(req.headers.range, size);
    res.setHeader('Content-Type', options.contentType);
    res.setHeader('Accept-Ranges', 'bytes');
    if (options.cacheControl !== undefined) res.setHeader('Cache-Control', options.cacheControl);
    if (range.kind === 'unsatisfiable') {
      res.writeHead(416, { 'Content-Range': `bytes */${size}`, 'Content-Length': 0 });
      res.end();
      return true;
    }
    const start = range.kind === 'range' ? range.start : 0;
    const end = range.kind === 'range' ? range.end : size - 1;
    const length = size === 0 ? 0 : end - start + 1;
    if (range.kind === 'range') res.setHeader('Content-Range', `bytes ${start}-${end}/${size}`);
    res.setHeader('Content-Length', length);
    res.statusCode = range.kind === 'range' ? 206 : 200;
    if (req.method === 'HEAD' || length === 0) {
      if (req.method !== 'HEAD') options.onStart?.();
      res.end();
      return true;
    }
    options.onStart?.();
    const body = handle.createReadStream({ start, end, autoClose: false });
    const onBytes = options.onBytes;
    if (onBytes !== undefined)
      body.on('data', (chunk: Buffer | string) => {
        onBytes(chunk.length);
      });
    try {
      await pipeline(body, res);
    } catch {
      // The client went away mid-body; nothing to answer, and the counters already hold what was sent.
    }
    return true;
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** The HLS origin: /live/* from one directory, counting what it serves. */
export class Origin {
  private stats: MutableStats = zeroStats();
  private realRoot: Promise<string> | null = null;
  /** The LL-HLS view (`--ll-hls`); null serves the packager's files as they are. */
  private readonly llHls: LlHlsOrigin | null;

  constructor(
    readonly dir: string,
    options: { readonly llHls?: LlHlsOptions | null } = {},
  ) {
    this.llHls = options.llHls == null ? null : new LlHlsOrigin(options.llHls);
  }

  /** Stops following playlists (LL-HLS); requests still held end as their timers fire. */
  close(): void {
    this.llHls?.close();
  }

  snapshot(): OriginStats {
    return { ...this.stats };
  }

  reset(): void {
    this.stats = zeroStats();
  }

  /** Serves `rawRelative` (the percent-encoded path after /live/). */
  async serve(req: IncomingMessage, res: ServerResponse, rawRelative: string): Promise<void> {
    const resolved = resolveInside(this.dir, rawRelative);
    if (!resolved.ok) {
      if (resolved.status === 404) this.stats.notFound++;
      sendStatus(res, resolved.status);
      return;
    }
    if (!(await this.isInsideRoot(resolved.file))) {
      this.stats.notFound++;
      sendStatus(res, 404);
      return;
    }
    const ext = extname(resolved.file).toLowerCase();
    const playlist = ext === '.m3u8';
    const fromSource = req.headers[ROLE_HEADER] === 'source';
    const stats = (): MutableStats => this.stats;
    const contentType = MEDIA_TYPES[ext] ?? 'application/octet-stream';
    const counting: Counting = {
      onStart: () => {
        const s = stats();
        if (playlist) s.playlistRequests++;
        else {
          s.mediaRequests++;
          if (fromSource) s.sourceMediaRequests++;
          else s.viewerMediaRequests++;
        }
      },
      onBytes: (n) => {
        // Read through stats() so bytes still in flight at a reset land in the new run's counters.
        const s = stats();
        if (playlist) s.playlistBytes += n;
        else {
          s.mediaBytes += n;
          if (fromSource) s.sourceMediaBytes += n;
          else s.viewerMediaBytes += n;
        }
      },
    };
    if (this.llHls !== null) {
      const handled = playlist
        ? await this.llHls.servePlaylist(req, res, resolved.file, counting)
        : await this.llHls.serveSegment(req, res, resolved.file, contentType, counting);
      if (handled) return;
    }
    const sent = await sendFile(req, res, resolved.file, {
      contentType,
      // Live playlists change every segment; a cached one stalls playback.
      ...(playlist ? { cacheControl: 'no-cache' } : {}),
      ...counting,
    });
    if (!sent) {
      this.stats.notFound++;
      sendStatus(res, 404);
    }
  }

  /** A symlink inside the origin directory must not lead outside it. */
  private async isInsideRoot(file: string): Promise<boolean> {
    this.realRoot ??= realpath(this.dir).catch(() => this.dir);
    const root = await this.realRoot;
    let real: string;
    try {
      real = await realpath(file);
    } catch {
      // Missing: sendFile answers 404 when it cannot open it.
      return true;
    }
    return real === root || real.startsWith(root.endsWith(sep) ? root : root + sep);
  }
}

/** Serves the demo's files: `/` and directories map to index.html. */
export async function serveStatic(
  req: IncomingMessage,
  res: ServerResponse,
  dir: string,
  rawPath: string,
): Promise<void> {
  const relative = rawPath.endsWith('/') ? `${rawPath}index.html` : rawPath;
  const resolved = resolveInside(dir, relative);
  if (!resolved.ok) {
    sendStatus(res, resolved.status);
    return;
  }
  const ext = extname(resolved.file).toLowerCase();
  const sent = await sendFile(req, res, resolved.file, {
    contentType: STATIC_TYPES[ext] ?? 'application/octet-stream',
    // The demo is rebuilt between runs; revalidating keeps a stale bundle from confusing anyone.
    cacheControl: 'no-cache',
  });
  if (!sent) sendStatus(res, 404);
}

export function sendStatus(res: ServerResponse, status: number, message?: string): void {
  const body = JSON.stringify({ error: message ?? statusText(status) });
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

function statusText(status: number): string {
  switch (status) {
    case 400:
      return 'bad request path';
    case 404:
      return 'not found';
    case 405:
      return 'method not allowed';
    default:
      return `status ${status}`;
  }
}

/** All-zero counters, for a tracker without an origin directory. */
export function emptyOriginStats(): OriginStats {
  return zeroStats();
}
