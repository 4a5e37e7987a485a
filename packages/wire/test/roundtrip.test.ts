import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decode,
  encode,
  encodedSize,
  MESSAGE_TYPE_NAMES,
  MessageType,
  SlabAllocator,
  WIRE_VERSION,
  type AdvertMessage,
  type Message,
} from '@chunkycast/wire';
import { anyMessage, messageArbitraries, type MessageTypeName } from './arbitraries.js';

const SEED = 0x00c0_ffee;
const RUNS_PER_TYPE = 300;

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

function fromHex(text: string): Uint8Array {
  return new Uint8Array(Buffer.from(text.replace(/\s+/g, ''), 'hex'));
}

function expectRoundTrip(message: Message): void {
  const bytes = encode(message);
  expect(bytes.byteLength).toBe(encodedSize(message));
  expect(bytes[0]).toBe(WIRE_VERSION);
  expect(bytes[1]).toBe(message.type);
  expect(decode(bytes)).toStrictEqual({ ok: true, message });
}

/** A data message carrying `payload`, encoded. */
function dataBytes(payload: Uint8Array): Uint8Array {
  return encode({ type: MessageType.Data, slice: 2, seq: 9, bloom: [0, 0, 0, 0], hops: 1, payload });
}

const typeEntries = Object.entries(MessageType) as [MessageTypeName, MessageType][];

describe('every message type has an arbitrary', () => {
  it('has exactly one arbitrary per MessageType name', () => {
    expect(Object.keys(messageArbitraries).sort()).toEqual(Object.keys(MessageType).sort());
  });

  it.each(typeEntries)('the %s arbitrary generates type code %i', (name, code) => {
    const arbitrary = (messageArbitraries as Partial<Record<string, fc.Arbitrary<Message>>>)[name];
    expect(arbitrary).toBeDefined();
    const samples = fc.sample(arbitrary!, { numRuns: 20, seed: SEED });
    expect(samples).toHaveLength(20);
    for (const m of samples) expect(m.type).toBe(code);
  });

  it('type codes are distinct and each has a name', () => {
    const codes = Object.values(MessageType);
    expect(new Set(codes).size).toBe(codes.length);
    expect(
      Object.keys(MESSAGE_TYPE_NAMES)
        .map(Number)
        .sort((a, b) => a - b),
    ).toEqual([...codes].sort((a, b) => a - b));
  });
});

describe('decode(encode(m)) is m', () => {
  it.each(typeEntries)('%s', (name) => {
    const arbitrary: fc.Arbitrary<Message> = messageArbitraries[name];
    fc.assert(
      fc.property(arbitrary, (m) => {
        expectRoundTrip(m);
      }),
      { seed: SEED, numRuns: RUNS_PER_TYPE },
    );
  });

  it('round trips adverts with every slice present', () => {
    fc.assert(
      fc.property(messageArbitraries.Advert, (m) => {
        const entries = Array.from({ length: 64 }, (_, slice) => ({
          ...(m.entries[0] ?? {
            receiving: true,
            isSliceSource: false,
            hops: 3,
            offsetMs: -12,
            pathMs: 480,
            filter: [1, 2, 3, 4] as const,
          }),
          slice,
        }));
        expectRoundTrip({ ...m, entries });
      }),
      { seed: SEED, numRuns: 50 },
    );
  });

  it('decodes from a view into a larger buffer', () => {
    fc.assert(
      fc.property(anyMessage({ maxPayloadBytes: 256 }), fc.nat(31), fc.nat(31), (m, before, after) => {
        const bytes = encode(m);
        const buffer = new Uint8Array(before + bytes.byteLength + after).fill(0xa5);
        buffer.set(bytes, before);
        const view = buffer.subarray(before, before + bytes.byteLength);
        expect(decode(view)).toStrictEqual({ ok: true, message: m });
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('a decoded payload is a copy, not a view into the input', () => {
    const bytes = dataBytes(Uint8Array.of(10, 20, 30));
    const result = decode(bytes);
    if (!result.ok || result.message.type !== MessageType.Data) throw new Error('expected a data message');
    bytes.fill(0xff);
    expect([...result.message.payload]).toEqual([10, 20, 30]);
  });

  it('copies payloads where decode is told to (a slab), and round trips every message so', () => {
    const slabs = new SlabAllocator(64);
    const slabBuffers = new Set<ArrayBufferLike>();
    let payloads = 0;
    const allocate = (size: number): Uint8Array => {
      const out = slabs.allocate(size);
      slabBuffers.add(out.buffer);
      return out;
    };
    fc.assert(
      fc.property(anyMessage({ maxPayloadBytes: 1024 }), (m) => {
        const bytes = encode(m);
        const result = decode(bytes, allocate);
        expect(result).toStrictEqual({ ok: true, message: m });
        bytes.fill(0xff); // the payload is a copy, not a view into the input
        expect(result).toStrictEqual({ ok: true, message: m });
        if (result.ok && 'payload' in result.message && result.message.payload.length > 0) {
          payloads++;
          // Within a slab unless larger than one (then a buffer of its own, as SlabAllocator does).
          expect(slabBuffers.has(result.message.payload.buffer)).toBe(true);
        }
      }),
      { seed: SEED, numRuns: 500 },
    );
    // Payloads share slabs: the point of it.
    expect(slabBuffers.size).toBeGreaterThan(1);
    expect(slabBuffers.size).toBeLessThan(payloads);
  });

  it('reports an allocator that returns the wrong size as a decode error, and never throws', () => {
    const bytes = dataBytes(Uint8Array.of(10, 20, 30));
    const result = decode(bytes, (size) => new Uint8Array(size + 1));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.message).toContain('payload allocator returned 4 bytes for 3');
    // An empty payload asks the allocator for nothing.
    const empty = dataBytes(new Uint8Array(0));
    expect(
      decode(empty, () => {
        throw new Error('not asked');
      }).ok,
    ).toBe(true);
  });

  it('encodes fresh bytes every time', () => {
    const m: Message = { type: MessageType.Quit, lingerMs: 500 };
    const a = encode(m);
    const b = encode(m);
    expect(a).not.toBe(b);
    expect(a.buffer).not.toBe(b.buffer);
  });
});

describe('advert offsets', () => {
  const base: AdvertMessage = {
    type: MessageType.Advert,
    full: true,
    load: 0,
    targetLoad: 0,
    lowerLatencyThreshold: 0,
    upperLatencyThreshold: 0,
    maxLoad: 0,
    sentAtMs: 0,
    echoSentAtMs: null,
    echoHoldMs: 0,
    entries: [],
  };
  /** One advert entry with these `offsetMs` and `pathMs`, as it decodes. */
  const entryAfterRoundTrip = (offsetMs: number | null, pathMs: number | null) => {
    const result = decode(
      encode({
        ...base,
        entries: [
          {
            slice: 0,
            receiving: true,
            isSliceSource: false,
            hops: 1,
            offsetMs,
            pathMs,
            filter: [0, 0, 0, 0],
          },
        ],
      }),
    );
    if (!result.ok || result.message.type !== MessageType.Advert) throw new Error('expected an advert');
    return result.message.entries[0]!;
  };
  const offsetAfterRoundTrip = (offsetMs: number | null) => entryAfterRoundTrip(offsetMs, null).offsetMs;
  const pathAfterRoundTrip = (pathMs: number | null) => entryAfterRoundTrip(0, pathMs).pathMs;

  it('rounds fractional moving averages to whole milliseconds', () => {
    expect(offsetAfterRoundTrip(12.4)).toBe(12);
    expect(offsetAfterRoundTrip(-7.6)).toBe(-8);
  });

  it('clamps offsets to ±32767 so they never collide with "unknown"', () => {
    expect(offsetAfterRoundTrip(40_000)).toBe(32_767);
    expect(offsetAfterRoundTrip(-32_768)).toBe(-32_767);
    expect(offsetAfterRoundTrip(-1e9)).toBe(-32_767);
    expect(offsetAfterRoundTrip(Number.POSITIVE_INFINITY)).toBe(32_767);
    expect(offsetAfterRoundTrip(null)).toBeNull();
  });

  it('rounds path estimates to whole milliseconds and clamps them to 0‥65534 ("unknown" is 65535)', () => {
    expect(pathAfterRoundTrip(480.4)).toBe(480);
    expect(pathAfterRoundTrip(0)).toBe(0);
    expect(pathAfterRoundTrip(-3)).toBe(0);
    expect(pathAfterRoundTrip(70_000)).toBe(65_534);
    expect(pathAfterRoundTrip(Number.POSITIVE_INFINITY)).toBe(65_534);
    expect(pathAfterRoundTrip(null)).toBeNull();
  });
});

describe('known encodings (little-endian wire format, version 2)', () => {
  const cases: [string, Message, string][] = [
    ['heartbeat', { type: MessageType.Heartbeat }, '02 0d'],
    ['quit', { type: MessageType.Quit, lingerMs: 0x1234 }, '02 0e 3412'],
    [
      'data',
      {
        type: MessageType.Data,
        slice: 1,
        seq: 2,
        bloom: [0x11223344, 0, 0, 0xffffffff],
        hops: 3,
        payload: Uint8Array.of(0xaa, 0xbb),
      },
      '02 01 01 02000000 44332211 00000000 00000000 ffffffff 03 02000000 aabb',
    ],
    [
      'switch reply',
      {
        type: MessageType.SwitchReply,
        slice: 5,
        handoffSeq: 0x01020304,
        accepted: false,
        rejectReason: 2,
        load: 7,
      },
      '02 07 05 04030201 00 02 0700',
    ],
    [
      'advert without echo',
      {
        type: MessageType.Advert,
        full: true,
        load: 1,
        targetLoad: 2,
        lowerLatencyThreshold: 2,
        upperLatencyThreshold: 3,
        maxLoad: 4,
        sentAtMs: 0x0a0b0c0d,
        echoSentAtMs: null,
        echoHoldMs: 0,
        entries: [
          {
            slice: 3,
            receiving: true,
            isSliceSource: false,
            hops: 2,
            offsetMs: null,
            pathMs: 0x1234,
            filter: [1, 0, 0, 0x80000000],
          },
          {
            slice: 9,
            receiving: false,
            isSliceSource: true,
            hops: 0,
            offsetMs: -2,
            pathMs: null,
            filter: [0, 0, 0, 0],
          },
        ],
      },
      '02 03 01 0100 0200 0200 0300 0400 0d0c0b0a 00000000 ffff 02' +
        ' 03 01 02 0080 3412 01000000 00000000 00000000 00000080' +
        ' 09 02 00 feff ffff 00000000 00000000 00000000 00000000',
    ],
    [
      'advert with echo',
      {
        type: MessageType.Advert,
        full: false,
        load: 0,
        targetLoad: 0,
        lowerLatencyThreshold: 0,
        upperLatencyThreshold: 0,
        maxLoad: 0,
        sentAtMs: 0,
        echoSentAtMs: 0xdeadbeef,
        echoHoldMs: 250,
        entries: [],
      },
      '02 03 02 0000 0000 0000 0000 0000 00000000 efbeadde fa00 00',
    ],
    [
      'load report',
      {
        type: MessageType.LoadReport,
        slice: 63,
        candidates: [{ peer: 0xcafe, load: 3, lowerLatencyThreshold: 9, targetLoad: 10 }],
      },
      '02 04 3f 01 feca0000 0300 0900 0a00',
    ],
    [
      'walk',
      { type: MessageType.Walk, walkId: 1, origin: 2, purpose: 3, ttl: 4 },
      '02 10 01000000 02000000 03 04',
    ],
    [
      'packet repair request',
      {
        type: MessageType.PacketRepairRequest,
        slice: 4,
        requestId: 0x01020304,
        baseSeq: 0xfffffff0,
        wanted: 0x80000001,
      },
      '02 19 04 04030201 f0ffffff 01000080',
    ],
    [
      'packet repair data',
      {
        type: MessageType.PacketRepairData,
        slice: 63,
        requestId: 9,
        seq: 0x0a0b0c0d,
        hops: 5,
        payload: Uint8Array.of(0xaa, 0xbb, 0xcc),
      },
      '02 1a 3f 09000000 0d0c0b0a 05 03000000 aabbcc',
    ],
    [
      'packet repair nak',
      {
        type: MessageType.PacketRepairNak,
        slice: 0,
        requestId: 9,
        baseSeq: 32,
        unserved: 0x0000ff00,
        reason: 1,
      },
      '02 1b 00 09000000 20000000 00ff0000 01',
    ],
  ];

  it.each(cases)('%s', (_name, message, expected) => {
    expect(hex(encode(message))).toBe(hex(fromHex(expected)));
    expect(decode(fromHex(expected))).toStrictEqual({ ok: true, message });
  });
});
