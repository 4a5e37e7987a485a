import { describe, expect, it } from 'vitest';
import { createRandom, shuffleInPlace } from '@chunkycast/engine';
import {
  createLatencyModel,
  DEFAULT_LATENCY_OPTIONS,
  maxLatencyMs,
  medianLatencyMs,
  type LatencyModel,
} from '../src/net/latency.js';
import { max, mean, min } from '../src/stats.js';

function randomIds(seed: number, count: number): number[] {
  const random = createRandom(seed);
  const ids = new Set<number>();
  while (ids.size < count) ids.add(random.nextU32());
  return [...ids];
}

function attachAll(model: LatencyModel, ids: readonly number[]): void {
  for (const id of ids) model.attach(id);
}

function bruteForceMax(model: LatencyModel, ids: readonly number[]): number {
  let result = 0;
  for (let i = 0; i < ids.length; i++) {
    const a = ids[i]!;
    for (let j = i + 1; j < ids.length; j++) {
      const ms = model.latencyMs(a, ids[j]!);
      if (ms > result) result = ms;
    }
  }
  return result;
}

describe('transit-stub latency model', () => {
  it('is calibrated: median ≈ 400 ms over random pairs and maximum ≈ 650 ms over 5000 members', () => {
    for (const seed of [1, 2, 3]) {
      const model = createLatencyModel({ seed });
      const ids = randomIds(100 + seed, 5000);
      attachAll(model, ids);
      expect(model.size).toBe(5000);
      const median = medianLatencyMs(model, ids, 200_000, createRandom(seed));
      const max = bruteForceMax(model, ids);
      console.log(`latency seed ${seed}: median ${median} ms, max ${max} ms over 5000 members`);
      expect(median).toBeGreaterThanOrEqual(380);
      expect(median).toBeLessThanOrEqual(420);
      expect(max).toBeGreaterThanOrEqual(600);
      expect(max).toBeLessThanOrEqual(660);
      expect(maxLatencyMs(model, ids)).toBe(max);
    }
  });

  it('maxLatencyMs matches brute force on small populations, including crowded stubs', () => {
    for (const [seed, count, stubsPerTransit] of [
      [5, 300, 16],
      [6, 200, 1],
      [7, 50, 2],
    ] as const) {
      const model = createLatencyModel({ seed, transitDomains: 3, stubsPerTransit });
      const ids = randomIds(seed, count);
      attachAll(model, ids);
      expect(maxLatencyMs(model, [...ids, ...ids.slice(0, 10)])).toBe(bruteForceMax(model, ids));
    }
    const lonely = createLatencyModel({ seed: 1 });
    lonely.attach(5);
    expect(maxLatencyMs(lonely, [5])).toBeNaN();
  });

  it('returns symmetric whole milliseconds ≥ 1', () => {
    const model = createLatencyModel({ seed: 9 });
    const ids = randomIds(9, 500);
    attachAll(model, ids);
    const random = createRandom(10);
    for (let k = 0; k < 20_000; k++) {
      const a = ids[random.int(ids.length)]!;
      const b = ids[random.int(ids.length)]!;
      const ms = model.latencyMs(a, b);
      expect(Number.isInteger(ms)).toBe(true);
      expect(ms).toBeGreaterThanOrEqual(1);
      expect(model.latencyMs(b, a)).toBe(ms);
    }
    const tiny = createLatencyModel({
      seed: 1,
      accessDelayMs: [0, 0],
      intraStubMs: 0,
      transitDomains: 1,
      stubsPerTransit: 1,
    });
    tiny.attach(1);
    tiny.attach(2);
    expect(tiny.latencyMs(1, 2)).toBe(1);
  });

  it('depends on (seed, node id) only: attach order and other models do not matter', () => {
    const ids = randomIds(11, 400);
    const a = createLatencyModel({ seed: 42 });
    attachAll(a, ids);
    const b = createLatencyModel({ seed: 42 });
    const other = createLatencyModel({ seed: 43 });
    const reversed = shuffleInPlace([...ids], createRandom(3));
    for (const id of reversed) {
      b.attach(id);
      other.attach(id);
      b.attach(id); // idempotent
    }
    expect(b.size).toBe(ids.length);
    let differences = 0;
    for (let i = 0; i + 1 < ids.length; i++) {
      const x = ids[i]!;
      const y = ids[i + 1]!;
      expect(b.latencyMs(x, y)).toBe(a.latencyMs(x, y));
      expect(b.locate(x)).toEqual(a.locate(x));
      if (other.latencyMs(x, y) !== a.latencyMs(x, y)) differences++;
    }
    expect(differences).toBeGreaterThan(ids.length / 2);
  });

  it('is cheaper inside a stub and inside a transit domain, and follows the documented formula', () => {
    const model = createLatencyModel({ seed: 12 });
    const ids = randomIds(12, 3000);
    attachAll(model, ids);
    const sameStub: number[] = [];
    const sameTransit: number[] = [];
    const across: number[] = [];
    for (let i = 0; i + 1 < ids.length; i += 1) {
      for (let j = i + 1; j < Math.min(ids.length, i + 400); j++) {
        const p = model.locate(ids[i]!);
        const q = model.locate(ids[j]!);
        const ms = model.latencyMs(ids[i]!, ids[j]!);
        if (p.stub === q.stub) {
          expect(ms).toBe(
            Math.round(p.accessDelayMs + q.accessDelayMs + DEFAULT_LATENCY_OPTIONS.intraStubMs),
          );
          sameStub.push(ms);
        } else if (p.transit === q.transit) {
          const expected =
            p.accessDelayMs +
            p.stubDelayMs +
            DEFAULT_LATENCY_OPTIONS.intraTransitMs +
            q.stubDelayMs +
            q.accessDelayMs;
          expect(Math.abs(ms - expected)).toBeLessThanOrEqual(0.5 + 1e-9);
          sameTransit.push(ms);
        } else {
          across.push(ms);
        }
      }
    }
    expect(sameStub.length).toBeGreaterThan(100);
    expect(sameTransit.length).toBeGreaterThan(1000);
    expect(max(sameStub)).toBeLessThan(min(across));
    expect(max(sameTransit)).toBeLessThanOrEqual(20 + 2 * 90 + 2 * 40);
    expect(mean(sameTransit)).toBeLessThan(mean(across) - 150);
    // Stubs are spread over all transit domains and the members over the stubs.
    const transits = new Set(ids.map((id) => model.locate(id).transit));
    expect(transits.size).toBe(model.transitCount);
    expect(model.stubCount).toBe(12 * 16);
  });

  it('rejects unknown members, bad ids and bad options', () => {
    const model = createLatencyModel({ seed: 1 });
    model.attach(0);
    model.attach(0xffffffff);
    expect(model.isAttached(0)).toBe(true);
    expect(model.isAttached(1)).toBe(false);
    expect(model.latencyMs(0, 0xffffffff)).toBeGreaterThanOrEqual(1);
    expect(() => model.latencyMs(0, 1)).toThrow(RangeError);
    expect(() => model.locate(1)).toThrow(RangeError);
    for (const bad of [-1, 1.5, 2 ** 32, Number.NaN]) {
      expect(() => {
        model.attach(bad);
      }).toThrow(RangeError);
    }
    expect(() => createLatencyModel({ seed: 1.5 })).toThrow(RangeError);
    expect(() => createLatencyModel({ seed: 1, transitDomains: 0 })).toThrow(RangeError);
    expect(() => createLatencyModel({ seed: 1, stubDelayMs: [50, 10] })).toThrow(RangeError);
    expect(() => createLatencyModel({ seed: 1, accessDelayMs: [-1, 10] })).toThrow(RangeError);
    expect(() => createLatencyModel({ seed: 1, transitMedianMs: 500, transitMaxMs: 400 })).toThrow(
      RangeError,
    );
  });
});

describe('medianLatencyMs', () => {
  it('samples pairs of distinct members', () => {
    const sumModel = { latencyMs: (a: number, b: number) => a + b };
    // Only one pair: 10 + 0.
    expect(medianLatencyMs(sumModel, [0, 10], 101, createRandom(1))).toBe(10);
    // Pairs {1,2}, {1,3}, {2,3} are equally likely: sums 3, 4, 5.
    expect(medianLatencyMs(sumModel, [1, 2, 3], 10_001, createRandom(2))).toBe(4);
    expect(() => medianLatencyMs(sumModel, [1], 10, createRandom(3))).toThrow(RangeError);
    expect(() => medianLatencyMs(sumModel, [1, 2], 0, createRandom(3))).toThrow(RangeError);
  });
});
