import { describe, expect, it } from 'vitest';
import {
  bloomOr,
  EMPTY_BLOOM,
  ForcedReason,
  MessageType,
  RejectReason,
  RepairNakReason,
  SEQ_NONE,
  type Message,
  type PacketRepairRequestMessage,
  type PeerId,
} from '@chunkycast/wire';
import { bloomMaskFor, type Action, type ProtocolConfig } from '../src/index.js';
import { Solo, type AdvertSpec, type SliceAdvert } from './solo.js';

const ME = 50;
const A = 101; // the parent
const B = 102;
const C = 103;
const D = 104;
const E = 105;
const X = 106; // a child
const STRANGER = 999;
const SOURCE = 0;

const STEP_MS = 100;
/** Packet interval of one slice (the playout clock's packetIntervalMs). */
const INTERVAL_MS = 200;
/** First tree packet (seq 0 of every slice) arrives at T0. */
const T0 = 2000;
/** Playback buffer: packet seq 0 of slice 0 plays 5 s after it arrived. */
const ZERO_AT = T0 + 5000;
const GRACE_MS = 300;
const ORIGIN_LEAD_MS = 1500;
const PENDING_WAIT_MS = 1000;
const LOADS: AdvertSpec = { load: 4, lower: 7, upper: 9, maxLoad: 12 };

type Deliver = Extract<Action, { kind: 'deliver' }>;
type FetchOrigin = Extract<Action, { kind: 'fetchOrigin' }>;

function payloadFor(s: number, seq: number): Uint8Array {
  return Uint8Array.of(0xc0 | s, seq & 0xff, (seq >>> 8) & 0xff, 0x5a);
}

function covers(req: PacketRepairRequestMessage, seq: number): boolean {
  const bit = seq - req.baseSeq;
  return bit >= 0 && bit < 32 && ((req.wanted >>> bit) & 1) === 1;
}

function bits(...positions: number[]): number {
  let out = 0;
  for (const p of positions) out = (out | (1 << p)) >>> 0;
  return out;
}

function nak(req: PacketRepairRequestMessage, reason: RepairNakReason): Message {
  return {
    type: MessageType.PacketRepairNak,
    slice: req.slice,
    requestId: req.requestId,
    baseSeq: req.baseSeq,
    unserved: req.wanted,
    reason,
  };
}

function repairData(s: number, seq: number, requestId = 1, payload = payloadFor(s, seq)): Message {
  return { type: MessageType.PacketRepairData, slice: s, requestId, seq, hops: 2, payload };
}

function request(s: number, baseSeq: number, wanted: number, requestId = 7): Message {
  return { type: MessageType.PacketRepairRequest, slice: s, requestId, baseSeq, wanted };
}

interface RigOptions {
  readonly neighbours: readonly PeerId[];
  readonly slices?: number;
  readonly protocol?: Partial<ProtocolConfig>;
  readonly seed?: number;
  readonly targetLoadSlices?: number;
}

/**
 * One member (ME) driven by hand on a 100 ms grid: every second each peer in `adverts` advertises,
 * and `treeFrom` sends every slice's packet `seq` at T0 + seq·INTERVAL_MS + delayMs[slice], except
 * the `dropped` ones and none after `treeUntil`.
 */
class Rig {
  readonly solo: Solo;
  readonly adverts = new Map<PeerId, AdvertSpec>();
  readonly dropped = new Set<string>();
  readonly delayMs: number[];
  treeFrom: PeerId = A;
  treeUntil = Infinity;
  /** Called after each grid step (to answer the engine's requests, say). */
  onStep: ((t: number) => void) | null = null;

  constructor(options: RigOptions) {
    const slices = options.slices ?? 2;
    this.solo = new Solo(
      {
        id: ME,
        role: 'member',
        targetLoadSlices: options.targetLoadSlices ?? 8,
        protocol: { slices, repairGraceMs: GRACE_MS, ...options.protocol },
      },
      options.seed ?? 1,
    );
    this.delayMs = new Array<number>(slices).fill(0);
    this.solo.startWith(options.neighbours);
    this.solo.advance(1000);
  }

  get slices(): number {
    return this.solo.slices;
  }

  get dataSlices(): number {
    return this.solo.engine.config.dataSlices;
  }

  /** `parent` is the only neighbour receiving when asked, so it becomes the parent of every slice. */
  adopt(parent: PeerId = A): void {
    const slices: Record<number, SliceAdvert> = {};
    for (let s = 0; s < this.slices; s++) slices[s] = { receiving: true, offsetMs: 0 };
    const since = this.solo.mark();
    this.advertise(parent, slices);
    const asked = this.solo.sendsOf(MessageType.ForcedParentRequest, since);
    expect(asked.map((r) => [r.to, r.message.slice])).toEqual(
      Array.from({ length: this.slices }, (_, s) => [parent, s]),
    );
    for (const r of asked)
      this.solo.feed(parent, {
        type: MessageType.SwitchReply,
        slice: r.message.slice,
        handoffSeq: 0,
        accepted: true,
        rejectReason: RejectReason.None,
        load: 5,
      });
    expect(this.solo.engine.parents()).toEqual(new Array<PeerId>(this.slices).fill(parent));
  }

  /** `peer` advertises now and then every second; slices not given are not received. */
  advertise(peer: PeerId, slices: Readonly<Record<number, SliceAdvert>> = {}): void {
    const spec: AdvertSpec = { ...LOADS, slices };
    this.adverts.set(peer, spec);
    this.solo.feed(peer, this.solo.advertFrom(peer, spec));
  }

  drop(s: number, seq: number): void {
    this.dropped.add(`${s}/${seq}`);
  }

  treeCopy(s: number, seq: number, from: PeerId = this.treeFrom): Action[] {
    return this.solo.feed(from, {
      type: MessageType.Data,
      slice: s,
      seq,
      bloom: EMPTY_BLOOM,
      hops: from === SOURCE ? 0 : 1,
      payload: payloadFor(s, seq),
    });
  }

  playout(extra: { originRttMs?: number; fromMs?: number } = {}): Action[] {
    return this.solo.input({
      kind: 'playout',
      zeroAtMs: ZERO_AT,
      packetIntervalMs: INTERVAL_MS,
      fromMs: extra.fromMs ?? T0,
      ...(extra.originRttMs !== undefined ? { originRttMs: extra.originRttMs } : {}),
    });
  }

  /** Playback deadline of a packet. */
  deadline(s: number, seq: number): number {
    return ZERO_AT + (seq + s / this.dataSlices) * INTERVAL_MS;
  }

  runTo(end: number): void {
    const solo = this.solo;
    while (solo.now < end) {
      const t = Math.min(end, (Math.floor(solo.now / STEP_MS) + 1) * STEP_MS);
      solo.advance(t);
      if (t % 1000 === 0)
        for (const [peer, spec] of this.adverts) solo.feed(peer, solo.advertFrom(peer, spec));
      if (t <= this.treeUntil) {
        for (let s = 0; s < this.slices; s++) {
          const since = t - T0 - (this.delayMs[s] ?? 0);
          if (since < 0 || since % INTERVAL_MS !== 0) continue;
          const seq = since / INTERVAL_MS;
          if (!this.dropped.has(`${s}/${seq}`)) this.treeCopy(s, seq);
        }
      }
      this.onStep?.(t);
    }
  }

  /** No origin fetch before `due`, and slice 0's seq 5 asked of the origin exactly then (alone). */
  expectOriginFetchAt(due: number): void {
    this.runTo(due - STEP_MS);
    expect(this.fetches()).toEqual([]);
    this.runTo(due);
    expect(this.fetches().map((f) => [f.time, f.action.slice, f.action.seqs])).toEqual([[due, 0, [5]]]);
  }

  requests(since = 0): { time: number; to: PeerId; message: PacketRepairRequestMessage }[] {
    return this.solo.sendsOf(MessageType.PacketRepairRequest, since);
  }

  requestsFor(
    s: number,
    seq: number,
    since = 0,
  ): { time: number; to: PeerId; message: PacketRepairRequestMessage }[] {
    return this.requests(since).filter((r) => r.message.slice === s && covers(r.message, seq));
  }

  deliveriesOf(s: number, seq: number, since = 0): Deliver[] {
    return this.solo.deliveries(since).filter((d) => d.slice === s && d.seq === seq);
  }

  fetches(since = 0): { time: number; action: FetchOrigin }[] {
    const out: { time: number; action: FetchOrigin }[] = [];
    for (const { time, action } of this.solo.log.slice(since))
      if (action.kind === 'fetchOrigin') out.push({ time, action });
    return out;
  }
}

/**
 * ME takes both slices from A; A sends every packet but slice 0's seq 5 (expected at T0 + 1000 ms,
 * so missing from T0 + 1300 ms, deadline T0 + 6000 ms). The playout clock starts at T0.
 */
function missingFive(options: Partial<RigOptions> = {}, withPlayout = true): Rig {
  const rig = new Rig({ neighbours: [A, B], ...options });
  rig.adopt(A);
  rig.advertise(B); // a neighbour that receives nothing: no helper
  rig.drop(0, 5);
  rig.runTo(T0);
  if (withPlayout) rig.playout();
  return rig;
}

const DETECTED_AT = T0 + 5 * INTERVAL_MS + GRACE_MS;

describe('repair: requester', () => {
  it('asks for nothing before the host gives a playout clock', () => {
    const rig = missingFive({}, false);
    rig.runTo(T0 + 4000);
    expect(rig.requests()).toEqual([]);
    expect(rig.fetches()).toEqual([]);
    expect(rig.solo.engine.repair.counters.packetsMissing).toBe(0);
    expect(rig.solo.engine.repair.missingCount).toBe(0);
    // The same node with a clock does find it (deadline T0 + 6000 is still 2 s away): the packet
    // really was missing.
    const since = rig.solo.mark();
    rig.playout();
    rig.runTo(T0 + 4100);
    expect(rig.requestsFor(0, 5, since).map((r) => r.to)).toEqual([A]);
    expect(rig.solo.engine.repair.counters.packetsMissing).toBe(1);
  });

  it('asks the parent first, once expected arrival + grace has passed; the repair goes to the app and down the tree', () => {
    const rig = new Rig({ neighbours: [A, B, C, D, X] });
    rig.adopt(A);
    rig.advertise(B, { 0: { receiving: true, offsetMs: -100 }, 1: { receiving: true } });
    rig.advertise(X);
    const joined = rig.solo.mark();
    rig.solo.feed(X, {
      type: MessageType.ForcedParentRequest,
      slice: 0,
      reason: ForcedReason.Join,
      fromSeq: SEQ_NONE,
    });
    expect(rig.solo.sendsOf(MessageType.SwitchReply, joined).map((r) => [r.to, r.message.accepted])).toEqual([
      [X, true],
    ]);
    expect(rig.solo.engine.children()[0]).toEqual([X]);
    rig.drop(0, 5);
    rig.runTo(T0);
    rig.playout();
    rig.runTo(DETECTED_AT - STEP_MS);
    expect(rig.requests()).toEqual([]);
    rig.runTo(DETECTED_AT);
    const asked = rig.requests();
    expect(asked.map((r) => [r.time, r.to, r.message.slice, r.message.baseSeq, r.message.wanted])).toEqual([
      [DETECTED_AT, A, 0, 5, 1],
    ]);
    rig.runTo(DETECTED_AT + STEP_MS);
    const since = rig.solo.mark();
    const payload = payloadFor(0, 5);
    rig.solo.feed(A, repairData(0, 5, asked[0]!.message.requestId, payload));
    expect(rig.solo.deliveries(since)).toEqual([
      {
        kind: 'deliver',
        slice: 0,
        seq: 5,
        hops: 2,
        from: A,
        payload,
        via: 'repair',
        missingSinceMs: DETECTED_AT,
      },
    ]);
    const down = rig.solo.sendsOf(MessageType.Data, since);
    expect(down.map((r) => [r.to, r.message.slice, r.message.seq, r.message.hops])).toEqual([[X, 0, 5, 2]]);
    expect(down[0]!.message.payload).toEqual(payload);
    expect(down[0]!.message.bloom).toEqual(bloomOr(EMPTY_BLOOM, bloomMaskFor(ME)));
    // Settled: nobody is asked for it again, and the tree packets around it were delivered via 'tree'.
    rig.runTo(T0 + 6000);
    expect(rig.requestsFor(0, 5)).toHaveLength(1);
    expect(rig.fetches()).toEqual([]);
    expect(rig.deliveriesOf(0, 5)).toHaveLength(1);
    expect(rig.deliveriesOf(0, 6).map((d) => d.via)).toEqual(['tree']);
    expect(rig.solo.engine.repair.counters.repairPacketsReceived).toBe(1);
  });

  /**
   * Helpers for slice 0 as ME sees them, best advertised offset first if nothing excluded them:
   * the true source, E (not receiving), B (downstream of ME), C (downstream of the parent A), and D,
   * the only one fit to help.
   */
  function helperField(seed = 1): Rig {
    const rig = new Rig({ neighbours: [A, B, C, D, E, SOURCE], seed });
    rig.adopt(A);
    const other = bloomMaskFor(777);
    rig.advertise(SOURCE, { 0: { receiving: true, offsetMs: -500 } });
    rig.advertise(E, { 0: { receiving: false, offsetMs: -300 } });
    rig.advertise(B, { 0: { receiving: true, offsetMs: -100, filter: bloomOr(other, bloomMaskFor(ME)) } });
    rig.advertise(C, { 0: { receiving: true, offsetMs: -100, filter: bloomOr(other, bloomMaskFor(A)) } });
    rig.advertise(D, { 0: { receiving: true, offsetMs: 200, filter: bloomMaskFor(888) } });
    rig.drop(0, 5);
    rig.runTo(T0);
    rig.playout();
    return rig;
  }

  it('after the parent’s NAK NotHeld asks a receiving neighbour that is below neither itself nor the parent', () => {
    const rig = helperField();
    rig.runTo(DETECTED_AT);
    const first = rig.requestsFor(0, 5);
    expect(first.map((r) => r.to)).toEqual([A]);
    rig.runTo(DETECTED_AT + STEP_MS);
    const since = rig.solo.mark();
    rig.solo.feed(A, nak(first[0]!.message, RepairNakReason.NotHeld));
    // At once, not at the next scan.
    const next = rig.requestsFor(0, 5, since);
    expect(next.map((r) => [r.time, r.to])).toEqual([[DETECTED_AT + STEP_MS, D]]);
    expect(rig.solo.engine.repair.counters.repairNaksNotHeld).toBe(1);
    // D does not hold it either: nobody else fits, so nobody else is ever asked.
    rig.runTo(DETECTED_AT + 2 * STEP_MS);
    rig.solo.feed(D, nak(next[0]!.message, RepairNakReason.NotHeld));
    rig.runTo(rig.deadline(0, 5));
    expect(rig.requestsFor(0, 5).map((r) => r.to)).toEqual([A, D]);
    for (const r of rig.requests()) expect([A, D]).toContain(r.to);
  });

  it('after the parent’s NAK Pending waits for it (1 s) and takes the tree copy when it comes', () => {
    const rig = helperField();
    rig.runTo(DETECTED_AT);
    const first = rig.requestsFor(0, 5);
    expect(first.map((r) => r.to)).toEqual([A]);
    const pendingAt = DETECTED_AT + STEP_MS;
    rig.runTo(pendingAt);
    rig.solo.feed(A, nak(first[0]!.message, RepairNakReason.Pending));
    expect(rig.solo.engine.repair.counters.repairNaksPending).toBe(1);
    rig.runTo(pendingAt + PENDING_WAIT_MS - STEP_MS);
    expect(rig.requestsFor(0, 5)).toHaveLength(1);
    const since = rig.solo.mark();
    rig.treeCopy(0, 5);
    expect(rig.solo.deliveries(since).map((d) => [d.slice, d.seq, d.via, d.missingSinceMs])).toEqual([
      [0, 5, 'tree', null],
    ]);
    expect(rig.solo.engine.repair.isMissing(0, 5)).toBe(false);
    rig.runTo(T0 + 6000);
    expect(rig.requestsFor(0, 5)).toHaveLength(1);
    expect(rig.fetches()).toEqual([]);
    expect(rig.deliveriesOf(0, 5)).toHaveLength(1);
  });

  it('a Pending parent that never sends it is given up after the pending wait', () => {
    const rig = helperField();
    rig.runTo(DETECTED_AT);
    const first = rig.requestsFor(0, 5);
    const pendingAt = DETECTED_AT + STEP_MS;
    rig.runTo(pendingAt);
    rig.solo.feed(A, nak(first[0]!.message, RepairNakReason.Pending));
    rig.runTo(pendingAt + PENDING_WAIT_MS - STEP_MS);
    expect(rig.requestsFor(0, 5).map((r) => r.to)).toEqual([A]);
    rig.runTo(pendingAt + PENDING_WAIT_MS);
    expect(rig.requestsFor(0, 5).map((r) => [r.time, r.to])).toEqual([
      [DETECTED_AT, A],
      [pendingAt + PENDING_WAIT_MS, D],
    ]);
  });

  it('after its best helpers all said NotHeld, asks the next neighbour fit to help before the origin', () => {
    const F = 107;
    const rig = new Rig({ neighbours: [A, B, C, D, F] });
    rig.adopt(A);
    rig.advertise(B, { 0: { receiving: true, offsetMs: -200 } });
    rig.advertise(C, { 0: { receiving: true, offsetMs: -100 } });
    rig.advertise(D, { 0: { receiving: true, offsetMs: 0 } });
    rig.advertise(F, { 0: { receiving: true, offsetMs: 100 } });
    rig.drop(0, 5);
    rig.onStep = (t) => {
      for (const r of rig.requests().filter((q) => q.time === t - STEP_MS))
        rig.solo.feed(r.to, nak(r.message, RepairNakReason.NotHeld));
    };
    rig.runTo(T0);
    rig.playout();
    rig.runTo(rig.deadline(0, 5) - ORIGIN_LEAD_MS - STEP_MS);
    expect(rig.requestsFor(0, 5).map((r) => r.to)).toEqual([A, B, C, D, F]);
  });

  /** ME is the slice source of both slices (fed by the true source), and misses slice 0's seq 5. */
  function sliceSourceMissingFive(protocol: Partial<ProtocolConfig> = {}): Rig {
    const rig = new Rig({ neighbours: [B, D], protocol });
    rig.advertise(B, { 0: { receiving: true }, 1: { receiving: true } });
    rig.advertise(D, { 0: { receiving: true }, 1: { receiving: true } });
    for (const s of [0, 1])
      rig.solo.feed(SOURCE, { type: MessageType.SliceSourceAssign, slice: s, epoch: 1, assigned: true });
    expect(rig.solo.engine.sliceSourceOf()).toEqual([0, 1]);
    rig.treeFrom = SOURCE;
    rig.drop(0, 5);
    rig.runTo(T0);
    rig.playout();
    return rig;
  }

  describe('the origin, last resort', () => {
    it('when every helper said NotHeld: fetched once the deadline is within originLeadMs, delivered via origin', () => {
      const rig = helperField();
      rig.onStep = (t) => {
        for (const r of rig.requests().filter((q) => q.time === t - STEP_MS))
          rig.solo.feed(r.to, nak(r.message, RepairNakReason.NotHeld));
      };
      const due = rig.deadline(0, 5) - ORIGIN_LEAD_MS;
      rig.runTo(due - STEP_MS);
      expect(rig.requestsFor(0, 5).map((r) => r.to)).toEqual([A, D]);
      expect(rig.fetches()).toEqual([]);
      rig.runTo(due);
      expect(rig.fetches().map((f) => [f.time, f.action.slice, f.action.seqs])).toEqual([[due, 0, [5]]]);
      expect(rig.solo.engine.repair.counters.originPacketsRequested).toBe(1);
      rig.runTo(due + 3 * STEP_MS);
      const since = rig.solo.mark();
      const payload = payloadFor(0, 5);
      rig.solo.input({ kind: 'originPacket', slice: 0, seq: 5, payload });
      expect(rig.solo.deliveries(since)).toEqual([
        {
          kind: 'deliver',
          slice: 0,
          seq: 5,
          hops: 0,
          from: SOURCE,
          payload,
          via: 'origin',
          missingSinceMs: DETECTED_AT,
        },
      ]);
      rig.runTo(T0 + 6000);
      expect(rig.fetches()).toHaveLength(1);
      expect(rig.requestsFor(0, 5)).toHaveLength(2);
    });

    it('when no helper is available at all: fetched at the same lead', () => {
      const rig = new Rig({ neighbours: [A, B] });
      rig.adopt(A);
      rig.advertise(B); // receives nothing
      rig.drop(0, 5);
      rig.runTo(T0);
      rig.playout();
      rig.runTo(DETECTED_AT + STEP_MS);
      const first = rig.requestsFor(0, 5);
      expect(first.map((r) => r.to)).toEqual([A]);
      rig.solo.feed(A, nak(first[0]!.message, RepairNakReason.NotHeld));
      const due = rig.deadline(0, 5) - ORIGIN_LEAD_MS;
      rig.expectOriginFetchAt(due);
      expect(rig.requestsFor(0, 5)).toHaveLength(1);
    });

    it('with a measured origin round trip, waits until 1.5·RTT + 200 ms before the deadline', () => {
      const rig = missingFive();
      rig.playout({ originRttMs: 200 }); // lead min(1500, 500)
      rig.runTo(DETECTED_AT + STEP_MS);
      const first = rig.requestsFor(0, 5);
      rig.solo.feed(A, nak(first[0]!.message, RepairNakReason.NotHeld));
      const due = rig.deadline(0, 5) - 500;
      rig.expectOriginFetchAt(due);
    });

    it('a host deadline for a run of packets (a segment needed whole) moves their last resort earlier', () => {
      const rig = missingFive();
      const d = rig.dataSlices;
      // Packets of seqs 4…7 (every slice) are needed by T0 + 4000, 2 s before seq 5's play time.
      const neededAt = T0 + 4000;
      rig.solo.input({ kind: 'deadline', firstPacket: 4 * d, packets: 4 * d, atMs: neededAt });
      rig.runTo(DETECTED_AT + STEP_MS);
      const first = rig.requestsFor(0, 5);
      expect(first.map((r) => r.to)).toEqual([A]);
      rig.solo.feed(A, nak(first[0]!.message, RepairNakReason.NotHeld));
      const due = neededAt - ORIGIN_LEAD_MS;
      rig.expectOriginFetchAt(due);
    });

    it('a host deadline given after the packet went missing applies to it; one later than the clock is not taken', () => {
      const rig = missingFive();
      const d = rig.dataSlices;
      rig.runTo(DETECTED_AT + STEP_MS);
      rig.solo.feed(A, nak(rig.requestsFor(0, 5)[0]!.message, RepairNakReason.NotHeld));
      // Later than the clock's deadline (T0 + 6000): the clock's stands.
      rig.solo.input({ kind: 'deadline', firstPacket: 5 * d, packets: d, atMs: T0 + 9000 });
      rig.runTo(rig.deadline(0, 5) - ORIGIN_LEAD_MS - STEP_MS);
      expect(rig.fetches()).toEqual([]);
      // The same span again, earlier than now + lead: fetched on the next scan.
      const at = rig.solo.now;
      rig.solo.input({ kind: 'deadline', firstPacket: 5 * d, packets: d, atMs: at + 1000 });
      rig.runTo(at + STEP_MS);
      expect(rig.fetches().map((f) => [f.time, f.action.seqs])).toEqual([[at + STEP_MS, [5]]]);
    });

    it('a clock moved later moves deadlines, not when a packet counts as missing', () => {
      const rig = missingFive();
      rig.runTo(T0 + 800);
      // The host re-anchors its clock 3 s later (say, the player's buffer grew).
      rig.solo.input({
        kind: 'playout',
        zeroAtMs: ZERO_AT + 3000,
        packetIntervalMs: INTERVAL_MS,
        fromMs: T0,
      });
      rig.runTo(DETECTED_AT - STEP_MS);
      expect(rig.requests()).toEqual([]);
      rig.runTo(DETECTED_AT);
      expect(rig.requestsFor(0, 5).map((r) => [r.time, r.to])).toEqual([[DETECTED_AT, A]]);
      rig.solo.feed(A, nak(rig.requestsFor(0, 5)[0]!.message, RepairNakReason.NotHeld));
      // The origin waits for the new deadline.
      const due = rig.deadline(0, 5) + 3000 - ORIGIN_LEAD_MS;
      rig.expectOriginFetchAt(due);
    });

    it('refuses a deadline span that is not whole packets or not a finite time', () => {
      const rig = missingFive();
      expect(() => rig.solo.input({ kind: 'deadline', firstPacket: -1, packets: 2, atMs: 0 })).toThrow(
        RangeError,
      );
      expect(() => rig.solo.input({ kind: 'deadline', firstPacket: 0, packets: 0, atMs: 0 })).toThrow(
        RangeError,
      );
      expect(() => rig.solo.input({ kind: 'deadline', firstPacket: 0, packets: 1.5, atMs: 0 })).toThrow(
        RangeError,
      );
      expect(() => rig.solo.input({ kind: 'deadline', firstPacket: 0, packets: 2, atMs: NaN })).toThrow(
        RangeError,
      );
    });

    it('a slice source (fed by the true source) asks the origin at once, and no neighbour', () => {
      const rig = sliceSourceMissingFive();
      rig.runTo(DETECTED_AT - STEP_MS);
      expect(rig.fetches()).toEqual([]);
      rig.runTo(DETECTED_AT);
      expect(rig.fetches().map((f) => [f.time, f.action.slice, f.action.seqs])).toEqual([
        [DETECTED_AT, 0, [5]],
      ]);
      rig.runTo(T0 + 3000);
      expect(rig.requests()).toEqual([]);
      expect(rig.solo.engine.repair.counters.originNeverAsked).toBe(1);
    });

    it('a slice source asks neighbours for a packet dealt before it rooted the slice, those below it too; the origin at once only after', () => {
      const rig = new Rig({ neighbours: [B, D] });
      // B is below us now (its path holds our mask), but took the old packets from the old tree.
      const belowUs = { receiving: true, filter: bloomMaskFor(ME) };
      rig.advertise(B, { 0: belowUs, 1: belowUs });
      rig.advertise(D);
      for (const s of [0, 1])
        rig.solo.feed(SOURCE, { type: MessageType.SliceSourceAssign, slice: s, epoch: 1, assigned: true });
      rig.treeFrom = SOURCE;
      // Slice 0's first packet from the true source is seq 6 (seqs 0…5 went down the tree before
      // us), and seq 8, dealt to us as root, is lost.
      for (let seq = 0; seq <= 5; seq++) rig.drop(0, seq);
      rig.drop(0, 8);
      rig.runTo(T0);
      rig.playout();
      rig.runTo(T0 + 3000);
      expect(rig.fetches().map((f) => [f.time, f.action.slice, f.action.seqs])).toEqual([
        [T0 + 8 * INTERVAL_MS + GRACE_MS, 0, [8]],
      ]);
      expect(new Set(rig.requestsFor(0, 5).map((r) => r.to))).toEqual(new Set([B]));
      expect(rig.requestsFor(0, 8)).toEqual([]);
      expect(rig.solo.engine.repair.counters.originNeverAsked).toBe(1);
    });

    it('with rootOriginWaitMs, a slice source waits that long after finding the packet missing', () => {
      const rig = sliceSourceMissingFive({ rootOriginWaitMs: 500 });
      rig.runTo(DETECTED_AT + 500 - STEP_MS);
      expect(rig.fetches()).toEqual([]);
      expect(rig.solo.engine.repair.counters.packetsMissing).toBe(1);
      rig.runTo(DETECTED_AT + 500);
      expect(rig.fetches().map((f) => [f.time, f.action.slice, f.action.seqs])).toEqual([
        [DETECTED_AT + 500, 0, [5]],
      ]);
      rig.runTo(T0 + 3000);
      // Meanwhile it asked the neighbours not below it (here B and D advertise no mask of ours).
      expect(new Set(rig.requestsFor(0, 5).map((r) => r.to))).toEqual(new Set([B, D]));
    });
  });

  it('requests the earliest deadline first when the window (1 per helper) holds back the rest', () => {
    // Slice 0's tree runs 600 ms behind slice 1's, so slice 1's seq 6 is found missing before
    // slice 0's seq 5 although slice 0's seq 5 plays first.
    const rig = new Rig({ neighbours: [A, B], protocol: { repairWindowPackets: 1 } });
    rig.adopt(A);
    rig.advertise(B); // not receiving yet: no helper
    rig.delayMs[0] = 600;
    rig.drop(0, 5);
    rig.drop(1, 6);
    rig.onStep = (t) => {
      for (const r of rig.requests().filter((q) => q.time === t - STEP_MS && q.to === A))
        rig.solo.feed(A, nak(r.message, RepairNakReason.NotHeld));
    };
    rig.runTo(T0 + 600);
    rig.playout();
    rig.runTo(T0 + 2100);
    expect(rig.requests().map((r) => [r.time, r.to, r.message.slice, r.message.baseSeq])).toEqual([
      [T0 + 1200 + GRACE_MS, A, 1, 6],
      [T0 + 1600 + GRACE_MS, A, 0, 5],
    ]);
    expect(rig.deadline(0, 5)).toBeLessThan(rig.deadline(1, 6));
    const since = rig.solo.mark();
    rig.advertise(B, { 0: { receiving: true }, 1: { receiving: true } });
    rig.runTo(T0 + 2300);
    const toB = rig.requests(since);
    expect(toB.map((r) => [r.to, r.message.slice, r.message.baseSeq, r.message.wanted])).toEqual([
      [B, 0, 5, 1],
    ]);
    // B answers: the window opens for the other one.
    rig.solo.feed(B, repairData(0, 5, toB[0]!.message.requestId));
    rig.runTo(T0 + 2400);
    expect(rig.requests(since).map((r) => [r.to, r.message.slice, r.message.baseSeq])).toEqual([
      [B, 0, 5],
      [B, 1, 6],
    ]);
  });

  it('drops repair data it did not ask for', () => {
    const rig = missingFive();
    const counters = rig.solo.engine.repair.counters;
    // Not missing yet.
    rig.runTo(T0 + 1100);
    let since = rig.solo.mark();
    rig.solo.feed(B, repairData(0, 5));
    expect(rig.solo.deliveries(since)).toEqual([]);
    expect(counters.repairPacketsUnsolicited).toBe(1);
    rig.runTo(DETECTED_AT);
    const asked = rig.requestsFor(0, 5);
    expect(asked.map((r) => r.to)).toEqual([A]);
    since = rig.solo.mark();
    // Chased, but from A, not B; and a packet already held.
    rig.solo.feed(B, repairData(0, 5, asked[0]!.message.requestId));
    rig.solo.feed(B, repairData(0, 4));
    expect(rig.solo.deliveries(since)).toEqual([]);
    expect(counters.repairPacketsUnsolicited).toBe(3);
    expect(counters.duplicatesRepaired).toBe(0);
    // The one asked delivers it; a second copy is unsolicited again.
    rig.solo.feed(A, repairData(0, 5, asked[0]!.message.requestId));
    rig.solo.feed(A, repairData(0, 5, asked[0]!.message.requestId));
    expect(rig.solo.deliveries(since).map((d) => [d.slice, d.seq, d.via, d.from])).toEqual([
      [0, 5, 'repair', A],
    ]);
    expect(counters.repairPacketsUnsolicited).toBe(4);
    expect(counters.repairPacketsReceived).toBe(1);
  });

  it('is deterministic: the same inputs and seed give the same actions', () => {
    const script = (seed: number): string => {
      const rig = new Rig({ neighbours: [A, B, C, D, E], seed });
      rig.adopt(A);
      // Equal offsets: the helper order comes down to the seeded tie-break.
      for (const h of [B, C, D, E])
        rig.advertise(h, { 0: { receiving: true, offsetMs: 0 }, 1: { receiving: true } });
      rig.drop(0, 5);
      rig.drop(0, 6);
      rig.drop(1, 6);
      rig.onStep = (t) => {
        for (const r of rig.requests().filter((q) => q.time === t - STEP_MS))
          rig.solo.feed(r.to, nak(r.message, RepairNakReason.NotHeld));
      };
      rig.runTo(T0);
      rig.playout();
      rig.runTo(T0 + 6000);
      const helpers = new Set(rig.requests().map((r) => r.to));
      expect(helpers.size).toBeGreaterThan(2);
      expect(rig.fetches().length).toBeGreaterThan(0);
      return JSON.stringify(rig.solo.log);
    };
    expect(script(3)).toBe(script(3));
  });
});

describe('repair: helper', () => {
  /** ME (TL 4, repairUploadShare 0.5: 2 slices of 5 packets/s over 2 s = 20 packets) holds slice 0's seq 0..24 but 3. */
  function helper(): Rig {
    const rig = new Rig({
      neighbours: [A, B, C],
      targetLoadSlices: 4,
      protocol: { repairUploadShare: 0.5 },
    });
    rig.adopt(A);
    rig.advertise(B);
    rig.advertise(C);
    rig.drop(0, 3);
    rig.treeUntil = T0 + 24 * INTERVAL_MS;
    rig.runTo(T0 + 5000);
    return rig;
  }
  const CAP = 20;

  it('serves what it holds and NAKs NotHeld the rest in one bitmap', () => {
    const rig = helper();
    const since = rig.solo.mark();
    rig.solo.feed(B, request(0, 2, bits(0, 1, 2, 5), 41));
    const out = rig.solo.sends(since);
    expect(out.every((r) => r.to === B)).toBe(true);
    expect(out.map((r) => r.message)).toEqual([
      {
        type: MessageType.PacketRepairData,
        slice: 0,
        requestId: 41,
        seq: 2,
        hops: 1,
        payload: payloadFor(0, 2),
      },
      {
        type: MessageType.PacketRepairData,
        slice: 0,
        requestId: 41,
        seq: 4,
        hops: 1,
        payload: payloadFor(0, 4),
      },
      {
        type: MessageType.PacketRepairData,
        slice: 0,
        requestId: 41,
        seq: 7,
        hops: 1,
        payload: payloadFor(0, 7),
      },
      {
        type: MessageType.PacketRepairNak,
        slice: 0,
        requestId: 41,
        baseSeq: 2,
        unserved: bits(1),
        reason: RepairNakReason.NotHeld,
      },
    ]);
    expect(rig.solo.engine.repair.counters.repairPacketsServed).toBe(3);
  });

  it('answers Busy beyond its upload cap (repairUploadShare·TL slices over 2 s), and serves again after', () => {
    const rig = helper();
    let since = rig.solo.mark();
    rig.solo.feed(B, request(0, 0, bits(0, 1, 2, 4, 5, 6, 7, 8, 9, 10), 1));
    rig.solo.feed(C, request(0, 11, bits(...Array.from({ length: 14 }, (_, i) => i)), 2));
    const data = rig.solo.sendsOf(MessageType.PacketRepairData, since);
    expect(data).toHaveLength(CAP);
    expect(data.filter((r) => r.to === C).map((r) => r.message.seq)).toEqual(
      Array.from({ length: 10 }, (_, i) => 11 + i),
    );
    const naks = rig.solo.sendsOf(MessageType.PacketRepairNak, since);
    expect(naks.map((r) => [r.to, r.message.baseSeq, r.message.unserved, r.message.reason])).toEqual([
      [C, 11, bits(10, 11, 12, 13), RepairNakReason.Busy],
    ]);
    expect(rig.solo.engine.repair.counters.repairPacketsRefusedBusy).toBe(4);
    // Still full 1.9 s later; room again once the first ones are 2 s old.
    rig.runTo(T0 + 6900);
    since = rig.solo.mark();
    rig.solo.feed(C, request(0, 21, bits(0), 3));
    expect(rig.solo.sendsOf(MessageType.PacketRepairNak, since).map((r) => r.message.reason)).toEqual([
      RepairNakReason.Busy,
    ]);
    rig.runTo(T0 + 7000);
    since = rig.solo.mark();
    rig.solo.feed(C, request(0, 21, bits(0), 4));
    expect(rig.solo.sendsOf(MessageType.PacketRepairData, since).map((r) => [r.to, r.message.seq])).toEqual([
      [C, 21],
    ]);
    expect(rig.solo.sendsOf(MessageType.PacketRepairNak, since)).toEqual([]);
  });

  it('answers Busy while the transport to that requester is backed up beyond repairBacklogLimitBytes', () => {
    const rig = helper();
    const limit = rig.solo.engine.config.protocol.repairBacklogLimitBytes;
    rig.solo.input({ kind: 'transportBacklog', peer: B, bytes: limit + 1 });
    rig.solo.input({ kind: 'transportBacklog', peer: C, bytes: limit });
    let since = rig.solo.mark();
    rig.solo.feed(B, request(0, 3, bits(0, 1, 2), 9));
    expect(rig.solo.sendsOf(MessageType.PacketRepairData, since)).toEqual([]);
    expect(
      rig.solo
        .sendsOf(MessageType.PacketRepairNak, since)
        .map((r) => [r.to, r.message.unserved, r.message.reason]),
    ).toEqual([
      [B, bits(1, 2), RepairNakReason.Busy],
      [B, bits(0), RepairNakReason.NotHeld],
    ]);
    since = rig.solo.mark();
    rig.solo.feed(C, request(0, 4, bits(0, 1), 10));
    expect(rig.solo.sendsOf(MessageType.PacketRepairData, since).map((r) => [r.to, r.message.seq])).toEqual([
      [C, 4],
      [C, 5],
    ]);
    // Drained: B is served again.
    rig.solo.input({ kind: 'transportBacklog', peer: B, bytes: 0 });
    since = rig.solo.mark();
    rig.solo.feed(B, request(0, 4, bits(0), 11));
    expect(rig.solo.sendsOf(MessageType.PacketRepairData, since).map((r) => r.to)).toEqual([B]);
  });

  it('gives a stranger nothing', () => {
    const rig = helper();
    const since = rig.solo.mark();
    rig.solo.feed(STRANGER, request(0, 0, bits(0, 1, 2), 5));
    expect(rig.solo.sends(since)).toEqual([]);
    expect(rig.solo.engine.repair.counters.repairPacketsServed).toBe(0);
  });

  it('answers Pending for a packet it is chasing itself', () => {
    const rig = missingFive();
    rig.runTo(DETECTED_AT);
    expect(rig.solo.engine.repair.isMissing(0, 5)).toBe(true);
    const since = rig.solo.mark();
    rig.solo.feed(B, request(0, 4, bits(0, 1), 12));
    expect(rig.solo.sendsOf(MessageType.PacketRepairData, since).map((r) => r.message.seq)).toEqual([4]);
    expect(
      rig.solo.sendsOf(MessageType.PacketRepairNak, since).map((r) => [r.message.unserved, r.message.reason]),
    ).toEqual([[bits(1), RepairNakReason.Pending]]);
  });

  it('counts its repair upload in the load it advertises', () => {
    const rig = new Rig({ neighbours: [A, B], targetLoadSlices: 4, protocol: { repairUploadShare: 0.5 } });
    rig.adopt(A);
    rig.advertise(B);
    rig.runTo(T0);
    rig.playout();
    rig.runTo(T0 + 5000);
    expect(rig.solo.engine.currentLoad).toBe(0);
    rig.runTo(T0 + 5100);
    // 20 packets in the 2 s window = 10/s = 2 slices of 5 packets/s.
    rig.solo.feed(B, request(0, 0, bits(...Array.from({ length: 20 }, (_, i) => i)), 13));
    expect(rig.solo.engine.repair.loadSlices(rig.solo.now)).toBe(2);
    // One advert round falls in each second (at the node's own phase).
    rig.runTo(T0 + 6100);
    expect(rig.solo.lastAdvertTo(B)?.message.load).toBe(2);
    rig.runTo(T0 + 8200);
    expect(rig.solo.lastAdvertTo(B)?.message.load).toBe(0);
  });
  it('a helper without a playout clock counts what it serves in its advertised load too', () => {
    const rig = new Rig({ neighbours: [A, B], targetLoadSlices: 4, protocol: { repairUploadShare: 0.5 } });
    rig.adopt(A);
    rig.advertise(B);
    rig.runTo(T0 + 5100);
    rig.solo.feed(B, request(0, 0, bits(...Array.from({ length: 20 }, (_, i) => i)), 13));
    expect(rig.solo.engine.repair.counters.repairPacketsServed).toBe(20);
    rig.runTo(T0 + 6100);
    expect(rig.solo.lastAdvertTo(B)?.message.load).toBe(2);
  });
});
