/**
 * What the tracker refuses: foreign page origins, /debug/* without the broadcaster key, viewers
 * without a valid join token, and clients beyond the message rate or connection limits. In each
 * case the offender gets a clear answer and is counted, and everyone else carries on.
 */
import { describe, expect, it } from 'vitest';
import { makeJoinToken } from '@chunkycast/tracker';
import { AUTH, cleanUpAfterEach, Client, connect, eventually, KEY, start, within } from './ws-client.js';

cleanUpAfterEach();

const JOIN_SECRET = 'join-secret-for-tests';
const OFFER = { type: 'offer', sdp: 'v=0\r\n' } as const;

describe('origin allow-list', () => {
  it('admits listed origins and clients without an Origin header, refuses others with 1008', async () => {
    const tracker = await start({ allowedOrigins: ['https://good.example', 'http://127.0.0.1:8080'] });
    const page = await connect(tracker, { origin: 'https://good.example' });
    expect((await page.join('s')).peerId).toBeGreaterThan(0);
    const tool = await connect(tracker);
    expect((await tool.join('s')).peerId).toBeGreaterThan(0);

    const foreign = await connect(tracker, { origin: 'https://evil.example' });
    const refusal = await foreign.error('originNotAllowed');
    expect(refusal.message).toContain('https://evil.example');
    expect(await within(foreign.closed, 'foreign page closed')).toEqual({
      code: 1008,
      reason: 'originNotAllowed',
    });
    // The literal "null" origin (sandboxed frames, file://) is not on the list either.
    const sandboxed = await connect(tracker, { origin: 'null' });
    await sandboxed.error('originNotAllowed');

    const m = tracker.metrics();
    expect(m.errors.originNotAllowed).toBe(2);
    expect(m.disconnects.originNotAllowed).toBe(2);
    expect(await page.bootstrap()).toHaveLength(1);
    await eventually(() => tracker.metrics().sessions === 2, 'refused sockets are not sessions');
  });
});

describe('/debug/* needs the broadcaster key; /metrics and /healthz are open', () => {
  it('answers 401 without the right bearer key and 200 with it', async () => {
    const tracker = await start();
    const viewer = await connect(tracker);
    await viewer.join('dbg');
    for (const path of [
      '/debug/swarms',
      '/debug/swarm/dbg',
      '/debug/origin',
      '/debug/metrics',
      '/debug/nothing',
    ]) {
      const none = await fetch(tracker.url + path);
      expect(none.status, path).toBe(401);
      expect(none.headers.get('www-authenticate')).toContain('Bearer');
      expect(((await none.json()) as { message: string }).message).toContain('Authorization: Bearer');
      const wrong = await fetch(tracker.url + path, { headers: { Authorization: `Bearer ${KEY}x` } });
      expect(wrong.status, path).toBe(401);
      await wrong.body?.cancel();
    }
    const reset = await fetch(`${tracker.url}/debug/origin/reset`, { method: 'POST' });
    expect(reset.status).toBe(401);
    await reset.body?.cancel();
    expect(tracker.metrics().debugAuthFailures).toBe(11);

    const swarms = await fetch(`${tracker.url}/debug/swarms`, { headers: AUTH });
    expect(swarms.status).toBe(200);
    expect(((await swarms.json()) as { stream: string }[]).map((s) => s.stream)).toEqual(['dbg']);
    const lowerCase = await fetch(`${tracker.url}/debug/swarm/dbg`, {
      headers: { authorization: `bearer ${KEY}` },
    });
    expect(lowerCase.status).toBe(200);
    await lowerCase.body?.cancel();
    expect((await fetch(`${tracker.url}/debug/nothing`, { headers: AUTH })).status).toBe(404);

    const health = await fetch(`${tracker.url}/healthz`);
    expect(health.status).toBe(200);
    await health.body?.cancel();
    const metrics = await fetch(`${tracker.url}/metrics`);
    expect(metrics.status).toBe(200);
    await metrics.body?.cancel();
    // A page on another origin may send the header: the preflight allows it.
    const preflight = await fetch(`${tracker.url}/debug/swarms`, {
      method: 'OPTIONS',
      headers: { 'Access-Control-Request-Headers': 'authorization', Origin: 'https://console.example' },
    });
    expect(preflight.headers.get('access-control-allow-headers')).toContain('Authorization');
  });
});

describe('viewer join tokens', () => {
  it('are required of viewers when a join secret is set, never of the source', async () => {
    let nowMs = 1_800_000_000_000;
    const tracker = await start({ joinSecret: JOIN_SECRET, now: () => nowMs });
    const viewer = await connect(tracker);
    viewer.send(viewer.joinFrame('live'));
    await viewer.error('badToken');
    viewer.send(
      viewer.joinFrame('live', 'viewer', { token: makeJoinToken(JOIN_SECRET, 'other', nowMs + 60_000) }),
    );
    await viewer.error('badToken');
    viewer.send(
      viewer.joinFrame('live', 'viewer', {
        token: makeJoinToken('not-the-join-secret', 'live', nowMs + 60_000),
      }),
    );
    await viewer.error('badToken');
    const token = makeJoinToken(JOIN_SECRET, 'live', nowMs + 60_000);
    nowMs += 60_000;
    viewer.send(viewer.joinFrame('live', 'viewer', { token }));
    expect((await viewer.error('badToken')).message).toContain('expired');
    nowMs -= 1_000;
    expect((await viewer.join('live', 'viewer', { token })).peerId).toBeGreaterThan(0);

    const source = await connect(tracker);
    expect((await source.join('live', 'source', KEY)).peerId).toBe(tracker.sourceIdOf('live'));
    expect(tracker.metrics().errors.badToken).toBe(4);
    expect(tracker.metrics().joins).toBe(2);
  });

  it('are not asked for when no join secret is set', async () => {
    const tracker = await start();
    const viewer = await connect(tracker);
    expect((await viewer.join('live')).peerId).toBeGreaterThan(0);
  });
});

describe('message rate', () => {
  it('drops frames beyond the rate with rateLimited, disconnects a persistent sender, spares others', async () => {
    // A frozen clock: no token comes back during the test, so the counts are exact.
    const frozenMs = 1_800_000_000_000;
    const tracker = await start({ maxMessagesPerSecond: 1, messageBurst: 5, now: () => frozenMs });
    const bystander = await connect(tracker);
    const { peerId: bystanderId } = await bystander.join('s');
    const talker = await connect(tracker);
    await talker.join('s');
    const culprit = await connect(tracker);
    await culprit.join('s'); // 1 of its 5

    for (let i = 0; i < 4; i++) expect(await culprit.bootstrap()).toHaveLength(2);
    for (let i = 0; i < 5; i++) culprit.send({ type: 'bootstrap', count: 1 });
    for (let i = 0; i < 5; i++)
      expect((await culprit.error('rateLimited')).message).toContain('1 frames per second');
    // The 6th frame over the rate (more than a whole burst) ends the connection.
    culprit.send({ type: 'bootstrap', count: 1 });
    culprit.send({ type: 'bootstrap', count: 1 });
    expect(await within(culprit.closed, 'culprit disconnected')).toEqual({
      code: 1008,
      reason: 'message rate limit exceeded',
    });
    const m = tracker.metrics();
    expect(m.limitHits.messageRate).toBe(6);
    expect(m.errors.rateLimited).toBe(5);
    expect(m.disconnects.rateLimited).toBe(1);

    // Nobody else noticed: signals between the others are still relayed.
    talker.send({ type: 'signal', to: bystanderId, data: OFFER });
    expect((await bystander.next('signal')).data).toEqual(OFFER);
    expect(await bystander.bootstrap()).toHaveLength(1);
  });

  it('exempts the true source, which holds the broadcaster key', async () => {
    const frozenMs = 1_800_000_000_000;
    const tracker = await start({ maxMessagesPerSecond: 1, messageBurst: 3, now: () => frozenMs });
    const source = await connect(tracker);
    await source.join('s', 'source', KEY);
    for (let i = 0; i < 10; i++) expect(await source.bootstrap()).toEqual([]);
    expect(tracker.metrics().limitHits.messageRate).toBe(0);
  });

  it('is off with 0', async () => {
    const tracker = await start({ maxMessagesPerSecond: 0 });
    const viewer = await connect(tracker);
    await viewer.join('s');
    for (let i = 0; i < 300; i++) viewer.send({ type: 'bootstrap', count: 1 });
    for (let i = 0; i < 300; i++) await viewer.next('peers');
    expect(tracker.metrics().limitHits.messageRate).toBe(0);
  });
});

describe('connection limits', () => {
  it('refuses connections beyond the per-address limit with tooManyConnections, then 1008', async () => {
    const tracker = await start({ maxConnectionsPerAddress: 3 });
    const admitted: Client[] = [];
    for (let i = 0; i < 3; i++) {
      const c = await connect(tracker);
      await c.join('s');
      admitted.push(c);
    }
    const extra = await connect(tracker);
    // Frames a refused socket manages to send are never handled.
    extra.send(extra.joinFrame('s'));
    expect((await extra.error('tooManyConnections')).message).toContain('3 connections from one address');
    expect(await within(extra.closed, 'extra refused')).toEqual({ code: 1008, reason: 'tooManyConnections' });
    expect(extra.pending()).toEqual([]);
    expect(tracker.metrics().joins).toBe(3);
    expect(tracker.metrics().limitHits.connectionsPerAddress).toBe(1);
    expect(tracker.metrics().disconnects.tooManyConnections).toBe(1);
    for (const c of admitted) expect(await c.bootstrap()).toHaveLength(2);

    // A slot freed is a slot for the next connection.
    admitted[0]?.close();
    await eventually(() => tracker.metrics().sessions === 2, 'the closed socket is gone');
    const next = await connect(tracker);
    expect((await next.join('s')).peerId).toBeGreaterThan(0);
  });

  it('refuses connections beyond the process limit', async () => {
    const tracker = await start({ maxConnections: 2, maxConnectionsPerAddress: 0 });
    const a = await connect(tracker);
    const b = await connect(tracker);
    const c = await connect(tracker);
    expect((await c.error('tooManyConnections')).message).toContain('full');
    expect((await within(c.closed, 'c refused')).code).toBe(1008);
    expect(tracker.metrics().limitHits.connections).toBe(1);
    expect((await a.join('s')).peerId).toBeGreaterThan(0);
    expect((await b.join('s')).peerId).toBeGreaterThan(0);
  });

  it('refuses a WebSocket upgrade on any path but /ws', async () => {
    const tracker = await start();
    await expect(Client.open(`${tracker.url.replace('http', 'ws')}/other`)).rejects.toThrow(/404/);
    expect(tracker.metrics().connectionsTotal).toBe(0);
  });
});
