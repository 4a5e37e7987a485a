// <mesh-player>'s attributes: `ice-servers` JSON checked like the tracker's servers, a bad one said
// clearly (the player then plays from the origin only); `low-latency` and the live position;
// `packet-repair`; `upload`.
import { describe, expect, it } from 'vitest';
import { liveDelayMs, parseAttributes, parseIceServers } from '../src/player.js';

describe('ice-servers', () => {
  it('takes a JSON array of servers; `urls` may be one string, as RTCPeerConnection allows', () => {
    const errors: string[] = [];
    expect(
      parseIceServers(
        '[{"urls":"stun:stun.example.com:3478"},{"urls":["turn:t.example.com?transport=tcp"],"username":"u","credential":"c"}]',
        errors,
      ),
    ).toEqual([
      { urls: ['stun:stun.example.com:3478'] },
      { urls: ['turn:t.example.com?transport=tcp'], username: 'u', credential: 'c' },
    ]);
    expect(parseIceServers(null, errors)).toBeUndefined();
    expect(parseIceServers('  ', errors)).toBeUndefined();
    expect(parseIceServers('[]', errors)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('refuses what is not JSON or not ICE servers, saying why', () => {
    const cases: [string, RegExp][] = [
      ['stun:stun.example.com', /^ice-servers is not JSON/],
      ['{"urls":"stun:a"}', /^ice-servers: "servers" must be an array of at most 8/],
      ['[{"urls":"https://example.com"}]', /^ice-servers: "urls" holds a URL that is not stun:/],
      ['[{"urls":[]}]', /^ice-servers: "urls" must be an array of 1 to 4/],
      ['[{"urls":"turn:a","credential":42}]', /^ice-servers: "credential" must be a string/],
      [JSON.stringify(Array.from({ length: 9 }, () => ({ urls: 'stun:a' }))), /at most 8/],
    ];
    for (const [raw, message] of cases) {
      const errors: string[] = [];
      expect(parseIceServers(raw, errors), raw).toBeNull();
      expect(errors, raw).toHaveLength(1);
      expect(errors[0], raw).toMatch(message);
      expect(errors[0], raw).toMatch(/playing from the origin only$/);
    }
  });
});

describe('low-latency', () => {
  const parse = (attributes: Record<string, string>): ReturnType<typeof parseAttributes> =>
    parseAttributes((name) => attributes[name] ?? null);

  it('turns LL-HLS on and leaves the position to the playlist unless live-sync says one', () => {
    expect(parse({ src: 'a.m3u8' })).toMatchObject({ lowLatency: false, liveSyncSegments: 3 });
    expect(parse({ src: 'a.m3u8', 'low-latency': '' })).toMatchObject({
      lowLatency: true,
      liveSyncSegments: null,
    });
    expect(parse({ src: 'a.m3u8', 'low-latency': 'false' })).toMatchObject({ lowLatency: false });
    expect(parse({ src: 'a.m3u8', 'low-latency': '', 'live-sync': '2' })).toMatchObject({
      lowLatency: true,
      liveSyncSegments: 2,
    });
    const bad = parse({ src: 'a.m3u8', 'low-latency': '', 'live-sync': 'x' });
    expect(bad.liveSyncSegments).toBeNull();
    expect(bad.errors[0]).toContain('PART-HOLD-BACK');
  });

  it('catch-up-rate: 1.1 by default, 1 turns it off, anything outside [1, 2] is said and ignored', () => {
    expect(parse({ src: 'a.m3u8' })).toMatchObject({ catchUpRate: 1.1, errors: [] });
    expect(parse({ src: 'a.m3u8', 'catch-up-rate': '1' })).toMatchObject({ catchUpRate: 1, errors: [] });
    expect(parse({ src: 'a.m3u8', 'catch-up-rate': '1.25' })).toMatchObject({ catchUpRate: 1.25 });
    for (const raw of ['0.9', '2.5', 'fast', 'NaN']) {
      const bad = parse({ src: 'a.m3u8', 'catch-up-rate': raw });
      expect(bad.catchUpRate, raw).toBe(1.1);
      expect(bad.errors, raw).toEqual([
        `catch-up-rate="${raw}" is not a playback rate from 1 (off) to 2; using 1.1`,
      ]);
    }
  });
});

describe('live-margin-ms', () => {
  const parse = (attributes: Record<string, string>): ReturnType<typeof parseAttributes> =>
    parseAttributes((name) => attributes[name] ?? null);

  it('is 500 ms by default, 0 turns it off, and anything outside [0, 10000] is said and ignored', () => {
    expect(parse({ src: 'a.m3u8' })).toMatchObject({ liveMarginMs: 500, errors: [] });
    expect(parse({ src: 'a.m3u8', 'live-margin-ms': '0' })).toMatchObject({ liveMarginMs: 0, errors: [] });
    expect(parse({ src: 'a.m3u8', 'live-margin-ms': '750' })).toMatchObject({ liveMarginMs: 750 });
    for (const raw of ['-1', '10001', 'soon', 'Infinity']) {
      const bad = parse({ src: 'a.m3u8', 'live-margin-ms': raw });
      expect(bad.liveMarginMs, raw).toBe(500);
      expect(bad.errors, raw).toEqual([
        `live-margin-ms="${raw}" is not a number of ms from 0 (off) to 10000; using 500`,
      ]);
    }
  });
});

describe('packet-repair', () => {
  const parse = (attributes: Record<string, string>): ReturnType<typeof parseAttributes> =>
    parseAttributes((name) => attributes[name] ?? null);
  const base = { src: 'a.m3u8', tracker: 'wss://t.example/ws', stream: 'live' };

  it('passes engine or segment to the session, and leaves the default otherwise (saying why)', () => {
    expect(parse({ ...base, 'packet-repair': 'engine' }).mesh).toMatchObject({ packetRepair: 'engine' });
    expect(parse({ ...base, 'packet-repair': 'segment' }).mesh).toMatchObject({ packetRepair: 'segment' });
    expect(parse(base).mesh).not.toHaveProperty('packetRepair');
    const bad = parse({ ...base, 'packet-repair': 'both' });
    expect(bad.mesh).not.toBeNull();
    expect(bad.mesh).not.toHaveProperty('packetRepair');
    expect(bad.errors.join(' ')).toContain('packet-repair="both"');
  });
});

describe('upload', () => {
  const parse = (attributes: Record<string, string>): ReturnType<typeof parseAttributes> =>
    parseAttributes((name) => attributes[name] ?? null);
  const base = { src: 'a.m3u8', tracker: 'wss://t.example/ws', stream: 'live' };

  it('passes auto, on or off to the session, and leaves the default (auto) when absent', () => {
    for (const mode of ['auto', 'on', 'off'])
      expect(parse({ ...base, upload: mode }).mesh).toMatchObject({ upload: mode });
    expect(parse(base).mesh).not.toHaveProperty('upload');
    expect(parse({ ...base, upload: ' ' }).mesh).not.toHaveProperty('upload');
  });
  it('reads anything else as off, saying why: nobody uploads because of a typo', () => {
    const bad = parse({ ...base, upload: 'of' });
    expect(bad.mesh).toMatchObject({ upload: 'off' });
    expect(bad.errors.join(' ')).toContain('upload="of" must be auto, on or off');
  });
});

describe('liveDelayMs', () => {
  const base = {
    nowMs: 10_000,
    fragStartS: 9,
    fragDurationS: 2,
    publishedAtMs: 7000,
    announcedDurationMs: 2000,
    previousPublishedAtMs: 5000,
  };

  it('counts what of a finished segment is still ahead of the playhead', () => {
    expect(liveDelayMs({ ...base, currentTimeS: 10 })).toBe(3000 + 1000);
  });

  it('counts it against the announced duration when hls.js listed only a part of the segment (LL)', () => {
    // The playhead entered the segment when one 0.5 s part was listed; 1 s of the 2 s is ahead.
    expect(liveDelayMs({ ...base, fragDurationS: 0.5, currentTimeS: 10 })).toBe(3000 + 1000);
    // Without the announced duration, hls.js's figure is all there is.
    expect(
      liveDelayMs({ ...base, fragDurationS: 0.5, announcedDurationMs: undefined, currentTimeS: 9.25 }),
    ).toBe(3000 + 250);
  });

  it('a segment still being written began when the previous one was published; null with neither', () => {
    const open = { ...base, publishedAtMs: undefined, announcedDurationMs: undefined, fragDurationS: 0.5 };
    expect(liveDelayMs({ ...open, currentTimeS: 10.5 })).toBe(5000 - 1500);
    expect(liveDelayMs({ ...open, previousPublishedAtMs: undefined, currentTimeS: 10.5 })).toBeNull();
  });
});
