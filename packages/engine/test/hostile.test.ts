// A parent that forges sequence numbers (issue 18): it replays a genuine data message with only the
// sequence changed. Before the sequence window, one such packet made every honest packet after it
// look late, was forwarded to the whole subtree, and nobody ever left the parent.
import { describe, expect, it } from 'vitest';
import { bloomOr, EMPTY_BLOOM, ForcedReason, MessageType, type PeerId } from '@chunkycast/wire';
import { bloomMaskFor } from '../src/index.js';
import { SliceState } from '../src/state.js';
import { AUDIT_MAX_MISSES, AUDIT_SETTLE_MS, AUDIT_WINDOW_PACKETS, REQUEST_LIMITS } from '../src/trust.js';
import { C, dataMessage, N, nodeWithParent, P, Q, Solo, accept, spec } from './solo.js';

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

  it('lets go of bytes older than ringPayloadMaxAgeMs but still dedupes their packets', () => {
    const aged = new SliceState(64, 20_000);
    const kept = new SliceState(64);
    for (const [seq, at] of [
      [0, 0],
      [1, 15_000],
      [2, 25_000],
    ] as const) {
      aged.remember(seq, new Uint8Array([seq]), at);
      kept.remember(seq, new Uint8Array([seq]), at);
    }
    expect(aged.payloadOf(0)).toBeUndefined(); // 25 s old when seq 2 came
    expect(aged.holds(0)).toBe(true);
    expect(aged.remember(0, new Uint8Array([0]), 25_001)).toBe(false); // still a duplicate
    expect(aged.payloadOf(1)).toEqual(new Uint8Array([1]));
    expect(aged.payloadOf(2)).toEqual(new Uint8Array([2]));
    expect(kept.payloadOf(0)).toEqual(new Uint8Array([0])); // 0: kept as long as the slot
  });
});

/** Feed P's packets `from`..`to` of slice 0, 100 ms apart, skipping those `withhold` says. */
function stream(
  solo: Solo,
  from: number,
  to: number,
  withhold: (seq: number) => boolean = () => false,
): void {
  for (let seq = from; seq <= to; seq++) {
    solo.advance(solo.now + 100);
    if (!withhold(seq)) solo.feed(P, dataMessage(0, seq, FROM_P, 2));
  }
}

function violationsAgainst(solo: Solo, peer: number, since: number): string[] {
  return solo
    .events('protocolViolation', since)
    .filter((e) => e.event.peer === peer)
    .map((e) => e.event.reason);
}

describe('a parent replaying packets', () => {
  it('sends a packet again long after we took it: dropped, never forwarded, a violation', () => {
    const solo = nodeWithParent();
    stream(solo, 5, 40); // 3.6 s on: well past the replay grace
    const since = solo.mark();
    solo.feed(P, dataMessage(0, 30, FROM_P, 2));
    expect(solo.engine.counters.replayedPackets).toBe(1);
    expect(violationsAgainst(solo, P, since)).toEqual(['replayed sequence 30 on slice 0']);
    expect(solo.sendsOf(MessageType.Data, since)).toEqual([]);
    expect(solo.deliveries(since)).toEqual([]);
  });

  it('is allowed a resend right after it took us (a parent taking us back resends what it holds)', () => {
    const solo = nodeWithParent(); // P took us 0.5 s ago
    const since = solo.mark();
    solo.feed(P, dataMessage(0, 3, FROM_P, 2));
    expect(solo.engine.counters.replayedPackets).toBe(0);
    expect(violationsAgainst(solo, P, since)).toEqual([]);
  });
});

/** A member that took slices 0–3 from P (P's advert said it receives them), before any packet. */
function fedFourSlicesByP(): Solo {
  const solo = new Solo({ id: N, role: 'member', targetLoadSlices: 8 }, 1);
  solo.startWith([P, Q]);
  solo.advance(1000);
  const receiving = { receiving: true, filter: bloomMaskFor(200) };
  solo.feed(P, solo.advertFrom(P, spec(5, { 0: receiving, 1: receiving, 2: receiving, 3: receiving })));
  for (const r of solo.sendsOf(MessageType.ForcedParentRequest)) solo.feed(r.to, accept(r.message.slice));
  return solo;
}

describe("a forged sequence as a slice's first packet", () => {
  it('is found once three slices flow, forgotten, and counted against its sender', () => {
    const solo = fedFourSlicesByP();
    expect(solo.engine.parents().slice(0, 4)).toEqual([P, P, P, P]);
    // Slice 0's first packet is forged: nothing to judge it by yet.
    solo.advance(solo.now + 100);
    solo.feed(P, dataMessage(0, 1_000_000, FROM_P, 2));
    const since = solo.mark();
    for (let seq = 0; seq < 3; seq++) {
      solo.advance(solo.now + 100);
      for (const slice of [1, 2, 3]) solo.feed(P, dataMessage(slice, seq, FROM_P, 2));
      solo.feed(P, dataMessage(0, seq, FROM_P, 2));
    }
    expect(solo.engine.counters.poisonedSlices).toBe(1);
    expect(violationsAgainst(solo, P, since)).toEqual([
      'slice 0 sequence beyond the window (set before it could be judged)',
    ]);
    // Slice 0's honest packets are delivered again, from the first one after the reset.
    expect(
      solo
        .deliveries(since)
        .filter((d) => d.slice === 0)
        .map((d) => d.seq),
    ).toEqual([0, 1, 2]);
  });
});

describe('a forged sequence once three slices flow', () => {
  // With three slices flowing the engine skips the window's computation for packets below the
  // third slice's sequence plus the slack, as found at its last computation (seqWindowFloor): a
  // packet just beyond the window must still be caught whenever that computation last ran, on the
  // most advanced slice as on the others, and the honest packets must still pass.
  for (const slice of [0, 3])
    it(`drops a sequence just beyond the window on slice ${slice}, round after round`, () => {
      const solo = fedFourSlicesByP();
      expect(solo.engine.parents().slice(0, 4)).toEqual([P, P, P, P]);
      const since = solo.mark();
      const rounds = 12; // below maxViolationsPerPeer: P stays our parent
      const honest: [number, number][] = [];
      for (let seq = 0; seq < rounds; seq++) {
        solo.advance(solo.now + 100);
        // Slice 3 runs one packet ahead of the others.
        for (const s of [0, 1, 2, 3]) {
          solo.feed(P, dataMessage(s, s === 3 ? seq + 1 : seq, FROM_P, 2));
          honest.push([s, s === 3 ? seq + 1 : seq]);
        }
        // The window now: the third slice's sequence, nothing for time (no time passed), the slack of 4.
        solo.feed(P, dataMessage(slice, seq + 4 + 1, FROM_P, 2));
      }
      expect(solo.engine.counters.forgedSequences).toBe(rounds);
      expect(solo.deliveries(since).map((d) => [d.slice, d.seq])).toEqual(honest);
    });
});

describe('a forged first packet', () => {
  it('is judged by where a trusted party says the stream is (liveSequence)', () => {
    const solo = new Solo({ id: N, role: 'member', targetLoadSlices: 8 }, 1);
    solo.startWith([P, Q]);
    solo.input({ kind: 'liveSequence', seq: 40 });
    solo.advance(1000);
    solo.feed(P, solo.advertFrom(P, spec(5, { 0: { receiving: true, filter: bloomMaskFor(200) } })));
    solo.feed(P, accept(0));
    const since = solo.mark();
    solo.feed(P, dataMessage(0, 1_000_000, FROM_P, 2));
    expect(solo.deliveries(since)).toEqual([]);
    expect(solo.engine.counters.forgedSequences).toBe(1);
    solo.feed(P, dataMessage(0, 45, FROM_P, 2)); // 1 s after the word at 40: within reach
    expect(solo.deliveries(since).map((d) => d.seq)).toEqual([45]);
  });
});

describe('a flood of requests', () => {
  it('is served up to the burst, then each request beyond the rate is dropped and counted; the flooder is cut off', () => {
    const solo = nodeWithParent();
    const since = solo.mark();
    const limit = solo.engine.config.protocol.maxViolationsPerPeer;
    // All at one instant: no tokens come back meanwhile.
    for (let k = 0; k < REQUEST_LIMITS.parent.burst + limit; k++)
      solo.feed(Q, {
        type: MessageType.ForcedParentRequest,
        slice: k % 4,
        reason: ForcedReason.Join,
        fromSeq: 0,
      });
    expect(solo.engine.counters.requestsThrottled).toBe(limit);
    expect(violationsAgainst(solo, Q, since)).toHaveLength(limit);
    expect(
      solo.log
        .slice(since)
        .filter((r) => r.action.kind === 'disconnect')
        .map((r) => r.action),
    ).toEqual([{ kind: 'disconnect', peer: Q }]);
  });

  it('leaves a requester within the rate alone', () => {
    const solo = nodeWithParent();
    const since = solo.mark();
    for (let k = 0; k < 60; k++) {
      solo.advance(solo.now + 350); // about 3 per second, under the 4 allowed
      solo.feed(Q, {
        type: MessageType.ForcedParentRequest,
        slice: 1,
        reason: ForcedReason.Join,
        fromSeq: 0,
      });
    }
    expect(solo.engine.counters.requestsThrottled).toBe(0);
    expect(violationsAgainst(solo, Q, since)).toEqual([]);
  });
});

/** Playback from now, a second behind packet 4 (which just arrived): the audit needs a playout clock. */
function playing(solo: Solo): void {
  solo.input({ kind: 'playout', zeroAtMs: solo.now - 400 + 1000, packetIntervalMs: 100, fromMs: solo.now });
}

/** Packets the audit leaves alone: those playing in its first AUDIT_SETTLE_MS, and the ring's span. */
const SETTLE_PACKETS = AUDIT_SETTLE_MS / 100 + 64;

describe('the audit of a parent', () => {
  it('leaves and distrusts a parent that forwards half of what it owes; it is not asked again', () => {
    const solo = nodeWithParent();
    playing(solo);
    stream(solo, 5, 5 + SETTLE_PACKETS - 1);
    const since = solo.mark();
    // Every other packet withheld: far more than AUDIT_MAX_MISSES of a window of AUDIT_WINDOW_PACKETS.
    expect(AUDIT_WINDOW_PACKETS / 2).toBeGreaterThan(AUDIT_MAX_MISSES);
    const from = 5 + SETTLE_PACKETS;
    stream(solo, from, from + 64 + AUDIT_WINDOW_PACKETS * 2, (seq) => seq % 2 === 1);
    expect(violationsAgainst(solo, P, since)[0]).toMatch(
      /^parent missed [0-9]+ of the last [0-9]+ packets on slice 0$/,
    );
    expect(solo.engine.counters.parentsDistrusted).toBe(1);
    expect(solo.engine.parents()[0]).not.toBe(P);
    const asked = solo.sendsOf(MessageType.ForcedParentRequest, since).map((r) => r.to);
    expect(asked).not.toContain(P);
  });

  it('keeps a parent that delivers everything, if some of it late (what it repaired itself)', () => {
    const solo = nodeWithParent();
    playing(solo);
    const since = solo.mark();
    // Every fifth packet comes 2 s late: delivered all the same.
    for (let seq = 5; seq <= 5 + SETTLE_PACKETS + AUDIT_WINDOW_PACKETS * 3; seq++) {
      solo.advance(solo.now + 100);
      if (seq % 5 !== 0) solo.feed(P, dataMessage(0, seq, FROM_P, 2));
      if (seq % 5 === 0 && seq >= 25) solo.feed(P, dataMessage(0, seq - 20, FROM_P, 2));
    }
    expect(violationsAgainst(solo, P, since)).toEqual([]);
    expect(solo.engine.counters.parentsDistrusted).toBe(0);
    expect(solo.engine.parents()[0]).toBe(P);
  });
});

describe('a parent whose packets carry our own mask', () => {
  it('is left as a loop and not taken again for a while', () => {
    const solo = nodeWithParent();
    const since = solo.mark();
    solo.advance(solo.now + 100);
    solo.feed(P, dataMessage(0, 5, bloomOr(FROM_P, bloomMaskFor(N)), 3));
    expect(solo.engine.counters.loopsDetected).toBe(1);
    expect(violationsAgainst(solo, P, since)).toEqual([]); // a loop is no proof of a lie
    expect(solo.engine.counters.parentsDistrusted).toBe(1);
    solo.advance(solo.now + 10_000);
    const asked = solo.sendsOf(MessageType.ForcedParentRequest, since).map((r) => r.to);
    expect(asked).not.toContain(P);
  });
});

describe('a slice whose root feeds nobody', () => {
  const ROOTS: readonly PeerId[] = [11, 12, 13, 14];
  const starved = (slice: number): Parameters<Solo['feed']>[1] => ({
    type: MessageType.ForcedParentRequest,
    slice,
    reason: ForcedReason.ParentLost,
    fromSeq: 0,
  });

  /** The true source with four slices rooted by ROOTS (and confirmed), and spares 21, 22 sampled. */
  function source(): Solo {
    const solo = new Solo({ id: 0, role: 'source', targetLoadSlices: 0, protocol: { slices: 4 } });
    solo.input({ kind: 'start' });
    solo.input({ kind: 'bootstrap', peers: ROOTS });
    for (const r of ROOTS) solo.feed(r, { type: MessageType.Heartbeat });
    expect([...solo.engine.currentSliceSources()].sort()).toEqual([...ROOTS]);
    return solo;
  }

  it('gets a new root once three members say it starves (not one, nor two, nor too soon)', () => {
    const solo = source();
    const keepAlive = (): void => {
      for (const r of ROOTS) solo.feed(r, { type: MessageType.Heartbeat });
    };
    const bad = solo.engine.currentSliceSources()[2];
    // Within the grace after the assignment: not heard.
    for (const m of [31, 32, 33]) solo.feed(m, starved(2));
    expect(solo.engine.currentSliceSources()[2]).toBe(bad);
    for (let t = 1000; t <= 11_000; t += 1000) {
      solo.advance(t);
      keepAlive();
    }
    solo.feed(31, starved(2));
    solo.feed(31, starved(2)); // one member twice is one complaint
    solo.feed(32, starved(2));
    expect(solo.engine.currentSliceSources()[2]).toBe(bad);
    expect(solo.engine.counters.rootsReplacedForStarving).toBe(0);
    solo.input({ kind: 'bootstrap', peers: [21, 22] }); // spares
    solo.feed(33, starved(2));
    expect(solo.engine.counters.rootsReplacedForStarving).toBe(1);
    const root = solo.engine.currentSliceSources()[2];
    expect(root === 21 || root === 22).toBe(true);
    // The replaced root is not made a root again for a while, even when sampled.
    solo.input({ kind: 'bootstrap', peers: [bad ?? 0] });
    solo.feed(root ?? 0, { type: MessageType.Heartbeat });
    expect(solo.engine.currentSliceSources().filter((r) => r === bad)).toEqual([]);
  });

  it('is reported by a member that left the root for withholding, at once', () => {
    const solo = new Solo({ id: N, role: 'member', targetLoadSlices: 8 }, 1);
    solo.startWith([P, Q]);
    solo.advance(1000);
    const rooting = { receiving: true, isSliceSource: true, filter: EMPTY_BLOOM };
    solo.feed(P, solo.advertFrom(P, spec(5, { 0: rooting })));
    solo.feed(P, accept(0));
    expect(solo.engine.parents()[0]).toBe(P);
    const since = solo.mark();
    // P says it roots slice 0 and receives it, and sends nothing: left after the silence.
    for (let t = 0; t < 8; t++) {
      solo.advance(solo.now + 1000);
      solo.feed(P, solo.advertFrom(P, spec(5, { 0: rooting })));
    }
    expect(violationsAgainst(solo, P, since)[0]).toMatch(/^parent silent [0-9]+ ms on slice 0$/);
    const notices = solo.sendsOf(MessageType.ForcedParentRequest, since).filter((r) => r.to === 0);
    expect(notices.map((r) => r.message.slice)).toEqual([0]);
    expect(solo.engine.counters.starvedSliceNotices).toBe(1);
  });
});

describe('a child that asks again and again for what it already gets', () => {
  it('is accepted each time but resent what we hold at most once per request timeout', () => {
    const solo = nodeWithParent(); // C took slice 0 from packet 5 a moment ago
    stream(solo, 5, 9);
    const ask = (): Parameters<Solo['feed']>[1] => ({
      type: MessageType.ForcedParentRequest,
      slice: 0,
      reason: ForcedReason.ParentQuit, // a planned hand-off: everything held from fromSeq is resent
      fromSeq: 5,
    });
    const since = solo.mark();
    solo.feed(C, ask());
    solo.feed(C, ask());
    const replies = solo.sendsOf(MessageType.SwitchReply, since).filter((r) => r.to === C);
    expect(replies.map((r) => r.message.accepted)).toEqual([true, true]);
    expect(solo.sendsOf(MessageType.Data, since).filter((r) => r.to === C)).toEqual([]);
    solo.advance(solo.now + solo.engine.config.protocol.requestTimeoutMs);
    const later = solo.mark();
    solo.feed(C, ask());
    const resent = solo.sendsOf(MessageType.Data, later).filter((r) => r.to === C);
    expect(resent.length).toBeGreaterThan(0);
  });
});
