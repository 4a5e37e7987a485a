import { describe, expect, it } from 'vitest';
import {
  ForcedReason,
  LinkDirection,
  LinkOp,
  MessageType,
  RejectReason,
  SEQ_NONE,
  SwitchReason,
  type PeerId,
} from '@chunkycast/wire';
import { bloomMaskFor, LatencyEstimate, type ProtocolConfig } from '../src/index.js';
import { dataMessage, Solo, type SliceAdvert } from './solo.js';

const N = 50; // TL 8, Lat2: LLT 7, ULT 9, ML 12
const A = 101; // parent on slice 0
const B = 102; // parent on slice 1
const E = 103; // neighbour that gets slice 0 earlier

interface PeerScript {
  load: number;
  /** Relative arrival offset advertised per slice (ms), or undefined = not receiving. */
  offsets: Partial<Record<number, number>>;
  /** Path estimate advertised per slice (ms); unknown where not given. */
  paths?: Partial<Record<number, number>>;
}

/**
 * N with two slices, parents A (slice 0) and B (slice 1), and neighbour E. The test plays A, B, E:
 * parents send one packet per slice every 100 ms; every peer answers each of N's adverts 300 ms
 * later with its own, echoing N's so N measures a 100 ms round trip to everyone. The estimate is the
 * thesis's measured offsets unless the protocol given says otherwise (the path estimate's own tests
 * script `paths`).
 */
class LatencyRig {
  readonly solo: Solo;
  readonly peers = new Map<PeerId, PeerScript>([
    [A, { load: 8, offsets: { 0: 100 } }],
    [B, { load: 8, offsets: { 1: 0 } }],
    [E, { load: 5, offsets: { 0: -150 } }],
  ]);
  /** Who sends each slice's packets to N, and how many packets ahead of the "official" seq it is. */
  readonly senders: { peer: PeerId; slice: number; lead: number }[] = [
    // Slice 0 reaches N 200 ms after slice 1 of the same block, so N measures offsets +100 / −100.
    // Via E (offset −150, half RTT 50) slice 0 would come at −100: a 200 ms gain.
    { peer: A, slice: 0, lead: -2 },
    { peer: B, slice: 1, lead: 0 },
  ];
  private nextSeq = 0;
  private readonly answered = new Map<PeerId, number>();

  constructor(protocol: Partial<ProtocolConfig> = {}, loads: Partial<Record<PeerId, number>> = {}) {
    for (const [peer, load] of Object.entries(loads))
      if (load !== undefined) this.peers.get(Number(peer))!.load = load;
    this.solo = new Solo({
      id: N,
      role: 'member',
      targetLoadSlices: 8,
      protocol: { slices: 2, latencyEstimate: LatencyEstimate.Offset, ...protocol },
    });
    this.solo.startWith([A, B, E]);
    this.solo.advance(1000);
    // Parents first: A's advert makes N ask A for slice 0, B's for slice 1.
    for (const [peer, slice] of [
      [A, 0],
      [B, 1],
    ] as const) {
      this.solo.feed(peer, this.advert(peer));
      const requests = this.solo.sendsOf(MessageType.ForcedParentRequest).filter((r) => r.to === peer);
      expect(requests.map((r) => r.message.slice)).toEqual([slice]);
      this.solo.feed(peer, {
        type: MessageType.SwitchReply,
        slice,
        handoffSeq: 0,
        accepted: true,
        rejectReason: RejectReason.None,
        load: 8,
      });
    }
    expect(this.solo.engine.parents()).toEqual([A, B]);
  }

  advert(peer: PeerId): ReturnType<Solo['advertFrom']> {
    const script = this.peers.get(peer)!;
    const slices: Record<number, SliceAdvert> = {};
    for (const [s, offset] of Object.entries(script.offsets)) {
      if (offset !== undefined)
        slices[Number(s)] = {
          receiving: true,
          offsetMs: offset,
          pathMs: script.paths?.[Number(s)] ?? null,
          filter: bloomMaskFor(900),
        };
    }
    return this.solo.advertFrom(peer, {
      load: script.load,
      lower: 7,
      upper: 9,
      maxLoad: 12,
      slices,
      rttMs: 100,
    });
  }

  /** Run in 50 ms steps until `time`. */
  run(time: number): void {
    for (let t = Math.ceil(this.solo.now / 50) * 50 + 50; t <= time; t += 50) {
      this.solo.advance(t);
      if (t % 100 === 0) {
        const seq = this.nextSeq++;
        for (const { peer, slice, lead } of this.senders) {
          if (seq + lead >= 0) this.solo.feed(peer, dataMessage(slice, seq + lead, bloomMaskFor(peer), 2));
        }
      }
      for (const peer of this.peers.keys()) {
        const last = this.solo.lastAdvertTo(peer);
        if (last === undefined || this.answered.get(peer) === last.time || t - last.time < 300) continue;
        this.answered.set(peer, last.time);
        this.solo.feed(peer, this.advert(peer));
      }
    }
  }

  permissionRequests(since = 0) {
    return this.solo.sendsOf(MessageType.LatencyPermissionRequest, since);
  }
}

describe('latency phase (thesis §4.2, fine-tuning latency)', () => {
  // We gate per slice (engine.ts latencyPhase explains why): a slice moves for latency only while its
  // own parent is inside LLT–ULT and stays there without us; the thesis gates on all parents at once.
  it('moves a slice for latency only while that slice’s parent is within LLT–ULT', () => {
    // E is earlier on both slices; B (slice 1's parent) is above ULT, A (slice 0's) is in range.
    const rig = new LatencyRig({}, { [B]: 10 });
    rig.peers.get(E)!.offsets = { 0: -150, 1: -350 }; // 200 ms better than N's own on both slices
    rig.run(6000);
    const first = rig.permissionRequests();
    expect(first.length).toBeGreaterThanOrEqual(1);
    expect(first.every((r) => r.to === A && r.message.slice === 0)).toBe(true);
    // Refuse A's permission so slice 0 stays; slice 1 must still never be offered while B is out of range.
    rig.peers.get(A)!.load = 7; // at LLT: losing a child would push A below it
    rig.solo.feed(A, { type: MessageType.LatencyPermissionReply, slice: 0, target: E, granted: false });
    rig.run(8000); // A's new load reaches N with its next advert
    const since = rig.solo.mark();
    rig.run(10_000);
    expect(rig.permissionRequests(since)).toEqual([]);
    rig.peers.get(B)!.load = 6; // below LLT (7)
    rig.run(13_000);
    expect(rig.permissionRequests(since)).toEqual([]);
    rig.peers.get(B)!.load = 8; // in range: now slice 1 may move
    const later = rig.solo.mark();
    rig.run(16_000);
    const requests = rig.permissionRequests(later);
    expect(requests.length).toBeGreaterThanOrEqual(1);
    expect(requests[0]!.to).toBe(B);
    expect(requests[0]!.message).toMatchObject({ slice: 1, target: E, parentLoadSeen: 8 });
  });

  it('asks the parent, then switches to the neighbour that gets the slice earlier', () => {
    const rig = new LatencyRig();
    rig.run(4000);
    const asks = rig.permissionRequests();
    expect(asks.length).toBeGreaterThanOrEqual(1);
    expect([asks[0]!.to, asks[0]!.message.slice, asks[0]!.message.target]).toEqual([A, 0, E]);
    // No switch request before the parent grants.
    expect(rig.solo.sendsOf(MessageType.SwitchRequest)).toEqual([]);
    const since = rig.solo.mark();
    rig.solo.feed(A, { type: MessageType.LatencyPermissionReply, slice: 0, target: E, granted: true });
    const requests = rig.solo.sendsOf(MessageType.SwitchRequest, since);
    expect(requests.map((r) => r.to)).toEqual([E]);
    const request = requests[0]!.message;
    expect(request).toMatchObject({
      slice: 0,
      reason: SwitchReason.Latency,
      targetLoadSeen: 5,
      parentLoadSeen: 8,
    });
    const highest = Math.max(
      ...rig.solo
        .deliveries()
        .filter((d) => d.slice === 0)
        .map((d) => d.seq),
    );
    expect(request.handoffSeq).toBeGreaterThan(highest);

    rig.solo.feed(E, {
      type: MessageType.SwitchReply,
      slice: 0,
      handoffSeq: request.handoffSeq,
      accepted: true,
      rejectReason: RejectReason.None,
      load: 6,
    });
    expect(rig.solo.engine.parents()).toEqual([E, B]);
    expect(
      rig.solo.sendsOf(MessageType.SwitchComplete, since).map((r) => [r.to, r.message.handoffSeq]),
    ).toEqual([[A, request.handoffSeq]]);
    expect(rig.solo.events('parentChanged', since).map((e) => e.event)).toEqual([
      { type: 'parentChanged', slice: 0, parent: E, previous: A, switchKind: 'latency' },
    ]);
    expect(rig.solo.engine.counters.switchesLatency).toBe(1);

    // A keeps sending up to the hand-off, E from it on (both in step here): each packet once.
    rig.senders.push({ peer: E, slice: 0, lead: 0 });
    rig.run(rig.solo.now + 4000);
    const slice0 = rig.solo.deliveries().filter((d) => d.slice === 0);
    const seqs = slice0.map((d) => d.seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    for (let q = 0; q <= Math.max(...seqs); q++) expect(seqs).toContain(q);
    for (const d of slice0) expect(d.from).toBe(d.seq < request.handoffSeq ? A : E);
  });

  it('loses no packet when switching to a parent that is ahead (the very reason for the switch)', () => {
    const rig = new LatencyRig();
    // E really is 200 ms ahead: it forwards each packet two slots (200 ms) before A does.
    rig.senders.push({ peer: E, slice: 0, lead: 2 });
    rig.run(4000);
    expect(rig.permissionRequests().length).toBeGreaterThanOrEqual(1);
    rig.solo.feed(A, { type: MessageType.LatencyPermissionReply, slice: 0, target: E, granted: true });
    const request = rig.solo.sendsOf(MessageType.SwitchRequest).at(-1)!.message;
    rig.solo.feed(E, {
      type: MessageType.SwitchReply,
      slice: 0,
      handoffSeq: request.handoffSeq,
      accepted: true,
      rejectReason: RejectReason.None,
      load: 6,
    });
    rig.run(rig.solo.now + 4000);
    const seqs = new Set(
      rig.solo
        .deliveries()
        .filter((d) => d.slice === 0)
        .map((d) => d.seq),
    );
    const top = Math.max(...seqs);
    const missing: number[] = [];
    for (let q = 0; q <= top; q++) if (!seqs.has(q)) missing.push(q);
    console.info(
      `latency switch to a parent 200 ms ahead, hand-off at ${request.handoffSeq}: missing ${JSON.stringify(missing)}`,
    );
    expect(missing).toEqual([]);
  });

  it('does not switch without the parent’s permission', () => {
    const rig = new LatencyRig();
    rig.run(4000);
    expect(rig.permissionRequests().length).toBeGreaterThanOrEqual(1);
    const since = rig.solo.mark();
    rig.solo.feed(A, { type: MessageType.LatencyPermissionReply, slice: 0, target: E, granted: false });
    expect(rig.solo.sendsOf(MessageType.SwitchRequest, since)).toEqual([]);
    expect(rig.solo.engine.parents()).toEqual([A, B]);
  });

  it('a margin larger than the gain prevents the switch; a smaller one allows it', () => {
    // Gain = (A's offset + rtt/2) − (E's offset + rtt/2) = 100 − (−100) = 200 ms.
    const wide = new LatencyRig({ latencySwitchMarginMs: 250 });
    wide.run(12_000);
    expect(wide.permissionRequests()).toEqual([]);
    const justAbove = new LatencyRig({ latencySwitchMarginMs: 201 });
    justAbove.run(12_000);
    expect(justAbove.permissionRequests()).toEqual([]);
    const narrow = new LatencyRig({ latencySwitchMarginMs: 150 });
    narrow.run(12_000);
    expect(narrow.permissionRequests().length).toBeGreaterThanOrEqual(1);
  });

  it('does not move a slice when the target would go above ULT or the parent below LLT', () => {
    const full = new LatencyRig({}, { [E]: 9 }); // E at ULT: one more child would exceed it
    full.run(8000);
    expect(full.permissionRequests()).toEqual([]);
    const atTarget = new LatencyRig({}, { [E]: 8 }); // at TL, below ULT: the thesis's rule lets it take N
    atTarget.run(8000);
    expect(atTarget.permissionRequests().length).toBeGreaterThanOrEqual(1);
    const lean = new LatencyRig({}, { [A]: 7 }); // A at LLT: losing N would take it below
    lean.run(8000);
    expect(lean.permissionRequests()).toEqual([]);
  });

  it('with latencyPhaseEnds, the target may only fill up to its TL', () => {
    const full = new LatencyRig({ latencyPhaseEnds: 1 }, { [E]: 8 }); // E at TL: one more takes it past
    full.run(8000);
    expect(full.permissionRequests()).toEqual([]);
    const room = new LatencyRig({ latencyPhaseEnds: 1 }, { [E]: 7 }); // one below TL: it may take N
    room.run(8000);
    expect(room.permissionRequests().length).toBeGreaterThanOrEqual(1);
  });
});

describe('the parent side: how long a latency permission counts', () => {
  /**
   * P (TL 8: LLT 7) has nine children on slice 0. C1, C2 and C3 ask a round apart; then C1 asks
   * again; then, 6 s later (two request timeouts, no child having left), C3 again. The answers.
   */
  function answers(latencyPhaseEnds: number): boolean[] {
    const P = 60;
    const children = [1, 2, 3, 4, 5, 6, 7, 8, 9];
    const [C1, C2, C3] = [1, 2, 3] as const;
    const solo = new Solo({
      id: P,
      role: 'member',
      targetLoadSlices: 8,
      protocol: { slices: 1, latencyPhaseEnds },
    });
    solo.startWith([...children, 99]);
    solo.takeChildren(children);
    expect(solo.engine.currentLoad).toBe(9);
    const ask = (child: PeerId): boolean => {
      const since = solo.mark();
      solo.feed(child, {
        type: MessageType.LatencyPermissionRequest,
        slice: 0,
        target: 99,
        parentLoadSeen: 9,
      });
      return solo.sendsOf(MessageType.LatencyPermissionReply, since).at(-1)!.message.granted;
    };
    // Time passes with the children alive (a silent child would be dropped).
    const wait = (ms: number): void => {
      for (const end = solo.now + ms; solo.now < end;) {
        solo.advance(Math.min(end, solo.now + 500));
        for (const c of children) solo.feed(c, { type: MessageType.Heartbeat });
      }
    };
    const out = [ask(C1)];
    wait(1100);
    out.push(ask(C2));
    wait(1100);
    out.push(ask(C3), ask(C1));
    wait(6100);
    expect(solo.engine.currentLoad).toBe(9);
    out.push(ask(C3));
    return out;
  }

  it('with latencyPhaseEnds, a grant counts until the child leaves or it lapses: a parent never grants itself below LLT', () => {
    // C3 would take P to 6 once all three left: refused. C1 asking again is the same grant, not
    // another. After the lapse C3 may go.
    expect(answers(1)).toEqual([true, true, false, true, true]);
  });

  it('by default (the thesis), a grant counts for its decision round only', () => {
    expect(answers(0)).toEqual([true, true, true, true, true]);
  });
});

describe('the path estimate (issue 16; the default)', () => {
  /** A rig comparing path estimates: A's slice-0 estimate `aPathMs`, E's `ePathMs`, B's slice 1 300. */
  function pathRig(aPathMs: number, ePathMs: number, protocol: Partial<ProtocolConfig> = {}): LatencyRig {
    const rig = new LatencyRig({ latencyEstimate: LatencyEstimate.Path, ...protocol });
    rig.peers.get(A)!.paths = { 0: aPathMs };
    rig.peers.get(B)!.paths = { 1: 300 };
    rig.peers.get(E)!.paths = { 0: ePathMs };
    return rig;
  }

  it('advertises its parent’s estimate plus half the round trip to it, and none without one', () => {
    const rig = pathRig(400, 400);
    rig.run(3000);
    // What E knows of N's estimates: full adverts, then deltas with what changed.
    const advertisedTo = (peer: PeerId) => {
      const known: Record<number, number | null> = {};
      for (const a of rig.solo.sendsOf(MessageType.Advert).filter((x) => x.to === peer))
        for (const e of a.message.entries) known[e.slice] = e.pathMs;
      return known;
    };
    expect(advertisedTo(E)).toEqual({ 0: 450, 1: 350 }); // 400 + 100/2, 300 + 100/2
    // A parent whose estimate is unknown leaves ours unknown.
    rig.peers.get(A)!.paths = {};
    rig.run(6000);
    expect(advertisedTo(E)).toEqual({ 0: null, 1: 350 });
  });

  it('switches to the neighbour whose path is shorter by more than the margin (100 ms), and only then', () => {
    // Gain = (A's 400 + 50) − (E's + 50): 250 ms with E at 150, exactly the margin at 300.
    const shorter = pathRig(400, 150);
    shorter.run(4000);
    const asks = shorter.permissionRequests();
    expect(asks.length).toBeGreaterThanOrEqual(1);
    expect([asks[0]!.to, asks[0]!.message.slice, asks[0]!.message.target]).toEqual([A, 0, E]);
    const level = pathRig(400, 300);
    level.run(12_000);
    expect(level.permissionRequests()).toEqual([]);
    const justBelow = pathRig(400, 299);
    justBelow.run(12_000);
    expect(justBelow.permissionRequests().length).toBeGreaterThanOrEqual(1);
  });

  it('ignores the offsets: the same data that makes the offset estimate switch does not, with equal paths', () => {
    // The rig's data and offsets give a 200 ms gain by offsets (the tests above); paths say none.
    const rig = pathRig(400, 400);
    rig.run(12_000);
    expect(rig.permissionRequests()).toEqual([]);
  });

  it('a neighbour with no path estimate is no candidate', () => {
    const rig = new LatencyRig({ latencyEstimate: LatencyEstimate.Path });
    rig.peers.get(A)!.paths = { 0: 400 };
    rig.run(12_000);
    expect(rig.permissionRequests()).toEqual([]);
  });
});

describe('a latency phase that ends (issue 16; off by default)', () => {
  it('a slice stops looking for latency latencyWindowMs after it was placed in its tree', () => {
    // Both slices were placed by forced requests at 1 s. With a window of 1 s nothing asks by 8 s;
    // without a window the same run asks within 4 s (the test above).
    const closed = new LatencyRig({ latencyWindowMs: 1000 });
    closed.run(8000);
    expect(closed.permissionRequests()).toEqual([]);
    const open = new LatencyRig({ latencyWindowMs: 0 });
    open.run(8000);
    expect(open.permissionRequests().length).toBeGreaterThanOrEqual(1);
  });

  it('with latencyWindowFromNeighbours, a new neighbour opens the closed windows again', () => {
    // Windows of 1 s close at 2 s; at 5 s a peer F links to N. Only with the option does N then
    // look for latency again (E is 200 ms earlier on slice 0, as above).
    const F = 104;
    for (const fromNeighbours of [1, 0]) {
      const rig = new LatencyRig({ latencyWindowMs: 1000, latencyWindowFromNeighbours: fromNeighbours });
      rig.run(5000);
      expect(rig.permissionRequests()).toEqual([]);
      const since = rig.solo.mark();
      rig.solo.feed(F, { type: MessageType.Link, op: LinkOp.Add, direction: LinkDirection.Out, walkId: 0 });
      rig.run(8000);
      const asks = rig.permissionRequests(since).map((r) => [r.to, r.message.slice, r.message.target]);
      expect(asks).toEqual(fromNeighbours === 1 ? [[A, 0, E]] : []);
    }
  });

  it('several slices may look at once, but never two towards one target', () => {
    // E is 200 ms earlier on both slices (parents A and B are distinct): one request, to E, at a time.
    const rig = new LatencyRig({ latencySwitchesInFlight: 4 });
    rig.peers.get(E)!.offsets = { 0: -150, 1: -350 };
    rig.run(6000);
    const asks = rig.permissionRequests();
    expect(asks.length).toBe(1);
    expect(asks[0]!.message.target).toBe(E);
  });

  /**
   * Slice 0 switches from A to E for latency; then A offers it 150 ms earlier than E. The permission
   * requests for slice 0 in the 8 s after (with latencyMarginGrowth 2 the margin is now 200 ms: none).
   */
  function secondSwitch(protocol: Partial<ProtocolConfig>) {
    const rig = new LatencyRig(protocol);
    rig.run(4000);
    rig.solo.feed(A, { type: MessageType.LatencyPermissionReply, slice: 0, target: E, granted: true });
    rig.solo.feed(E, {
      type: MessageType.SwitchReply,
      slice: 0,
      handoffSeq: rig.solo.sendsOf(MessageType.SwitchRequest).at(-1)!.message.handoffSeq,
      accepted: true,
      rejectReason: RejectReason.None,
      load: 6,
    });
    expect(rig.solo.engine.parents()).toEqual([E, B]);
    rig.senders.splice(0, 1, { peer: E, slice: 0, lead: 0 });
    // A, now a plain neighbour, advertises slice 0 150 ms earlier than N gets it through E (offset
    // −200 plus half the 100 ms round trip, against N's ~0); E is inside its range.
    rig.peers.get(A)!.offsets = { 0: -200 };
    rig.peers.get(A)!.load = 7; // it lost N, so it has room below its TL again
    rig.peers.get(E)!.load = 8;
    const since = rig.solo.mark();
    rig.run(rig.solo.now + 8000);
    return rig.permissionRequests(since).filter((r) => r.message.slice === 0);
  }

  it('each latency switch of a slice doubles the gain its next one needs', () => {
    expect(secondSwitch({ latencyBackoffMs: 1, latencyMarginGrowth: 2 })).toEqual([]);
    // With a fixed margin (the thesis's) the same 150 ms is worth a second switch.
    expect(secondSwitch({ latencyBackoffMs: 1, latencyMarginGrowth: 1 }).map((r) => r.to)).toEqual([E]);
  });
});

describe('latency triggers (issue 16; off by default)', () => {
  /** The path rig with E shorter by 250 ms but full to its ULT (9), so no switch to E yet. */
  function fullTargetRig(latencyTriggers: number): LatencyRig {
    const rig = new LatencyRig({ latencyEstimate: LatencyEstimate.Path, latencyTriggers }, { [E]: 9 });
    rig.peers.get(A)!.paths = { 0: 400 };
    rig.peers.get(B)!.paths = { 1: 300 };
    rig.peers.get(E)!.paths = { 0: 150 };
    rig.run(4400);
    expect(rig.permissionRequests()).toEqual([]);
    return rig;
  }

  it('a neighbour’s new room starts the latency phase at once, not at the next round', () => {
    for (const latencyTriggers of [1, 0]) {
      const rig = fullTargetRig(latencyTriggers);
      // 400 ms into a round, E's advert says it lost a child: room below its ULT.
      rig.peers.get(E)!.load = 8;
      const since = rig.solo.mark();
      rig.solo.feed(E, rig.advert(E));
      const asks = rig.permissionRequests(since).map((r) => [r.to, r.message.slice, r.message.target]);
      expect(asks).toEqual(latencyTriggers === 1 ? [[A, 0, E]] : []);
    }
  });

  it('a member whose child leaves adverts its room at once, not at the next round', () => {
    for (const latencyTriggers of [1, 0]) {
      const rig = fullTargetRig(latencyTriggers);
      // E becomes N's child on slice 1, then leaves it (its switch to another parent completes).
      rig.solo.feed(E, {
        type: MessageType.ForcedParentRequest,
        slice: 1,
        reason: ForcedReason.Join,
        fromSeq: SEQ_NONE,
      });
      expect(rig.solo.engine.children()[1]).toEqual([E]);
      const since = rig.solo.mark();
      rig.solo.feed(E, { type: MessageType.SwitchComplete, slice: 1, handoffSeq: 100, newParent: B });
      const adverts = rig.solo.sendsOf(MessageType.Advert, since);
      if (latencyTriggers === 1) {
        expect(adverts.map((a) => a.to).sort()).toEqual([A, B, E]);
        expect(adverts.every((a) => a.message.load === 0)).toBe(true);
      } else expect(adverts).toEqual([]);
    }
  });
});
