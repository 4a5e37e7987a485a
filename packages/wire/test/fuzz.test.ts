/**
 * Hostile-input fuzzing of `decode`: whatever bytes a peer sends, decode returns a typed result
 * without throwing, and anything it accepts is the one canonical encoding of what it returns.
 * Every property runs from a fixed seed, so a failure reproduces exactly.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  decode,
  encode,
  MAX_MESSAGE_BYTES,
  MAX_PAYLOAD_BYTES,
  MessageType,
  WIRE_VERSION,
  type DecodeErrorKind,
  type DecodeResult,
} from '@chunkycast/wire';
import { anyMessage } from './arbitraries.js';

const SEED = 20_240_601;
/** Small payloads and adverts keep each encoding short, so runs go to structure rather than payload bytes. */
const message = anyMessage({ maxPayloadBytes: 64, maxAdvertEntries: 8 });
const TYPE_CODES: ReadonlySet<number> = new Set(Object.values(MessageType));
const KINDS: ReadonlySet<DecodeErrorKind> = new Set<DecodeErrorKind>([
  'empty',
  'tooLarge',
  'unsupportedVersion',
  'unknownType',
  'truncated',
  'trailingBytes',
  'limitExceeded',
  'invalidValue',
]);

/** Inputs decoded per test, summed at the end. */
const inputsPerTest = new Map<string, number>();
function count(test: string, inputs = 1): void {
  inputsPerTest.set(test, (inputsPerTest.get(test) ?? 0) + inputs);
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Decode `input` and check the decoder's contract; returns the result for further checks. Plain
 * throws rather than `expect` keep the hot loop fast; fast-check reports the failing input.
 */
function decodeChecked(input: Uint8Array): DecodeResult {
  const result = decode(input);
  if (result.ok) {
    // Canonical: the only byte string that decodes to this message is its own encoding.
    const again = encode(result.message);
    if (!sameBytes(again, input)) {
      throw new Error(`non-canonical input accepted: ${hex(input)} re-encodes as ${hex(again)}`);
    }
    return result;
  }
  const { kind, message: text, offset } = result.error;
  if (!KINDS.has(kind)) throw new Error(`unknown error kind ${kind} for ${hex(input)}`);
  if (typeof text !== 'string' || text.length === 0) throw new Error(`empty error message for ${hex(input)}`);
  if (text.startsWith('decoder fault')) throw new Error(`decoder fault on ${hex(input)}: ${text}`);
  if (!Number.isInteger(offset) || offset < 0 || offset > input.byteLength) {
    throw new Error(`offset ${offset} outside 0..${input.byteLength} for ${hex(input)}`);
  }
  return result;
}

function expectKind(result: DecodeResult, kind: DecodeErrorKind, input: Uint8Array): void {
  if (result.ok || result.error.kind !== kind) {
    throw new Error(
      `expected ${kind} for ${hex(input)}, got ${JSON.stringify(result.ok ? 'ok' : result.error)}`,
    );
  }
}

describe('decode never throws and reports typed errors', () => {
  it('random byte strings of 0..600 bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), (input) => {
        count('random bytes');
        decodeChecked(input);
      }),
      { seed: SEED, numRuns: 15_000 },
    );
  });

  it('random bodies behind a valid header', () => {
    const header = fc.tuple(fc.constantFrom(...TYPE_CODES), fc.uint8Array({ maxLength: 600 }));
    fc.assert(
      fc.property(header, ([type, body]) => {
        count('valid header, random body');
        const input = new Uint8Array(2 + body.byteLength);
        input[0] = WIRE_VERSION;
        input[1] = type;
        input.set(body, 2);
        decodeChecked(input);
      }),
      { seed: SEED, numRuns: 20_000 },
    );
  });

  it('every truncation of a valid encoding is truncated (or empty)', () => {
    fc.assert(
      fc.property(message, (m) => {
        const bytes = encode(m);
        count('truncations', bytes.byteLength);
        for (let length = 0; length < bytes.byteLength; length++) {
          const prefix = bytes.subarray(0, length);
          expectKind(decodeChecked(prefix), length === 0 ? 'empty' : 'truncated', prefix);
        }
      }),
      { seed: SEED, numRuns: 2_000 },
    );
  });

  it('valid encodings with 1..4 bytes overwritten', () => {
    const overwrites = fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 0xff })), {
      minLength: 1,
      maxLength: 4,
    });
    fc.assert(
      fc.property(message, overwrites, (m, edits) => {
        count('overwritten bytes');
        const input = encode(m);
        for (const [position, value] of edits) input[position % input.byteLength] = value;
        decodeChecked(input);
      }),
      { seed: SEED, numRuns: 40_000 },
    );
  });

  it('valid encodings with 1..3 bits flipped', () => {
    fc.assert(
      fc.property(message, fc.array(fc.nat(), { minLength: 1, maxLength: 3 }), (m, flips) => {
        count('flipped bits');
        const input = encode(m);
        for (const bit of flips) {
          const position = Math.floor(bit / 8) % input.byteLength;
          input[position] = input[position]! ^ (1 << (bit % 8));
        }
        decodeChecked(input);
      }),
      { seed: SEED, numRuns: 15_000 },
    );
  });

  it('valid encodings with bytes inserted or removed', () => {
    const splice = fc.tuple(fc.nat(), fc.nat(4), fc.uint8Array({ maxLength: 4 }));
    fc.assert(
      fc.property(message, splice, (m, [at, removed, inserted]) => {
        count('spliced bytes');
        const bytes = encode(m);
        const start = at % (bytes.byteLength + 1);
        const input = Uint8Array.from([
          ...bytes.subarray(0, start),
          ...inserted,
          ...bytes.subarray(Math.min(bytes.byteLength, start + removed)),
        ]);
        decodeChecked(input);
      }),
      { seed: SEED, numRuns: 5_000 },
    );
  });

  it('valid encodings with trailing bytes', () => {
    fc.assert(
      fc.property(message, fc.uint8Array({ minLength: 1, maxLength: 32 }), (m, extra) => {
        count('trailing bytes');
        const bytes = encode(m);
        const input = new Uint8Array(bytes.byteLength + extra.byteLength);
        input.set(bytes);
        input.set(extra, bytes.byteLength);
        const result = decodeChecked(input);
        expectKind(result, 'trailingBytes', input);
        if (!result.ok) expect(result.error.offset).toBe(bytes.byteLength);
      }),
      { seed: SEED, numRuns: 5_000 },
    );
  });

  it('valid encodings with a wrong version byte', () => {
    const version = fc.integer({ min: 0, max: 0xff }).filter((v) => v !== WIRE_VERSION);
    fc.assert(
      fc.property(message, version, (m, v) => {
        count('wrong version');
        const input = encode(m);
        input[0] = v;
        const result = decodeChecked(input);
        expectKind(result, 'unsupportedVersion', input);
        if (!result.ok) expect(result.error.offset).toBe(0);
      }),
      { seed: SEED, numRuns: 5_000 },
    );
  });

  it('unknown type codes', () => {
    const unknownType = fc.integer({ min: 0, max: 0xff }).filter((t) => !TYPE_CODES.has(t));
    fc.assert(
      fc.property(unknownType, fc.uint8Array({ maxLength: 64 }), (type, body) => {
        count('unknown type');
        const input = Uint8Array.from([WIRE_VERSION, type, ...body]);
        const result = decodeChecked(input);
        expectKind(result, 'unknownType', input);
        if (!result.ok) expect(result.error.offset).toBe(1);
      }),
      { seed: SEED, numRuns: 5_000 },
    );
  });

  afterAll(() => {
    const total = [...inputsPerTest.values()].reduce((a, b) => a + b, 0);
    // Only meaningful when the whole file ran; a filtered run (-t) checks fewer inputs by design.
    if (inputsPerTest.size === 9) expect(total).toBeGreaterThanOrEqual(100_000);
  });
});

describe('decode work is bounded by the input', () => {
  /** Generous: these return after reading at most a few header bytes. */
  const QUICK_MS = 50;

  function timed(input: Uint8Array): { result: DecodeResult; ms: number } {
    const start = performance.now();
    const result = decode(input);
    return { result, ms: performance.now() - start };
  }

  it('refuses inputs over MAX_MESSAGE_BYTES as tooLarge without reading them', () => {
    for (const size of [MAX_MESSAGE_BYTES + 1, 4 * MAX_MESSAGE_BYTES, 64 * 1024 * 1024]) {
      const input = new Uint8Array(size);
      input[0] = WIRE_VERSION;
      input[1] = MessageType.Data;
      const { result, ms } = timed(input);
      expectKind(result, 'tooLarge', input.subarray(0, 16));
      expect(ms).toBeLessThan(QUICK_MS);
    }
  });

  it('a data message announcing a 4 GB payload is refused, not allocated', () => {
    const header = [WIRE_VERSION, MessageType.Data, 0, 0, 0, 0, 0, ...new Array<number>(16).fill(0), 0];
    const announced = [0xff, 0xff, 0xff, 0xff];
    for (const bodyBytes of [0, 10, MAX_MESSAGE_BYTES - header.length - announced.length]) {
      const input = Uint8Array.from([...header, ...announced, ...new Array<number>(bodyBytes).fill(7)]);
      expect(input.byteLength).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
      const { result, ms } = timed(input);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(['limitExceeded', 'truncated']).toContain(result.error.kind);
      expect(ms).toBeLessThan(QUICK_MS);
    }
  });

  it('a data message announcing the largest allowed payload but carrying little is truncated', () => {
    const length = MAX_PAYLOAD_BYTES;
    const input = Uint8Array.from([
      WIRE_VERSION,
      MessageType.Data,
      ...new Array<number>(22).fill(0),
      length & 0xff,
      (length >>> 8) & 0xff,
      (length >>> 16) & 0xff,
      length >>> 24,
      1,
      2,
      3,
    ]);
    const { result, ms } = timed(input);
    expectKind(result, 'truncated', input);
    expect(ms).toBeLessThan(QUICK_MS);
  });
});
