// MeshSession across tracker losses, with a fake tracker socket and the tracker client's clock driven
// by hand: same id → the node carries on; another id → a new node; a final refusal → an error event.
import { afterEach, describe, expect, it } from 'vitest';
import { MeshError, MeshSession, type TrackerReconnect } from '@chunkycast/sdk/core';
import { INCOMPLETE_GIVE_UP_MS } from '../src/segments.js';
import type { SignedAnnouncement } from '@chunkycast/wire';
import { FakeClock, socketFactory, welcome, type FakeSocket } from './tracker-fakes.js';

const sessions: MeshSession[] = [];
afterEach(() => {
  for (const s of sessions.splice(0)) s.close();
});

function announcement(sequence: number, publishedAtMs: number): SignedAnnouncement {
  return {
    stream: 'live',
    sequence,
    uri: `seg${sequence}.ts`,
    bytes: 16,
    packets: 1,
    firstPacket: 0,
    sha256: '0'.repeat(64),
    packetHashes: '0'.repeat(32),
    durationMs: 2000,
    publishedAtMs,
    signature: 'AAAA',
  };
}

/** The session's current mesh node (private: compared by identity only). */
function nodeOf(session: MeshSession): unknown {
  return (session as unknown as { node: unknown }).node;
}

/** Lets the session's promise chains (join, seed, announce) run; no time passes. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

async function connected() {
  const clock = new FakeClock();
  const factory = socketFactory(clock);
  const session = MeshSession.connect(
    { tracker: 'ws://127.0.0.1:9/ws', stream: 'live', token: 'viewer-token' },
    { createSocket: factory.create, clock },
  );
  sessions.push(session);
  const events: { type: string; detail: unknown }[] = [];
  for (const type of ['trackerdisconnected', 'trackerreconnected', 'error'])
    session.addEventListener(type, (e) => events.push({ type, detail: (e as CustomEvent).detail }));
  const last = (): FakeSocket => {
    const s = factory.sockets.at(-1);
    if (s === undefined) throw new Error('no socket');
    return s;
  };
  last().accept();
  last().receive(welcome(7, 'ticket-1', false));
  await session.ready;
  return { clock, session, sockets: factory.sockets, events, last };
}

describe('MeshSession and a lost tracker', () => {
  it('same peer id: carries on with the same node, applies the announcements it missed', async () => {
    const t = await connected();
    const nodeBefore = nodeOf(t.session);
    expect(t.sockets[0]?.messages('join')[0]).toMatchObject({ token: 'viewer-token' });
    // The node started and asked for bootstrap peers.
    expect(t.sockets[0]?.messages('bootstrap').length).toBeGreaterThan(0);
    expect(t.session.stats()).toMatchObject({ peerId: 7, trackerState: 'connected', trackerReconnects: 0 });

    t.last().drop(1012, 'service restart');
    expect(t.session.stats().trackerState).toBe('reconnecting');
    expect(t.session.stats().trackerConnected).toBe(false);
    t.clock.advance(400);
    expect(t.session.stats().trackerDisconnectedMs).toBe(400);
    t.last().accept();
    expect(t.last().messages('join')[0]).toMatchObject({ token: 'viewer-token', resume: 'ticket-1' });
    expect(t.session.publishedAtMs(12)).toBeUndefined();
    t.last().receive(welcome(7, 'ticket-2', true, { announcements: [announcement(12, 1234)] }));
    await settle();
    const stats = t.session.stats();
    expect(stats).toMatchObject({
      peerId: 7,
      trackerState: 'connected',
      trackerConnected: true,
      trackerReconnects: 1,
      trackerDisconnectedMs: 400,
      trackerLastOutageMs: 400,
      peerIdChanges: 0,
    });
    // The announcement made while we were away is in the store now (packets held for it pass).
    expect(t.session.publishedAtMs(12)).toBe(1234);
    // Carrying on: the same node (with its engine and links). It may still ask the new socket for
    // peers: alone for the outage's 400 ms on the session's clock, its engine asks again.
    expect(nodeOf(t.session)).toBe(nodeBefore);
    const reconnected = t.events.filter((e) => e.type === 'trackerreconnected');
    expect(reconnected).toHaveLength(1);
    expect(reconnected[0]?.detail as TrackerReconnect).toMatchObject({
      peerIdKept: true,
      resumed: true,
      outageMs: 400,
    });
    expect(t.events.filter((e) => e.type === 'trackerdisconnected')).toHaveLength(1);
    expect(t.events.filter((e) => e.type === 'error')).toHaveLength(0);
  });

  it('another peer id: rebuilds the node under the new id, which bootstraps afresh', async () => {
    const t = await connected();
    const nodeBefore = nodeOf(t.session);
    t.last().drop(1006);
    t.clock.advance(200);
    t.last().accept();
    t.last().receive(welcome(99, null, false));
    await settle();
    expect(t.session.stats()).toMatchObject({ peerId: 99, peerIdChanges: 1, trackerReconnects: 1 });
    expect(nodeOf(t.session)).not.toBe(nodeBefore);
    // The new node's start asks the tracker for peers at once.
    expect(t.last().messages('bootstrap').length).toBeGreaterThan(0);
  });

  it('a changed source id rebuilds too (the engine is built around it)', async () => {
    const t = await connected();
    t.last().drop(1012);
    t.clock.advance(200);
    t.last().accept();
    t.last().receive(welcome(7, null, true, { sourceId: 2 }));
    await settle();
    expect(t.session.stats()).toMatchObject({ peerId: 7, sourceId: 2 });
    expect(t.last().messages('bootstrap').length).toBeGreaterThan(0);
  });

  it('a final refusal on reconnect fires a trackerRefused error and stops retrying', async () => {
    const t = await connected();
    t.last().drop(1012);
    t.clock.advance(200);
    t.last().accept();
    t.last().receive({ type: 'error', code: 'badToken', message: 'token expired' });
    const errors = t.events.filter((e) => e.type === 'error').map((e) => e.detail);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(MeshError);
    expect((errors[0] as MeshError).trackerCode).toBe('badToken');
    expect(t.session.stats().trackerState).toBe('failed');
    t.clock.advance(60_000);
    expect(t.sockets).toHaveLength(2);
  });
});

describe('the session’s clock', () => {
  it('is the injected one: a segment announced and not begun is given up when that clock says so', async () => {
    const t = await connected();
    t.last().receive({ type: 'announce', announcement: announcement(13, 1234) });
    await settle();
    expect(t.session.publishedAtMs(13)).toBe(1234);
    expect(t.session.expectsSegment(13)).toBe(true);
    // No real time passes: only the session's clock moves.
    t.clock.advance(INCOMPLETE_GIVE_UP_MS - 1);
    expect(t.session.expectsSegment(13)).toBe(true);
    t.clock.advance(2);
    expect(t.session.expectsSegment(13)).toBe(false);
  });
});
