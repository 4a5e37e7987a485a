import { shuffleInPlace, type Random } from '@chunkycast/engine';
import type { AdversaryKind } from './adversaries.js';
import type { MemberRecord } from './measurement.js';
import type { SimOptions } from './simulation.js';

/** The true source's id; members are numbered from 1. */
export const SOURCE_ID = 0;
/** Fork labels of the population's random streams (a label per use keeps them independent). */
const TARGET_LOAD_STREAM = 4;
const ADVERSARY_PLAN_STREAM = 0xad;

/**
 * Who is in the swarm and when they come and go: the members (kept after they leave, for the
 * figures), the live set, the planned target loads and hostile kinds, and churn's arrival and
 * stay times. Every draw comes from the Simulation's seeded stream, in the order of the events.
 */
export class Population {
  readonly members: MemberRecord[] = [];
  readonly byId: (MemberRecord | undefined)[] = [];
  /** Ids of live members; a leaver's slot takes the last id (the order is part of the seeded run). */
  readonly alive: number[] = [];
  private readonly aliveIndex = new Map<number, number>();
  private nextMemberId = 1;
  private readonly plannedTargetLoads: number[] = [];
  /** Kinds of the planned population, shuffled (null: honest); joiners beyond it draw. */
  private readonly plannedKinds: (AdversaryKind | null)[] = [];

  constructor(
    private readonly options: SimOptions,
    private readonly random: Random,
  ) {}

  nextId(): number {
    return this.nextMemberId++;
  }

  /** A new member, live from now. */
  add(m: MemberRecord): void {
    m.alive = true;
    this.members.push(m);
    this.byId[m.id] = m;
    this.aliveIndex.set(m.id, this.alive.length);
    this.alive.push(m.id);
  }

  /** The member leaves the swarm at `now` (its record stays). */
  remove(m: MemberRecord, now: number): void {
    m.engine = null;
    m.alive = false;
    m.leftAt = now;
    const idx = this.aliveIndex.get(m.id);
    if (idx !== undefined) {
      const last = this.alive.pop();
      if (last !== undefined && idx < this.alive.length) {
        this.alive[idx] = last;
        this.aliveIndex.set(last, idx);
      }
      this.aliveIndex.delete(m.id);
    }
  }

  /** Live members' records, in the live set's order. */
  aliveMembers(): (MemberRecord | undefined)[] {
    return this.alive.map((id) => this.byId[id]);
  }

  isHonest(id: number): boolean {
    return id === SOURCE_ID || this.byId[id]?.hostile === null;
  }

  /**
   * TL for the next member. The thesis derives TL from degree "in such a way that the sum of target
   * loads across all nodes is approximately equal to the total volume needed" (thesis §4.4, experimental setup): the planned
   * population (initial members and scheduled joiners) therefore draws its TLs stratified over the
   * TL range (every value equally often, shuffled), so Σ TL = 16·N up to rounding; independent
   * draws would leave a random shortfall of ~7·√N slices. Churn arrivals draw independently.
   */
  drawTargetLoad(r: Random): number {
    const next = this.plannedTargetLoads.pop();
    if (next !== undefined) return next;
    return this.options.targetLoadMin + r.int(this.options.targetLoadMax - this.options.targetLoadMin + 1);
  }

  planTargetLoads(count: number): void {
    const span = this.options.targetLoadMax - this.options.targetLoadMin + 1;
    const values: number[] = [];
    for (let i = 0; i < count; i++) values.push(this.options.targetLoadMin + (i % span));
    shuffleInPlace(values, this.random.fork(TARGET_LOAD_STREAM));
    this.plannedTargetLoads.push(...values);
  }

  /**
   * Exactly round(fraction · planned) members of each kind among the planned population, placed
   * at random; churn arrivals beyond it are hostile with the same probabilities.
   */
  planAdversaries(count: number): void {
    const specs = this.options.adversaries ?? [];
    if (specs.length === 0) return;
    const kinds: (AdversaryKind | null)[] = [];
    for (const spec of specs)
      for (let i = 0; i < Math.round(spec.fraction * count); i++) kinds.push(spec.kind);
    while (kinds.length < count) kinds.push(null);
    shuffleInPlace(kinds, this.random.fork(ADVERSARY_PLAN_STREAM));
    this.plannedKinds.push(...kinds);
  }

  drawKind(r: Random): AdversaryKind | null {
    if (this.plannedKinds.length > 0) return this.plannedKinds.pop() ?? null;
    let u = r.nextFloat();
    for (const spec of this.options.adversaries ?? []) {
      if (u < spec.fraction) return spec.kind;
      u -= spec.fraction;
    }
    return null;
  }

  // ───────────────────────────── churn ─────────────────────────────

  /** When the next Poisson arrival comes after `now` (at least 1 ms later). */
  nextPoissonArrival(now: number): number {
    const rate = this.options.plan.poissonJoinsPerSecond;
    const u = this.random.nextFloat();
    return now + Math.max(1, Math.round((-Math.log(1 - u) / rate) * 1000));
  }

  /** How long an arrival stays (ms): Pareto, or for ever without churn. */
  paretoStayMs(): number {
    const stay = this.options.plan.stay;
    if (stay === null) return Infinity;
    // Pareto with minimum x_m and mean μ has α = μ / (μ − x_m) (= 10/7 for 90 s and 300 s, thesis §4.4, churn scenario).
    const alpha = stay.meanMs / (stay.meanMs - stay.minMs);
    const u = 1 - this.random.nextFloat();
    return stay.minMs / Math.pow(u, 1 / alpha);
  }

  /** Whether a departure is a graceful quit (else an abrupt failure). */
  drawGraceful(): boolean {
    return this.random.nextFloat() < this.options.gracefulLeaveFraction;
  }
}
