/**
 * The one percentile the tools report: nearest rank over the finite values (the smallest value
 * with at least p% of the values at or below it). Benchmarks report observed values, never
 * interpolated ones, so a p95 of 8 startup times is one of those 8 times. Null when no value is
 * finite. (The simulator's own summaries interpolate, `@chunkycast/sim`'s `percentile`; its
 * figures are kept as they were published.)
 */
export function percentile(values: readonly (number | null | undefined)[], p: number): number | null {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile p must be in [0, 100], got ${p}`);
  const sorted = values
    .filter((v): v is number => typeof v === 'number' && Number.isFinite(v))
    .sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? null;
}

/** Arithmetic mean of the finite values, null when there are none. */
export function mean(values: readonly (number | null | undefined)[]): number | null {
  const finite = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  return finite.length === 0 ? null : finite.reduce((a, b) => a + b, 0) / finite.length;
}

/** `x` rounded to `digits` decimals; null and undefined stay null. */
export function round(x: number | null | undefined, digits: number): number | null {
  if (x === null || x === undefined) return null;
  const scale = 10 ** digits;
  return Math.round(x * scale) / scale;
}
