/**
 * Pushing a segment into the mesh while the packager writes it (issue 14). The origin streams the
 * segment in progress (`GROWING_HEADER`, see tracker/src/ll-hls/; any other answer, such as a plain
 * file server's, is not pushed: the segment is cut whole once listed): every `packetBytes` bytes become a
 * packet, signed on its own (`packetSigningBytes`: viewers check it on arrival, before any
 * announcement of the segment exists) and dealt to the slices at once. When the origin ends the
 * stream the segment is complete: the tail packet and empty ones up to a whole row of slices follow,
 * and the caller announces the whole, as for a segment cut after the fact.
 */
import { createHash } from 'node:crypto';
import { GROWING_HEADER } from '../ll-hls/index.js';
import {
  MAX_MEDIA_PACKET_PAYLOAD_BYTES,
  MAX_SEGMENT_BYTES,
  MAX_ANNOUNCED_PACKETS,
  OPEN_SEGMENT_COUNT,
  PACKET_HASH_HEX,
  encodeMediaPacket,
  packetSigningBytes,
} from '@chunkycast/wire';

/**
 * A packet should fill in about this long at the stream's rate: its first byte waits for its last
 * before it can leave, so this is the latency the cut adds. 125 ms keeps a ~1 Mbit/s stream at ~16
 * packets per 2 s segment (one row of slices, each packet ~14 KB) and 8 signatures a second.
 */
export const TARGET_PACKET_FILL_MS = 125;
/** Smallest packet: below it the 80-byte signed header and a signature check per packet dominate. */
export const MIN_PACKET_BYTES = 2048;
/** The stream of one segment is abandoned after this long (a stuck packager or origin). */
export const SEGMENT_STREAM_TIMEOUT_MS = 30_000;

/** The fixed packet size for a segment of a stream running at `bytesPerSecond` (null: unknown yet). */
export function packetBytesFor(bytesPerSecond: number | null): number {
  if (bytesPerSecond === null || !Number.isFinite(bytesPerSecond) || bytesPerSecond <= 0)
    return MAX_MEDIA_PACKET_PAYLOAD_BYTES;
  const bytes = Math.round((bytesPerSecond * TARGET_PACKET_FILL_MS) / 1000);
  return Math.min(MAX_MEDIA_PACKET_PAYLOAD_BYTES, Math.max(MIN_PACKET_BYTES, bytes));
}

/**
 * Cuts a byte stream into packets of `packetBytes`: `push` returns the payloads that became full,
 * `finish` the tail (an empty segment is one empty packet: an announcement lists at least one).
 */
export class PacketCutter {
  private pending: Uint8Array;
  private pendingBytes = 0;
  private cut = 0;
  private total = 0;

  constructor(readonly packetBytes: number) {
    if (!Number.isInteger(packetBytes) || packetBytes < 1 || packetBytes > MAX_MEDIA_PACKET_PAYLOAD_BYTES)
      throw new RangeError(`packetBytes ${packetBytes} is outside 1‥${MAX_MEDIA_PACKET_PAYLOAD_BYTES}`);
    this.pending = new Uint8Array(packetBytes);
  }

  /** Bytes taken so far. */
  get bytes(): number {
    return this.total;
  }

  /** Packets cut so far. */
  get packets(): number {
    return this.cut;
  }

  push(chunk: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    let at = 0;
    this.total += chunk.length;
    while (at < chunk.length) {
      const take = Math.min(chunk.length - at, this.packetBytes - this.pendingBytes);
      this.pending.set(chunk.subarray(at, at + take), this.pendingBytes);
      this.pendingBytes += take;
      at += take;
      if (this.pendingBytes === this.packetBytes) {
        out.push(this.pending);
        this.cut++;
        this.pending = new Uint8Array(this.packetBytes);
        this.pendingBytes = 0;
      }
    }
    return out;
  }

  finish(): Uint8Array[] {
    const out: Uint8Array[] = [];
    if (this.pendingBytes > 0 || this.cut === 0) {
      out.push(this.pending.slice(0, this.pendingBytes));
      this.cut++;
    }
    this.pendingBytes = 0;
    return out;
  }
}

export interface PushOptions {
  readonly url: string;
  readonly stream: string;
  readonly sequence: number;
  /** Stream-wide number of the segment's first packet. */
  readonly firstPacket: number;
  readonly packetBytes: number;
  readonly signingKey: CryptoKey;
  /** Deals one encoded packet under its stream-wide number (in order). */
  readonly publish: (packet: Uint8Array, packetNumber: number) => void;
  readonly signal?: AbortSignal;
}

/** What pushing one segment came to. */
export type PushOutcome =
  /** The origin does not stream this segment in progress (not there yet, or not that kind of origin): nothing was sent. */
  | { readonly kind: 'notGrowing'; readonly status: number }
  /** The whole segment was pushed: what its announcement must say. */
  | {
      readonly kind: 'complete';
      readonly bytes: number;
      readonly packets: number;
      readonly sha256: string;
      readonly packetHashes: string;
      /** Milliseconds from the first byte of the body to its end (the packager's writing). */
      readonly streamedMs: number;
    }
  /** The stream broke after `packets` packets were sent: the segment cannot be announced. */
  | { readonly kind: 'broken'; readonly packets: number; readonly error: string };

/** Streams one segment in progress from the origin into the mesh, packet by packet. */
export async function pushWhileWritten(options: PushOptions): Promise<PushOutcome> {
  const signal = AbortSignal.any([
    AbortSignal.timeout(SEGMENT_STREAM_TIMEOUT_MS),
    ...(options.signal === undefined ? [] : [options.signal]),
  ]);
  let response: Response;
  try {
    response = await fetch(options.url, {
      headers: { 'X-Chunkycast-Role': 'source', Range: 'bytes=0-' },
      signal,
    });
  } catch (e) {
    return { kind: 'broken', packets: 0, error: String(e) };
  }
  if ((response.status !== 200 && response.status !== 206) || response.headers.get(GROWING_HEADER) === null) {
    await response.body?.cancel().catch(() => undefined);
    return { kind: 'notGrowing', status: response.status };
  }
  const cutter = new PacketCutter(options.packetBytes);
  const whole = createHash('sha256');
  let packetHashes = '';
  let sent = 0;
  let signing = Promise.resolve();
  // An object, not a let: it is set inside the signing chain's callbacks.
  const failure = { error: null as string | null };
  // Signing is asynchronous (WebCrypto) but packets must leave in order: one chain.
  const send = (payloads: readonly Uint8Array[]): void => {
    for (const payload of payloads) {
      const index = sent++;
      const digest = createHash('sha256').update(payload).digest();
      packetHashes += digest.toString('hex').slice(0, PACKET_HASH_HEX);
      const fields = { packetBytes: options.packetBytes, packetNumber: options.firstPacket + index };
      const message = packetSigningBytes(
        options.stream,
        { segment: options.sequence, index, signed: fields },
        new Uint8Array(digest),
      );
      signing = signing.then(async () => {
        if (failure.error !== null) return;
        try {
          const signature = new Uint8Array(
            await crypto.subtle.sign('Ed25519', options.signingKey, Uint8Array.from(message)),
          );
          options.publish(
            encodeMediaPacket({
              segment: options.sequence,
              index,
              count: OPEN_SEGMENT_COUNT,
              bytes: payload,
              signed: { ...fields, signature },
            }),
            fields.packetNumber,
          );
        } catch (e) {
          failure.error = e instanceof Error ? e.message : String(e);
        }
      });
    }
  };
  const body = response.body;
  if (body === null) return { kind: 'broken', packets: 0, error: 'no body' };
  const reader = body.getReader();
  let firstByteAt: number | null = null;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      firstByteAt ??= performance.now();
      whole.update(value);
      if (cutter.bytes + value.length > MAX_SEGMENT_BYTES)
        throw new Error(`segment ${options.sequence} exceeds ${MAX_SEGMENT_BYTES} bytes`);
      send(cutter.push(value));
      if (cutter.packets > MAX_ANNOUNCED_PACKETS)
        throw new Error(`segment ${options.sequence} needs more than ${MAX_ANNOUNCED_PACKETS} packets`);
    }
    send(cutter.finish());
    if (cutter.packets > MAX_ANNOUNCED_PACKETS)
      throw new Error(`segment ${options.sequence} needs more than ${MAX_ANNOUNCED_PACKETS} packets`);
  } catch (e) {
    await reader.cancel().catch(() => undefined);
    await signing;
    return { kind: 'broken', packets: sent, error: String(e) };
  }
  await signing;
  if (failure.error !== null) return { kind: 'broken', packets: sent, error: `signing: ${failure.error}` };
  return {
    kind: 'complete',
    bytes: cutter.bytes,
    packets: cutter.packets,
    sha256: whole.digest('hex'),
    packetHashes,
    streamedMs: firstByteAt === null ? 0 : performance.now() - firstByteAt,
  };
}
