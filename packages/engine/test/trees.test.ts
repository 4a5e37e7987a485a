import { describe, expect, it } from 'vitest';
import { bloomOr, ForcedReason, MessageType, RejectReason, SEQ_NONE, type PeerId } from '@chunkycast/wire';
import { bloomMaskFor, createRandom } from '../src/index.js';
import { dataMessage, Solo } from './solo.js';

const M = 16;

describe('forced parent requests (refused only above ML or on a loop, thesis §4.2, initial tree construction and forced parent selection)', () => {
  const NEIGHBOURS = [101, 102, 103, 104, 105, 106, 107, 108, 109, 110];

  function forced(slice: number, fromSeq = SEQ_NONE): Parameters<Solo['feed']>[1] {
    return { type: MessageType.ForcedParentRequest, slice, reason: ForcedReason.ParentLost, fromSeq };
  }

  function reply(solo: Solo, since: number, to: PeerId) {
    const replies = solo.sendsOf(MessageType.SwitchReply, since).filter((r) => r.to === to);
    expect(replies).toHaveLength(1);
    return replies[0]!.message;
  }

  it('accepts above ULT, refuses with OverMaxLoad at ML', () => {
    // TL 4, Lat2: LLT 3, ULT 5, ML 6.
    const solo = new Solo({ id: 50, role: 'member', targetLoadSlices: 4 });
    solo.startWith(NEIGHBOURS);
    solo.advance(100);
    expect([solo.engine.config.upperLatencyThreshold, solo.engine.config.maxLoad]).toEqual([5, 6]);
    for (let i = 0; i < 6; i++) {
      const since = solo.mark();
      solo.feed(NEIGHBOURS[i]!, forced(i));
      const r = reply(solo, since, NEIGHBOURS[i]!);
      expect(r.accepted, `request ${i + 1} (load ${i} → ${i + 1})`).toBe(true);
    }
    expect(solo.engine.currentLoad).toBe(6);
    const since = solo.mark();
    solo.feed(107, forced(7));
    const r = reply(solo, since, 107);
    expect(r.accepted).toBe(false);
    expect(r.rejectReason).toBe(RejectReason.OverMaxLoad);
    expect(solo.engine.currentLoad).toBe(6);
    // A non-neighbour is not ours to serve at all.
    const s2 = solo.mark();
    solo.feed(999, forced(8));
    expect(reply(solo, s2, 999).rejectReason).toBe(RejectReason.NotNeighbour);
  });

  it('refuses with Loop when the requester is upstream (parent, pending target, or in our filter)', () => {
    const solo = new Solo({ id: 50, role: 'member', targetLoadSlices: 8 });
    solo.startWith(NEIGHBOURS);
    solo.advance(100);
    // 101 floods slice 0 with a path through 102: we pick 101 as parent; 102 and 101 are upstream.
    const bloom = bloomOr(bloomMaskFor(102), bloomMaskFor(101));
    solo.feed(101, { type: MessageType.Flood, slice: 0, epoch: 1, bloom, hops: 2 });
    solo.advance(500);
    const request = solo.sendsOf(MessageType.ForcedParentRequest).filter((r) => r.message.slice === 0);
    expect(request.map((r) => r.to)).toEqual([101]);

    let since = solo.mark();
    solo.feed(101, forced(0));
    expect(reply(solo, since, 101).rejectReason).toBe(RejectReason.Loop); // our pending target
    since = solo.mark();
    solo.feed(102, forced(0));
    expect(reply(solo, since, 102).rejectReason).toBe(RejectReason.Loop); // in our filter

    solo.feed(101, {
      type: MessageType.SwitchReply,
      slice: 0,
      handoffSeq: 0,
      accepted: true,
      rejectReason: RejectReason.None,
      load: 3,
    });
    expect(solo.engine.parents()[0]).toBe(101);
    solo.feed(101, dataMessage(0, 0, bloom, 2));
    since = solo.mark();
    solo.feed(101, forced(0));
    expect(reply(solo, since, 101).rejectReason).toBe(RejectReason.Loop); // our parent
    since = solo.mark();
    solo.feed(102, forced(0));
    expect(reply(solo, since, 102).rejectReason).toBe(RejectReason.Loop);
    // Not upstream: accepted, on this slice and on others, and the new child gets what we hold.
    since = solo.mark();
    solo.feed(103, forced(0, 0));
    expect(reply(solo, since, 103).accepted).toBe(true);
    const resent = solo.sendsOf(MessageType.Data, since).filter((r) => r.to === 103);
    expect(resent.map((r) => r.message.seq)).toEqual([0]);
    since = solo.mark();
    solo.feed(102, forced(1));
    expect(reply(solo, since, 102).accepted).toBe(true);
  });

  it('random request storms: every refusal is OverMaxLoad or Loop', () => {
    const random = createRandom(4242);
    const reasons = new Map<number, number>();
    let accepted = 0;
    for (let trial = 0; trial < 20; trial++) {
      const tl = 2 + random.int(10);
      const solo = new Solo({ id: 50, role: 'member', targetLoadSlices: tl }, 100 + trial);
      solo.startWith(NEIGHBOURS);
      solo.advance(50);
      // Some slices get a parent through a flood whose path holds random neighbours.
      for (let s = 0; s < M; s++) {
        if (random.int(2) === 0) continue;
        const parent = NEIGHBOURS[random.int(NEIGHBOURS.length)]!;
        let bloom = bloomMaskFor(parent);
        for (let k = 0; k < 3; k++) bloom = bloomOr(bloom, bloomMaskFor(NEIGHBOURS[random.int(10)]!));
        solo.feed(parent, { type: MessageType.Flood, slice: s, epoch: 1, bloom, hops: 4 });
      }
      solo.advance(400);
      for (const r of solo.sendsOf(MessageType.ForcedParentRequest)) {
        if (random.int(2) === 0)
          solo.feed(r.to, {
            type: MessageType.SwitchReply,
            slice: r.message.slice,
            handoffSeq: 0,
            accepted: true,
            rejectReason: RejectReason.None,
            load: 1,
          });
      }
      const since = solo.mark();
      for (let k = 0; k < 60; k++) {
        const from = NEIGHBOURS[random.int(NEIGHBOURS.length)]!;
        solo.feed(from, forced(random.int(M), random.int(2) === 0 ? SEQ_NONE : random.int(100)));
        solo.advance(solo.now + random.int(30));
      }
      for (const r of solo.sendsOf(MessageType.SwitchReply, since)) {
        if (r.message.accepted) accepted++;
        else reasons.set(r.message.rejectReason, (reasons.get(r.message.rejectReason) ?? 0) + 1);
      }
      expect(solo.engine.currentLoad).toBeLessThanOrEqual(solo.engine.config.maxLoad);
    }
    console.info(
      `forced request storm: ${accepted} accepted, refusals ${JSON.stringify(Object.fromEntries(reasons))}`,
    );
    expect(accepted).toBeGreaterThan(0);
    expect(reasons.get(RejectReason.OverMaxLoad) ?? 0).toBeGreaterThan(0);
    expect(reasons.get(RejectReason.Loop) ?? 0).toBeGreaterThan(0);
    for (const reason of reasons.keys())
      expect([RejectReason.OverMaxLoad, RejectReason.Loop]).toContain(reason);
  });
});
