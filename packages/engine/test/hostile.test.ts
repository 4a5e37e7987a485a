// A parent that forges sequence numbers (issue 18): it replays a genuine data message with only the
// sequence changed. Before the sequence window, one such packet made every honest packet after it
// look late, was forwarded to the whole subtree, and nobody ever left the parent.
import { describe, expect, it } from 'vitest';
import { bloomOr, MessageType } from '@chunkycast/wire';
import { bloomMaskFor } from '../src/index.js';
import { SliceState } from '../src/state.js';
import { C, dataMessage, nodeWithParent, P, Q } from './solo.js';

const FROM_P = bloomOr(bloomMaskFor(200), bloomMaskFor(P));

describe('a parent forging data sequence numbers', () => {
  for (const forged of [1_000_000, 2 ** 32 - 1, 5 + 64 + 1])
    it(`drops sequence ${forged} (never delivered or forwarded), counts it, and keeps the honest stream`, () => {
      const solo = nodeWithParent(); // packets 0..4 from P, 100 ms apart; child C from 5 on
      const since = solo.mark();
      solo.advance(solo.now + 100);
      solo.feed(P, dataMessage(0, forged, FROM_P, 2));
      expect(solo.deliveries(since)).toEqual([]);
      expect(solo.sendsOf(MessageType.Data, since)).toEqual([]);
      expect(solo.engine.counters.forgedSequences).toBe(1);
      expect(solo.events('protocolViolation', since).map((e) => e.event.peer)).toEqual([P]);
      // The honest packets that follow are delivered and forwarded as before.
      for (let seq = 5; seq < 10; seq++) {
        solo.advance(solo.now + 100);
        solo.feed(P, dataMessage(0, seq, FROM_P, 2));
      }
      expect(solo.deliveries(since).map((d) => d.seq)).toEqual([5, 6, 7, 8, 9]);
      expect(solo.sendsOf(MessageType.Data, since).map((r) => [r.to, r.message.seq])).toEqual(
        [5, 6, 7, 8, 9].map((seq) => [C, seq]),
      );
      expect(solo.engine.parents()[0]).toBe(P);
    });

  it('allows the lead the time since the last packet justifies (a silent spell, then the live edge)', () => {
    const solo = nodeWithParent();
    const since = solo.mark();
    // 3 s without a packet (below the 4 s failure timeout) at one per 100 ms: the stream moved on
    // by about 30 packets.
    solo.advance(solo.now + 3000);
    solo.feed(P, dataMessage(0, 34, FROM_P, 2));
    expect(solo.deliveries(since).map((d) => d.seq)).toEqual([34]);
    expect(solo.engine.counters.forgedSequences).toBe(0);
  });

  it('cuts off a parent that keeps forging, and asks another for the slice from an honest sequence', () => {
    const solo = nodeWithParent();
    const since = solo.mark();
    const limit = solo.engine.config.protocol.maxViolationsPerPeer;
    for (let k = 0; k < limit; k++) {
      solo.advance(solo.now + 10);
      solo.feed(P, dataMessage(0, 1_000_000 + k, FROM_P, 2));
    }
    expect(solo.engine.counters.forgedSequences).toBe(limit);
    expect(
      solo.log
        .slice(since)
        .filter((r) => r.action.kind === 'disconnect')
        .map((r) => r.action),
    ).toEqual([{ kind: 'disconnect', peer: P }]);
    expect(solo.engine.parents()[0]).not.toBe(P);
    // It asks Q for slice 0 from the sequence it actually lacks, not from a forged one.
    solo.advance(solo.now + 2000);
    const requests = solo
      .sends(since)
      .filter(
        (r) => r.to === Q && r.message.type === MessageType.ForcedParentRequest && r.message.slice === 0,
      );
    expect(requests.length).toBeGreaterThan(0);
    for (const r of requests)
      if (r.message.type === MessageType.ForcedParentRequest) expect(r.message.fromSeq).toBeLessThan(10);
    // Nothing from P reaches us any more.
    const after = solo.mark();
    solo.feed(P, dataMessage(0, 5, FROM_P, 2));
    expect(solo.deliveries(after)).toEqual([]);
  });
});

describe('the packet ring', () => {
  it('holds sequence 2³²−1 like any other (it once wrapped to −1, the empty-slot marker)', () => {
    const ring = new SliceState(64);
    const payload = new Uint8Array([1, 2, 3]);
    expect(ring.remember(2 ** 32 - 1, payload, 0)).toBe(true);
    expect(ring.payloadOf(2 ** 32 - 1)).toBe(payload);
    expect(ring.remember(2 ** 32 - 1, payload, 1)).toBe(false); // now a duplicate
  });
});
