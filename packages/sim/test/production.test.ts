import { describe, expect, it } from 'vitest';
import { DEFAULT_RUN, NOT_RECEIVED, runScenario, type RunOptions, type RunOutput } from '../src/index.js';
import { MemberRecord } from '../src/measurement.js';
import { productionDelay } from '../src/production.js';

const STREAM_START_MS = 1000;
const SEGMENT_MS = 2000;

/** A member of a 2-slice, 3-packet stream with the given per-slice delays (null: never came). */
function member(
  id: number,
  completeAt: number,
  leftAt: number,
  delays: readonly (readonly (number | null)[])[],
): MemberRecord {
  const m = new MemberRecord(id, 0, 4, 8, 4, 4, 0, 2, 3, 0, 0);
  m.completeAt = completeAt;
  m.leftAt = leftAt;
  delays.forEach((slice, s) => {
    slice.forEach((d, k) => {
      const log = m.delays[s];
      if (log !== undefined) log[k] = d ?? NOT_RECEIVED;
    });
  });
  return m;
}

describe('write → receive delay (production.ts), on a hand-computed case', () => {
  // Published packets (write w, publish e): s0#0 w1000 e1000; s0#1 w1100 e3000; s1#0 w1050 e3000;
  // s0#2 w9000 e9500 (too close to the end at 12000 with a 5 s life); s1#1 never published.
  const input = {
    emitTimes: [Float64Array.from([1000, 3000, 9500]), Float64Array.from([3000, NaN, NaN])],
    writeTimes: [Float64Array.from([1000, 1100, 9000]), Float64Array.from([1050, NaN, NaN])],
    members: [
      member(1, 500, Infinity, [
        [100, 200, 1],
        [300, null, null],
      ]),
      // Never gets s0#1: that packet is not held by all.
      member(2, 800, Infinity, [
        [400, null, 1],
        [50, null, null],
      ]),
      // Complete only at 2000: counts for the packets published at 3000, not for s0#0.
      member(3, 2000, Infinity, [
        [5000, 700, 1],
        [600, null, null],
      ]),
      // Leaves at 6000: counts only for packets published by 1000 (6000 − the 5 s life).
      member(4, 0, 6000, [
        [900, 9999, 1],
        [9999, null, null],
      ]),
    ],
  };

  it('gives the write → last / 90% / each figures worked out by hand', () => {
    const w = productionDelay(input, 0, 12_000, 5000);
    expect(w.packets).toBe(3);
    expect(w.packetsNotHeldByAll).toBe(1);
    expect(w.packetsNotHeldBy90Pct).toBe(1);
    expect(w.membersMin).toBe(3);
    expect(w.membersMean).toBe(3);
    // Waits 0, 1900, 1950.
    expect(w.sourceWaitMs).toEqual({ mean: 1283.3, max: 1950 });
    // s0#0: members 1, 2, 4 at 100, 400, 900 → last 900; s1#0: members 1, 2, 3 at
    // 1950 + (300, 50, 600) → last 2550; s0#1 is not held by member 2.
    const lastAndNinety = { mean: 1725, p50: 1725, p90: 2385, p99: 2533.5, max: 2550, count: 2 };
    expect(w.writeToLastMemberMs).toEqual(lastAndNinety);
    // With 3 members, 90% is the 3rd arrival: the last.
    expect(w.writeTo90PctMs).toEqual(lastAndNinety);
    // All arrivals: 100 400 900 | 2100 2600 (s0#1: 1900 + 200, 700) | 2250 2000 2550.
    expect(w.writeToEachMemberMs).toEqual({
      mean: 1612.5,
      p50: 2050,
      p90: 2565,
      p99: 2596.5,
      max: 2600,
      count: 8,
    });
  });

  it('measures only packets written from the window start', () => {
    const w = productionDelay(input, 1060, 12_000, 5000);
    expect(w.packets).toBe(1);
    expect(w.packetsNotHeldByAll).toBe(1);
    expect(w.writeToLastMemberMs.count).toBe(0);
    expect(w.writeToEachMemberMs).toMatchObject({ count: 2, mean: 2350, max: 2600 });
  });
});

function run(overrides: Partial<RunOptions>): RunOutput {
  return runScenario({
    ...DEFAULT_RUN,
    scenario: 'static',
    nodes: 50,
    durationS: 20,
    uplinkHeadroom: 0,
    packetsPerSlicePerSecond: 1,
    ...overrides,
  });
}

/** Every published packet as (write, publish) times. */
function published(out: RunOutput): { writtenAt: number; publishedAt: number }[] {
  const packets: { writtenAt: number; publishedAt: number }[] = [];
  out.result.emitTimes.forEach((emitted, s) => {
    emitted.forEach((publishedAt, seq) => {
      if (Number.isNaN(publishedAt)) return;
      packets.push({ writtenAt: out.result.writeTimes[s]?.[seq] ?? Number.NaN, publishedAt });
    });
  });
  return packets;
}

describe('production modes in a small static run (50 members, 20 s)', () => {
  const progressive = run({ production: 'progressive' });
  const segment = run({ production: 'segment', segmentMs: SEGMENT_MS });

  it('progressive publishes each packet when it is written', () => {
    const packets = published(progressive);
    // 16 slices × 1 packet/s over 19 s of stream, the last at 20 000 ms included.
    expect(packets.length).toBe(16 * 19 + 1);
    for (const p of packets) expect(p.publishedAt).toBe(p.writtenAt);
    const w = progressive.summary.production.all;
    expect(w.sourceWaitMs).toEqual({ mean: 0, max: 0 });
    expect(w.packetsNotHeldByAll).toBe(0);
    expect(progressive.summary.production.segmentMs).toBeNull();
  });

  it('segment publishes each packet at the end of the segment it was written in', () => {
    const packets = published(segment);
    // Segments end at 3000, 5000, …, 19 000 ms: 9 segments of 32 packets; the tenth (written from
    // 19 000) would be listed at 21 000, after the run.
    expect(packets.length).toBe(9 * 32);
    for (const p of packets) {
      const end =
        STREAM_START_MS + (Math.floor((p.writtenAt - STREAM_START_MS) / SEGMENT_MS) + 1) * SEGMENT_MS;
      expect(p.publishedAt).toBe(end);
      expect(p.publishedAt - p.writtenAt).toBeGreaterThan(0);
      expect(p.publishedAt - p.writtenAt).toBeLessThanOrEqual(SEGMENT_MS);
    }
    // A segment's packets are written every 62.5 ms (rounded to whole ms; halves up) from its
    // start: waits 2000 − round(62.5·i), i = 0..31, mean 2000 − 31 008 / 32 = 1031 ms.
    expect(segment.summary.production.all.sourceWaitMs).toEqual({ mean: 1031, max: 2000 });
    // The wait is in every figure: from the write, members hold packets later than progressive.
    const seg = segment.summary.production.all;
    const prog = progressive.summary.production.all;
    expect(seg.writeToEachMemberMs.p50).toBeGreaterThan(prog.writeToEachMemberMs.p50 + 500);
    expect(seg.writeToLastMemberMs.mean).toBeGreaterThan(prog.writeToLastMemberMs.mean + 500);
    expect(segment.summary.production.segmentMs).toBe(SEGMENT_MS);
  });

  it('gives the same figures for the same seed', () => {
    expect(run({ production: 'segment', segmentMs: SEGMENT_MS }).summary.production).toEqual(
      segment.summary.production,
    );
  });
});
