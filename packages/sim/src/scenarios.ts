/**
 * The thesis's evaluation scenarios (thesis §4.4, the four scenarios), parameterised by population size.
 */
export const SCENARIO_NAMES = ['static', 'join', 'burst10', 'burst50', 'churn', 'grow'] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

export interface ScenarioPlan {
  readonly name: ScenarioName;
  /** Members present (pre-linked, like the thesis's offline Swaplinks trace) at t = 0. */
  readonly initialMembers: number;
  /** Members that join later through the rendezvous server and Swaplinks walks. */
  readonly joiners: number;
  /** Deterministic joins: first join time and rate (joins per second). */
  readonly joinStartMs: number;
  readonly joinsPerSecond: number;
  /** Poisson joins (churn): mean rate per second, or 0. */
  readonly poissonJoinsPerSecond: number;
  /** Churn: arrivals and departures stop at this time (then the swarm settles). */
  readonly churnEndMs: number;
  /** Pareto stay times (churn), or null for nodes that stay. */
  readonly stay: { readonly minMs: number; readonly meanMs: number } | null;
  /** Fraction of present members failing at once at `burstAtMs` (0: none). */
  readonly burstFraction: number;
  readonly burstAtMs: number;
  /** Simulated duration. */
  readonly durationMs: number;
  /** When the true source starts sending. */
  readonly streamStartMs: number;
  /** Start of the window over which steady-state latency and hops are averaged. */
  readonly measureFromMs: number;
}

const STREAM_START_MS = 1000;
/** grow: the second viewer arrives this long after the start, and one more every interval. */
const GROW_FIRST_JOIN_MS = 10_000;
const GROW_JOIN_INTERVAL_MS = 2000;
/** grow: simulated time after the last join, by default. */
const GROW_SETTLE_MS = 30_000;

/**
 * `nodes` is the thesis's population: 5000 by default. `durationS` overrides the default length.
 */
export function planScenario(name: ScenarioName, nodes: number, durationS?: number): ScenarioPlan {
  const base = {
    name,
    initialMembers: nodes,
    joiners: 0,
    joinStartMs: 0,
    joinsPerSecond: 0,
    poissonJoinsPerSecond: 0,
    churnEndMs: 0,
    stay: null,
    burstFraction: 0,
    burstAtMs: 0,
    streamStartMs: STREAM_START_MS,
  };
  const withDuration = (
    defaultS: number,
    measureTailS: number,
  ): { durationMs: number; measureFromMs: number } => {
    const durationMs = Math.round((durationS ?? defaultS) * 1000);
    return { durationMs, measureFromMs: Math.max(STREAM_START_MS, durationMs - measureTailS * 1000) };
  };
  switch (name) {
    case 'static':
      // All members present from the start; the graph exists before the source starts (thesis §4.4, static scenario).
      return { ...base, ...withDuration(120, 20) };
    case 'join': {
      // 3750 present, 1250 join at 50/s from t = 20 s (thesis §4.4, join scenario): three quarters present.
      const initial = Math.round(nodes * 0.75);
      return {
        ...base,
        initialMembers: initial,
        joiners: nodes - initial,
        joinStartMs: 20_000,
        joinsPerSecond: 50,
        ...withDuration(200, 20),
      };
    }
    case 'burst10':
    case 'burst50': {
      // A fraction of the members fails at once "at the 30th instant" (thesis §4.4, Fig. 4.7(a)); we then watch 60 s.
      const plan = withDuration(90, 20);
      return {
        ...base,
        burstFraction: name === 'burst10' ? 0.1 : 0.5,
        burstAtMs: 30_000,
        ...plan,
        measureFromMs: 10_000,
      };
    }
    case 'grow': {
      // Not a thesis scenario: a stream that starts with one viewer, and the rest arrive one by one
      // through the rendezvous server (GROW_JOIN_INTERVAL_MS apart), then 30 s with all of them.
      // What it shows is how the true source's slice roots spread as the swarm grows (issue 16).
      const lastJoinMs = GROW_FIRST_JOIN_MS + (nodes - 2) * GROW_JOIN_INTERVAL_MS;
      const durationMs = Math.round(
        (durationS ?? Math.ceil((Math.max(lastJoinMs, 0) + GROW_SETTLE_MS) / 1000)) * 1000,
      );
      return {
        ...base,
        initialMembers: 1,
        joiners: nodes - 1,
        joinStartMs: GROW_FIRST_JOIN_MS,
        joinsPerSecond: 1000 / GROW_JOIN_INTERVAL_MS,
        durationMs,
        measureFromMs: Math.max(STREAM_START_MS, durationMs - 20_000),
      };
    }
    case 'churn': {
      // Poisson 10 joins/s, Pareto stay (min 90 s, mean 300 s), 1000 s of churn + 200 s settling
      // (thesis §4.4, churn scenario). The join rate is the thesis's for 5000 members and scales with the population,
      // so a small run churns at the same relative rate.
      const durationMs = Math.round((durationS ?? 1200) * 1000);
      const churnEndMs = Math.min(1_000_000, Math.round(durationMs * (1000 / 1200)));
      return {
        ...base,
        poissonJoinsPerSecond: (10 * nodes) / 5000,
        churnEndMs,
        stay: { minMs: 90_000, meanMs: 300_000 },
        durationMs,
        measureFromMs: Math.max(STREAM_START_MS, durationMs - 20_000),
      };
    }
  }
}
