// The mesh host over real WebRTC (node-datachannel through simple-peer) on 127.0.0.1: a true source
// and a few members wired together with in-process signalling instead of a tracker.
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  DIAL_BACKOFF_MS,
  FIRST_DIAL_BACKOFF_MS,
  LIVE_PROTOCOL,
  MAX_QUIT_LINGER_MS,
  MeshNode,
  type ConnectFailure,
  type MeshNodeOptions,
} from '@chunkycast/sdk/core';
import type { PeerId, SignalData } from '@chunkycast/wire';
import { injectFaults, type FaultInjection } from '../src/testing.js';
import { until } from './until.js';

const LOOPBACK_RTC = { iceServers: [], bindAddress: '127.0.0.1' };
const SOURCE_ID = 1000;

interface Member {
  node: MeshNode;
  received: Map<string, Uint8Array>;
}

function swarm(
  memberIds: PeerId[],
  maxLoadOf: (id: PeerId) => number = () => 24,
  extra: (id: PeerId) => Partial<MeshNodeOptions> = () => ({}),
  faults: (id: PeerId) => FaultInjection = () => ({}),
): { source: MeshNode; members: Map<PeerId, Member> } {
  const nodes = new Map<PeerId, MeshNode>();
  const members = new Map<PeerId, Member>();
  const make = (id: PeerId, role: 'member' | 'source', received?: Map<string, Uint8Array>): MeshNode => {
    const maxLoad = maxLoadOf(id);
    const options: MeshNodeOptions = {
      id,
      sourceId: SOURCE_ID,
      role,
      targetLoadSlices: Math.min(16, maxLoad),
      maxLoadSlices: role === 'source' ? 16 : maxLoad,
      protocol: LIVE_PROTOCOL,
      seed: id,
      rtcConfig: LOOPBACK_RTC,
      signal: (to: PeerId, data: SignalData) => {
        // Relay asynchronously, as a tracker would.
        setTimeout(() => nodes.get(to)?.handleSignal(id, data), 1);
      },
      requestBootstrap: (count: number) => {
        const others = memberIds.filter((m) => m !== id && nodes.get(m) !== undefined);
        setTimeout(() => nodes.get(id)?.bootstrap(others.slice(0, count)), 1);
      },
      deliver: (slice: number, seq: number, payload: Uint8Array) => {
        received?.set(`${slice}:${seq}`, payload.slice());
      },
      ...extra(id),
    };
    return new MeshNode(injectFaults(options, faults(id)));
  };
  const source = make(SOURCE_ID, 'source');
  nodes.set(SOURCE_ID, source);
  for (const id of memberIds) {
    const received = new Map<string, Uint8Array>();
    const node = make(id, 'member', received);
    nodes.set(id, node);
    members.set(id, { node, received });
  }
  return { source, members };
}

/** Starts the members and the source; resolves once the source has a root for every slice. */
async function startRooted(source: MeshNode, members: Map<PeerId, Member>): Promise<MeshNode[]> {
  const nodes = [...members.values()].map((m) => m.node);
  running = [source, ...nodes];
  for (const n of nodes) n.start();
  source.start();
  await until(() => source.engine.currentSliceSources().every((s) => s !== null), 20_000, 'slice sources');
  return nodes;
}

/** A row of 16 packets of `bytes` bytes every 200 ms; `published()` counts the packets so far. */
function publishRows(
  source: MeshNode,
  bytes: number,
): { timer: ReturnType<typeof setInterval>; published: () => number } {
  let published = 0;
  const timer = setInterval(() => {
    for (let i = 0; i < 16; i++) source.publish(new Uint8Array(bytes).fill(published++ % 251));
  }, 200);
  return { timer, published: () => published };
}

/** The slices of which `received` holds no packet at sequence `from` or later. */
function slicesLackingFrom(received: ReadonlyMap<string, Uint8Array>, from: number): number[] {
  const have = new Set<number>();
  for (const k of received.keys()) {
    const [slice, seq] = k.split(':').map(Number) as [number, number];
    if (seq >= from) have.add(slice);
  }
  return Array.from({ length: 16 }, (_, s) => s).filter((s) => !have.has(s));
}

/** Whether `received` holds a packet of every slice at sequence `from` or later. */
function everySliceFrom(received: ReadonlyMap<string, Uint8Array>, from: number): boolean {
  return slicesLackingFrom(received, from).length === 0;
}

let running: MeshNode[] = [];
afterEach(async () => {
  await Promise.all(running.map((n) => n.stop(false)));
  running = [];
});

describe('MeshNode over WebRTC on loopback', () => {
  it('carries every published packet of all 16 slices to every member', async () => {
    const ids = [1, 2, 3, 4];
    const { source, members } = swarm(ids);
    running = [source, ...[...members.values()].map((m) => m.node)];
    for (const m of members.values()) m.node.start();
    source.start();
    // Slice sources are assigned once the source has bootstrap peers and links.
    await until(() => source.engine.currentSliceSources().every((s) => s !== null), 20_000, 'slice sources');
    // Publish rows until every member has received a full row of 16 slices.
    let published = 0;
    const payloadFor = (n: number): Uint8Array => new Uint8Array(1000).fill(n % 251);
    const publisher = setInterval(() => {
      for (let i = 0; i < 16; i++) source.publish(payloadFor(published++));
    }, 200);
    try {
      await until(
        () =>
          [...members.values()].every((m) =>
            Array.from({ length: 16 }, (_, s) => s).every((s) =>
              [...m.received.keys()].some((k) => k.startsWith(`${s}:`)),
            ),
          ),
        30_000,
        'every member to receive every slice',
      );
    } finally {
      clearInterval(publisher);
    }
    for (const m of members.values()) {
      // Payload check: packet n of the stream is slice n mod 16, seq floor(n/16).
      for (const [key, bytes] of m.received) {
        const [slice, seq] = key.split(':').map(Number) as [number, number];
        expect(bytes).toEqual(payloadFor(seq * 16 + slice));
      }
      expect(m.node.counters.badMessages).toBe(0);
    }
    // Members forward: the source sent each packet once (16 slices → one copy), members the rest.
    const memberUpload = [...members.values()].reduce((sum, m) => sum + m.node.counters.uploadBytes, 0);
    expect(memberUpload).toBeGreaterThan(0);
    // Traffic by type: what the nodes wrote is what the others read, type by type (every link is
    // between these nodes), and the data messages carry the forwarded payloads plus their headers.
    const everyNode = [source, ...[...members.values()].map((m) => m.node)];
    const sentData = everyNode.reduce((a, n) => a + (n.traffic.byName().data?.sent ?? 0), 0);
    const receivedData = everyNode.reduce((a, n) => a + (n.traffic.byName().data?.received ?? 0), 0);
    expect(sentData).toBeGreaterThan(0);
    expect(receivedData).toBeGreaterThan(0);
    expect(receivedData).toBeLessThanOrEqual(sentData);
    for (const m of members.values()) {
      const data = m.node.traffic.byName().data;
      expect(data?.sentBytes ?? 0).toBeGreaterThan(m.node.counters.uploadBytes);
      expect(m.node.traffic.byName().advert?.sent ?? 0).toBeGreaterThan(0);
      const written = Object.values(m.node.traffic.byName()).reduce((a, f) => a + f.sentBytes, 0);
      expect(written).toBe(m.node.counters.bytesWritten);
    }

    // Each open link's route, read from node-datachannel's stats: host candidates on loopback (the
    // dialling end may learn the other's address from its checks first: peer-reflexive), bytes
    // counted, never relayed.
    const nodes = [source, ...[...members.values()].map((m) => m.node)];
    await until(
      () => nodes.every((n) => n.peerLinks().length > 0 && n.peerLinks().every((l) => l.route !== null)),
      10_000,
      'every open link to have its route read',
    );
    for (const n of nodes) {
      const links = n.peerLinks();
      for (const link of links) {
        expect(link.route === 'host' || link.route === 'prflx', JSON.stringify(link)).toBe(true);
        expect(link.localCandidateType).toBe('host');
        expect(link.openedAtMs).toBeGreaterThan(Date.now() - 60_000);
        expect(link.openedAtMs).toBeLessThanOrEqual(Date.now());
      }
      const open = n.openByRoute();
      expect(open.host + open.prflx).toBe(links.length);
      expect(open.relay + open.srflx).toBe(0);
      expect(n.connectedByRoute.host + n.connectedByRoute.prflx).toBeGreaterThanOrEqual(links.length);
      expect(n.counters.relayedBytes).toBe(0);
      expect(n.connectivity()).toMatchObject({ open, failed: n.counters.connectFailures, relayedBytes: 0 });
    }
    expect(nodes.flatMap((n) => n.peerLinks()).some((l) => l.route === 'host')).toBe(true);
    // The source sent every member's slice packets over its links: bytes are counted per pair.
    await until(
      () => source.peerLinks().some((l) => l.bytesSent > 0),
      5_000,
      'the source’s links to show bytes sent',
    );
  }, 60_000);

  it('closes a link to a member it has no use for, once only announcements crossed it for idleLinkCloseMs, and the stream flows on', async () => {
    // Degree 4 (two links each way) among 8: joiners dial bootstrap peers and walk ends that need
    // not become neighbours, and those links then carry nothing. (Degree 2 is one link each way, a
    // union of cycles: a 6-member swarm split into two, each missing the other's slices.)
    const ids = [1, 2, 3, 4, 5, 6, 7, 8];
    const { source, members } = swarm(
      ids,
      () => 24,
      () => ({ protocol: { ...LIVE_PROTOCOL, minNodeDegree: 4 }, idleLinkCloseMs: 1500 }),
    );
    const nodes = await startRooted(source, members);
    const publisher = publishRows(source, 500);
    const everySlice = (from: number): boolean =>
      [...members.values()].every((m) => everySliceFrom(m.received, from));
    try {
      await until(
        () => nodes.reduce((sum, n) => sum + n.counters.idleLinksClosed, 0) > 0,
        20_000,
        'an idle link to be closed',
      );
      // Only links the engine has no use for were closed: every member still gets every slice.
      const from = Math.ceil(publisher.published() / 16) + 1;
      await until(
        () => everySlice(from),
        20_000,
        'every member to receive every slice after the closes',
      ).catch((error: unknown) => {
        // Which member lacks which slice, and whom it takes each from: a timeout alone (seen once
        // on CI's loaded run, not again in 9 runs alone or beside a simulation) says nothing.
        const lacking = [...members.entries()].flatMap(([id, m]) => {
          const slices = slicesLackingFrom(m.received, from);
          return slices.length === 0
            ? []
            : [
                `member ${id} lacks ${slices.join(',')} (parents ${m.node.engine.parents().join(',')}, open links ${m.node.openPeerIds().join(',')})`,
              ];
        });
        const waited = error instanceof Error ? error.message : String(error);
        throw new Error(
          `${waited}: ${lacking.length > 0 ? lacking.join('; ') : 'every slice came just after'}`,
        );
      });
    } finally {
      clearInterval(publisher.timer);
    }
    // The true source closes its own idle links too, but never one to a slice source: every root
    // still has its link (the slices all flowed above), and no member closed its link to the source.
    const open = new Set(source.openPeerIds());
    for (const root of source.engine.currentSliceSources())
      if (root !== null) expect(open.has(root)).toBe(true);
    for (const m of members.values())
      if (m.node.openPeerIds().includes(SOURCE_ID)) expect(open.has(m.node.id)).toBe(true);
  });

  it('lets the true source close its links to members it has no use for, and its roots keep theirs', async () => {
    // Three members at ML 24 take all 16 roots among them; a fourth, receive-only, declines any
    // root, so the source's link to it (a bootstrap peer, a walk's first hop) carries only
    // announcements and closes; the receive-only member still gets every slice from the others.
    const receiveOnlyId = 34;
    const { source, members } = swarm(
      [31, 32, 33, receiveOnlyId],
      (id) => (id === receiveOnlyId ? 0 : 24),
      () => ({ idleLinkCloseMs: 1500 }),
    );
    await startRooted(source, members);
    const publisher = publishRows(source, 300);
    const receiveOnly = members.get(receiveOnlyId)!;
    try {
      await until(
        () => source.counters.idleLinksClosed > 0 && !source.openPeerIds().includes(receiveOnlyId),
        20_000,
        'the source to close its idle link to the receive-only member',
      );
      const from = Math.ceil(publisher.published() / 16) + 1;
      await until(
        () => everySliceFrom(receiveOnly.received, from),
        20_000,
        'the receive-only member to get every slice after the close',
      );
    } finally {
      clearInterval(publisher.timer);
    }
    const open = new Set(source.openPeerIds());
    for (const root of source.engine.currentSliceSources()) {
      expect(root).not.toBe(receiveOnlyId);
      if (root !== null) expect(open.has(root)).toBe(true);
    }
    expect(receiveOnly.node.counters.idleLinksClosed).toBe(0);
  });

  it('a receive-only member (ML = 0) receives every slice and forwards nothing', async () => {
    const receiveOnlyId = 23;
    const { source, members } = swarm([21, 22, receiveOnlyId, 24], (id) => (id === receiveOnlyId ? 0 : 24));
    running = [source, ...[...members.values()].map((m) => m.node)];
    for (const m of members.values()) m.node.start();
    source.start();
    await until(() => source.engine.currentSliceSources().every((s) => s !== null), 20_000, 'slice sources');
    let published = 0;
    const publisher = setInterval(() => {
      for (let i = 0; i < 16; i++) source.publish(new Uint8Array(100).fill(published++ % 256));
    }, 200);
    const receiveOnly = members.get(receiveOnlyId)!;
    try {
      await until(
        () => new Set([...receiveOnly.received.keys()].map((k) => k.split(':')[0])).size === 16,
        30_000,
        'the receive-only member to receive all 16 slices',
      );
    } finally {
      clearInterval(publisher);
    }
    expect(receiveOnly.node.engine.children().every((c) => c.length === 0)).toBe(true);
    expect(receiveOnly.node.engine.currentLoad).toBe(0);
    expect(receiveOnly.node.counters.uploadBytes).toBe(0);
  }, 60_000);
});

describe('an engine action that throws', () => {
  it('costs only itself: a member whose application throws on every packet still forwards them all', async () => {
    // 41 is the only forwarder (42 and 43 receive only), and its deliver callback always throws:
    // the forwarding sends come after the delivery in the same batch of actions.
    const forwarder = 41;
    const { source, members } = swarm(
      [forwarder, 42, 43],
      (id) => (id === forwarder ? 48 : 0),
      (id) =>
        id === forwarder
          ? {
              deliver: () => {
                throw new Error('a bug in the application');
              },
              log: () => undefined,
            }
          : {},
    );
    running = [source, ...[...members.values()].map((m) => m.node)];
    for (const m of members.values()) m.node.start();
    source.start();
    await until(() => source.engine.currentSliceSources().every((s) => s !== null), 20_000, 'slice sources');
    let published = 0;
    const publisher = setInterval(() => {
      for (let i = 0; i < 16; i++) source.publish(new Uint8Array(100).fill(published++ % 256));
    }, 200);
    try {
      await until(
        () =>
          [42, 43].every(
            (id) =>
              new Set([...(members.get(id)?.received.keys() ?? [])].map((k) => k.split(':')[0])).size === 16,
          ),
        30_000,
        'both receive-only members to receive all 16 slices through the forwarder',
      );
    } finally {
      clearInterval(publisher);
    }
    const node = members.get(forwarder)!.node;
    expect(node.counters.actionsFailed).toBeGreaterThan(0);
    expect(node.counters.uploadBytes).toBeGreaterThan(0);
  }, 60_000);
});

describe('an engine that asks for packets from the origin', () => {
  it('is a loud host error: counted and logged, and the rest of the batch still runs', () => {
    // A MeshNode never gives its engine a playout clock, so the engine's packet repair (whose last
    // resort this is) stays off; the session completes segments from the origin itself. Should an
    // engine ask anyway, the request must not vanish without a trace.
    const logged: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
    const bootstraps: number[] = [];
    const node = new MeshNode({
      id: 5,
      sourceId: SOURCE_ID,
      role: 'member',
      targetLoadSlices: 16,
      maxLoadSlices: 24,
      protocol: LIVE_PROTOCOL,
      seed: 5,
      rtcConfig: LOOPBACK_RTC,
      signal: () => undefined,
      requestBootstrap: (count) => bootstraps.push(count),
      deliver: () => undefined,
      log: (level, msg, fields) => logged.push({ level, msg, ...(fields === undefined ? {} : { fields }) }),
    });
    running = [node];
    vi.spyOn(node.engine, 'handle').mockReturnValueOnce([
      { kind: 'fetchOrigin', slice: 3, seqs: [40, 41] },
      { kind: 'requestBootstrap', count: 7 },
    ]);
    node.start();
    expect(node.counters.actionsFailed).toBe(1);
    expect(logged.filter((l) => l.level === 'error').map((l) => l.fields?.action)).toEqual(['fetchOrigin']);
    expect(bootstraps).toEqual([7]);
  });
});

describe('a graceful leave', () => {
  it('refuses a quitLingerMs it would not wait out, instead of cutting the linger short', () => {
    const node = (quitLingerMs: number): MeshNode =>
      new MeshNode({
        id: 6,
        sourceId: SOURCE_ID,
        role: 'member',
        targetLoadSlices: 16,
        maxLoadSlices: 24,
        protocol: { ...LIVE_PROTOCOL, quitLingerMs },
        seed: 6,
        rtcConfig: LOOPBACK_RTC,
        signal: () => undefined,
        requestBootstrap: () => undefined,
        deliver: () => undefined,
      });
    expect(() => node(MAX_QUIT_LINGER_MS + 1)).toThrow(RangeError);
    expect(() => node(MAX_QUIT_LINGER_MS + 1)).toThrow(/quitLingerMs must be at most 3000 ms/);
    expect(node(MAX_QUIT_LINGER_MS).engine.config.protocol.quitLingerMs).toBe(MAX_QUIT_LINGER_MS);
  });
});

describe('a peer that cannot be reached', () => {
  it('is given up after the connect timeout, reported with its reason, and re-dialled after a wait that doubles', async () => {
    const GHOST = 77;
    // The node's clock runs ahead of the real one by this much: the test moves it past the waits.
    let skewMs = 0;
    const offersTo = new Map<PeerId, number>();
    const failures: ConnectFailure[] = [];
    const node = new MeshNode({
      id: 70,
      sourceId: SOURCE_ID,
      role: 'member',
      targetLoadSlices: 16,
      maxLoadSlices: 24,
      // Walks expire fast, so the engine soon starts another from its only bootstrap peer: the ghost.
      protocol: { ...LIVE_PROTOCOL, walkTimeoutMs: 600 },
      seed: 70,
      rtcConfig: LOOPBACK_RTC,
      connectTimeoutMs: 400,
      now: () => performance.now() + skewMs,
      // Signalling to the ghost goes nowhere: it never answers.
      signal: (to: PeerId, data: SignalData) => {
        if (data.type === 'offer') offersTo.set(to, (offersTo.get(to) ?? 0) + 1);
      },
      requestBootstrap: () => undefined,
      deliver: () => undefined,
      onConnectFailure: (failure) => failures.push(failure),
    });
    running = [node];
    node.start();
    node.bootstrap([GHOST]);
    await until(() => failures.length > 0, 10_000, 'the dial to give up');
    expect(failures[0]).toMatchObject({ peer: GHOST, reason: 'connect-timeout', initiator: true });
    expect(failures[0]?.afterMs).toBeGreaterThanOrEqual(390);
    expect(failures[0]?.afterMs).toBeLessThan(3000);
    expect(node.counters.connectFailures).toBe(1);
    expect(node.connectivity().failed).toBe(1);
    // The engine walks again (its bootstrap list still names the ghost): refused, told at once.
    await until(() => node.counters.dialsBackedOff > 0, 10_000, 'a re-dial to be refused');
    expect(offersTo.get(GHOST)).toBe(1);
    expect(failures).toHaveLength(1);
    expect(node.openPeers).toBe(0);
    // The waits below are real seconds inside the first backoff.
    expect(FIRST_DIAL_BACKOFF_MS).toBeGreaterThanOrEqual(4_000);
    expect(DIAL_BACKOFF_MS).toBeGreaterThanOrEqual(2 * FIRST_DIAL_BACKOFF_MS);
    // A fresh bootstrap list leaves it out while it backs off.
    const before = node.counters.dialsBackedOff;
    node.bootstrap([GHOST]);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(offersTo.get(GHOST)).toBe(1);
    expect(node.counters.dialsBackedOff).toBe(before);
    // Past the first wait it is dialled again (the first failure may have been a one-off race).
    skewMs += FIRST_DIAL_BACKOFF_MS;
    node.bootstrap([GHOST]);
    await until(() => failures.length > 1, 10_000, 'the second dial to give up');
    expect(offersTo.get(GHOST)).toBe(2);
    // A second failure in a row doubles the wait: one first wait later, it is still left out...
    skewMs += FIRST_DIAL_BACKOFF_MS + 100;
    node.bootstrap([GHOST]);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(offersTo.get(GHOST)).toBe(2);
    // ...and dialled once the doubled wait is over.
    skewMs += FIRST_DIAL_BACKOFF_MS;
    node.bootstrap([GHOST]);
    await until(() => (offersTo.get(GHOST) ?? 0) > 2, 10_000, 'the third dial');
    expect(failures.length).toBeLessThanOrEqual(3);
  }, 40_000);
});

describe('a misbehaving peer', () => {
  it('is cut off after three undecodable messages and cannot dial again', async () => {
    const { default: SimplePeer } = await import('@thaunknown/simple-peer/lite.js');
    const LIAR = 99;
    // Without trickle the offer carries what was gathered when it goes: wait for gathering to
    // complete (a 200 ms cap sent offers without candidates when the machine was busy, and the
    // test hung waiting for a connection that could not be made).
    let liar = new SimplePeer({
      initiator: true,
      trickle: false,
      iceCompleteTimeout: 5000,
      config: LOOPBACK_RTC,
    });
    const node = new MeshNode({
      id: 50,
      sourceId: SOURCE_ID,
      role: 'member',
      targetLoadSlices: 16,
      maxLoadSlices: 24,
      protocol: LIVE_PROTOCOL,
      seed: 50,
      rtcConfig: LOOPBACK_RTC,
      signal: (_to: PeerId, data: SignalData) => {
        liar.signal(data);
      },
      requestBootstrap: () => undefined,
      deliver: () => undefined,
    });
    running = [node];
    node.start();
    const dial = (): void => {
      liar.on('signal', (data) => {
        node.handleSignal(LIAR, { ...(data as SignalData), link: 7 });
      });
    };
    dial();
    let connected = false;
    liar.on('connect', () => {
      connected = true;
    });
    await until(() => connected, 15_000, 'the liar to connect');
    expect(node.openPeerIds()).toEqual([LIAR]);
    // The far end's view of the close (node-datachannel reports it as an error, "User-Initiated
    // Abort") is not waited for: on CI's loaded run it once did not come within 10 s. What is ours
    // to check is that the node dropped the link and holds no other to the liar.
    liar.on('error', () => undefined);
    for (let i = 0; i < 3; i++) liar.send(new Uint8Array([0xff, 0xee, i]));
    await until(() => node.counters.peersCutOff === 1, 10_000, 'the liar to be cut off');
    expect(node.counters.badMessages).toBe(3);
    // The cut-off goes into the next report to the tracker, once.
    expect(node.takeCutOffs()).toHaveLength(1);
    expect(node.takeCutOffs()).toEqual([]);
    expect(node.openPeers).toBe(0);
    expect(node.openPeerIds()).toEqual([]);
    expect(node.connectingPeerIds()).toEqual([]);
    // A new offer from the same peer is ignored: no connection is made for it.
    liar = new SimplePeer({
      initiator: true,
      trickle: false,
      iceCompleteTimeout: 5000,
      config: LOOPBACK_RTC,
    });
    liar.on('error', () => undefined);
    dial();
    await new Promise((r) => setTimeout(r, 1500));
    expect(liar.connected).toBe(false);
    expect(node.openPeers).toBe(0);
    expect(node.connectingPeerIds()).toEqual([]);
    liar.destroy();
  }, 45_000);
});

describe('a member that corrupts what it forwards', () => {
  it('is caught by its children before anything is forwarded on, and cut off', async () => {
    const LIAR = 33;
    // Test payloads are one byte value repeated; the liar inverts every byte after the 8-byte media
    // header, so a packet is genuine exactly when it is uniform.
    const uniform = (p: Uint8Array): boolean => p.every((b) => b === p[0]);
    const { source, members } = swarm(
      [31, 32, LIAR, 34, 35, 36],
      () => 24,
      () => ({
        inspectData: (_slice: number, _seq: number, payload: Uint8Array) =>
          uniform(payload) ? 'accept' : 'reject',
      }),
      (id) => (id === LIAR ? { corruptForwardedData: true } : {}),
    );
    running = [source, ...[...members.values()].map((m) => m.node)];
    for (const m of members.values()) m.node.start();
    source.start();
    let published = 0;
    const publisher = setInterval(() => {
      for (let i = 0; i < 16; i++) source.publish(new Uint8Array(200).fill(published++ % 251));
    }, 100);
    const honest = [...members.entries()].filter(([id]) => id !== LIAR).map(([, m]) => m);
    try {
      await until(
        () => honest.some((m) => m.node.counters.peersCutOff > 0),
        30_000,
        'an honest member to cut the liar off',
      );
      // Whoever cut it off has it for its next tracker report.
      const reporters = honest.filter((m) => m.node.counters.peersCutOff > 0);
      for (const m of reporters) expect(m.node.takeCutOffs()).toContain(LIAR);
      const before = honest.map((m) => m.received.size);
      await until(
        () => honest.every((m, i) => m.received.size > (before[i] ?? 0) + 16),
        20_000,
        'every honest member to keep receiving after the cut-off',
      );
    } finally {
      clearInterval(publisher);
    }
    for (const m of honest) for (const payload of m.received.values()) expect(uniform(payload)).toBe(true);
    const forged = honest.reduce((sum, m) => sum + m.node.counters.forgedPackets, 0);
    expect(forged).toBeGreaterThanOrEqual(3);
  }, 60_000);
});

describe('injected loss (internal fault dropReceivedDataFraction)', () => {
  it('refuses a fraction outside 0‥1', () => {
    for (const bad of [-0.1, 1.5, Number.NaN])
      expect(
        () =>
          new MeshNode(
            injectFaults(
              {
                id: 1,
                sourceId: SOURCE_ID,
                role: 'member',
                targetLoadSlices: 16,
                maxLoadSlices: 24,
                protocol: LIVE_PROTOCOL,
                seed: 1,
                rtcConfig: LOOPBACK_RTC,
                signal: () => undefined,
                requestBootstrap: () => undefined,
                deliver: () => undefined,
              },
              { dropReceivedDataFraction: bad },
            ),
          ),
      ).toThrow(RangeError);
  });

  it('drops about that share of the data a member receives, and only at that member', async () => {
    const LOSSY = 62;
    const { source, members } = swarm(
      [61, LOSSY, 63, 64],
      () => 24,
      () => ({}),
      (id) => (id === LOSSY ? { dropReceivedDataFraction: 0.3 } : {}),
    );
    running = [source, ...[...members.values()].map((m) => m.node)];
    for (const m of members.values()) m.node.start();
    source.start();
    let published = 0;
    const publisher = setInterval(() => {
      for (let i = 0; i < 16; i++) source.publish(new Uint8Array(100).fill(published++ % 251));
    }, 100);
    const lossy = members.get(LOSSY);
    if (lossy === undefined) throw new Error('no lossy member');
    try {
      await until(() => lossy.node.counters.injectedLosses >= 30, 30_000, 'losses to be injected');
    } finally {
      clearInterval(publisher);
    }
    const losses = lossy.node.counters.injectedLosses;
    const arrived = lossy.node.counters.messagesReceived;
    // Every dropped message was received first (and counted), control messages included, so the
    // share of all messages is below 0.3; it must be well above 0 and not everything.
    expect(losses / arrived).toBeGreaterThan(0.05);
    expect(losses / arrived).toBeLessThan(0.3 + 0.1);
    for (const [id, m] of members) if (id !== LOSSY) expect(m.node.counters.injectedLosses).toBe(0);
  }, 60_000);
});
