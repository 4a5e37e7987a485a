import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  BLOOM_BITS,
  bloomContains,
  bloomEquals,
  bloomIsEmpty,
  bloomOr,
  bloomPopCount,
  decode,
  EMPTY_BLOOM,
  encode,
  EncodeError,
  MAX_MESSAGE_BYTES,
  MAX_PAYLOAD_BYTES,
  MAX_REPORT_CANDIDATES,
  MAX_SLICES,
  MessageType,
  WIRE_VERSION,
  type AdvertMessage,
  type AdvertSliceEntry,
  type Bloom128,
  type DataMessage,
  type DecodeErrorKind,
  type DecodeResult,
  type LoadCandidate,
  type LoadReportMessage,
  type ForcedReason,
  type LinkDirection,
  type LinkOp,
  type Message,
  type RejectReason,
  type RepairNakReason,
  type SwitchReason,
  type TreeRole,
  type WalkPurpose,
} from '@chunkycast/wire';
import { anyMessage, bloom128 } from './arbitraries.js';

const SEED = 0x0b0b;

function expectError(result: DecodeResult, kind: DecodeErrorKind, offset?: number): void {
  expect(result.ok ? 'ok' : result.error.kind).toBe(kind);
  if (!result.ok) {
    expect(result.error.message.length).toBeGreaterThan(0);
    if (offset !== undefined) expect(result.error.offset).toBe(offset);
  }
}

/** `message` encoded, then `bytes` written from `at`. */
function patched(message: Message, at: number, ...bytes: number[]): Uint8Array {
  const out = encode(message);
  expect(at + bytes.length).toBeLessThanOrEqual(out.byteLength);
  out.set(bytes, at);
  return out;
}

function withU8(bytes: Uint8Array, at: number, value: number): Uint8Array {
  const out = bytes.slice();
  out[at] = value;
  return out;
}

const entry = (slice: number, overrides: Partial<AdvertSliceEntry> = {}): AdvertSliceEntry => ({
  slice,
  receiving: true,
  isSliceSource: false,
  hops: 2,
  offsetMs: 5,
  pathMs: 300,
  filter: [1, 2, 3, 4],
  ...overrides,
});

const advert = (overrides: Partial<AdvertMessage> = {}): AdvertMessage => ({
  type: MessageType.Advert,
  full: true,
  load: 3,
  targetLoad: 5,
  lowerLatencyThreshold: 4,
  upperLatencyThreshold: 8,
  maxLoad: 10,
  sentAtMs: 1000,
  echoSentAtMs: null,
  echoHoldMs: 0,
  entries: [entry(0), entry(1)],
  ...overrides,
});
/** Byte offsets inside an advert. */
const ADVERT = { flags: 2, echo: 17, hold: 21, count: 23, entries: 24, entryBytes: 23 } as const;

const candidate = (peer: number): LoadCandidate => ({
  peer,
  load: 1,
  lowerLatencyThreshold: 2,
  targetLoad: 3,
});
const loadReport = (count: number): LoadReportMessage => ({
  type: MessageType.LoadReport,
  slice: 1,
  candidates: Array.from({ length: count }, (_, i) => candidate(i + 100)),
});

const data = (payloadBytes: number, overrides: Partial<DataMessage> = {}): DataMessage => ({
  type: MessageType.Data,
  slice: 0,
  seq: 1,
  bloom: EMPTY_BLOOM,
  hops: 1,
  payload: new Uint8Array(payloadBytes),
  ...overrides,
});
const DATA_LENGTH_OFFSET = 24;

function u32le(value: number): number[] {
  return [value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, value >>> 24];
}

type Of<T extends MessageType> = Extract<Message, { readonly type: T }>;
const probe: Of<typeof MessageType.Probe> = {
  type: MessageType.Probe,
  slice: 0,
  probeId: 1,
  bloom: EMPTY_BLOOM,
  hops: 1,
};
/** Body: slice (2), reason (3), handoffSeq, loads. */
const switchRequest: Of<typeof MessageType.SwitchRequest> = {
  type: MessageType.SwitchRequest,
  slice: 0,
  reason: 0,
  handoffSeq: 5,
  targetLoadSeen: 1,
  parentLoadSeen: 2,
};
/** Body: slice (2), handoffSeq (3..6), accepted (7), rejectReason (8), load (9..10). */
const switchReply: Of<typeof MessageType.SwitchReply> = {
  type: MessageType.SwitchReply,
  slice: 0,
  handoffSeq: 5,
  accepted: true,
  rejectReason: 0,
  load: 1,
};
/** Body: slice (2), target (3..6), granted (7). */
const latencyReply: Of<typeof MessageType.LatencyPermissionReply> = {
  type: MessageType.LatencyPermissionReply,
  slice: 0,
  target: 4,
  granted: true,
};
/** Body: slice (2), reason (3), fromSeq. */
const forcedRequest: Of<typeof MessageType.ForcedParentRequest> = {
  type: MessageType.ForcedParentRequest,
  slice: 0,
  reason: 0,
  fromSeq: 0xffff_ffff,
};
/** Body: slice (2), role (3). */
const treeLeave: Of<typeof MessageType.TreeLeave> = { type: MessageType.TreeLeave, slice: 0, role: 0 };
/** Body: slice (2), epoch (3..6), assigned (7), has peer (8), then the peer (9..12) if it has one. */
const sliceSourceAssign: Of<typeof MessageType.SliceSourceAssign> = {
  type: MessageType.SliceSourceAssign,
  slice: 0,
  epoch: 1,
  assigned: true,
};
/** Body: walkId (2..5), origin (6..9), purpose (10), ttl (11). */
const walk: Of<typeof MessageType.Walk> = {
  type: MessageType.Walk,
  walkId: 1,
  origin: 2,
  purpose: 0,
  ttl: 5,
};
/** Body: op (2), direction (3), walkId (4..7). */
const link: Of<typeof MessageType.Link> = { type: MessageType.Link, op: 0, direction: 0, walkId: 0 };

/** Body: slice (2), requestId (3..6), baseSeq (7..10), wanted (11..14). */
const packetRepairRequest: Of<typeof MessageType.PacketRepairRequest> = {
  type: MessageType.PacketRepairRequest,
  slice: 0,
  requestId: 7,
  baseSeq: 100,
  wanted: 0b101,
};
/** Body: slice (2), requestId (3..6), seq (7..10), hops (11), payload length (12..15), payload. */
const packetRepairData: Of<typeof MessageType.PacketRepairData> = {
  type: MessageType.PacketRepairData,
  slice: 0,
  requestId: 7,
  seq: 102,
  hops: 3,
  payload: Uint8Array.of(1, 2, 3, 4),
};
const PACKET_REPAIR_DATA_LENGTH_OFFSET = 12;
/** Body: slice (2), requestId (3..6), baseSeq (7..10), unserved (11..14), reason (15). */
const packetRepairNak: Of<typeof MessageType.PacketRepairNak> = {
  type: MessageType.PacketRepairNak,
  slice: 0,
  requestId: 7,
  baseSeq: 100,
  unserved: 0x8000_0000,
  reason: 1,
};
/** Where the bitmap of a packet repair request or NAK starts. */
const PACKET_BITMAP_OFFSET = 11;

/** One valid message of every type that carries a slice, always as its first body byte. */
const withSlice: Message[] = [
  data(3),
  probe,
  loadReport(1),
  { type: MessageType.Instruction, slice: 0, target: 9, targetLoadSeen: 2 },
  switchRequest,
  switchReply,
  { type: MessageType.SwitchComplete, slice: 0, handoffSeq: 5, newParent: 3 },
  { type: MessageType.LatencyPermissionRequest, slice: 0, target: 4, parentLoadSeen: 1 },
  latencyReply,
  { type: MessageType.Flood, slice: 0, epoch: 2, bloom: EMPTY_BLOOM, hops: 0 },
  forcedRequest,
  treeLeave,
  sliceSourceAssign,
  packetRepairRequest,
  packetRepairData,
  packetRepairNak,
];

describe('one test per DecodeErrorKind', () => {
  it('empty: a zero-length input', () => {
    expectError(decode(new Uint8Array(0)), 'empty', 0);
  });

  it('tooLarge: one byte over MAX_MESSAGE_BYTES, even if it starts like a message', () => {
    const input = new Uint8Array(MAX_MESSAGE_BYTES + 1);
    input.set([WIRE_VERSION, MessageType.Data]);
    expectError(decode(input), 'tooLarge', 0);
  });

  it('unsupportedVersion: any version byte but WIRE_VERSION', () => {
    for (const version of [0, WIRE_VERSION + 1, 0xff]) {
      expectError(decode(Uint8Array.of(version, MessageType.Heartbeat)), 'unsupportedVersion', 0);
    }
  });

  it('unknownType: type codes 0 and above the last type', () => {
    const last = Math.max(...Object.values(MessageType));
    for (const type of [0, last + 1, 0xff]) {
      expectError(decode(Uint8Array.of(WIRE_VERSION, type)), 'unknownType', 1);
    }
  });

  it('truncated: a header without its type, or a body cut short', () => {
    expectError(decode(Uint8Array.of(WIRE_VERSION)), 'truncated', 1);
    expectError(decode(Uint8Array.of(WIRE_VERSION, MessageType.Quit, 0x10)), 'truncated', 2);
  });

  it('trailingBytes: a complete message followed by more', () => {
    expectError(decode(Uint8Array.of(WIRE_VERSION, MessageType.Heartbeat, 0)), 'trailingBytes', 2);
  });

  it('repair requests: count 1‥4096, a bitmap of exactly ceil(count / 8) bytes, no bits past the last packet', () => {
    const request = (count: number, missing: Uint8Array): Uint8Array => {
      const out = new Uint8Array(2 + 4 + 4 + 2 + missing.length);
      const view = new DataView(out.buffer);
      out.set([WIRE_VERSION, MessageType.RepairRequest]);
      view.setUint32(2, 7, true);
      view.setUint32(6, 9, true);
      view.setUint16(10, count, true);
      out.set(missing, 12);
      return out;
    };
    expect(decode(request(16, Uint8Array.of(0xff, 0x81))).ok).toBe(true);
    expect(decode(request(12, Uint8Array.of(0xff, 0x0f))).ok).toBe(true);
    expectError(decode(request(12, Uint8Array.of(0xff, 0x10))), 'invalidValue', 13);
    expectError(decode(request(0, new Uint8Array(0))), 'limitExceeded', 10);
    expectError(decode(request(4097, new Uint8Array(513))), 'limitExceeded', 10);
    expectError(decode(request(16, Uint8Array.of(0xff))), 'truncated');
    expect(() =>
      encode({
        type: MessageType.RepairRequest,
        requestId: 1,
        segment: 1,
        count: 16,
        missing: new Uint8Array(3),
      }),
    ).toThrow(EncodeError);
  });

  it('limitExceeded: a slice at MAX_SLICES', () => {
    expectError(decode(patched(probe, 2, MAX_SLICES)), 'limitExceeded', 2);
  });

  it('invalidValue: a bool byte that is neither 0 nor 1', () => {
    expectError(decode(patched(latencyReply, 7, 2)), 'invalidValue', 7);
  });
});

describe('decode limits', () => {
  it.each(withSlice.map((m) => [m.type, m] as const))('type %i: slice >= MAX_SLICES', (_type, m) => {
    expect(decode(encode({ ...m, slice: MAX_SLICES - 1 } as Message)).ok).toBe(true);
    for (const slice of [MAX_SLICES, MAX_SLICES + 1, 0xff]) {
      expectError(decode(patched(m, 2, slice)), 'limitExceeded', 2);
    }
  });

  it('an advert entry slice >= MAX_SLICES', () => {
    const bytes = encode(advert());
    expectError(decode(withU8(bytes, ADVERT.entries + ADVERT.entryBytes, MAX_SLICES)), 'limitExceeded');
  });

  it('more than MAX_REPORT_CANDIDATES candidates', () => {
    expect(decode(encode(loadReport(MAX_REPORT_CANDIDATES))).ok).toBe(true);
    // A well-formed report of 9 candidates, except that its count is out of range.
    const nine = [...encode(loadReport(MAX_REPORT_CANDIDATES)), ...[0, 0, 0, 0, 0, 0, 0, 0]];
    nine[3] = MAX_REPORT_CANDIDATES + 1;
    expectError(decode(Uint8Array.from(nine)), 'limitExceeded', 3);
    expectError(decode(withU8(encode(loadReport(1)), 3, 0xff)), 'limitExceeded', 3);
  });

  it('a load report with no candidates', () => {
    expectError(decode(Uint8Array.of(WIRE_VERSION, MessageType.LoadReport, 1, 0)), 'limitExceeded', 3);
  });

  it('an advert announcing more than MAX_SLICES entries', () => {
    const all = advert({ entries: Array.from({ length: MAX_SLICES }, (_, i) => entry(i)) });
    expect(decode(encode(all)).ok).toBe(true);
    const tooMany = [...encode(all), ...new Array<number>(ADVERT.entryBytes).fill(0)];
    tooMany[ADVERT.count] = MAX_SLICES + 1;
    expectError(decode(Uint8Array.from(tooMany)), 'limitExceeded', ADVERT.count);
    // Refused on the count alone, before looking for the bytes.
    expectError(decode(withU8(encode(advert()), ADVERT.count, 0xff)), 'limitExceeded', ADVERT.count);
  });

  it('an advert announcing more entries than it carries is truncated', () => {
    expectError(decode(withU8(encode(advert()), ADVERT.count, 3)), 'truncated', ADVERT.count + 1);
  });

  it('a payload over MAX_PAYLOAD_BYTES', () => {
    const largest = encode(data(MAX_PAYLOAD_BYTES));
    expect(largest.byteLength).toBe(MAX_MESSAGE_BYTES);
    expect(decode(largest).ok).toBe(true);
    const over = patched(data(4), DATA_LENGTH_OFFSET, ...u32le(MAX_PAYLOAD_BYTES + 1));
    expectError(decode(over), 'limitExceeded', DATA_LENGTH_OFFSET);
    const huge = patched(data(4), DATA_LENGTH_OFFSET, ...u32le(0xffff_ffff));
    expectError(decode(huge), 'limitExceeded', DATA_LENGTH_OFFSET);
  });

  it('a payload length that disagrees with the bytes present', () => {
    expectError(decode(patched(data(4), DATA_LENGTH_OFFSET, ...u32le(5))), 'truncated');
    expectError(decode(patched(data(4), DATA_LENGTH_OFFSET, ...u32le(3))), 'trailingBytes', 31);
  });

  it('advert entries out of order or duplicated', () => {
    const bytes = encode(advert({ entries: [entry(3), entry(5)] }));
    const second = ADVERT.entries + ADVERT.entryBytes;
    expectError(decode(withU8(bytes, second, 2)), 'invalidValue', second);
    expectError(decode(withU8(bytes, second, 3)), 'invalidValue', second);
    expect(decode(withU8(bytes, second, 4)).ok).toBe(true);
  });

  it('bad bools', () => {
    for (const m of [latencyReply, sliceSourceAssign, switchReply]) {
      const at = 7; // granted, assigned, accepted
      for (const value of [2, 0x80, 0xff]) expectError(decode(patched(m, at, value)), 'invalidValue', at);
    }
    // A root assignment's "has peer" flag.
    for (const value of [2, 0xff])
      expectError(decode(patched(sliceSourceAssign, 8, value)), 'invalidValue', 8);
  });

  it('a root assignment that says it names a peer and does not, or names one without saying so', () => {
    const moved = encode({ ...sliceSourceAssign, peer: 0x0102_0304 });
    expect(moved.byteLength).toBe(13);
    expect(decode(moved)).toEqual({ ok: true, message: { ...sliceSourceAssign, peer: 0x0102_0304 } });
    expectError(decode(moved.subarray(0, 11)), 'truncated', 9);
    const plain = encode(sliceSourceAssign);
    expect(plain.byteLength).toBe(9);
    const extra = new Uint8Array(13);
    extra.set(plain);
    expectError(decode(extra), 'trailingBytes', 9);
  });

  it('enums out of range', () => {
    const cases: [Message, number, number][] = [
      [switchRequest, 3, 2], // reason: Load, Latency
      [switchReply, 8, 10], // rejectReason: 0..9
      [forcedRequest, 3, 6], // reason: 0..5
      [treeLeave, 3, 2], // role: Child, Parent
      [walk, 10, 4], // purpose: 0..3
      [link, 2, 2], // op: Add, Remove
      [link, 3, 2], // direction: Out, In
      [packetRepairNak, 15, 3], // reason: NotHeld, Busy, Pending
    ];
    for (const [m, at, firstBad] of cases) {
      // The last valid value is accepted (for a reject reason only with accepted = false).
      const lastGood = patched(m, at, firstBad - 1);
      if (m.type === MessageType.SwitchReply) lastGood[7] = 0;
      expect(decode(lastGood).ok).toBe(true);
      for (const value of [firstBad, 0xff]) expectError(decode(patched(m, at, value)), 'invalidValue', at);
    }
  });

  it('a switch reply whose verdict and reject reason disagree', () => {
    expectError(decode(patched(switchReply, 8, 3)), 'invalidValue', 8); // accepted, with a reason
    expectError(decode(patched(switchReply, 7, 0)), 'invalidValue', 8); // rejected, without one
    expect(decode(patched(switchReply, 7, 0, 3)).ok).toBe(true); // rejected for LoadChanged
  });

  it('unknown advert and entry flag bits', () => {
    const bytes = encode(advert());
    for (const flags of [4, 8, 0x80]) {
      expectError(decode(withU8(bytes, ADVERT.flags, flags)), 'invalidValue', ADVERT.flags);
      expectError(decode(withU8(bytes, ADVERT.entries + 1, flags)), 'invalidValue', ADVERT.entries + 1);
    }
  });

  it('an advert echo flag that disagrees with the hold time', () => {
    const noEcho = encode(advert());
    expectError(decode(withU8(noEcho, ADVERT.flags, 3)), 'invalidValue', ADVERT.hold); // flag set, hold = none
    expectError(decode(withU8(noEcho, ADVERT.hold, 0xfe)), 'invalidValue', ADVERT.hold); // hold without flag
    const echo = encode(advert({ echoSentAtMs: 7, echoHoldMs: 3 }));
    expectError(decode(withU8(echo, ADVERT.flags, 1)), 'invalidValue', ADVERT.echo); // echo time without flag
  });

  it('an advert without echo whose echo time is not zero (non-canonical)', () => {
    const noEcho = encode(advert());
    for (let i = 0; i < 4; i++) {
      expectError(decode(withU8(noEcho, ADVERT.echo + i, 1)), 'invalidValue', ADVERT.echo);
    }
  });

  it('advert offsets: -32768 is "unknown", every other i16 is a value', () => {
    const bytes = encode(advert({ entries: [entry(0, { offsetMs: null })] }));
    const offsetAt = ADVERT.entries + 3;
    const read = (lo: number, hi: number): number | null => {
      const result = decode(patched(advert({ entries: [entry(0)] }), offsetAt, lo, hi));
      if (!result.ok || result.message.type !== MessageType.Advert) throw new Error('expected an advert');
      return result.message.entries[0]!.offsetMs;
    };
    expect([bytes[offsetAt], bytes[offsetAt + 1]]).toEqual([0x00, 0x80]);
    expect(read(0x00, 0x80)).toBeNull();
    expect(read(0x01, 0x80)).toBe(-32_767);
    expect(read(0xff, 0x7f)).toBe(32_767);
    expect(read(0xff, 0xff)).toBe(-1);
  });

  it('advert path estimates: 65535 is "unknown", every other u16 is a value', () => {
    const bytes = encode(advert({ entries: [entry(0, { pathMs: null })] }));
    const pathAt = ADVERT.entries + 5;
    const read = (lo: number, hi: number): number | null => {
      const result = decode(patched(advert({ entries: [entry(0)] }), pathAt, lo, hi));
      if (!result.ok || result.message.type !== MessageType.Advert) throw new Error('expected an advert');
      return result.message.entries[0]!.pathMs;
    };
    expect([bytes[pathAt], bytes[pathAt + 1]]).toEqual([0xff, 0xff]);
    expect(read(0xff, 0xff)).toBeNull();
    expect(read(0xfe, 0xff)).toBe(65_534);
    expect(read(0x00, 0x00)).toBe(0);
  });
});

describe('packet repair', () => {
  it('a request or NAK with an empty bitmap is refused as invalidValue at the bitmap', () => {
    for (const m of [packetRepairRequest, packetRepairNak]) {
      expectError(decode(patched(m, PACKET_BITMAP_OFFSET, 0, 0, 0, 0)), 'invalidValue', PACKET_BITMAP_OFFSET);
      // Any single bit, the highest included, is a valid bitmap.
      for (const bit of [0, 1, 31]) {
        expect(decode(patched(m, PACKET_BITMAP_OFFSET, ...u32le(2 ** bit))).ok).toBe(true);
      }
    }
  });

  it('every truncation is a typed truncated error', () => {
    for (const m of [packetRepairRequest, packetRepairData, packetRepairNak]) {
      const bytes = encode(m);
      for (let length = 1; length < bytes.byteLength; length++) {
        expectError(decode(bytes.subarray(0, length)), 'truncated', length < 2 ? 1 : undefined);
      }
    }
    // Cut inside the bitmap: truncated (not invalidValue), with the offset where the bitmap starts.
    expectError(
      decode(encode(packetRepairRequest).subarray(0, PACKET_BITMAP_OFFSET + 2)),
      'truncated',
      PACKET_BITMAP_OFFSET,
    );
  });

  it('repair data payload length: bounded by MAX_PAYLOAD_BYTES and matching the bytes present', () => {
    const largest = encode({ ...packetRepairData, payload: new Uint8Array(MAX_PAYLOAD_BYTES) });
    expect(decode(largest).ok).toBe(true);
    const over = patched(packetRepairData, PACKET_REPAIR_DATA_LENGTH_OFFSET, ...u32le(MAX_PAYLOAD_BYTES + 1));
    expectError(decode(over), 'limitExceeded', PACKET_REPAIR_DATA_LENGTH_OFFSET);
    expectError(
      decode(patched(packetRepairData, PACKET_REPAIR_DATA_LENGTH_OFFSET, ...u32le(5))),
      'truncated',
    );
    expectError(
      decode(patched(packetRepairData, PACKET_REPAIR_DATA_LENGTH_OFFSET, ...u32le(3))),
      'trailingBytes',
      PACKET_REPAIR_DATA_LENGTH_OFFSET + 4 + 3,
    );
  });
});

describe('encode refuses impossible values with EncodeError', () => {
  function expectEncodeError(message: Message): void {
    let thrown: unknown;
    try {
      encode(message);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(EncodeError);
    expect(thrown).toBeInstanceOf(TypeError);
    expect((thrown as Error).name).toBe('EncodeError');
    expect((thrown as Error).message.length).toBeGreaterThan(0);
  }

  it('slices outside 0..MAX_SLICES-1', () => {
    for (const slice of [MAX_SLICES, 255, -1, 1.5, Number.NaN]) expectEncodeError({ ...probe, slice });
    expectEncodeError(advert({ entries: [entry(MAX_SLICES)] }));
  });

  it('integers outside their field', () => {
    expectEncodeError(data(1, { seq: -1 }));
    expectEncodeError(data(1, { seq: 2 ** 32 }));
    expectEncodeError(data(1, { hops: 1.5 }));
    expectEncodeError(data(1, { hops: 256 }));
    expectEncodeError(data(1, { bloom: [0, 0, 0, -1] }));
    expectEncodeError(data(1, { bloom: [2 ** 32, 0, 0, 0] }));
    expectEncodeError(advert({ load: 0x1_0000 }));
    expectEncodeError(advert({ sentAtMs: Number.NaN }));
    expectEncodeError({ type: MessageType.Quit, lingerMs: Number.POSITIVE_INFINITY });
  });

  it('candidate counts outside 1..MAX_REPORT_CANDIDATES', () => {
    expectEncodeError(loadReport(MAX_REPORT_CANDIDATES + 1));
    expectEncodeError(loadReport(0));
    expect(() => encode(loadReport(MAX_REPORT_CANDIDATES))).not.toThrow();
  });

  it('a payload over MAX_PAYLOAD_BYTES', () => {
    expectEncodeError(data(MAX_PAYLOAD_BYTES + 1));
  });

  it('more than MAX_SLICES advert entries, or entries out of order', () => {
    expectEncodeError(advert({ entries: Array.from({ length: MAX_SLICES + 1 }, (_, i) => entry(i)) }));
    expectEncodeError(advert({ entries: [entry(2), entry(1)] }));
    expectEncodeError(advert({ entries: [entry(2), entry(2)] }));
  });

  it('advert echo fields that cannot be sent as given', () => {
    expectEncodeError(advert({ echoSentAtMs: 5, echoHoldMs: 0xffff }));
    expectEncodeError(advert({ echoSentAtMs: null, echoHoldMs: 12 }));
    expectEncodeError(advert({ entries: [entry(0, { offsetMs: Number.NaN })] }));
    expectEncodeError(advert({ entries: [entry(0, { pathMs: Number.NaN })] }));
  });

  it('a packet repair request or NAK with an empty bitmap', () => {
    expectEncodeError({ ...packetRepairRequest, wanted: 0 });
    expectEncodeError({ ...packetRepairNak, unserved: 0 });
    expectEncodeError({ ...packetRepairRequest, wanted: 2 ** 32 });
    expectEncodeError({ ...packetRepairNak, unserved: -1 });
    expectEncodeError({ ...packetRepairNak, reason: 3 as RepairNakReason });
    expectEncodeError({ ...packetRepairData, payload: new Uint8Array(MAX_PAYLOAD_BYTES + 1) });
  });

  it('a switch reply whose verdict and reject reason disagree', () => {
    expectEncodeError({ ...switchReply, accepted: true, rejectReason: 2 });
    expectEncodeError({ ...switchReply, accepted: false, rejectReason: 0 });
  });

  it('enum values the decoder would refuse', () => {
    // Casts stand in for untyped callers: the types already rule these values out.
    expectEncodeError({ ...switchRequest, reason: 2 as SwitchReason });
    expectEncodeError({ ...switchReply, accepted: false, rejectReason: 10 as RejectReason });
    expectEncodeError({ ...forcedRequest, reason: 6 as ForcedReason });
    expectEncodeError({ ...treeLeave, role: 2 as TreeRole });
    expectEncodeError({ ...walk, purpose: 4 as WalkPurpose });
    expectEncodeError({ ...link, op: 2 as LinkOp });
    expectEncodeError({ ...link, direction: -1 as LinkDirection });
    expectEncodeError({ ...walk, purpose: 1.5 as WalkPurpose });
  });

  it('an unknown message type', () => {
    expectEncodeError({ type: 0 } as unknown as Message);
    expectEncodeError({ type: 99 } as unknown as Message);
  });

  it('whatever encode accepts, decode returns unchanged', () => {
    // Valid messages with one top-level number replaced by a hostile value: encode must either
    // refuse with EncodeError or produce bytes that decode back to exactly that message.
    const hostile = fc.constantFrom(
      -1,
      1.5,
      Number.NaN,
      Infinity,
      2,
      4,
      6,
      10,
      64,
      255,
      256,
      0xffff,
      2 ** 32,
      2 ** 53,
    );
    fc.assert(
      fc.property(anyMessage({ maxPayloadBytes: 16 }), fc.nat(), hostile, (m, pick, value) => {
        const fields = Object.keys(m).filter(
          (k) => k !== 'type' && typeof (m as unknown as Record<string, unknown>)[k] === 'number',
        );
        const field = fields[pick % Math.max(1, fields.length)];
        const candidate: Message = field === undefined ? m : { ...m, [field]: value };
        let bytes: Uint8Array;
        try {
          bytes = encode(candidate);
        } catch (error) {
          expect((error as Error).name).toBe('EncodeError');
          return;
        }
        expect(decode(bytes)).toStrictEqual({ ok: true, message: candidate });
      }),
      { seed: SEED, numRuns: 3_000 },
    );
  });
});

describe('bloom helpers', () => {
  const bit = (index: number): Bloom128 => {
    const words: [number, number, number, number] = [0, 0, 0, 0];
    words[index >> 5] = 2 ** (index & 31);
    return words;
  };
  /** Indexes of the set bits, read off each word's binary digits. */
  const setBits = (filter: Bloom128): Set<number> => {
    const out = new Set<number>();
    filter.forEach((word, k) => {
      const digits = word.toString(2);
      for (let b = 0; b < digits.length; b++) {
        if (digits[digits.length - 1 - b] === '1') out.add(k * 32 + b);
      }
    });
    return out;
  };
  const ALL: Bloom128 = [0xffff_ffff, 0xffff_ffff, 0xffff_ffff, 0xffff_ffff];

  it('EMPTY_BLOOM is empty, frozen, and 128 bits wide', () => {
    expect(BLOOM_BITS).toBe(128);
    expect(bloomIsEmpty(EMPTY_BLOOM)).toBe(true);
    expect(bloomPopCount(EMPTY_BLOOM)).toBe(0);
    expect(Object.isFrozen(EMPTY_BLOOM)).toBe(true);
  });

  it('bloomOr sets the union of bits, as unsigned words', () => {
    expect(bloomOr([1, 0, 0x8000_0000, 0], [2, 0, 0, 0x8000_0001])).toEqual([3, 0, 0x8000_0000, 0x8000_0001]);
    expect(bloomOr(ALL, EMPTY_BLOOM)).toEqual(ALL);
    const a: Bloom128 = [5, 6, 7, 8];
    bloomOr(a, ALL);
    expect(a).toEqual([5, 6, 7, 8]);
    fc.assert(
      fc.property(bloom128(), bloom128(), bloom128(), (x, y, z) => {
        const xy = bloomOr(x, y);
        expect(xy.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff_ffff)).toBe(true);
        expect(bloomEquals(xy, bloomOr(y, x))).toBe(true);
        expect(bloomEquals(bloomOr(xy, z), bloomOr(x, bloomOr(y, z)))).toBe(true);
        expect(bloomEquals(bloomOr(x, x), x)).toBe(true);
        expect(bloomContains(xy, x) && bloomContains(xy, y)).toBe(true);
        expect(bloomPopCount(xy)).toBeLessThanOrEqual(bloomPopCount(x) + bloomPopCount(y));
        expect(bloomPopCount(xy)).toBeGreaterThanOrEqual(Math.max(bloomPopCount(x), bloomPopCount(y)));
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('bloomContains requires every bit of the mask, in every word', () => {
    expect(bloomContains(EMPTY_BLOOM, EMPTY_BLOOM)).toBe(true);
    expect(bloomContains(ALL, [0x8000_0000, 1, 0xffff_ffff, 0x1234])).toBe(true);
    for (let i = 0; i < BLOOM_BITS; i++) {
      expect(bloomContains(EMPTY_BLOOM, bit(i))).toBe(false);
      expect(bloomContains(bit(i), bit(i))).toBe(true);
      expect(bloomContains(bit(i), bit((i + 1) % BLOOM_BITS))).toBe(false);
      // Every other bit set is still not enough.
      const allBut = ALL.map((w, k) =>
        k === i >> 5 ? (w & ~(2 ** (i & 31))) >>> 0 : w,
      ) as unknown as Bloom128;
      expect(bloomContains(allBut, bit(i))).toBe(false);
    }
    fc.assert(
      fc.property(bloom128(), bloom128(), fc.nat(BLOOM_BITS - 1), (filter, other, i) => {
        const subset = filter.map((w, k) => (w & other[k]!) >>> 0) as unknown as Bloom128;
        expect(bloomContains(filter, subset)).toBe(true);
        expect(bloomContains(filter, bloomOr(subset, bit(i)))).toBe(setBits(filter).has(i));
        const otherBits = setBits(other);
        expect(bloomContains(filter, other)).toBe([...otherBits].every((b) => setBits(filter).has(b)));
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('bloomPopCount counts set bits, high bits included', () => {
    expect(bloomPopCount(ALL)).toBe(128);
    expect(bloomPopCount([0x8000_0000, 0x8000_0001, 0, 0xffff_fffe])).toBe(1 + 2 + 31);
    for (let i = 0; i < BLOOM_BITS; i++) expect(bloomPopCount(bit(i))).toBe(1);
    fc.assert(
      fc.property(bloom128(), (filter) => {
        expect(bloomPopCount(filter)).toBe(setBits(filter).size);
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('bloomEquals compares all four words', () => {
    expect(bloomEquals([1, 2, 3, 4], [1, 2, 3, 4])).toBe(true);
    for (let k = 0; k < 4; k++) {
      const other = [1, 2, 3, 4].map((w, j) => (j === k ? w + 1 : w)) as unknown as Bloom128;
      expect(bloomEquals([1, 2, 3, 4], other)).toBe(false);
      expect(bloomEquals(other, [1, 2, 3, 4])).toBe(false);
    }
  });

  it('bloomIsEmpty is true only with no bit set', () => {
    expect(bloomIsEmpty([0, 0, 0, 0])).toBe(true);
    for (let i = 0; i < BLOOM_BITS; i++) expect(bloomIsEmpty(bit(i))).toBe(false);
    fc.assert(
      fc.property(bloom128(), (filter) => {
        expect(bloomIsEmpty(filter)).toBe(bloomPopCount(filter) === 0);
      }),
      { seed: SEED, numRuns: 200 },
    );
  });
});
