import {
  PACKET_SIGNATURE_BYTES,
  packetSigningBytes,
  type MediaPacket,
  type SignedPacketFields,
} from '@chunkycast/wire';
import { bytesToHex } from './segments.js';

/**
 * Outcomes remembered at most (valid and forged claims alike): a segment cut while written is ~16–32
 * packets, so this covers the last 30 or more segments; an evicted one costs one more verification.
 */
const MAX_REMEMBERED_VERDICTS = 1024;
/**
 * Verifications in flight at most. WebCrypto's Ed25519 is asynchronous; a packet waits (MeshNode
 * holds it) until its verdict is known. An honest stream needs a handful at once; a peer spraying
 * forged packets cannot make us queue more work than this (the rest stay held, then are dropped).
 */
const MAX_PENDING_VERIFICATIONS = 64;

export type SignatureVerdict = 'valid' | 'forged' | 'pending';

export interface PacketSignaturesOptions {
  readonly stream: string;
  /** The broadcaster's Ed25519 public key; null (no key configured) accepts every signed packet. */
  readonly publicKey: CryptoKey | null;
  /** A verification finished: packets held for it can be looked at again (`MeshNode.recheckHeld`). */
  readonly settled: () => void;
  /**
   * A packet's signature checked out: its signed number is a trusted word on where the stream is
   * (the engine's `liveSequence`), ahead of any announcement of its segment.
   */
  readonly verified?: (packetNumber: number) => void;
}

export interface PacketSignatureCounters {
  /** Signatures checked and found valid. */
  verified: number;
  /** Signatures checked and found not the broadcaster's. */
  forged: number;
  /** Packets answered 'pending' because MAX_PENDING_VERIFICATIONS were in flight. */
  deferred: number;
}

/**
 * The check of a packet of a segment still being written (issue 14): it comes before any
 * announcement of its segment, so it carries the broadcaster's Ed25519 signature over its place and
 * the SHA-256 of its bytes (`packetSigningBytes`). WebCrypto verifies asynchronously, so the first
 * look at a claim starts a verification and answers 'pending' (the packet is held), and a later look
 * gets the remembered verdict. A claim is the packet's signed fields, its bytes' hash and the
 * signature, so a verdict is never reused for other bytes.
 */
export class PacketSignatures {
  readonly counters: PacketSignatureCounters = { verified: 0, forged: 0, deferred: 0 };
  private readonly verdicts = new Map<string, SignatureVerdict>();
  private pending = 0;

  constructor(private readonly options: PacketSignaturesOptions) {}

  /** The verdict on a signed packet whose bytes hash to `payloadSha256`. */
  check(packet: MediaPacket, signed: SignedPacketFields, payloadSha256: Uint8Array): SignatureVerdict {
    if (this.options.publicKey === null) return 'valid';
    if (signed.signature.length !== PACKET_SIGNATURE_BYTES) return 'forged';
    const key = claimKey(packet, signed, payloadSha256);
    const known = this.verdicts.get(key);
    if (known !== undefined) return known;
    if (this.pending >= MAX_PENDING_VERIFICATIONS) {
      this.counters.deferred++;
      return 'pending';
    }
    this.remember(key, 'pending');
    this.pending++;
    const message = packetSigningBytes(
      this.options.stream,
      { segment: packet.segment, index: packet.index, signed },
      payloadSha256,
    );
    void crypto.subtle
      .verify('Ed25519', this.options.publicKey, Uint8Array.from(signed.signature), Uint8Array.from(message))
      .catch(() => false)
      .then((valid) => {
        this.pending--;
        if (valid) this.counters.verified++;
        else this.counters.forged++;
        this.remember(key, valid ? 'valid' : 'forged');
        if (valid) this.options.verified?.(signed.packetNumber);
        this.options.settled();
      });
    return 'pending';
  }

  private remember(key: string, verdict: SignatureVerdict): void {
    this.verdicts.delete(key);
    this.verdicts.set(key, verdict);
    // Oldest first (insertion order); a pending one evicted is simply verified again if asked.
    while (this.verdicts.size > MAX_REMEMBERED_VERDICTS) {
      const oldest = this.verdicts.keys().next();
      if (oldest.done === true) break;
      this.verdicts.delete(oldest.value);
    }
  }
}

function claimKey(packet: MediaPacket, signed: SignedPacketFields, payloadSha256: Uint8Array): string {
  return `${packet.segment}:${packet.index}:${signed.packetBytes}:${signed.packetNumber}:${bytesToHex(payloadSha256)}${bytesToHex(signed.signature)}`;
}
