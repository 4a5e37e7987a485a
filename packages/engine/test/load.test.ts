import { describe, expect, it } from 'vitest';
import {
  ForcedReason,
  LinkDirection,
  LinkOp,
  MessageType,
  RejectReason,
  SwitchReason,
  type Message,
  type PeerId,
} from '@chunkycast/wire';
import { accept, dataMessage, Solo } from './solo.js';

describe('switch request admission', () => {
  const PARENT = 101;

  /** Q: TL 2, Lat0 → LLT = ULT = 2, ML 3; receiving slice 0 from PARENT. */
  function receivingNode(): Solo {
    const solo = new Solo({
      id: 50,
      role: 'member',
      targetLoadSlices: 2,
      protocol: { latencyRangeFraction: 0 },
    });
    solo.startWith([PARENT, 102, 103, 104, 105]);
    solo.advance(1000);
    solo.feed(
      PARENT,
      solo.advertFrom(PARENT, {
        load: 4,
        lower: 4,
        upper: 4,
        maxLoad: 6,
        slices: { 0: { receiving: true } },
      }),
    );
    expect(solo.sendsOf(MessageType.ForcedParentRequest).map((r) => r.to)).toEqual([PARENT]);
    solo.feed(PARENT, accept(0));
    for (let seq = 0; seq < 5; seq++) {
      solo.advance(solo.now + 100);
      solo.feed(PARENT, dataMessage(0, seq));
    }
    return solo;
  }

  function loadRequest(handoffSeq: number): Message {
    return {
      type: MessageType.SwitchRequest,
      slice: 0,
      reason: SwitchReason.Load,
      handoffSeq,
      targetLoadSeen: 0,
      parentLoadSeen: 9,
    };
  }

  it('accepts load-switch children only while below LLT, then rejects with NotUnderloaded', () => {
    const solo = receivingNode();
    const results: [PeerId, boolean, number][] = [];
    for (const child of [102, 103, 104]) {
      const since = solo.mark();
      solo.feed(child, loadRequest(25));
      const r = solo.sendsOf(MessageType.SwitchReply, since).filter((x) => x.to === child);
      expect(r).toHaveLength(1);
      results.push([child, r[0]!.message.accepted, r[0]!.message.rejectReason]);
    }
    expect(results).toEqual([
      [102, true, RejectReason.None],
      [103, true, RejectReason.None],
      [104, false, RejectReason.NotUnderloaded],
    ]);
    expect(solo.engine.currentLoad).toBe(2);
    // A forced request is still accepted up to ML (3): load switches and forced requests differ.
    const since = solo.mark();
    solo.feed(105, {
      type: MessageType.ForcedParentRequest,
      slice: 0,
      reason: ForcedReason.ParentLost,
      fromSeq: 5,
    });
    expect(solo.sendsOf(MessageType.SwitchReply, since)[0]!.message.accepted).toBe(true);
  });

  it('the accepted child is served from the hand-off sequence number on', () => {
    const solo = receivingNode();
    const since = solo.mark();
    solo.feed(102, loadRequest(7));
    for (let seq = 5; seq < 10; seq++) {
      solo.advance(solo.now + 100);
      solo.feed(PARENT, dataMessage(0, seq));
    }
    const sent = solo.sendsOf(MessageType.Data, since).filter((r) => r.to === 102);
    expect(sent.map((r) => r.message.seq)).toEqual([7, 8, 9]);
  });
});

describe('hand-offs in a row', () => {
  it('a second parent change before the first hand-off completes loses nothing', () => {
    const [A, B, C2] = [101, 102, 103];
    const solo = new Solo({ id: 50, role: 'member', targetLoadSlices: 8 });
    solo.startWith([A, B, C2]);
    solo.advance(1000);
    const receiving = { load: 4, lower: 7, upper: 9, maxLoad: 12, slices: { 0: { receiving: true } } };
    solo.feed(A, solo.advertFrom(A, receiving));
    solo.feed(A, accept(0));
    solo.feed(B, solo.advertFrom(B, receiving));
    solo.feed(C2, solo.advertFrom(C2, receiving));
    expect(solo.engine.parents()[0]).toBe(A);

    /** A Swaplinks swap takes `peer` away: both links removed, it stays a tree peer. */
    const unlink = (peer: PeerId): void => {
      solo.feed(peer, { type: MessageType.Link, op: LinkOp.Remove, direction: LinkDirection.Out, walkId: 0 });
      solo.feed(peer, { type: MessageType.Link, op: LinkOp.Remove, direction: LinkDirection.In, walkId: 0 });
    };
    /** Accept the forced hand-off request N just sent to `to`. */
    const acceptForced = (to: PeerId): number => {
      const r = solo.sendsOf(MessageType.ForcedParentRequest).filter((x) => x.to === to);
      expect(r).toHaveLength(1);
      expect(r[0]!.message.reason).toBe(ForcedReason.NeighbourChange);
      const handoff = r[0]!.message.fromSeq;
      solo.feed(to, {
        type: MessageType.SwitchReply,
        slice: 0,
        handoffSeq: handoff,
        accepted: true,
        rejectReason: RejectReason.None,
        load: 5,
      });
      return handoff;
    };

    // Each parent sends what it owes (the engine must ignore the rest): A all, B and C2 from their start.
    const ranges = new Map<PeerId, number>([[A, 0]]);
    let h1 = -1;
    let h2 = -1;
    for (let seq = 0; seq < 80; seq++) {
      solo.advance(1000 + seq * 100);
      // Live neighbours are heard from every second (a parent is not asked after two silent ones).
      if (seq % 10 === 0) for (const peer of [B, C2]) solo.feed(peer, { type: MessageType.Heartbeat });
      for (const [peer, from] of ranges) if (seq >= from) solo.feed(peer, dataMessage(0, seq));
      if (seq === 10) {
        unlink(A);
        h1 = acceptForced(B);
        ranges.set(B, h1);
      }
      if (seq === 15) unlink(B);
      // The engine starts the second hand-off only once the first has drained (one at a time per
      // slice): accept it whenever it comes.
      if (seq >= 15 && h2 < 0 && solo.sendsOf(MessageType.ForcedParentRequest).some((x) => x.to === C2)) {
        h2 = acceptForced(C2);
        ranges.set(C2, h2);
      }
    }
    expect(solo.engine.parents()[0]).toBe(C2);
    expect(h1).toBeGreaterThan(10);
    expect(h2).toBeGreaterThan(h1);
    const seqs = solo
      .deliveries()
      .filter((d) => d.slice === 0)
      .map((d) => d.seq);
    const missing: number[] = [];
    for (let q = 0; q < 80; q++) if (!seqs.includes(q)) missing.push(q);
    console.info(
      `two hand-offs (at ${h1}, then ${h2} before ${h1} arrived): missing ${JSON.stringify(missing)}`,
    );
    expect(missing).toEqual([]);
    expect(new Set(seqs).size).toBe(seqs.length);
  });
});

describe('which parents shed load (thesis §4.2, fine-tuning load)', () => {
  const [PARENT, SPARE] = [101, 102];
  /** TL 8, Lat2: LLT 7, ULT 9, ML 12, as N's own. */
  const thresholds = { target: 8, lower: 7, upper: 9, maxLoad: 12 };

  /** N (TL 8) with `others` as neighbours besides PARENT, whose child it has become on slice 0. */
  function childOfParent(loadShedAboveUlt: number, others: readonly PeerId[]): Solo {
    const solo = new Solo({ id: 50, role: 'member', targetLoadSlices: 8, protocol: { loadShedAboveUlt } });
    solo.startWith([PARENT, ...others]);
    solo.advance(1000);
    solo.feed(
      PARENT,
      solo.advertFrom(PARENT, { ...thresholds, load: 4, slices: { 0: { receiving: true } } }),
    );
    expect(solo.sendsOf(MessageType.ForcedParentRequest).map((r) => r.to)).toEqual([PARENT]);
    solo.feed(PARENT, accept(0));
    return solo;
  }

  /**
   * Child side. N gets slice 0 from PARENT, now at `parentLoad`; SPARE, below its LLT, gets slice 0
   * too and could take N. Returns the load reports N sent PARENT over the next 3 s (three decision
   * rounds).
   */
  function reportsTo(parentLoad: number, loadShedAboveUlt: number): number {
    const solo = childOfParent(loadShedAboveUlt, [SPARE]);
    const since = solo.mark();
    for (let seq = 0; seq < 30; seq++) {
      solo.advance(1100 + seq * 100);
      solo.feed(PARENT, dataMessage(0, seq));
      if (seq % 10 === 0) {
        solo.feed(
          PARENT,
          solo.advertFrom(PARENT, { ...thresholds, load: parentLoad, slices: { 0: { receiving: true } } }),
        );
        solo.feed(
          SPARE,
          solo.advertFrom(SPARE, { ...thresholds, load: 2, slices: { 0: { receiving: true } } }),
        );
      }
    }
    expect(solo.engine.parents()[0]).toBe(PARENT);
    const reports = solo.sendsOf(MessageType.LoadReport, since).filter((r) => r.to === PARENT);
    for (const r of reports) expect(r.message.candidates.map((c) => c.peer)).toEqual([SPARE]);
    return reports.length;
  }

  it('by default a child reports a parent above its TL; with loadShedAboveUlt only one above its ULT', () => {
    // Load 9: above TL 8, at ULT 9.
    expect(reportsTo(9, 0)).toBeGreaterThan(0);
    expect(reportsTo(9, 1)).toBe(0);
    // Load 10: above ULT.
    expect(reportsTo(10, 0)).toBeGreaterThan(0);
    expect(reportsTo(10, 1)).toBeGreaterThan(0);
  });

  /**
   * Parent side. N (TL 8, ULT 9) holds `load` children on slice 0, and one of them reports SPARE,
   * below its LLT. Returns the instructions N sent at its next decision round.
   */
  function instructionsWith(load: number, loadShedAboveUlt: number): number {
    const children = Array.from({ length: load }, (_, i) => 201 + i);
    const solo = childOfParent(loadShedAboveUlt, [SPARE, ...children]);
    solo.feed(PARENT, dataMessage(0, 0));
    for (const child of children)
      solo.feed(child, {
        type: MessageType.ForcedParentRequest,
        slice: 0,
        reason: ForcedReason.Join,
        fromSeq: 1,
      });
    expect(solo.engine.currentLoad).toBe(load);
    const since = solo.mark();
    solo.feed(children[0]!, {
      type: MessageType.LoadReport,
      slice: 0,
      candidates: [{ peer: SPARE, load: 2, lowerLatencyThreshold: 7, targetLoad: 8 }],
    });
    solo.advance(3100);
    return solo.sendsOf(MessageType.Instruction, since).length;
  }

  it('by default a parent between TL and ULT sheds to a neighbour below its LLT; with loadShedAboveUlt it does not', () => {
    expect(instructionsWith(9, 0)).toBe(1);
    expect(instructionsWith(9, 1)).toBe(0);
    expect(instructionsWith(10, 0)).toBe(1);
    expect(instructionsWith(10, 1)).toBe(1);
  });
});
