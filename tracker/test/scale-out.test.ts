/**
 * Scale-out (issue 6): a real redis-server and two tracker processes (the built CLI,
 * tracker/dist/cli.js) sharing it. Tracker A serves the origin and runs the true source; tracker B
 * only has the broadcaster's public key. Viewers (the SDK's MeshSession over node-datachannel) are
 * split between A and B: they bootstrap each other across processes, their offers and answers are
 * relayed through Redis, WebRTC links form across the split, and every viewer assembles verified
 * segments from the mesh. Killing B then takes its members out of A's samples within the node TTL.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { MeshSession, type WebSocketLike } from '@chunkycast/sdk/core';
import type { DebugSwarm } from '@chunkycast/tracker';
import { FakePackager, SEGMENT_BYTES, afterTreesForm, byteMismatch } from './fake-packager.js';
import { RedisServer } from './redis-server.js';
import { Client, within } from './ws-client.js';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli.js');
const STREAM = 'live';
const KEY = 'scale-out-broadcaster-key';
/** Short liveness timing (the defaults are 5 s / 15 s) so the test sees a dead process go. */
const HEARTBEAT_MS = 250;
const NODE_TTL_MS = 2_000;
const START_TIMEOUT_MS = 15_000;
const SEGMENTS_WANTED = 8;

const nodeSocket = (url: string): WebSocketLike => new WebSocket(url) as unknown as WebSocketLike;
const LOOPBACK_RTC = { iceServers: [], bindAddress: '127.0.0.1' };

/** One `node tracker/dist/cli.js` child and its JSON log lines. */
class TrackerProcess {
  readonly lines: Record<string, unknown>[] = [];
  private readonly waiters: (() => void)[] = [];
  private stderr = '';
  readonly exited: Promise<number | null>;
  url = '';
  wsUrl = '';

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    let buffer = '';
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      buffer += chunk;
      for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          this.lines.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          this.lines.push({ msg: line });
        }
        for (const wake of this.waiters.splice(0)) wake();
      }
    });
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve) => {
      child.once('exit', (code) => {
        resolve(code);
        for (const wake of this.waiters.splice(0)) wake();
      });
    });
  }

  static start(name: string, args: string[]): TrackerProcess {
    // A clean environment: no CHUNKYCAST_* or REDIS_URL of the machine running the tests.
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('CHUNKYCAST_') && k !== 'REDIS_URL'),
    );
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    return new TrackerProcess(name, child);
  }

  /** The first log line with this message (bounded wait; fails with the process's output). */
  async waitFor(msg: string): Promise<Record<string, unknown>> {
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      const line = this.lines.find((l) => l.msg === msg);
      if (line !== undefined) return line;
      if (this.child.exitCode !== null || this.child.signalCode !== null || Date.now() > deadline)
        throw new Error(
          `tracker ${this.name}: no "${msg}" line (exit ${String(this.child.exitCode)}); stderr:\n${this.stderr}\n` +
            `stdout:\n${this.lines.map((l) => JSON.stringify(l)).join('\n')}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 200);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  async listening(): Promise<void> {
    const line = await this.waitFor('listening');
    this.url = String(line.url);
    this.wsUrl = String(line.wsUrl);
  }

  async debugSwarm(): Promise<DebugSwarm> {
    const res = await fetch(`${this.url}/debug/swarm/${STREAM}`, {
      headers: { Authorization: `Bearer ${KEY}` },
    });
    expect(res.status).toBe(200);
    return (await res.json()) as DebugSwarm;
  }

  /** One sample of the Prometheus text, by full series name (labels included). */
  async metric(series: string): Promise<number> {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    if (line === undefined) throw new Error(`tracker ${this.name}: no ${series} in /metrics`);
    return Number(line.slice(series.length + 1));
  }

  kill(signal: NodeJS.Signals): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
  }
}

let redis: RedisServer | null = null;
let dir: string;
let packager: FakePackager;
let a: TrackerProcess;
let b: TrackerProcess;
const sessions: { session: MeshSession; on: 'A' | 'B' }[] = [];
const probes: Client[] = [];

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build it first (npx tsc -b, or npm run setup)`);
  // Fails (does not skip) without redis-server, saying to run `npm run setup`.
  redis = await RedisServer.start();
  dir = mkdtempSync(join(tmpdir(), 'chunkycast-scale-out-'));
  const pair = generateKeyPairSync('ed25519');
  const signingKeyFile = join(dir, 'signing-key.pem');
  writeFileSync(signingKeyFile, pair.privateKey.export({ format: 'pem', type: 'pkcs8' }));
  const jwk = pair.publicKey.export({ format: 'jwk' });
  const publicKey = Buffer.from(jwk.x ?? '', 'base64url').toString('base64');
  packager = new FakePackager(dir);
  packager.start();

  const shared = [
    '--port',
    '0',
    '--broadcaster-key',
    KEY,
    '--redis-url',
    redis.url,
    '--redis-key-prefix',
    'scale-out:',
    '--cluster-heartbeat-ms',
    String(HEARTBEAT_MS),
    '--cluster-node-ttl-ms',
    String(NODE_TTL_MS),
  ];
  a = TrackerProcess.start('A', [
    ...shared,
    '--origin-dir',
    dir,
    '--source-stream',
    STREAM,
    '--signing-key',
    signingKeyFile,
  ]);
  b = TrackerProcess.start('B', [...shared, '--public-key', publicKey]);
  await Promise.all([a.listening(), b.listening()]);
  await a.waitFor('true source running');
}, 30_000);

afterAll(async () => {
  for (const { session } of sessions) session.close();
  for (const probe of probes) probe.ws.terminate();
  packager.stop();
  for (const t of [a, b]) t.kill('SIGTERM');
  await Promise.race([
    Promise.all([a.exited, b.exited]),
    new Promise((resolve) => setTimeout(resolve, 5_000)),
  ]);
  for (const t of [a, b]) t.kill('SIGKILL');
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function viewer(on: 'A' | 'B', options: { maxLoad?: number; targetLoad?: number }): MeshSession {
  const session = MeshSession.connect(
    { tracker: (on === 'A' ? a : b).wsUrl, stream: STREAM, ...options },
    { createSocket: nodeSocket, rtcConfig: LOOPBACK_RTC },
  );
  sessions.push({ session, on });
  return session;
}

/** A bare protocol client in the swarm, to ask the trackers directly. */
interface Probe {
  readonly client: Client;
  readonly peerId: number;
  bootstrap(count: number): Promise<number[]>;
  error(code: string): Promise<void>;
}

/** What a live swarm sends a member unasked: announcements, and viewers' offers of links. */
const UNASKED = ['announce', 'signal'] as const;

async function probe(tracker: TrackerProcess): Promise<Probe> {
  const client = await Client.open(tracker.wsUrl);
  probes.push(client);
  const peerId = (await client.join(STREAM)).peerId;
  return {
    client,
    peerId,
    bootstrap: async (count) => {
      client.send({ type: 'bootstrap', count });
      return [...(await client.nextSkipping('peers', UNASKED)).peers];
    },
    error: async (code) => {
      expect((await client.nextSkipping('error', UNASKED)).code).toBe(code);
    },
  };
}

function idsOn(on: 'A' | 'B'): number[] {
  return sessions.filter((s) => s.on === on).map((s) => s.session.stats().peerId ?? 0);
}

describe('two tracker processes sharing swarms through Redis', () => {
  it('viewers on different processes find each other, link up and play verified segments', async () => {
    // Two forwarders on each process (half a stream copy to spare each, as in live-mesh.test.ts)
    // and a receive-only viewer on B, which must get every slice from others.
    const viewers = [
      viewer('A', { targetLoad: 24 }),
      viewer('A', { targetLoad: 24 }),
      viewer('B', { targetLoad: 24 }),
      viewer('B', { maxLoad: 0 }),
    ];
    await Promise.all(viewers.map((v) => v.ready));
    // Give the trees a few segments to form, then ask every viewer for consecutive segments the
    // way the player does: wait for the mesh, and complete a partial segment from the origin (on A).
    await afterTreesForm(viewers, { minMs: 4000, maxMs: 20_000 });
    const originBefore = await a.metric('chunkycast_tracker_origin_bytes_total{role="viewers"}');
    // The next segments the packager writes (the source announces each within a playlist poll).
    const firstSeq = Math.max(...packager.segments.keys()) + 1;
    const wanted = Array.from({ length: SEGMENTS_WANTED }, (_, i) => firstSeq + i);
    const verified = viewers.map(() => 0);
    let wholeFromOrigin = 0;
    // The test shares one event loop with tracker A and the viewers: its delay says how loaded it was.
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    await Promise.all(
      viewers.map(async (v, i) => {
        for (const seq of wanted) {
          const deadline = performance.now() + 4000;
          const bytes = await v.waitForSegment(seq, deadline, undefined, `${a.url}/live/seg${seq}.ts`);
          if (bytes === null) wholeFromOrigin++;
          else {
            expect(byteMismatch(bytes, packager.segments.get(seq)), `viewer ${i} segment ${seq}`).toBeNull();
            verified[i] = (verified[i] ?? 0) + 1;
          }
        }
      }),
    );
    const originBytes =
      (await a.metric('chunkycast_tracker_origin_bytes_total{role="viewers"}')) -
      originBefore +
      wholeFromOrigin * SEGMENT_BYTES;
    const deliveredBytes = viewers.length * wanted.length * SEGMENT_BYTES;
    const stats = viewers.map((v) => v.stats());

    // Each process shows its own members; together they are the whole swarm, reports included.
    // A slice may be between parents for a moment (a switch or a root's move takes a round trip),
    // so its parents are read until every viewer has one per slice, within a bound.
    const onA = idsOn('A');
    const onB = idsOn('B');
    let swarmA: DebugSwarm | null = null;
    let swarmB: DebugSwarm | null = null;
    const parentless = (): number[] =>
      viewers.map((v) => v.stats().slices.filter((slice) => slice.parent === null).length);
    const reportsDeadline = Date.now() + 10_000;
    for (;;) {
      swarmA = await a.debugSwarm();
      swarmB = await b.debugSwarm();
      const reported = [...swarmA.members, ...swarmB.members].every(
        (m) => m.report !== null && (m.role === 'source' || m.report.parents.every((p) => p !== null)),
      );
      if ((reported && parentless().every((n) => n === 0)) || Date.now() > reportsDeadline) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const slicesWithoutParent = parentless();
    const sourceId = swarmA.sourceId;
    expect(swarmA.sourceConnected).toBe(true);
    expect(swarmB.sourceConnected).toBe(false);
    expect(swarmB.sourceId).toBe(sourceId);
    expect(swarmA.members.map((m) => m.peerId).sort()).toEqual([sourceId, ...onA].sort());
    expect(swarmB.members.map((m) => m.peerId).sort()).toEqual([...onB].sort());
    // Links across the split: parents of B's viewers on A (the source or A's viewers), and back.
    const membersOfA = new Set([sourceId, ...onA]);
    const parentsOfB = swarmB.members.flatMap((m) => m.report?.parents ?? []);
    const crossParents = parentsOfB.filter((p) => p !== null && membersOfA.has(p)).length;
    const relays = {
      aIn: await a.metric('chunkycast_tracker_cluster_relays_total{direction="in"}'),
      aOut: await a.metric('chunkycast_tracker_cluster_relays_total{direction="out"}'),
      bIn: await b.metric('chunkycast_tracker_cluster_relays_total{direction="in"}'),
      bOut: await b.metric('chunkycast_tracker_cluster_relays_total{direction="out"}'),
      bAnnouncementsIn: await b.metric('chunkycast_tracker_cluster_announcements_total{direction="in"}'),
    };

    console.log(
      JSON.stringify({
        scaleOut: 'playback',
        segmentsWanted: wanted.length,
        viewers: stats.map((s, i) => ({
          on: sessions[i]?.on,
          peerId: s.peerId,
          segmentsVerified: verified[i],
          bytesFromMesh: s.bytesFromMesh,
          bytesFromOrigin: s.bytesFromOrigin,
          uploadBytes: s.uploadBytes,
          verificationFailures: s.verificationFailures,
        })),
        wholeSegmentsFromOrigin: wholeFromOrigin,
        slicesWithoutParent,
        eventLoopDelayMs: { p50: loopDelay.percentile(50) / 1e6, p99: loopDelay.percentile(99) / 1e6 },
        originShare: Number((originBytes / deliveredBytes).toFixed(4)),
        slicesOfBViewersWithParentOnA: crossParents,
        relays,
      }),
    );

    expect(originBytes / deliveredBytes).toBeLessThan(0.25);
    for (const [i, s] of stats.entries()) {
      expect(s.verificationFailures, `viewer ${i}`).toBe(0);
      expect(s.bytesFromMesh, `viewer ${i}`).toBeGreaterThanOrEqual(SEGMENT_BYTES * wanted.length);
      expect(slicesWithoutParent[i], `viewer ${i}: slices without a parent`).toBe(0);
    }
    expect(stats[3]?.uploadBytes).toBe(0);
    // B's forwarder has no parent on B but itself and the receive-only viewer: the stream crosses.
    expect(crossParents).toBeGreaterThan(0);
    // Offers one way, answers the other: both processes relayed signals out and in.
    for (const count of [relays.aIn, relays.aOut, relays.bIn, relays.bOut]) expect(count).toBeGreaterThan(0);
    expect(relays.bAnnouncementsIn).toBeGreaterThanOrEqual(wanted.length);
  }, 90_000);

  it('bootstraps across processes, relays signals, and answers unknownPeer for ids nowhere', async () => {
    const probeA = await probe(a);
    const probeB = await probe(b);
    const viewerIds = [...idsOn('A'), ...idsOn('B')];
    // Sixteen or fewer viewers: a sample of 16 is all of them but the asker, from either process.
    expect((await probeB.bootstrap(16)).sort()).toEqual([...viewerIds, probeA.peerId].sort());
    expect((await probeA.bootstrap(16)).sort()).toEqual([...viewerIds, probeB.peerId].sort());
    const offer = { type: 'offer', sdp: 'v=0 scale-out probe', link: 1 } as const;
    probeB.client.send({ type: 'signal', to: probeA.peerId, data: offer });
    const relayed = await probeA.client.nextSkipping('signal', UNASKED, (m) => m.from === probeB.peerId);
    expect(relayed).toEqual({ type: 'signal', from: probeB.peerId, data: offer });
    const known = new Set([...viewerIds, probeA.peerId, probeB.peerId]);
    let unknown = 1;
    while (known.has(unknown)) unknown++;
    probeB.client.send({ type: 'signal', to: unknown, data: offer });
    await probeB.error('unknownPeer');
    // The viewers may offer the probes links meanwhile; those offers go unanswered.
    probeA.client.send({ type: 'leave' });
    probeB.client.send({ type: 'leave' });
  });

  it('takes a killed process’s members out of the other’s samples within the node TTL', async () => {
    const watcher = await probe(a);
    const onB = idsOn('B');
    expect(await watcher.bootstrap(16)).toEqual(expect.arrayContaining(onB));
    const killedAt = Date.now();
    b.kill('SIGKILL');
    await within(b.exited, 'tracker B killed');
    let goneAfterMs = -1;
    for (;;) {
      const sample = await watcher.bootstrap(16);
      if (!sample.some((id) => onB.includes(id))) {
        goneAfterMs = Date.now() - killedAt;
        // A's own viewers are still offered.
        expect(sample.sort()).toEqual(idsOn('A').sort());
        break;
      }
      if (Date.now() - killedAt > 3 * NODE_TTL_MS) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    // Relays to a dead process's members answer unknownPeer too.
    watcher.client.send({ type: 'signal', to: onB[0] ?? 1, data: { type: 'offer', sdp: 'v=0', link: 1 } });
    await watcher.error('unknownPeer');
    console.log(
      JSON.stringify({ scaleOut: 'kill', nodeTtlMs: NODE_TTL_MS, heartbeatMs: HEARTBEAT_MS, goneAfterMs }),
    );
    expect(goneAfterMs).toBeGreaterThanOrEqual(0);
    // The last heartbeat was at most HEARTBEAT_MS before the kill; allow a beat of scheduling slack.
    expect(goneAfterMs).toBeLessThanOrEqual(NODE_TTL_MS + 2 * HEARTBEAT_MS);
  });
});
