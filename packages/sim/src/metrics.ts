import type { BanSummary, AdversarySpec, AdversarySummary } from './adversaries.js';
import { DEFAULT_PROTOCOL } from '@chunkycast/engine';
import {
  NOT_RECEIVED,
  VIA_ORIGIN,
  VIA_PARITY,
  VIA_REPAIR,
  VIA_TREE,
  type MemberRecord,
  type SecondSample,
  type SimResult,
} from './measurement.js';
import { percentile } from './stats.js';
import { PACKET_LIFE_MS, productionDelay, type ProductionWindow } from './production.js';
import { DEFAULT_SEGMENT_MS } from './simulation.js';

/** The run's figures, in the shape other tools read (`summary.json`); keep field names stable. */
export interface Summary {
  scenario: string;
  nodes: number;
  seed: number;
  lat: number;
  simSeconds: number;
  wallSeconds: number;
  events: number;
  /**
   * Messages sent and how many of them crossed the codec: with `sampleEvery` > 1 (`--codec-sample`)
   * only one in that many was encoded and decoded.
   */
  codec: { sampleEvery: number; messages: number; encoded: number };
  packetsPerSlicePerSecond: number;
  protocolOverrides: Record<string, number>;
  membersAtEnd: number;
  load: {
    withinRangeFraction: number;
    within25PctFraction: number;
    atTargetFraction: number;
    maxExcessPct: number;
    p95ExcessPct: number;
    minExcessPct: number;
  };
  latency: {
    p90MaxNormalized: number;
    p90AvgNormalized: number;
    medianNetworkLatencyMs: number;
    p90MaxMs: number;
    p90AvgMs: number;
  };
  stretch: { fractionWithin1to2: number; median: number };
  /** Per member, the most hops over its slices, counted from the true source (the slice source is 1). */
  hops: { p90Max: number; max: number; p90MaxBelowSliceSource: number };
  startup: {
    p90Seconds: number;
    medianSeconds: number;
    maxSeconds: number;
    neverCompletedFraction: number;
    population: string;
  };
  convergence: {
    seconds: number;
    withinRange90Seconds: number | null;
    switches99Seconds: number;
    /** The last second with a load switch, and with a latency switch (null: none in the run). */
    lastLoadSwitchSeconds: number | null;
    lastLatencySwitchSeconds: number | null;
  };
  recovery: {
    p90Seconds: number;
    maxSeconds: number;
    p90FromFailureSeconds: number;
    maxFromFailureSeconds: number;
    affectedFraction: number;
    failedMembers: number;
  } | null;
  overhead: {
    peakMsgsPerNodePerSecMax: number;
    peakMsgsPerNodePerSecP95: number;
    peakMsgsPerNodePerSecMedian: number;
    controlBytesPerNodePerSec: number;
    switchesPerNodeTotal: { load: number; latency: number; forced: number };
    failedSwitchRequestFraction: number;
  };
  delivery: {
    packetsDeliveredFraction: number;
    duplicateFraction: number;
    uplinkDrops: number;
    linkLosses: number;
  };
  disruption: {
    p90SecondsPerSlice0sBuffer: number;
    p90SecondsPerSlice5sBuffer: number;
    undisruptedSliceFraction5sBuffer: number;
  };
  /**
   * Every packet a playing member needed (play time from its start of playback to its departure or
   * the run's end), by how it first arrived; `missed` = not there by its play time. The playout
   * delay is fixed per member: its slowest first packet's delay plus `bufferMs`.
   */
  playback: {
    bufferMs: number;
    packets: number;
    tree: number;
    repair: number;
    origin: number;
    parity: number;
    missed: number;
    /** Of the missed: never arrived at all (the rest came too late). */
    missedNeverArrived: number;
    onTimeFraction: number;
    /** Members with at least one missed packet. */
    membersWithMisses: number;
    members: number;
  };
  repair: {
    packetsMissing: number;
    requestsSent: number;
    packetsRequested: number;
    packetsReceived: number;
    naksNotHeld: number;
    naksBusy: number;
    naksPending: number;
    timeouts: number;
    packetsServed: number;
    refusedBusy: number;
    unsolicitedDropped: number;
    expired: number;
    /** Missing → arrival, ms, over repaired packets (and over origin fetches). */
    latencyMs: { p50: number; p90: number; p99: number; max: number; count: number };
    originLatencyMs: { p50: number; p90: number; p99: number; max: number; count: number };
    /** Copies received of packets already held (tree duplicates, late repairs and origin copies) ÷ unique. */
    duplicateFraction: number;
  };
  parity: {
    mode: string;
    /** Upload spent on real parity ÷ upload on data packets (empty parity packets count as 0). */
    uploadShare: number;
    stripesActive: number;
    stripesIdle: number;
    recovered: number;
    errors: number;
    switches: { t: number; active: boolean }[];
    measuredLossMean: number;
    measuredLossMax: number;
  };
  origin: {
    requests: number;
    packets: number;
    bytes: number;
    /** Origin bytes ÷ (packets needed × packet size): the share of the stream × audience. */
    shareOfAudienceBytes: number;
  };
  loops: { detected: number };
  /**
   * Write → receive: from the packager finishing a packet to members holding it (see
   * production.ts for which members count), over the whole stream and over the steady-state
   * window the latency figures use. `segmentMs` is null under progressive production.
   */
  production: {
    mode: 'progressive' | 'segment';
    segmentMs: number | null;
    packetLifeMs: number;
    all: ProductionWindow;
    steady: ProductionWindow;
  };
  /**
   * With hostile members (--adversaries): every other figure is of the honest members only; this
   * says what the attackers got away with. Origin share: packets honest members asked the origin
   * for ÷ packets they needed.
   */
  adversaries?: AdversarySummary & {
    specs: readonly AdversarySpec[];
    honestMembers: number;
    hostileMembers: number;
    honestOriginShare: number;
    rendezvousBan: BanSummary;
  };
  /**
   * How the data slices' roots are spread over the members (the true source's view, sampled each
   * second): at each population size of ROOT_SPREAD_SIZES (and the largest) the last sample taken
   * at that size, and the roots the true source moved (rootSpreadIntervalMs).
   */
  roots: {
    bySize: RootSpread[];
    moves: number;
  };
  health: {
    decodeErrors: number;
    protocolViolations: number;
    sliceSourceChanges: number;
    strayPackets: number;
    latePackets: number;
  };
}

/** The root spread at one population size. */
export interface RootSpread {
  readonly members: number;
  /** Seconds since the run's start of the sample. */
  readonly atSeconds: number;
  readonly distinctRoots: number;
  readonly maxSlicesPerRoot: number;
}

/** Population sizes whose root spread the summary reports (issue 16: 1, 4, 16 and 100 members). */
const ROOT_SPREAD_SIZES: readonly number[] = [1, 4, 16, 100];

/** The last sample at each size of ROOT_SPREAD_SIZES and at the largest size sampled. */
export function rootSpreadBySize(samples: readonly SecondSample[]): RootSpread[] {
  let largest = 0;
  for (const s of samples) largest = Math.max(largest, s.alive);
  const sizes = [...new Set([...ROOT_SPREAD_SIZES, largest])].filter((n) => n > 0).sort((a, b) => a - b);
  const out: RootSpread[] = [];
  for (const size of sizes) {
    let last: SecondSample | undefined;
    for (const s of samples) if (s.alive === size) last = s;
    if (last === undefined) continue;
    out.push({
      members: size,
      atSeconds: round(last.t / 1000, 0),
      distinctRoots: last.distinctRoots,
      maxSlicesPerRoot: last.maxSlicesPerRoot,
    });
  }
  return out;
}

/** Series behind the plots. */
export interface Distributions {
  excessLoadPct: number[];
  maxLatencyNormalized: number[];
  avgLatencyNormalized: number[];
  stretch: number[];
  maxHops: number[];
  startupSeconds: number[];
  recoverySeconds: number[];
  recoveryFromFailureSeconds: number[];
  disruption0s: number[];
  disruption5s: number[];
  repairLatencyMs: number[];
  originLatencyMs: number[];
}

/** Max without spreading (arrays here can exceed the engine's argument limit). */
function maxOf(values: readonly number[], floor: number): number {
  let m = floor;
  for (const v of values) if (v > m) m = v;
  return m;
}

function minOf(values: readonly number[], ceiling: number): number {
  let m = ceiling;
  for (const v of values) if (v < m) m = v;
  return m;
}

function round(value: number, digits = 4): number {
  if (!Number.isFinite(value)) return value;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

function p(values: number[], q: number): number {
  return values.length === 0 ? 0 : percentile(values, q);
}

/** First sequence number of `slice` emitted at or after `t` (emission times are increasing). */
function seqAtOrAfter(times: Float64Array, emitted: number, t: number): number {
  let lo = 0;
  let hi = emitted;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const v = times[mid] ?? Number.NaN;
    if (Number.isNaN(v) || v < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function delayOf(m: MemberRecord, slice: number, seq: number): number {
  if (seq < m.baseSeq) return NOT_RECEIVED;
  return m.delays[slice]?.[seq - m.baseSeq] ?? NOT_RECEIVED;
}

function viaOf(m: MemberRecord, slice: number, seq: number): number {
  if (seq < m.baseSeq) return 0;
  return m.via[slice]?.[seq - m.baseSeq] ?? 0;
}

function latencySummary(values: number[]): {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  count: number;
} {
  return {
    p50: round(p(values, 50), 1),
    p90: round(p(values, 90), 1),
    p99: round(p(values, 99), 1),
    max: round(maxOf(values, 0), 1),
    count: values.length,
  };
}

/** How each needed packet reached each playing member, against its play time (see Summary.playback). */
function playbackBreakdown(result: SimResult, end: number): Summary['playback'] {
  const out: Summary['playback'] = {
    bufferMs: result.playbackBufferMs,
    packets: 0,
    tree: 0,
    repair: 0,
    origin: 0,
    parity: 0,
    missed: 0,
    missedNeverArrived: 0,
    onTimeFraction: 1,
    membersWithMisses: 0,
    members: 0,
  };
  for (const m of result.members) {
    const delay = m.playoutDelayMs;
    if (Number.isNaN(delay)) continue;
    const until = Math.min(m.leftAt, end);
    if (until <= m.playFromMs) continue;
    out.members++;
    let missedHere = 0;
    for (let s = 0; s < result.slices; s++) {
      const times = result.emitTimes[s];
      if (times === undefined) continue;
      const emitted = result.emittedPerSlice[s] ?? 0;
      const a = seqAtOrAfter(times, emitted, m.playFromMs - delay);
      const b = seqAtOrAfter(times, emitted, until - delay);
      for (let k = a; k < b; k++) {
        out.packets++;
        const d = delayOf(m, s, k);
        // Delays are logged in whole ms: allow the rounding.
        if (d === NOT_RECEIVED || d > delay + 1) {
          missedHere++;
          if (d === NOT_RECEIVED) out.missedNeverArrived++;
          continue;
        }
        const v = viaOf(m, s, k);
        if (v === VIA_TREE) out.tree++;
        else if (v === VIA_REPAIR) out.repair++;
        else if (v === VIA_ORIGIN) out.origin++;
        else if (v === VIA_PARITY) out.parity++;
      }
    }
    out.missed += missedHere;
    if (missedHere > 0) out.membersWithMisses++;
  }
  out.onTimeFraction = round(1 - out.missed / Math.max(1, out.packets), 6);
  return out;
}

/** Shortest overlay latency from the true source to every member (Dijkstra over the final neighbour graph). */
function overlayDistances(result: SimResult): Map<number, number> {
  const dist = new Map<number, number>();
  const heap: [number, number][] = [];
  const push = (d: number, id: number): void => {
    heap.push([d, id]);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((heap[parent]?.[0] ?? 0) <= d) break;
      const tmp = heap[parent] as [number, number];
      heap[parent] = heap[i] as [number, number];
      heap[i] = tmp;
      i = parent;
    }
  };
  const pop = (): [number, number] | undefined => {
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last !== undefined) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && (heap[l]?.[0] ?? 0) < (heap[m]?.[0] ?? 0)) m = l;
        if (r < heap.length && (heap[r]?.[0] ?? 0) < (heap[m]?.[0] ?? 0)) m = r;
        if (m === i) break;
        const tmp = heap[m] as [number, number];
        heap[m] = heap[i] as [number, number];
        heap[i] = tmp;
        i = m;
      }
    }
    return top;
  };
  for (const s of result.sourceNeighbours) push(result.latency.latencyMs(0, s), s);
  for (;;) {
    const top = pop();
    if (top === undefined) break;
    const [d, id] = top;
    if (dist.has(id)) continue;
    dist.set(id, d);
    for (const n of result.overlayNeighbours.get(id) ?? []) {
      if (!dist.has(n) && result.overlayNeighbours.has(n)) push(d + result.latency.latencyMs(id, n), n);
    }
  }
  return dist;
}

export function summarize(
  result: SimResult,
  scenario: string,
  nodes: number,
): { summary: Summary; distributions: Distributions } {
  const o = result.options;
  const plan = o.plan;
  const slices = result.slices;
  const end = plan.durationMs;
  const T = result.packetIntervalMs;
  const timeout = o.protocol.failureTimeoutMs ?? DEFAULT_PROTOCOL.failureTimeoutMs;
  const survivors = result.members.filter((m) => m.leftAt === Infinity);
  const median = Math.max(1, result.medianLatencyMs);

  // Load at the end (thesis §4.4, Fig. 4.2(a)): excess = (load − TL)/TL.
  const excess: number[] = [];
  let within = 0;
  let within25 = 0;
  let atTarget = 0;
  for (const m of survivors) {
    const load = m.finalLoad;
    if (m.targetLoad > 0) excess.push((100 * (load - m.targetLoad)) / m.targetLoad);
    if (load >= m.lowerLatencyThreshold && load <= m.upperLatencyThreshold) within++;
    if (Math.abs(load - m.targetLoad) <= 0.25 * m.targetLoad) within25++;
    if (load === m.targetLoad) atTarget++;
  }
  const nSurv = Math.max(1, survivors.length);

  // Latency over the measurement window: per member, the average and the max over its slices.
  const maxLat: number[] = [];
  const avgLat: number[] = [];
  const maxHops: number[] = [];
  const stretch: number[] = [];
  const overlay = overlayDistances(result);
  for (const m of survivors) {
    let maxMs = 0;
    let sumMs = 0;
    let complete = true;
    for (let s = 0; s < slices; s++) {
      const c = m.measureCount[s] ?? 0;
      if (c === 0) {
        complete = false;
        break;
      }
      const avg = (m.measureSum[s] ?? 0) / c;
      maxMs = Math.max(maxMs, avg);
      sumMs += avg;
    }
    if (!complete) continue;
    maxLat.push(maxMs / median);
    avgLat.push(sumMs / slices / median);
    let h = 0;
    for (let s = 0; s < slices; s++) h = Math.max(h, (m.hops[s] ?? 0) + 1);
    maxHops.push(h);
    const d = overlay.get(m.id);
    if (d !== undefined && d > 0) stretch.push(sumMs / slices / d);
  }

  // Startup: join → all slices (thesis §4.4, Fig. 4.3(b)). Joiners in `join`/`churn`, everyone else from the stream start.
  const startupPopulation =
    plan.joiners > 0 || plan.poissonJoinsPerSecond > 0
      ? result.members.filter((m) => m.joinedAt > 0)
      : result.members;
  const startup: number[] = [];
  let never = 0;
  for (const m of startupPopulation) {
    const lifetimeEnd = Math.min(m.leftAt, end);
    if (lifetimeEnd - m.startupFrom < 30_000) continue; // too short-lived to judge
    if (m.completeAt === Infinity) never++;
    else startup.push((m.completeAt - m.startupFrom) / 1000);
  }

  // Convergence: time of the last successful load or latency switch (thesis §4.4, time to convergence, Fig. 4.5).
  let lastSwitch = plan.streamStartMs;
  for (const m of result.members)
    lastSwitch = Math.max(lastSwitch, m.finalCounters?.lastOptimisingSwitchAt ?? -Infinity);
  // A steadier companion: when 99% of all load and latency switches had happened.
  let totalSwitches = 0;
  for (const sample of result.samples) totalSwitches += sample.optimisingSwitches;
  let cumulative = 0;
  let switches99 = 0;
  for (const sample of result.samples) {
    cumulative += sample.optimisingSwitches;
    if (cumulative >= 0.99 * totalSwitches) {
      switches99 = (sample.t - plan.streamStartMs) / 1000;
      break;
    }
  }
  // Which phase switched last, to the second: the latency phase, or the load phase answering it.
  let lastLoadSwitch: number | null = null;
  let lastLatencySwitch: number | null = null;
  for (const sample of result.samples) {
    const second = (sample.t - plan.streamStartMs) / 1000;
    if (sample.latencySwitches > 0) lastLatencySwitch = second;
    if (sample.optimisingSwitches > sample.latencySwitches) lastLoadSwitch = second;
  }
  let withinRange90: number | null = null;
  for (let i = result.samples.length - 1; i >= 0; i--) {
    const sample = result.samples[i];
    if (sample === undefined || sample.withinRangeFraction < 0.9) break;
    withinRange90 = (sample.t - plan.streamStartMs) / 1000;
  }

  // Delivery and duplicates.
  let expected = 0;
  let delivered = 0;
  let duplicates = 0;
  let uniqueDelivered = 0;
  let loops = 0;
  let repairDuplicates = 0;
  let parityRecovered = 0;
  let parityErrors = 0;
  const repairTotals = {
    packetsMissing: 0,
    requestsSent: 0,
    packetsRequested: 0,
    packetsReceived: 0,
    naksNotHeld: 0,
    naksBusy: 0,
    naksPending: 0,
    timeouts: 0,
    packetsServed: 0,
    refusedBusy: 0,
    unsolicitedDropped: 0,
    expired: 0,
  };
  let stray = 0;
  let late = 0;
  const switches = { load: 0, latency: 0, forced: 0 };
  let rejections = 0;
  for (const m of result.members) {
    const r = m.finalRepair;
    if (r !== null) {
      repairDuplicates += r.duplicatesRepaired + r.repairPacketsUnsolicited;
      parityRecovered += r.parityRecovered;
      parityErrors += r.parityErrors;
      repairTotals.packetsMissing += r.packetsMissing;
      repairTotals.requestsSent += r.repairRequestsSent;
      repairTotals.packetsRequested += r.repairPacketsRequested;
      repairTotals.packetsReceived += r.repairPacketsReceived;
      repairTotals.naksNotHeld += r.repairNaksNotHeld;
      repairTotals.naksBusy += r.repairNaksBusy;
      repairTotals.naksPending += r.repairNaksPending;
      repairTotals.timeouts += r.repairTimeouts;
      repairTotals.packetsServed += r.repairPacketsServed;
      repairTotals.refusedBusy += r.repairPacketsRefusedBusy;
      repairTotals.unsolicitedDropped += r.repairPacketsUnsolicited;
      repairTotals.expired += r.packetsExpired;
    }
    const c = m.finalCounters;
    if (c !== null) {
      duplicates += c.duplicatePackets;
      uniqueDelivered += c.packetsDelivered;
      loops += c.loopsDetected;
      stray += c.strayPackets;
      late += c.latePackets;
      switches.load += c.switchesLoad;
      switches.latency += c.switchesLatency;
      switches.forced += c.switchesForced;
      rejections += c.switchRejections;
    }
    const from = m.completeAt !== Infinity ? m.completeAt : m.startupFrom + 10_000;
    const to = Math.min(m.leftAt, end) - 5000;
    if (to <= from) continue;
    for (let s = 0; s < slices; s++) {
      const times = result.emitTimes[s];
      const emitted = result.emittedPerSlice[s] ?? 0;
      if (times === undefined) continue;
      const a = seqAtOrAfter(times, emitted, from);
      const b = seqAtOrAfter(times, emitted, to);
      for (let k = a; k < b; k++) {
        expected++;
        if (delayOf(m, s, k) !== NOT_RECEIVED) delivered++;
      }
    }
  }

  // Playback disruption per slice with a 0 s and a 5 s buffer (thesis §4.4, Fig. 4.8(a)), replayed from packet delays.
  const disruption0: number[] = [];
  const disruption5: number[] = [];
  for (const m of result.members) {
    if (m.completeAt === Infinity) continue;
    const to = Math.min(m.leftAt, end) - 5000;
    for (let s = 0; s < slices; s++) {
      const base = m.firstSeq[s] ?? -1;
      const times = result.emitTimes[s];
      if (base < 0 || times === undefined) continue;
      const last = seqAtOrAfter(times, result.emittedPerSlice[s] ?? 0, to);
      for (const [bufferMs, out] of [
        [0, disruption0],
        [5000, disruption5],
      ] as const) {
        let playout = (delayOf(m, s, base) === NOT_RECEIVED ? 0 : delayOf(m, s, base)) + bufferMs;
        let disrupted = 0;
        for (let k = base; k < last; k++) {
          const d = delayOf(m, s, k);
          if (d === NOT_RECEIVED) disrupted += T;
          else if (d > playout) {
            disrupted += d - playout;
            playout = d;
          }
        }
        out.push(disrupted / 1000);
      }
    }
  }

  // Recovery after a burst (thesis §4.4, Fig. 4.7(a, b)): gaps in fresh packets after the failure, per member, across slices.
  let recovery: Summary['recovery'] = null;
  const recoverySeconds: number[] = [];
  const recoveryFromFailure: number[] = [];
  if (plan.burstFraction > 0) {
    const burstAt = plan.burstAtMs;
    const detectAt = burstAt + timeout;
    const windowEnd = end - 5000;
    const slack = Math.max(500, T);
    let affected = 0;
    let population = 0;
    for (const m of survivors) {
      if (m.joinedAt >= burstAt || m.completeAt > burstAt) continue;
      population++;
      const intervals: [number, number][] = [];
      for (let s = 0; s < slices; s++) {
        const times = result.emitTimes[s];
        if (times === undefined) continue;
        const emitted = result.emittedPerSlice[s] ?? 0;
        const a = seqAtOrAfter(times, emitted, burstAt - 3000);
        const b = seqAtOrAfter(times, emitted, windowEnd);
        const arrivals: number[] = [];
        for (let k = a; k < b; k++) {
          const d = delayOf(m, s, k);
          if (d !== NOT_RECEIVED) arrivals.push((times[k] ?? 0) + d);
        }
        arrivals.sort((x, y) => x - y);
        let prev = burstAt - 3000;
        for (const t of arrivals) {
          if (t - prev > T + slack) intervals.push([prev + T, t]);
          prev = t;
        }
        if (windowEnd - prev > T + slack) intervals.push([prev + T, windowEnd]);
      }
      // Only disconnections the burst caused: those that began before the failure could even be
      // detected (one timeout plus a second for the data in flight). Later gaps come from the
      // switching that follows and are counted as playback disruption, not recovery.
      const causeLimit = burstAt + timeout + 1000;
      const clipped = intervals
        .filter(([a, b]) => b > burstAt && a < causeLimit)
        .map(([a, b]): [number, number] => [Math.max(a, burstAt), b]);
      clipped.sort((x, y) => x[0] - y[0]);
      let totalFromFailure = 0;
      let totalFromDetection = 0;
      let curA = -1;
      let curB = -1;
      const flush = (): void => {
        if (curB <= curA) return;
        totalFromFailure += curB - curA;
        totalFromDetection += Math.max(0, curB - Math.max(curA, detectAt));
      };
      for (const [a, b] of clipped) {
        if (a > curB) {
          flush();
          curA = a;
          curB = b;
        } else curB = Math.max(curB, b);
      }
      flush();
      if (totalFromFailure > 0) affected++;
      recoverySeconds.push(totalFromDetection / 1000);
      recoveryFromFailure.push(totalFromFailure / 1000);
    }
    recovery = {
      p90Seconds: round(p(recoverySeconds, 90), 3),
      maxSeconds: round(maxOf(recoverySeconds, 0), 3),
      p90FromFailureSeconds: round(p(recoveryFromFailure, 90), 3),
      maxFromFailureSeconds: round(maxOf(recoveryFromFailure, 0), 3),
      affectedFraction: round(affected / Math.max(1, population)),
      failedMembers: result.members.filter((m) => m.leftAt === burstAt).length,
    };
  }

  let peakMax = 0;
  let peakP95 = 0;
  let peakMedian = 0;
  let nodeSeconds = 0;
  for (const s of result.samples) {
    peakMax = Math.max(peakMax, s.switchMsgsMax);
    peakP95 = Math.max(peakP95, s.switchMsgsP95);
    peakMedian = Math.max(peakMedian, s.switchMsgsMedian);
    nodeSeconds += s.alive;
  }
  let controlBytes = 0;
  for (const m of result.members) controlBytes += m.controlBytesSent;
  const switchRequests = switches.load + switches.latency + switches.forced + rejections;

  const overrides: Record<string, number> = {};
  for (const [k, v] of Object.entries(o.protocol)) if (typeof v === 'number') overrides[k] = v;

  const playback = playbackBreakdown(result, end);
  const repairLatency = [...result.repairLatencyMs];
  const originLatency = [...result.originLatencyMs];
  const summary: Summary = {
    scenario,
    nodes,
    seed: o.seed,
    lat: o.lat,
    simSeconds: result.simMs / 1000,
    wallSeconds: round(result.wallMs / 1000, 2),
    events: result.events,
    codec: { ...result.codec },
    packetsPerSlicePerSecond: o.packetsPerSlicePerSecond,
    protocolOverrides: overrides,
    membersAtEnd: survivors.length,
    load: {
      withinRangeFraction: round(within / nSurv),
      within25PctFraction: round(within25 / nSurv),
      atTargetFraction: round(atTarget / nSurv),
      maxExcessPct: round(maxOf(excess, 0), 2),
      p95ExcessPct: round(p(excess, 95), 2),
      minExcessPct: round(minOf(excess, 0), 2),
    },
    latency: {
      p90MaxNormalized: round(p(maxLat, 90), 3),
      p90AvgNormalized: round(p(avgLat, 90), 3),
      medianNetworkLatencyMs: median,
      p90MaxMs: round(p(maxLat, 90) * median, 1),
      p90AvgMs: round(p(avgLat, 90) * median, 1),
    },
    stretch: {
      fractionWithin1to2: round(stretch.filter((x) => x >= 1 && x <= 2).length / Math.max(1, stretch.length)),
      median: round(p(stretch, 50), 3),
    },
    hops: { p90Max: p(maxHops, 90), max: maxOf(maxHops, 0), p90MaxBelowSliceSource: p(maxHops, 90) - 1 },
    startup: {
      p90Seconds: round(p(startup, 90), 3),
      medianSeconds: round(p(startup, 50), 3),
      maxSeconds: round(maxOf(startup, 0), 3),
      neverCompletedFraction: round(never / Math.max(1, startup.length + never)),
      population:
        plan.joiners > 0 || plan.poissonJoinsPerSecond > 0 ? 'joiners' : 'all members, from the stream start',
    },
    convergence: {
      seconds: round((lastSwitch - plan.streamStartMs) / 1000, 1),
      withinRange90Seconds: withinRange90,
      switches99Seconds: switches99,
      lastLoadSwitchSeconds: lastLoadSwitch,
      lastLatencySwitchSeconds: lastLatencySwitch,
    },
    recovery,
    overhead: {
      peakMsgsPerNodePerSecMax: peakMax,
      peakMsgsPerNodePerSecP95: peakP95,
      peakMsgsPerNodePerSecMedian: peakMedian,
      controlBytesPerNodePerSec: round(controlBytes / Math.max(1, nodeSeconds), 1),
      switchesPerNodeTotal: {
        load: round(switches.load / Math.max(1, result.members.length), 2),
        latency: round(switches.latency / Math.max(1, result.members.length), 2),
        forced: round(switches.forced / Math.max(1, result.members.length), 2),
      },
      failedSwitchRequestFraction: round(rejections / Math.max(1, switchRequests)),
    },
    delivery: {
      packetsDeliveredFraction: round(delivered / Math.max(1, expected), 6),
      duplicateFraction: round(duplicates / Math.max(1, uniqueDelivered), 6),
      uplinkDrops: result.dataPacketsDroppedUplink,
      linkLosses: result.dataPacketsLost,
    },
    disruption: {
      p90SecondsPerSlice0sBuffer: round(p(disruption0, 90), 3),
      p90SecondsPerSlice5sBuffer: round(p(disruption5, 90), 3),
      undisruptedSliceFraction5sBuffer: round(
        disruption5.filter((x) => x === 0).length / Math.max(1, disruption5.length),
      ),
    },
    playback,
    repair: {
      ...repairTotals,
      latencyMs: latencySummary(repairLatency),
      originLatencyMs: latencySummary(originLatency),
      duplicateFraction: round((duplicates + repairDuplicates) / Math.max(1, uniqueDelivered), 6),
    },
    parity: {
      mode: result.parity.mode,
      uploadShare: round(
        result.parity.activeTransmissions /
          Math.max(
            1,
            result.dataPacketsSent -
              result.parity.activeTransmissions -
              result.parity.idleTransmissions -
              result.repairPacketsSent,
          ),
        6,
      ),
      stripesActive: result.parity.stripesActive,
      stripesIdle: result.parity.stripesIdle,
      recovered: parityRecovered,
      errors: parityErrors,
      switches: result.parity.switches.map((x) => ({ t: x.t / 1000, active: x.active })),
      measuredLossMean: round(
        result.parity.measuredLoss.reduce((a, b) => a + b, 0) /
          Math.max(1, result.parity.measuredLoss.length),
        6,
      ),
      measuredLossMax: round(maxOf([...result.parity.measuredLoss], 0), 6),
    },
    origin: {
      requests: result.originRequests,
      packets: result.originPackets,
      bytes: result.originBytes,
      shareOfAudienceBytes: round(result.originBytes / Math.max(1, playback.packets * result.packetBytes), 6),
    },
    loops: { detected: loops },
    production: {
      mode: o.production ?? 'progressive',
      segmentMs: o.production === 'segment' ? (o.segmentMs ?? DEFAULT_SEGMENT_MS) : null,
      packetLifeMs: PACKET_LIFE_MS,
      all: productionDelay(result, plan.streamStartMs, end),
      steady: productionDelay(result, plan.measureFromMs, end),
    },
    roots: { bySize: rootSpreadBySize(result.samples), moves: result.rootsSpread },
    health: {
      decodeErrors: result.decodeErrors,
      protocolViolations: result.protocolViolations,
      sliceSourceChanges: result.sliceSourceChanges,
      strayPackets: stray,
      latePackets: late,
    },
  };
  return {
    summary,
    distributions: {
      excessLoadPct: excess,
      maxLatencyNormalized: maxLat,
      avgLatencyNormalized: avgLat,
      stretch,
      maxHops,
      startupSeconds: startup,
      recoverySeconds,
      recoveryFromFailureSeconds: recoveryFromFailure,
      disruption0s: disruption0,
      disruption5s: disruption5,
      repairLatencyMs: repairLatency,
      originLatencyMs: originLatency,
    },
  };
}
