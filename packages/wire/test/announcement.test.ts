// The `Announcement` peer message: a signed segment announcement carried over the mesh as its
// canonical ASCII JSON text, validated by the very function that validates tracker frames.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decode,
  decodeServerMessage,
  encode,
  encodedSize,
  EncodeError,
  MAX_ANNOUNCED_PACKETS,
  MAX_ANNOUNCEMENT_TEXT_BYTES,
  MAX_MESSAGE_BYTES,
  MAX_URI_LENGTH,
  MessageType,
  WIRE_VERSION,
  announcementText,
  validateAnnouncement,
  type DecodeErrorKind,
  type DecodeResult,
  type SignedAnnouncement,
} from '@chunkycast/wire';
import { signedAnnouncement } from './arbitraries.js';

const SEED = 0x0a22_0024;

const base: SignedAnnouncement = {
  stream: 'live',
  sequence: 42,
  uri: 'live42.ts',
  bytes: 30_000,
  packets: 2,
  firstPacket: 4096,
  sha256: 'ab'.repeat(32),
  packetHashes: '01'.repeat(16) + 'fe'.repeat(16),
  durationMs: 2000,
  publishedAtMs: 1_700_000_000_123,
  signature: 'c2lnbmF0dXJl',
};

/** An Announcement message whose body is `text` exactly (length prefix included). */
function withText(text: string): Uint8Array {
  const body = Buffer.from(text, 'latin1');
  const out = new Uint8Array(2 + 4 + body.length);
  out.set([WIRE_VERSION, MessageType.Announcement]);
  new DataView(out.buffer).setUint32(2, body.length, true);
  out.set(body, 6);
  return out;
}

function expectError(result: DecodeResult, kind: DecodeErrorKind, contains?: string): void {
  expect(result.ok ? 'ok' : result.error.kind).toBe(kind);
  if (!result.ok && contains !== undefined) expect(result.error.message).toContain(contains);
}

describe('Announcement messages', () => {
  it('have a known encoding: header, u32 length, the canonical JSON text', () => {
    const bytes = encode({ type: MessageType.Announcement, announcement: base });
    const text = announcementText(base);
    expect(text).toBe(
      '{"stream":"live","sequence":42,"uri":"live42.ts","bytes":30000,"packets":2,"firstPacket":4096,' +
        `"sha256":"${'ab'.repeat(32)}","packetHashes":"${'01'.repeat(16)}${'fe'.repeat(16)}",` +
        '"durationMs":2000,"publishedAtMs":1700000000123,"signature":"c2lnbmF0dXJl"}',
    );
    expect(Buffer.from(bytes.subarray(0, 6)).toString('hex')).toBe(
      `0218${Buffer.from(Uint32Array.of(text.length).buffer).toString('hex')}`,
    );
    expect(Buffer.from(bytes.subarray(6)).toString('latin1')).toBe(text);
    expect(bytes.length).toBe(encodedSize({ type: MessageType.Announcement, announcement: base }));
    expect(decode(bytes)).toStrictEqual({
      ok: true,
      message: { type: MessageType.Announcement, announcement: base },
    });
  });

  it('escape every character outside ASCII, so the bytes are the text, and decode it back', () => {
    const announcement = { ...base, uri: 'sé/😀/\u0000/\ud800x' };
    const bytes = encode({ type: MessageType.Announcement, announcement });
    expect(bytes.every((b) => b < 0x80)).toBe(true);
    expect(Buffer.from(bytes.subarray(6)).toString('latin1')).toContain(
      '"uri":"s\\u00e9/\\ud83d\\ude00/\\u0000/\\ud800x"',
    );
    expect(decode(bytes)).toStrictEqual({
      ok: true,
      message: { type: MessageType.Announcement, announcement },
    });
  });

  it('the largest valid announcement fits: 1024 packets and a 1024-unit URI of escaped characters', () => {
    const announcement: SignedAnnouncement = {
      ...base,
      stream: 'x'.repeat(64),
      sequence: 0xffff_ffff,
      uri: '\u0001'.repeat(MAX_URI_LENGTH),
      bytes: 64 * 1024 * 1024,
      packets: MAX_ANNOUNCED_PACKETS,
      packetHashes: 'f'.repeat(32 * MAX_ANNOUNCED_PACKETS),
      durationMs: 3_600_000,
      publishedAtMs: Number.MAX_SAFE_INTEGER,
      signature: 'A'.repeat(128),
    };
    const bytes = encode({ type: MessageType.Announcement, announcement });
    expect(bytes.length - 6).toBeLessThanOrEqual(MAX_ANNOUNCEMENT_TEXT_BYTES);
    expect(bytes.length).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    expect(decode(bytes)).toStrictEqual({
      ok: true,
      message: { type: MessageType.Announcement, announcement },
    });
  });

  it('round trip at every size up to MAX_ANNOUNCED_PACKETS', () => {
    fc.assert(
      fc.property(signedAnnouncement(MAX_ANNOUNCED_PACKETS, MAX_URI_LENGTH), (announcement) => {
        const message = { type: MessageType.Announcement, announcement } as const;
        expect(decode(encode(message))).toStrictEqual({ ok: true, message });
      }),
      { seed: SEED, numRuns: 200 },
    );
  });
});

describe('announcements of a segment cut while written (issue 14)', () => {
  const progressive: SignedAnnouncement = { ...base, bytes: 20_000, packetBytes: 16_384 };

  it('carry packetBytes after publishedAtMs, and round-trip', () => {
    const text = announcementText(progressive);
    expect(text).toContain('"publishedAtMs":1700000000123,"packetBytes":16384,"signature"');
    const message = { type: MessageType.Announcement, announcement: progressive } as const;
    expect(decode(encode(message))).toStrictEqual({ ok: true, message });
  });

  it('are refused when packetBytes is out of range or its packets cannot hold the bytes', () => {
    const refused = (value: unknown): string => {
      const r = validateAnnouncement(value);
      return r.ok ? 'ok' : r.error.message;
    };
    expect(refused(progressive)).toBe('ok');
    expect(refused({ ...progressive, packetBytes: 0 })).toContain('"packetBytes" must be an integer');
    expect(refused({ ...progressive, packetBytes: 16_385 })).toContain('"packetBytes" must be an integer');
    expect(refused({ ...progressive, packetBytes: 'x' })).toContain('"packetBytes" must be an integer');
    expect(refused({ ...progressive, bytes: 2 * 16_384 + 1 })).toContain('cannot hold');
    expect(refused({ ...progressive, bytes: 2 * 16_384 })).toBe('ok');
  });
});

describe('Announcement decoding refuses bad input with a typed error', () => {
  const text = announcementText(base);

  it('a length over MAX_ANNOUNCEMENT_TEXT_BYTES is limitExceeded before anything is read', () => {
    const input = Uint8Array.of(WIRE_VERSION, MessageType.Announcement, 0x01, 0x00, 0x01, 0x00);
    const result = decode(input);
    expectError(result, 'limitExceeded');
    if (!result.ok) expect(result.error.offset).toBe(2);
  });

  it('a length beyond the bytes present is truncated, and trailing bytes are refused', () => {
    const bytes = withText(text);
    expectError(decode(bytes.subarray(0, bytes.length - 1)), 'truncated');
    expectError(decode(Uint8Array.from([...bytes, 0x20])), 'trailingBytes');
  });

  it('a byte outside ASCII is invalidValue at its offset', () => {
    const bytes = withText(text);
    bytes[6 + 20] = 0xc3;
    const result = decode(bytes);
    expectError(result, 'invalidValue', 'ASCII');
    if (!result.ok) expect(result.error.offset).toBe(26);
  });

  it('text that is not JSON, or not an object, is invalidValue', () => {
    expectError(decode(withText('')), 'invalidValue', 'not JSON');
    expectError(decode(withText(text.slice(0, -1))), 'invalidValue', 'not JSON');
    expectError(decode(withText('[1,2]')), 'invalidValue', 'not an object');
    expectError(decode(withText('null')), 'invalidValue', 'not an object');
  });

  it('every field is checked as in a tracker frame', () => {
    const cases: [Partial<Record<keyof SignedAnnouncement, unknown>>, string][] = [
      [{ stream: 'bad stream!' }, '"stream"'],
      [{ sequence: -1 }, '"sequence"'],
      [{ sequence: 2 ** 32 }, '"sequence"'],
      [{ uri: 'u'.repeat(MAX_URI_LENGTH + 1) }, '"uri"'],
      [{ bytes: 64 * 1024 * 1024 + 1 }, '"bytes"'],
      [{ packets: 0 }, '"packets"'],
      [{ packets: MAX_ANNOUNCED_PACKETS + 1 }, '"packets"'],
      [{ packets: 3 }, '"packetHashes"'],
      [{ firstPacket: -1 }, '"firstPacket"'],
      [{ firstPacket: 2 ** 53 }, '"firstPacket"'],
      [{ firstPacket: 0.5 }, '"firstPacket"'],
      [{ sha256: 'AB'.repeat(32) }, '"sha256"'],
      [{ packetHashes: 'zz'.repeat(32) }, '"packetHashes"'],
      [{ durationMs: 1.5 }, '"durationMs"'],
      [{ publishedAtMs: '1' }, '"publishedAtMs"'],
      [{ signature: 'not base64!' }, '"signature"'],
      [{ signature: 'A'.repeat(129) }, '"signature"'],
    ];
    for (const [tweak, field] of cases) {
      const bad = { ...base, ...tweak };
      // Canonical key order, so only the field itself can be what is refused.
      const input = withText(announcementText(bad as SignedAnnouncement));
      expectError(decode(input), 'invalidValue', field);
      // The tracker path refuses the same announcement for the same field.
      const frame = decodeServerMessage(JSON.stringify({ type: 'announce', announcement: bad }));
      expect(frame.ok ? 'ok' : frame.error.message).toContain(field);
    }
  });

  it('a missing field is refused', () => {
    const { signature: _signature, ...unsigned } = base;
    expectError(decode(withText(JSON.stringify(unsigned))), 'invalidValue', '"signature"');
  });

  it('a valid announcement in any but the canonical text is refused (one encoding per value)', () => {
    const { stream, ...rest } = base;
    const reordered = JSON.stringify({ ...rest, stream });
    const variants = [
      reordered,
      text.replace('{', '{ '),
      text.replace('}', ',"extra":1}'),
      text.replace('"sequence":42', '"sequence":42.0'),
      text.replace('"sequence":42', '"sequence":4.2e1'),
      text.replace('live42.ts', 'live42\\u002ets'),
      text.replace('live42.ts', 'live42\\/ts'),
    ];
    for (const variant of variants) {
      expect(variant).not.toBe(text);
      expectError(decode(withText(variant)), 'invalidValue');
    }
    const upperEscape = announcementText({ ...base, uri: 'é' }).replace('\\u00e9', '\\u00E9');
    expectError(decode(withText(upperEscape)), 'invalidValue', 'canonical');
    expect(decode(withText(text)).ok).toBe(true);
  });

  it('encode refuses an announcement the decoder would refuse (EncodeError)', () => {
    for (const bad of [
      { ...base, packets: 0 },
      { ...base, packetHashes: 'ab' },
      { ...base, stream: '' },
      { ...base, sequence: -1 },
    ])
      expect(() => encode({ type: MessageType.Announcement, announcement: bad })).toThrow(EncodeError);
  });
});

describe('one validator for both ways in', () => {
  /** Valid announcements with one field replaced by a hostile value. */
  const hostile = fc.constantFrom<unknown>(
    -1,
    0,
    1.5,
    2 ** 32,
    Number.MAX_SAFE_INTEGER,
    '',
    'x',
    'AB'.repeat(32),
    'ab'.repeat(16),
    null,
    true,
    [],
    {},
  );
  const fields: (keyof SignedAnnouncement)[] = [
    'stream',
    'sequence',
    'uri',
    'bytes',
    'packets',
    'firstPacket',
    'sha256',
    'packetHashes',
    'durationMs',
    'publishedAtMs',
    'signature',
  ];

  it('a tracker frame and a peer message accept exactly the same announcements', () => {
    fc.assert(
      fc.property(signedAnnouncement(4, 16), fc.constantFrom(...fields), hostile, (a, field, value) => {
        const candidate = { ...a, [field]: value };
        const viaTracker = decodeServerMessage(JSON.stringify({ type: 'announce', announcement: candidate }));
        const checked = validateAnnouncement(candidate);
        expect(checked.ok).toBe(viaTracker.ok);
        // A peer message can only carry what the encoder writes: the canonical text of the object.
        const viaPeer = decode(withText(announcementText(candidate)));
        expect(viaPeer.ok).toBe(viaTracker.ok);
        if (viaPeer.ok && checked.ok)
          expect(viaPeer.message).toStrictEqual({
            type: MessageType.Announcement,
            announcement: checked.message,
          });
      }),
      { seed: SEED, numRuns: 3000 },
    );
  });

  it('mutated announcement texts never crash the decoder and are refused unless canonical', () => {
    const printable = fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c));
    fc.assert(
      fc.property(
        signedAnnouncement(2, 16),
        fc.array(fc.tuple(fc.nat(), printable), { minLength: 1, maxLength: 3 }),
        (a, edits) => {
          // The text is ASCII: one character per code unit.
          const chars = announcementText(a).split('');
          for (const [at, c] of edits) chars[at % chars.length] = c;
          const text = chars.join('');
          const result = decode(withText(text));
          if (result.ok) {
            expect(result.message.type).toBe(MessageType.Announcement);
            if (result.message.type === MessageType.Announcement)
              expect(announcementText(result.message.announcement)).toBe(text);
          } else {
            expect(['invalidValue']).toContain(result.error.kind);
            expect(result.error.message).not.toMatch(/decoder fault/);
          }
        },
      ),
      { seed: SEED, numRuns: 5000 },
    );
  });
});
