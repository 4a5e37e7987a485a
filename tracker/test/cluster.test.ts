/**
 * One contract for both cluster backends: two "processes" are two cluster nodes in this test
 * process, on one MemoryHub or one real redis-server. The Redis-only tests below cover what only a
 * shared store has: garbage in it, being unreachable at start, and dropping out and coming back.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { PeerId, ServerMessage, SignedAnnouncement } from '@chunkycast/wire';
import {
  MemoryCluster,
  MemoryHub,
  type Cluster,
  type ClusterHandlers,
  type ClusterTiming,
  type JoinRequest,
  type JoinResult,
  type MemberLossReason,
} from '../src/cluster.js';
import { connectRedisCluster, RedisCluster } from '../src/redis-cluster.js';
import { freePort, RedisServer } from './redis-server.js';

/** A node's death shows within a second, yet a live one survives a 0.7 s stall of a loaded machine. */
const TIMING: ClusterTiming = { heartbeatMs: 150, nodeTtlMs: 900, staleKeyTtlMs: 60_000 };
const STREAM = 'live';
const SOURCE_ID = 4_000_000_000;
/** Ticket expiries (unix s) for the resume rules; only their order matters. */
const TICKET = 1_000;

interface Received {
  readonly messages: { stream: string; to: PeerId; message: ServerMessage }[];
  readonly announcements: SignedAnnouncement[];
  readonly lost: { stream: string; peerId: PeerId; reason: MemberLossReason }[];
}

interface TestNode extends Received {
  readonly cluster: Cluster;
  /** Ends the node as a crash would: no more heartbeats, its members left behind. */
  kill(): void;
  join(role: 'viewer' | 'source', extra?: Partial<JoinRequest>): Promise<JoinResult>;
  viewer(extra?: Partial<JoinRequest>): Promise<PeerId>;
}

interface Backend {
  readonly name: string;
  setUp(): Promise<void>;
  tearDown(): Promise<void>;
  /** A node on this test's shared store. */
  node(drawPeerId?: () => number): Promise<TestNode>;
  /** Closes this test's nodes and starts a fresh shared store. */
  reset(): Promise<void>;
}

function recorder(): { received: Received; handlers: ClusterHandlers } {
  const received: Received = { messages: [], announcements: [], lost: [] };
  return {
    received,
    handlers: {
      onRemoteMessage: (stream, to, message) => received.messages.push({ stream, to, message }),
      onRemoteAnnouncement: (announcement) => received.announcements.push(announcement),
      onMemberLost: (stream, peerId, reason) => received.lost.push({ stream, peerId, reason }),
    },
  };
}

function testNode(cluster: MemoryCluster | RedisCluster, received: Received): TestNode {
  const join = (role: 'viewer' | 'source', extra: Partial<JoinRequest> = {}): Promise<JoinResult> =>
    cluster.addMember({ stream: STREAM, role, sourceId: SOURCE_ID, ticketExpiresAtSec: TICKET, ...extra });
  return {
    ...received,
    cluster,
    kill: () => {
      cluster.abandon();
    },
    join,
    viewer: async (extra) => {
      const result = await join('viewer', extra);
      if (!result.ok) throw new Error('viewer join refused');
      return result.peerId;
    },
  };
}

/** Replays `values`, then falls back to fresh random-looking ids. */
function draws(...values: number[]): () => number {
  let fallback = 100_000;
  return () => values.shift() ?? fallback++;
}

function memoryBackend(): Backend {
  let hub = new MemoryHub({ timing: TIMING });
  let nodes: MemoryCluster[] = [];
  return {
    name: 'memory',
    setUp: () => Promise.resolve(),
    tearDown: () => Promise.resolve(),
    node: (drawPeerId) => {
      const { received, handlers } = recorder();
      const cluster = new MemoryCluster({
        hub,
        handlers,
        ...(drawPeerId === undefined ? {} : { drawPeerId }),
      });
      nodes.push(cluster);
      return Promise.resolve(testNode(cluster, received));
    },
    reset: async () => {
      await Promise.all(nodes.map((n) => n.close()));
      nodes = [];
      hub = new MemoryHub({ timing: TIMING });
    },
  };
}

function redisBackend(): Backend {
  let server: RedisServer | null = null;
  let prefixNumber = 0;
  let nodes: RedisCluster[] = [];
  const url = (): string => {
    if (server === null) throw new Error('redis-server not started');
    return server.url;
  };
  return {
    name: 'redis',
    setUp: async () => {
      server = await RedisServer.start();
    },
    tearDown: async () => {
      await server?.stop();
    },
    node: async (drawPeerId) => {
      const { received, handlers } = recorder();
      const cluster = await connectRedisCluster({
        url: url(),
        handlers,
        timing: TIMING,
        // Each test has its own key space on the one server.
        keyPrefix: `t${prefixNumber}:`,
        ...(drawPeerId === undefined ? {} : { drawPeerId }),
      });
      nodes.push(cluster);
      return testNode(cluster, received);
    },
    reset: async () => {
      await Promise.all(nodes.map((n) => n.close()));
      nodes = [];
      prefixNumber++;
    },
  };
}

/** Retries `check` until it passes or `timeoutMs` is over (then its last failure is thrown). */
async function eventually(check: () => Promise<void> | void, timeoutMs = 3_000): Promise<void> {
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

function announcement(sequence: number, stream = STREAM): SignedAnnouncement {
  return {
    stream,
    sequence,
    uri: `segment${sequence}.ts`,
    bytes: 1_000,
    packets: 1,
    firstPacket: 0,
    sha256: 'ab'.repeat(32),
    packetHashes: 'cd'.repeat(16),
    durationMs: 2_000,
    publishedAtMs: 1_700_000_000_000 + sequence,
    signature: 'c2lnbmF0dXJl',
  };
}

function offer(from: PeerId): ServerMessage {
  return { type: 'signal', from, data: { type: 'offer', sdp: 'v=0 test', link: 1 } };
}

describe.each([memoryBackend(), redisBackend()])('cluster contract over $name', (backend) => {
  beforeAll(() => backend.setUp());
  afterAll(() => backend.tearDown());
  beforeEach(() => backend.reset());
  afterEach(() => backend.reset());

  it('gives viewer ids unique across processes, never 0 and never the source id', async () => {
    const a = await backend.node(draws(7));
    const b = await backend.node(draws(0, 7, SOURCE_ID, 7, 9));
    expect(await a.viewer()).toBe(7);
    expect(await b.viewer()).toBe(9);
    const ids = [7, 9];
    for (let i = 0; i < 10; i++) ids.push(await (i % 2 === 0 ? a : b).viewer());
    expect(new Set(ids).size).toBe(ids.length);
    // The same id in another stream is no clash: ids are unique within a stream.
    const other = await a.join('viewer', { stream: 'other' });
    expect(other.ok).toBe(true);
  });

  it('samples viewers of every process, never the source or the asker', async () => {
    const a = await backend.node();
    const b = await backend.node();
    expect((await a.join('source')).ok).toBe(true);
    const onA = [await a.viewer(), await a.viewer(), await a.viewer()];
    const onB = [await b.viewer(), await b.viewer(), await b.viewer()];
    const asker = onB[0] ?? 0;
    for (const node of [a, b]) {
      const all = await node.cluster.sampleViewers(STREAM, 64, asker);
      expect(new Set(all)).toEqual(new Set([...onA, ...onB].filter((id) => id !== asker)));
      const few = await node.cluster.sampleViewers(STREAM, 2, null);
      expect(few).toHaveLength(2);
      expect(new Set(few).size).toBe(2);
      expect(few).not.toContain(SOURCE_ID);
    }
    expect(await a.cluster.sampleViewers('nobody-here', 8, null)).toEqual([]);
    expect(a.cluster.stats().localMembers).toBe(4);
    expect(b.cluster.stats().localMembers).toBe(3);
  });

  it('relays to the process holding the target and reports unknown targets', async () => {
    const a = await backend.node();
    const b = await backend.node();
    const sender = await a.viewer();
    const target = await b.viewer();
    expect(await a.cluster.deliver(STREAM, target, offer(sender))).toBe('delivered');
    await eventually(() => {
      expect(b.messages).toEqual([{ stream: STREAM, to: target, message: offer(sender) }]);
    });
    expect(a.messages).toEqual([]);
    expect(await a.cluster.deliver(STREAM, 123_456_789, offer(sender))).toBe('unknownPeer');
    expect(await a.cluster.deliver('other', target, offer(sender))).toBe('unknownPeer');
    // A process's own members are the server's to reach; the cluster does not loop them back.
    expect(await a.cluster.deliver(STREAM, sender, offer(target))).toBe('unknownPeer');
    expect(a.cluster.stats().relaysOut).toBe(1);
    expect(b.cluster.stats().relaysIn).toBe(1);
  });

  it('fans announcements out and keeps the recent ones for joiners anywhere', async () => {
    const a = await backend.node();
    const b = await backend.node();
    expect((await a.join('source')).ok).toBe(true);
    await b.viewer();
    for (let sequence = 1; sequence <= 20; sequence++)
      await a.cluster.publishAnnouncement(announcement(sequence));
    await eventually(() => {
      expect(b.announcements.map((x) => x.sequence)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    });
    expect(a.announcements).toEqual([]);
    const last16 = Array.from({ length: 16 }, (_, i) => announcement(i + 5));
    expect(await b.cluster.recentAnnouncements(STREAM)).toEqual(last16);
    const joined = await b.join('viewer');
    expect(joined.ok && joined.announcements).toEqual(last16);
    expect(await a.cluster.recentAnnouncements('other')).toEqual([]);
  });

  it('lets one source in across processes, and the next once it leaves', async () => {
    const a = await backend.node();
    const b = await backend.node();
    const both = await Promise.all([a.join('source'), b.join('source')]);
    expect(both.filter((r) => r.ok)).toHaveLength(1);
    expect(both.filter((r) => !r.ok)).toEqual([{ ok: false, reason: 'sourcePresent' }]);
    const [holder, other] = both[0].ok ? [a, b] : [b, a];
    expect(await other.cluster.sourcePresent(STREAM, SOURCE_ID)).toBe(true);
    expect(await other.join('source')).toEqual({ ok: false, reason: 'sourcePresent' });
    await holder.cluster.removeMember(STREAM, SOURCE_ID);
    expect(await other.cluster.sourcePresent(STREAM, SOURCE_ID)).toBe(false);
    expect(await other.join('source')).toMatchObject({ ok: true, peerId: SOURCE_ID, outcome: 'new' });
  });

  it('lets a resume ticket take its id back from another process, unless the holder is newer', async () => {
    const a = await backend.node();
    const b = await backend.node();
    const id = await a.viewer({ ticketExpiresAtSec: TICKET });
    // Reconnected to b with the ticket of its session on a: b takes the id, a is told.
    const resumed = await b.join('viewer', { resume: { peerId: id, ticketExpiresAtSec: TICKET } });
    expect(resumed).toMatchObject({ ok: true, peerId: id, outcome: 'replaced' });
    await eventually(() => {
      expect(a.lost).toEqual([{ stream: STREAM, peerId: id, reason: 'replaced' }]);
    });
    expect(await a.cluster.sampleViewers(STREAM, 64, null)).toEqual([id]);
    expect(a.cluster.stats().localMembers).toBe(0);
    // Relays to the id now reach b.
    const sender = await a.viewer();
    expect(await a.cluster.deliver(STREAM, id, offer(sender))).toBe('delivered');
    await eventually(() => {
      expect(b.messages.map((m) => m.to)).toEqual([id]);
    });
    // A stale copy of an older ticket does not displace the newer session: it gets a fresh id.
    const stale = await a.join('viewer', { resume: { peerId: id, ticketExpiresAtSec: TICKET - 1 } });
    expect(stale.ok && stale.outcome).toBe('conflict');
    expect(stale.ok && stale.peerId).not.toBe(id);
    // A ticket for a free id gets it back.
    expect(await b.join('viewer', { resume: { peerId: 777, ticketExpiresAtSec: TICKET } })).toMatchObject({
      ok: true,
      peerId: 777,
      outcome: 'resumed',
    });
    // The source: a newer session is refused, an equal ticket replaces it.
    expect((await a.join('source', { ticketExpiresAtSec: TICKET + 10 })).ok).toBe(true);
    expect(await b.join('source', { resume: { peerId: SOURCE_ID, ticketExpiresAtSec: TICKET } })).toEqual({
      ok: false,
      reason: 'sourcePresent',
    });
    expect(
      await b.join('source', { resume: { peerId: SOURCE_ID, ticketExpiresAtSec: TICKET + 10 } }),
    ).toMatchObject({ ok: true, peerId: SOURCE_ID, outcome: 'replaced' });
    await eventually(() => {
      expect(a.lost.map((l) => l.peerId)).toEqual([id, SOURCE_ID]);
    });
  });

  it('stops offering a dead process’s members within the node TTL and frees its source', async () => {
    const a = await backend.node();
    const b = await backend.node();
    expect((await a.join('source')).ok).toBe(true);
    const onA = [await a.viewer(), await a.viewer()];
    const onB = await b.viewer();
    expect(new Set(await b.cluster.sampleViewers(STREAM, 64, null))).toEqual(new Set([...onA, onB]));
    a.kill();
    const killedAtMs = Date.now();
    // Worst case: the last heartbeat came just before the kill, so TTL after it, plus polling slack.
    await eventually(
      async () => {
        expect(await b.cluster.sampleViewers(STREAM, 64, null)).toEqual([onB]);
      },
      TIMING.nodeTtlMs + 2 * TIMING.heartbeatMs + 500,
    );
    expect(Date.now() - killedAtMs).toBeLessThan(TIMING.nodeTtlMs + 2 * TIMING.heartbeatMs + 500);
    expect(await b.cluster.deliver(STREAM, onA[0] ?? 0, offer(onB))).toBe('unknownPeer');
    expect(await b.cluster.sourcePresent(STREAM, SOURCE_ID)).toBe(false);
    expect(await b.join('source')).toMatchObject({ ok: true, outcome: 'new' });
    await eventually(() => {
      expect(b.cluster.stats()).toMatchObject({ liveNodes: 1, globalMembers: 2 });
    });
  });

  it('forgets members on leave and close, and the recent announcements with the last one', async () => {
    const a = await backend.node();
    const b = await backend.node();
    expect((await a.join('source')).ok).toBe(true);
    const viewer = await b.viewer();
    const others = [await a.viewer(), await a.viewer()];
    await a.cluster.publishAnnouncement(announcement(1));
    await b.cluster.removeMember(STREAM, viewer);
    await b.cluster.removeMember(STREAM, viewer); // twice is harmless
    expect(new Set(await b.cluster.sampleViewers(STREAM, 64, null))).toEqual(new Set(others));
    expect(await b.cluster.recentAnnouncements(STREAM)).toEqual([announcement(1)]);
    await a.cluster.close();
    expect(await b.cluster.sampleViewers(STREAM, 64, null)).toEqual([]);
    expect(await b.cluster.sourcePresent(STREAM, SOURCE_ID)).toBe(false);
    expect(await b.cluster.recentAnnouncements(STREAM)).toEqual([]);
  });

  it('refuses bad arguments with TypeError', async () => {
    const a = await backend.node();
    await expect(a.join('viewer', { stream: 'no spaces' })).rejects.toThrow(TypeError);
    await expect(a.join('viewer', { sourceId: 0 })).rejects.toThrow(TypeError);
    await expect(a.join('viewer', { resume: { peerId: SOURCE_ID, ticketExpiresAtSec: 1 } })).rejects.toThrow(
      TypeError,
    );
    await expect(a.cluster.sampleViewers(STREAM, -1, null)).rejects.toThrow(TypeError);
  });
});

describe('Redis cluster backend', () => {
  let server: RedisServer;
  const open: RedisCluster[] = [];

  async function node(url: string, keyPrefix: string, drawPeerId?: () => number): Promise<TestNode> {
    const { received, handlers } = recorder();
    const cluster = await connectRedisCluster({
      url,
      handlers,
      timing: TIMING,
      keyPrefix,
      reconnectDelayMaxMs: 100,
      ...(drawPeerId === undefined ? {} : { drawPeerId }),
    });
    open.push(cluster);
    return testNode(cluster, received);
  }

  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
  });
  afterAll(() => server.stop());

  it('fails to start with a clear error when Redis is unreachable', async () => {
    const port = await freePort();
    const started = Date.now();
    const attempt = connectRedisCluster({
      url: `redis://:secret@127.0.0.1:${port}`,
      handlers: recorder().handlers,
      connectTimeoutMs: 1_000,
    });
    await expect(attempt).rejects.toMatchObject({ name: 'ClusterStartError' });
    await expect(attempt).rejects.toThrow(
      new RegExp(`cannot use Redis at redis://:\\*\\*\\*@127\\.0\\.0\\.1:${port}.*ECONNREFUSED`),
    );
    await expect(attempt).rejects.not.toThrow(/secret/);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('skips and counts garbage read back from Redis, and keeps working', async () => {
    const prefix = 'garbage:';
    const a = await node(server.url, prefix);
    const b = await node(server.url, prefix);
    const viewers = [await a.viewer(), await b.viewer()];
    await a.cluster.publishAnnouncement(announcement(1));
    const raw = new Redis(server.url);
    try {
      await raw.hset(`${prefix}members:${STREAM}`, {
        abc: 'v:0123456789abcdef:1',
        '123': 'not a member value',
        '124': 'v:short:1',
        '125': 'v:0123456789abcdef:1', // a node that never lived: swept as dead
      });
      await raw.rpush(
        `${prefix}recent:${STREAM}`,
        'not json',
        '{"type":"announce","announcement":{"stream":"live"}}',
        JSON.stringify({ type: 'announce', announcement: announcement(2, 'elsewhere') }),
      );
      await raw.sadd(`${prefix}nodes`, 'garbage', 'fedcba9876543210');
      await raw.set(`${prefix}node:fedcba9876543210`, '{"members":"many"}', 'PX', 60_000);
      await raw.publish(`${prefix}relay:${a.cluster.nodeId}`, 'garbage');
      await raw.publish(
        `${prefix}relay:${a.cluster.nodeId}`,
        `r1|${b.cluster.nodeId}|${STREAM}|${viewers[0]}|{}`,
      );
      await raw.publish(`${prefix}relay:${a.cluster.nodeId}`, `l1|${b.cluster.nodeId}|${STREAM}|x`);
      await raw.publish(`${prefix}announce`, `a1|${b.cluster.nodeId}|{"type":"announce"}`);
      await raw.publish(`${prefix}elsewhere`, 'ignored: not subscribed');
    } finally {
      raw.disconnect();
    }
    for (let i = 0; i < 5; i++)
      expect(new Set(await b.cluster.sampleViewers(STREAM, 64, null))).toEqual(new Set(viewers));
    expect(await b.cluster.recentAnnouncements(STREAM)).toEqual([announcement(1)]);
    await eventually(() => {
      expect(a.cluster.stats().badEntries).toBeGreaterThanOrEqual(4 + 3);
    });
    expect(b.cluster.stats().badEntries).toBeGreaterThan(0);
    expect(a.messages).toEqual([]);
    expect(a.lost).toEqual([]);
    expect(a.cluster.stats().localMembers).toBe(1);
    // Still relaying.
    expect(await b.cluster.deliver(STREAM, viewers[0] ?? 0, offer(viewers[1] ?? 0))).toBe('delivered');
    await eventually(() => {
      expect(a.messages).toHaveLength(1);
    });
  });

  it('reports a member whose id another process took while this one was presumed dead', async () => {
    const prefix = 'conflict:';
    const a = await node(server.url, prefix);
    const b = await node(server.url, prefix);
    const id = await a.viewer();
    const raw = new Redis(server.url);
    try {
      // As if a's heartbeat had lapsed and b had meanwhile given the dead holder's id to a new viewer.
      await raw
        .multi()
        .del(`${prefix}node:${a.cluster.nodeId}`)
        .hset(`${prefix}members:${STREAM}`, String(id), `v:${b.cluster.nodeId}:${TICKET}`)
        .exec();
    } finally {
      raw.disconnect();
    }
    await eventually(() => {
      expect(a.lost).toEqual([{ stream: STREAM, peerId: id, reason: 'conflict' }]);
    });
    expect(a.cluster.stats()).toMatchObject({ membersLost: 1, localMembers: 0 });
    // a is alive again and b keeps the id.
    expect(await b.cluster.deliver(STREAM, id, offer(1))).toBe('unknownPeer'); // b's own, by the store
    expect(await a.cluster.deliver(STREAM, id, offer(1))).toBe('delivered');
    await eventually(() => {
      expect(b.messages.map((m) => m.to)).toEqual([id]);
    });
  });

  it('keeps the documented key layout with bounded TTLs', async () => {
    const prefix = 'layout:';
    const a = await node(server.url, prefix);
    expect((await a.join('source')).ok).toBe(true);
    const viewer = await a.viewer({ ticketExpiresAtSec: 1234 });
    for (let sequence = 1; sequence <= 20; sequence++)
      await a.cluster.publishAnnouncement(announcement(sequence));
    const raw = new Redis(server.url);
    try {
      const members = await raw.hgetall(`${prefix}members:${STREAM}`);
      expect(members).toEqual({
        [String(SOURCE_ID)]: `s:${a.cluster.nodeId}:${TICKET}`,
        [String(viewer)]: `v:${a.cluster.nodeId}:1234`,
      });
      expect(new Set(await raw.smembers(`${prefix}node-members:${a.cluster.nodeId}`))).toEqual(
        new Set([`${STREAM}/${SOURCE_ID}`, `${STREAM}/${viewer}`]),
      );
      expect(await raw.sismember(`${prefix}nodes`, a.cluster.nodeId)).toBe(1);
      expect(await raw.llen(`${prefix}recent:${STREAM}`)).toBe(16);
      const nodeTtl = await raw.pttl(`${prefix}node:${a.cluster.nodeId}`);
      expect(nodeTtl).toBeGreaterThan(0);
      expect(nodeTtl).toBeLessThanOrEqual(TIMING.nodeTtlMs);
      for (const key of [
        `${prefix}nodes`,
        `${prefix}members:${STREAM}`,
        `${prefix}recent:${STREAM}`,
        `${prefix}node-members:${a.cluster.nodeId}`,
      ]) {
        const ttl = await raw.pttl(key);
        expect(ttl, key).toBeGreaterThan(0);
        expect(ttl, key).toBeLessThanOrEqual(TIMING.staleKeyTtlMs);
      }
      await a.cluster.close();
      expect(await raw.keys(`${prefix}*`)).toEqual([]);
    } finally {
      raw.disconnect();
    }
  });

  it('serves local members while Redis is down and restates them when it is back', async () => {
    // Its own server: this test stops it.
    const flaky = await RedisServer.start();
    try {
      const prefix = 'flaky:';
      const a = await node(flaky.url, prefix);
      const b = await node(flaky.url, prefix);
      const before = await a.viewer();
      const onB = await b.viewer();
      await flaky.stop();
      await eventually(() => {
        expect(a.cluster.stats().connected).toBe(false);
      });
      // Local-only service: joins, samples and announcements stay up; relays elsewhere cannot route.
      const during = await a.viewer();
      expect(new Set(await a.cluster.sampleViewers(STREAM, 64, null))).toEqual(new Set([before, during]));
      expect(await a.cluster.deliver(STREAM, onB, offer(before))).toBe('unavailable');
      await a.cluster.publishAnnouncement(announcement(1));
      // A leave during the outage must not come back with the restatement.
      await a.cluster.removeMember(STREAM, before);
      // Back, empty (no persistence): both restate their members.
      await flaky.spawn();
      await eventually(async () => {
        expect(new Set(await b.cluster.sampleViewers(STREAM, 64, null))).toEqual(new Set([during, onB]));
      }, 5_000);
      await eventually(async () => {
        expect(await a.cluster.deliver(STREAM, onB, offer(during))).toBe('delivered');
      }, 5_000);
      await eventually(() => {
        expect(b.messages.map((m) => m.to)).toContain(onB);
      });
    } finally {
      await Promise.all(open.splice(0).map((c) => c.close()));
      await flaky.stop();
    }
  });
});

describe('MemoryHub', () => {
  it('never sweeps the node that calls it, however late its heartbeat', async () => {
    let nowMs = 0;
    const hub = new MemoryHub({ timing: TIMING, now: () => nowMs });
    const nodeOn = (): TestNode => {
      const { received, handlers } = recorder();
      return testNode(new MemoryCluster({ hub, handlers }), received);
    };
    const a = nodeOn();
    const b = nodeOn();
    try {
      const onA = await a.viewer();
      await b.viewer();
      // A long synchronous stretch: no heartbeat ran for ten TTLs (virtual time).
      nowMs += 10 * TIMING.nodeTtlMs;
      expect(await a.cluster.sampleViewers(STREAM, 64, null)).toEqual([onA]);
      expect(a.cluster.stats()).toMatchObject({ localMembers: 1, liveNodes: 1 });
    } finally {
      await a.cluster.close();
      await b.cluster.close();
    }
  });
});
