import { describe, expect, it } from 'vitest';
import {
  bloomContains,
  bloomOr,
  bloomPopCount,
  EMPTY_BLOOM,
  ForcedReason,
  MessageType,
  TreeRole,
  type Bloom128,
} from '@chunkycast/wire';
import { BLOOM_MASK_BITS, bloomMaskFor } from '../src/index.js';
import { A, accept, C, dataMessage, N, nodeWithParent, P, Q, Solo, spec } from './solo.js';

describe('Bloom masks', () => {
  it('bloomMaskFor sets exactly 6 of 128 bits, deterministically, and rarely collides', () => {
    expect(BLOOM_MASK_BITS).toBe(6);
    const distinct = new Set<string>();
    for (let id = 0; id < 5000; id++) {
      const mask = bloomMaskFor(id);
      expect(bloomPopCount(mask)).toBe(6);
      expect(bloomMaskFor(id)).toEqual(mask);
      for (const w of mask) expect(w >>> 0).toBe(w);
      distinct.add(mask.join(','));
    }
    for (const id of [0xffff_ffff, 0x8000_0000, 123_456_789]) expect(bloomPopCount(bloomMaskFor(id))).toBe(6);
    // C(128, 6) ≈ 5.4·10⁹ masks: 5000 ids should essentially never share one.
    expect(distinct.size).toBeGreaterThanOrEqual(4998);
  });

  it('an OR of 10 random masks falsely contains another mask rarely (thesis: 0.25 %)', () => {
    let falsePositives = 0;
    const trials = 20_000;
    for (let t = 0; t < trials; t++) {
      let filter: Bloom128 = EMPTY_BLOOM;
      for (let k = 0; k < 10; k++) filter = bloomOr(filter, bloomMaskFor(1_000_000 + t * 11 + k));
      if (bloomContains(filter, bloomMaskFor(5_000_000 + t))) falsePositives++;
    }
    const rate = falsePositives / trials;
    console.info(`Bloom false-positive rate after 10 masks: ${(rate * 100).toFixed(3)} %`);
    expect(rate).toBeLessThan(0.01);
  });
});

describe('loop avoidance (thesis §4.2, loop avoidance and detection)', () => {
  it('never asks a neighbour whose advertised filter holds our mask to be our parent', () => {
    for (let seed = 1; seed <= 25; seed++) {
      const solo = new Solo({ id: N, role: 'member', targetLoadSlices: 8 }, seed);
      solo.startWith([A, Q]);
      solo.advance(1000);
      const ownMask = solo.engine.mask;
      // A receives slice 0 through us (our mask is in its filter) and slice 1 cleanly.
      solo.feed(
        A,
        solo.advertFrom(
          A,
          spec(2, {
            0: { receiving: true, filter: bloomOr(ownMask, bloomMaskFor(300)) },
            1: { receiving: true, filter: bloomMaskFor(300) },
          }),
        ),
      );
      for (let t = 1; t <= 3; t++) {
        solo.advance(1000 + t * 1000);
        solo.feed(
          A,
          solo.advertFrom(A, spec(2, { 0: { receiving: true, filter: ownMask }, 1: { receiving: true } })),
        );
      }
      let requests = solo.sendsOf(MessageType.ForcedParentRequest);
      expect(requests.filter((r) => r.message.slice === 1).map((r) => r.to)).toEqual([A]);
      expect(requests.filter((r) => r.message.slice === 0)).toEqual([]);
      // A loop-free neighbour appears: it is asked at once.
      solo.feed(Q, solo.advertFrom(Q, spec(2, { 0: { receiving: true, filter: bloomMaskFor(301) } })));
      requests = solo.sendsOf(MessageType.ForcedParentRequest);
      expect(requests.filter((r) => r.message.slice === 0).map((r) => r.to)).toEqual([Q]);
    }
  });

  it('ignores an instruction to switch to, and never reports as a candidate, a neighbour downstream of us', () => {
    const solo = nodeWithParent();
    const ownMask = solo.engine.mask;
    // A is underloaded but downstream of us on slice 0: it must never be reported or switched to.
    solo.feed(
      A,
      solo.advertFrom(A, spec(1, { 0: { receiving: true, filter: bloomOr(ownMask, bloomMaskFor(P)) } })),
    );
    // Parent P is overloaded; Q is loaded (not a candidate either).
    solo.feed(P, solo.advertFrom(P, spec(11, { 0: { receiving: true, filter: bloomMaskFor(200) } })));
    solo.feed(Q, solo.advertFrom(Q, spec(8, { 0: { receiving: true, filter: bloomMaskFor(201) } })));
    const since = solo.mark();
    for (let t = 1; t <= 3; t++) {
      solo.advance(solo.now + 1000);
      solo.feed(P, dataMessage(0, 4 + t, bloomMaskFor(P), 2));
    }
    for (const r of solo.sendsOf(MessageType.LoadReport, since))
      expect(r.message.candidates.map((c) => c.peer)).not.toContain(A);
    // The parent instructs a switch to A anyway: we do not send A a switch request.
    solo.feed(P, { type: MessageType.Instruction, slice: 0, target: A, targetLoadSeen: 1 });
    expect(solo.sendsOf(MessageType.SwitchRequest, since)).toEqual([]);
    expect(solo.engine.parents()[0]).toBe(P);

    // Control: when A's filter is clean, A is reported and the instruction is followed.
    solo.feed(A, solo.advertFrom(A, spec(1, { 0: { receiving: true, filter: bloomMaskFor(P) } })));
    const since2 = solo.mark();
    solo.advance(solo.now + 1000);
    solo.feed(P, dataMessage(0, 8, bloomMaskFor(P), 2));
    const reports = solo.sendsOf(MessageType.LoadReport, since2);
    expect(reports.flatMap((r) => r.message.candidates.map((c) => c.peer))).toContain(A);
    solo.feed(P, { type: MessageType.Instruction, slice: 0, target: A, targetLoadSeen: 1 });
    expect(solo.sendsOf(MessageType.SwitchRequest, since2).map((r) => r.to)).toEqual([A]);
  });
});

describe('loop detection (thesis §4.2, loop avoidance and detection)', () => {
  it('drops a data packet carrying our own mask, reports loopDetected and picks a new parent', () => {
    const solo = nodeWithParent();
    const since = solo.mark();
    const looped = bloomOr(bloomOr(bloomMaskFor(P), solo.engine.mask), bloomMaskFor(C));
    solo.feed(P, dataMessage(0, 5, looped, 7));
    expect(solo.deliveries(since)).toEqual([]);
    expect(solo.sendsOf(MessageType.Data, since)).toEqual([]); // not forwarded to C either
    expect(solo.events('loopDetected', since).map((e) => e.event)).toEqual([
      { type: 'loopDetected', slice: 0, by: 'data' },
    ]);
    expect(solo.engine.counters.loopsDetected).toBe(1);
    // Leaves the looping parent and asks Q at once.
    expect(
      solo.sendsOf(MessageType.TreeLeave, since).map((r) => [r.to, r.message.slice, r.message.role]),
    ).toEqual([[P, 0, TreeRole.Child]]);
    const lost = solo.events('parentChanged', since).map((e) => e.event);
    expect(lost).toEqual([
      { type: 'parentChanged', slice: 0, parent: null, previous: P, switchKind: 'lost' },
    ]);
    const requests = solo.sendsOf(MessageType.ForcedParentRequest, since);
    expect(requests.map((r) => [r.to, r.message.slice, r.message.reason])).toEqual([
      [Q, 0, ForcedReason.Loop],
    ]);
    // It asks for what it misses, from the first packet not yet received.
    expect(requests[0]!.message.fromSeq).toBe(5);
    solo.feed(Q, accept(0, 5));
    expect(solo.engine.parents()[0]).toBe(Q);
    // The old parent's packets are now strays; Q's are delivered.
    solo.feed(P, dataMessage(0, 5, bloomMaskFor(P), 2));
    solo.feed(Q, dataMessage(0, 5, bloomMaskFor(Q), 2));
    expect(solo.deliveries(since).map((d) => [d.seq, d.from])).toEqual([[5, Q]]);
  });

  it('a probe carrying our own mask exposes the loop the same way', () => {
    const solo = nodeWithParent();
    const since = solo.mark();
    solo.feed(P, {
      type: MessageType.Probe,
      slice: 0,
      probeId: 77,
      bloom: bloomOr(solo.engine.mask, bloomMaskFor(P)),
      hops: 3,
    });
    expect(solo.events('loopDetected', since).map((e) => e.event)).toEqual([
      { type: 'loopDetected', slice: 0, by: 'probe' },
    ]);
    expect(solo.sendsOf(MessageType.Probe, since)).toEqual([]); // not forwarded
    expect(solo.sendsOf(MessageType.TreeLeave, since).map((r) => r.to)).toEqual([P]);
    expect(solo.sendsOf(MessageType.ForcedParentRequest, since).map((r) => [r.to, r.message.reason])).toEqual(
      [[Q, ForcedReason.Loop]],
    );
  });

  it('a clean probe is passed on to our children with our mask added, once per probe id', () => {
    const solo = nodeWithParent();
    const since = solo.mark();
    const probe = { type: MessageType.Probe, slice: 0, probeId: 9, bloom: bloomMaskFor(P), hops: 1 } as const;
    solo.feed(P, probe);
    solo.feed(P, probe);
    const forwarded = solo.sendsOf(MessageType.Probe, since);
    expect(forwarded.map((r) => r.to)).toEqual([C]);
    expect(forwarded[0]!.message.bloom).toEqual(bloomOr(bloomMaskFor(P), solo.engine.mask));
    expect(forwarded[0]!.message.hops).toBe(2);
    expect(solo.events('loopDetected', since)).toEqual([]);
    // A probe from a node that is not our parent is ignored.
    solo.feed(Q, { ...probe, probeId: 10 });
    expect(solo.sendsOf(MessageType.Probe, since)).toHaveLength(1);
  });

  it('probes its subtree when its parent falls silent', () => {
    const solo = nodeWithParent();
    const since = solo.mark();
    // Keep P alive (adverts) but send no data on slice 0.
    for (let t = 1; t <= 4; t++) {
      solo.advance(solo.now + 1000);
      solo.feed(P, solo.advertFrom(P, spec(5, { 0: { receiving: false } })));
    }
    const probes = solo.sendsOf(MessageType.Probe, since);
    expect(probes.length).toBeGreaterThanOrEqual(1);
    expect(probes.every((r) => r.to === C && r.message.slice === 0)).toBe(true);
    expect(probes[0]!.message.bloom).toEqual(solo.engine.mask);
    // Not before 2.5 s of silence.
    const lastData = solo.log.filter((r) => r.action.kind === 'deliver').at(-1)!.time;
    expect(probes[0]!.time - lastData).toBeGreaterThanOrEqual(2500);
  });
});
