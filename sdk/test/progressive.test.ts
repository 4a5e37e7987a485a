// Segments cut while the packager writes them (issue 14): packets signed one by one travel before
// their segment's announcement; the store assembles them, serves verified byte ranges (LL-HLS parts)
// and completes the segment when the announcement of the whole arrives.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SegmentStore, bytesToBase64, inspectPacket } from '@chunkycast/sdk/core';
import { PacketHasher } from '../src/packet-hasher.js';
import { PacketSignatures } from '../src/packet-signatures.js';
import {
  OPEN_SEGMENT_COUNT,
  announcementSigningBytes,
  decodeMediaPacket,
  encodeMediaPacket,
  packetPlace,
  packetSigningBytes,
  type MediaPacket,
  type SegmentAnnouncement,
  type SignedAnnouncement,
} from '@chunkycast/wire';

const STREAM = 'live';
const PACKET_BYTES = 4096;
const SLICES = 16;

async function keys(): Promise<CryptoKeyPair> {
  return await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']);
}

function segmentBytes(sequence: number, size: number): Uint8Array {
  const out = new Uint8Array(size);
  // Not periodic in 256 bytes, so no two packets hold the same bytes.
  for (let i = 0; i < size; i++) out[i] = (i * 13 + (i >> 8) * 7 + sequence * 5) & 0xff;
  return out;
}

/** The packets a true source cuts from a segment as it is written: full ones, then the tail. */
async function signedPackets(
  key: CryptoKey,
  sequence: number,
  bytes: Uint8Array,
  firstPacket: number,
): Promise<MediaPacket[]> {
  const total = Math.max(1, Math.ceil(bytes.length / PACKET_BYTES));
  const out: MediaPacket[] = [];
  for (let index = 0; index < total; index++) {
    const payload = bytes.subarray(
      Math.min(bytes.length, index * PACKET_BYTES),
      Math.min(bytes.length, (index + 1) * PACKET_BYTES),
    );
    const fields = { packetBytes: PACKET_BYTES, packetNumber: firstPacket + index };
    const digest = new Uint8Array(createHash('sha256').update(payload).digest());
    const message = packetSigningBytes(STREAM, { segment: sequence, index, signed: fields }, digest);
    const signature = new Uint8Array(await crypto.subtle.sign('Ed25519', key, Uint8Array.from(message)));
    out.push({
      segment: sequence,
      index,
      count: OPEN_SEGMENT_COUNT,
      bytes: payload,
      signed: { ...fields, signature },
    });
  }
  return out;
}

async function finalAnnouncement(
  key: CryptoKey,
  sequence: number,
  bytes: Uint8Array,
  packets: readonly MediaPacket[],
  firstPacket: number,
): Promise<SignedAnnouncement> {
  const a: SegmentAnnouncement = {
    stream: STREAM,
    sequence,
    uri: `live${sequence}.ts`,
    bytes: bytes.length,
    packets: packets.length,
    firstPacket,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    packetHashes: packets
      .map((p) => createHash('sha256').update(p.bytes).digest('hex').slice(0, 32))
      .join(''),
    durationMs: 2000,
    publishedAtMs: 1_700_000_000_000,
    packetBytes: PACKET_BYTES,
  };
  const sig = new Uint8Array(
    await crypto.subtle.sign('Ed25519', key, Uint8Array.from(announcementSigningBytes(a))),
  );
  return { ...a, signature: bytesToBase64(sig) };
}

/** Polls a check that answers 'hold' while a WebCrypto verification runs. */
async function settle(check: () => string): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const verdict = check();
    if (verdict !== 'hold') return verdict;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return 'hold';
}

/** What a range wait gives within 100 ms, or 'waited' if it is still waiting then. */
function atOnce(wait: Promise<Uint8Array | null>): Promise<Uint8Array | null | 'waited'> {
  return Promise.race([
    wait,
    new Promise<'waited'>((resolve) =>
      setTimeout(() => {
        resolve('waited');
      }, 100),
    ),
  ]);
}

describe('packets of a segment cut while written', () => {
  it('are checked by their own signature before the announcement, and by it after', async () => {
    const { privateKey, publicKey } = await keys();
    const store = new SegmentStore({ stream: STREAM, publicKey, now: () => 0 });
    let settled = 0;
    const signatures = new PacketSignatures({ stream: STREAM, publicKey, settled: () => settled++ });
    const bytes = segmentBytes(3, 30_000);
    const packets = await signedPackets(privateKey, 3, bytes, 160);
    const payload = encodeMediaPacket(packets[2] as MediaPacket);
    const place = { ...packetPlace(162, 0, SLICES), dataSlices: SLICES };
    expect(inspectPacket(store, payload, place, signatures)).toBe('hold');
    expect(await settle(() => inspectPacket(store, payload, place, signatures))).toBe('accept');
    expect(settled).toBe(1);
    expect(signatures.counters.verified).toBe(1);
    // The same genuine packet on another slice or sequence: its signed number says where it belongs.
    expect(inspectPacket(store, payload, { ...place, slice: (place.slice + 1) % SLICES }, signatures)).toBe(
      'reject',
    );
    // Another packet's bytes under this packet's signature: forged.
    const forged = encodeMediaPacket({
      ...(packets[2] as MediaPacket),
      bytes: (packets[3] as MediaPacket).bytes,
    });
    expect(await settle(() => inspectPacket(store, forged, place, signatures))).toBe('reject');
    expect(signatures.counters.forged).toBe(1);
    // Another stream's key signed it: forged too.
    const other = await keys();
    const foreign = encodeMediaPacket(
      (await signedPackets(other.privateKey, 3, bytes, 160))[2] as MediaPacket,
    );
    expect(await settle(() => inspectPacket(store, foreign, place, signatures))).toBe('reject');
    // Without a checker (a repair reply) a signed packet of an unannounced segment waits.
    expect(inspectPacket(store, payload)).toBe('hold');
    // Once announced, the announcement decides, at no signature cost.
    await store.announce(await finalAnnouncement(privateKey, 3, bytes, packets, 160));
    const before = signatures.counters.verified + signatures.counters.forged;
    expect(inspectPacket(store, payload, place, signatures)).toBe('accept');
    expect(inspectPacket(store, forged, place, signatures)).toBe('reject');
    expect(signatures.counters.verified + signatures.counters.forged).toBe(before);
    // A signed packet whose number disagrees with the announcement's firstPacket is refused.
    const misplaced = await signedPackets(privateKey, 3, bytes, 161);
    expect(inspectPacket(store, encodeMediaPacket(misplaced[2] as MediaPacket), undefined, signatures)).toBe(
      'reject',
    );
  });

  it('are hashed once, natively off the main thread, however often they are rechecked while held', async () => {
    const { privateKey, publicKey } = await keys();
    const store = new SegmentStore({ stream: STREAM, publicKey, now: () => 0 });
    const signatures = new PacketSignatures({ stream: STREAM, publicKey, settled: () => undefined });
    let ready = 0;
    const hasher = new PacketHasher({ native: true, ready: () => ready++ });
    const bytes = segmentBytes(5, 30_000);
    const packets = await signedPackets(privateKey, 5, bytes, 80);
    const payload = encodeMediaPacket(packets[1] as MediaPacket);
    const place = { ...packetPlace(81, 0, SLICES), dataSlices: SLICES };
    // The digest is under way: held, and looking again starts no second one.
    expect(inspectPacket(store, payload, place, signatures, hasher)).toBe('hold');
    expect(inspectPacket(store, payload, place, signatures, hasher)).toBe('hold');
    expect(hasher.counters).toEqual({ native: 1, synchronous: 0 });
    expect(await settle(() => inspectPacket(store, payload, place, signatures, hasher))).toBe('accept');
    expect(ready).toBe(1);
    // Announced: the announced hash decides, with the digest already known (no new one).
    await store.announce(await finalAnnouncement(privateKey, 5, bytes, packets, 80));
    expect(inspectPacket(store, payload, place, signatures, hasher)).toBe('accept');
    const other = encodeMediaPacket({
      ...(packets[2] as MediaPacket),
      bytes: (packets[1] as MediaPacket).bytes,
    });
    expect(await settle(() => inspectPacket(store, other, undefined, signatures, hasher))).toBe('reject');
    expect(hasher.counters).toEqual({ native: 2, synchronous: 0 });
    // Without WebCrypto, the synchronous digest, once per payload.
    const sync = new PacketHasher({ native: false, ready: () => undefined });
    expect(inspectPacket(store, payload, place, signatures, sync)).toBe('accept');
    expect(inspectPacket(store, payload, place, signatures, sync)).toBe('accept');
    expect(sync.counters).toEqual({ native: 0, synchronous: 1 });
  });

  it('keep a verdict to its own claim: another signature or number on the same digest is verified afresh', async () => {
    const { privateKey, publicKey } = await keys();
    let settled = 0;
    const signatures = new PacketSignatures({ stream: STREAM, publicKey, settled: () => settled++ });
    const packets = await signedPackets(privateKey, 7, segmentBytes(7, 30_000), 40);
    const packet = packets[0] as MediaPacket;
    const signed = packet.signed;
    if (signed === undefined) throw new Error('test packets are signed');
    // One digest object, as the hasher keeps per payload.
    const digest = new Uint8Array(createHash('sha256').update(packet.bytes).digest());
    const until = async (check: () => string): Promise<string> =>
      settle(() => (check() === 'pending' ? 'hold' : check()));
    expect(signatures.check(packet, signed, digest)).toBe('pending');
    expect(await until(() => signatures.check(packet, signed, digest))).toBe('valid');
    // Another signature with the same digest: not the cached claim, so a verification of its own.
    const badSignature = Uint8Array.from(signed.signature);
    badSignature[0] = (badSignature[0] ?? 0) ^ 0xff;
    expect(signatures.check(packet, { ...signed, signature: badSignature }, digest)).toBe('pending');
    expect(await until(() => signatures.check(packet, { ...signed, signature: badSignature }, digest))).toBe(
      'forged',
    );
    // Another packet number under the genuine signature: forged as well, and the genuine claim stays valid.
    const renumbered = { ...signed, packetNumber: signed.packetNumber + 1 };
    expect(await until(() => signatures.check(packet, renumbered, digest))).toBe('forged');
    expect(signatures.check(packet, signed, digest)).toBe('valid');
    expect(signatures.counters).toMatchObject({ verified: 1, forged: 2 });
    expect(settled).toBe(3);
  });

  it('are assembled, served as byte ranges before the end, and completed by the announcement', async () => {
    const { privateKey, publicKey } = await keys();
    const store = new SegmentStore({ stream: STREAM, publicKey, now: () => 0 });
    const bytes = segmentBytes(9, 30_000); // 8 packets: 7 full, the tail
    const packets = await signedPackets(privateKey, 9, bytes, 0);
    expect(packets).toHaveLength(8);
    // The trees reached us in segment 8: segment 9's parts are worth waiting for.
    const [earlier] = await signedPackets(privateKey, 8, segmentBytes(8, PACKET_BYTES), 100);
    expect(store.addPacket(earlier as MediaPacket)).toBe(true);
    const part = store.waitRange(9, 5000, 12_000, 5000);
    for (const p of packets.slice(0, 2)) expect(store.addPacket(p)).toBe(true);
    expect(store.range(9, 5000, 12_000)).toBeNull(); // packet 2 (8192‥12288) is not here
    expect(store.addPacket(packets[2] as MediaPacket)).toBe(true);
    expect(await part).toEqual(bytes.subarray(5000, 12_000));
    expect(store.addPacket(packets[2] as MediaPacket)).toBe(false); // duplicate
    // A whole-segment packet cannot join a segment cut while written.
    expect(store.addPacket({ segment: 9, index: 3, count: 16, bytes: new Uint8Array(10) })).toBe(false);
    // Every packet, then the announcement: the segment is complete.
    for (const p of packets.slice(3)) expect(store.addPacket(p)).toBe(true);
    expect(store.verdict(9)).toBe('waiting');
    const whole = store.wait(9, 5000);
    await store.announce(await finalAnnouncement(privateKey, 9, bytes, packets, 0));
    expect(await whole).toEqual(bytes);
    // The tail is served up to the segment's end, not beyond.
    expect(store.range(9, 28_000, 30_000)).toEqual(bytes.subarray(28_000));
    expect(store.range(9, 28_000, 30_001)).toBeNull();
  });

  it('are not awaited before the trees bring a first packet, nor in the segment they were in then', async () => {
    const { privateKey, publicKey } = await keys();
    const store = new SegmentStore({ stream: STREAM, publicKey, now: () => 0 });
    const seven = await signedPackets(privateKey, 7, segmentBytes(7, 3 * PACKET_BYTES), 0);
    const eight = await signedPackets(privateKey, 8, segmentBytes(8, 3 * PACKET_BYTES), 3);
    // Answered at once (null: the loader asks the origin), though 5 s were allowed.
    expect(await atOnce(store.waitRange(7, 0, 100, 5000))).toBeNull();
    // The trees reach us in segment 7 with its second packet: its first went by before.
    expect(store.addPacket(seven[1] as MediaPacket)).toBe(true);
    expect(await atOnce(store.waitRange(7, 0, 100, 5000))).toBeNull();
    // What is here is still served.
    expect(await atOnce(store.waitRange(7, PACKET_BYTES, PACKET_BYTES + 100, 5000))).toEqual(
      (seven[1] as MediaPacket).bytes.subarray(0, 100),
    );
    // The next segment is awaited from the mesh.
    const part = store.waitRange(8, 0, 100, 5000);
    expect(await atOnce(part)).toBe('waited');
    expect(store.addPacket(eight[0] as MediaPacket)).toBe(true);
    expect(await part).toEqual((eight[0] as MediaPacket).bytes.subarray(0, 100));
  });

  it('are awaited in the segment the trees reached us in once every slice flows from before the part', async () => {
    const { privateKey, publicKey } = await keys();
    const store = new SegmentStore({ stream: STREAM, publicKey, now: () => 0 });
    // Segment 7 holds packets 0‥39; its packet 17 is the first the mesh brings.
    const seven = await signedPackets(privateKey, 7, segmentBytes(7, 40 * PACKET_BYTES), 0);
    const partAt = (index: number): [number, number] => [index * PACKET_BYTES, index * PACKET_BYTES + 100];
    expect(store.addPacket(seven[17] as MediaPacket)).toBe(true);
    // Slices 1‥15 flow from their packets 1‥15 (sequence 0), slice 0 only from packet 16 (sequence 1).
    for (let slice = 1; slice < SLICES; slice++) store.treePacket(slice, 0, SLICES);
    // Not every slice flows yet: even a late part of segment 7 comes from the origin.
    expect(await atOnce(store.waitRange(7, ...partAt(30), 5000))).toBeNull();
    store.treePacket(0, 1, SLICES);
    // A later packet of a slice does not move where it flows from.
    store.treePacket(3, 9, SLICES);
    // The slices flow from packet 16 on: a part from packet 15 comes from the origin.
    expect(await atOnce(store.waitRange(7, ...partAt(15), 5000))).toBeNull();
    const part = store.waitRange(7, ...partAt(16), 5000);
    expect(await atOnce(part)).toBe('waited');
    expect(store.addPacket(seven[16] as MediaPacket)).toBe(true);
    expect(await part).toEqual((seven[16] as MediaPacket).bytes.subarray(0, 100));
    // The next segment is awaited as before.
    const eightPart = store.waitRange(8, 0, 100, 5000);
    expect(await atOnce(eightPart)).toBe('waited');
  });

  it('do not serve the tail before the segment is known to end there', async () => {
    const { privateKey, publicKey } = await keys();
    const store = new SegmentStore({ stream: STREAM, publicKey, now: () => 0 });
    const bytes = segmentBytes(4, 10_000); // 3 packets: 4096, 4096, 1808
    const packets = await signedPackets(privateKey, 4, bytes, 0);
    for (const p of packets) store.addPacket(p);
    // The short packet says the data ends at 10,000: a range beyond cannot be filled.
    expect(store.range(4, 8192, 10_000)).toEqual(bytes.subarray(8192));
    expect(store.range(4, 8192, 12_288)).toBeNull();
  });

  it('beyond the announced count are dropped when the announcement arrives', async () => {
    const { privateKey, publicKey } = await keys();
    const store = new SegmentStore({ stream: STREAM, publicKey, now: () => 0 });
    const bytes = segmentBytes(6, 8192);
    const packets = await signedPackets(privateKey, 6, bytes, 0);
    for (const p of packets) store.addPacket(p);
    // A stray signed packet past the end (index 20; a real source never sends one).
    const [stray] = await signedPackets(privateKey, 6, segmentBytes(6, 21 * PACKET_BYTES), 0).then((l) =>
      l.slice(20),
    );
    expect(store.addPacket(stray as MediaPacket)).toBe(true);
    const done = store.wait(6, 5000);
    await store.announce(await finalAnnouncement(privateKey, 6, bytes, packets, 0));
    expect(await done).toEqual(bytes);
    expect(store.addPacket(stray as MediaPacket)).toBe(false);
  });

  it('decode back to what was signed', async () => {
    const { privateKey } = await keys();
    const [packet] = await signedPackets(privateKey, 1, segmentBytes(1, 5000), 32);
    const decoded = decodeMediaPacket(encodeMediaPacket(packet as MediaPacket));
    expect(decoded.ok && decoded.packet).toEqual(packet);
  });
});
