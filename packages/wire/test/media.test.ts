import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  MAX_MEDIA_PACKET_PAYLOAD_BYTES,
  MAX_SEGMENT_PACKETS,
  MEDIA_PACKET_HEADER_BYTES,
  OPEN_SEGMENT_COUNT,
  PACKET_SIGNATURE_BYTES,
  SIGNED_MEDIA_PACKET_HEADER_BYTES,
  decodeMediaPacket,
  packetSigningBytes,
  type SignedPacketFields,
  headerCount,
  planOf,
  encodeMediaPacket,
  packetPlace,
  packetRange,
  planPackets,
} from '../src/index.js';

describe('media packets', () => {
  it('round-trip any valid packet', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 0xffff_ffff }),
        fc
          .integer({ min: 1, max: 4096 })
          .chain((count) => fc.tuple(fc.constant(count), fc.integer({ min: 0, max: count - 1 }))),
        fc.uint8Array({ maxLength: 2000 }),
        (segment, [count, index], bytes) => {
          const decoded = decodeMediaPacket(encodeMediaPacket({ segment, index, count, bytes }));
          expect(decoded.ok).toBe(true);
          if (decoded.ok) expect(decoded.packet).toEqual({ segment, index, count, bytes });
        },
      ),
    );
  });

  it('refuse truncated headers, oversized counts, indexes past the count and oversized payloads', () => {
    const header = (segment: number, index: number, count: number): Uint8Array => {
      const b = new Uint8Array(MEDIA_PACKET_HEADER_BYTES);
      new DataView(b.buffer).setUint32(0, segment, true);
      new DataView(b.buffer).setUint16(4, index, true);
      new DataView(b.buffer).setUint16(6, count, true);
      return b;
    };
    const kind = (b: Uint8Array): string => {
      const r = decodeMediaPacket(b);
      return r.ok ? 'ok' : r.error.kind;
    };
    expect(kind(new Uint8Array(7))).toBe('truncated');
    expect(kind(header(1, 0, 4097))).toBe('limitExceeded');
    expect(kind(header(1, 16, 16))).toBe('invalidValue');
    const big = new Uint8Array(MEDIA_PACKET_HEADER_BYTES + MAX_MEDIA_PACKET_PAYLOAD_BYTES + 1);
    big.set(header(1, 0, 16));
    expect(kind(big)).toBe('limitExceeded');
    expect(kind(header(1, 15, 16))).toBe('ok');
  });

  it('never throw on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        decodeMediaPacket(bytes);
      }),
      { numRuns: 5000 },
    );
  });

  it('plans whole rows of slices whose ranges tile the segment exactly', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3_000_000 }), fc.constantFrom(1, 8, 16, 32), (bytes, slices) => {
        const plan = planPackets(bytes, slices);
        expect(plan.packets % slices).toBe(0);
        let covered = 0;
        for (let i = 0; i < plan.packets; i++) {
          const [start, end] = packetRange(plan, bytes, i);
          expect(start).toBe(covered);
          expect(end - start).toBeLessThanOrEqual(MAX_MEDIA_PACKET_PAYLOAD_BYTES);
          covered = end;
        }
        expect(covered).toBe(bytes);
      }),
    );
  });

  it('cuts a typical 2 s segment (~240 KB) into one row of 16 packets', () => {
    expect(planPackets(240_000, 16)).toEqual({ packets: 16, packetBytes: 15_000 });
    expect(planPackets(300_000, 16).packets).toBe(32);
  });
});

describe('packets of a segment cut while written (count 0, signed)', () => {
  const signed = (packetNumber = 2 ** 40 + 5, packetBytes = 4096): SignedPacketFields => ({
    packetBytes,
    packetNumber,
    signature: Uint8Array.from({ length: PACKET_SIGNATURE_BYTES }, (_, i) => i),
  });

  it('round-trip with any index below MAX_SEGMENT_PACKETS and a u48 packet number', () => {
    for (const index of [0, 17, MAX_SEGMENT_PACKETS - 1])
      for (const packetNumber of [0, 2 ** 32 + 1, 2 ** 48 - 1]) {
        const packet = {
          segment: 7,
          index,
          count: OPEN_SEGMENT_COUNT,
          bytes: Uint8Array.of(1, 2, 3),
          signed: signed(packetNumber),
        };
        const encoded = encodeMediaPacket(packet);
        expect(encoded.length).toBe(SIGNED_MEDIA_PACKET_HEADER_BYTES + 3);
        const decoded = decodeMediaPacket(encoded);
        expect(decoded.ok && decoded.packet).toEqual(packet);
      }
  });

  it('refuse to encode signed fields with a count, or a count 0 without them, or bad fields', () => {
    const bytes = new Uint8Array(10);
    expect(() => encodeMediaPacket({ segment: 1, index: 0, count: 0, bytes })).toThrow(RangeError);
    expect(() => encodeMediaPacket({ segment: 1, index: 0, count: 16, bytes, signed: signed() })).toThrow(
      RangeError,
    );
    expect(() =>
      encodeMediaPacket({ segment: 1, index: 0, count: 0, bytes, signed: signed(2 ** 48) }),
    ).toThrow(RangeError);
    expect(() => encodeMediaPacket({ segment: 1, index: 0, count: 0, bytes, signed: signed(0, 5) })).toThrow(
      RangeError,
    );
    expect(() =>
      encodeMediaPacket({ segment: 1, index: MAX_SEGMENT_PACKETS, count: 0, bytes, signed: signed() }),
    ).toThrow(RangeError);
  });

  it('refuse to decode a short signed header, a zero or oversized packet size, or a payload beyond it', () => {
    const kind = (b: Uint8Array): string => {
      const r = decodeMediaPacket(b);
      return r.ok ? 'ok' : r.error.kind;
    };
    const good = encodeMediaPacket({
      segment: 1,
      index: 0,
      count: 0,
      bytes: new Uint8Array(100),
      signed: signed(9, 100),
    });
    expect(kind(good)).toBe('ok');
    expect(kind(good.subarray(0, SIGNED_MEDIA_PACKET_HEADER_BYTES - 1))).toBe('truncated');
    const view = new DataView(good.buffer);
    view.setUint16(8, 99, true);
    expect(kind(good)).toBe('limitExceeded');
    view.setUint16(8, 0, true);
    expect(kind(good)).toBe('invalidValue');
    view.setUint16(8, MAX_MEDIA_PACKET_PAYLOAD_BYTES + 1, true);
    expect(kind(good)).toBe('invalidValue');
    view.setUint16(8, 100, true);
    view.setUint16(4, MAX_SEGMENT_PACKETS, true);
    expect(kind(good)).toBe('invalidValue');
  });

  it('sign every field that places the packet, and the hash of its bytes', () => {
    const hash = new Uint8Array(32).fill(7);
    const packet = { segment: 5, index: 3, signed: { packetBytes: 4096, packetNumber: 2 ** 33 + 1 } };
    const bytes = packetSigningBytes('live', packet, hash);
    const variants = [
      packetSigningBytes('livf', packet, hash),
      packetSigningBytes('live', { ...packet, segment: 6 }, hash),
      packetSigningBytes('live', { ...packet, index: 4 }, hash),
      packetSigningBytes(
        'live',
        { ...packet, signed: { packetBytes: 4095, packetNumber: 2 ** 33 + 1 } },
        hash,
      ),
      packetSigningBytes('live', { ...packet, signed: { packetBytes: 4096, packetNumber: 1 } }, hash),
      packetSigningBytes('live', packet, new Uint8Array(32).fill(8)),
    ];
    for (const other of variants) expect(Buffer.from(other).equals(Buffer.from(bytes))).toBe(false);
    expect(Buffer.from(bytes.subarray(0, 20)).toString('latin1')).toBe('chunkycast-packet-v1');
    expect(() => packetSigningBytes('live', packet, new Uint8Array(31))).toThrow(RangeError);
  });

  it('are planned at their fixed size, and the header count says which plan applies', () => {
    const progressive = { bytes: 40_000, packets: 16, packetBytes: 4096 };
    expect(planOf(progressive)).toEqual({ packets: 16, packetBytes: 4096 });
    expect(packetRange(planOf(progressive), 40_000, 9)).toEqual([36_864, 40_000]);
    expect(packetRange(planOf(progressive), 40_000, 10)).toEqual([40_000, 40_000]);
    expect(planOf({ bytes: 40_000, packets: 16 })).toEqual({ packets: 16, packetBytes: 2500 });
    expect(headerCount(progressive)).toBe(OPEN_SEGMENT_COUNT);
    expect(headerCount({ packets: 16 })).toBe(16);
  });
});

describe('packetPlace', () => {
  it('deals packets round-robin: packet n on slice n mod D, sequence ⌊n / D⌋', () => {
    expect(packetPlace(0, 0, 16)).toEqual({ slice: 0, seq: 0 });
    expect(packetPlace(32, 17, 16)).toEqual({ slice: 1, seq: 3 });
    expect(packetPlace(10, 3, 15)).toEqual({ slice: 13, seq: 0 });
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.integer({ min: 0, max: 4095 }),
        fc.integer({ min: 1, max: 16 }),
        (first, index, slices) => {
          const { slice, seq } = packetPlace(first, index, slices);
          expect(seq * slices + slice).toBe(first + index);
          expect(slice).toBeGreaterThanOrEqual(0);
          expect(slice).toBeLessThan(slices);
        },
      ),
    );
  });
});
