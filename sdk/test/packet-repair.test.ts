// The host side of the engine's packet repair (issue 14): (slice, seq) ↔ (segment, index) through
// the announcements, the playout clock from the player's deadline, and fetchOrigin → originPacket
// with a stubbed origin. No sleeps: the stubbed fetch answers when the test says so.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  decodeMediaPacket,
  packetPlace,
  packetRange,
  planOf,
  type SignedAnnouncement,
} from '@chunkycast/wire';
import { MeshError } from '@chunkycast/sdk/core';
import {
  OriginRepair,
  locatePacket,
  playoutFor,
  segmentDeadline,
  SegmentPace,
  resolvePacketRepair,
  type PlayoutClock,
} from '../src/packet-repair.js';
import { parsePacketRepair } from '../src/player.js';

const D = 16;

function segmentBytes(sequence: number, size: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = (i * 31 + sequence * 7 + 3) & 0xff;
  return out;
}

/** An announcement of `bytes` in `packets` packets (unsigned: OriginRepair trusts the store's). */
function announced(
  sequence: number,
  bytes: Uint8Array,
  packets: number,
  firstPacket: number,
  packetBytes?: number,
): SignedAnnouncement {
  const shape = { bytes: bytes.length, packets, ...(packetBytes === undefined ? {} : { packetBytes }) };
  const plan = planOf(shape);
  const hashes: string[] = [];
  for (let i = 0; i < packets; i++) {
    const [s, e] = packetRange(plan, bytes.length, i);
    hashes.push(createHash('sha256').update(bytes.subarray(s, e)).digest('hex').slice(0, 32));
  }
  return {
    stream: 'live',
    sequence,
    uri: `seg${sequence}.ts`,
    ...shape,
    firstPacket,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    packetHashes: hashes.join(''),
    durationMs: 2000,
    publishedAtMs: 1_700_000_000_000 + sequence * 2000,
    signature: '',
  };
}

/** The engine's documented clock: packet `seq` of `slice` plays at zeroAtMs + (seq + slice/D)·interval. */
function playTime(clock: PlayoutClock, slice: number, seq: number): number {
  return clock.zeroAtMs + (seq + slice / D) * clock.packetIntervalMs;
}

describe('packetRepair option', () => {
  it('defaults to engine, takes segment, refuses anything else', () => {
    expect(resolvePacketRepair(undefined)).toBe('engine');
    expect(resolvePacketRepair('segment')).toBe('segment');
    expect(resolvePacketRepair('engine')).toBe('engine');
    expect(() => resolvePacketRepair('packets')).toThrow(MeshError);
    const errors: string[] = [];
    expect(parsePacketRepair('engine', errors)).toBe('engine');
    expect(parsePacketRepair(' segment ', errors)).toBe('segment');
    expect(parsePacketRepair(null, errors)).toBeUndefined();
    expect(errors).toEqual([]);
    expect(parsePacketRepair('both', errors)).toBeUndefined();
    expect(errors).toHaveLength(1);
  });
});

describe('locatePacket', () => {
  // Three segments of 16, 32 and 48 packets, and the source skipped 16 numbers before the last (a
  // segment it never published).
  const spans = [
    { sequence: 10, firstPacket: 160, packets: 16 },
    { sequence: 11, firstPacket: 176, packets: 32 },
    { sequence: 12, firstPacket: 224, packets: 48 },
  ];

  it('inverts packetPlace across segments of different packet counts', () => {
    for (const a of spans)
      for (let index = 0; index < a.packets; index++) {
        const { slice, seq } = packetPlace(a.firstPacket, index, D);
        expect(locatePacket(spans, slice, seq, D)).toEqual({ segment: a.sequence, index });
      }
  });

  it('places nothing the announcements do not hold', () => {
    // Packet 208 (slice 0, seq 13) falls in the skipped numbers; 159 and 272 outside all three.
    expect(locatePacket(spans, 0, 13, D)).toBeNull();
    expect(locatePacket(spans, 15, 9, D)).toBeNull();
    expect(locatePacket(spans, 0, 17, D)).toBeNull();
    expect(locatePacket([], 0, 10, D)).toBeNull();
  });

  it('refuses bad input instead of throwing', () => {
    for (const [slice, seq, d] of [
      [16, 10, D],
      [-1, 10, D],
      [0.5, 10, D],
      [0, -1, D],
      [0, Number.NaN, D],
      [0, 10, 0],
    ] as const)
      expect(locatePacket(spans, slice, seq, d)).toBeNull();
  });
});

describe('playoutFor', () => {
  const a = { firstPacket: 176, packets: 32, durationMs: 2000 };

  it("makes the player's deadline the segment's first packet's, at the stream's real rate", () => {
    const clock = playoutFor(a, 50_000, D, 47_000);
    expect(clock).not.toBeNull();
    if (clock === null) return;
    // Two packets per slice per 2 s segment: one slice's packet every second.
    expect(clock.packetIntervalMs).toBe(1000);
    expect(clock.fromMs).toBe(47_000);
    const first = packetPlace(a.firstPacket, 0, D);
    expect(playTime(clock, first.slice, first.seq)).toBeCloseTo(50_000, 6);
    // No packet of the segment plays before the deadline (the span brings them all to it), the
    // last one a segment's duration (less one packet) later.
    const last = packetPlace(a.firstPacket, a.packets - 1, D);
    expect(playTime(clock, last.slice, last.seq)).toBeCloseTo(50_000 + (2000 * 31) / 32, 6);
    for (let i = 0; i < a.packets; i++) {
      const p = packetPlace(a.firstPacket, i, D);
      expect(playTime(clock, p.slice, p.seq)).toBeGreaterThanOrEqual(50_000 - 1e-6);
    }
    // The next segment (same rate) falls one duration later: its first packet at 52 000.
    const nextFirst = packetPlace(a.firstPacket + a.packets, 0, D);
    expect(playTime(clock, nextFirst.slice, nextFirst.seq)).toBeCloseTo(52_000, 6);
  });

  it('segmentDeadline needs every packet of the segment by the deadline', () => {
    expect(segmentDeadline(a, 50_000)).toEqual({ firstPacket: 176, packets: 32, atMs: 50_000 });
    expect(segmentDeadline({ ...a, packets: 0 }, 50_000)).toBeNull();
    expect(segmentDeadline(a, Number.POSITIVE_INFINITY)).toBeNull();
  });

  it('runs at the measured pace when there is one', () => {
    const clock = playoutFor(a, 50_000, D, 47_000, 3000);
    expect(clock?.packetIntervalMs).toBe(1500);
    expect(playoutFor(a, 50_000, D, 47_000, null)?.packetIntervalMs).toBe(1000);
  });

  it('gives no clock when the announcement cannot give a rate', () => {
    expect(playoutFor({ ...a, durationMs: 0 }, 50_000, D, 0)).toBeNull();
    expect(playoutFor({ ...a, packets: 0 }, 50_000, D, 0)).toBeNull();
    expect(playoutFor(a, Number.NaN, D, 0)).toBeNull();
    expect(playoutFor(a, 50_000, 0, 0)).toBeNull();
  });
});

/** A stubbed origin: records requests, answers each when told (or at once with `auto`). */
class FakeOrigin {
  readonly requests: { url: string; range: string | null; answer: () => void }[] = [];
  auto = true;
  /** Rewrites the bytes served (a damaged CDN copy). */
  corrupt: ((body: Uint8Array) => void) | null = null;
  ignoreRange = false;
  constructor(private readonly files: Map<string, Uint8Array>) {}

  readonly fetch = (url: string, init: RequestInit): Promise<Response> =>
    new Promise((resolve) => {
      const range = new Headers(init.headers).get('Range');
      const answer = (): void => {
        const file = this.files.get(url);
        if (file === undefined) {
          resolve(new Response(null, { status: 404 }));
          return;
        }
        const m = /^bytes=(\d+)-(\d+)$/.exec(range ?? '');
        const whole = this.ignoreRange || m === null;
        const body = whole ? file.slice() : file.slice(Number(m[1]), Number(m[2]) + 1);
        this.corrupt?.(body);
        resolve(new Response(body, { status: whole ? 200 : 206 }));
      };
      this.requests.push({ url, range, answer });
      if (this.auto) answer();
    });
}

/** Lets the stubbed fetches, their bodies and the deliveries run (no time passes). */
async function settle(): Promise<void> {
  for (let i = 0; i < 50; i++) await Promise.resolve();
  await new Promise((resolve) => setImmediate(resolve));
}

function harness(
  segments: { a: SignedAnnouncement; bytes: Uint8Array }[],
  maxConcurrent?: number,
  held: Set<string> = new Set(),
) {
  const files = new Map(segments.map(({ a, bytes }) => [`https://origin.test/live/${a.uri}`, bytes]));
  const origin = new FakeOrigin(files);
  const delivered: { slice: number; seq: number; payload: Uint8Array }[] = [];
  let nowMs = 1000;
  const byId = new Map(segments.map(({ a }) => [a.sequence, a]));
  const repair = new OriginRepair({
    announcement: (s) => byId.get(s) ?? null,
    announcements: () => [...byId.values()].sort((x, y) => y.sequence - x.sequence),
    dataSlices: () => D,
    deliver: (slice, seq, payload) => delivered.push({ slice, seq, payload }),
    fetch: (url, init) => {
      nowMs += 40; // each request's round trip, on the fake clock
      return origin.fetch(url, init);
    },
    now: () => nowMs,
    held: (segment, index) => held.has(`${segment}/${index}`),
    // Resolved in a microtask, so settle() needs no real time (the default hashes with WebCrypto).
    digest: (bytes) => Promise.resolve(new Uint8Array(createHash('sha256').update(bytes).digest())),
    ...(maxConcurrent === undefined ? {} : { maxConcurrent }),
  });
  return {
    origin,
    delivered,
    repair,
    url: (a: SignedAnnouncement) => `https://origin.test/live/${a.uri}`,
    announce: (more: SignedAnnouncement, bytes: Uint8Array) => {
      byId.set(more.sequence, more);
      files.set(`https://origin.test/live/${more.uri}`, bytes);
      repair.announced();
    },
    advance: (ms: number) => {
      nowMs += ms;
    },
  };
}

describe('OriginRepair', () => {
  const bytes11 = segmentBytes(11, 70_000);
  const a11 = announced(11, bytes11, 32, 176);
  const bytes12 = segmentBytes(12, 40_000);
  const a12 = announced(12, bytes12, 16, 208);

  it('fetches the asked packets as merged byte ranges and hands the engine checked media packets', async () => {
    const { origin, delivered, repair, url } = harness([
      { a: a11, bytes: bytes11 },
      { a: a12, bytes: bytes12 },
    ]);
    repair.setUrl(11, url(a11));
    // One engine step: slices 3 and 4 miss packets 3, 4 (seq 11) and 19, 20 (seq 12) of segment 11,
    // slice 0 misses packet 0 of segment 12 (seq 13).
    const p = (n: number): { slice: number; seq: number } => packetPlace(0, n, D);
    repair.fetchOrigin(3, [p(179).seq, p(195).seq]);
    repair.fetchOrigin(4, [p(180).seq, p(196).seq]);
    repair.fetchOrigin(0, [p(208).seq]);
    await settle();
    // Segment 12's URL came from segment 11's (its announced URI resolved against the loader's URL).
    expect(origin.requests.map((r) => [r.url, r.range]).sort()).toEqual(
      [
        [url(a11), rangeOf(a11, 3, 4)],
        [url(a11), rangeOf(a11, 19, 20)],
        [url(a12), rangeOf(a12, 0, 0)],
      ].sort(),
    );
    expect(delivered).toHaveLength(5);
    for (const d of delivered) {
      const decoded = decodeMediaPacket(d.payload);
      expect(decoded.ok).toBe(true);
      if (!decoded.ok) continue;
      const { segment, index, count, bytes } = decoded.packet;
      const a = segment === 11 ? a11 : a12;
      expect(packetPlace(a.firstPacket, index, D)).toEqual({ slice: d.slice, seq: d.seq });
      expect(count).toBe(a.packets);
      const [s, e] = packetRange(planOf(a), a.bytes, index);
      expect(bytes).toEqual((segment === 11 ? bytes11 : bytes12).subarray(s, e));
    }
    const lengthOf = (a: SignedAnnouncement, index: number): number => {
      const [s, e] = packetRange(planOf(a), a.bytes, index);
      return e - s;
    };
    const expectedBytes = [3, 4, 19, 20].reduce((n, i) => n + lengthOf(a11, i), 0) + lengthOf(a12, 0);
    expect(repair.counters).toMatchObject({
      packetsRequested: 5,
      packetsDelivered: 5,
      packetsRefused: 0,
      bytesFetched: expectedBytes,
    });
    // Three requests started 40 ms apart on the fake clock and all answered at the end of it.
    expect(repair.originRttMs).toBeGreaterThanOrEqual(40);
    expect(repair.originRttMs).toBeLessThanOrEqual(120);
  });

  it('refuses a packet the origin serves with a wrong byte', async () => {
    const { origin, delivered, repair, url } = harness([{ a: a11, bytes: bytes11 }]);
    repair.setUrl(11, url(a11));
    origin.corrupt = (body) => {
      body[0] = (body[0] ?? 0) ^ 1; // the first byte of the range: packet 5's
    };
    repair.fetchOrigin(5, [packetPlace(176, 5, D).seq]);
    repair.fetchOrigin(6, [packetPlace(176, 6, D).seq]);
    await settle();
    expect(origin.requests).toHaveLength(1);
    expect(delivered.map((d) => d.slice)).toEqual([6]);
    expect(repair.counters.packetsRefused).toBe(1);
    expect(repair.counters.packetsDelivered).toBe(1);
  });

  it('takes the whole segment from an origin that ignores Range, and refuses a short answer', async () => {
    const { origin, delivered, repair, url } = harness([{ a: a11, bytes: bytes11 }]);
    repair.setUrl(11, url(a11));
    origin.ignoreRange = true;
    repair.fetchOrigin(7, [packetPlace(176, 7, D).seq]);
    await settle();
    expect(delivered).toHaveLength(1);
    origin.ignoreRange = false;
    origin.corrupt = null;
    // A 206 whose length is not the range's: nothing is handed over.
    const short = new FakeOrigin(new Map());
    const broken = new OriginRepair({
      announcement: () => a11,
      announcements: () => [a11],
      dataSlices: () => D,
      deliver: () => {
        throw new Error('must not deliver');
      },
      fetch: () => Promise.resolve(new Response(new Uint8Array(3), { status: 206 })),
      now: () => 0,
    });
    broken.setUrl(11, url(a11));
    broken.fetchOrigin(7, [packetPlace(176, 7, D).seq]);
    await settle();
    expect(broken.counters).toMatchObject({ packetsDelivered: 0, packetsRefused: 1, requestsFailed: 1 });
    expect(short.requests).toHaveLength(0);
  });

  it('keeps at most maxConcurrent requests in flight', async () => {
    const { origin, delivered, repair, url } = harness([{ a: a11, bytes: bytes11 }], 2);
    repair.setUrl(11, url(a11));
    origin.auto = false;
    // Five packets on one slice: five separate runs (a slice's packets are D apart).
    for (let row = 0; row < 2; row++) repair.fetchOrigin(0, [packetPlace(176, row * D, D).seq]);
    for (const index of [2, 4, 8]) repair.fetchOrigin(index, [packetPlace(176, index, D).seq]);
    await settle();
    expect(origin.requests).toHaveLength(2);
    for (let answered = 0; answered < 5; answered++) {
      origin.requests[answered]?.answer();
      await settle();
    }
    expect(origin.requests).toHaveLength(5);
    expect(delivered).toHaveLength(5);
  });

  it('waits for a URL, and refuses places no packet can have', async () => {
    const { origin, delivered, repair, url } = harness([{ a: a11, bytes: bytes11 }]);
    repair.fetchOrigin(1, [packetPlace(176, 1, D).seq]);
    repair.fetchOrigin(0, [-1, 0.5]);
    repair.fetchOrigin(16, [1]);
    await settle();
    expect(origin.requests).toHaveLength(0);
    expect(repair.counters.packetsUnplaced).toBe(3);
    repair.setUrl(11, url(a11));
    await settle();
    expect(delivered).toHaveLength(1);
  });

  it('places a packet asked before its segment was announced once the announcement comes', async () => {
    const { origin, delivered, repair, url, announce } = harness([{ a: a11, bytes: bytes11 }]);
    repair.setUrl(11, url(a11));
    // Segment 12 (packets 208‥223) is not announced yet: the engine's clock ran ahead of the source.
    const early = packetPlace(208, 2, D);
    repair.fetchOrigin(early.slice, [early.seq]);
    await settle();
    expect(origin.requests).toHaveLength(0);
    announce(a12, bytes12);
    await settle();
    // Its URL is segment 11's with segment 12's announced URI.
    expect(origin.requests.map((r) => [r.url, r.range])).toEqual([[url(a12), rangeOf(a12, 2, 2)]]);
    expect(delivered.map((d) => [d.slice, d.seq])).toEqual([[early.slice, early.seq]]);
    expect(repair.counters.packetsUnplaced).toBe(0);
  });

  it('does not fetch a packet the store holds by then (late, not lost)', async () => {
    const { origin, delivered, repair, url } = harness(
      [{ a: a11, bytes: bytes11 }],
      undefined,
      new Set(['11/4']),
    );
    repair.setUrl(11, url(a11));
    repair.fetchOrigin(4, [packetPlace(176, 4, D).seq]);
    repair.fetchOrigin(5, [packetPlace(176, 5, D).seq]);
    await settle();
    expect(origin.requests.map((r) => r.range)).toEqual([rangeOf(a11, 5, 5)]);
    expect(delivered).toHaveLength(1);
    expect(repair.counters.packetsAlreadyHeld).toBe(1);
  });

  it('gives up a packet whose URL does not come before its deadline has surely passed', async () => {
    const { origin, delivered, repair, url, advance } = harness([{ a: a11, bytes: bytes11 }]);
    repair.fetchOrigin(1, [packetPlace(176, 1, D).seq]);
    await settle();
    advance(4001);
    repair.setUrl(11, url(a11));
    await settle();
    expect(origin.requests).toHaveLength(0);
    expect(delivered).toHaveLength(0);
    expect(repair.counters.packetsUnplaced).toBe(1);
  });

  it('serves an open segment’s packets with the whole count and its packet size', async () => {
    const bytes = segmentBytes(20, 50_000);
    const a = announced(20, bytes, 16, 320, 4096);
    const { delivered, repair, url } = harness([{ a, bytes }]);
    repair.setUrl(20, url(a));
    // Packet 13 is past the end of 50 000 bytes at 4096 per packet: empty, fetched from nobody.
    repair.fetchOrigin(12, [packetPlace(320, 12, D).seq]);
    repair.fetchOrigin(13, [packetPlace(320, 13, D).seq]);
    await settle();
    expect(delivered).toHaveLength(2);
    const decoded = delivered.map((d) => decodeMediaPacket(d.payload));
    for (const d of decoded) expect(d.ok && d.packet.count).toBe(16);
    expect(decoded.map((d) => (d.ok ? d.packet.bytes.length : -1))).toEqual([50_000 - 12 * 4096, 0]);
  });
});

function rangeOf(a: SignedAnnouncement, first: number, last: number): string {
  const plan = planOf(a);
  return `bytes=${packetRange(plan, a.bytes, first)[0]}-${packetRange(plan, a.bytes, last)[1] - 1}`;
}

describe('SegmentPace', () => {
  const at = (sequence: number, publishedAtMs: number) => ({ sequence, publishedAtMs, durationMs: 2000 });

  it('smooths the gaps between consecutive segments, leaving out pauses, repeats and jumps', () => {
    const pace = new SegmentPace();
    expect(pace.ms).toBeNull();
    pace.announced(at(10, 100_000));
    expect(pace.ms).toBeNull();
    pace.announced(at(11, 104_000));
    expect(pace.ms).toBe(4000);
    pace.announced(at(12, 106_000));
    // A quarter of the way to the new gap (2000).
    expect(pace.ms).toBe(3500);
    // A repeat, an old one, a jump and a pause over 8 durations change nothing.
    pace.announced(at(12, 107_000));
    pace.announced(at(9, 90_000));
    pace.announced(at(14, 110_000));
    pace.announced(at(15, 150_000));
    expect(pace.ms).toBe(3500);
    // A gap under a quarter of the duration is left out too.
    pace.announced(at(16, 150_400));
    expect(pace.ms).toBe(3500);
  });
});
