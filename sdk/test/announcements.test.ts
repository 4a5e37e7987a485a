// AnnouncementRelay: what a viewer does with a signed announcement a neighbour passes on. A real
// SegmentStore with real Ed25519 keys; the relay's clock and the mesh around it are stand-ins.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SegmentStore, bytesToBase64 } from '@chunkycast/sdk/core';
import {
  announcementSigningBytes,
  type PeerId,
  type SegmentAnnouncement,
  type SignedAnnouncement,
} from '@chunkycast/wire';
import {
  AnnouncementRelay,
  MAX_PEER_ANNOUNCEMENT_BURST,
  PEER_ANNOUNCEMENT_MAX_DISTANCE,
  PEER_ANNOUNCEMENTS_PER_SECOND,
} from '../src/announcements.js';

const STREAM = 'live';

async function keys(): Promise<CryptoKeyPair> {
  return await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']);
}

async function signed(
  key: CryptoKey,
  sequence: number,
  tweak: Partial<SegmentAnnouncement> = {},
): Promise<SignedAnnouncement> {
  const bytes = new Uint8Array(64).fill(sequence & 0xff);
  const a: SegmentAnnouncement = {
    stream: STREAM,
    sequence,
    uri: `live${sequence}.ts`,
    bytes: bytes.length,
    packets: 1,
    firstPacket: sequence * 16,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    packetHashes: createHash('sha256').update(bytes).digest('hex').slice(0, 32),
    durationMs: 2000,
    publishedAtMs: 1_700_000_000_000 + sequence * 2000,
    ...tweak,
  };
  const signature = new Uint8Array(
    await crypto.subtle.sign('Ed25519', key, Uint8Array.from(announcementSigningBytes(a))),
  );
  return { ...a, signature: bytesToBase64(signature) };
}

/** A relay over a real store, recording what it forwards, reports and releases. */
function harness(publicKey: CryptoKey | null) {
  const clock = { now: 0 };
  const store = new SegmentStore({ stream: STREAM, publicKey, now: () => clock.now });
  const forwarded: { sequence: number; except: readonly PeerId[]; announcement: SignedAnnouncement }[] = [];
  const forgers: PeerId[] = [];
  let released = 0;
  let verifications = 0;
  const counted: typeof store = Object.create(store) as typeof store;
  counted.offer = (a, from) => {
    verifications++;
    return store.offer(a, from);
  };
  const relay = new AnnouncementRelay({
    stream: STREAM,
    store: counted,
    now: () => clock.now,
    forward: (announcement, except) => {
      forwarded.push({ sequence: announcement.sequence, except, announcement });
    },
    reportForged: (peer) => forgers.push(peer),
    added: () => {
      released++;
    },
  });
  return {
    clock,
    store,
    relay,
    forwarded,
    forgers,
    released: () => released,
    verifications: () => verifications,
  };
}

describe('AnnouncementRelay', () => {
  it('verifies a new announcement from a neighbour, places it, releases held packets and passes it on once', async () => {
    const { privateKey, publicKey } = await keys();
    const t = harness(publicKey);
    const a = await signed(privateKey, 10);
    await t.relay.fromPeer(7, a);
    expect(t.store.announcement(10)).toStrictEqual(a);
    expect(t.released()).toBe(1);
    expect(t.forwarded).toEqual([{ sequence: 10, except: [7], announcement: a }]);
    expect(t.relay.counters).toMatchObject({ accepted: 1, forwarded: 1, forged: 0, duplicates: 0 });
    // The same announcement from other neighbours: a lookup each, no verification, not passed on again.
    await t.relay.fromPeer(8, a);
    await t.relay.fromPeer(7, a);
    expect(t.verifications()).toBe(1);
    expect(t.forwarded).toHaveLength(1);
    expect(t.released()).toBe(1);
    expect(t.relay.counters).toMatchObject({ accepted: 1, forwarded: 1, duplicates: 2 });
  });

  it('copies that arrive while the first is being verified are not verified again', async () => {
    const { privateKey, publicKey } = await keys();
    const t = harness(publicKey);
    const a = await signed(privateKey, 11);
    await Promise.all([t.relay.fromPeer(1, a), t.relay.fromPeer(2, a), t.relay.fromPeer(3, a)]);
    expect(t.verifications()).toBe(1);
    expect(t.relay.counters).toMatchObject({ accepted: 1, duplicates: 2, forwarded: 1 });
    // Passed on to everyone but the three neighbours that told us.
    expect([...(t.forwarded[0]?.except ?? [])].sort()).toEqual([1, 2, 3]);
  });

  it('a sequence the tracker announced first is passed on, once, the first time a neighbour mentions it', async () => {
    const { privateKey, publicKey } = await keys();
    const t = harness(publicKey);
    const a = await signed(privateKey, 12);
    expect(await t.store.announce(a)).toBe(true);
    expect(t.forwarded).toHaveLength(0); // the tracker's copy alone is not flooded
    await t.relay.fromPeer(4, a);
    await t.relay.fromPeer(5, a);
    expect(t.verifications()).toBe(0);
    expect(t.forwarded).toEqual([{ sequence: 12, except: [4], announcement: a }]);
    expect(t.released()).toBe(0);
  });

  it('a forged announcement is dropped, not passed on, counted and held against its sender', async () => {
    const { privateKey, publicKey } = await keys();
    const other = await keys();
    const t = harness(publicKey);
    const genuine = await signed(privateKey, 20);
    const cases = [
      // Signed by someone else's key.
      await signed(other.privateKey, 20),
      // A genuine signature over other fields (the hash changed).
      { ...genuine, sha256: 'f'.repeat(64) },
      // A signature that is not even 64 bytes.
      { ...genuine, signature: 'AAAA' },
    ];
    for (const forged of cases) await t.relay.fromPeer(66, forged);
    expect(t.store.announcement(20)).toBeNull();
    expect(t.forwarded).toHaveLength(0);
    expect(t.released()).toBe(0);
    expect(t.forgers).toEqual([66, 66, 66]);
    expect(t.relay.counters).toMatchObject({ forged: 3, accepted: 0 });
    // A peer's forgery is not a verification failure of the stream (the tracker path's counter).
    expect(t.store.counters.badSignatures).toBe(0);
    // The genuine one still gets in afterwards, from an honest neighbour.
    await t.relay.fromPeer(3, genuine);
    expect(t.store.announcement(20)).toStrictEqual(genuine);
    expect(t.forwarded.map((f) => f.announcement)).toEqual([genuine]);
  });

  it('a different announcement for a known sequence is ignored without verification', async () => {
    const { privateKey, publicKey } = await keys();
    const t = harness(publicKey);
    const a = await signed(privateKey, 30);
    await t.relay.fromPeer(1, a);
    const conflicting = await signed(privateKey, 30, { sha256: 'e'.repeat(64) });
    await t.relay.fromPeer(2, conflicting);
    expect(t.verifications()).toBe(1);
    expect(t.store.announcement(30)).toStrictEqual(a);
    expect(t.forwarded).toHaveLength(1);
    expect(t.forgers).toEqual([]);
  });

  it(`verifies at most ${PEER_ANNOUNCEMENTS_PER_SECOND} unknown announcements per neighbour per second, bursts of ${MAX_PEER_ANNOUNCEMENT_BURST}`, async () => {
    const { privateKey, publicKey } = await keys();
    const t = harness(publicKey);
    const count = MAX_PEER_ANNOUNCEMENT_BURST + 3;
    const burst = await Promise.all(Array.from({ length: count }, (_, i) => signed(privateKey, 100 + i)));
    for (const a of burst) await t.relay.fromPeer(9, a);
    expect(t.verifications()).toBe(MAX_PEER_ANNOUNCEMENT_BURST);
    expect(t.relay.counters).toMatchObject({ accepted: MAX_PEER_ANNOUNCEMENT_BURST, rateLimited: 3 });
    for (const a of burst.slice(MAX_PEER_ANNOUNCEMENT_BURST))
      expect(t.store.announcement(a.sequence)).toBeNull();
    // Another neighbour has its own budget: it gets the rest in.
    for (const a of burst.slice(MAX_PEER_ANNOUNCEMENT_BURST)) await t.relay.fromPeer(8, a);
    expect(t.relay.counters).toMatchObject({ accepted: count, rateLimited: 3 });
    // The first neighbour's bucket refills at PEER_ANNOUNCEMENTS_PER_SECOND: not quite one token
    // a moment before 1/rate seconds have passed, one token then, and only one.
    const tokenMs = 1000 / PEER_ANNOUNCEMENTS_PER_SECOND;
    t.clock.now = tokenMs - 1;
    await t.relay.fromPeer(9, await signed(privateKey, 120));
    expect(t.relay.counters.rateLimited).toBe(4);
    t.clock.now = 2 * tokenMs - 1;
    await t.relay.fromPeer(9, await signed(privateKey, 121));
    expect(t.store.announcement(121)).not.toBeNull();
    await t.relay.fromPeer(9, await signed(privateKey, 122));
    expect(t.store.announcement(122)).toBeNull();
    expect(t.relay.counters.rateLimited).toBe(5);
    // Sustained: over 10 s at most rate × 10 s (+ what was left) get verified.
    const before = t.verifications();
    for (let i = 0; i < 200; i++) {
      t.clock.now += 50;
      await t.relay.fromPeer(9, await signed(privateKey, 123 + (i % 40)));
    }
    expect(t.verifications() - before).toBeLessThanOrEqual(PEER_ANNOUNCEMENTS_PER_SECOND * 10 + 1);
    // Known announcements cost no budget: a neighbour repeating them is never limited.
    const limitedBefore = t.relay.counters.rateLimited;
    const known = t.store.announcement(t.store.newestAnnouncedSequence)!;
    for (let i = 0; i < 20; i++) await t.relay.fromPeer(9, known);
    expect(t.relay.counters.rateLimited).toBe(limitedBefore);
  });

  it(`takes only sequences within ${PEER_ANNOUNCEMENT_MAX_DISTANCE} of the newest known`, async () => {
    const { privateKey, publicKey } = await keys();
    const t = harness(publicKey);
    // Before anything is known, any sequence is near enough (it must still be signed).
    await t.relay.fromPeer(1, await signed(privateKey, 1000));
    expect(t.store.newestAnnouncedSequence).toBe(1000);
    const far = [1000 + PEER_ANNOUNCEMENT_MAX_DISTANCE + 1, 1000 - PEER_ANNOUNCEMENT_MAX_DISTANCE - 1, 0];
    for (const sequence of far) await t.relay.fromPeer(2, await signed(privateKey, sequence));
    expect(t.verifications()).toBe(1);
    expect(t.relay.counters.refused).toBe(far.length);
    for (const sequence of far) expect(t.store.announcement(sequence)).toBeNull();
    await t.relay.fromPeer(2, await signed(privateKey, 1000 + PEER_ANNOUNCEMENT_MAX_DISTANCE));
    expect(t.store.newestAnnouncedSequence).toBe(1000 + PEER_ANNOUNCEMENT_MAX_DISTANCE);
  });

  it('refuses announcements of another stream, and any from peers when there is no key to check them', async () => {
    const { privateKey, publicKey } = await keys();
    const t = harness(publicKey);
    await t.relay.fromPeer(1, await signed(privateKey, 5, { stream: 'other' }));
    expect(t.relay.counters.refused).toBe(1);
    const unkeyed = harness(null);
    await unkeyed.relay.fromPeer(1, await signed(privateKey, 5));
    expect(unkeyed.store.announcement(5)).toBeNull();
    expect(unkeyed.relay.counters).toMatchObject({ refused: 1, accepted: 0 });
    expect(unkeyed.verifications() + t.verifications()).toBe(0);
  });
});
