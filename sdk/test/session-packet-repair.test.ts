// MeshSession's two repair paths (issue 14) with a fake tracker and a hand-driven clock: in 'engine'
// mode the player's deadline becomes the engine's playout clock, and the engine's fetchOrigin comes
// back through the origin, the engine and the deliver path into the segment store; in 'segment' mode
// the engine gets no clock.
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MeshNode, MeshSession } from '@chunkycast/sdk/core';
import {
  encodeMediaPacket,
  MessageType,
  packetPlace,
  packetRange,
  planPackets,
  type SignedAnnouncement,
} from '@chunkycast/wire';
import { playoutFor, segmentDeadline } from '../src/packet-repair.js';
import { FakeClock, socketFactory, welcome } from './tracker-fakes.js';

const D = 16;
const URL_BASE = 'https://origin.test/live/';
/** More than the session's catch-up poll (50 ms). */
const CATCH_UP_STEP_MS = 60;

const sessions: MeshSession[] = [];
afterEach(() => {
  for (const s of sessions.splice(0)) s.close();
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

function segment(sequence: number, size: number): { a: SignedAnnouncement; bytes: Uint8Array } {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 13 + sequence) & 0xff;
  const plan = planPackets(size, D);
  const hashes: string[] = [];
  for (let i = 0; i < plan.packets; i++) {
    const [s, e] = packetRange(plan, size, i);
    hashes.push(createHash('sha256').update(bytes.subarray(s, e)).digest('hex').slice(0, 32));
  }
  const a: SignedAnnouncement = {
    stream: 'live',
    sequence,
    uri: `seg${sequence}.ts`,
    bytes: size,
    packets: plan.packets,
    firstPacket: sequence * plan.packets,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    packetHashes: hashes.join(''),
    durationMs: 2000,
    publishedAtMs: 1_700_000_000_000 + sequence * 2000,
    // No broadcaster key in these welcomes: the store checks hashes, not signatures.
    signature: 'AAAA',
  };
  return { a, bytes };
}

/** Lets promise chains (join, seed, announce, fetch bodies) run; no time passes. */
async function settle(): Promise<void> {
  for (let i = 0; i < 30; i++) await Promise.resolve();
  await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Settles until `done` holds, for at most `limitMs` of real time. The origin's byte ranges are
 * checked by WebCrypto's digest, which runs off the main thread: on a loaded machine (CI's two
 * cores running the whole suite) it can finish several event-loop turns after the fetch.
 */
async function settleUntil(done: () => boolean, limitMs = 5_000): Promise<void> {
  const start = performance.now();
  while (!done() && performance.now() - start < limitMs) await settle();
}

async function connected(packetRepair: 'engine' | 'segment', announcements: SignedAnnouncement[] = []) {
  const clock = new FakeClock();
  clock.advance(10_000);
  const factory = socketFactory(clock);
  const session = MeshSession.connect(
    { tracker: 'ws://127.0.0.1:9/ws', stream: 'live', packetRepair },
    { createSocket: factory.create, clock, trackerReconnect: false },
  );
  sessions.push(session);
  const socket = factory.sockets.at(-1);
  if (socket === undefined) throw new Error('no socket');
  socket.accept();
  socket.receive(welcome(7, null, false, { announcements }));
  await session.ready;
  return { clock, session, socket };
}

/** The session's mesh node (private). */
function nodeOf(session: MeshSession): MeshNode {
  return (session as unknown as { node: MeshNode }).node;
}

describe('MeshSession packetRepair', () => {
  it("engine: the player's deadline for a segment, less the origin fill's lead, becomes the engine's playout clock", async () => {
    const playout = vi.spyOn(MeshNode.prototype, 'playout');
    const deadline = vi.spyOn(MeshNode.prototype, 'deadline');
    const s10 = segment(10, 40_000);
    const t = await connected('engine', [s10.a]);
    expect(t.session.packetRepair).toBe('engine');
    // A segment from before we joined is neighbours' stores' (catch-up), not the engine's: no clock,
    // or the engine would chase its packets too and take them from the origin at its deadline.
    const waiting = t.session.waitForSegment(10, 12_000, undefined, `${URL_BASE}seg10.ts`);
    expect(playout).not.toHaveBeenCalled();
    expect(deadline).not.toHaveBeenCalled();
    // A segment not announced yet (still being written) gets its clock when its announcement comes.
    const s11 = segment(11, 40_000);
    void t.session.waitForSegment(11, 14_000, undefined, `${URL_BASE}seg11.ts`);
    expect(playout).not.toHaveBeenCalled();
    t.socket.receive({ type: 'announce', announcement: s11.a });
    await settle();
    expect(playout).toHaveBeenCalledTimes(1);
    // The engine's last resort must land before the loader gives up: 800 ms (ORIGIN_FILL_LEAD_MS) early.
    expect(playout.mock.calls[0]?.[0]).toEqual(playoutFor(s11.a, 13_200, D, 10_000));
    // hls.js takes the segment whole: every packet of it is due by then.
    expect(deadline.mock.calls).toEqual([[segmentDeadline(s11.a, 13_200)]]);
    // One announced already gets its clock at once.
    const s12 = segment(12, 40_000);
    t.socket.receive({ type: 'announce', announcement: s12.a });
    await settle();
    void t.session.waitForSegment(12, 16_000, undefined, `${URL_BASE}seg12.ts`);
    expect(playout).toHaveBeenCalledTimes(2);
    expect(playout.mock.calls[1]?.[0]).toEqual(playoutFor(s12.a, 15_200, D, 10_000));
    expect(deadline.mock.calls[1]).toEqual([
      { firstPacket: s12.a.firstPacket, packets: s12.a.packets, atMs: 15_200 },
    ]);
    t.session.close();
    t.clock.advance(CATCH_UP_STEP_MS); // a wait for a helper ends on its next look
    expect(await waiting).toBeNull();
  });

  it("stats count where a viewer's first three whole segments came from (parts and later segments not)", async () => {
    const t = await connected('segment');
    t.session.noteOriginSegment(1000);
    t.session.noteMeshSegment(1, true); // a part
    t.session.noteMeshSegment(2);
    t.session.noteMeshSegment(3);
    t.session.noteOriginSegment(1000); // the fourth segment
    t.session.noteMeshSegment(5);
    const st = t.session.stats();
    expect([st.startupSegmentsFromMesh, st.startupSegmentsFromOrigin]).toEqual([2, 1]);
    expect([st.segmentsFromMesh, st.segmentsFromOrigin, st.partsFromMesh]).toEqual([3, 2, 1]);
  });

  it('engine: a segment from before joining is asked of neighbours at once (catch-up); a live one is left to the engine', async () => {
    const requestRepair = vi.spyOn(
      MeshSession.prototype as unknown as { requestRepair: (sequence: number) => boolean },
      'requestRepair',
    );
    vi.spyOn(MeshNode.prototype, 'openPeerIds').mockReturnValue([42]);
    vi.spyOn(MeshNode.prototype, 'sendRepair').mockReturnValue(true);
    const s10 = segment(10, 40_000);
    const t = await connected('engine', [s10.a]);
    void t.session.waitForSegment(10, 12_000, undefined, `${URL_BASE}seg10.ts`);
    await settle();
    expect(requestRepair.mock.calls).toEqual([[10]]);
    const s11 = segment(11, 40_000);
    t.socket.receive({ type: 'announce', announcement: s11.a });
    await settle();
    void t.session.waitForSegment(11, 14_000, undefined, `${URL_BASE}seg11.ts`);
    expect(requestRepair.mock.calls).toEqual([[10]]);
  });

  it('a channel to the true source alone is no neighbour: a segment from before joining goes to the origin at once', async () => {
    let open = [1]; // the true source (the fake tracker's sourceId)
    vi.spyOn(MeshNode.prototype, 'openPeerIds').mockImplementation(() => open);
    vi.spyOn(MeshNode.prototype, 'openPeers', 'get').mockImplementation(() => open.length);
    const s10 = segment(10, 40_000);
    const t = await connected('engine', [s10.a]);
    expect(t.session.stats().sourceId).toBe(1);
    expect(t.session.expectsSegment(10)).toBe(false);
    open = [1, 42]; // a neighbour's channel: worth waiting for
    expect(t.session.expectsSegment(10)).toBe(true);
  });

  it("catch-up waits for a neighbour's channel, but only once the player holds a segment", async () => {
    let open: number[] = [];
    vi.spyOn(MeshNode.prototype, 'openPeerIds').mockImplementation(() => open);
    vi.spyOn(MeshNode.prototype, 'openPeers', 'get').mockImplementation(() => open.length);
    const sent = vi.spyOn(MeshNode.prototype, 'sendRepair').mockReturnValue(true);
    const s9 = segment(9, 40_000);
    const s10 = segment(10, 40_000);
    const t = await connected('engine', [s9.a, s10.a]);
    // Startup (nothing played yet): no channel is waited for; playback first.
    expect(t.session.expectsSegment(10)).toBe(false);
    t.session.noteOriginSegment(40_000);
    expect(t.session.expectsSegment(10)).toBe(true);
    const waiting = t.session.waitForSegment(10, t.clock.now() + 1000, undefined, `${URL_BASE}seg10.ts`);
    await settle();
    t.clock.advance(200);
    await settle();
    expect(sent).not.toHaveBeenCalled();
    open = [42];
    t.clock.advance(CATCH_UP_STEP_MS);
    await settle();
    expect(sent.mock.calls.map(([to, message]) => [to, message.type])).toEqual([
      [42, MessageType.RepairRequest],
    ]);
    t.session.close();
    t.clock.advance(CATCH_UP_STEP_MS); // a wait for a helper ends on its next look
    expect(await waiting).toBeNull();
    // Nobody to ask by the deadline: the loader goes to the origin then (null), not later.
    open = [];
    const u = await connected('engine', [s9.a, s10.a]);
    u.session.noteOriginSegment(40_000);
    const alone = u.session.waitForSegment(9, u.clock.now() + 500, undefined, `${URL_BASE}seg9.ts`);
    await settle();
    for (let i = 0; i < 10; i++) {
      u.clock.advance(CATCH_UP_STEP_MS);
      await settle();
    }
    expect(await alone).toBeNull();
    expect(sent).toHaveBeenCalledTimes(1);
  });

  it('at startup a catch-up waits for an open channel only, and briefly: a refusal or a silence sends it to the origin', async () => {
    let open: number[] = [];
    let connecting: number[] = [1, 42];
    vi.spyOn(MeshNode.prototype, 'openPeerIds').mockImplementation(() => open);
    vi.spyOn(MeshNode.prototype, 'openPeers', 'get').mockImplementation(() => open.length);
    vi.spyOn(MeshNode.prototype, 'connectingPeerIds').mockImplementation(() => connecting);
    const sent = vi.spyOn(MeshNode.prototype, 'sendRepair').mockReturnValue(true);
    const s10 = segment(10, 40_000);
    const t = await connected('engine', [s10.a]);
    // A link being set up is not waited for at startup (it moved origin segments between viewers
    // without saving any, and cost their startup).
    expect(t.session.expectsSegment(10)).toBe(false);
    open = [42];
    connecting = [1];
    expect(t.session.expectsSegment(10)).toBe(true);
    let result: Uint8Array | null | undefined;
    void t.session
      .waitForSegment(10, t.clock.now() + 300, undefined, `${URL_BASE}seg10.ts`)
      .then((bytes) => (result = bytes));
    await settle();
    const requests = sent.mock.calls.flatMap(([to, message]) =>
      message.type === MessageType.RepairRequest ? [{ to, requestId: message.requestId }] : [],
    );
    expect(requests.map((r) => r.to)).toEqual([42]);
    expect(result).toBeUndefined();
    // It refuses, and nobody else is open: the origin at once, not at the end of the budget.
    (t.session as unknown as { onRepairNak: (from: number, id: number) => void }).onRepairNak(
      42,
      requests[0]?.requestId ?? -1,
    );
    await settle();
    expect(result).toBeNull();
    // The channel gone by the time the catch-up starts, and no link coming: no wait at all.
    open = [];
    let second: Uint8Array | null | undefined;
    void t.session
      .waitForSegment(10, t.clock.now() + 300, undefined, `${URL_BASE}seg10.ts`)
      .then((bytes) => (second = bytes));
    await settle();
    expect(second).toBeNull();
    // A neighbour that never answers holds the first segment 150 ms at most, whatever the loader's
    // budget (here 10 s, from a page's own startupWaitMs).
    open = [42];
    const silent = t.session.waitForSegment(10, t.clock.now() + 10_000, undefined, `${URL_BASE}seg10.ts`);
    expect(
      await Promise.race([silent, new Promise((r) => setTimeout(r, 5_000, 'still waiting'))]),
    ).toBeNull();
    t.session.close();
  });

  it('catch-up asks again while every neighbour asked has refused, and goes to the origin after a random share of the time left', async () => {
    vi.spyOn(MeshNode.prototype, 'openPeerIds').mockReturnValue([42]);
    vi.spyOn(MeshNode.prototype, 'openPeers', 'get').mockReturnValue(1);
    const sent = vi.spyOn(MeshNode.prototype, 'sendRepair').mockReturnValue(true);
    const s10 = segment(10, 40_000);
    const t = await connected('engine', [s10.a]);
    // The suppression timer's draw, pinned: 0.99 of the first half of the time left.
    const random = (t.session as unknown as { random: { nextFloat: () => number } }).random;
    vi.spyOn(random, 'nextFloat').mockReturnValue(0.99);
    t.session.noteOriginSegment(40_000);
    // Set by the wait's end (an object: the loop below reads it after awaits).
    const ended: { atMs: number | null } = { atMs: null };
    let result: Uint8Array | null | undefined;
    const startMs = t.clock.now();
    void t.session.waitForSegment(10, startMs + 1200, undefined, `${URL_BASE}seg10.ts`).then((bytes) => {
      result = bytes;
      ended.atMs = t.clock.now() - startMs;
    });
    await settle();
    const requests = (): { requestId: number }[] =>
      sent.mock.calls.flatMap(([, message]) => (message.type === MessageType.RepairRequest ? [message] : []));
    expect(requests()).toHaveLength(1);
    // Not refused yet: nobody is asked twice, and the wait goes on.
    t.clock.advance(300);
    await settle();
    expect(requests()).toHaveLength(1);
    expect(ended.atMs).toBeNull();
    const nak = (requestId: number): void => {
      (t.session as unknown as { onRepairNak: (from: number, id: number) => void }).onRepairNak(
        42,
        requestId,
      );
    };
    // Refused at 300 ms (900 ms left): the origin at 300 + 0.99 × 450 ≈ 746 ms, unless a re-ask
    // brings it first. The looks come every third of the time left (250 ms at most).
    const askedAtMs: number[] = [];
    for (let atMs = 310; atMs <= 1200 && ended.atMs === null; atMs += 10) {
      nak(requests().at(-1)?.requestId ?? -1);
      const before = requests().length;
      t.clock.advance(10);
      await settle();
      if (requests().length > before) askedAtMs.push(atMs);
    }
    // Asked again at the looks at 500 and ~733 ms; ended at ~746, long before the deadline (1200).
    expect(askedAtMs).toEqual([500, 740]);
    expect(ended.atMs).toBe(750);
    expect(result).toBeNull();
    t.session.close();
  });

  it('segment: a segment from before joining waits for neighbours the whole of a startup-short wait', async () => {
    vi.spyOn(MeshNode.prototype, 'openPeerIds').mockReturnValue([42]);
    vi.spyOn(MeshNode.prototype, 'openPeers', 'get').mockReturnValue(1);
    const sent = vi.spyOn(MeshNode.prototype, 'sendRepair').mockReturnValue(true);
    const fetched = vi.fn();
    vi.stubGlobal('fetch', fetched);
    const s10 = segment(10, 40_000);
    const t = await connected('segment', [s10.a]);
    expect(t.session.expectsSegment(10)).toBe(true);
    // The loader's startup wait (300 ms) is shorter than the origin fill's lead (800 ms): the
    // neighbour is asked at once and given all of it, and nothing is fetched by range.
    let result: Uint8Array | null | undefined;
    void t.session
      .waitForSegment(10, t.clock.now() + 300, undefined, `${URL_BASE}seg10.ts`)
      .then((bytes) => (result = bytes));
    await settle();
    expect(sent.mock.calls.map(([to, message]) => [to, message.type])).toEqual([
      [42, MessageType.RepairRequest],
    ]);
    expect(result).toBeUndefined();
    // The store's wait runs on real timers: the 300 ms end, then null for the loader's origin fetch.
    const waitStartedMs = performance.now();
    await vi.waitFor(() => {
      expect(result).toBeNull();
    });
    expect(performance.now() - waitStartedMs).toBeGreaterThan(200);
    expect(fetched).not.toHaveBeenCalled();
  });

  it('keeps a whole origin segment the player took before the welcome, once the store exists', async () => {
    const clock = new FakeClock();
    const factory = socketFactory(clock);
    const session = MeshSession.connect(
      { tracker: 'ws://127.0.0.1:9/ws', stream: 'live', packetRepair: 'segment' },
      { createSocket: factory.create, clock, trackerReconnect: false },
    );
    sessions.push(session);
    const s10 = segment(10, 40_000);
    const s11 = segment(11, 40_000);
    session.keepOriginSegment(10, s10.bytes.slice());
    const tampered = s11.bytes.slice();
    tampered[0] = (tampered[0] ?? 0) ^ 1;
    session.keepOriginSegment(11, tampered);
    const socket = factory.sockets.at(-1);
    if (socket === undefined) throw new Error('no socket');
    socket.accept();
    socket.receive(welcome(7, null, false, { announcements: [s10.a, s11.a] }));
    await session.ready;
    await vi.waitFor(() => {
      expect(session.stats().segmentsKeptFromOrigin).toBe(1);
    });
    // Only the one matching its signed hash: what a neighbour catching up is served.
    expect(await session.waitForSegment(10, clock.now() + 1000)).toEqual(s10.bytes);
    expect(session.stats().segmentsKeptFromOrigin).toBe(1);
  });

  it('segment: the engine gets no playout clock', async () => {
    const playout = vi.spyOn(MeshNode.prototype, 'playout');
    const s10 = segment(10, 40_000);
    const t = await connected('segment', [s10.a]);
    void t.session.waitForSegment(10, 12_000, undefined, `${URL_BASE}seg10.ts`);
    await settle();
    expect(playout).not.toHaveBeenCalled();
    expect(t.session.stats().packetRepair).toBe('segment');
  });

  it("engine: fetchOrigin's packets come back through the engine into the store, counted as origin repair", async () => {
    const s10 = segment(10, 40_000);
    const requests: string[] = [];
    vi.stubGlobal('fetch', (url: string, init: RequestInit) => {
      const range = new Headers(init.headers).get('Range') ?? '';
      requests.push(`${url} ${range}`);
      const m = /^bytes=(\d+)-(\d+)$/.exec(range);
      if (url !== `${URL_BASE}seg10.ts` || m === null)
        return Promise.resolve(new Response(null, { status: 404 }));
      const body = s10.bytes.slice(Number(m[1]), Number(m[2]) + 1);
      // The origin damages packet 5: it must be refused.
      const fifth = packetRange(planPackets(40_000, D), 40_000, 5)[0] - Number(m[1]);
      if (fifth >= 0 && fifth < body.length) body[fifth] = (body[fifth] ?? 0) ^ 0xff;
      return Promise.resolve(new Response(body, { status: 206 }));
    });
    // Announced after joining: a segment the engine repairs (one from before is catch-up's).
    const t = await connected('engine');
    t.socket.receive({ type: 'announce', announcement: s10.a });
    await settle();
    const node = nodeOf(t.session);
    const options = (
      node as unknown as { options: { fetchOrigin?: (s: number, q: readonly number[]) => void } }
    ).options;
    expect(options.fetchOrigin).toBeTypeOf('function');
    const waiting = t.session.waitForSegment(10, 12_000, undefined, `${URL_BASE}seg10.ts`);
    // As the engine's repair would ask in one step: every slice's packet of segment 10.
    for (let index = 0; index < s10.a.packets; index++) {
      const place = packetPlace(s10.a.firstPacket, index, D);
      options.fetchOrigin?.(place.slice, [place.seq]);
    }
    await settleUntil(() => {
      const counted = t.session.stats();
      return counted.repairPacketsFromOrigin + counted.repairOriginRefused >= s10.a.packets;
    });
    // Adjacent packets of one segment, asked in one engine step: one range request.
    expect(requests).toEqual([`${URL_BASE}seg10.ts bytes=0-39999`]);
    const stats = t.session.stats();
    expect(stats).toMatchObject({
      packetRepair: 'engine',
      repairPacketsFromOrigin: s10.a.packets - 1,
      repairOriginRefused: 1,
      repairPacketsFromPeers: 0,
    });
    expect(stats.repairOriginBytes).toBe(40_000);
    expect(stats.bytesFromOrigin).toBe(40_000);
    // Origin bytes are not the mesh's.
    expect(stats.bytesFromMesh).toBe(0);
    // The damaged packet is still missing: the segment is not released.
    expect(await Promise.race([waiting, settle().then(() => 'pending')])).toBe('pending');
    // The origin mends its copy; the engine asks again.
    vi.stubGlobal('fetch', (_url: string, init: RequestInit) => {
      const m = /^bytes=(\d+)-(\d+)$/.exec(new Headers(init.headers).get('Range') ?? '');
      if (m === null) return Promise.resolve(new Response(null, { status: 416 }));
      return Promise.resolve(new Response(s10.bytes.slice(Number(m[1]), Number(m[2]) + 1), { status: 206 }));
    });
    const five = packetPlace(s10.a.firstPacket, 5, D);
    options.fetchOrigin?.(five.slice, [five.seq]);
    await settle();
    const bytes = await waiting;
    expect(bytes).toEqual(s10.bytes);
    expect(t.session.stats().repairPacketsFromOrigin).toBe(s10.a.packets);
  });

  it('segment: a segment the trees brought in part is completed by byte ranges, counted as segment repair', async () => {
    const s12 = segment(12, 40_000);
    const requests: string[] = [];
    vi.stubGlobal('fetch', (url: string, init: RequestInit) => {
      const m = /^bytes=(\d+)-(\d+)$/.exec(new Headers(init.headers).get('Range') ?? '');
      requests.push(`${url} ${m?.[0] ?? ''}`);
      if (m === null) return Promise.resolve(new Response(null, { status: 416 }));
      return Promise.resolve(new Response(s12.bytes.slice(Number(m[1]), Number(m[2]) + 1), { status: 206 }));
    });
    const t = await connected('segment');
    t.socket.receive({ type: 'announce', announcement: s12.a });
    await settle();
    const node = nodeOf(t.session);
    const deliver = (node as unknown as { options: { deliver: (...args: unknown[]) => void } }).options
      .deliver;
    // The trees bring every packet but 6 and 7.
    const plan = planPackets(40_000, D);
    for (let index = 0; index < s12.a.packets; index++) {
      if (index === 6 || index === 7) continue;
      const [start, end] = packetRange(plan, 40_000, index);
      const place = packetPlace(s12.a.firstPacket, index, D);
      const payload = encodeMediaPacket({
        segment: 12,
        index,
        count: s12.a.packets,
        bytes: s12.bytes.subarray(start, end),
      });
      deliver(place.slice, place.seq, payload, 2, 1, 'tree');
    }
    // No neighbour to ask: straight to the origin's byte ranges (the budget's last 800 ms).
    const bytes = await t.session.waitForSegment(12, 10_000 + 800, undefined, `${URL_BASE}seg12.ts`);
    expect(bytes).toEqual(s12.bytes);
    const [from6] = packetRange(plan, 40_000, 6);
    const [, to7] = packetRange(plan, 40_000, 7);
    expect(requests).toEqual([`${URL_BASE}seg12.ts bytes=${from6}-${to7 - 1}`]);
    expect(t.session.stats()).toMatchObject({
      packetRepair: 'segment',
      repairPacketsFromOrigin: 2,
      repairPacketsFromPeers: 0,
      repairOriginBytes: to7 - from6,
      repairOriginRefused: 0,
      segmentsCompletedFromOrigin: 1,
    });
  });
});
