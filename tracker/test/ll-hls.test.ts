/** The LL-HLS pieces one by one: TS scanner, part cutting, playlists, blocking reload rules, config. */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig, USAGE } from '../src/config.js';
import { parseMediaPlaylist } from '../src/source/playlist.js';
import {
  advancePartLimit,
  deliveryDecision,
  parseDeliveryDirective,
  parseGrowingRange,
  parsePackagerPlaylist,
  PartCutter,
  PlaylistParseError,
  predictNextUri,
  renderLowLatencyPlaylist,
  TsScanError,
  TsScanner,
  type Part,
  type VideoPesStart,
} from '../src/ll-hls/index.js';
import { checkLowLatencyPlaylist, parseForCheck } from './ll-hls-rules.js';
import { AUDIO_PID, pesHeader, syntheticSegment, tsPacket, VIDEO_PID } from './ts-fixtures.js';

const FRAME_30FPS = 3000;
const TARGET_500MS = 45_000;

function scanAll(bytes: Uint8Array, chunk = bytes.length): { found: VideoPesStart[]; scanner: TsScanner } {
  const scanner = new TsScanner();
  const found: VideoPesStart[] = [];
  for (let at = 0; at < bytes.length; at += chunk)
    found.push(...scanner.push(bytes.subarray(at, at + chunk)));
  return { found, scanner };
}

describe('TsScanner', () => {
  const segment = syntheticSegment({ frames: 60, firstPts: 900_000, frameTicks: FRAME_30FPS, keyEvery: 30 });

  it('finds each video PES start with its time and random access flag, not audio or continuations', () => {
    const { found, scanner } = scanAll(segment.bytes);
    expect(scanner.error).toBeNull();
    expect(scanner.end()).toBeNull();
    expect(found).toEqual(
      segment.frames.map((f) => ({ offset: f.offset, timeTicks: f.pts, randomAccess: f.key })),
    );
  });

  it('gives the same answer whatever the chunking (bytes arrive as they are written)', () => {
    const whole = scanAll(segment.bytes).found;
    for (const chunk of [1, 7, 187, 188, 189, 1000])
      expect(scanAll(segment.bytes, chunk).found).toEqual(whole);
  });

  it('prefers the DTS and reads 33-bit times near the wrap', () => {
    const near = 2 ** 33 - 1;
    const bytes = tsPacket({ pid: VIDEO_PID, unitStart: true, payload: pesHeader(0xe0, 5, near) });
    expect(scanAll(bytes).found).toEqual([{ offset: 0, timeTicks: near, randomAccess: false }]);
  });

  it('follows the first video PID only', () => {
    const other = tsPacket({ pid: 0x200, unitStart: true, payload: pesHeader(0xe1, 1) });
    const bytes = new Uint8Array([...segment.bytes.subarray(0, 188 * 5), ...other]);
    expect(scanAll(bytes).found.map((f) => f.offset)).toEqual([188]);
  });

  it('stops with a TsScanError at lost sync, keeping what it found, and never throws after', () => {
    const bytes = segment.bytes.slice(0, 188 * 10);
    bytes[188 * 6] = 0x00;
    const scanner = new TsScanner();
    const found = scanner.push(bytes);
    expect(found.map((f) => f.offset)).toEqual([188, 188 * 5]);
    expect(scanner.error).toBeInstanceOf(TsScanError);
    expect(scanner.error?.offset).toBe(188 * 6);
    expect(scanner.push(segment.bytes)).toEqual([]);
  });

  it('refuses an adaptation field longer than the packet', () => {
    const bad = tsPacket({ pid: AUDIO_PID, randomAccess: true });
    bad[4] = 184;
    const scanner = new TsScanner();
    scanner.push(bad);
    expect(scanner.error?.message).toMatch(/adaptation field length 184/);
  });

  it('reports a truncated last packet at the end', () => {
    const scanner = new TsScanner();
    scanner.push(segment.bytes.subarray(0, 188 * 3 + 50));
    expect(scanner.error).toBeNull();
    expect(scanner.end()?.message).toMatch(/truncated packet \(50 bytes\)/);
  });

  it('survives random garbage without throwing', () => {
    let seed = 12345;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed;
    };
    for (let run = 0; run < 300; run++) {
      const bytes = new Uint8Array(random() % 2000);
      for (let i = 0; i < bytes.length; i++) bytes[i] = random() & 0xff;
      // Mostly valid packet starts, so the parser goes past the sync check.
      for (let i = 0; i < bytes.length; i += 188) if (random() % 4 !== 0) bytes[i] = 0x47;
      const scanner = new TsScanner();
      expect(() => scanner.push(bytes)).not.toThrow();
      expect(() => scanner.end()).not.toThrow();
    }
  });
});

function cut(frames: VideoPesStart[], size: number, targetTicks = TARGET_500MS, maxParts = 100): PartCutter {
  const cutter = new PartCutter(targetTicks, maxParts);
  for (const f of frames) cutter.add(f);
  cutter.finish(size);
  return cutter;
}

function expectContiguous(parts: readonly Part[], size: number): void {
  let next = 0;
  for (const p of parts) {
    expect(p.offset).toBe(next);
    next += p.length;
  }
  expect(next).toBe(size);
}

describe('PartCutter', () => {
  it('cuts 30 fps into 0.5 s parts at frame starts, the key frame part independent', () => {
    const s = syntheticSegment({ frames: 60, firstPts: 0, frameTicks: FRAME_30FPS, keyEvery: 60 });
    const { found } = scanAll(s.bytes);
    const parts = cut(found, s.bytes.length).parts;
    expect(parts.map((p) => p.durationTicks)).toEqual([45_000, 45_000, 45_000, 45_000]);
    expect(parts.map((p) => p.independent)).toEqual([true, false, false, false]);
    // Each later part starts where frame 15, 30, 45 starts.
    expect(parts.slice(1).map((p) => p.offset)).toEqual([15, 30, 45].map((i) => s.frames[i]?.offset));
    expectContiguous(parts, s.bytes.length);
  });

  it('keeps every part within the target when frames do not divide it (25 fps, 0.5 s)', () => {
    const s = syntheticSegment({ frames: 50, firstPts: 1000, frameTicks: 3600, keyEvery: 24 });
    const parts = cut(scanAll(s.bytes).found, s.bytes.length).parts;
    for (const p of parts) expect(p.durationTicks).toBeLessThanOrEqual(TARGET_500MS);
    // 12 frames (0.48 s) fit, 13 would not.
    expect(parts[0]?.durationTicks).toBe(12 * 3600);
    // Key frames every 24 frames start parts 0, 2 and 4.
    expect(parts.map((p) => p.independent)).toEqual([true, false, true, false, true]);
    expectContiguous(parts, s.bytes.length);
  });

  it('times parts across the 33-bit wrap', () => {
    const s = syntheticSegment({
      frames: 30,
      firstPts: 2 ** 33 - 10 * FRAME_30FPS,
      frameTicks: FRAME_30FPS,
      keyEvery: 30,
    });
    const parts = cut(scanAll(s.bytes).found, s.bytes.length).parts;
    expect(parts.map((p) => p.durationTicks)).toEqual([45_000, 45_000]);
  });

  it('lists closed parts while the segment grows, and where the next one starts', () => {
    const s = syntheticSegment({ frames: 20, firstPts: 0, frameTicks: FRAME_30FPS, keyEvery: 60 });
    const cutter = new PartCutter(TARGET_500MS, 100);
    for (const f of scanAll(s.bytes).found) cutter.add(f);
    expect(cutter.parts).toHaveLength(1);
    expect(cutter.nextPartOffset).toBe(s.frames[15]?.offset);
  });

  it('gives up on a segment with too many parts instead of growing without bound', () => {
    const s = syntheticSegment({ frames: 60, firstPts: 0, frameTicks: FRAME_30FPS, keyEvery: 60 });
    const cutter = cut(scanAll(s.bytes).found, s.bytes.length, TARGET_500MS, 2);
    expect(cutter.overflow).toBe(true);
    expect(cutter.parts).toEqual([]);
    expect(cutter.nextPartOffset).toBeNull();
  });

  it('skips frames without a time and cuts nothing before the first timed frame', () => {
    const cutter = new PartCutter(TARGET_500MS, 10);
    cutter.add({ offset: 188, timeTicks: null, randomAccess: true });
    expect(cutter.nextPartOffset).toBeNull();
    cutter.finish(1000);
    expect(cutter.parts).toEqual([]);
  });
});

const PACKAGER = [
  '#EXTM3U',
  '#EXT-X-VERSION:3',
  '#EXT-X-TARGETDURATION:2',
  '#EXT-X-MEDIA-SEQUENCE:10',
  '#EXTINF:2.000000,',
  'live10.ts',
  '#EXTINF:2.000000,',
  'live11.ts',
  '#EXT-X-DISCONTINUITY',
  '#EXTINF:2.000000,',
  'live12.ts',
  '#EXTINF:2.000000,',
  'live13.ts',
  '',
].join('\n');

function fourParts(size: number): Part[] {
  const q = Math.floor(size / 4 / 188) * 188;
  return [0, 1, 2, 3].map((i) => ({
    offset: i * q,
    length: i === 3 ? size - 3 * q : q,
    durationTicks: 45_000,
    independent: i === 0,
  }));
}

describe('LL-HLS playlist', () => {
  const playlist = parsePackagerPlaylist(PACKAGER);
  const partsByUri = new Map([
    ['live11.ts', fourParts(94_000)],
    ['live12.ts', fourParts(90_000)],
    ['live13.ts', fourParts(100_000)],
  ]);
  const inProgress = {
    uri: 'live14.ts',
    parts: fourParts(90_000).slice(0, 2),
    nextPartOffset: fourParts(90_000)[2]?.offset ?? 0,
  };
  const sizes = new Map([
    ['live11.ts', 94_000],
    ['live12.ts', 90_000],
    ['live13.ts', 100_000],
  ]);

  it('reads the packager playlist', () => {
    expect(playlist.mediaSequence).toBe(10);
    expect(playlist.targetDurationS).toBe(2);
    expect(playlist.segments.map((s) => [s.msn, s.uri])).toEqual([
      [10, 'live10.ts'],
      [11, 'live11.ts'],
      [12, 'live12.ts'],
      [13, 'live13.ts'],
    ]);
    expect(playlist.lowLatency).toBe(false);
    expect(() => parsePackagerPlaylist('nothing')).toThrow(PlaylistParseError);
    expect(() => parsePackagerPlaylist('#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\na.m3u8\n')).toThrow(
      PlaylistParseError,
    );
    expect(() => parsePackagerPlaylist('#EXTM3U\nlive1.ts\n')).toThrow(PlaylistParseError);
  });

  it('recognises a real LL-HLS packager and counts its trailing parts', () => {
    const ll = parsePackagerPlaylist(
      `${PACKAGER}#EXT-X-PART:DURATION=0.5,URI="p1.ts"\n#EXT-X-PART:DURATION=0.5,URI="p2.ts"\n`,
    );
    expect(ll.lowLatency).toBe(true);
    expect(ll.trailingParts).toBe(2);
  });

  it('renders a playlist that keeps the RFC 8216bis rules', () => {
    const text = renderLowLatencyPlaylist({ playlist, partTargetMs: 500, partsByUri, inProgress });
    expect(checkLowLatencyPlaylist(text, sizes)).toEqual([]);
    const lines = text.trim().split('\n');
    expect(lines.slice(0, 3)).toEqual(['#EXTM3U', '#EXT-X-VERSION:4', '#EXT-X-TARGETDURATION:2']);
    expect(lines).toContain('#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.500');
    expect(lines).toContain('#EXT-X-PART-INF:PART-TARGET=0.500');
    expect(lines.at(-1)).toBe(
      `#EXT-X-PRELOAD-HINT:TYPE=PART,URI="live14.ts",BYTERANGE-START=${inProgress.nextPartOffset}`,
    );
    // The discontinuity stays before live12's parts, and its parts before its EXTINF.
    const at = lines.indexOf('#EXT-X-DISCONTINUITY');
    expect(lines[at + 1]).toBe(
      '#EXT-X-PART:DURATION=0.50000,URI="live12.ts",BYTERANGE="22372@0",INDEPENDENT=YES',
    );
    expect(lines[at + 5]).toBe('#EXTINF:2.000000,');
    expect(lines[at + 6]).toBe('live12.ts');
  });

  it('reads the same segments for the true source as the packager playlist', () => {
    const text = renderLowLatencyPlaylist({ playlist, partTargetMs: 500, partsByUri, inProgress });
    expect(parseMediaPlaylist(text)).toEqual(parseMediaPlaylist(PACKAGER));
  });

  it('lists parts only of segments that start within three target durations of the end', () => {
    const text = renderLowLatencyPlaylist({ playlist, partTargetMs: 500, partsByUri, inProgress });
    const p = parseForCheck(text).playlist;
    // The end is 1 s into live14: live13 starts 3 s before it, live12 5 s, live11 7 s (> 6).
    expect(p.segments.map((s) => s.parts.length)).toEqual([0, 0, 4, 4]);
  });

  it('keeps a higher packager version, and ends without a hint', () => {
    const ended = parsePackagerPlaylist(PACKAGER.replace('VERSION:3', 'VERSION:6') + '#EXT-X-ENDLIST\n');
    const text = renderLowLatencyPlaylist({ playlist: ended, partTargetMs: 500, partsByUri, inProgress });
    expect(text).toContain('#EXT-X-VERSION:6\n');
    expect(text).not.toContain('PRELOAD-HINT');
    expect(text).not.toContain('live14.ts');
    expect(text.trim().split('\n').at(-1)).toBe('#EXT-X-ENDLIST');
    expect(checkLowLatencyPlaylist(text, sizes)).toEqual([]);
  });

  it('the rules checker catches what breaks the rules', () => {
    const good = renderLowLatencyPlaylist({ playlist, partTargetMs: 500, partsByUri, inProgress });
    const broken = (from: string, to: string): string[] =>
      checkLowLatencyPlaylist(good.replace(from, to), sizes);
    expect(broken('#EXT-X-VERSION:4', '#EXT-X-VERSION:3')).toEqual(['EXT-X-VERSION 3 < 4 with byte ranges']);
    expect(broken('PART-HOLD-BACK=1.500', 'PART-HOLD-BACK=0.900')).toEqual([
      'PART-HOLD-BACK 0.9 < 2 × PART-TARGET 0.5',
    ]);
    expect(broken('#EXT-X-PART-INF:PART-TARGET=0.500\n', '')).toContain('parts without EXT-X-PART-INF');
    expect(broken('DURATION=0.50000,URI="live13.ts"', 'DURATION=0.50100,URI="live13.ts"')).toEqual([
      'part of live13.ts@0 lasts 0.501 > 0.5',
    ]);
    expect(
      broken(
        'DURATION=0.50000,URI="live12.ts",BYTERANGE="22372@22372"',
        'DURATION=0.40000,URI="live12.ts",BYTERANGE="22372@22372"',
      ),
    ).toEqual(['part of live12.ts@22372 lasts 0.4 < 85% of 0.5']);
    expect(broken('BYTERANGE="22372@22372"', 'BYTERANGE="22372@22373"').length).toBeGreaterThan(0);
    expect(checkLowLatencyPlaylist(good, new Map([['live13.ts', 100_001]]))).toEqual([
      'parts of live13.ts cover 100000 bytes of 100001',
    ]);
    expect(broken('BYTERANGE-START=', 'BYTERANGE-START=1')).toHaveLength(1);
    const hint = good.trim().split('\n').at(-1) ?? '';
    expect(checkLowLatencyPlaylist(`${good}${hint}\n`, sizes)).toContain(
      'two EXT-X-PRELOAD-HINTs of one TYPE',
    );
    expect(broken('#EXTINF:2.000000,\nlive13.ts', '#EXTINF:2.6,\nlive13.ts')).toEqual([
      'EXTINF 2.6 of live13.ts > target',
    ]);
    expect(
      broken(
        '#EXTINF:2.000000,\nlive10.ts',
        '#EXT-X-PART:DURATION=0.5,URI="live10.ts",BYTERANGE="10@0"\n#EXTINF:2.000000,\nlive10.ts',
      ),
    ).toEqual(['parts of live10.ts, which starts 9.000 s from the end']);
  });

  it('predicts the packager next file name', () => {
    expect(predictNextUri('live12.ts')).toBe('live13.ts');
    expect(predictNextUri('seg009.ts')).toBe('seg010.ts');
    expect(predictNextUri('live99.ts')).toBe('live100.ts');
    expect(predictNextUri('a/b7.ts')).toBe('a/b8.ts');
    expect(predictNextUri('live.ts')).toBeNull();
    expect(predictNextUri('https://cdn/x1.ts')).toBeNull();
    expect(predictNextUri('x1.ts?token=3')).toBeNull();
    expect(predictNextUri('/abs/x1.ts')).toBeNull();
    expect(predictNextUri('../x1.ts')).toBeNull();
  });
});

describe('blocking playlist reload rules (RFC 8216bis §6.2.5.2)', () => {
  it('reads _HLS_msn and _HLS_part and ignores other parameters', () => {
    expect(parseDeliveryDirective('')).toEqual({ kind: 'none' });
    expect(parseDeliveryDirective('foo=1&bar')).toEqual({ kind: 'none' });
    expect(parseDeliveryDirective('_HLS_msn=12&x=1')).toEqual({ kind: 'block', msn: 12, part: null });
    expect(parseDeliveryDirective('_HLS_msn=12&_HLS_part=3')).toEqual({ kind: 'block', msn: 12, part: 3 });
    expect(parseDeliveryDirective('_HLS_part=3').kind).toBe('bad');
    expect(parseDeliveryDirective('_HLS_msn=-1').kind).toBe('bad');
    expect(parseDeliveryDirective('_HLS_msn=1&_HLS_part=x').kind).toBe('bad');
    expect(parseDeliveryDirective('_HLS_msn=99999999999999999999').kind).toBe('bad');
  });

  it('answers, waits or refuses', () => {
    const state = { lastMsn: 20, partsAfter: 2, partTargetMs: 500 };
    expect(advancePartLimit(500)).toBe(6);
    expect(advancePartLimit(1000)).toBe(3);
    expect(deliveryDecision(state, 19, null)).toBe('ready');
    expect(deliveryDecision(state, 20, null)).toBe('ready');
    expect(deliveryDecision(state, 20, 7)).toBe('ready');
    expect(deliveryDecision(state, 21, null)).toBe('wait');
    expect(deliveryDecision(state, 21, 1)).toBe('ready');
    expect(deliveryDecision(state, 21, 2)).toBe('wait');
    expect(deliveryDecision(state, 21, 7)).toBe('wait');
    expect(deliveryDecision(state, 21, 8)).toBe('too-far');
    expect(deliveryDecision(state, 22, null)).toBe('wait');
    expect(deliveryDecision(state, 22, 5)).toBe('wait');
    expect(deliveryDecision(state, 22, 6)).toBe('too-far');
    expect(deliveryDecision(state, 23, null)).toBe('too-far');
  });

  it('reads the ranges a growing segment can answer', () => {
    expect(parseGrowingRange(undefined)).toEqual({ start: 0, end: null, partial: false });
    expect(parseGrowingRange('bytes=0-')).toEqual({ start: 0, end: null, partial: false });
    expect(parseGrowingRange('bytes=100-')).toEqual({ start: 100, end: null, partial: true });
    expect(parseGrowingRange('bytes=10-20')).toEqual({ start: 10, end: 20, partial: true });
    expect(parseGrowingRange('bytes=-20')).toBeNull();
    expect(parseGrowingRange('bytes=20-10')).toBeNull();
    expect(parseGrowingRange('bytes=0-1,5-6')).toBeNull();
  });
});

describe('--ll-hls and --part-target-ms', () => {
  it('is off by default, a switch when given, and bounded', () => {
    expect(parseConfig(['--origin-dir', '/tmp/x'], {})).toMatchObject({ llHls: false, partTargetMs: 500 });
    expect(parseConfig(['--origin-dir', '/tmp/x', '--ll-hls'], {})).toMatchObject({
      llHls: true,
      partTargetMs: 500,
    });
    expect(parseConfig(['--origin-dir', '/tmp/x', '--ll-hls', '--part-target-ms', '200'], {})).toMatchObject({
      partTargetMs: 200,
    });
    expect(parseConfig(['--ll-hls=false', '--origin-dir', '/tmp/x'], {})).toMatchObject({ llHls: false });
    expect(parseConfig([], { CHUNKYCAST_LL_HLS: '1', CHUNKYCAST_ORIGIN_DIR: '/tmp/x' })).toMatchObject({
      llHls: true,
    });
    expect(() => parseConfig(['--ll-hls'], {})).toThrow(/needs --origin-dir/);
    expect(() => parseConfig(['--origin-dir', '/x', '--part-target-ms', '300'], {})).toThrow(
      /only used with --ll-hls/,
    );
    expect(() => parseConfig(['--origin-dir', '/x', '--ll-hls', '--part-target-ms', '50'], {})).toThrow(
      /100‥2000/,
    );
    expect(() => parseConfig(['--origin-dir', '/x', '--ll-hls', '--part-target-ms', '2001'], {})).toThrow(
      /--part-target-ms must be in 100‥2000, got 2001/,
    );
    expect(() =>
      parseConfig(['--origin-dir', '/x', '--ll-hls'], { CHUNKYCAST_PART_TARGET_MS: '0.5' }),
    ).toThrow(ConfigError);
    expect(() => parseConfig(['--origin-dir', '/x', '--ll-hls=maybe'], {})).toThrow(/true or false/);
    expect(USAGE).toMatch(/\n {2}--ll-hls {2,}publish an LL-HLS view/);
    expect(USAGE).toContain('--part-target-ms N');
  });
});
