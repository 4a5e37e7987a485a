/**
 * The rendezvous protocol end to end: a real tracker on 127.0.0.1 and `ws` clients. Every wait is
 * for an event (a frame, a close) bounded by a timeout; "nothing arrived" is shown by a later round
 * trip on the same socket, which the tracker answers only after anything sent to it before.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import {
  announcementSigningBytes,
  MAX_RECENT_ANNOUNCEMENTS,
  MAX_SDP_BYTES,
  MAX_TRACKER_FRAME_BYTES,
  type ClientMessage,
  type PeerReport,
  type SegmentAnnouncement,
  type SignedAnnouncement,
} from '@chunkycast/wire';
import {
  generateSigningKeys,
  type SigningKeys,
  type Tracker,
  type TrackerOptions,
} from '@chunkycast/tracker';
import {
  AUTH,
  cleanUpAfterEach,
  connect,
  KEY,
  start as startTracker,
  within,
  WAIT_MS,
  type Client,
} from './ws-client.js';

let keys: SigningKeys;
let otherKeys: SigningKeys;
beforeAll(async () => {
  keys = await generateSigningKeys();
  otherKeys = await generateSigningKeys();
});
cleanUpAfterEach();

/** A tracker that checks announcements against `keys`. */
/** A report with nothing in it (no trees, no bytes). */
const EMPTY_REPORT: PeerReport = {
  parents: [],
  children: [],
  meshBytes: 0,
  originBytes: 0,
  uploadBytes: 0,
  stalls: 0,
  playing: false,
};

async function start(options: Partial<TrackerOptions> = {}): Promise<Tracker> {
  return startTracker({ publicKey: keys.publicKeyBase64, ...options });
}

async function sign(a: SegmentAnnouncement, with_: SigningKeys = keys): Promise<SignedAnnouncement> {
  const signature = await crypto.subtle.sign(
    'Ed25519',
    with_.privateKey,
    new Uint8Array(announcementSigningBytes(a)),
  );
  return { ...a, signature: Buffer.from(signature).toString('base64') };
}

function segment(stream: string, sequence: number): SegmentAnnouncement {
  return {
    stream,
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

describe('joining', () => {
  it('assigns unique non-zero ids and tells every viewer the reserved source id', async () => {
    const tracker = await start();
    const welcomes = [];
    for (let i = 0; i < 12; i++) welcomes.push(await (await connect(tracker)).join(i % 2 === 0 ? 'a' : 'b'));
    const ids = welcomes.map((w) => w.peerId);
    const sourceA = welcomes[0]!.sourceId;
    const sourceB = welcomes[1]!.sourceId;
    expect(new Set([...ids, sourceA, sourceB]).size).toBe(14);
    for (const id of [...ids, sourceA, sourceB]) {
      expect(id).toBeGreaterThan(0);
      expect(id).toBeLessThanOrEqual(0xffff_ffff);
    }
    for (const [i, w] of welcomes.entries()) {
      expect(w.sourceId).toBe(i % 2 === 0 ? sourceA : sourceB);
      expect(w.stream).toBe(i % 2 === 0 ? 'a' : 'b');
      expect(w.publicKey).toBe(keys.publicKeyBase64);
      expect(w.announcements).toEqual([]);
    }
  });

  it('gives the source the id viewers already know, and only with the right key', async () => {
    const tracker = await start();
    const viewer = await connect(tracker);
    const { sourceId } = await viewer.join('s');

    const source = await connect(tracker);
    source.send({ type: 'join', stream: 's', role: 'source' });
    await source.error('badKey');
    source.send({ type: 'join', stream: 's', role: 'source', key: 'wrong' });
    await source.error('badKey');
    // Still open and unjoined: it may retry.
    source.send({ type: 'bootstrap', count: 1 });
    await source.error('notJoined');
    const welcome = await source.join('s', 'source', KEY);
    expect(welcome.peerId).toBe(sourceId);
    expect(welcome.sourceId).toBe(sourceId);

    const second = await connect(tracker);
    second.send({ type: 'join', stream: 's', role: 'source', key: KEY });
    await second.error('sourcePresent');
    source.send({ type: 'join', stream: 's', role: 'viewer' });
    await source.error('alreadyJoined');
    expect(tracker.metrics().errors.badKey).toBe(2);
  });

  it('answers anything but join before joining with notJoined', async () => {
    const tracker = await start();
    const c = await connect(tracker);
    for (const frame of [
      { type: 'bootstrap', count: 3 },
      { type: 'signal', to: 5, data: { type: 'offer', sdp: 'v=0' } },
      { type: 'leave' },
      { type: 'report', report: EMPTY_REPORT },
    ]) {
      c.send(frame);
      await c.error('notJoined');
    }
  });

  it('frees a left viewer, keeps the source id while the swarm lives and drops an empty swarm', async () => {
    const tracker = await start();
    const a = await connect(tracker);
    const b = await connect(tracker);
    const wa = await a.join('x');
    const wb = await b.join('x');
    a.send({ type: 'leave' });
    expect(await b.bootstrap()).toEqual([]);
    // The leaver gets nothing back for leave; its next request shows it is unjoined.
    a.send({ type: 'bootstrap', count: 1 });
    await a.error('notJoined');
    expect(tracker.debugSwarm('x')?.members.map((m) => m.peerId)).toEqual([wb.peerId]);
    // Rejoining is allowed and gives a new id in the same swarm.
    const again = await a.join('x');
    expect(again.sourceId).toBe(wa.sourceId);
    expect(again.peerId).not.toBe(wb.peerId);
    a.close();
    b.close();
    await within(Promise.all([a.closed, b.closed]), 'clients closed');
    // The server processes the close after the client sees it; poll the debug view briefly.
    const deadline = Date.now() + WAIT_MS;
    while (tracker.debugSwarm('x') !== null && Date.now() < deadline)
      await new Promise((r) => setImmediate(r));
    expect(tracker.debugSwarm('x')).toBeNull();
    const res = await fetch(`${tracker.url}/debug/swarm/x`, { headers: AUTH });
    expect(res.status).toBe(404);
  });
});

describe('bootstrap', () => {
  it('offers random members of the same swarm, never the requester, the source or other swarms', async () => {
    const tracker = await start();
    const source = await connect(tracker);
    await source.join('main', 'source', KEY);
    const viewers = await Promise.all(Array.from({ length: 6 }, () => connect(tracker)));
    const ids: number[] = [];
    for (const v of viewers) ids.push((await v.join('main')).peerId);
    const other = await connect(tracker);
    const otherId = (await other.join('other')).peerId;

    const first = viewers[0]!;
    const all = await first.bootstrap(64);
    expect(new Set(all)).toEqual(new Set(ids.slice(1)));
    for (let i = 0; i < 10; i++) {
      const some = await first.bootstrap(3);
      expect(some).toHaveLength(3);
      expect(new Set(some).size).toBe(3);
      for (const id of some) expect(ids.slice(1)).toContain(id);
    }
    expect(new Set(await source.bootstrap(64))).toEqual(new Set(ids));
    expect(await other.bootstrap(64)).toEqual([]);
    expect(ids).not.toContain(otherId);
  });
});

describe('signalling', () => {
  it('relays within a swarm (the source included) and refuses peers of other swarms', async () => {
    const tracker = await start();
    const a = await connect(tracker);
    const b = await connect(tracker);
    const c = await connect(tracker);
    const source = await connect(tracker);
    const wa = await a.join('one');
    const wb = await b.join('one');
    const wc = await c.join('two');
    await source.join('one', 'source', KEY);

    const offer = { type: 'offer', sdp: 'v=0\r\n' } as const;
    a.send({ type: 'signal', to: wb.peerId, data: offer });
    expect(await b.next('signal')).toEqual({ type: 'signal', from: wa.peerId, data: offer });

    const candidate = {
      type: 'candidate',
      candidate: { candidate: 'candidate:1 1 udp 1 127.0.0.1 9 typ host', sdpMLineIndex: 0, sdpMid: '0' },
    } as const;
    a.send({ type: 'signal', to: wa.sourceId, data: candidate });
    expect(await source.next('signal')).toEqual({ type: 'signal', from: wa.peerId, data: candidate });

    a.send({ type: 'signal', to: wc.peerId, data: offer });
    await a.error('unknownPeer');
    a.send({ type: 'signal', to: 12345, data: offer });
    await a.error('unknownPeer');
    // c's round trip is answered after anything the refused signal could have produced.
    await c.bootstrap();
    expect(c.pending()).toEqual([]);
    expect(tracker.metrics().signalsRelayed).toBe(2);
  });
});

describe('members cut off by their neighbours', () => {
  it('once three members report a peer cut off, nobody is introduced to it and no new signal reaches it or leaves it', async () => {
    const tracker = await start();
    const clients = [];
    for (let i = 0; i < 5; i++) clients.push(await connect(tracker));
    const welcomes = [];
    for (const c of clients) welcomes.push(await c.join('cut'));
    const [a, b, c, d, flooder] = clients as [Client, Client, Client, Client, Client];
    const bad = welcomes[4]!.peerId;
    const report = (cutOff: number[]): ClientMessage => ({
      type: 'report',
      report: { ...EMPTY_REPORT, playing: true, cutOff },
    });
    const offer = { type: 'offer', sdp: 'v=0\r\n' } as const;
    // Two reports (and one repeated) do not ban: signals still pass.
    a.send(report([bad]));
    a.send(report([bad]));
    b.send(report([bad]));
    await b.bootstrap();
    d.send({ type: 'signal', to: bad, data: offer });
    expect(await flooder.next('signal')).toEqual({ type: 'signal', from: welcomes[3]!.peerId, data: offer });
    // The third distinct reporter bans it.
    c.send(report([bad]));
    await c.bootstrap();
    expect(tracker.metrics().peersBannedForCutOffs).toBe(1);
    d.send({ type: 'signal', to: bad, data: offer });
    await d.error('forbidden');
    flooder.send({ type: 'signal', to: welcomes[0]!.peerId, data: offer });
    await flooder.error('forbidden');
    for (let i = 0; i < 5; i++) expect(await d.bootstrap()).not.toContain(bad);
    expect(tracker.metrics().signalsRefusedCutOff).toBe(2);
    // Reports against the true source never ban it.
    const source = await connect(tracker);
    await source.join('cut', 'source', KEY);
    for (const reporter of [a, b, c]) reporter.send(report([welcomes[0]!.sourceId]));
    await c.bootstrap();
    expect(tracker.metrics().peersBannedForCutOffs).toBe(1);
    source.send({ type: 'signal', to: welcomes[1]!.peerId, data: offer });
    expect(await b.next('signal')).toEqual({ type: 'signal', from: welcomes[0]!.sourceId, data: offer });
    expect(a.pending()).toEqual([]);
  });
});

describe('announcements', () => {
  it('are the source’s alone, signature-checked, broadcast to viewers and kept for joiners', async () => {
    const tracker = await start();
    const viewer = await connect(tracker);
    await viewer.join('live');
    const source = await connect(tracker);
    await source.join('live', 'source', KEY);

    const good = await sign(segment('live', 1));
    viewer.send({ type: 'announce', announcement: good });
    await viewer.error('forbidden');

    source.send({ type: 'announce', announcement: await sign(segment('live', 2), otherKeys) });
    await source.error('invalidField');
    source.send({ type: 'announce', announcement: { ...good, bytes: good.bytes + 1 } });
    await source.error('invalidField');
    source.send({ type: 'announce', announcement: await sign(segment('elsewhere', 3)) });
    await source.error('invalidField');

    source.send({ type: 'announce', announcement: good });
    expect((await viewer.next('announce')).announcement).toEqual(good);
    // Nothing refused reached the viewer: the good one was the first announce it saw.
    expect(viewer.pending()).toEqual([]);
    // The source does not hear its own announcements.
    await source.bootstrap();
    expect(source.pending()).toEqual([]);

    const debug = tracker.debugSwarm('live');
    expect(debug?.announcements).toBe(1);
    expect(debug?.lastAnnouncement).toEqual(good);
  });

  it('keeps the last 16, oldest first, for viewers who join later', async () => {
    const tracker = await start();
    const source = await connect(tracker);
    await source.join('ring', 'source', KEY);
    const sent: SignedAnnouncement[] = [];
    for (let i = 0; i < MAX_RECENT_ANNOUNCEMENTS + 4; i++) {
      const a = await sign(segment('ring', 100 + i));
      sent.push(a);
      source.send({ type: 'announce', announcement: a });
    }
    await source.bootstrap(); // every announce before this was handled
    expect(source.pending()).toEqual([]);
    const late = await (await connect(tracker)).join('ring');
    expect(late.announcements).toEqual(sent.slice(-MAX_RECENT_ANNOUNCEMENTS));
  });

  it('are relayed unchecked when the tracker knows no key, and welcome says so', async () => {
    const tracker = await start({ publicKey: null });
    const viewer = await connect(tracker);
    expect((await viewer.join('k')).publicKey).toBeNull();
    const source = await connect(tracker);
    await source.join('k', 'source', KEY);
    const a = await sign(segment('k', 1), otherKeys);
    source.send({ type: 'announce', announcement: a });
    expect((await viewer.next('announce')).announcement).toEqual(a);
  });
});

describe('reports and the debug view', () => {
  it('stores each member’s latest report and serves the swarm as JSON', async () => {
    const tracker = await start();
    const source = await connect(tracker);
    const ws = await source.join('dbg', 'source', KEY);
    const viewer = await connect(tracker);
    const wv = await viewer.join('dbg');
    const report = {
      parents: [ws.peerId, null],
      children: [[], [12]],
      meshBytes: 10,
      originBytes: 20,
      uploadBytes: 30,
      stalls: 1,
      playing: true,
    };
    viewer.send({ type: 'report', report: { ...report, stalls: 0 } });
    viewer.send({ type: 'report', report });
    await viewer.bootstrap();
    const res = await fetch(`${tracker.url}/debug/swarm/dbg`, { headers: AUTH });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      stream: string;
      sourceId: number;
      sourceConnected: boolean;
      members: { peerId: number; role: string; joinedAtMs: number; report: unknown }[];
      announcements: number;
    };
    expect(body.stream).toBe('dbg');
    expect(body.sourceId).toBe(ws.peerId);
    expect(body.sourceConnected).toBe(true);
    expect(body.announcements).toBe(0);
    expect(body.members.map((m) => [m.peerId, m.role, m.report])).toEqual([
      [ws.peerId, 'source', null],
      [wv.peerId, 'viewer', report],
    ]);
    expect((await fetch(`${tracker.url}/debug/swarm/..%2f`, { headers: AUTH })).status).toBe(400);
    const health = await fetch(`${tracker.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ ok: true, swarms: 1, connections: 2 });
  });
});

describe('bad input', () => {
  const cases: { name: string; frame: () => unknown; code: string }[] = [
    { name: 'malformed JSON', frame: () => '{"type":"join",', code: 'malformed' },
    { name: 'a binary frame', frame: () => Buffer.from([1, 2, 3]), code: 'malformed' },
    { name: 'an unknown type', frame: () => ({ type: 'teleport' }), code: 'unknownType' },
    {
      name: 'an oversized SDP',
      frame: () => ({ type: 'signal', to: 1, data: { type: 'offer', sdp: 'x'.repeat(MAX_SDP_BYTES + 1) } }),
      code: 'invalidField',
    },
    { name: 'a frame over 64 KiB', frame: () => 'x'.repeat(MAX_TRACKER_FRAME_BYTES + 1), code: 'tooLarge' },
    {
      name: 'a frame far over 64 KiB',
      frame: () => 'é'.repeat(2 * MAX_TRACKER_FRAME_BYTES),
      code: 'tooLarge',
    },
    {
      name: 'a wrong broadcaster key',
      frame: () => ({ type: 'join', stream: 's', role: 'source', key: 'nope' }),
      code: 'badKey',
    },
  ];
  for (const c of cases)
    it(`answers ${c.name} with a clear error and keeps serving everyone`, async () => {
      const tracker = await start();
      const bystander = await connect(tracker);
      const { peerId } = await bystander.join('s');
      const culprit = await connect(tracker);
      culprit.send(c.frame());
      await culprit.error(c.code);
      expect(tracker.metrics().errors[c.code as 'malformed']).toBe(1);
      // The culprit's connection stays and works.
      expect((await culprit.join('s')).sourceId).toBeGreaterThan(0);
      expect(await bystander.bootstrap()).toHaveLength(1);
      const newcomer = await connect(tracker);
      expect((await newcomer.join('s')).peerId).not.toBe(peerId);
    });

  it('disconnects a socket after too many bad frames, with 1008', async () => {
    const tracker = await start({ maxBadFrames: 5 });
    const bystander = await connect(tracker);
    await bystander.join('s');
    const culprit = await connect(tracker);
    for (let i = 0; i < 5; i++) culprit.send('nope');
    for (let i = 0; i < 5; i++) await culprit.error('malformed');
    expect((await within(culprit.closed, 'culprit closed')).code).toBe(1008);
    expect(tracker.metrics().disconnects.badFrames).toBe(1);
    expect(tracker.metrics().limitHits.badFrames).toBe(1);
    expect(await bystander.bootstrap()).toEqual([]);
  });

  it('closes a socket sending beyond what ws buffers, and keeps serving others', async () => {
    const tracker = await start();
    const bystander = await connect(tracker);
    await bystander.join('s');
    const culprit = await connect(tracker);
    culprit.send('x'.repeat(8 * MAX_TRACKER_FRAME_BYTES));
    expect((await within(culprit.closed, 'culprit closed')).code).toBe(1009);
    expect(await bystander.bootstrap()).toEqual([]);
  });
});

describe('keep-alive and shutdown', () => {
  it('terminates a socket that misses two pongs and keeps one that answers', async () => {
    const tracker = await start({ heartbeatMs: 40 });
    const alive = await connect(tracker);
    await alive.join('hb');
    const silent = await connect(tracker, { autoPong: false });
    await silent.join('hb');
    await within(silent.closed, 'silent socket terminated');
    expect(tracker.metrics().disconnects.heartbeat).toBe(1);
    expect(await alive.bootstrap()).toEqual([]);
  });

  it('pings in slices over the round, yet still drops only the silent among many sockets', async () => {
    // 400 ms rounds cut into 4 ticks of 100 ms: each tick pings a quarter of the 12 sockets.
    const tracker = await start({ heartbeatMs: 400 });
    const alive = await Promise.all(Array.from({ length: 11 }, () => connect(tracker)));
    for (const client of alive) await client.join('hb-sliced');
    const silent = await connect(tracker, { autoPong: false });
    await silent.join('hb-sliced');
    await within(silent.closed, 'silent socket terminated');
    expect(tracker.metrics().disconnects.heartbeat).toBe(1);
    for (const client of alive) expect((await client.bootstrap()).length).toBe(10);
  });

  it('pings each socket once per round however few there are', async () => {
    // 400 ms rounds of 4 ticks: two sockets are pinged once each per 400 ms, not at every tick.
    const tracker = await start({ heartbeatMs: 400 });
    const clients = [await connect(tracker), await connect(tracker)];
    const pings = [0, 0];
    for (const [i, client] of clients.entries())
      client.ws.on('ping', () => {
        pings[i] = (pings[i] ?? 0) + 1;
      });
    await new Promise((r) => setTimeout(r, 2000));
    // 2 s is 5 rounds; one more for a round that had just begun.
    for (const count of pings) {
      expect(count).toBeGreaterThanOrEqual(4);
      expect(count).toBeLessThanOrEqual(6);
    }
  });

  it('closes every client with 1012 (service restart) and stops listening', async () => {
    const tracker = await start();
    const a = await connect(tracker);
    await a.join('bye');
    const b = await connect(tracker);
    await tracker.close();
    expect(await within(a.closed, 'a closed')).toEqual({ code: 1012, reason: 'service restart' });
    expect((await within(b.closed, 'b closed')).code).toBe(1012);
    expect(tracker.metrics().disconnects.shutdown).toBe(2);
    await expect(fetch(`${tracker.url}/healthz`)).rejects.toThrow();
    await tracker.close(); // idempotent
  });
});
