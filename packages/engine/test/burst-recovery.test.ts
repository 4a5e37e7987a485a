// Issue 16, part 2 (recovery after a 10% burst ≤ 5 s): what a member does while a failure burst
// is still undetected. The true source gives a silent root up after rootFailureTimeoutMs (its
// roots beat every rootHeartbeatMs), so a dead root's tree is re-flooded while the dead tree still
// looks alive (its last packets are inside the receiving timeout, the adverts still say so) and
// while the neighbours and children that died with it are not yet declared failed.
import { describe, expect, it } from 'vitest';
import {
  bloomOr,
  ForcedReason,
  MessageType,
  RejectReason,
  SEQ_NONE,
  TreeRole,
  type FloodMessage,
  type PeerId,
} from '@chunkycast/wire';
import { bloomMaskFor, DEFAULT_PROTOCOL } from '../src/index.js';
import { A, dataMessage, N, nodeWithParent, P, Q, Solo, spec } from './solo.js';

const SOURCE = 0;

/** A flood of slice 0's tree of `epoch`, `hops` from its new root, as `sender` forwards it. */
function flood(sender: PeerId, epoch: number, hops: number): FloodMessage {
  return { type: MessageType.Flood, slice: 0, epoch, bloom: bloomMaskFor(sender), hops };
}

describe('a slice source beats the true source', () => {
  it('every rootHeartbeatMs while it roots a slice, and stops when it roots none', () => {
    const solo = new Solo({ id: N, role: 'member', targetLoadSlices: 8 });
    solo.startWith([P, Q]);
    solo.advance(1000);
    const since = solo.mark();
    solo.feed(SOURCE, { type: MessageType.SliceSourceAssign, slice: 0, epoch: 1, assigned: true });
    solo.advance(3000);
    const beats = solo
      .sendsOf(MessageType.Heartbeat, since)
      .filter((b) => b.to === SOURCE)
      .map((b) => b.time);
    const step = DEFAULT_PROTOCOL.rootHeartbeatMs;
    const expected: number[] = [];
    for (let t = 1000; t <= 3000; t += step) expected.push(t);
    expect(beats).toEqual(expected);
    const handedBack = solo.mark();
    solo.feed(SOURCE, { type: MessageType.SliceSourceAssign, slice: 0, epoch: 1, assigned: false });
    solo.advance(6000);
    expect(solo.sendsOf(MessageType.Heartbeat, handedBack).filter((b) => b.to === SOURCE)).toEqual([]);
  });
});

describe("a new epoch's flood", () => {
  it('re-places a member whose last packet came before the flood, though it still counts as receiving', () => {
    const solo = nodeWithParent(); // parent P, last packet at ~1500
    solo.advance(2000);
    solo.feed(P, solo.advertFrom(P, spec(5, { 0: { receiving: true, filter: bloomMaskFor(200) } })));
    expect(solo.engine.isReceiving(0)).toBe(true);
    const since = solo.mark();
    solo.feed(Q, flood(Q, 1, 1));
    solo.advance(2000 + DEFAULT_PROTOCOL.floodCollectMs);
    expect(solo.sendsOf(MessageType.TreeLeave, since).map((m) => [m.to, m.message.role])).toEqual([
      [P, TreeRole.Child],
    ]);
    expect(solo.sendsOf(MessageType.ForcedParentRequest, since).map((m) => [m.to, m.message.reason])).toEqual(
      [[Q, ForcedReason.Flood]],
    );
  });

  it('leaves a member alone whose parent sent a packet after the flood reached it', () => {
    const solo = nodeWithParent();
    solo.advance(2000);
    const since = solo.mark();
    solo.feed(Q, flood(Q, 1, 1));
    solo.advance(2050);
    solo.feed(P, dataMessage(0, 5, bloomOr(bloomMaskFor(200), bloomMaskFor(P)), 2));
    solo.advance(2000 + DEFAULT_PROTOCOL.floodCollectMs);
    expect(solo.sendsOf(MessageType.ForcedParentRequest, since)).toEqual([]);
    expect(solo.engine.parents()[0]).toBe(P);
  });

  it('is taken from the new root itself even when its last advert puts it below us', () => {
    // Q was in our subtree before it was made root: its filter still holds our mask.
    const below = { 0: { receiving: true, filter: bloomOr(bloomMaskFor(N), bloomMaskFor(Q)) } };
    for (const [hops, asked] of [
      [1, [Q]],
      [2, []],
    ] as const) {
      const solo = nodeWithParent();
      solo.feed(Q, solo.advertFrom(Q, spec(5, below)));
      solo.advance(2000);
      const since = solo.mark();
      solo.feed(Q, flood(Q, 1, hops));
      solo.advance(2000 + DEFAULT_PROTOCOL.floodCollectMs);
      const requests = solo
        .sendsOf(MessageType.ForcedParentRequest, since)
        .filter((r) => r.message.reason === ForcedReason.Flood);
      expect(
        requests.map((r) => r.to),
        `flood ${hops} hops from the root`,
      ).toEqual(asked);
    }
  });

  it('drops a request made before it reached us for one of its senders', () => {
    const solo = nodeWithParent();
    solo.advance(2000);
    // The parent leaves: a forced request goes to Q, the one neighbour that says it receives.
    solo.feed(P, { type: MessageType.TreeLeave, slice: 0, role: TreeRole.Parent });
    const asked = solo.sendsOf(MessageType.ForcedParentRequest).filter((r) => r.time === 2000);
    expect(asked.map((r) => r.to)).toEqual([Q]);
    const since = solo.mark();
    solo.advance(2200);
    solo.feed(A, flood(A, 1, 1));
    solo.advance(2200 + DEFAULT_PROTOCOL.floodCollectMs);
    expect(solo.sendsOf(MessageType.ForcedParentRequest, since).map((r) => [r.to, r.message.reason])).toEqual(
      [[A, ForcedReason.Flood]],
    );
    // Q's late acceptance is undone.
    const undo = solo.mark();
    solo.feed(Q, {
      type: MessageType.SwitchReply,
      slice: 0,
      handoffSeq: 5,
      accepted: true,
      rejectReason: RejectReason.None,
      load: 6,
    });
    expect(solo.sendsOf(MessageType.TreeLeave, undo).map((m) => m.to)).toEqual([Q]);
  });
});

describe('silent neighbours and children', () => {
  it('a neighbour silent for three heartbeats is not asked to be a parent until it talks again', () => {
    const solo = nodeWithParent(); // Q's advert came at ~1500
    for (let t = 1600; t <= 4700; t += 100) {
      solo.advance(t);
      if (t % 1000 === 0)
        solo.feed(P, dataMessage(0, t / 1000 + 4, bloomOr(bloomMaskFor(200), bloomMaskFor(P)), 2));
    }
    const since = solo.mark();
    solo.feed(P, { type: MessageType.TreeLeave, slice: 0, role: TreeRole.Parent });
    solo.feed(P, solo.advertFrom(P, spec(5, { 0: { receiving: false } })));
    solo.advance(4900);
    expect(solo.sendsOf(MessageType.ForcedParentRequest, since)).toEqual([]);
    solo.feed(Q, solo.advertFrom(Q, spec(5, { 0: { receiving: true, filter: bloomMaskFor(201) } })));
    solo.advance(6000);
    expect(solo.sendsOf(MessageType.ForcedParentRequest, since).map((r) => r.to)).toEqual([Q]);
  });

  it('an orphan asks a neighbour silent for two heartbeats only when no other qualifies', () => {
    const picks = new Set<PeerId>();
    for (let seed = 1; seed <= 8; seed++) {
      const solo = nodeWithParent(seed);
      // Q is one hop from the root (the better candidate) but last heard at ~1500; A, three hops
      // down, talks every second.
      solo.feed(
        Q,
        solo.advertFrom(Q, spec(5, { 0: { receiving: true, hops: 1, filter: bloomMaskFor(201) } })),
      );
      for (let t = 1600; t <= 4200; t += 100) {
        solo.advance(t);
        if (t % 1000 === 0) {
          solo.feed(
            A,
            solo.advertFrom(A, spec(5, { 0: { receiving: true, hops: 3, filter: bloomMaskFor(202) } })),
          );
          solo.feed(P, dataMessage(0, t / 1000 + 4, bloomOr(bloomMaskFor(200), bloomMaskFor(P)), 2));
        }
      }
      const since = solo.mark();
      solo.feed(P, { type: MessageType.TreeLeave, slice: 0, role: TreeRole.Parent });
      for (const r of solo.sendsOf(MessageType.ForcedParentRequest, since)) picks.add(r.to);
    }
    expect([...picks]).toEqual([A]);
  });

  it('a parent at ML takes a forced child in the place of children silent for three heartbeats', () => {
    // TL 8: ML 12. Twelve children on slice 0, each a neighbour; then a thirteenth asks.
    const children = Array.from({ length: 12 }, (_, i) => 300 + i);
    const late = 400;
    const ask = (solo: Solo): RejectReason | 'accepted' => {
      const since = solo.mark();
      solo.feed(late, {
        type: MessageType.ForcedParentRequest,
        slice: 0,
        reason: ForcedReason.Flood,
        fromSeq: SEQ_NONE,
      });
      const reply = solo.sendsOf(MessageType.SwitchReply, since).find((r) => r.to === late);
      return reply?.message.accepted === true
        ? 'accepted'
        : (reply?.message.rejectReason ?? RejectReason.None);
    };
    const solo = new Solo({ id: N, role: 'member', targetLoadSlices: 8 });
    solo.startWith([...children, late]);
    solo.advance(500);
    solo.takeChildren(children);
    expect(solo.engine.children()[0]).toHaveLength(12);
    expect(ask(solo)).toBe(RejectReason.OverMaxLoad);
    // Four keep talking; eight fall silent (a burst took them, not yet declared failed).
    for (let t = 600; t <= 3600; t += 100) {
      solo.advance(t);
      if (t % 1000 === 0) for (const c of children.slice(0, 4)) solo.feed(c, { type: MessageType.Heartbeat });
    }
    expect(solo.engine.children()[0]).toHaveLength(12);
    expect(ask(solo)).toBe('accepted');
  });
});
