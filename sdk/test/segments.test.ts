import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MAX_SEGMENTS_KEPT, SegmentStore, bytesToBase64, inspectPacket } from '@chunkycast/sdk/core';
import { sha256OffThread } from '../src/packet-hasher.js';
import {
  announcementSigningBytes,
  encodeMediaPacket,
  packetPlace,
  packetRange,
  planPackets,
  type MediaPacket,
  type SegmentAnnouncement,
  type SignedAnnouncement,
} from '@chunkycast/wire';

const STREAM = 'live';

async function keys(): Promise<CryptoKeyPair> {
  return await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']);
}

function segmentBytes(sequence: number, size = 50_000): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = (i * 31 + sequence * 7) & 0xff;
  return out;
}

async function announce(
  key: CryptoKey,
  sequence: number,
  bytes: Uint8Array,
  tweak: Partial<SegmentAnnouncement> = {},
): Promise<SignedAnnouncement> {
  const plan = planPackets(bytes.length, 16, 4096);
  const a: SegmentAnnouncement = {
    stream: STREAM,
    sequence,
    uri: `live${sequence}.ts`,
    bytes: bytes.length,
    packets: plan.packets,
    firstPacket: sequence * plan.packets,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    packetHashes: packets(sequence, bytes)
      .map((p) => createHash('sha256').update(p.bytes).digest('hex').slice(0, 32))
      .join(''),
    durationMs: 2000,
    publishedAtMs: 1_700_000_000_000 + sequence * 2000,
    ...tweak,
  };
  const sig = new Uint8Array(
    await crypto.subtle.sign('Ed25519', key, Uint8Array.from(announcementSigningBytes(a))),
  );
  return { ...a, signature: bytesToBase64(sig) };
}

function packets(sequence: number, bytes: Uint8Array): MediaPacket[] {
  const plan = planPackets(bytes.length, 16, 4096);
  return Array.from({ length: plan.packets }, (_, index) => {
    const [s, e] = packetRange(plan, bytes.length, index);
    return { segment: sequence, index, count: plan.packets, bytes: bytes.subarray(s, e) };
  });
}

function store(publicKey: CryptoKey | null, clock = { now: 0 }): SegmentStore {
  return new SegmentStore({ stream: STREAM, publicKey, now: () => clock.now });
}

describe('SegmentStore', () => {
  it('releases a segment once every packet and a validly signed announcement are in, in any order', async () => {
    const { privateKey, publicKey } = await keys();
    for (const announceFirst of [true, false]) {
      const s = store(publicKey);
      const bytes = segmentBytes(5);
      const waiting = s.wait(5, 5000);
      const list = packets(5, bytes).reverse();
      if (announceFirst) expect(await s.announce(await announce(privateKey, 5, bytes))).toBe(true);
      for (const p of list) expect(s.addPacket(p)).toBe(true);
      if (!announceFirst) expect(await s.announce(await announce(privateKey, 5, bytes))).toBe(true);
      expect(await waiting).toEqual(bytes);
      expect(s.verdict(5)).toBe('complete');
      expect(s.counters.segmentsComplete).toBe(1);
    }
  });

  it('keeps a finished segment as the packets it was given, not a copy of its own (the engine rings hold them too)', async () => {
    const { privateKey, publicKey } = await keys();
    const s = store(publicKey);
    const bytes = segmentBytes(6);
    expect(await s.announce(await announce(privateKey, 6, bytes))).toBe(true);
    // Each packet in a buffer of its own, as a data channel message is.
    const given = packets(6, bytes).map((p) => ({ ...p, bytes: p.bytes.slice() }));
    for (const p of given) expect(s.addPacket(p)).toBe(true);
    expect(await s.wait(6, 5000)).toEqual(bytes);
    const first = s.bytes(6);
    expect(first).toEqual(bytes);
    expect(s.range(6, 10, 5000)).toEqual(bytes.slice(10, 5000));
    // Each read is a copy the caller may keep or hand on.
    expect(s.bytes(6)).not.toBe(first);
    // Whose bytes are kept: a payload is never written to once it arrived; writing to one here shows
    // that the store reads the very buffer it was given.
    const packet0 = given[0]?.bytes ?? new Uint8Array(1);
    packet0[0] = (packet0[0] ?? 0) ^ 0xff;
    expect(s.bytes(6)?.[0]).toBe(packet0[0]);
    expect(first?.[0]).toBe(bytes[0]);
  });

  it('tells when a segment came to be held whole (the playlist loader times reloads by it)', async () => {
    const { privateKey, publicKey } = await keys();
    const clock = { now: 100 };
    const s = store(publicKey, clock);
    const bytes = segmentBytes(8);
    expect(await s.announce(await announce(privateKey, 8, bytes))).toBe(true);
    const list = packets(8, bytes);
    const last = list.pop();
    for (const p of list) s.addPacket(p);
    expect(s.heldAtMs(8)).toBeNull();
    clock.now = 250;
    const waiting = s.wait(8, 5000);
    if (last !== undefined) s.addPacket(last);
    expect(await waiting).toEqual(bytes);
    expect(s.heldAtMs(8)).toBe(250);
    expect(s.heldAtMs(9)).toBeNull();
  });

  it('drops a segment whose bytes do not match the signed hash, and never releases it', async () => {
    const { privateKey, publicKey } = await keys();
    const s = store(publicKey);
    const bytes = segmentBytes(6);
    await s.announce(await announce(privateKey, 6, bytes));
    const waiting = s.wait(6, 5000);
    const list = packets(6, bytes);
    const forged = new Uint8Array(list[3]!.bytes);
    forged[0] = (forged[0]! + 1) & 0xff;
    list[3] = { ...list[3]!, bytes: forged };
    for (const p of list) s.addPacket(p);
    expect(await waiting).toBeNull();
    expect(s.verdict(6)).toBe('failed');
    expect(s.bytes(6)).toBeNull();
    expect(s.counters.hashMismatches).toBe(1);
    expect(s.expects(6)).toBe(false);
  });

  it('ignores announcements with a bad signature or for another stream', async () => {
    const { privateKey, publicKey } = await keys();
    const other = await keys();
    const s = store(publicKey);
    const bytes = segmentBytes(7);
    expect(await s.announce(await announce(other.privateKey, 7, bytes))).toBe(false);
    const good = await announce(privateKey, 7, bytes);
    expect(await s.announce({ ...good, bytes: good.bytes + 1 })).toBe(false);
    expect(await s.announce({ ...good, stream: 'other' })).toBe(false);
    expect(s.counters.badSignatures).toBe(2);
    for (const p of packets(7, bytes)) s.addPacket(p);
    expect(s.bytes(7)).toBeNull();
    expect(await s.announce(good)).toBe(true);
    await s.wait(7, 1000);
    expect(s.bytes(7)).toEqual(bytes);
  });

  it('counts duplicates, refuses packets with a conflicting count and far-ahead segments', async () => {
    const { privateKey, publicKey } = await keys();
    const s = store(publicKey);
    const bytes = segmentBytes(10);
    await s.announce(await announce(privateKey, 10, bytes));
    const [first] = packets(10, bytes);
    expect(s.addPacket(first!)).toBe(true);
    expect(s.addPacket(first!)).toBe(false);
    expect(s.counters.duplicatePackets).toBe(1);
    expect(s.addPacket({ ...first!, count: first!.count * 2 })).toBe(false);
    expect(s.addPacket({ ...first!, segment: 10 + 100 })).toBe(false);
    expect(s.counters.refusedPackets).toBe(2);
  });

  it('keeps a whole segment from the origin only if announced, not held and matching the signed hash', async () => {
    const { privateKey, publicKey } = await keys();
    const s = store(publicKey);
    await s.seed([await announce(privateKey, 20, segmentBytes(20))]);
    const bytes = segmentBytes(20);
    const tampered = bytes.slice();
    tampered[5] = (tampered[5] ?? 0) ^ 1;
    expect(await s.keepWhole(20, tampered)).toBe(false);
    expect(s.bytes(20)).toBeNull();
    expect(s.counters.hashMismatches).toBe(1);
    expect(await s.keepWhole(21, segmentBytes(21))).toBe(false); // not announced
    expect(await s.keepWhole(20, bytes)).toBe(true);
    expect(s.bytes(20)).toEqual(bytes);
    expect(s.counters.segmentsKeptFromOrigin).toBe(1);
    // Held now: it is what a neighbour catching up is served, and a wait for it ends at once.
    expect(await s.wait(20, 0)).toEqual(bytes);
    expect(await s.keepWhole(20, bytes)).toBe(false);
  });

  it('wait resolves null on timeout and on abort', async () => {
    const s = store(null);
    expect(await s.wait(3, 30)).toBeNull();
    const controller = new AbortController();
    const waiting = s.wait(4, 10_000, controller.signal);
    controller.abort();
    expect(await waiting).toBeNull();
  });

  it('does not expect segments announced before joining, nor an incomplete one long after its announcement', async () => {
    const { privateKey, publicKey } = await keys();
    const clock = { now: 0 };
    const s = store(publicKey, clock);
    await s.seed([
      await announce(privateKey, 20, segmentBytes(20)),
      await announce(privateKey, 21, segmentBytes(21)),
    ]);
    expect(s.expects(20)).toBe(false);
    expect(s.expects(21)).toBe(false);
    expect(s.expects(22)).toBe(true);
    clock.now = 1000;
    await s.announce(await announce(privateKey, 22, segmentBytes(22)));
    clock.now = 3000;
    expect(s.expects(22)).toBe(true);
    clock.now = 3600;
    expect(s.expects(22)).toBe(false);
  });

  it('keeps a bounded number of segments', async () => {
    const s = store(null);
    for (let seq = 0; seq < 100; seq++)
      await s.announce(await announce((await keys()).privateKey, seq, segmentBytes(seq, 100)));
    const kept = Array.from({ length: 100 }, (_, i) => i).filter((i) => s.announcement(i) !== null);
    expect(kept.length).toBe(MAX_SEGMENTS_KEPT);
    expect(kept.at(-1)).toBe(99);
  });
});

describe('completing a partial segment from the origin', () => {
  it('names the missing packets as merged byte ranges and releases the segment once they are filled', async () => {
    const { privateKey, publicKey } = await keys();
    const s = store(publicKey);
    const bytes = segmentBytes(30);
    await s.announce(await announce(privateKey, 30, bytes));
    expect(s.missingRanges(30)).toBeNull(); // nothing received yet: the whole segment is cheaper
    const list = packets(30, bytes);
    const missing = new Set([3, 4, 9]);
    for (const p of list) if (!missing.has(p.index)) s.addPacket(p);
    const runs = s.missingRanges(30)!;
    expect(runs.map((r) => r.indexes)).toEqual([[3, 4], [9]]);
    const plan = planPackets(bytes.length, 16, 4096);
    expect(runs[0]).toMatchObject({ start: 3 * plan.packetBytes, end: 5 * plan.packetBytes });
    expect(s.expects(30)).toBe(true);
    for (const run of runs)
      for (const i of run.indexes) expect(s.fillPacket(30, i, list[i]!.bytes)).toBe(true);
    expect(await s.wait(30, 1000)).toEqual(bytes);
    expect(s.counters.packetsFilledFromOrigin).toBe(3);
    expect(s.counters.packetsReceived).toBe(list.length - 3);
  });

  it('never takes origin bytes that do not match their packet hash', async () => {
    const { privateKey, publicKey } = await keys();
    const s = store(publicKey);
    const bytes = segmentBytes(31);
    await s.announce(await announce(privateKey, 31, bytes));
    const list = packets(31, bytes);
    for (const p of list.slice(1)) s.addPacket(p);
    // Checked per packet, so a wrong fill is refused at once and the right one can still come.
    expect(s.fillPacket(31, 0, new Uint8Array(list[0]!.bytes.length))).toBe(false);
    expect(s.counters.hashMismatches).toBe(1);
    expect(await s.wait(31, 50)).toBeNull();
    expect(s.verdict(31)).toBe('waiting');
    expect(s.fillPacket(31, 0, list[0]!.bytes)).toBe(true);
    expect(await s.wait(31, 1000)).toEqual(bytes);
  });

  it('checks a digest computed off the main thread instead of hashing the bytes again', async () => {
    const { privateKey, publicKey } = await keys();
    const s = store(publicKey);
    const bytes = segmentBytes(32);
    await s.announce(await announce(privateKey, 32, bytes));
    const list = packets(32, bytes);
    for (const p of list.slice(2)) s.addPacket(p);
    // The bytes are right but the digest given is another packet's: refused on the digest.
    const other = await sha256OffThread(list[1]!.bytes);
    expect(s.fillPacket(32, 0, list[0]!.bytes, 'origin', other)).toBe(false);
    expect(s.counters.hashMismatches).toBe(1);
    // WebCrypto's digest of a view into a larger body is the view's.
    const body = new Uint8Array(bytes.length + 8);
    body.set(bytes, 4);
    const view = body.subarray(4, 4 + list[0]!.bytes.length);
    const digest = await sha256OffThread(view);
    expect(digest).toEqual(new Uint8Array(createHash('sha256').update(list[0]!.bytes).digest()));
    expect(s.fillPacket(32, 0, view, 'origin', digest)).toBe(true);
    expect(s.fillPacket(32, 1, list[1]!.bytes, 'origin', other)).toBe(true);
    expect(await s.wait(32, 1000)).toEqual(bytes);
  });
});

describe('inspectPacket: a tree packet against its signed announcement (issue 18)', () => {
  it('accepts a genuine payload only on the slice and under the sequence its firstPacket gives it', async () => {
    const { privateKey, publicKey } = await keys();
    const s = store(publicKey);
    const bytes = segmentBytes(9);
    // Segment 9 begins at stream packet 9·rows·16 (as the true source numbers them).
    const announcement = await announce(privateKey, 9, bytes);
    expect(await s.announce(announcement)).toBe(true);
    for (const packet of packets(9, bytes)) {
      const payload = encodeMediaPacket(packet);
      const { slice, seq } = packetPlace(announcement.firstPacket, packet.index, 16);
      expect(inspectPacket(s, payload, { slice, seq, dataSlices: 16 })).toBe('accept');
      // The attack of issue 18: the same genuine bytes under a forged sequence, or on another slice.
      for (const forged of [seq + 1, seq + 1_000_000, 0xffff_ffff])
        expect(inspectPacket(s, payload, { slice, seq: forged, dataSlices: 16 })).toBe('reject');
      expect(inspectPacket(s, payload, { slice: (slice + 1) % 16, seq, dataSlices: 16 })).toBe('reject');
      // Repair data carries no place: the hash alone decides.
      expect(inspectPacket(s, payload)).toBe('accept');
    }
    // The hash: any one bit of the media changed, at the start, in the middle or at the end of the
    // payload, makes a genuine packet a forged one.
    const genuine = packets(9, bytes)[1]!;
    const { slice, seq } = packetPlace(announcement.firstPacket, genuine.index, 16);
    for (const at of [0, 1, genuine.bytes.length >> 1, genuine.bytes.length - 1]) {
      const tampered = genuine.bytes.slice();
      tampered[at] = (tampered[at] ?? 0) ^ 0x01;
      const payload = encodeMediaPacket({ ...genuine, bytes: tampered });
      expect(inspectPacket(s, payload, { slice, seq, dataSlices: 16 }), `bit flipped at ${at}`).toBe(
        'reject',
      );
      expect(inspectPacket(s, payload), `bit flipped at ${at}, as repair`).toBe('reject');
    }
    // A packet of a segment not yet announced waits for its announcement.
    const later = encodeMediaPacket(packets(10, segmentBytes(10))[0]!);
    expect(inspectPacket(s, later, { slice: 0, seq: 0, dataSlices: 16 })).toBe('hold');
  });
});
