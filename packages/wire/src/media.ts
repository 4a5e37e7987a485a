/**
 * Media packets: how the true source cuts one HLS segment into the opaque payloads the engine deals
 * over the slices, and how a viewer reads them back. Every packet names its segment and place, so a
 * viewer can assemble segments in any arrival order and before the segment's announcement arrives.
 *
 * Layout (little-endian): segment u32 · index u16 · count u16 · bytes.
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
 * only bounded by MAX_SEGMENT_PACKETS, and the segment's signed announcement says how many there are.
 */
export const OPEN_SEGMENT_COUNT = 0;

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
  const out = new Uint8Array(MEDIA_PACKET_HEADER_BYTES + packet.bytes.length);
  writeU32(out, 0, packet.segment);
  writeU16(out, 4, packet.index);
  writeU16(out, 6, packet.count);
  out.set(packet.bytes, MEDIA_PACKET_HEADER_BYTES);
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
  const bytes = payload.subarray(MEDIA_PACKET_HEADER_BYTES);
  if (bytes.length > MAX_MEDIA_PACKET_PAYLOAD_BYTES)
    return fail(
      'limitExceeded',
      `packet payload of ${bytes.length} bytes exceeds ${MAX_MEDIA_PACKET_PAYLOAD_BYTES}`,
    );
  return { ok: true, packet: { segment, index, count, bytes } };
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
