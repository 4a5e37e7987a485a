// TrackerClient's reconnection, driven by hand: a fake clock and fake sockets whose server side the
// test plays (no network, no sleeping).
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RECONNECT_POLICY,
  MeshError,
  TrackerClient,
  type TrackerClientOptions,
  type TrackerDisconnect,
  type TrackerReconnect,
} from '@chunkycast/sdk/core';
import { MAX_QUEUED_SIGNALS, MAX_QUEUED_SIGNAL_AGE_MS, reconnectDelayMs } from '../src/tracker-client.js';
import type { ClientMessage } from '@chunkycast/wire';
import { FakeClock, socketFactory, welcome, type FakeSocket } from './tracker-fakes.js';

function setup(options: Partial<TrackerClientOptions> = {}, random = 0.5) {
  const clock = new FakeClock();
  const factory = socketFactory(clock);
  const client = new TrackerClient({
    url: 'ws://127.0.0.1:9/ws',
    stream: 'live',
    role: 'viewer',
    createSocket: factory.create,
    clock,
    random: () => random,
    ...options,
  });
  const events = {
    disconnected: [] as TrackerDisconnect[],
    reconnected: [] as TrackerReconnect[],
    fatal: [] as MeshError[],
    messages: [] as string[],
  };
  client.onDisconnected = (d) => events.disconnected.push(d);
  client.onReconnected = (r) => events.reconnected.push(r);
  client.onFatal = (e) => events.fatal.push(e);
  client.onMessage = (m) => events.messages.push(m.type);
  const last = (): FakeSocket => {
    const socket = factory.sockets.at(-1);
    if (socket === undefined) throw new Error('no socket yet');
    return socket;
  };
  /** Joins with the first socket: welcome with `peerId` and ticket `resume`. */
  const joinAs = async (peerId: number, resume: string | null): Promise<void> => {
    const joined = client.join();
    last().accept();
    last().receive(welcome(peerId, resume, false));
    await joined;
  };
  return { clock, client, sockets: factory.sockets, events, last, joinAs };
}

const signal = (to: number, n: number): ClientMessage => ({
  type: 'signal',
  to,
  data: { type: 'offer', sdp: `v=0 offer ${n}`, link: n },
});

describe('reconnectDelayMs', () => {
  const policy = DEFAULT_RECONNECT_POLICY;

  it('grows ×2 from 200 ms, capped at 2 s, each delay in the upper half of its step', () => {
    const low = [1, 2, 3, 4, 5, 6, 7].map((a) => reconnectDelayMs(a, 0, policy, 0));
    const high = [1, 2, 3, 4, 5, 6, 7].map((a) => reconnectDelayMs(a, 0, policy, 0.999_999));
    expect(low).toEqual([100, 200, 400, 800, 1000, 1000, 1000]);
    expect(high).toEqual([200, 400, 800, 1600, 2000, 2000, 2000]);
  });

  it('reaches a tracker that is back within 3 s no later than 5 s after the loss', () => {
    // Latest possible attempt times: each delay at the top of its step.
    let at = 0;
    const attempts: number[] = [];
    for (let a = 1; a <= 5; a++) attempts.push((at += reconnectDelayMs(a, at, policy, 0.999_999)));
    expect(attempts).toEqual([200, 600, 1400, 3000, 5000]);
    // Whenever the tracker is back in (0, 3000], the next attempt after that is at most 5000.
    for (let backAt = 1; backAt <= 3000; backAt += 7) {
      const next = attempts.find((t) => t >= backAt);
      expect(next).toBeLessThanOrEqual(5000);
    }
  });

  it('after a long outage the cap rises to spare the tracker', () => {
    expect(reconnectDelayMs(20, policy.longOutageAfterMs - 1, policy, 0.999_999)).toBe(2000);
    expect(reconnectDelayMs(20, policy.longOutageAfterMs, policy, 0.999_999)).toBe(15_000);
    expect(reconnectDelayMs(20, policy.longOutageAfterMs, policy, 0)).toBe(7500);
  });

  it('stays finite for absurd attempt numbers and clamps the random draw', () => {
    expect(reconnectDelayMs(10_000, 0, policy, 0.5)).toBe(1500);
    expect(reconnectDelayMs(1, 0, policy, 7)).toBe(200);
    expect(reconnectDelayMs(1, 0, policy, -1)).toBe(100);
  });
});

describe('TrackerClient reconnection', () => {
  it('follows the backoff schedule after a 1012 close and joins again with the resume ticket', async () => {
    const t = setup({ token: 'viewer-token' });
    await t.joinAs(42, 'ticket-1');
    expect(t.client.state).toBe('connected');
    expect(t.sockets[0]?.messages('join')).toEqual([
      { type: 'join', stream: 'live', role: 'viewer', token: 'viewer-token' },
    ]);

    t.sockets[0]?.drop(1012, 'service restart');
    expect(t.client.state).toBe('reconnecting');
    expect(t.events.disconnected).toEqual([{ code: 1012, reason: 'service restart' }]);
    // random 0.5: delays 150, 300, 600 ms
    t.clock.advance(149);
    expect(t.sockets).toHaveLength(1);
    t.clock.advance(1);
    expect(t.sockets).toHaveLength(2);
    expect(t.sockets[1]?.createdAt).toBe(150);
    t.last().refuse(); // tracker still down
    t.clock.advance(299);
    expect(t.sockets).toHaveLength(2);
    t.clock.advance(1);
    expect(t.sockets[2]?.createdAt).toBe(450);
    t.last().refuse();
    t.clock.advance(600);
    expect(t.sockets[3]?.createdAt).toBe(1050);
    expect(t.client.stats().attempts).toBe(3);

    t.last().accept();
    expect(t.last().messages('join')).toEqual([
      { type: 'join', stream: 'live', role: 'viewer', token: 'viewer-token', resume: 'ticket-1' },
    ]);
    t.clock.advance(30);
    t.last().receive(welcome(42, 'ticket-2', true));
    expect(t.client.state).toBe('connected');
    expect(t.events.reconnected).toEqual([
      { peerIdKept: true, resumed: true, previousPeerId: 42, peerId: 42, outageMs: 1080, attempts: 3 },
    ]);
    // The welcome goes to onMessage too (a session applies its announcements).
    expect(t.events.messages).toEqual(['welcome']);
    const stats = t.client.stats();
    expect(stats).toMatchObject({
      reconnects: 1,
      resumedReconnects: 1,
      peerIdChanges: 0,
      disconnectedMs: 1080,
      lastOutageMs: 1080,
      attempts: 0,
    });

    // The next loss presents the newest ticket.
    t.clock.advance(10_000);
    t.last().drop(1006);
    t.clock.advance(150);
    t.last().accept();
    expect(t.last().messages('join')[0]?.resume).toBe('ticket-2');
    expect(t.client.stats().disconnectedMs).toBe(1080 + 150);
  });

  it('drops the ticket when a welcome carries none, and sends the broadcaster key every time', async () => {
    const t = setup({ role: 'source', key: 'broadcaster-key' });
    await t.joinAs(7, null);
    t.last().drop(1001, 'going away');
    t.clock.advance(150);
    t.last().accept();
    expect(t.last().messages('join')).toEqual([
      { type: 'join', stream: 'live', role: 'source', key: 'broadcaster-key' },
    ]);
  });

  it('replaced by another connection holding our ticket (4000): comes back as a new peer, no fight', async () => {
    const t = setup();
    await t.joinAs(5, 'ours');
    t.last().drop(4000, 'replaced by a resumed session');
    t.clock.advance(150);
    t.last().accept();
    expect(t.last().messages('join')[0]?.resume).toBeUndefined();
  });

  it('a connection that dies young continues the backoff; one that lived resets it', async () => {
    const t = setup();
    await t.joinAs(5, 'a');
    t.clock.advance(DEFAULT_RECONNECT_POLICY.stableAfterMs);
    t.last().drop(1012);
    t.clock.advance(150); // attempt 1
    t.last().accept();
    t.last().receive(welcome(5, 'b', true));
    t.clock.advance(100); // joined only 100 ms: the tracker drops us again
    t.last().drop(1006);
    t.clock.advance(299);
    expect(t.sockets).toHaveLength(2);
    t.clock.advance(1); // attempt 2: 300 ms, not 150
    expect(t.sockets).toHaveLength(3);
    t.last().accept();
    t.last().receive(welcome(5, 'c', true));
    t.clock.advance(DEFAULT_RECONNECT_POLICY.stableAfterMs);
    t.last().drop(1012);
    t.clock.advance(150); // reset: 150 ms again
    expect(t.sockets).toHaveLength(4);
  });

  it('abandons an attempt that opens but gets no welcome in time', async () => {
    const t = setup();
    await t.joinAs(5, 'a');
    t.last().drop(1012);
    t.clock.advance(150);
    t.last().accept(); // a tracker that accepts and never answers
    t.clock.advance(DEFAULT_RECONNECT_POLICY.attemptTimeoutMs - 1);
    expect(t.sockets).toHaveLength(2);
    t.clock.advance(1);
    expect(t.sockets[1]?.closedByClient).not.toBeNull();
    t.clock.advance(300);
    expect(t.sockets).toHaveLength(3);
  });

  it('stops for good on a refusal no retry can fix, and says why', async () => {
    const t = setup({ token: 'expired' });
    await t.joinAs(5, 'a');
    t.last().drop(1012);
    t.clock.advance(150);
    t.last().accept();
    t.last().receive({ type: 'error', code: 'badToken', message: 'token expired' });
    expect(t.client.state).toBe('failed');
    expect(t.events.fatal).toHaveLength(1);
    expect(t.events.fatal[0]?.code).toBe('trackerRefused');
    expect(t.events.fatal[0]?.trackerCode).toBe('badToken');
    expect(t.events.fatal[0]?.message).toContain('token expired');
    expect(t.last().closedByClient).not.toBeNull();
    t.clock.advance(120_000);
    expect(t.sockets).toHaveLength(2);
    expect(t.clock.pendingTimers).toBe(0);
    // Nothing is queued for a tracker we will not reach again.
    t.client.send(signal(9, 1));
    expect(t.client.stats().queuedMessages).toBe(0);
  });

  it.each(['badKey', 'originNotAllowed'] as const)('%s is final too', async (code) => {
    const t = setup();
    await t.joinAs(5, 'a');
    t.last().drop(1012);
    t.clock.advance(150);
    t.last().accept();
    t.last().receive({ type: 'error', code, message: 'no' });
    expect(t.client.state).toBe('failed');
    expect(t.events.fatal[0]?.trackerCode).toBe(code);
  });

  it('keeps trying after transient refusals (rate limit, too many connections, shutting down)', async () => {
    const t = setup();
    await t.joinAs(5, 'a');
    t.last().drop(1012);
    t.clock.advance(150);
    for (const code of ['rateLimited', 'tooManyConnections', 'shuttingDown'] as const) {
      t.last().accept();
      t.last().receive({ type: 'error', code, message: 'later' });
      expect(t.client.state).toBe('reconnecting');
      t.clock.advance(2000);
    }
    expect(t.sockets).toHaveLength(5);
    expect(t.events.fatal).toHaveLength(0);
  });

  it('a refusal that may be about the ticket is retried once without it', async () => {
    const t = setup();
    await t.joinAs(5, 'ticket-from-another-tracker');
    t.last().drop(1012);
    t.clock.advance(150);
    t.last().accept();
    t.last().receive({ type: 'error', code: 'invalidField', message: 'bad resume' });
    expect(t.client.state).toBe('reconnecting');
    t.clock.advance(300);
    t.last().accept();
    expect(t.last().messages('join')[0]?.resume).toBeUndefined();
    t.last().receive({ type: 'error', code: 'invalidField', message: 'still bad' });
    expect(t.client.state).toBe('failed');
  });

  it('the first join is not retried: it rejects, and the caller decides', async () => {
    const t = setup();
    const joined = t.client.join();
    t.last().refuse();
    await expect(joined).rejects.toBeInstanceOf(MeshError);
    expect(t.client.state).toBe('failed');
    t.clock.advance(60_000);
    expect(t.sockets).toHaveLength(1);
  });

  it('our own close() neither reconnects nor counts as an outage', async () => {
    const t = setup();
    await t.joinAs(5, 'a');
    t.clock.advance(1000);
    t.client.close();
    expect(t.sockets[0]?.messages('leave')).toHaveLength(1);
    expect(t.sockets[0]?.closedByClient).toEqual({ code: 1000, reason: 'leaving' });
    t.clock.advance(60_000);
    expect(t.sockets).toHaveLength(1);
    expect(t.client.state).toBe('closed');
    expect(t.events.disconnected).toHaveLength(0);
    expect(t.client.stats().disconnectedMs).toBe(0);
  });

  it('close() while reconnecting cancels the pending attempt', async () => {
    const t = setup();
    await t.joinAs(5, 'a');
    t.last().drop(1012);
    t.clock.advance(100);
    t.client.close();
    t.clock.advance(60_000);
    expect(t.sockets).toHaveLength(1);
    expect(t.client.stats().disconnectedMs).toBe(100);
  });

  it('without a policy a loss is final', async () => {
    const t = setup({ reconnect: false });
    await t.joinAs(5, 'a');
    t.last().drop(1012);
    expect(t.client.state).toBe('failed');
    expect(t.events.fatal[0]?.code).toBe('tracker');
    t.clock.advance(60_000);
    expect(t.sockets).toHaveLength(1);
  });
});

describe('TrackerClient messages sent while the tracker is away', () => {
  it('queues signals up to the bound (oldest dropped, counted) and sends them after the welcome', async () => {
    const t = setup();
    await t.joinAs(5, 'a');
    t.last().drop(1012);
    const total = MAX_QUEUED_SIGNALS + 6;
    for (let n = 0; n < total; n++) t.client.send(signal(100 + n, n));
    t.client.send({ type: 'bootstrap', count: 4 });
    t.client.send({ type: 'bootstrap', count: 12 });
    t.client.send({ type: 'bootstrap', count: 8 });
    t.client.send({
      type: 'report',
      report: {
        parents: [],
        children: [],
        meshBytes: 0,
        originBytes: 0,
        uploadBytes: 0,
        stalls: 0,
        playing: true,
      },
    });
    expect(t.client.stats()).toMatchObject({ queuedMessages: MAX_QUEUED_SIGNALS + 1, signalsDropped: 6 });
    t.clock.advance(150);
    t.last().accept();
    t.last().receive(welcome(5, 'b', true));
    const sent = t.last().sent;
    expect(sent[0]?.type).toBe('join');
    // The latest bootstrap need (the largest count asked), then the signals in order; no report.
    expect(sent[1]).toEqual({ type: 'bootstrap', count: 12 });
    const signals = t.last().messages('signal');
    expect(signals).toHaveLength(MAX_QUEUED_SIGNALS);
    expect(signals.map((m) => m.to)).toEqual(Array.from({ length: MAX_QUEUED_SIGNALS }, (_, i) => 106 + i));
    expect(t.last().messages('report')).toHaveLength(0);
    expect(t.client.stats()).toMatchObject({ queuedMessages: 0, signalsDropped: 6 });
  });

  it('drops signals too old to complete a link', async () => {
    const t = setup();
    await t.joinAs(5, 'a');
    t.last().drop(1012);
    t.client.send(signal(100, 1));
    t.clock.advance(MAX_QUEUED_SIGNAL_AGE_MS - 500);
    t.client.send(signal(101, 2));
    // Keep failing until the first signal is stale.
    for (let i = 0; i < 20 && t.clock.now() <= MAX_QUEUED_SIGNAL_AGE_MS; i++) {
      t.clock.advance(2000);
      if (t.last().readyState === 0) t.last().refuse();
    }
    t.clock.advance(2000);
    t.last().accept();
    t.last().receive(welcome(5, 'b', true));
    expect(
      t
        .last()
        .messages('signal')
        .map((m) => m.to),
    ).toEqual([101]);
    expect(t.client.stats().signalsDropped).toBe(1);
  });

  it('queues announcements (bounded) and sends them first after the welcome', async () => {
    const t = setup({ role: 'source', key: 'k' });
    await t.joinAs(1, 'a');
    t.last().drop(1012);
    const announce = (sequence: number): ClientMessage => ({
      type: 'announce',
      announcement: {
        stream: 'live',
        sequence,
        uri: `seg${sequence}.ts`,
        bytes: 1,
        packets: 1,
        firstPacket: 0,
        sha256: '0'.repeat(64),
        packetHashes: '0'.repeat(32),
        durationMs: 2000,
        publishedAtMs: 1,
        signature: 'AAAA',
      },
    });
    t.client.send(signal(9, 1));
    for (let s = 0; s < 20; s++) t.client.send(announce(s));
    t.clock.advance(150);
    t.last().accept();
    t.last().receive(welcome(1, 'b', true));
    const types = t.last().sent.map((m) => m.type);
    expect(types).toEqual(['join', ...new Array<string>(16).fill('announce'), 'signal']);
    expect(
      t
        .last()
        .messages('announce')
        .map((m) => m.announcement.sequence),
    ).toEqual(Array.from({ length: 16 }, (_, i) => 4 + i));
    expect(t.client.stats().announcementsDropped).toBe(4);
  });

  it('a welcome with another peer id drops the old identity’s signalling but keeps announcements', async () => {
    const t = setup();
    await t.joinAs(5, 'a');
    t.last().drop(1012);
    for (let n = 0; n < 3; n++) t.client.send(signal(100 + n, n));
    t.client.send({ type: 'bootstrap', count: 4 });
    t.clock.advance(150);
    t.last().accept();
    t.last().receive(welcome(77, 'b', false));
    expect(t.events.reconnected[0]).toMatchObject({
      peerIdKept: false,
      resumed: false,
      previousPeerId: 5,
      peerId: 77,
    });
    expect(t.last().sent.map((m) => m.type)).toEqual(['join']);
    expect(t.client.stats()).toMatchObject({ peerIdChanges: 1, signalsDropped: 3, peerId: 77 });
  });

  it('sends at once while connected', async () => {
    const t = setup();
    await t.joinAs(5, 'a');
    t.client.send(signal(9, 1));
    expect(t.last().messages('signal')).toHaveLength(1);
  });
});

describe('TrackerClient ICE servers', () => {
  const iceOf = (n: number) => ({
    servers: [{ urls: ['turn:127.0.0.1:3478'], username: `${n}:5`, credential: `c${n}` }],
    expiresAtMs: n * 1000,
  });

  it('keeps the latest: the welcome’s, then each `ice` frame’s (also passed on), then a rejoin’s', async () => {
    const t = setup();
    expect(t.client.ice).toBeNull();
    const joined = t.client.join();
    t.last().accept();
    t.last().receive(welcome(5, 'a', false, { ice: iceOf(1) }));
    await joined;
    expect(t.client.ice).toEqual(iceOf(1));
    t.last().receive({ type: 'ice', ice: iceOf(2) });
    expect(t.client.ice).toEqual(iceOf(2));
    expect(t.events.messages).toEqual(['ice']);
    // A frame the decoder refuses changes nothing.
    t.last().onmessage?.({
      data: JSON.stringify({ type: 'ice', ice: { servers: [{ urls: ['http://x'] }] } }),
    });
    expect(t.client.ice).toEqual(iceOf(2));
    // Kept through an outage; the rejoin's welcome brings fresh ones.
    t.last().drop(1012);
    expect(t.client.ice).toEqual(iceOf(2));
    t.clock.advance(DEFAULT_RECONNECT_POLICY.initialDelayMs);
    t.last().accept();
    t.last().receive(welcome(5, 'b', true, { ice: iceOf(3) }));
    expect(t.client.ice).toEqual(iceOf(3));
  });
});
