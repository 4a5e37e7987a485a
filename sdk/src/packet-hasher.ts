import { sha256 } from '@noble/hashes/sha2.js';

/**
 * Native digests in flight at most. Each holds its packet (MeshNode's hold) until it lands; an honest
 * stream has a few packets a second per link. Past this, a peer spraying packets gets the synchronous
 * digest instead of queueing unbounded work (the packets are then checked at once, as before).
 */
const MAX_PENDING_DIGESTS = 256;

export interface PacketHasherOptions {
  /**
   * SHA-256 by WebCrypto (`crypto.subtle.digest`): native code off the main thread, ~9× cheaper than
   * the JavaScript digest on this machine (issue 17's profile: @noble/hashes was the SDK's busiest
   * function). A packet waits for it one task or so.
   */
  readonly native: boolean;
  /** A native digest landed: packets held for it can be looked at again (`MeshNode.recheckHeld`). */
  readonly ready: () => void;
}

/**
 * SHA-256 of `bytes` by WebCrypto, off the main thread, for bytes that can wait for it (an origin
 * byte range, a repair reply); the JavaScript digest where WebCrypto refuses. `bytes` may be a view
 * into a larger body: only the view is hashed.
 */
export async function sha256OffThread(bytes: Uint8Array): Promise<Uint8Array> {
  try {
    // Fetched and received bytes live in ordinary ArrayBuffers, never shared memory.
    return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));
  } catch {
    return sha256(bytes);
  }
}

/** What inspectPacket needs of a hasher: a packet's digest, or null while it is being computed. */
export interface PacketDigests {
  digest(payload: Uint8Array, bytes: Uint8Array): Uint8Array | null;
}

export interface PacketHasherCounters {
  /** Digests computed natively, and synchronously (no WebCrypto, or too many in flight). */
  native: number;
  synchronous: number;
}

/**
 * The SHA-256 of media packets' bytes, for inspectPacket. A digest is kept by payload array (a
 * WeakMap: a packet dropped or passed on takes its entry with it), so a held packet that is
 * rechecked again and again is hashed once: before this, every finished signature check rechecked
 * every held packet, and a segment pushed while written was hashed about n²/2 times over its n
 * packets. With `native`, the first look starts a WebCrypto digest and answers null (the caller
 * holds the packet) and a later look finds it.
 */
export class PacketHasher implements PacketDigests {
  readonly counters: PacketHasherCounters = { native: 0, synchronous: 0 };
  private readonly digests = new WeakMap<Uint8Array, Uint8Array>();
  private readonly started = new WeakSet<Uint8Array>();
  private pending = 0;

  constructor(private readonly options: PacketHasherOptions) {}

  /**
   * The digest of `bytes` (the media bytes inside `payload`), or null while a native one is under
   * way (call again after `ready`).
   */
  digest(payload: Uint8Array, bytes: Uint8Array): Uint8Array | null {
    const known = this.digests.get(payload);
    if (known !== undefined) return known;
    if (this.started.has(payload)) return null;
    if (!this.options.native || this.pending >= MAX_PENDING_DIGESTS) return this.hashNow(payload, bytes);
    this.started.add(payload);
    this.pending++;
    this.counters.native++;
    void crypto.subtle
      // Received bytes live in ordinary ArrayBuffers (a data channel never hands out shared memory).
      .digest('SHA-256', bytes as Uint8Array<ArrayBuffer>)
      .then(
        (buffer) => {
          this.digests.set(payload, new Uint8Array(buffer));
        },
        // WebCrypto refused (it does not for SHA-256 of bytes): the next look hashes synchronously.
        () => undefined,
      )
      .finally(() => {
        this.pending--;
        this.started.delete(payload);
        if (!this.digests.has(payload)) this.hashNow(payload, bytes);
        this.options.ready();
      });
    return null;
  }

  private hashNow(payload: Uint8Array, bytes: Uint8Array): Uint8Array {
    this.counters.synchronous++;
    const digest = sha256(bytes);
    this.digests.set(payload, digest);
    return digest;
  }
}
