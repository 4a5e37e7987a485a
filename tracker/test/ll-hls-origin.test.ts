/**
 * The origin's LL-HLS view over HTTP on 127.0.0.1, with a packager played by the test: it writes
 * synthetic MPEG-TS segments bit by bit and rewrites the playlist (atomically) after each one.
 */
import { appendFile, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Origin } from '../src/origin.js';
import { checkLowLatencyPlaylist, parseForCheck } from './ll-hls-rules.js';
import { syntheticSegment } from './ts-fixtures.js';

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
}

function get(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
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

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One 2 s segment at 30 fps, key frame first, like ffmpeg's with -g 60. */
function segmentBytes(index: number): Uint8Array {
  return syntheticSegment({ frames: 60, firstPts: 126_000 + index * 180_000, frameTicks: 3000, keyEvery: 60 })
    .bytes;
}

class TestPackager {
  private readonly listed: number[] = [];
  constructor(
    private readonly dir: string,
    private readonly targetDurationS = 2,
  ) {}

  async writePlaylist(extra = ''): Promise<void> {
    const first = this.listed[0] ?? 0;
    const lines = ['#EXTM3U', '#EXT-X-VERSION:3', `#EXT-X-TARGETDURATION:${this.targetDurationS}`];
    lines.push(`#EXT-X-MEDIA-SEQUENCE:${first}`);
    for (const n of this.listed) lines.push('#EXTINF:2.000000,', `live${n}.ts`);
    await writeFile(join(this.dir, 'live.m3u8.tmp'), `${lines.join('\n')}\n${extra}`);
    await rename(join(this.dir, 'live.m3u8.tmp'), join(this.dir, 'live.m3u8'));
  }

  /** Writes a segment whole and lists it. */
  async whole(n: number): Promise<void> {
    await writeFile(join(this.dir, `live${n}.ts`), segmentBytes(n));
    await this.list(n);
  }

  async list(n: number): Promise<void> {
    this.listed.push(n);
    // A short window, so segments leave the playlist.
    while (this.listed.length > 3) this.listed.shift();
    await this.writePlaylist();
  }

  async append(n: number, bytes: Uint8Array): Promise<void> {
    await appendFile(join(this.dir, `live${n}.ts`), bytes);
  }
}

let dir: string;
let server: Server;
let origin: Origin;
let base: string;

async function startOrigin(maxHeldRequests = 16): Promise<void> {
  origin = new Origin(dir, { llHls: { partTargetMs: 500, pollMs: 10, maxHeldRequests } });
  server = createServer((req, res) => {
    void origin.serve(req, res, (req.url ?? '/').split('?')[0]?.slice('/live/'.length) ?? '');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/live`;
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'chunkycast-llhls-origin-'));
});
afterEach(async () => {
  origin.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await rm(dir, { recursive: true, force: true });
});

describe('LL-HLS origin', () => {
  it('publishes parts of the growing segment, holds blocking reloads for them and streams the segment', async () => {
    const packager = new TestPackager(dir);
    await packager.whole(0);
    await startOrigin();
    const first = (await get(`${base}/live.m3u8`)).body.toString();
    expect(parseForCheck(first).playlist.hints).toEqual([{ type: 'PART', uri: 'live1.ts', start: 0 }]);
    expect(checkLowLatencyPlaylist(first)).toEqual([]);

    // The true source's request, before a byte of live1.ts exists.
    const streamed = get(`${base}/live1.ts`, { Range: 'bytes=0-', 'x-chunkycast-role': 'source' });
    const blocked = get(`${base}/live.m3u8?_HLS_msn=1&_HLS_part=1`);
    const segment = segmentBytes(1);
    // Half a second and a bit: the first part is closed once frame 16 starts.
    const cutAt = 188 * (1 + 16 * 4) + 100;
    await sleep(50);
    await packager.append(1, segment.subarray(0, cutAt));
    await sleep(100);
    // Part 1 is not there yet: the request is still held.
    let settled = false;
    void blocked.then(() => (settled = true));
    await sleep(50);
    expect(settled).toBe(false);
    await packager.append(1, segment.subarray(cutAt, 188 * (1 + 31 * 4)));
    const answer = await blocked;
    expect(answer.status).toBe(200);
    expect(answer.headers['cache-control']).toBe('max-age=12');
    const text = answer.body.toString();
    expect(checkLowLatencyPlaylist(text)).toEqual([]);
    const p = parseForCheck(text).playlist;
    expect(p.trailingParts.map((x) => [x.offset, x.length])).toEqual([
      [0, 188 * (1 + 15 * 4)],
      [188 * (1 + 15 * 4), 188 * 15 * 4],
    ]);
    // A listed part of the growing segment, by its byte range.
    const part = await get(`${base}/live1.ts`, { Range: `bytes=${188 * 61}-${188 * 121 - 1}` });
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes ${188 * 61}-${188 * 121 - 1}/*`);
    expect(part.body.equals(Buffer.from(segment.subarray(188 * 61, 188 * 121)))).toBe(true);
    // The preload hint's open range, then the rest of the segment, then it is listed.
    const hinted = get(`${base}/live1.ts`, { Range: `bytes=${p.hints[0]?.start ?? -1}-` });
    await sleep(30);
    await packager.append(1, segment.subarray(188 * (1 + 31 * 4)));
    await sleep(30);
    expect(origin.snapshot().sourceMediaBytes).toBeGreaterThan(0);
    await packager.list(1);
    const all = await streamed;
    expect(all.status).toBe(200);
    expect(all.headers['content-length']).toBeUndefined();
    expect(all.body.equals(Buffer.from(segment))).toBe(true);
    const rest = await hinted;
    expect(rest.status).toBe(206);
    expect(rest.body.equals(Buffer.from(segment.subarray(188 * 121)))).toBe(true);
    const stats = origin.snapshot();
    expect(stats.sourceMediaBytes).toBe(segment.length);
    expect(stats.sourceMediaRequests).toBe(1);
    expect(stats.viewerMediaBytes).toBe(part.body.length + rest.body.length);

    // Now complete: four parts covering the file, then a hint for live2.ts.
    const done = (await get(`${base}/live.m3u8?_HLS_msn=1`)).body.toString();
    expect(checkLowLatencyPlaylist(done, new Map([['live1.ts', segment.length]]))).toEqual([]);
    const listed = parseForCheck(done).playlist;
    expect(listed.segments.find((s) => s.uri === 'live1.ts')?.parts).toHaveLength(4);
    expect(listed.hints[0]).toEqual({ type: 'PART', uri: 'live2.ts', start: 0 });
  });

  it('refuses blocking reloads too far ahead or malformed, and ignores other parameters', async () => {
    const packager = new TestPackager(dir);
    await packager.whole(5);
    await startOrigin();
    expect((await get(`${base}/live.m3u8?_HLS_msn=8`)).status).toBe(400);
    expect((await get(`${base}/live.m3u8?_HLS_msn=6&_HLS_part=7`)).status).toBe(400);
    expect((await get(`${base}/live.m3u8?_HLS_part=0`)).status).toBe(400);
    expect((await get(`${base}/live.m3u8?_HLS_msn=abc`)).status).toBe(400);
    const plain = await get(`${base}/live.m3u8?x=%zz&_HLS_skip=YES`);
    expect(plain.status).toBe(200);
    expect(plain.headers['cache-control']).toBe('no-cache');
    expect((await get(`${base}/live.m3u8?_HLS_msn=5`)).status).toBe(200);
  });

  it('answers 503 beyond the held-request limit, and when the segment does not come in time', async () => {
    const packager = new TestPackager(dir, 1);
    await packager.whole(0);
    await startOrigin(1);
    const started = Date.now();
    const held = get(`${base}/live.m3u8?_HLS_msn=1`);
    await sleep(50);
    const busy = await get(`${base}/live.m3u8?_HLS_msn=1`);
    expect(busy.status).toBe(503);
    expect(busy.body.toString()).toMatch(/too many held requests/);
    expect((await get(`${base}/live1.ts`)).status).toBe(503);
    // Three target durations (1 s each) later, the held one gives up.
    const late = await held;
    expect(late.status).toBe(503);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
    expect(origin.snapshot().playlistRequests).toBe(0);
  });

  it('gives no parts for a segment that is not MPEG-TS, and still serves it and the playlist', async () => {
    const packager = new TestPackager(dir);
    await packager.whole(0);
    await startOrigin();
    await get(`${base}/live.m3u8`);
    const garbage = Buffer.alloc(5000, 0x47);
    for (let i = 0; i < garbage.length; i += 7) garbage[i] = i & 0xff;
    const streamed = get(`${base}/live1.ts`);
    await packager.append(1, garbage);
    await sleep(60);
    const text = (await get(`${base}/live.m3u8`)).body.toString();
    expect(text).not.toContain('live1.ts');
    expect(checkLowLatencyPlaylist(text)).toEqual([]);
    await packager.list(1);
    expect((await streamed).body.equals(garbage)).toBe(true);
    const after = (await get(`${base}/live.m3u8`)).body.toString();
    expect(parseForCheck(after).playlist.segments.find((s) => s.uri === 'live1.ts')?.parts).toEqual([]);
    expect(after).toContain('URI="live2.ts",BYTERANGE-START=0');
  });

  it('gives no watcher to a playlist that does not exist, so made-up names cannot take the slots', async () => {
    const packager = new TestPackager(dir);
    await packager.whole(0);
    await startOrigin();
    for (let i = 0; i < 20; i++) expect((await get(`${base}/nothing${i}.m3u8`)).status).toBe(404);
    expect((await get(`${base}/live.m3u8`)).body.toString()).toContain('#EXT-X-PRELOAD-HINT');
  });

  it('answers 404 for a segment neither listed nor being written, and forgets segments that left', async () => {
    const packager = new TestPackager(dir);
    await packager.whole(0);
    await startOrigin();
    await get(`${base}/live.m3u8`);
    expect((await get(`${base}/live7.ts`)).status).toBe(404);
    for (let n = 1; n <= 4; n++) {
      const bytes = segmentBytes(n);
      await packager.append(n, bytes.subarray(0, 1000));
      await sleep(30);
      await packager.append(n, bytes.subarray(1000));
      await sleep(30);
      await packager.list(n);
      await get(`${base}/live.m3u8?_HLS_msn=${n}`);
    }
    const text = (await get(`${base}/live.m3u8`)).body.toString();
    const p = parseForCheck(text).playlist;
    expect(p.segments.map((s) => s.uri)).toEqual(['live2.ts', 'live3.ts', 'live4.ts']);
    expect(p.segments.map((s) => s.parts.length)).toEqual([4, 4, 4]);
    expect(text).not.toContain('live1.ts');
  });

  it('serves a playlist it cannot read as it is, answering a blocking reload at once (it cannot block)', async () => {
    const odd = '#EXTM3U\n#EXTINF:abc,\nlive1.ts\n';
    await writeFile(join(dir, 'live.m3u8'), odd);
    await startOrigin();
    expect((await get(`${base}/live.m3u8`)).body.toString()).toBe(odd);
    const blocked = await get(`${base}/live.m3u8?_HLS_msn=1`);
    expect(blocked.body.toString()).toBe(odd);
    expect(blocked.headers['cache-control']).toBe('no-cache');
    expect((await get(`${base}/live2.ts`)).status).toBe(404);
  });

  it("serves a real LL-HLS packager's playlist unchanged, with blocking reload", async () => {
    const ll = [
      '#EXTM3U',
      '#EXT-X-VERSION:9',
      '#EXT-X-TARGETDURATION:2',
      '#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.0',
      '#EXT-X-PART-INF:PART-TARGET=0.333',
      '#EXT-X-MEDIA-SEQUENCE:3',
      '#EXTINF:2.0,',
      'seg3.mp4',
      '#EXT-X-PART:DURATION=0.333,URI="part4.0.mp4",INDEPENDENT=YES',
      '',
    ].join('\n');
    await writeFile(join(dir, 'live.m3u8'), ll);
    await startOrigin();
    expect((await get(`${base}/live.m3u8`)).body.toString()).toBe(ll);
    expect((await get(`${base}/live.m3u8?_HLS_msn=4&_HLS_part=0`)).body.toString()).toBe(ll);
    const held = get(`${base}/live.m3u8?_HLS_msn=4&_HLS_part=1`);
    const next = `${ll}#EXT-X-PART:DURATION=0.333,URI="part4.1.mp4"\n`;
    await sleep(50);
    await writeFile(join(dir, 'live.m3u8.tmp'), next);
    await rename(join(dir, 'live.m3u8.tmp'), join(dir, 'live.m3u8'));
    expect((await held).body.toString()).toBe(next);
  });
});
