import { describe, expect, it } from 'vitest';
import { EMPTY_BLOOM, MessageType, RejectReason, type PeerId } from '@chunkycast/wire';
import {
  createRandom,
  encodeParity,
  ParityError,
  ParitySwitch,
  recoverFromParity,
  type Action,
  type Random,
} from '../src/index.js';
import { Solo } from './solo.js';

function randomBytes(random: Random, length: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = random.int(256);
  return out;
}

function withHole(stripe: readonly Uint8Array[], missing: number): (Uint8Array | undefined)[] {
  return stripe.map((p, i) => (i === missing ? undefined : p));
}

describe('encodeParity / recoverFromParity', () => {
  it('rebuilds every position of random stripes exactly', () => {
    const random = createRandom(0x9a41);
    let rebuilt = 0;
    for (let round = 0; round < 200; round++) {
      const size = 1 + random.int(16);
      // Lengths from 0 to 300, with some empty packets and some sharing the longest length.
      const stripe = Array.from({ length: size }, () =>
        randomBytes(random, random.int(4) === 0 ? 0 : random.int(301)),
      );
      const parity = encodeParity(stripe);
      const longest = Math.max(...stripe.map((p) => p.byteLength));
      expect(parity.byteLength).toBe(4 * size + longest);
      for (let missing = 0; missing < size; missing++) {
        const got = recoverFromParity(parity, withHole(stripe, missing), missing);
        expect(got).toEqual(stripe[missing]);
        rebuilt++;
      }
    }
    expect(rebuilt).toBeGreaterThan(1000);
  });

  it('handles a stripe of empty packets and a single empty packet among others', () => {
    const empty = [new Uint8Array(0), new Uint8Array(0), new Uint8Array(0)];
    const parity = encodeParity(empty);
    expect(parity).toEqual(new Uint8Array(12));
    for (let i = 0; i < 3; i++)
      expect(recoverFromParity(parity, withHole(empty, i), i)).toEqual(new Uint8Array(0));
    const mixed = [Uint8Array.of(1, 2, 3), new Uint8Array(0), Uint8Array.of(0xff)];
    const p2 = encodeParity(mixed);
    expect(recoverFromParity(p2, withHole(mixed, 1), 1)).toEqual(new Uint8Array(0));
    expect(recoverFromParity(p2, withHole(mixed, 0), 0)).toEqual(Uint8Array.of(1, 2, 3));
  });

  it('encodes the lengths little-endian, then the XOR zero-padded to the longest', () => {
    const stripe = [Uint8Array.of(0x0f, 0xf0), Uint8Array.of(0xff), new Uint8Array(300)];
    const parity = encodeParity(stripe);
    expect([...parity.subarray(0, 12)]).toEqual([2, 0, 0, 0, 1, 0, 0, 0, 44, 1, 0, 0]);
    expect([...parity.subarray(12, 15)]).toEqual([0xf0, 0xf0, 0]);
    expect(parity.byteLength).toBe(12 + 300);
  });

  describe('parity that does not fit its stripe is a ParityError, never wrong bytes', () => {
    const random = createRandom(77);
    const stripe = [
      randomBytes(random, 10),
      randomBytes(random, 7),
      randomBytes(random, 10),
      randomBytes(random, 3),
    ];
    const good = encodeParity(stripe);

    it('shorter than its length header', () => {
      expect(() => recoverFromParity(good.slice(0, 15), withHole(stripe, 1), 1)).toThrow(ParityError);
      expect(() => recoverFromParity(new Uint8Array(0), withHole(stripe, 1), 1)).toThrow(ParityError);
    });

    it('a present packet whose length differs from the one the parity declares', () => {
      for (const length of [2, 4]) {
        const other = [...stripe];
        other[3] = randomBytes(random, length);
        expect(() => recoverFromParity(good, withHole(other, 0), 0)).toThrow(ParityError);
      }
    });

    it('a stripe of another size than the parity was made for', () => {
      expect(() => recoverFromParity(good, withHole(stripe.slice(0, 3), 0), 0)).toThrow(ParityError);
      expect(() => recoverFromParity(good, withHole([...stripe, stripe[1]!], 0), 0)).toThrow(ParityError);
    });

    it('a declared length beyond the body', () => {
      const bad = good.slice();
      bad[4] = 11; // packet 1 said to be 11 bytes; the body has 10
      expect(() => recoverFromParity(bad, withHole(stripe, 1), 1)).toThrow(ParityError);
      const huge = good.slice();
      huge[7] = 0x80; // 2^31 + 7
      expect(() => recoverFromParity(huge, withHole(stripe, 1), 1)).toThrow(ParityError);
    });

    it('a body longer than the longest packet', () => {
      const padded = new Uint8Array(good.byteLength + 1);
      padded.set(good);
      expect(() => recoverFromParity(padded, withHole(stripe, 1), 1)).toThrow(ParityError);
    });

    it('a second packet of the stripe missing', () => {
      const twoGone = withHole(stripe, 1);
      twoGone[2] = undefined;
      expect(() => recoverFromParity(good, twoGone, 1)).toThrow(ParityError);
    });
  });
});

describe('ParitySwitch (hysteresis)', () => {
  it('turns on at onLoss, stays on above offLoss, turns off after offHoldMs at or below it', () => {
    const sw = new ParitySwitch(0.01, 0.003, 20_000);
    expect(sw.active).toBe(false);
    expect(sw.measure(0, 0.0099)).toBe(false);
    expect(sw.active).toBe(false);
    expect(sw.measure(1000, 0.01)).toBe(true);
    expect(sw.active).toBe(true);
    expect(sw.measure(2000, 0.02)).toBe(false);
    // Between offLoss and onLoss: stays on, however long.
    expect(sw.measure(3000, 0.005)).toBe(false);
    expect(sw.measure(60_000, 0.0031)).toBe(false);
    expect(sw.active).toBe(true);
    // Quiet from 61 s; a loud sample at 75 s restarts the hold.
    expect(sw.measure(61_000, 0.003)).toBe(false);
    expect(sw.measure(75_000, 0.004)).toBe(false);
    expect(sw.measure(76_000, 0)).toBe(false);
    expect(sw.measure(95_999, 0.001)).toBe(false);
    expect(sw.active).toBe(true);
    expect(sw.measure(96_000, 0.002)).toBe(true);
    expect(sw.active).toBe(false);
    // Off again: at or below onLoss only does nothing; onLoss turns it on.
    expect(sw.measure(97_000, 0.005)).toBe(false);
    expect(sw.measure(98_000, 0.5)).toBe(true);
  });

  it('ignores non-finite and negative measurements', () => {
    const sw = new ParitySwitch(0.01, 0.003, 1000);
    for (const bad of [Number.POSITIVE_INFINITY, Number.NaN, -1]) expect(sw.measure(0, bad)).toBe(false);
    expect(sw.active).toBe(false);
    sw.measure(0, 0.05);
    expect(sw.active).toBe(true);
    // None of these may count as quiet time.
    for (let t = 1000; t <= 10_000; t += 1000)
      for (const bad of [Number.NEGATIVE_INFINITY, Number.NaN, -0.5]) expect(sw.measure(t, bad)).toBe(false);
    expect(sw.active).toBe(true);
    // Nor end a quiet spell that has begun.
    sw.measure(11_000, 0);
    sw.measure(11_500, Number.POSITIVE_INFINITY);
    expect(sw.measure(12_000, 0)).toBe(true);
  });
});

// ───────────────────────────── in the engine ─────────────────────────────

/** 4 data slices and the parity slice. */
const SLICES = 5;
const DATA = 4;
const ROOTS: readonly PeerId[] = [11, 12, 13, 14, 15];

type DataSend = { to: PeerId; slice: number; seq: number; payload: Uint8Array };

/** The true source with every slice rooted (and confirmed), ready to publish. */
function source(protocol: Record<string, number>): Solo {
  const solo = new Solo({
    id: 0,
    role: 'source',
    targetLoadSlices: 0,
    protocol: { slices: SLICES, paritySlices: 1, ...protocol },
  });
  solo.input({ kind: 'start' });
  solo.input({ kind: 'bootstrap', peers: ROOTS });
  expect([...solo.engine.currentSliceSources()].sort()).toEqual([...ROOTS]);
  for (const r of ROOTS) solo.feed(r, { type: MessageType.Heartbeat });
  return solo;
}

function dataSends(actions: readonly Action[]): DataSend[] {
  const out: DataSend[] = [];
  for (const a of actions)
    if (a.kind === 'send' && a.message.type === MessageType.Data)
      out.push({ to: a.to, slice: a.message.slice, seq: a.message.seq, payload: a.message.payload });
  return out;
}

function stripePayloads(random: Random, stripes: number): Uint8Array[][] {
  return Array.from({ length: stripes }, () =>
    Array.from({ length: DATA }, () => randomBytes(random, 1 + random.int(40))),
  );
}

describe('the true source with a parity slice', () => {
  it('sends one parity packet after each stripe, carrying encodeParity of it when always on (onLoss 0)', () => {
    const solo = source({ parityOnLossFraction: 0, parityOffLossFraction: 0 });
    const roots = solo.engine.currentSliceSources();
    const stripes = stripePayloads(createRandom(5), 3);
    stripes.forEach((stripe, k) => {
      stripe.forEach((payload, s) => {
        solo.advance(solo.now + 50);
        const sent = dataSends(solo.input({ kind: 'publish', payload }));
        const expected: DataSend[] = [{ to: roots[s]!, slice: s, seq: k, payload }];
        if (s === DATA - 1)
          expected.push({ to: roots[DATA]!, slice: DATA, seq: k, payload: encodeParity(stripe) });
        expect(sent).toEqual(expected);
      });
    });
    expect(solo.engine.parityCounters).toEqual({ active: 3, idle: 0 });
    expect(solo.engine.parityActive).toBe(true);
    expect(solo.events('parity')).toEqual([]);
  });

  it('otherwise sends empty parity until a measured loss of at least parityOnLossFraction, and again after the hold', () => {
    const solo = source({ parityOnLossFraction: 0.01, parityOffLossFraction: 0.003, parityOffHoldMs: 3000 });
    const stripes = stripePayloads(createRandom(6), 5);
    const parityOf = (k: number): Uint8Array => {
      let parity: DataSend | undefined;
      // Live roots beat more often than rootFailureTimeoutMs; a stripe takes 850 ms here.
      for (const r of ROOTS) solo.feed(r, { type: MessageType.Heartbeat });
      for (const payload of stripes[k]!) {
        solo.advance(solo.now + 50);
        parity ??= dataSends(solo.input({ kind: 'publish', payload })).find((d) => d.slice === DATA);
      }
      expect(parity?.seq).toBe(k);
      return parity!.payload;
    };
    expect(parityOf(0)).toEqual(new Uint8Array(0));
    // Below the threshold: nothing changes.
    expect(solo.input({ kind: 'measuredLoss', fraction: 0.0099 })).toEqual([]);
    expect(parityOf(1)).toEqual(new Uint8Array(0));
    solo.input({ kind: 'measuredLoss', fraction: 0.01 });
    expect(solo.events('parity').map((e) => e.event)).toEqual([{ type: 'parity', active: true }]);
    expect(solo.engine.parityActive).toBe(true);
    expect(parityOf(2)).toEqual(encodeParity(stripes[2]!));
    // Quiet from now; 3 s later it goes off (roots heartbeat meanwhile so they stay).
    const quietFrom = solo.now;
    solo.input({ kind: 'measuredLoss', fraction: 0.001 });
    for (let t = quietFrom + 1000; t < quietFrom + 3000; t += 1000) {
      solo.advance(t);
      for (const r of ROOTS) solo.feed(r, { type: MessageType.Heartbeat });
      solo.input({ kind: 'measuredLoss', fraction: 0.002 });
    }
    expect(parityOf(3)).toEqual(encodeParity(stripes[3]!));
    solo.advance(quietFrom + 3000);
    solo.input({ kind: 'measuredLoss', fraction: 0.003 });
    expect(solo.events('parity').map((e) => e.event.active)).toEqual([true, false]);
    expect(parityOf(4)).toEqual(new Uint8Array(0));
    expect(solo.engine.parityCounters).toEqual({ active: 2, idle: 3 });
  });

  it('a member ignores measuredLoss', () => {
    const solo = new Solo({
      id: 9,
      role: 'member',
      targetLoadSlices: 4,
      protocol: { slices: SLICES, paritySlices: 1 },
    });
    solo.input({ kind: 'start' });
    solo.input({ kind: 'measuredLoss', fraction: 0.5 });
    expect(solo.events('parity')).toEqual([]);
  });
});

// A member rebuilding from parity: ME takes all five slices from A; packet seq k of every slice
// arrives at T0 + k·INTERVAL_MS and plays 5 s later.
const ME = 50;
const A = 101;
const INTERVAL_MS = 200;
const T0 = 2000;
const ZERO_AT = T0 + 5000;
const GRACE_MS = 300;

const ALL_SLICES = Object.fromEntries(Array.from({ length: SLICES }, (_, s) => [s, { receiving: true }]));
const PARENT_ADVERT = { load: 4, lower: 7, upper: 9, maxLoad: 12, slices: ALL_SLICES };

class ParityMember {
  readonly solo = new Solo({
    id: ME,
    role: 'member',
    targetLoadSlices: 8,
    protocol: { slices: SLICES, paritySlices: 1, repairGraceMs: GRACE_MS },
  });
  readonly stripes: Uint8Array[][];
  readonly dropped = new Set<string>();

  constructor(seed: number) {
    this.stripes = stripePayloads(createRandom(seed), 40);
    const solo = this.solo;
    solo.startWith([A]);
    solo.advance(1000);
    const since = solo.mark();
    solo.feed(A, solo.advertFrom(A, PARENT_ADVERT));
    for (const r of solo.sendsOf(MessageType.ForcedParentRequest, since))
      solo.feed(A, {
        type: MessageType.SwitchReply,
        slice: r.message.slice,
        handoffSeq: 0,
        accepted: true,
        rejectReason: RejectReason.None,
        load: 5,
      });
    expect(solo.engine.parents()).toEqual(new Array<PeerId>(SLICES).fill(A));
  }

  payload(s: number, seq: number): Uint8Array {
    const stripe = this.stripes[seq]!;
    return s === DATA ? encodeParity(stripe) : stripe[s]!;
  }

  tree(s: number, seq: number): Action[] {
    return this.solo.feed(A, {
      type: MessageType.Data,
      slice: s,
      seq,
      bloom: EMPTY_BLOOM,
      hops: 1,
      payload: this.payload(s, seq),
    });
  }

  runTo(end: number): void {
    const solo = this.solo;
    while (solo.now < end) {
      const t = Math.min(end, (Math.floor(solo.now / 100) + 1) * 100);
      solo.advance(t);
      if (t % 1000 === 0) solo.feed(A, solo.advertFrom(A, PARENT_ADVERT));
      const since = t - T0;
      if (since >= 0 && since % INTERVAL_MS === 0)
        for (let s = 0; s < SLICES; s++)
          if (!this.dropped.has(`${s}/${since / INTERVAL_MS}`)) this.tree(s, since / INTERVAL_MS);
    }
  }

  playout(): void {
    this.solo.input({ kind: 'playout', zeroAtMs: ZERO_AT, packetIntervalMs: INTERVAL_MS, fromMs: T0 });
  }
}

describe('a member with the parity slice', () => {
  // Slice 2's seq 5: expected at T0 + 1000, missing from T0 + 1300; its stripe's parity arrived at T0 + 1000.
  const MISSING_AT = T0 + 5 * INTERVAL_MS + GRACE_MS;

  it('rebuilds the one lost packet of a stripe once it is overdue, not before; a late tree copy is a false alarm', () => {
    const m = new ParityMember(21);
    m.dropped.add('2/5');
    m.runTo(T0);
    m.playout();
    m.runTo(MISSING_AT - 100);
    const solo = m.solo;
    expect(solo.deliveries().filter((d) => d.slice === 2 && d.seq === 5)).toEqual([]);
    expect(solo.engine.repair.isMissing(2, 5)).toBe(false);
    m.runTo(MISSING_AT);
    expect(solo.deliveries().filter((d) => d.seq === 5 && d.via !== 'tree')).toEqual([
      {
        kind: 'deliver',
        slice: 2,
        seq: 5,
        hops: 0,
        from: ME,
        payload: m.payload(2, 5),
        via: 'parity',
        missingSinceMs: MISSING_AT,
      },
    ]);
    expect(solo.engine.repair.counters.parityRecovered).toBe(1);
    expect(solo.engine.repair.isMissing(2, 5)).toBe(false);
    // Rebuilt at once: nobody is asked for it.
    m.runTo(MISSING_AT + 500);
    expect(solo.sendsOf(MessageType.PacketRepairRequest)).toEqual([]);
    // The parity slice is not delivered to the application.
    expect(solo.deliveries().filter((d) => d.slice === DATA)).toEqual([]);
    const since = solo.mark();
    const duplicates = solo.engine.counters.duplicatePackets;
    m.tree(2, 5);
    expect(solo.deliveries(since)).toEqual([]);
    expect(solo.engine.counters.duplicatePackets).toBe(duplicates + 1);
    expect(solo.engine.repair.counters.falseAlarms).toBe(1);
    expect(solo.engine.repair.counters.parityErrors).toBe(0);
  });

  it('never rebuilds without a playout clock (nothing is overdue)', () => {
    const m = new ParityMember(22);
    m.dropped.add('2/5');
    m.runTo(T0 + 3000);
    expect(m.solo.deliveries().filter((d) => d.via === 'parity')).toEqual([]);
    expect(m.solo.engine.repair.counters.parityRecovered).toBe(0);
  });

  it('rebuilds when the parity packet comes after the loss was found', () => {
    const m = new ParityMember(23);
    m.dropped.add('2/5');
    m.dropped.add('4/5');
    m.runTo(T0);
    m.playout();
    m.runTo(MISSING_AT + 100);
    expect(m.solo.deliveries().filter((d) => d.via === 'parity')).toEqual([]);
    expect(m.solo.engine.repair.isMissing(2, 5)).toBe(true);
    const since = m.solo.mark();
    m.tree(DATA, 5);
    expect(m.solo.deliveries(since).map((d) => [d.slice, d.seq, d.via, d.missingSinceMs])).toEqual([
      [2, 5, 'parity', MISSING_AT],
    ]);
    expect(m.solo.deliveries(since)[0]!.payload).toEqual(m.payload(2, 5));
  });

  it('rebuilds the second loss of a stripe once the first is repaired', () => {
    const m = new ParityMember(25);
    m.dropped.add('1/5');
    m.dropped.add('2/5');
    m.runTo(T0);
    m.playout();
    m.runTo(MISSING_AT + 100);
    const asked = m.solo.sendsOf(MessageType.PacketRepairRequest).find((r) => r.message.slice === 1);
    expect(asked?.to).toBe(A);
    expect(m.solo.deliveries().filter((d) => d.seq === 5 && d.via !== 'tree')).toEqual([]);
    const since = m.solo.mark();
    m.solo.feed(A, {
      type: MessageType.PacketRepairData,
      slice: 1,
      requestId: asked!.message.requestId,
      seq: 5,
      hops: 1,
      payload: m.payload(1, 5),
    });
    expect(m.solo.deliveries(since).map((d) => [d.slice, d.seq, d.via])).toEqual([
      [1, 5, 'repair'],
      [2, 5, 'parity'],
    ]);
    expect(m.solo.deliveries(since)[1]!.payload).toEqual(m.payload(2, 5));
  });

  it('does nothing with two packets of a stripe lost, or with empty parity, or with bad parity', () => {
    const m = new ParityMember(24);
    m.dropped.add('1/5');
    m.dropped.add('2/5');
    m.dropped.add('0/7');
    m.dropped.add('4/7');
    m.dropped.add('3/8');
    m.dropped.add('4/8');
    m.runTo(T0);
    m.playout();
    m.runTo(T0 + 1000);
    // Stripe 7's parity is empty ("parity off"); stripe 8's does not fit (one length byte off).
    m.solo.feed(A, {
      type: MessageType.Data,
      slice: DATA,
      seq: 7,
      bloom: EMPTY_BLOOM,
      hops: 1,
      payload: new Uint8Array(0),
    });
    m.runTo(T0 + 1600);
    const bad = m.payload(DATA, 8).slice();
    bad[0] = (bad[0]! + 1) & 0xff;
    m.solo.feed(A, {
      type: MessageType.Data,
      slice: DATA,
      seq: 8,
      bloom: EMPTY_BLOOM,
      hops: 1,
      payload: bad,
    });
    m.runTo(T0 + 2500);
    expect(m.solo.deliveries().filter((d) => d.via === 'parity')).toEqual([]);
    expect(m.solo.engine.repair.isMissing(0, 7)).toBe(true);
    expect(m.solo.engine.repair.isMissing(3, 8)).toBe(true);
    expect(m.solo.engine.repair.counters.parityErrors).toBe(1);
  });
});

describe('the true source numbering its packets (publish with `packet`, issue 18)', () => {
  const placeOf = (sent: readonly DataSend[]): [number, number][] => sent.map((d) => [d.slice, d.seq]);
  const payload = new Uint8Array([7]);

  it('deals each packet where its number puts it, skipping numbers never published, parity included', () => {
    const solo = source({ parityOnLossFraction: 0, parityOffLossFraction: 0 });
    solo.advance(solo.now + 50);
    // Stripe 3 begins at packet 3·DATA: slice 0, sequence 3.
    expect(placeOf(dataSends(solo.input({ kind: 'publish', payload, packet: 3 * DATA })))).toEqual([[0, 3]]);
    expect(placeOf(dataSends(solo.input({ kind: 'publish', payload, packet: 3 * DATA + 1 })))).toEqual([
      [1, 3],
    ]);
    // Unnumbered packets go on from there; the stripe's parity carries the stripe's sequence.
    expect(placeOf(dataSends(solo.input({ kind: 'publish', payload })))).toEqual([[2, 3]]);
    expect(placeOf(dataSends(solo.input({ kind: 'publish', payload })))).toEqual([
      [3, 3],
      [DATA, 3],
    ]);
    expect(solo.engine.packetsPublished).toBe(4 * DATA);
    expect(solo.engine.nextSequence(DATA)).toBe(4);
  });

  it('refuses a number already dealt, and with parity on a skip into the middle of a stripe; refused changes nothing', () => {
    const solo = source({ parityOnLossFraction: 0, parityOffLossFraction: 0 });
    solo.advance(solo.now + 50);
    solo.input({ kind: 'publish', payload, packet: 2 * DATA });
    solo.input({ kind: 'publish', payload });
    expect(() => solo.input({ kind: 'publish', payload, packet: 2 * DATA })).toThrow(/not a whole number ≥/);
    expect(() => solo.input({ kind: 'publish', payload, packet: 1.5 })).toThrow(/not a whole number ≥/);
    expect(() => solo.input({ kind: 'publish', payload, packet: 5 * DATA })).toThrow(/start a stripe/);
    expect(solo.engine.packetsPublished).toBe(2 * DATA + 2);
    expect(placeOf(dataSends(solo.input({ kind: 'publish', payload, packet: 2 * DATA + 2 })))).toEqual([
      [2, 2],
    ]);
  });

  it('without parity a skip may land anywhere in a row', () => {
    const solo = source({ paritySlices: 0 });
    solo.advance(solo.now + 50);
    // 5 slices carry data: packet 12 is slice 2 of row 2, and slices 0–1 of row 2 count as dealt.
    expect(placeOf(dataSends(solo.input({ kind: 'publish', payload, packet: 12 })))).toEqual([[2, 2]]);
    expect(solo.engine.nextSequence(0)).toBe(3);
    expect(solo.engine.nextSequence(3)).toBe(2);
  });
});
