import { DEFAULT_PROTOCOL, type ProtocolConfig } from '@chunkycast/engine';
import { summarizeAdversaries, summarizeBans, type AdversarySpec } from './adversaries.js';
import { summarize, type Distributions, type Summary } from './metrics.js';
import { planScenario, SCENARIO_NAMES, type ScenarioName } from './scenarios.js';
import type { SimResult } from './measurement.js';
import { DEFAULT_SEGMENT_MS, Simulation, checkProtocolOverrides, type SimProgress } from './simulation.js';

/** Everything `npm run sim` accepts, with defaults. */
export interface RunOptions {
  scenario: ScenarioName;
  nodes: number;
  seed: number;
  lat: 0 | 2;
  durationS?: number;
  packetsPerSlicePerSecond: number;
  streamKbps: number;
  uplinkHeadroom: number;
  dataLoss: number;
  lossModel: 'gilbert' | 'bernoulli';
  lossBurstPackets: number;
  lossAt: 'all' | 'sources';
  playbackBufferMs: number;
  parity: 'off' | 'auto' | 'on';
  gracefulLeaveFraction: number;
  /** When the true source publishes the packager's packets: as written, or per segment at its end. */
  production: 'progressive' | 'segment';
  /** Segment duration for segment production (ms). */
  segmentMs: number;
  protocol: Partial<ProtocolConfig>;
  /** Hostile members (issue 18's red team): the summary is then of the honest members only. */
  adversaries?: readonly AdversarySpec[];
  /** The rendezvous bans a peer several members cut off (default on, as the tracker). */
  rendezvousBan?: boolean;
  /** One message in this many crosses the codec (default 1, all; `--codec-sample`). */
  codecSampleEvery?: number;
  onProgress?: (progress: SimProgress) => void;
  wallClockMs?: () => number;
}

export const DEFAULT_RUN: Omit<RunOptions, 'scenario'> = {
  nodes: 5000,
  seed: 1,
  lat: 2,
  packetsPerSlicePerSecond: 2,
  streamKbps: 1024,
  uplinkHeadroom: 1.1,
  dataLoss: 0,
  lossModel: 'gilbert',
  lossBurstPackets: 4,
  lossAt: 'all',
  playbackBufferMs: 5000,
  parity: 'off',
  gracefulLeaveFraction: 0,
  production: 'progressive',
  segmentMs: DEFAULT_SEGMENT_MS,
  protocol: {},
};

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export function isScenario(name: string): name is ScenarioName {
  return (SCENARIO_NAMES as readonly string[]).includes(name);
}

export function isProtocolKey(key: string): key is keyof ProtocolConfig {
  return Object.hasOwn(DEFAULT_PROTOCOL, key);
}

export interface RunOutput {
  readonly result: SimResult;
  readonly summary: Summary;
  readonly distributions: Distributions;
}

/** Run one scenario to completion and summarise it. */
export function runScenario(options: RunOptions): RunOutput {
  if (!Number.isInteger(options.nodes) || options.nodes < 2)
    throw new UsageError(`--nodes must be an integer ≥ 2, got ${options.nodes}`);
  const lat: number = options.lat; // callers may pass unchecked values
  if (lat !== 0 && lat !== 2) throw new UsageError(`--lat must be 0 or 2`);
  checkProtocolOverrides({ ...options.protocol, latencyRangeFraction: options.lat / 16 });
  const plan = planScenario(options.scenario, options.nodes, options.durationS);
  const sim = new Simulation({
    plan,
    seed: options.seed,
    lat: options.lat,
    packetsPerSlicePerSecond: options.packetsPerSlicePerSecond,
    streamKbps: options.streamKbps,
    uplinkHeadroom: options.uplinkHeadroom,
    dataLoss: options.dataLoss,
    lossModel: options.lossModel,
    lossBurstPackets: options.lossBurstPackets,
    lossAt: options.lossAt,
    playbackBufferMs: options.playbackBufferMs,
    parity: options.parity,
    gracefulLeaveFraction: options.gracefulLeaveFraction,
    production: options.production,
    segmentMs: options.segmentMs,
    targetLoadMin: 4,
    targetLoadMax: 28,
    protocol: options.protocol,
    ...(options.adversaries !== undefined ? { adversaries: options.adversaries } : {}),
    ...(options.rendezvousBan !== undefined ? { rendezvousBan: options.rendezvousBan } : {}),
    ...(options.codecSampleEvery !== undefined ? { codecSampleEvery: options.codecSampleEvery } : {}),
    ...(options.onProgress !== undefined ? { onProgress: options.onProgress } : {}),
    ...(options.wallClockMs !== undefined ? { wallClockMs: options.wallClockMs } : {}),
  });
  const result = sim.run();
  const specs = options.adversaries ?? [];
  if (specs.length === 0) {
    const { summary, distributions } = summarize(result, options.scenario, options.nodes);
    return { result, summary, distributions };
  }
  // Everything measured of members is of the honest ones: what the attackers did to them.
  const honest = result.members.filter((m) => m.hostile === null);
  const { summary, distributions } = summarize(
    { ...result, members: honest },
    options.scenario,
    options.nodes,
  );
  const originPackets = honest.reduce((sum, m) => sum + m.originPacketsFetched, 0);
  summary.adversaries = {
    specs,
    honestMembers: honest.length,
    hostileMembers: result.members.length - honest.length,
    honestOriginShare: Math.round((originPackets / Math.max(1, summary.playback.packets)) * 1e6) / 1e6,
    ...summarizeAdversaries(result.members, result.cutOffs, result.honestAccusations, result.simMs),
    rendezvousBan: summarizeBans(result, options.rendezvousBan !== false),
  };
  return { result, summary, distributions };
}
