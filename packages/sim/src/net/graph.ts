import { shuffleInPlace, type Random } from '@chunkycast/engine';

/**
 * How the configuration model breaks self-loops after pairing the stubs at random:
 * - `retry`: one pass; each self-loop tries up to `SELF_LOOP_RETRIES` random partners to swap
 *   with, and a self-loop still left is dropped (the simulator: thousands of members, a dropped
 *   link in a million is nothing);
 * - `sweep`: passes over every stub, one swap attempt per self-loop per pass, until none is left
 *   (the engine tests: out = in = the degree exactly, or an error).
 */
export type SelfLoopRepair = 'retry' | 'sweep';

/** Partners a self-loop tries in `retry` mode: a handful suffices, it rarely needs a second. */
const SELF_LOOP_RETRIES = 20;
/** Passes in `sweep` mode before giving up (only a degenerate degree sequence gets near it). */
const MAX_SWEEPS = 10_000;

/**
 * Configuration model for a directed multigraph (the thesis's static population, built before the
 * source starts, thesis §4.4, experimental setup): node v gets `degree(v)` out-stubs and as many in-stubs, paired at random.
 * Repeats are multi-links. Every node of `degrees` has an entry, in `degrees`' order.
 */
export function configurationModel(
  degrees: ReadonlyMap<number, number>,
  random: Random,
  selfLoops: SelfLoopRepair,
): Map<number, { out: number[]; in: number[] }> {
  const outStubs: number[] = [];
  const inStubs: number[] = [];
  for (const [id, d] of degrees) {
    for (let i = 0; i < d; i++) {
      outStubs.push(id);
      inStubs.push(id);
    }
  }
  shuffleInPlace(inStubs, random);
  const n = inStubs.length;
  const trySwap = (i: number): void => {
    const j = random.int(n);
    if (inStubs[j] !== outStubs[i] && inStubs[i] !== outStubs[j]) {
      const tmp = inStubs[i] ?? 0;
      inStubs[i] = inStubs[j] ?? 0;
      inStubs[j] = tmp;
    }
  };
  if (selfLoops === 'retry') {
    for (let i = 0; i < n; i++)
      for (let attempt = 0; attempt < SELF_LOOP_RETRIES && inStubs[i] === outStubs[i]; attempt++) trySwap(i);
  } else {
    for (let sweep = 0; ; sweep++) {
      let fixed = true;
      for (let i = 0; i < n; i++) {
        if (outStubs[i] !== inStubs[i]) continue;
        fixed = false;
        trySwap(i);
      }
      if (fixed) break;
      if (sweep > MAX_SWEEPS) throw new Error('configurationModel: cannot remove self-loops');
    }
  }
  const result = new Map<number, { out: number[]; in: number[] }>();
  for (const id of degrees.keys()) result.set(id, { out: [], in: [] });
  for (let i = 0; i < n; i++) {
    const a = outStubs[i] ?? 0;
    const b = inStubs[i] ?? 0;
    if (a === b) continue;
    result.get(a)?.out.push(b);
    result.get(b)?.in.push(a);
  }
  return result;
}
