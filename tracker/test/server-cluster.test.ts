/**
 * Two trackers sharing swarms, as two processes do through Redis: once over a real redis-server and
 * once over an in-memory hub (the same Cluster contract; tracker/test/cluster.test.ts tests it on
 * its own). Peers on different trackers find each other, signal each other, get the same source's
 * announcements and take their ids along when they resume on the other tracker.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import {
  announcementSigningBytes,
  encodeTrackerMessage,
  type SegmentAnnouncement,
  type SignedAnnouncement,
} from '@chunkycast/wire';
import {
  generateSigningKeys,
  MemoryHub,
  type ClusterTiming,
  type SigningKeys,
  type Tracker,
  type TrackerOptions,
} from '@chunkycast/tracker';
import { cleanUpAfterEach, connect, KEY, start, within, type Client } from './ws-client.js';
import { RedisServer } from './redis-server.js';

/** Short, so a test that waits for liveness is quick; generous enough for a loaded machine. */
const TIMING: Partial<ClusterTiming> = { heartbeatMs: 200, nodeTtlMs: 1_500 };
const STREAM = 'live';

let keys: SigningKeys;
let otherKeys: SigningKeys;
beforeAll(async () => {
  keys = await generateSigningKeys();
  otherKeys = await generateSigningKeys();
});
cleanUpAfterEach();

async function sign(a: SegmentAnnouncement, with_: SigningKeys = keys): Promise<SignedAnnouncement> {
  const signature = await crypto.subtle.sign(
    'Ed25519',
    with_.privateKey,
    new Uint8Array(announcementSigningBytes(a)),
  );
  return { ...a, signature: Buffer.from(signature).toString('base64') };
}

function segment(sequence: number): SegmentAnnouncement {
  return {
    stream: STREAM,
    sequence,
    uri: `seg${sequence}.ts`,
    bytes: 1000 + sequence,
    packets: 2,
    firstPacket: 0,
    sha256: 'ab'.repeat(32),
    packetHashes: 'cd'.repeat(32),
    durationMs: 2000,
    publishedAtMs: 1_700_000_000_000 + sequence,
  };
}

/** Retries `check` until it passes or `timeoutMs` is over (then its last failure is thrown). */
async function eventually(check: () => Promise<void>, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

interface Backend {
  readonly name: 'memory' | 'redis';
  setUp(): Promise<void>;
  tearDown(): Promise<void>;
  /** A fresh shared store (key space) for the next test. */
  reset(): void;
  /** Options that put a tracker on this test's shared store. */
  options(): Partial<TrackerOptions>;
  /** Publishes raw text on the store's announcement channel, as a compromised process could. */
  readonly inject?: (text: string) => Promise<void>;
}

function memoryBackend(): Backend {
  let hub = new MemoryHub({ timing: TIMING });
  return {
    name: 'memory',
    setUp: () => Promise.resolve(),
    tearDown: () => Promise.resolve(),
    reset: () => {
      hub = new MemoryHub({ timing: TIMING });
    },
    options: () => ({ clusterHub: hub }),
  };
}

function redisBackend(): Backend {
  let server: RedisServer | null = null;
  let admin: Redis | null = null;
  let test = 0;
  const prefix = (): string => `server-cluster-${test}:`;
  return {
    name: 'redis',
    setUp: async () => {
      server = await RedisServer.start();
      admin = new Redis(server.url);
    },
    tearDown: async () => {
      await admin?.quit();
      await server?.stop();
    },
    reset: () => {
      test++;
    },
    options: () => {
      if (server === null) throw new Error('redis-server not started');
      return { redisUrl: server.url, redisKeyPrefix: prefix(), clusterTiming: TIMING };
    },
    inject: async (text) => {
      if (admin === null) throw new Error('redis-server not started');
      await admin.publish(`${prefix()}announce`, text);
    },
  };
}

describe.each([memoryBackend(), redisBackend()])('two trackers over $name', (backend) => {
  beforeAll(() => backend.setUp());
  afterAll(() => backend.tearDown());
  beforeEach(() => {
    backend.reset();
  });

  async function pair(): Promise<[Tracker, Tracker]> {
    const options = { publicKey: keys.publicKeyBase64, ...backend.options() };
    return [await start(options), await start(options)];
  }

  async function viewerOn(tracker: Tracker): Promise<{ client: Client; peerId: number }> {
    const client = await connect(tracker);
    return { client, peerId: (await client.join(STREAM)).peerId };
  }

  it('bootstraps viewers of both trackers from either, never the source, and relays signals across', async () => {
    const [a, b] = await pair();
    const source = await connect(a);
    const sourceWelcome = await source.join(STREAM, 'source', KEY);
    const onA = await viewerOn(a);
    const onB = await viewerOn(b);
    const alsoOnB = await viewerOn(b);

    expect((await onA.client.bootstrap(16)).sort()).toEqual([onB.peerId, alsoOnB.peerId].sort());
    expect((await onB.client.bootstrap(16)).sort()).toEqual([onA.peerId, alsoOnB.peerId].sort());
    expect((await source.bootstrap(16)).sort()).toEqual([onA.peerId, onB.peerId, alsoOnB.peerId].sort());
    // Every tracker knows the same source id (derived from the shared secret).
    expect(b.sourceIdOf(STREAM)).toBe(sourceWelcome.peerId);

    const offer = { type: 'offer', sdp: 'v=0 across', link: 1 } as const;
    onB.client.send({ type: 'signal', to: onA.peerId, data: offer });
    expect(await onA.client.next('signal')).toEqual({ type: 'signal', from: onB.peerId, data: offer });
    onA.client.send({ type: 'signal', to: onB.peerId, data: offer });
    expect(await onB.client.next('signal')).toEqual({ type: 'signal', from: onA.peerId, data: offer });
    // The source is reached across trackers too, and reaches viewers elsewhere.
    onB.client.send({ type: 'signal', to: sourceWelcome.peerId, data: offer });
    expect(await source.next('signal')).toEqual({ type: 'signal', from: onB.peerId, data: offer });
    source.send({ type: 'signal', to: alsoOnB.peerId, data: offer });
    expect(await alsoOnB.client.next('signal')).toEqual({
      type: 'signal',
      from: sourceWelcome.peerId,
      data: offer,
    });

    // Unknown anywhere, or gone from the other tracker: unknownPeer.
    const known = new Set([onA.peerId, onB.peerId, alsoOnB.peerId, sourceWelcome.peerId]);
    let unknown = 1;
    while (known.has(unknown)) unknown++;
    onB.client.send({ type: 'signal', to: unknown, data: offer });
    await onB.client.error('unknownPeer');
    // 0 decodes (ids are u32s) but is never anyone's.
    onB.client.send({ type: 'signal', to: 0, data: offer });
    await onB.client.error('unknownPeer');
    onA.client.send({ type: 'leave' });
    // Answered once the leave is handled (and its release sent to the cluster).
    onA.client.send({ type: 'bootstrap', count: 1 });
    await onA.client.error('notJoined');
    onB.client.send({ type: 'signal', to: onA.peerId, data: offer });
    await onB.client.error('unknownPeer');
    expect(await onB.client.bootstrap(16)).toEqual([alsoOnB.peerId]);

    expect(a.metrics().cluster.relaysIn).toBe(2);
    expect(b.metrics().cluster.relaysIn).toBe(2);
    expect(b.metrics().cluster.relaysOut).toBe(2);
    // Each tracker counts (and shows) its own members.
    expect(a.metrics().members).toEqual({ viewer: 0, source: 1 });
    expect(b.metrics().members).toEqual({ viewer: 2, source: 0 });
  });

  it('lets one source in over all trackers, and another once it has left', async () => {
    const [a, b] = await pair();
    const first = await connect(a);
    await first.join(STREAM, 'source', KEY);
    const second = await connect(b);
    second.send(second.joinFrame(STREAM, 'source', { key: KEY }));
    await second.error('sourcePresent');
    first.send({ type: 'leave' });
    first.send({ type: 'bootstrap', count: 1 });
    await first.error('notJoined');
    second.send(second.joinFrame(STREAM, 'source', { key: KEY }));
    expect((await second.next('welcome')).peerId).toBe(b.sourceIdOf(STREAM));
    expect(b.debugSwarm(STREAM)?.sourceConnected).toBe(true);
  });

  it('gives viewers on the other tracker the source’s announcements, live and in welcome', async () => {
    const [a, b] = await pair();
    const source = await connect(a);
    await source.join(STREAM, 'source', KEY);
    const onB = await viewerOn(b);
    const good = await sign(segment(1));
    source.send({ type: 'announce', announcement: good });
    expect((await onB.client.next('announce')).announcement).toEqual(good);
    const late = await connect(b);
    expect((await late.join(STREAM)).announcements).toEqual([good]);
    expect(b.metrics().cluster.announcementsIn).toBe(1);
    expect(a.metrics().cluster.announcementsOut).toBe(1);
  });

  it('moves a viewer’s id to the other tracker when it resumes there, closing the old connection', async () => {
    const [a, b] = await pair();
    const old = await connect(a);
    const first = await old.join(STREAM);
    const watcher = await viewerOn(a);
    const moved = await connect(b);
    const again = await moved.join(STREAM, 'viewer', { resume: first.resume });
    expect(again).toMatchObject({ peerId: first.peerId, resumed: true });
    expect(await within(old.closed, 'old connection closed')).toEqual({
      code: 4000,
      reason: 'replaced by a resumed session',
    });
    expect(b.metrics().resumes.replaced).toBe(1);
    expect(a.metrics().disconnects.replaced).toBe(1);
    expect(a.metrics().cluster.membersLost).toBe(1);
    // The id now lives on b: found by samples, reached by signals, gone from a.
    expect(await watcher.client.bootstrap(16)).toEqual([first.peerId]);
    const answer = { type: 'answer', sdp: 'v=0 moved', link: 2 } as const;
    watcher.client.send({ type: 'signal', to: first.peerId, data: answer });
    expect(await moved.next('signal')).toEqual({ type: 'signal', from: watcher.peerId, data: answer });
    expect(a.debugSwarm(STREAM)?.members.map((m) => m.peerId)).toEqual([watcher.peerId]);
  });

  it('forgets the members of a tracker that closes', async () => {
    const [a, b] = await pair();
    await viewerOn(a);
    await viewerOn(a);
    const onB = await viewerOn(b);
    expect(await onB.client.bootstrap(16)).toHaveLength(2);
    await a.close();
    expect(await onB.client.bootstrap(16)).toEqual([]);
  });

  it('reports the cluster in /healthz and /metrics', async () => {
    const [a] = await pair();
    const health = (await (await fetch(`${a.url}/healthz`)).json()) as { cluster: unknown };
    expect(health.cluster).toEqual({ backend: backend.name, connected: true });
    const text = await (await fetch(`${a.url}/metrics`)).text();
    expect(text).toContain(`chunkycast_tracker_cluster_connected{backend="${backend.name}"} 1`);
    expect(text).toContain('chunkycast_tracker_cluster_relays_total{direction="in"} 0');
  });

  const inject = backend.inject;
  // Only a shared store can carry what no tracker sent.
  if (inject !== undefined)
    it('checks the signature of announcements from the store again before viewers see them', async () => {
      const [, b] = await pair();
      const viewer = await viewerOn(b);
      const forged = await sign(segment(7), otherKeys);
      const frame = encodeTrackerMessage({ type: 'announce', announcement: forged });
      await inject(`a1|0123456789abcdef|${frame}`);
      await eventually(() => {
        expect(b.metrics().remoteAnnouncementsRejected).toBe(1);
        return Promise.resolve();
      });
      const good = await sign(segment(8));
      await inject(`a1|0123456789abcdef|${encodeTrackerMessage({ type: 'announce', announcement: good })}`);
      // The first announcement the viewer sees is the good one: the forged one never reached it.
      expect((await viewer.client.next('announce')).announcement).toEqual(good);
    });
});

describe('a tracker on its own', () => {
  it('uses the in-memory cluster by default', async () => {
    const tracker = await start();
    const health = (await (await fetch(`${tracker.url}/healthz`)).json()) as { cluster: unknown };
    expect(health.cluster).toEqual({ backend: 'memory', connected: true });
    expect(tracker.metrics().cluster).toMatchObject({ backend: 'memory', liveNodes: 1 });
  });
});
