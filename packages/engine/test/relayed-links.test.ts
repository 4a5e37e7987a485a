// Relayed links (not in the thesis): the host tells the engine which of its links go through a TURN
// relay (`linkRoute`), and tree edges prefer direct links — forced requests and flood choices take a
// relayed neighbour only when no direct one qualifies, and the latency phase counts a relayed link
// as `relayedLinkPenaltyMs` of extra arrival — but a relayed link is never refused.
import { describe, expect, it } from 'vitest';
import { ForcedReason, MessageType, RejectReason, SwitchReason, type PeerId } from '@chunkycast/wire';
import {
  bloomMaskFor,
  ConfigError,
  createRandom,
  DEFAULT_PROTOCOL,
  LatencyEstimate,
  resolveConfig,
  type ProtocolConfig,
} from '../src/index.js';
import { dataMessage, Solo } from './solo.js';

const N = 50; // TL 8, Lat2: LLT 7, ULT 9, ML 12

describe('forced parent requests prefer direct links', () => {
  const D1 = 101;
  const D2 = 102;
  const R1 = 201;
  const R2 = 202;
  const SLICES = 4;

  /**
   * N with neighbours D1, D2, R1, R2, identical in every advertised respect (load, hops, offsets),
   * finds a parent for each of its slices by forced requests: returns whom it asked, per slice.
   * `relayed` are reported relayed — R1 before N has any state for it, R2 after its links exist —
   * and `thenDirect` reported direct again after that.
   */
  function forcedTargets(
    seed: number,
    relayed: readonly PeerId[],
    protocol: Partial<ProtocolConfig> = {},
    thenDirect: readonly PeerId[] = [],
  ): PeerId[] {
    const solo = new Solo(
      { id: N, role: 'member', targetLoadSlices: 8, protocol: { slices: SLICES, ...protocol } },
      seed,
    );
    if (relayed.includes(R1)) solo.input({ kind: 'linkRoute', peer: R1, relayed: true });
    solo.startWith([D1, D2, R1, R2]);
    if (relayed.includes(R2)) solo.input({ kind: 'linkRoute', peer: R2, relayed: true });
    for (const peer of thenDirect) solo.input({ kind: 'linkRoute', peer, relayed: false });
    // Adverts in a seed-dependent order: first not receiving (so no request goes out while only
    // one neighbour is known), then receiving every slice; the next decision round asks.
    const order = [D1, D2, R1, R2];
    const random = createRandom(seed * 7 + 3);
    for (let i = order.length - 1; i > 0; i--) {
      const j = random.int(i + 1);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    const spec = { load: 4, lower: 7, upper: 9, maxLoad: 12 };
    for (const peer of order) solo.feed(peer, solo.advertFrom(peer, spec));
    const slices = Object.fromEntries(
      Array.from({ length: SLICES }, (_, s) => [
        s,
        { receiving: true, hops: 2, offsetMs: 0, filter: bloomMaskFor(900) },
      ]),
    );
    for (const peer of order) solo.feed(peer, solo.advertFrom(peer, { ...spec, slices }));
    solo.advance(2500);
    const requests = solo.sendsOf(MessageType.ForcedParentRequest);
    expect(requests.map((r) => r.message.slice).sort()).toEqual(Array.from({ length: SLICES }, (_, s) => s));
    return requests.map((r) => r.to);
  }

  it('asks a direct neighbour, never a relayed one of equal standing (20 seeds × 4 slices)', () => {
    const asked: PeerId[] = [];
    for (let seed = 1; seed <= 20; seed++) asked.push(...forcedTargets(seed, [R1, R2]));
    expect(asked).toHaveLength(80);
    expect(asked.filter((p) => p === R1 || p === R2)).toEqual([]);
    // Both direct ones are used: the anti-implosion pick still spreads requests (thesis §4.2, fine-tuning latency).
    expect(asked).toContain(D1);
    expect(asked).toContain(D2);
  });

  it('without the route, or with the preference off (penalty 0), relayed neighbours are asked as often', () => {
    const unknown: PeerId[] = [];
    const off: PeerId[] = [];
    for (let seed = 1; seed <= 20; seed++) {
      unknown.push(...forcedTargets(seed, []));
      off.push(...forcedTargets(seed, [R1, R2], { relayedLinkPenaltyMs: 0 }));
    }
    // The same seeds, the same draws: the route changes nothing when it is not used.
    expect(off).toEqual(unknown);
    const relayedShare = unknown.filter((p) => p === R1 || p === R2).length / unknown.length;
    expect(relayedShare).toBeGreaterThan(0.25);
  });

  it('a link reported direct again counts as direct again', () => {
    for (let seed = 1; seed <= 20; seed++)
      expect(forcedTargets(seed, [R1, R2], {}, [R1, R2])).toEqual(forcedTargets(seed, []));
  });
});

describe('flood choices prefer direct links', () => {
  /** N hears a new tree's flood from R (relayed) first, then from D (direct), both one hop from the root. */
  function floodChoice(seed: number, relayed: boolean): PeerId {
    const [D, R] = [101, 201];
    const solo = new Solo({ id: N, role: 'member', targetLoadSlices: 8, protocol: { slices: 1 } }, seed);
    solo.startWith([D, R]);
    if (relayed) solo.input({ kind: 'linkRoute', peer: R, relayed: true });
    for (const from of [R, D])
      solo.feed(from, { type: MessageType.Flood, slice: 0, epoch: 1, bloom: bloomMaskFor(900), hops: 1 });
    solo.advance(solo.now + 200); // past floodCollectMs
    const asked = solo.sendsOf(MessageType.ForcedParentRequest);
    expect(asked.map((r) => r.message.reason)).toEqual([ForcedReason.Flood]);
    return asked[0]!.to;
  }

  it('asks the direct sender at the same level, though the relayed one was heard first', () => {
    const seeds = Array.from({ length: 20 }, (_, i) => i + 1);
    expect(seeds.map((seed) => floodChoice(seed, true))).toEqual(seeds.map(() => 101));
    // Without the route, the first heard is asked as often as not (random among the best few).
    expect(seeds.map((seed) => floodChoice(seed, false))).toContain(201);
  });
});

describe('a member whose only neighbours are relayed', () => {
  it('asks a relayed neighbour at once when no direct one receives the slice', () => {
    const R = 201;
    const D = 101; // direct, but not receiving
    const solo = new Solo({ id: N, role: 'member', targetLoadSlices: 8, protocol: { slices: 2 } }, 3);
    solo.input({ kind: 'linkRoute', peer: R, relayed: true });
    solo.startWith([D, R]);
    solo.feed(D, solo.advertFrom(D, { load: 0, lower: 7, upper: 9, maxLoad: 12 }));
    solo.feed(
      R,
      solo.advertFrom(R, {
        load: 4,
        lower: 7,
        upper: 9,
        maxLoad: 12,
        slices: { 0: { receiving: true }, 1: { receiving: true } },
      }),
    );
    const requests = solo.sendsOf(MessageType.ForcedParentRequest);
    expect(requests.map((r) => [r.to, r.message.slice])).toEqual([
      [R, 0],
      [R, 1],
    ]);
  });
});

/**
 * N with two slices, parents A (slice 0) and B (slice 1), and neighbour E, as in latency.test.ts.
 * A and B send one packet per slice every 100 ms, slice 0 200 ms after slice 1, so N measures
 * offsets +100 (slice 0) and −100 (slice 1); everyone answers N's adverts with a 100 ms round trip.
 */
class Rig {
  static readonly A = 101;
  static readonly B = 102;
  static readonly E = 103;
  readonly solo: Solo;
  readonly loads = new Map<PeerId, number>([
    [Rig.A, 8],
    [Rig.B, 8],
    [Rig.E, 5],
  ]);
  private nextSeq = 0;
  private readonly answered = new Map<PeerId, number>();

  /** `eOffset`: slice 0's offset E advertises (A advertises +100 for slice 0, B 0 for slice 1). */
  constructor(
    private readonly eOffset: number,
    relayed: readonly PeerId[],
    protocol: Partial<ProtocolConfig> = {},
  ) {
    this.solo = new Solo({
      id: N,
      role: 'member',
      targetLoadSlices: 8,
      // Written for measured offsets (the data below sets them); the penalty is added the same way
      // to path estimates (phase-host.ts expectedArrivalVia), which latency.test.ts covers.
      protocol: { slices: 2, latencyEstimate: LatencyEstimate.Offset, ...protocol },
    });
    this.solo.startWith([Rig.A, Rig.B, Rig.E]);
    for (const peer of relayed) this.solo.input({ kind: 'linkRoute', peer, relayed: true });
    this.solo.advance(1000);
    for (const [peer, slice] of [
      [Rig.A, 0],
      [Rig.B, 1],
    ] as const) {
      this.solo.feed(peer, this.advert(peer));
      this.solo.feed(peer, {
        type: MessageType.SwitchReply,
        slice,
        handoffSeq: 0,
        accepted: true,
        rejectReason: RejectReason.None,
        load: 8,
      });
    }
    expect(this.solo.engine.parents()).toEqual([Rig.A, Rig.B]);
  }

  advert(peer: PeerId): ReturnType<Solo['advertFrom']> {
    const offsets: Record<number, number> =
      peer === Rig.A ? { 0: 100 } : peer === Rig.B ? { 1: 0 } : { 0: this.eOffset };
    const slices = Object.fromEntries(
      Object.entries(offsets).map(([s, offsetMs]) => [
        s,
        { receiving: true, offsetMs, filter: bloomMaskFor(900) },
      ]),
    );
    return this.solo.advertFrom(peer, {
      load: this.loads.get(peer)!,
      lower: 7,
      upper: 9,
      maxLoad: 12,
      slices,
      rttMs: 100,
    });
  }

  run(time: number): void {
    for (let t = Math.ceil(this.solo.now / 50) * 50 + 50; t <= time; t += 50) {
      this.solo.advance(t);
      if (t % 100 === 0) {
        const seq = this.nextSeq++;
        if (seq >= 2) this.solo.feed(Rig.A, dataMessage(0, seq - 2, bloomMaskFor(Rig.A), 2));
        this.solo.feed(Rig.B, dataMessage(1, seq, bloomMaskFor(Rig.B), 2));
      }
      for (const peer of this.loads.keys()) {
        const last = this.solo.lastAdvertTo(peer);
        if (last === undefined || this.answered.get(peer) === last.time || t - last.time < 300) continue;
        this.answered.set(peer, last.time);
        this.solo.feed(peer, this.advert(peer));
      }
    }
  }

  permissionRequests() {
    return this.solo.sendsOf(MessageType.LatencyPermissionRequest);
  }
}

describe('the latency phase counts a relayed link as relayedLinkPenaltyMs of arrival', () => {
  // Via E, slice 0 would arrive at E's offset + 50 (half the RTT); N gets it at +100 from A now.

  it('leaves a relayed parent for a direct neighbour of similar arrival, within a few rounds', () => {
    const rig = new Rig(100, [Rig.A]); // via E: +150, 50 ms later than via A
    rig.run(5000);
    const asks = rig.permissionRequests();
    expect(asks.length).toBeGreaterThanOrEqual(1);
    // Offsets settle after 8 blocks (~1 s of packets from 1 s on); the first rounds after that ask.
    expect(asks[0]!.time).toBeLessThanOrEqual(4000);
    expect([asks[0]!.to, asks[0]!.message.slice, asks[0]!.message.target]).toEqual([Rig.A, 0, Rig.E]);
    rig.solo.feed(Rig.A, {
      type: MessageType.LatencyPermissionReply,
      slice: 0,
      target: Rig.E,
      granted: true,
    });
    const request = rig.solo.sendsOf(MessageType.SwitchRequest).at(-1)!;
    expect(request.to).toBe(Rig.E);
    expect(request.message.reason).toBe(SwitchReason.Latency);
    rig.solo.feed(Rig.E, {
      type: MessageType.SwitchReply,
      slice: 0,
      handoffSeq: request.message.handoffSeq,
      accepted: true,
      rejectReason: RejectReason.None,
      load: 6,
    });
    expect(rig.solo.engine.parents()).toEqual([Rig.E, Rig.B]);
    expect(rig.solo.events('parentChanged').at(-1)!.event).toMatchObject({
      switchKind: 'latency',
      previous: Rig.A,
    });
  });

  it('keeps a direct parent, or a relayed one when the neighbour is relayed too', () => {
    const direct = new Rig(100, []); // gain −50 ms
    direct.run(8000);
    expect(direct.permissionRequests()).toEqual([]);
    const bothRelayed = new Rig(100, [Rig.A, Rig.E]); // the penalties cancel: gain −50 ms
    bothRelayed.run(8000);
    expect(bothRelayed.permissionRequests()).toEqual([]);
  });

  it('keeps a relayed parent when the direct neighbour gets the slice far later (1 s)', () => {
    const rig = new Rig(1000, [Rig.A]); // via E: +1050; gain 500 − 1050 < 0
    rig.run(8000);
    expect(rig.permissionRequests()).toEqual([]);
  });

  it('takes a relayed neighbour only if it is earlier by more than penalty + margin', () => {
    // Direct parent A (+100). E relayed at −250: via −200 + 400 = +200, gain −100.
    const near = new Rig(-250, [Rig.E]); // 300 ms earlier: a direct E would be taken (gain 300 > 100)
    near.run(8000);
    expect(near.permissionRequests()).toEqual([]);
    const nearDirect = new Rig(-250, []);
    nearDirect.run(8000);
    expect(nearDirect.permissionRequests().length).toBeGreaterThanOrEqual(1);
    const far = new Rig(-500, [Rig.E]); // 550 ms earlier: gain 550 − 400 = 150 > 100
    far.run(8000);
    expect(far.permissionRequests().map((r) => r.message.target)).toContain(Rig.E);
  });
});

describe('a relayed parent may be left even below its LLT', () => {
  it('child side: asks a relayed parent at its LLT (a direct one there is kept)', () => {
    const relayedAtLlt = new Rig(100, [Rig.A]);
    relayedAtLlt.loads.set(Rig.A, 7); // LLT: losing N takes A below it
    relayedAtLlt.run(6000);
    expect(relayedAtLlt.permissionRequests().map((r) => r.to)).toContain(Rig.A);
    const directAtLlt = new Rig(-250, []); // E 300 ms earlier: only the LLT rule stops the switch
    directAtLlt.loads.set(Rig.A, 7);
    directAtLlt.run(6000);
    expect(directAtLlt.permissionRequests()).toEqual([]);
  });

  it('parent side: grants a child over a relayed link at LLT, refuses a direct one', () => {
    // P (TL 8: LLT 7) takes seven children on slice 0; then C1 (relayed) and C2 (direct) ask to leave.
    const P = 60;
    const children = [1, 2, 3, 4, 5, 6, 7];
    const [C1, C2] = [1, 2] as const;
    const solo = new Solo({ id: P, role: 'member', targetLoadSlices: 8, protocol: { slices: 1 } });
    solo.startWith([...children, 99]);
    solo.input({ kind: 'linkRoute', peer: C1, relayed: true });
    solo.takeChildren(children);
    expect(solo.engine.currentLoad).toBe(7);
    const since = solo.mark();
    for (const c of [C2, C1])
      solo.feed(c, { type: MessageType.LatencyPermissionRequest, slice: 0, target: 99, parentLoadSeen: 7 });
    expect(
      solo.sendsOf(MessageType.LatencyPermissionReply, since).map((r) => [r.to, r.message.granted]),
    ).toEqual([
      [C2, false],
      [C1, true],
    ]);
  });
});

describe('relayedLinkPenaltyMs validation', () => {
  const member = (protocol: Partial<ProtocolConfig>) => ({
    id: 7,
    role: 'member' as const,
    sourceId: 0,
    targetLoadSlices: 16,
    protocol,
  });

  it('defaults to 400 ms, above the latency-switch margin', () => {
    expect(DEFAULT_PROTOCOL.relayedLinkPenaltyMs).toBe(400);
    expect(DEFAULT_PROTOCOL.relayedLinkPenaltyMs).toBeGreaterThan(DEFAULT_PROTOCOL.latencySwitchMarginMs);
    expect(resolveConfig(member({})).protocol.relayedLinkPenaltyMs).toBe(400);
  });

  it('accepts 0 (preference off) to 60 s and rejects anything else, naming the field', () => {
    for (const ok of [0, 1, 400, 60_000])
      expect(resolveConfig(member({ relayedLinkPenaltyMs: ok })).protocol.relayedLinkPenaltyMs).toBe(ok);
    for (const bad of [-1, 60_001, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => resolveConfig(member({ relayedLinkPenaltyMs: bad }))).toThrow(ConfigError);
      expect(() => resolveConfig(member({ relayedLinkPenaltyMs: bad }))).toThrow(/relayedLinkPenaltyMs/);
    }
  });
});
