import { describe, expect, it } from 'vitest';
import { cdfPoints, fractionWhere, histogram, max, mean, min, percentile, sum } from '../src/stats.js';

describe('percentile', () => {
  it('interpolates linearly between closest ranks', () => {
    const values = [1, 2, 3, 4];
    expect(percentile(values, 0)).toBe(1);
    expect(percentile(values, 25)).toBe(1.75); // rank 0.75
    expect(percentile(values, 50)).toBe(2.5); // rank 1.5
    expect(percentile(values, 100)).toBe(4);
    expect(percentile([10, 20, 30, 40, 50], 90)).toBeCloseTo(46, 12); // rank 3.6
    expect(percentile([10, 20, 30, 40, 50], 50)).toBe(30);
    expect(percentile([7], 33)).toBe(7);
  });

  it('sorts unsorted input without mutating it, and accepts Float64Array', () => {
    const values = [4, 1, 3, 2];
    expect(percentile(values, 25)).toBe(1.75);
    expect(values).toEqual([4, 1, 3, 2]);
    const typed = Float64Array.from([40, 10, 30, 20]);
    expect(percentile(typed, 50)).toBe(25);
    expect(Array.from(typed)).toEqual([40, 10, 30, 20]);
    expect(percentile([-5, -1, -3], 50)).toBe(-3);
  });

  it('returns NaN for empty input or NaN values and rejects p outside [0, 100]', () => {
    expect(percentile([], 50)).toBeNaN();
    expect(percentile(new Float64Array(0), 50)).toBeNaN();
    expect(percentile([1, Number.NaN, 3], 50)).toBeNaN();
    expect(() => percentile([1], -1)).toThrow(RangeError);
    expect(() => percentile([1], 100.5)).toThrow(RangeError);
    expect(() => percentile([1], Number.NaN)).toThrow(RangeError);
  });
});

describe('sum, mean, min, max', () => {
  it('computes hand-checked values', () => {
    expect(sum([1, 2, 3, 4])).toBe(10);
    expect(mean([1, 2, 3, 4])).toBe(2.5);
    expect(min([3, -2, 7])).toBe(-2);
    expect(max([3, -2, 7])).toBe(7);
    expect(max(Float64Array.from([0.5, 0.25]))).toBe(0.5);
    expect(mean(Float64Array.from([1, 2]))).toBe(1.5);
  });

  it('handles empty input and NaN', () => {
    expect(sum([])).toBe(0);
    expect(mean([])).toBeNaN();
    expect(min([])).toBeNaN();
    expect(max([])).toBeNaN();
    expect(max([1, Number.NaN, 2])).toBeNaN();
    expect(min([1, Number.NaN, 2])).toBeNaN();
    expect(mean([1, Number.NaN])).toBeNaN();
  });

  it('does not overflow the stack on large arrays', () => {
    const big = new Float64Array(1_000_000).map((_, i) => i);
    expect(max(big)).toBe(999_999);
    expect(min(big)).toBe(0);
    expect(sum(big)).toBe(499_999_500_000);
  });
});

describe('cdfPoints', () => {
  it('gives one point per distinct value with the fraction ≤ x', () => {
    expect(cdfPoints([3, 1, 2, 2])).toEqual([
      { x: 1, y: 0.25 },
      { x: 2, y: 0.75 },
      { x: 3, y: 1 },
    ]);
    expect(cdfPoints([Number.NaN, 2, 1])).toEqual([
      { x: 1, y: 0.5 },
      { x: 2, y: 1 },
    ]);
    expect(cdfPoints([])).toEqual([]);
  });

  it('downsamples evenly by rank, keeping both ends', () => {
    const values = Array.from({ length: 100 }, (_, i) => 99 - i);
    const points = cdfPoints(values, 10);
    expect(points).toHaveLength(10);
    expect(points.map((p) => p.x)).toEqual([0, 11, 22, 33, 44, 55, 66, 77, 88, 99]);
    expect(points[0]).toEqual({ x: 0, y: 0.01 });
    expect(points[9]).toEqual({ x: 99, y: 1 });
    expect(cdfPoints(values, 100)).toHaveLength(100);
    expect(cdfPoints([5, 6, 7], 2)).toEqual([
      { x: 5, y: 1 / 3 },
      { x: 7, y: 1 },
    ]);
    expect(() => cdfPoints(values, 1)).toThrow(RangeError);
  });
});

describe('histogram', () => {
  it('bins [k·w, (k+1)·w) from the first to the last occupied bin', () => {
    expect(histogram([0, 0.5, 1, 1.5, 4], 1)).toEqual([
      { lo: 0, hi: 1, count: 2 },
      { lo: 1, hi: 2, count: 2 },
      { lo: 2, hi: 3, count: 0 },
      { lo: 3, hi: 4, count: 0 },
      { lo: 4, hi: 5, count: 1 },
    ]);
    expect(histogram([-0.5, 0.5, Number.NaN, 9.99], 5)).toEqual([
      { lo: -5, hi: 0, count: 1 },
      { lo: 0, hi: 5, count: 1 },
      { lo: 5, hi: 10, count: 1 },
    ]);
    expect(histogram([], 1)).toEqual([]);
    expect(() => histogram([1], 0)).toThrow(RangeError);
    expect(() => histogram([1], Number.NaN)).toThrow(RangeError);
    expect(() => histogram([Number.POSITIVE_INFINITY], 1)).toThrow(RangeError);
  });
});

describe('fractionWhere', () => {
  it('counts the values satisfying the predicate', () => {
    expect(fractionWhere([1, 2, 3, 4], (v) => v > 2)).toBe(0.5);
    expect(fractionWhere(Float64Array.from([1, 2, 3]), (_, i) => i === 0)).toBeCloseTo(1 / 3, 15);
    expect(fractionWhere([], () => true)).toBeNaN();
  });
});
