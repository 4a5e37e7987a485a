/**
 * A bounded MPEG-TS scanner for a segment that is still being written: fed the segment's bytes in
 * whatever chunks they arrive, it reports where each video PES starts (the file offset of its TS
 * packet), its decode time in 90 kHz ticks, and whether it is a random access point. It keeps at
 * most one partial packet between calls, so its memory does not grow with the segment.
 *
 * Only what part cutting needs is parsed (ISO/IEC 13818-1): the 4-byte packet header, the
 * adaptation field's random_access_indicator, and the PES header's stream_id and PTS/DTS. Video is
 * recognised by its PES stream_id (0xE0–0xEF, "ITU-T H.262/H.264/H.265 video stream", Table 2-22),
 * not through the PAT/PMT: a segment's first bytes are enough and there is less to get wrong.
 * ffmpeg's mpegts muxer sets random_access_indicator on the packet that starts a key frame.
 *
 * Garbage never throws: the first bad packet records a `TsScanError` in `error` and the scanner
 * stops, returning what it found before it.
 */

/** ISO/IEC 13818-1 §2.4.3.2: every transport packet is 188 bytes and starts with 0x47. */
export const TS_PACKET_BYTES = 188;
export const TS_SYNC_BYTE = 0x47;
/** PTS and DTS are 33-bit counters of a 90 kHz clock (ISO/IEC 13818-1 §2.4.3.7). */
export const TICKS_PER_SECOND = 90_000;
export const TIMESTAMP_MODULO = 2 ** 33;
/** The null packet's PID (§2.4.3.3): stuffing, never payload. */
const NULL_PID = 0x1fff;

export class TsScanError extends Error {
  override readonly name = 'TsScanError';
  constructor(
    /** Offset in the segment of the packet found bad. */
    readonly offset: number,
    message: string,
  ) {
    super(`${message} at byte ${offset}`);
  }
}

/** Where a video PES (an access unit, in practice one frame) starts. */
export interface VideoPesStart {
  /** Offset in the segment of the TS packet carrying the PES header: a clean place to cut. */
  readonly offset: number;
  /** DTS, or the PTS when there is no DTS, in 90 kHz ticks; null if the header carries neither. */
  readonly timeTicks: number | null;
  /** The packet's adaptation field sets random_access_indicator (a key frame starts here). */
  readonly randomAccess: boolean;
}

/** `later - earlier` in ticks, across the 33-bit wrap. */
export function ticksBetween(earlier: number, later: number): number {
  return (((later - earlier) % TIMESTAMP_MODULO) + TIMESTAMP_MODULO) % TIMESTAMP_MODULO;
}

export class TsScanner {
  private readonly carry = new Uint8Array(TS_PACKET_BYTES);
  private carryBytes = 0;
  /** Segment offset of the next packet to parse. */
  private nextOffset = 0;
  private videoPid: number | null = null;
  private failure: TsScanError | null = null;

  /** The first problem found, after which the scanner ignores its input. */
  get error(): TsScanError | null {
    return this.failure;
  }

  /** Bytes consumed so far (whole packets plus the partial one held). */
  get bytesSeen(): number {
    return this.nextOffset + this.carryBytes;
  }

  /** Feeds the next bytes of the segment; returns the video PES starts in the packets completed. */
  push(chunk: Uint8Array): VideoPesStart[] {
    const found: VideoPesStart[] = [];
    if (this.failure !== null) return found;
    let pos = 0;
    try {
      if (this.carryBytes > 0) {
        const take = Math.min(TS_PACKET_BYTES - this.carryBytes, chunk.length);
        this.carry.set(chunk.subarray(0, take), this.carryBytes);
        this.carryBytes += take;
        pos = take;
        if (this.carryBytes < TS_PACKET_BYTES) return found;
        this.packet(this.carry, found);
        this.carryBytes = 0;
      }
      while (chunk.length - pos >= TS_PACKET_BYTES) {
        this.packet(chunk.subarray(pos, pos + TS_PACKET_BYTES), found);
        pos += TS_PACKET_BYTES;
      }
      this.carry.set(chunk.subarray(pos), 0);
      this.carryBytes = chunk.length - pos;
    } catch (e) {
      this.failure =
        e instanceof TsScanError ? e : new TsScanError(this.nextOffset, `unexpected ${String(e)}`);
    }
    return found;
  }

  /**
   * The segment ended: a partial packet left over is an error (a truncated file). Returns the
   * error, if any.
   */
  end(): TsScanError | null {
    if (this.failure === null && this.carryBytes > 0)
      this.failure = new TsScanError(this.nextOffset, `truncated packet (${this.carryBytes} bytes)`);
    return this.failure;
  }

  private packet(p: Uint8Array, found: VideoPesStart[]): void {
    const offset = this.nextOffset;
    if (p[0] !== TS_SYNC_BYTE) throw new TsScanError(offset, 'lost sync (no 0x47)');
    this.nextOffset += TS_PACKET_BYTES;
    const b1 = p[1] ?? 0;
    const unitStart = (b1 & 0x40) !== 0;
    const pid = ((b1 & 0x1f) << 8) | (p[2] ?? 0);
    const control = ((p[3] ?? 0) >> 4) & 0x3;
    // 00 is reserved (§2.4.3.3): such a packet is discarded by decoders, so is it here.
    if (control === 0 || pid === NULL_PID) return;
    let payloadStart = 4;
    let randomAccess = false;
    if ((control & 0x2) !== 0) {
      const length = p[4] ?? 0;
      // 183 fills the packet (no payload); with a payload at most 182 (§2.4.3.5).
      const max = (control & 0x1) !== 0 ? 182 : 183;
      if (length > max) throw new TsScanError(offset, `adaptation field length ${length} > ${max}`);
      if (length > 0) randomAccess = ((p[5] ?? 0) & 0x40) !== 0;
      payloadStart = 5 + length;
    }
    if ((control & 0x1) === 0 || !unitStart) return;
    const payload = p.subarray(payloadStart);
    // A PES packet starts with the prefix 00 00 01 and its stream_id (§2.4.3.6); PSI sections
    // (PAT, PMT) start with a pointer field instead and never match a video stream_id's PID below.
    if (payload.length < 9 || payload[0] !== 0 || payload[1] !== 0 || payload[2] !== 1) return;
    const streamId = payload[3] ?? 0;
    if ((streamId & 0xf0) !== 0xe0) return;
    // One video stream: the first one seen. Others (rare in a live HLS rendition) are ignored.
    this.videoPid ??= pid;
    if (pid !== this.videoPid) return;
    const flags = ((payload[7] ?? 0) >> 6) & 0x3;
    const headerLength = payload[8] ?? 0;
    let pts: number | null = null;
    let dts: number | null = null;
    if ((flags & 0x2) !== 0 && headerLength >= 5) pts = readTimestamp(payload, 9);
    if (flags === 0x3 && headerLength >= 10) dts = readTimestamp(payload, 14);
    found.push({ offset, timeTicks: dts ?? pts, randomAccess });
  }
}

/** A 33-bit PTS/DTS in its 5-byte form, or null when cut off or its marker bits are wrong. */
function readTimestamp(b: Uint8Array, at: number): number | null {
  if (b.length < at + 5) return null;
  const b0 = b[at] ?? 0;
  const b1 = b[at + 1] ?? 0;
  const b2 = b[at + 2] ?? 0;
  const b3 = b[at + 3] ?? 0;
  const b4 = b[at + 4] ?? 0;
  if ((b0 & 1) !== 1 || (b2 & 1) !== 1 || (b4 & 1) !== 1) return null;
  return ((b0 >> 1) & 0x7) * 2 ** 30 + ((b1 << 7) | (b2 >> 1)) * 2 ** 15 + ((b3 << 7) | (b4 >> 1));
}
