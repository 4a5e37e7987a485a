/**
 * The LL-HLS origin over a real packager: ffmpeg writes HLS into a temp directory for a few
 * seconds while the tracker's origin (`--ll-hls`, on 127.0.0.1) publishes parts of the segment
 * being written. Every playlist answered is checked against the RFC 8216bis rules; the parts of a
 * finished segment and a streamed GET of the segment being written must be its exact bytes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTracker, type Tracker } from '@chunkycast/tracker';
import { checkLowLatencyPlaylist, parseForCheck } from './ll-hls-rules.js';

const PART_TARGET_MS = 500;

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
  readonly ms: number;
}

function get(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks),
          ms: Date.now() - started,
        });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * ffmpeg 5.1's `hls` muxer writes each segment in one go when it is finished (measured: the file
 * appears whole, even with -flush_packets 1), so it has no growing segment to cut; its `segment`
 * muxer with flush_packets=1 writes the segment as it encodes and the playlist after each one,
 * which is the plain packager this view is for. Both are run: `progressive` picks the second.
 */
function startFfmpeg(dir: string, seconds: number, mode: 'progressive' | 'hls-temp-file'): ChildProcess {
  // environment.md's command, smaller and shorter; no delete_segments so finished files stay to compare.
  const output =
    mode === 'progressive'
      ? [
          ...['-f', 'segment', '-segment_time', '2', '-segment_list', join(dir, 'live.m3u8')],
          ...['-segment_list_type', 'm3u8', '-segment_list_size', '10', '-segment_format', 'mpegts'],
          ...['-segment_format_options', 'flush_packets=1', join(dir, 'live%d.ts')],
        ]
      : [
          '-f',
          'hls',
          '-hls_time',
          '2',
          '-hls_list_size',
          '10',
          '-hls_flags',
          'temp_file',
          join(dir, 'live.m3u8'),
        ];
  const args = [
    ...['-hide_banner', '-loglevel', 'error', '-re'],
    ...['-f', 'lavfi', '-i', 'testsrc=size=320x180:rate=30'],
    ...['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000'],
    ...['-t', String(seconds)],
    ...['-c:v', 'libx264', '-preset', 'veryfast', '-tune', 'zerolatency', '-g', '60', '-keyint_min', '60'],
    ...['-sc_threshold', '0', '-b:v', '300k', '-c:a', 'aac', '-b:a', '64k'],
    ...output,
  ];
  return spawn('ffmpeg', args, { stdio: ['ignore', 'ignore', 'inherit'] });
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setUp(
  seconds: number,
  mode: 'progressive' | 'hls-temp-file',
): Promise<{ tracker: Tracker; dir: string; ffmpeg: ChildProcess; exited: Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'chunkycast-llhls-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const tracker = await createTracker({
    host: '127.0.0.1',
    port: 0,
    broadcasterKey: 'll-hls-test-key',
    originDir: dir,
    llHlsPartTargetMs: PART_TARGET_MS,
  });
  cleanups.push(() => tracker.close());
  const ffmpeg = startFfmpeg(dir, seconds, mode);
  const exited = new Promise<void>((resolve) => {
    ffmpeg.once('exit', () => {
      resolve();
    });
  });
  cleanups.push(async () => {
    ffmpeg.kill('SIGKILL');
    await exited;
  });
  return { tracker, dir, ffmpeg, exited };
}

/** Waits for the first playlist (ffmpeg writes it after its first segment). */
async function firstPlaylist(url: string): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const a = await get(url);
    if (a.status === 200) return a.body.toString();
    if (Date.now() > deadline) throw new Error(`no playlist: ${a.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function sizesOf(dir: string, uris: readonly string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const uri of uris) {
    const s = await stat(join(dir, uri)).catch(() => null);
    if (s !== null) out.set(uri, s.size);
  }
  return out;
}

describe('LL-HLS origin over ffmpeg', () => {
  it('publishes parts, hints and blocking reload by the rules, and streams the segment being written', async () => {
    const { tracker, dir, exited } = await setUp(8, 'progressive');
    const playlistUrl = `${tracker.url}/live/live.m3u8`;
    const first = parseForCheck(await firstPlaylist(playlistUrl)).playlist;
    const hint = first.hints[0];
    expect(hint?.type).toBe('PART');
    const growingUri = hint?.uri ?? '';
    // The true source's contract: the whole segment being written, from byte 0, as it is written.
    const whole = get(`${tracker.url}/live/${growingUri}`, {
      Range: 'bytes=0-',
      'x-chunkycast-role': 'source',
    });

    // Blocking reload, part by part, for the segments to come.
    const answers: { text: string; sizes: Map<string, number> }[] = [];
    const parsedFirst = parseForCheck(await firstPlaylist(playlistUrl)).playlist;
    let msn = parsedFirst.mediaSequence + parsedFirst.segments.length;
    let part = parsedFirst.trailingParts.length;
    let blockedMs = 0;
    /** A preload hint's open range (`bytes=N-`, N > 0) on the segment being written. */
    let openRange: { uri: string; start: number; answer: Promise<Answer> } | null = null;
    for (let i = 0; i < 60; i++) {
      const a = await get(`${playlistUrl}?_HLS_msn=${msn}&_HLS_part=${part}`);
      if (a.status !== 200) break;
      expect(String(a.headers['cache-control'])).toMatch(/max-age=\d+/);
      blockedMs = Math.max(blockedMs, a.ms);
      const text = a.body.toString();
      const p = parseForCheck(text).playlist;
      // Sizes now, while the listed segments are complete and the next one is not.
      answers.push({
        text,
        sizes: await sizesOf(
          dir,
          p.segments.map((s) => s.uri),
        ),
      });
      const lastMsn = p.mediaSequence + p.segments.length - 1;
      expect(lastMsn >= msn || (lastMsn === msn - 1 && p.trailingParts.length > part)).toBe(true);
      if (p.endList) break;
      const h = p.hints[0];
      if (openRange === null && h !== undefined && h.start !== null && h.start > 0)
        openRange = {
          uri: h.uri,
          start: h.start,
          answer: get(`${tracker.url}/live/${h.uri}`, { Range: `bytes=${h.start}-` }),
        };
      msn = lastMsn + 1;
      part = p.trailingParts.length;
    }
    await exited;
    expect(answers.length).toBeGreaterThan(8);
    // Parts of the segment being written were published before it was finished.
    expect(
      answers.filter((a) => parseForCheck(a.text).playlist.trailingParts.length > 0).length,
    ).toBeGreaterThan(4);
    // Requests were really held: parts come every ~500 ms.
    expect(blockedMs).toBeGreaterThan(200);
    for (const { text, sizes } of answers) expect(checkLowLatencyPlaylist(text, sizes), text).toEqual([]);

    // Parts of a finished segment, fetched by their byte ranges, are the file.
    const last = answers.at(-1)?.text ?? '';
    const withParts = parseForCheck(
      answers.find((a) => parseForCheck(a.text).playlist.segments.some((s) => s.parts.length > 2))?.text ??
        last,
    ).playlist.segments.filter((s) => s.parts.length > 0);
    expect(withParts.length).toBeGreaterThan(0);
    for (const segment of withParts) {
      const file = await readFile(join(dir, segment.uri));
      const pieces: Buffer[] = [];
      for (const x of segment.parts) {
        const r = await get(`${tracker.url}/live/${segment.uri}`, {
          Range: `bytes=${x.offset}-${x.offset + x.length - 1}`,
        });
        expect(r.status).toBe(206);
        pieces.push(r.body);
      }
      expect(Buffer.concat(pieces).equals(file)).toBe(true);
      // Independent parts at each key frame: the first part of each segment (-g 60 = 2 s = a segment).
      expect(segment.parts[0]?.independent).toBe(true);
    }

    const streamed = await whole;
    expect(streamed.status).toBe(200);
    expect(streamed.headers['content-length']).toBeUndefined();
    expect(streamed.body.equals(await readFile(join(dir, growingUri)))).toBe(true);
    expect(openRange).not.toBeNull();
    if (openRange !== null) {
      const r = await openRange.answer;
      expect(r.status).toBe(206);
      expect(r.body.equals((await readFile(join(dir, openRange.uri))).subarray(openRange.start))).toBe(true);
    }
    const stats = tracker.originStats();
    expect(stats.sourceMediaBytes).toBe(streamed.body.length);
    expect(stats.sourceMediaRequests).toBe(1);

    // Blocking reload answers that do not wait.
    const ended = parseForCheck((await get(playlistUrl)).body.toString()).playlist;
    const lastMsn = ended.mediaSequence + ended.segments.length - 1;
    expect((await get(`${playlistUrl}?_HLS_msn=${lastMsn + 3}`)).status).toBe(400);
    expect((await get(`${playlistUrl}?_HLS_part=1`)).status).toBe(400);
    expect((await get(`${playlistUrl}?_HLS_msn=${lastMsn}&other=1`)).status).toBe(200);
  });

  it("follows ffmpeg's hls muxer in temp_file mode (liveN.ts.tmp, renamed when done)", async () => {
    const { tracker, dir, exited } = await setUp(5, 'hls-temp-file');
    const playlistUrl = `${tracker.url}/live/live.m3u8`;
    const first = parseForCheck(await firstPlaylist(playlistUrl)).playlist;
    const uri = first.hints[0]?.uri ?? '';
    const whole = get(`${tracker.url}/live/${uri}`, { Range: 'bytes=0-', 'x-chunkycast-role': 'source' });
    let msn = first.mediaSequence + first.segments.length;
    const texts: string[] = [];
    for (let i = 0; i < 8; i++) {
      const a = await get(`${playlistUrl}?_HLS_msn=${msn}`);
      if (a.status !== 200) break;
      const text = a.body.toString();
      const p = parseForCheck(text).playlist;
      texts.push(text);
      expect(
        checkLowLatencyPlaylist(
          text,
          await sizesOf(
            dir,
            p.segments.map((s) => s.uri),
          ),
        ),
        text,
      ).toEqual([]);
      if (p.endList) break;
      msn = p.mediaSequence + p.segments.length;
    }
    await exited;
    expect(texts.length).toBeGreaterThan(0);
    const streamed = await whole;
    expect(streamed.body.length).toBeGreaterThan(0);
    expect(streamed.body.equals(await readFile(join(dir, uri)))).toBe(true);
    const listed = parseForCheck(texts.at(-1) ?? '').playlist.segments.find((s) => s.uri === uri);
    expect(listed?.parts.length ?? 0).toBeGreaterThan(1);
  });
});
