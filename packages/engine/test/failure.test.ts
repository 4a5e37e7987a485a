import { describe, expect, it } from 'vitest';
import { ForcedReason, MessageType, TreeRole, type Message, type PeerId } from '@chunkycast/wire';
import { bloomOr } from '@chunkycast/wire';
import { bloomMaskFor } from '../src/index.js';
import { accept, dataMessage, Solo, type AdvertSpec } from './solo.js';

const A = 101;
const B = 102;
const C = 103;
const spec = (receiving: boolean): AdvertSpec => ({
  load: 4,
  lower: 7,
  upper: 9,
  maxLoad: 12,
  slices: { 0: { receiving } },
});

describe('failure detection (4 s, thesis §4.4, experimental setup)', () => {
  it('declares a neighbour failed only after 4 s of silence, and replaces it as parent', () => {
    const solo = new Solo({ id: 50, role: 'member', targetLoadSlices: 8 });
    solo.startWith([A, B, C]);
    solo.advance(1000);
    solo.feed(A, solo.advertFrom(A, spec(true)));
    solo.feed(A, accept(0));
    expect(solo.engine.parents()[0]).toBe(A);
    solo.feed(B, solo.advertFrom(B, spec(true)));
    solo.feed(C, solo.advertFrom(C, spec(false)));
    // A falls silent after t = 3000. B talks every second; C with 3.9 s gaps.
    const lastFromA = 3000;
    const cTimes = [1000, 4900, 8800, 12_700];
    for (let t = 1100; t <= 14_000; t += 100) {
      solo.advance(t);
      if (t <= lastFromA) solo.feed(A, dataMessage(0, t / 100));
      if (t % 1000 === 0) solo.feed(B, solo.advertFrom(B, spec(true)));
      if (cTimes.includes(t)) solo.feed(C, solo.advertFrom(C, spec(false)));
    }
    const down = solo.events('neighbourDown').filter((e) => e.event.reason === 'failed');
    expect(down.map((e) => e.event.peer)).toEqual([A]);
    const at = down[0]!.time;
    expect(at - lastFromA).toBeGreaterThan(4000);
    // When it runs out, not at the next round.
    expect(at - lastFromA).toBeLessThanOrEqual(4001);
    expect(solo.engine.neighbours()).not.toContain(A);
    expect(solo.engine.neighbours()).toEqual(expect.arrayContaining([B, C]));
    // The lost parent is replaced at once by a forced request to B.
    const lost = solo.events('parentChanged').filter((e) => e.event.previous === A);
    expect(lost.map((e) => [e.time, e.event.parent, e.event.switchKind])).toEqual([[at, null, 'lost']]);
    const requests = solo.sendsOf(MessageType.ForcedParentRequest).filter((r) => r.time === at);
    expect(requests.map((r) => [r.to, r.message.slice, r.message.reason])).toEqual([
      [B, 0, ForcedReason.ParentLost],
    ]);
  });

  it('a transport failure (peerUnreachable) is acted on at once', () => {
    const solo = new Solo({ id: 50, role: 'member', targetLoadSlices: 8 });
    solo.startWith([A, B]);
    solo.advance(1500);
    const since = solo.mark();
    solo.input({ kind: 'peerUnreachable', peer: A });
    expect(solo.events('neighbourDown', since).map((e) => [e.event.peer, e.event.reason])).toContainEqual([
      A,
      'failed',
    ]);
    expect(solo.engine.neighbours()).toEqual([B]);
  });
});

describe('misbehaving peers', () => {
  const G = 101;
  const H = 102;

  it('a peer that keeps sending out-of-range slices is cut off after maxViolationsPerPeer', () => {
    const solo = new Solo({ id: 50, role: 'member', targetLoadSlices: 8 });
    solo.startWith([G, H]);
    solo.advance(1500);
    expect(solo.engine.config.protocol.maxViolationsPerPeer).toBe(20);
    const garbage: Message[] = [
      dataMessage(40, 1),
      { type: MessageType.Probe, slice: 63, probeId: 1, bloom: [0, 0, 0, 0], hops: 1 },
      { type: MessageType.TreeLeave, slice: 16, role: TreeRole.Child },
      { type: MessageType.ForcedParentRequest, slice: 17, reason: ForcedReason.Join, fromSeq: 0 },
    ];
    for (let i = 0; i < 19; i++) solo.feed(G, garbage[i % garbage.length]!);
    expect(solo.events('protocolViolation')).toHaveLength(19);
    expect(solo.events('neighbourDown')).toEqual([]);
    expect(solo.engine.neighbours()).toContain(G);
    // None of it was served.
    expect(solo.sendsOf(MessageType.SwitchReply)).toEqual([]);

    const since = solo.mark();
    const actions = solo.feed(G, dataMessage(20, 2));
    expect(solo.events('protocolViolation', since)).toHaveLength(1);
    expect(solo.events('neighbourDown', since).map((e) => e.event)).toContainEqual({
      type: 'neighbourDown',
      peer: G,
      reason: 'cutOff',
    });
    expect(actions).toContainEqual({ kind: 'disconnect', peer: G });
    expect(solo.engine.neighbours()).toEqual([H]);

    // From now on G is ignored entirely, even with valid messages.
    const after = solo.mark();
    solo.feed(G, { type: MessageType.ForcedParentRequest, slice: 0, reason: ForcedReason.Join, fromSeq: 0 });
    solo.feed(G, dataMessage(40, 3));
    expect(solo.log.slice(after)).toEqual([]);
    // H is unaffected.
    solo.feed(H, { type: MessageType.ForcedParentRequest, slice: 0, reason: ForcedReason.Join, fromSeq: 0 });
    expect(solo.sendsOf(MessageType.SwitchReply, after).map((r) => [r.to, r.message.accepted])).toEqual([
      [H, true],
    ]);
  });

  it('other protocol violations count too (forged slice-source assignment, sampling replies)', () => {
    const solo = new Solo({
      id: 50,
      role: 'member',
      targetLoadSlices: 8,
      protocol: { maxViolationsPerPeer: 3 },
    });
    solo.startWith([G, H]);
    solo.advance(1500);
    solo.feed(G, { type: MessageType.SliceSourceAssign, slice: 0, epoch: 9, assigned: true });
    expect(solo.engine.sliceSourceOf()).toEqual([]);
    solo.feed(G, { type: MessageType.SampleResult, walkId: 5 });
    expect(solo.events('protocolViolation')).toHaveLength(2);
    expect(solo.engine.neighbours()).toContain(G);
    solo.feed(G, dataMessage(33, 0));
    expect(solo.events('neighbourDown').map((e) => [e.event.peer, e.event.reason])).toContainEqual([
      G,
      'cutOff',
    ]);
  });
});

describe('after a burst (issue 16: recovery)', () => {
  /**
   * Our parent A; B below A (A's mask in its filter) advertising 2 hops; C advertising `cAdvert`
   * (by default not receiving, so B is the only other candidate). `lose` takes A away at 2100 ms
   * (by default A just falls silent after 2000 ms); adverts run to `untilMs`, and `at` feeds
   * anything else at a given time. Returns the peers found failed, when A went, and whom we asked
   * for slice 0 from then on.
   */
  const afterLosingParent = ({
    seed = 3,
    cAdvert = spec(false),
    lose,
    at,
    untilMs,
  }: {
    seed?: number;
    cAdvert?: AdvertSpec;
    lose?: (solo: Solo) => void;
    at?: (solo: Solo, t: number) => void;
    untilMs: number;
  }): { failed: PeerId[]; downAt: number; asked: PeerId[] } => {
    const solo = new Solo({ id: 50, role: 'member', targetLoadSlices: 8 }, seed);
    solo.startWith([A, B, C]);
    solo.advance(1000);
    solo.feed(A, solo.advertFrom(A, spec(true)));
    solo.feed(A, accept(0));
    expect(solo.engine.parents()[0]).toBe(A);
    const belowA: AdvertSpec = {
      ...spec(true),
      slices: { 0: { receiving: true, hops: 2, filter: bloomOr(bloomMaskFor(A), bloomMaskFor(300)) } },
    };
    for (let t = 1100; t <= untilMs; t += 100) {
      solo.advance(t);
      if (t <= 2000) solo.feed(A, dataMessage(0, t / 100));
      if (t === 2100) lose?.(solo);
      at?.(solo, t);
      if (t % 1000 === 0) {
        solo.feed(B, solo.advertFrom(B, belowA));
        solo.feed(C, solo.advertFrom(C, cAdvert));
      }
    }
    const failed = solo
      .events('neighbourDown')
      .filter((e) => e.event.reason === 'failed')
      .map((e) => e.event.peer);
    const downAt = solo.events('neighbourDown').find((e) => e.event.peer === A)?.time ?? Infinity;
    const asked = solo.sendsOf(MessageType.ForcedParentRequest).filter((r) => r.time >= downAt);
    return { failed, downAt, asked: asked.map((r) => r.to) };
  };

  it('after a parent fails, never asks a neighbour whose path runs through it (its advert still says it receives)', () => {
    // A burst: our parent A fails. B is a sibling below A (A's mask in its filter), advertising
    // fewer hops than C, and its last advert, sent before its own timeout ran out, still says it
    // receives. Asked, it would accept and feed us nothing until its own subtree found a way back.
    for (let seed = 1; seed <= 20; seed++) {
      const burst = afterLosingParent({
        seed,
        cAdvert: { ...spec(true), slices: { 0: { receiving: true, hops: 6 } } },
        untilMs: 7500,
      });
      expect(burst.failed).toEqual([A]);
      expect(burst.asked).toEqual([C]);
    }
  });

  it('a closed link is not a dead path: the peer may still feed the others (small swarms)', () => {
    const silent = afterLosingParent({ untilMs: 7500 });
    expect(silent.downAt).toBeGreaterThan(6000);
    expect(silent.asked).toEqual([]);
    const closed = afterLosingParent({
      lose: (solo) => solo.input({ kind: 'peerUnreachable', peer: A }),
      untilMs: 7500,
    });
    expect(closed.downAt).toBe(2100);
    expect(closed.asked[0]).toBe(B);
  });

  it('a peer found silent that talks again no longer marks the paths through it dead', () => {
    const back = afterLosingParent({
      at: (solo, t) => {
        if (t === 6500) solo.feed(A, solo.advertFrom(A, spec(false)));
      },
      untilMs: 8500,
    });
    expect(back.downAt).toBeGreaterThan(6000);
    expect(back.asked[0]).toBe(B);
  });
});
