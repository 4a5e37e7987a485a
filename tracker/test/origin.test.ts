/** The HLS origin and static files over real HTTP on 127.0.0.1, with the counters benches read. */
import { mkdtemp, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTracker, type OriginStats, type Tracker } from '@chunkycast/tracker';

let root: string;
let originDir: string;
let staticDir: string;
const SEGMENT = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));
const PLAYLIST = '#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\nseg1.ts\n';

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'chunkycast-origin-'));
  originDir = join(root, 'live');
  staticDir = join(root, 'static');
  await mkdir(join(originDir, 'sub'), { recursive: true });
  await mkdir(staticDir);
  await writeFile(join(root, 'secret.txt'), 'SECRET');
  await writeFile(join(originDir, 'live.m3u8'), PLAYLIST);
  await writeFile(join(originDir, 'seg1.ts'), SEGMENT);
  await writeFile(join(originDir, 'sub', 'init.mp4'), Buffer.alloc(10));
  await writeFile(join(originDir, 'a.m4s'), Buffer.alloc(3));
  await writeFile(join(originDir, 'a.aac'), Buffer.alloc(3));
  await symlink(join(root, 'secret.txt'), join(originDir, 'escape.ts'));
  await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>demo</title>');
  await writeFile(join(staticDir, 'app.js'), 'console.log(1)');
  await writeFile(join(staticDir, 'app.js.map'), '{}');
  await writeFile(join(staticDir, 'style.css'), 'body{}');
  await writeFile(join(staticDir, 'logo.svg'), '<svg/>');
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const KEY = 'origin-test-key';
const AUTH = { Authorization: `Bearer ${KEY}` };

const trackers: Tracker[] = [];
afterEach(async () => {
  await Promise.all(trackers.splice(0).map((t) => t.close()));
});

async function start(withDirs = true): Promise<Tracker> {
  const tracker = await createTracker({
    host: '127.0.0.1',
    port: 0,
    broadcasterKey: KEY,
    ...(withDirs ? { originDir, staticDir } : {}),
  });
  trackers.push(tracker);
  return tracker;
}

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** Raw HTTP, because fetch normalises `..` out of a URL before it is ever sent. */
function get(
  tracker: Tracker,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: tracker.port, path, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

async function stats(tracker: Tracker): Promise<OriginStats> {
  const res = await fetch(`${tracker.url}/debug/origin`, { headers: AUTH });
  return (await res.json()) as OriginStats;
}

describe('origin', () => {
  it('serves playlists uncached and media with their types, CORS on everything', async () => {
    const tracker = await start();
    const playlist = await get(tracker, '/live/live.m3u8');
    expect(playlist.status).toBe(200);
    expect(playlist.headers['content-type']).toBe('application/vnd.apple.mpegurl');
    expect(playlist.headers['cache-control']).toBe('no-cache');
    expect(playlist.headers['access-control-allow-origin']).toBe('*');
    expect(playlist.body.toString()).toBe(PLAYLIST);
    const seg = await get(tracker, '/live/seg1.ts');
    expect(seg.headers['content-type']).toBe('video/mp2t');
    expect(seg.headers['access-control-allow-origin']).toBe('*');
    expect(seg.body.equals(SEGMENT)).toBe(true);
    expect((await get(tracker, '/live/sub/init.mp4')).headers['content-type']).toBe('video/mp4');
    expect((await get(tracker, '/live/a.m4s')).headers['content-type']).toBe('video/mp4');
    expect((await get(tracker, '/live/a.aac')).headers['content-type']).toBe('audio/aac');
    const preflight = await get(
      tracker,
      '/live/seg1.ts',
      { 'Access-Control-Request-Headers': 'range' },
      'OPTIONS',
    );
    expect(preflight.status).toBe(204);
    expect(String(preflight.headers['access-control-allow-headers'])).toContain('X-Chunkycast-Role');
  });

  it('counts playlist and media bytes, split by the source’s role header, and resets', async () => {
    const tracker = await start();
    await get(tracker, '/live/live.m3u8');
    await get(tracker, '/live/seg1.ts');
    await get(tracker, '/live/seg1.ts', { 'X-Chunkycast-Role': 'source' });
    await get(tracker, '/live/seg1.ts', { Range: 'bytes=0-99' });
    await get(tracker, '/live/seg1.ts', {}, 'HEAD');
    await get(tracker, '/live/missing.ts');
    const s = await stats(tracker);
    expect(s).toMatchObject({
      playlistRequests: 1,
      playlistBytes: Buffer.byteLength(PLAYLIST),
      mediaRequests: 3,
      mediaBytes: 2 * SEGMENT.length + 100,
      sourceMediaRequests: 1,
      sourceMediaBytes: SEGMENT.length,
      viewerMediaRequests: 2,
      viewerMediaBytes: SEGMENT.length + 100,
      notFound: 1,
    });
    expect(tracker.originStats()).toEqual(s);
    const reset = await fetch(`${tracker.url}/debug/origin/reset`, { method: 'POST', headers: AUTH });
    expect(reset.status).toBe(200);
    const after = await stats(tracker);
    expect(after).toMatchObject({
      mediaBytes: 0,
      mediaRequests: 0,
      playlistBytes: 0,
      playlistRequests: 0,
      notFound: 0,
    });
    expect((await fetch(`${tracker.url}/debug/origin/reset`, { headers: AUTH })).status).toBe(405);
  });

  it('answers single ranges with 206 and unsatisfiable or malformed ones with 416', async () => {
    const tracker = await start();
    const size = SEGMENT.length;
    const mid = await get(tracker, '/live/seg1.ts', { Range: 'bytes=2-5' });
    expect(mid.status).toBe(206);
    expect(mid.headers['content-range']).toBe(`bytes 2-5/${size}`);
    expect(mid.headers['content-length']).toBe('4');
    expect(mid.body.equals(SEGMENT.subarray(2, 6))).toBe(true);
    const open = await get(tracker, '/live/seg1.ts', { Range: 'bytes=990-' });
    expect(open.status).toBe(206);
    expect(open.body.equals(SEGMENT.subarray(990))).toBe(true);
    const suffix = await get(tracker, '/live/seg1.ts', { Range: 'bytes=-3' });
    expect(suffix.headers['content-range']).toBe(`bytes ${size - 3}-${size - 1}/${size}`);
    expect(suffix.body.equals(SEGMENT.subarray(size - 3))).toBe(true);
    const clipped = await get(tracker, '/live/seg1.ts', { Range: 'bytes=995-5000' });
    expect(clipped.headers['content-range']).toBe(`bytes 995-${size - 1}/${size}`);
    for (const range of ['bytes=5000-', 'bytes=5-2', 'bytes=abc', 'items=0-1', 'bytes=-0']) {
      const bad = await get(tracker, '/live/seg1.ts', { Range: range });
      expect(bad.status, range).toBe(416);
      expect(bad.headers['content-range']).toBe(`bytes */${size}`);
    }
    // Several ranges: the whole file (allowed by HTTP; nobody here needs multipart).
    const multi = await get(tracker, '/live/seg1.ts', { Range: 'bytes=0-1,5-6' });
    expect(multi.status).toBe(200);
    expect(multi.body.length).toBe(size);
  });

  it('answers HEAD with headers only', async () => {
    const tracker = await start();
    const head = await get(tracker, '/live/seg1.ts', {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe(String(SEGMENT.length));
    expect(head.body.length).toBe(0);
  });

  it('refuses path traversal and symlinks leading out, and 404s missing files', async () => {
    const tracker = await start();
    for (const path of [
      '/live/../secret.txt',
      '/live/%2e%2e/secret.txt',
      '/live/..%2fsecret.txt',
      '/live/%2e%2e%2fsecret.txt',
      '/live/sub/..%5c..%5csecret.txt',
      '/live/%00seg1.ts',
      '/live/%zz',
      '/live/escape.ts',
      '/live/sub/../../secret.txt',
    ]) {
      const res = await get(tracker, path);
      expect([400, 404], path).toContain(res.status);
      expect(res.body.toString(), path).not.toContain('SECRET');
    }
    expect((await get(tracker, '/live/nope.ts')).status).toBe(404);
    expect((await get(tracker, '/live/sub')).status).toBe(404);
    expect((await get(tracker, '/live/')).status).toBe(404);
    expect((await get(tracker, '/live/seg1.ts', {}, 'POST')).status).toBe(405);
  });

  it('404s /live/ without an origin directory and reports zero counters', async () => {
    const tracker = await start(false);
    expect((await get(tracker, '/live/live.m3u8')).status).toBe(404);
    expect((await get(tracker, '/')).status).toBe(404);
    expect(await stats(tracker)).toMatchObject({ mediaBytes: 0, playlistRequests: 0 });
  });
});

describe('static files', () => {
  it('serves index.html for / and the demo’s files with their types', async () => {
    const tracker = await start();
    const index = await get(tracker, '/');
    expect(index.status).toBe(200);
    expect(index.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(index.body.toString()).toContain('<title>demo</title>');
    const types: Record<string, string> = {
      '/app.js': 'text/javascript; charset=utf-8',
      '/app.js.map': 'application/json; charset=utf-8',
      '/style.css': 'text/css; charset=utf-8',
      '/logo.svg': 'image/svg+xml',
      '/index.html?x=1': 'text/html; charset=utf-8',
    };
    for (const [path, type] of Object.entries(types)) {
      const res = await get(tracker, path);
      expect(res.status, path).toBe(200);
      expect(res.headers['content-type'], path).toBe(type);
    }
    expect((await get(tracker, '/missing.js')).status).toBe(404);
    expect((await get(tracker, '/../secret.txt')).body.toString()).not.toContain('SECRET');
  });
});
