/**
 * Network latency between simulated members: a transit-stub model in the spirit of GT-ITM, the
 * topology generator behind the Chunkyspread evaluation ("median latency around 400 ms, maximum
 * roughly 650 ms" between members).
 *
 * - `transitDomains` transit (backbone) domains sit at random points of a unit square. The core
 *   latency between two distinct domains is `base + k × distance`, where `base` and `k` are chosen
 *   so that, whatever the random layout, the median over domain pairs is `transitMedianMs` and the
 *   largest is `transitMaxMs`, which keeps the model's median and maximum close to their targets
 *   for every seed. Crossing one domain between two of its stubs costs `intraTransitMs`.
 * - Each domain has `stubsPerTransit` stub (edge) networks with a stub↔transit delay in
 *   `stubDelayMs`, stratified so that every domain has stubs across the whole range.
 * - `attach(id)` places a member in a uniformly random stub with an access delay drawn uniformly
 *   from `accessDelayMs`. Both draws are derived from (seed, id) alone, so the order of `attach`
 *   calls does not matter and a member keeps its place across runs.
 *
 * One-way latency, rounded to whole milliseconds and at least 1:
 *   same stub:              access(a) + intraStubMs + access(b)
 *   otherwise:              access(a) + stub(a) + core(Ta, Tb) + stub(b) + access(b)
 * with core(T, T) = intraTransitMs. Memory is a few numbers per member plus a
 * transitDomains² table; `latencyMs` is two map lookups and a handful of additions.
 *
 * Defaults: 12 domains × 16 stubs, core latencies with median 266 ms and maximum 395 ms, 20 ms
 * across a domain, stub delays 10–90 ms, access delays 2–40 ms, 4 ms inside a stub: chosen to land
 * on the thesis's median and maximum (how close they land: docs/results/latency-model.md). No pair
 * can exceed 395 + 2·90 + 2·40 = 655 ms.
 */
import { createRandom, type Random } from '@chunkycast/engine';
import { percentile } from '../stats.js';

export interface LatencyModelOptions {
  seed: number;
  /** Number of transit domains. Default 12. */
  transitDomains?: number;
  /** Stub networks per transit domain. Default 16. */
  stubsPerTransit?: number;
  /** Median core latency between two distinct transit domains, ms. */
  transitMedianMs?: number;
  /** Largest core latency between two transit domains, ms. */
  transitMaxMs?: number;
  /** Core latency between two stubs of the same transit domain, ms. */
  intraTransitMs?: number;
  /** Range of stub↔transit delays, ms. */
  stubDelayMs?: readonly [number, number];
  /** Range of member↔stub access delays, ms. */
  accessDelayMs?: readonly [number, number];
  /** Latency inside one stub network, between the access links of two of its members, ms. */
  intraStubMs?: number;
}

export interface NodeLocation {
  transit: number;
  /** Global stub index in [0, stubCount). */
  stub: number;
  stubDelayMs: number;
  accessDelayMs: number;
}

export interface LatencyModel {
  /** Places a member (uint32 id) in the topology; attaching an attached id again does nothing. */
  attach(nodeId: number): void;
  isAttached(nodeId: number): boolean;
  /** One-way latency in whole ms: symmetric, ≥ 1, deterministic. Both members must be attached. */
  latencyMs(a: number, b: number): number;
  /** Where an attached member sits (for analysis and tests). */
  locate(nodeId: number): NodeLocation;
  readonly transitCount: number;
  readonly stubCount: number;
  /** Number of attached members. */
  readonly size: number;
}

export const DEFAULT_LATENCY_OPTIONS = {
  transitDomains: 12,
  stubsPerTransit: 16,
  transitMedianMs: 266,
  transitMaxMs: 395,
  intraTransitMs: 20,
  stubDelayMs: [10, 90] as const,
  accessDelayMs: [2, 40] as const,
  intraStubMs: 4,
} satisfies Required<Omit<LatencyModelOptions, 'seed'>>;

/** Fork labels keeping the model's random streams apart. */
const LAYOUT_STREAM = 0x6c61796f; // 'layo'
const NODE_STREAM = 0x6e6f6465; // 'node'

function checkCount(name: string, value: number, limit: number): void {
  if (!Number.isInteger(value) || value < 1 || value > limit) {
    throw new RangeError(`${name} must be an integer in [1, ${limit}], got ${value}`);
  }
}

function checkDelay(name: string, value: number): void {
  if (!(value >= 0) || !Number.isFinite(value)) {
    throw new RangeError(`${name} must be a finite non-negative number of ms, got ${value}`);
  }
}

function checkRange(name: string, range: readonly [number, number]): void {
  checkDelay(`${name}[0]`, range[0]);
  checkDelay(`${name}[1]`, range[1]);
  if (range[0] > range[1]) throw new RangeError(`${name} must be [min, max] with min ≤ max`);
}

function checkNodeId(nodeId: number): void {
  if (!Number.isInteger(nodeId) || nodeId < 0 || nodeId > 0xffffffff) {
    throw new RangeError(`node ids are uint32, got ${nodeId}`);
  }
}

class TransitStubModel implements LatencyModel {
  readonly transitCount: number;
  readonly stubCount: number;
  private readonly stubsPerTransit: number;
  /** transitCount × transitCount core latencies; the diagonal is the intra-transit latency. */
  private readonly core: Float64Array;
  private readonly stubDelay: Float64Array;
  private readonly accessRange: readonly [number, number];
  private readonly intraStub: number;
  private readonly nodeRandom: Random;

  private readonly slots = new Map<number, number>();
  private readonly nodeStub: number[] = [];
  private readonly nodeTransit: number[] = [];
  private readonly nodeAccess: number[] = [];
  /** access + stub delay, the member's distance to its transit domain. */
  private readonly nodeEdge: number[] = [];

  constructor(options: LatencyModelOptions) {
    const d = DEFAULT_LATENCY_OPTIONS;
    const o = {
      seed: options.seed,
      transitDomains: options.transitDomains ?? d.transitDomains,
      stubsPerTransit: options.stubsPerTransit ?? d.stubsPerTransit,
      transitMedianMs: options.transitMedianMs ?? d.transitMedianMs,
      transitMaxMs: options.transitMaxMs ?? d.transitMaxMs,
      intraTransitMs: options.intraTransitMs ?? d.intraTransitMs,
      stubDelayMs: options.stubDelayMs ?? d.stubDelayMs,
      accessDelayMs: options.accessDelayMs ?? d.accessDelayMs,
      intraStubMs: options.intraStubMs ?? d.intraStubMs,
    };
    if (!Number.isInteger(o.seed)) throw new RangeError(`seed must be an integer, got ${o.seed}`);
    checkCount('transitDomains', o.transitDomains, 1024);
    checkCount('stubsPerTransit', o.stubsPerTransit, 65_536);
    checkDelay('transitMedianMs', o.transitMedianMs);
    checkDelay('transitMaxMs', o.transitMaxMs);
    checkDelay('intraTransitMs', o.intraTransitMs);
    checkDelay('intraStubMs', o.intraStubMs);
    checkRange('stubDelayMs', o.stubDelayMs);
    checkRange('accessDelayMs', o.accessDelayMs);
    if (o.transitMedianMs > o.transitMaxMs) {
      throw new RangeError('transitMedianMs must not exceed transitMaxMs');
    }

    const root = createRandom(o.seed);
    const layout = root.fork(LAYOUT_STREAM);
    this.nodeRandom = root.fork(NODE_STREAM);
    const t = o.transitDomains;
    this.transitCount = t;
    this.stubsPerTransit = o.stubsPerTransit;
    this.stubCount = t * o.stubsPerTransit;
    this.accessRange = o.accessDelayMs;
    this.intraStub = o.intraStubMs;

    // Transit domains on the unit square; affine map of distance onto [.., transitMaxMs] with the
    // median pair at transitMedianMs.
    const xs: number[] = [];
    const ys: number[] = [];
    for (let i = 0; i < t; i++) {
      xs.push(layout.nextFloat());
      ys.push(layout.nextFloat());
    }
    const distance = (i: number, j: number): number =>
      Math.hypot((xs[i] as number) - (xs[j] as number), (ys[i] as number) - (ys[j] as number));
    const pairDistances: number[] = [];
    for (let i = 0; i < t; i++) for (let j = i + 1; j < t; j++) pairDistances.push(distance(i, j));
    let slope = 0;
    let base = o.transitMedianMs;
    if (pairDistances.length > 0) {
      const medianDistance = percentile(pairDistances, 50);
      const maxDistance = percentile(pairDistances, 100);
      if (maxDistance > medianDistance) {
        slope = (o.transitMaxMs - o.transitMedianMs) / (maxDistance - medianDistance);
        base = o.transitMedianMs - slope * medianDistance;
      }
    }
    this.core = new Float64Array(t * t);
    for (let i = 0; i < t; i++) {
      for (let j = 0; j < t; j++) {
        this.core[i * t + j] =
          i === j ? o.intraTransitMs : Math.max(o.intraTransitMs, base + slope * distance(i, j));
      }
    }

    // Stub delays, stratified within each domain: stub j of a domain lies in the j-th slice.
    const [sLo, sHi] = o.stubDelayMs;
    const s = o.stubsPerTransit;
    this.stubDelay = new Float64Array(this.stubCount);
    for (let g = 0; g < this.stubCount; g++) {
      this.stubDelay[g] = sLo + (((g % s) + layout.nextFloat()) / s) * (sHi - sLo);
    }
  }

  get size(): number {
    return this.slots.size;
  }

  attach(nodeId: number): void {
    checkNodeId(nodeId);
    if (this.slots.has(nodeId)) return;
    const random = this.nodeRandom.fork(nodeId);
    const stub = random.int(this.stubCount);
    const [aLo, aHi] = this.accessRange;
    const access = aLo + random.nextFloat() * (aHi - aLo);
    this.slots.set(nodeId, this.nodeStub.length);
    this.nodeStub.push(stub);
    this.nodeTransit.push(Math.floor(stub / this.stubsPerTransit));
    this.nodeAccess.push(access);
    this.nodeEdge.push(access + (this.stubDelay[stub] as number));
  }

  isAttached(nodeId: number): boolean {
    return this.slots.has(nodeId);
  }

  latencyMs(a: number, b: number): number {
    const i = this.slot(a);
    const j = this.slot(b);
    let ms: number;
    if (this.nodeStub[i] === this.nodeStub[j]) {
      ms = (this.nodeAccess[i] as number) + (this.nodeAccess[j] as number) + this.intraStub;
    } else {
      const core =
        this.core[(this.nodeTransit[i] as number) * this.transitCount + (this.nodeTransit[j] as number)];
      ms = (this.nodeEdge[i] as number) + (this.nodeEdge[j] as number) + (core as number);
    }
    return ms < 1.5 ? 1 : Math.round(ms);
  }

  locate(nodeId: number): NodeLocation {
    const i = this.slot(nodeId);
    const stub = this.nodeStub[i] as number;
    return {
      transit: this.nodeTransit[i] as number,
      stub,
      stubDelayMs: this.stubDelay[stub] as number,
      accessDelayMs: this.nodeAccess[i] as number,
    };
  }

  private slot(nodeId: number): number {
    const slot = this.slots.get(nodeId);
    if (slot === undefined) throw new RangeError(`node ${nodeId} is not attached to the latency model`);
    return slot;
  }
}

export function createLatencyModel(options: LatencyModelOptions): LatencyModel {
  return new TransitStubModel(options);
}

/**
 * Estimates the median latency over `samples` uniformly random pairs of distinct members drawn from
 * `nodeIds` (at least two), e.g. to normalise latencies.
 */
export function medianLatencyMs(
  model: Pick<LatencyModel, 'latencyMs'>,
  nodeIds: ArrayLike<number>,
  samples: number,
  random: Random,
): number {
  const n = nodeIds.length;
  if (n < 2) throw new RangeError('medianLatencyMs needs at least two members');
  if (!Number.isInteger(samples) || samples < 1) {
    throw new RangeError(`samples must be a positive integer, got ${samples}`);
  }
  const values = new Float64Array(samples);
  for (let k = 0; k < samples; k++) {
    const i = random.int(n);
    let j = random.int(n - 1);
    if (j >= i) j++;
    values[k] = model.latencyMs(nodeIds[i] as number, nodeIds[j] as number);
  }
  return percentile(values.sort(), 50);
}

/**
 * The exact largest latency over all pairs of distinct members in `nodeIds`, in
 * O(members + stubs²): across stubs the latency grows with each end's access delay, so only each
 * stub's slowest member matters, and within a stub only its two slowest.
 */
export function maxLatencyMs(model: LatencyModel, nodeIds: ArrayLike<number>): number {
  const first = new Map<number, { id: number; access: number }>();
  const second = new Map<number, { id: number; access: number }>();
  const seen = new Set<number>();
  for (let k = 0; k < nodeIds.length; k++) {
    const id = nodeIds[k] as number;
    if (seen.has(id)) continue;
    seen.add(id);
    const { stub, accessDelayMs: access } = model.locate(id);
    const top = first.get(stub);
    if (top === undefined || access > top.access) {
      if (top !== undefined) second.set(stub, top);
      first.set(stub, { id, access });
    } else {
      const next = second.get(stub);
      if (next === undefined || access > next.access) second.set(stub, { id, access });
    }
  }
  let result = Number.NaN;
  const consider = (ms: number): void => {
    if (!(ms <= result)) result = ms;
  };
  const tops = [...first.entries()];
  tops.forEach(([stub, a], x) => {
    const b = second.get(stub);
    if (b !== undefined) consider(model.latencyMs(a.id, b.id));
    for (let y = x + 1; y < tops.length; y++) {
      const other = tops[y] as [number, { id: number }];
      consider(model.latencyMs(a.id, other[1].id));
    }
  });
  return result;
}
