/**
 * Small descriptive statistics for simulation reports. Every function takes plain arrays or typed
 * arrays and never mutates its input.
 *
 * NaN policy: `sum`, `mean`, `min`, `max` and `percentile` return NaN when any value is NaN (a NaN
 * in a result is a bug upstream and should stay visible); `cdfPoints` and `histogram` skip NaN,
 * because they feed plots.
 */

export type Numbers = ArrayLike<number>;

export interface CdfPoint {
  x: number;
  y: number;
}

export interface HistogramBin {
  /** Inclusive lower edge. */
  lo: number;
  /** Exclusive upper edge. */
  hi: number;
  count: number;
}

/** Sum of the values; 0 for none. */
export function sum(values: Numbers): number {
  let total = 0;
  for (let i = 0; i < values.length; i++) total += values[i] as number;
  return total;
}

/** Arithmetic mean; NaN for none. */
export function mean(values: Numbers): number {
  return values.length === 0 ? Number.NaN : sum(values) / values.length;
}

/** Smallest value; NaN for none or when any value is NaN. */
export function min(values: Numbers): number {
  if (values.length === 0) return Number.NaN;
  let result = Number.POSITIVE_INFINITY;
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (Number.isNaN(v)) return Number.NaN;
    if (v < result) result = v;
  }
  return result;
}

/** Largest value; NaN for none or when any value is NaN. */
export function max(values: Numbers): number {
  if (values.length === 0) return Number.NaN;
  let result = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (Number.isNaN(v)) return Number.NaN;
    if (v > result) result = v;
  }
  return result;
}

/** Sorted copy without NaN values. */
function sortedFinite(values: Numbers): Float64Array {
  const out = new Float64Array(values.length);
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (!Number.isNaN(v)) out[n++] = v;
  }
  return out.subarray(0, n).sort();
}

/**
 * The p-th percentile (p in [0, 100]) by linear interpolation between closest ranks: with the
 * values sorted ascending as v[0..n-1], rank r = p/100 × (n − 1) and the result is
 * v[⌊r⌋] + (r − ⌊r⌋) × (v[⌊r⌋+1] − v[⌊r⌋]) (NumPy's default "linear" method). Already-sorted input
 * is used in place; other input is sorted in a copy. NaN for no values or when any value is NaN.
 */
export function percentile(values: Numbers, p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile p must be in [0, 100], got ${p}`);
  const n = values.length;
  if (n === 0) return Number.NaN;
  let sorted = true;
  for (let i = 0; i < n; i++) {
    const v = values[i] as number;
    if (Number.isNaN(v)) return Number.NaN;
    if (i > 0 && (values[i - 1] as number) > v) sorted = false;
  }
  const data: Numbers = sorted ? values : Float64Array.from(values).sort();
  const rank = (p / 100) * (n - 1);
  const lo = Math.floor(rank);
  const low = data[lo] as number;
  if (lo >= n - 1) return low;
  const fraction = rank - lo;
  if (fraction === 0) return low;
  return low + fraction * ((data[lo + 1] as number) - low);
}

/**
 * Empirical CDF of the non-NaN values: one point per distinct value x with y = fraction of values
 * ≤ x, ascending in x. When there are more than `maxPoints` distinct values, keeps `maxPoints`
 * of them evenly spaced by rank, always including the first and the last (y = 1).
 */
export function cdfPoints(values: Numbers, maxPoints = 1000): CdfPoint[] {
  if (!Number.isInteger(maxPoints) || maxPoints < 2) {
    throw new RangeError(`cdfPoints maxPoints must be an integer ≥ 2, got ${maxPoints}`);
  }
  const sorted = sortedFinite(values);
  const n = sorted.length;
  const all: CdfPoint[] = [];
  for (let i = 0; i < n; i++) {
    const x = sorted[i] as number;
    if (i + 1 < n && sorted[i + 1] === x) continue;
    all.push({ x, y: (i + 1) / n });
  }
  if (all.length <= maxPoints) return all;
  const picked: CdfPoint[] = [];
  const last = all.length - 1;
  for (let k = 0; k < maxPoints; k++) {
    picked.push(all[Math.round((k * last) / (maxPoints - 1))] as CdfPoint);
  }
  return picked;
}

/**
 * Counts of the non-NaN values in bins [k·w, (k+1)·w) for w = binWidth (value v goes to bin
 * k = ⌊v / w⌋), from the bin holding the smallest value to the bin holding the largest, including
 * empty bins in between. [] for no values.
 */
export function histogram(values: Numbers, binWidth: number): HistogramBin[] {
  if (!(binWidth > 0) || !Number.isFinite(binWidth)) {
    throw new RangeError(`histogram binWidth must be positive and finite, got ${binWidth}`);
  }
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (Number.isNaN(v)) continue;
    if (!Number.isFinite(v))
      throw new RangeError('histogram values must be finite (or NaN, which is skipped)');
    const k = Math.floor(v / binWidth);
    if (k < first) first = k;
    if (k > last) last = k;
  }
  if (first > last) return [];
  if (last - first > 10_000_000) throw new RangeError('histogram would need more than 10 million bins');
  const counts = new Array<number>(last - first + 1).fill(0);
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (Number.isNaN(v)) continue;
    const k = Math.floor(v / binWidth) - first;
    counts[k] = (counts[k] as number) + 1;
  }
  return counts.map((count, i) => ({ lo: (first + i) * binWidth, hi: (first + i + 1) * binWidth, count }));
}

/** Fraction of the values for which `pred` holds; NaN for none. */
export function fractionWhere(values: Numbers, pred: (value: number, index: number) => boolean): number {
  const n = values.length;
  if (n === 0) return Number.NaN;
  let hits = 0;
  for (let i = 0; i < n; i++) if (pred(values[i] as number, i)) hits++;
  return hits / n;
}
