// TURN end to end on 127.0.0.1 with a real coturn: the tracker hands out TURN REST API credentials,
// the true source and Node viewers (node-datachannel) use them with `iceTransportPolicy: 'relay'`,
// so every link goes through coturn; their stats and reports show relayed links and bytes, and
// /metrics sums them. Credentials coturn refuses leave a viewer with failed links only.
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import {
  MeshSession,
  bytesToBase64,
  type ConnectFailure,
  type MeshSessionOptions,
  type WebSocketLike,
} from '@chunkycast/sdk/core';
import { createTracker, startTrueSource, type Tracker, type TrueSource } from '../src/index.js';
import { FakePackager } from './fake-packager.js';
import { TurnServer } from './turn-server.js';

const STREAM = 'live';
const KEY = 'test-broadcaster-key';
const SECRET = 'turn-shared-secret-for-tests';
const nodeSocket = (url: string): WebSocketLike => new WebSocket(url) as unknown as WebSocketLike;
const LOOPBACK = { bindAddress: '127.0.0.1' };

let dir: string;
let turn: TurnServer;
let tracker: Tracker;
let source: TrueSource;
let packager: FakePackager;
const sessions: MeshSession[] = [];

beforeAll(async () => {
  turn = await TurnServer.start(SECRET);
  dir = mkdtempSync(join(tmpdir(), 'chunkycast-turn-live-'));
  const pair = await crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify']);
  tracker = await createTracker({
    host: '127.0.0.1',
    port: 0,
    broadcasterKey: KEY,
    publicKey: bytesToBase64(new Uint8Array(await crypto.subtle.exportKey('raw', pair.publicKey))),
    originDir: dir,
    turnUrls: [`turn:127.0.0.1:${turn.port}`],
    turnSecret: SECRET,
  });
  packager = new FakePackager(dir);
  packager.start();
  source = await startTrueSource({
    trackerUrl: tracker.wsUrl,
    stream: STREAM,
    broadcasterKey: KEY,
    playlistUrl: `${tracker.url}/live/live.m3u8`,
    signingKey: pair.privateKey,
    // Its ICE servers are the welcome's: only the transport policy is ours.
    rtcConfig: { ...LOOPBACK, iceTransportPolicy: 'relay' },
    log: () => undefined,
  });
}, 30_000);

afterAll(async () => {
  for (const s of sessions) s.close();
  await source.stop();
  packager.stop();
  await tracker.close();
  await turn.stop();
  rmSync(dir, { recursive: true, force: true });
});

function viewer(options: Partial<MeshSessionOptions> = {}): MeshSession {
  const session = MeshSession.connect(
    { tracker: tracker.wsUrl, stream: STREAM, iceTransportPolicy: 'relay', targetLoad: 24, ...options },
    { createSocket: nodeSocket, rtcConfig: LOOPBACK },
  );
  sessions.push(session);
  return session;
}

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}; coturn said:\n${turn.log.slice(-3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('TURN relaying with credentials from the tracker', () => {
  it('carries the mesh through coturn: every link relayed, relayed bytes counted and aggregated', async () => {
    const viewers = [viewer(), viewer(), viewer()];
    await Promise.all(viewers.map((v) => v.ready));
    await until(
      () => viewers.every((v) => v.stats().bytesFromMesh > 0 && v.stats().relayedBytes > 0),
      30_000,
      'media over relayed links at every viewer',
    );
    for (const v of viewers) {
      const stats = v.stats();
      expect(stats.peerLinks.length).toBeGreaterThan(0);
      // Relay-only links are relayed by definition (libjuice names its relayed end `host`).
      for (const link of stats.peerLinks.filter((l) => l.route !== null))
        expect(link.route, JSON.stringify(link)).toBe('relay');
      expect(stats.peersByRoute.host + stats.peersByRoute.srflx + stats.peersByRoute.prflx).toBe(0);
      expect(stats.connectFailures).toBe(0);
    }
    // coturn saw each peer's own username whole (`<expiry>:<peer id>`, the ':' included, which
    // node-datachannel's URL form would have cut) and allocated a relay with it.
    for (const peerId of [source.peerId, ...viewers.map((v) => v.stats().peerId)])
      expect(turn.log).toMatch(
        new RegExp(`user <\\d{10}:${peerId}>: incoming packet ALLOCATE processed, success`),
      );
    expect(turn.log).not.toMatch(/Cannot find credentials/);
    // The next reports (every 2 s) reach the tracker's counters.
    // Each member reports on its own 2 s clock: the aggregate can reach 3 links from one member's
    // report before the others' arrive, so wait for every viewer's own report too.
    await until(
      () => {
        const links = tracker.metrics().peerLinks;
        const members = tracker.debugSwarm(STREAM)?.members ?? [];
        return (
          links.open.relay >= 3 &&
          links.connected.relay >= 3 &&
          links.relayedBytes > 0 &&
          members.filter((m) => (m.connectivity?.open.relay ?? 0) > 0).length >= 3
        );
      },
      10_000,
      "the tracker to count the viewers' relayed links",
    );
    const metrics = await tracker.prometheus();
    expect(metrics).toMatch(/^chunkycast_peer_links_open\{route="relay"\} [1-9]/m);
    expect(metrics).toMatch(/^chunkycast_peer_links_open\{route="host"\} 0$/m);
    expect(metrics).toMatch(/^chunkycast_peer_relayed_bytes_total [1-9]/m);
  }, 60_000);

  it('credentials coturn refuses leave a relay-only viewer with failed links, each reported', async () => {
    const failures: ConnectFailure[] = [];
    // Well-formed and unexpired, but made with another secret (a tracker and a TURN server that
    // disagree): coturn finds the HMAC wrong.
    const username = `${Math.floor(Date.now() / 1000) + 600}:1`;
    const credential = createHmac('sha1', 'not-the-turn-servers-secret').update(username).digest('base64');
    const outsider = viewer({
      iceServers: [{ urls: [`turn:127.0.0.1:${turn.port}`], username, credential }],
      maxLoad: 0,
    });
    outsider.addEventListener('connection-failed', (e) => {
      failures.push((e as CustomEvent<ConnectFailure>).detail);
    });
    await outsider.ready;
    await until(() => failures.length > 0, 20_000, 'a failed link');
    expect(['ice-failed', 'connect-timeout', 'closed-before-open', 'error']).toContain(failures[0]?.reason);
    expect(outsider.stats().peers).toBe(0);
    expect(outsider.stats().connectFailures).toBeGreaterThan(0);
    expect(turn.log).toContain(`user <${username}>: incoming packet message processed, error 401`);
  }, 30_000);
});
