/**
 * Media packets: how the true source cuts one HLS segment into the opaque payloads the engine deals
 * over the slices, and how a viewer reads them back. Every packet names its segment and place, so a
 * viewer can assemble segments in any arrival order and before the segment's announcement arrives.
 *
 * Layout (little-endian): segment u32 · index u16 · count u16 · bytes. A packet of a segment cut
 * while it was written (count 0, issue 14) has more before its bytes: packetBytes u16 ·
 * packetNumber u48 · Ed25519 signature (64 bytes) — see `SignedPacketFields`.
 */

/** Bytes of the media-packet header. */
export const MEDIA_PACKET_HEADER_BYTES = 8;

/**
 * Largest media payload per packet. 16 KiB keeps a 2 s segment of a ~1 Mbit/s stream at 16 packets
 * (one row: one packet per slice) and a data message far below the 256 KiB SCTP limit; smaller
 * packets would add per-message overhead, larger ones raise head-of-line blocking on a shared channel.
 */
export const MAX_MEDIA_PACKET_PAYLOAD_BYTES = 16_384;

/** The largest segment a viewer will assemble (64 MiB): a bound on what an announcement can make us hold. */
export const MAX_SEGMENT_BYTES = 64 * 1024 * 1024;

/** The most packets one segment may have (u16 index; 4096 × 16 KiB covers the segment bound). */
export const MAX_SEGMENT_PACKETS = 4096;

/**
 * The header count of a packet cut from a segment still being written (issue 14): its index is then
 * only bounded by MAX_SEGMENT_PACKETS, it carries `SignedPacketFields`, and the segment's signed
 * announcement, made once the segment is complete, says how many packets there are.
 */
export const OPEN_SEGMENT_COUNT = 0;
/** Bytes of an Ed25519 signature (RFC 8032). */
export const PACKET_SIGNATURE_BYTES = 64;
/** Header bytes of a packet with `SignedPacketFields`: the plain header, u16, u48, signature. */
export const SIGNED_MEDIA_PACKET_HEADER_BYTES = MEDIA_PACKET_HEADER_BYTES + 2 + 6 + PACKET_SIGNATURE_BYTES;
/** The largest packet number a u48 carries (Data sequence numbers are u32, so 2^36 is reached first). */
const MAX_PACKET_NUMBER = 2 ** 48 - 1;

/**
 * What a packet of a segment still being written carries so that it can be checked on arrival,
 * before any announcement of its segment exists: the true source signs (`packetSigningBytes`) the
 * stream, the segment and index, the segment's fixed packet size, the stream-wide packet number
 * (which gives its slice and sequence, `packetPlace`, so it cannot be replayed elsewhere in the
 * trees) and the SHA-256 of its bytes.
 */
export interface SignedPacketFields {
  /** Bytes in every packet of the segment but its last data packet (`packetBytes` of its announcement). */
  readonly packetBytes: number;
  /** Stream-wide number of this packet in the order the true source deals them (firstPacket + index). */
  readonly packetNumber: number;
  readonly signature: Uint8Array;
}

export interface MediaPacket {
  /** The segment's media sequence number (EXT-X-MEDIA-SEQUENCE numbering). */
  readonly segment: number;
  /** 0‥count−1; packet i travels on slice i mod M. */
  readonly index: number;
  /**
   * Packets in the segment: a multiple of the slice count M, so every slice carries the same number;
   * OPEN_SEGMENT_COUNT (0) for a segment cut while it was written, whose length was not known yet.
   */
  readonly count: number;
  readonly bytes: Uint8Array;
  /** Present exactly when count is OPEN_SEGMENT_COUNT. */
  readonly signed?: SignedPacketFields;
}

export type MediaDecodeErrorKind = 'truncated' | 'invalidValue' | 'limitExceeded';

export interface MediaDecodeError {
  readonly kind: MediaDecodeErrorKind;
  readonly message: string;
}

export type MediaDecodeResult =
  | { readonly ok: true; readonly packet: MediaPacket }
  | { readonly ok: false; readonly error: MediaDecodeError };

export function encodeMediaPacket(packet: MediaPacket): Uint8Array {
  if (!Number.isInteger(packet.segment) || packet.segment < 0 || packet.segment > 0xffff_ffff)
    throw new RangeError(`segment ${packet.segment} is not a u32`);
  if (!Number.isInteger(packet.count) || packet.count < 0 || packet.count > MAX_SEGMENT_PACKETS)
    throw new RangeError(`count ${packet.count} is outside 0‥${MAX_SEGMENT_PACKETS}`);
  const indexBound = packet.count === OPEN_SEGMENT_COUNT ? MAX_SEGMENT_PACKETS : packet.count;
  if (!Number.isInteger(packet.index) || packet.index < 0 || packet.index >= indexBound)
    throw new RangeError(`index ${packet.index} is outside 0‥${indexBound - 1}`);
  if (packet.bytes.length > MAX_MEDIA_PACKET_PAYLOAD_BYTES)
    throw new RangeError(`packet of ${packet.bytes.length} bytes exceeds ${MAX_MEDIA_PACKET_PAYLOAD_BYTES}`);
  const signed = packet.signed;
  if ((packet.count === OPEN_SEGMENT_COUNT) !== (signed !== undefined))
    throw new RangeError('a packet carries signed fields exactly when its count is 0');
  if (signed !== undefined) checkSignedFields(signed, packet.bytes.length);
  const headerBytes = signed === undefined ? MEDIA_PACKET_HEADER_BYTES : SIGNED_MEDIA_PACKET_HEADER_BYTES;
  const out = new Uint8Array(headerBytes + packet.bytes.length);
  writeU32(out, 0, packet.segment);
  writeU16(out, 4, packet.index);
  writeU16(out, 6, packet.count);
  if (signed !== undefined) {
    writeU16(out, 8, signed.packetBytes);
    writeU32(out, 10, signed.packetNumber % 0x1_0000_0000);
    writeU16(out, 14, Math.floor(signed.packetNumber / 0x1_0000_0000));
    out.set(signed.signature, 16);
  }
  out.set(packet.bytes, headerBytes);
  return out;
}

/** Reads a media packet; the returned bytes are a view into `payload` (no copy). */
export function decodeMediaPacket(payload: Uint8Array): MediaDecodeResult {
  if (payload.length < MEDIA_PACKET_HEADER_BYTES)
    return fail('truncated', `media packet of ${payload.length} bytes is shorter than its header`);
  const segment = readU32(payload, 0);
  const index = readU16(payload, 4);
  const count = readU16(payload, 6);
  if (count > MAX_SEGMENT_PACKETS)
    return fail('limitExceeded', `packet count ${count} is outside 0‥${MAX_SEGMENT_PACKETS}`);
  const indexBound = count === OPEN_SEGMENT_COUNT ? MAX_SEGMENT_PACKETS : count;
  if (index >= indexBound)
    return fail('invalidValue', `packet index ${index} is not below its bound ${indexBound}`);
  if (count !== OPEN_SEGMENT_COUNT) {
    const bytes = payload.subarray(MEDIA_PACKET_HEADER_BYTES);
    if (bytes.length > MAX_MEDIA_PACKET_PAYLOAD_BYTES)
      return fail(
        'limitExceeded',
        `packet payload of ${bytes.length} bytes exceeds ${MAX_MEDIA_PACKET_PAYLOAD_BYTES}`,
      );
    return { ok: true, packet: { segment, index, count, bytes } };
  }
  if (payload.length < SIGNED_MEDIA_PACKET_HEADER_BYTES)
    return fail('truncated', `signed media packet of ${payload.length} bytes is shorter than its header`);
  const packetBytes = readU16(payload, 8);
  const packetNumber = readU32(payload, 10) + readU16(payload, 14) * 0x1_0000_0000;
  const bytes = payload.subarray(SIGNED_MEDIA_PACKET_HEADER_BYTES);
  if (packetBytes === 0 || packetBytes > MAX_MEDIA_PACKET_PAYLOAD_BYTES)
    return fail('invalidValue', `packet size ${packetBytes} is outside 1‥${MAX_MEDIA_PACKET_PAYLOAD_BYTES}`);
  if (bytes.length > packetBytes)
    return fail('limitExceeded', `packet payload of ${bytes.length} bytes exceeds its size ${packetBytes}`);
  const signature = payload.subarray(16, SIGNED_MEDIA_PACKET_HEADER_BYTES);
  return {
    ok: true,
    packet: { segment, index, count, bytes, signed: { packetBytes, packetNumber, signature } },
  };
}

function checkSignedFields(signed: SignedPacketFields, payloadBytes: number): void {
  const { packetBytes, packetNumber, signature } = signed;
  if (!Number.isInteger(packetBytes) || packetBytes < 1 || packetBytes > MAX_MEDIA_PACKET_PAYLOAD_BYTES)
    throw new RangeError(`packetBytes ${packetBytes} is outside 1‥${MAX_MEDIA_PACKET_PAYLOAD_BYTES}`);
  if (payloadBytes > packetBytes)
    throw new RangeError(`payload of ${payloadBytes} bytes exceeds ${packetBytes}`);
  if (!Number.isInteger(packetNumber) || packetNumber < 0 || packetNumber > MAX_PACKET_NUMBER)
    throw new RangeError(`packetNumber ${packetNumber} is not a u48`);
  if (signature.length !== PACKET_SIGNATURE_BYTES)
    throw new RangeError(`a signature is ${PACKET_SIGNATURE_BYTES} bytes, not ${signature.length}`);
}

/** Tag of the packet signature, so that it cannot be taken for an announcement's or another version's. */
const PACKET_SIGNING_TAG = 'chunkycast-packet-v1';

/**
 * The exact bytes the broadcaster signs for a packet of a segment cut while written: the tag, the
 * stream id (u8 length, then its characters, which STREAM_ID_PATTERN keeps ASCII), segment u32, index
 * u16, packetBytes u16, packetNumber u48 and the SHA-256 (32 bytes) of the packet's bytes — all
 * little-endian, one encoding per value.
 */
export function packetSigningBytes(
  stream: string,
  packet: {
    readonly segment: number;
    readonly index: number;
    readonly signed: Omit<SignedPacketFields, 'signature'>;
  },
  payloadSha256: Uint8Array,
): Uint8Array {
  if (payloadSha256.length !== 32) throw new RangeError('a SHA-256 digest is 32 bytes');
  if (stream.length > 255 || !/^[\x20-\x7e]*$/.test(stream))
    throw new RangeError('stream id must be ≤ 255 ASCII');
  const tag = PACKET_SIGNING_TAG;
  const out = new Uint8Array(tag.length + 1 + stream.length + 4 + 2 + 2 + 6 + 32);
  let at = 0;
  for (let i = 0; i < tag.length; i++) out[at++] = tag.charCodeAt(i);
  out[at++] = stream.length;
  for (let i = 0; i < stream.length; i++) out[at++] = stream.charCodeAt(i);
  writeU32(out, at, packet.segment);
  writeU16(out, at + 4, packet.index);
  writeU16(out, at + 6, packet.signed.packetBytes);
  writeU32(out, at + 8, packet.signed.packetNumber % 0x1_0000_0000);
  writeU16(out, at + 12, Math.floor(packet.signed.packetNumber / 0x1_0000_0000));
  out.set(payloadSha256, at + 14);
  return out;
}

export interface PacketPlan {
  /** Number of packets: a multiple of `slices`. */
  readonly packets: number;
  /** Bytes in every packet but the trailing ones (which may be shorter or empty). */
  readonly packetBytes: number;
}

/**
 * How a segment of `segmentBytes` is cut: the fewest whole rows of `slices` packets that keep every
 * packet within `maxPacketBytes`, with the bytes spread evenly so every slice carries the same share.
 */
export function planPackets(
  segmentBytes: number,
  slices: number,
  maxPacketBytes = MAX_MEDIA_PACKET_PAYLOAD_BYTES,
): PacketPlan {
  if (!Number.isInteger(segmentBytes) || segmentBytes < 0 || segmentBytes > MAX_SEGMENT_BYTES)
    throw new RangeError(`segment of ${segmentBytes} bytes is outside 0‥${MAX_SEGMENT_BYTES}`);
  if (!Number.isInteger(slices) || slices < 1) throw new RangeError(`slices must be a positive integer`);
  const rows = Math.max(1, Math.ceil(segmentBytes / (slices * maxPacketBytes)));
  const packets = rows * slices;
  if (packets > MAX_SEGMENT_PACKETS) throw new RangeError(`segment needs ${packets} packets`);
  return announcedPlan(segmentBytes, packets);
}

/** The plan of a segment announced with `packets` packets: how a receiver finds each packet's bytes. */
export function announcedPlan(segmentBytes: number, packets: number): PacketPlan {
  return { packets, packetBytes: Math.max(1, Math.ceil(segmentBytes / packets)) };
}

/**
 * The plan of an announced segment: fixed-size packets for one cut while written (`packetBytes`),
 * else evenly spread (`announcedPlan`).
 */
export function planOf(a: {
  readonly bytes: number;
  readonly packets: number;
  readonly packetBytes?: number;
}): PacketPlan {
  return a.packetBytes === undefined
    ? announcedPlan(a.bytes, a.packets)
    : { packets: a.packets, packetBytes: a.packetBytes };
}

/** The count a packet of this announced segment carries in its header (0 for one cut while written). */
export function headerCount(a: { readonly packets: number; readonly packetBytes?: number }): number {
  return a.packetBytes === undefined ? a.packets : OPEN_SEGMENT_COUNT;
}

/** Byte range [start, end) of packet `index` under a plan (empty for trailing packets past the end). */
export function packetRange(plan: PacketPlan, segmentBytes: number, index: number): [number, number] {
  const start = Math.min(segmentBytes, index * plan.packetBytes);
  const end = Math.min(segmentBytes, start + plan.packetBytes);
  return [start, end];
}

function fail(kind: MediaDecodeErrorKind, message: string): MediaDecodeResult {
  return { ok: false, error: { kind, message } };
}

function readU16(b: Uint8Array, at: number): number {
  return (b[at] ?? 0) | ((b[at + 1] ?? 0) << 8);
}

function readU32(b: Uint8Array, at: number): number {
  return ((b[at] ?? 0) | ((b[at + 1] ?? 0) << 8) | ((b[at + 2] ?? 0) << 16)) + (b[at + 3] ?? 0) * 0x100_0000;
}

function writeU16(b: Uint8Array, at: number, v: number): void {
  b[at] = v & 0xff;
  b[at + 1] = (v >>> 8) & 0xff;
}

function writeU32(b: Uint8Array, at: number, v: number): void {
  b[at] = v & 0xff;
  b[at + 1] = (v >>> 8) & 0xff;
  b[at + 2] = (v >>> 16) & 0xff;
  b[at + 3] = (v >>> 24) & 0xff;
}

/** Where the true source dealt one packet: its slice and its sequence number on that slice. */
export interface PacketPlace {
  readonly slice: number;
  readonly seq: number;
}

/**
 * The slice and sequence of packet `index` of a segment whose signed announcement says `firstPacket`,
 * when the true source deals packets round-robin over `dataSlices` slices (engine `publish`). A
 * sequence beyond u32 cannot be carried by a Data message, so no packet can claim it.
 */
export function packetPlace(firstPacket: number, index: number, dataSlices: number): PacketPlace {
  const n = firstPacket + index;
  return { slice: n % dataSlices, seq: Math.floor(n / dataSlices) };
}
