/** Synthetic MPEG-TS for the LL-HLS tests: packets built by hand, as ISO/IEC 13818-1 lays them out. */

export const VIDEO_PID = 0x100;
export const AUDIO_PID = 0x101;

export interface PacketSpec {
  readonly pid: number;
  /** payload_unit_start_indicator. */
  readonly unitStart?: boolean;
  /** Sets random_access_indicator in an adaptation field. */
  readonly randomAccess?: boolean;
  /** The payload's first bytes (the rest is filler). */
  readonly payload?: Uint8Array;
}

/** One 188-byte packet. With `randomAccess`, a 2-byte adaptation field carries the flag. */
export function tsPacket(spec: PacketSpec): Uint8Array {
  const p = new Uint8Array(188).fill(0xff);
  p[0] = 0x47;
  p[1] = ((spec.unitStart === true ? 0x40 : 0) | (spec.pid >> 8)) & 0xff;
  p[2] = spec.pid & 0xff;
  let at = 4;
  if (spec.randomAccess === true) {
    p[3] = 0x30; // adaptation field and payload
    p[4] = 1; // adaptation_field_length
    p[5] = 0x40; // random_access_indicator
    at = 6;
  } else p[3] = 0x10; // payload only
  if (spec.payload !== undefined) p.set(spec.payload.subarray(0, 188 - at), at);
  return p;
}

/** The 5-byte PTS/DTS field with its 4-bit prefix and marker bits. */
function timestamp(prefix: number, ticks: number): number[] {
  const hi = Math.floor(ticks / 2 ** 30) & 0x7;
  const mid = Math.floor(ticks / 2 ** 15) & 0x7fff;
  const lo = ticks & 0x7fff;
  return [(prefix << 4) | (hi << 1) | 1, mid >> 7, ((mid & 0x7f) << 1) | 1, lo >> 7, ((lo & 0x7f) << 1) | 1];
}

/** A PES header: start code, stream_id, length 0, flags, then PTS (and DTS when given). */
export function pesHeader(streamId: number, pts: number, dts?: number): Uint8Array {
  const fields = dts === undefined ? timestamp(0x2, pts) : [...timestamp(0x3, pts), ...timestamp(0x1, dts)];
  const flags = dts === undefined ? 0x80 : 0xc0;
  return Uint8Array.from([0, 0, 1, streamId, 0, 0, 0x80, flags, fields.length, ...fields]);
}

export interface Frame {
  /** Byte offset of the frame's first packet in the segment. */
  readonly offset: number;
  readonly pts: number;
  readonly key: boolean;
}

/**
 * A segment like ffmpeg's: a PAT/PMT-like packet, then per frame a video PES start (random access
 * on key frames), `packetsPerFrame - 1` continuation packets and an audio PES between frames.
 */
export function syntheticSegment(options: {
  readonly frames: number;
  readonly firstPts: number;
  readonly frameTicks: number;
  readonly keyEvery: number;
  readonly packetsPerFrame?: number;
}): { bytes: Uint8Array; frames: Frame[] } {
  const packets: Uint8Array[] = [
    tsPacket({ pid: 0, unitStart: true, payload: Uint8Array.from([0, 0, 0xb0]) }),
  ];
  const frames: Frame[] = [];
  for (let i = 0; i < options.frames; i++) {
    const pts = (options.firstPts + i * options.frameTicks) % 2 ** 33;
    const key = i % options.keyEvery === 0;
    frames.push({ offset: packets.length * 188, pts, key });
    packets.push(
      tsPacket({ pid: VIDEO_PID, unitStart: true, randomAccess: key, payload: pesHeader(0xe0, pts) }),
    );
    for (let k = 1; k < (options.packetsPerFrame ?? 3); k++) packets.push(tsPacket({ pid: VIDEO_PID }));
    packets.push(tsPacket({ pid: AUDIO_PID, unitStart: true, payload: pesHeader(0xc0, pts) }));
  }
  const bytes = new Uint8Array(packets.length * 188);
  packets.forEach((p, i) => {
    bytes.set(p, i * 188);
  });
  return { bytes, frames };
}
