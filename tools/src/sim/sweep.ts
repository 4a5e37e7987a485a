#!/usr/bin/env node
/**
 * `npm run sweep`: the effect of each protocol value the thesis leaves open. For every parameter,
 * the same seeded scenario runs with a few values (ours in the middle) and the metrics that value is
 * about are tabulated. Writes OUT/sweep.json and OUT/sweep.md.
 *
 *   npm run sweep -- [--nodes 500] [--seconds 90] [--out docs/results/sweeps] [--only name,name]
 */
import { DEFAULT_PROTOCOL, type ProtocolConfig } from '@chunkycast/engine';
import { DEFAULT_RUN, runScenario, type ScenarioName, type Summary } from '@chunkycast/sim';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { numberOption, parseCommandLine, stringValue } from '../lib/args.js';

interface Sweep {
  readonly name: keyof ProtocolConfig;
  readonly values: readonly number[];
  readonly scenario: ScenarioName;
  readonly why: string;
  readonly columns: readonly [string, (s: Summary) => number | string][];
  /** Link loss for this sweep (default none) and its own simulated length (default --seconds). */
  readonly dataLoss?: number;
  readonly seconds?: number;
}

const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;
const common: [string, (s: Summary) => number | string][] = [
  ['in LLT–ULT', (s) => pct(s.load.withinRangeFraction)],
  [
    'p90 max / avg latency',
    (s) => `${s.latency.p90MaxNormalized.toFixed(2)} / ${s.latency.p90AvgNormalized.toFixed(2)}`,
  ],
  ['latency switches/member', (s) => s.overhead.switchesPerNodeTotal.latency],
  ['99% switches by (s)', (s) => s.convergence.switches99Seconds],
];

/** What repair costs and buys (issue 4). */
const repairColumns: [string, (s: Summary) => number | string][] = [
  ['missed deadlines', (s) => s.playback.missed],
  ['repair upload ÷ stream', (s) => pct(s.repair.packetsServed / Math.max(1, s.playback.packets))],
  [
    'of it wasted (came after the packet)',
    (s) => pct(s.repair.unsolicitedDropped / Math.max(1, s.repair.packetsServed)),
  ],
  ['duplicates', (s) => pct(s.repair.duplicateFraction)],
  ['origin ÷ stream × audience', (s) => `${(100 * s.origin.shareOfAudienceBytes).toFixed(3)}%`],
  ['repair latency p50 / p90 (ms)', (s) => `${s.repair.latencyMs.p50} / ${s.repair.latencyMs.p90}`],
];

const SWEEPS: readonly Sweep[] = [
  {
    name: 'latencySwitchMarginMs',
    values: [40, 100, 200],
    scenario: 'static',
    why: 'latency gained vs switches made',
    columns: [...common, ['stretch in [1,2]', (s) => pct(s.stretch.fractionWithin1to2)]],
  },
  {
    name: 'offsetSmoothing',
    values: [0.05, 0.2, 0.5],
    scenario: 'static',
    why: 'how fast offsets follow a change vs their noise',
    columns: common,
  },
  {
    name: 'latencyBackoffMs',
    values: [1000, 5000, 20000],
    scenario: 'static',
    why: 'convergence vs how much latency is found',
    columns: common,
  },
  {
    name: 'candidateSetSize',
    values: [1, 3, 6],
    scenario: 'join',
    why: 'anti-implosion: failed requests vs choosing the best',
    columns: [
      ['failed switch requests', (s) => pct(s.overhead.failedSwitchRequestFraction)],
      ['in LLT–ULT', (s) => pct(s.load.withinRangeFraction)],
      ['p90 startup (s)', (s) => s.startup.p90Seconds],
      ['p90 max latency', (s) => s.latency.p90MaxNormalized.toFixed(2)],
    ],
  },
  {
    name: 'handoffLeadMs',
    values: [500, 2000, 4000],
    scenario: 'static',
    why: 'packets lost or doubled across a switch',
    columns: [
      ['delivered', (s) => pct(s.delivery.packetsDeliveredFraction)],
      ['duplicates', (s) => `${(100 * s.delivery.duplicateFraction).toFixed(3)}%`],
      ['disruption p90 0 s buffer (s)', (s) => s.disruption.p90SecondsPerSlice0sBuffer],
    ],
  },
  {
    name: 'switchAbortLoadDelta',
    values: [0, 1, 3],
    scenario: 'static',
    why: 'aborted latency switches vs overshooting ULT',
    columns: [
      ['failed switch requests', (s) => pct(s.overhead.failedSwitchRequestFraction)],
      ['in LLT–ULT', (s) => pct(s.load.withinRangeFraction)],
      ['max excess', (s) => `${s.load.maxExcessPct}%`],
      ['latency switches/member', (s) => s.overhead.switchesPerNodeTotal.latency],
    ],
  },
  {
    name: 'repairGraceMs',
    values: [300, 700, 1200],
    scenario: 'churn',
    seconds: 200,
    why: 'repair of packets that are late, not lost, vs time left to repair (churn)',
    columns: repairColumns,
  },
  {
    name: 'repairGraceMs',
    values: [300, 700, 1200],
    scenario: 'static',
    dataLoss: 0.02,
    why: 'the same under 2% Gilbert–Elliott loss on every link',
    columns: repairColumns,
  },
  {
    name: 'repairPendingWaitMs',
    values: [1000, 2500, 5000],
    scenario: 'static',
    dataLoss: 0.02,
    why: 'trusting a parent that chases the packet itself vs asking around (2% loss)',
    columns: repairColumns,
  },
  {
    name: 'floodCollectMs',
    values: [100, 300, 1000],
    scenario: 'burst10',
    why: 'time to rebuild a tree after its slice source fails',
    columns: [
      ['recovery p90 from detection (s)', (s) => s.recovery?.p90Seconds ?? '—'],
      ['recovery max (s)', (s) => s.recovery?.maxSeconds ?? '—'],
      ['loops detected', (s) => s.loops.detected],
    ],
  },
];

const USAGE = `usage: npm run sweep -- [options]

Runs one seeded scenario per value of each protocol constant the thesis leaves open and writes
OUT/sweep.json and OUT/sweep.md.

options:
  --nodes N        members (default 500)
  --seconds S      simulated seconds of each run (default 90; burst10 runs at least 70, some
                   sweeps have their own length)
  --out DIR        output directory (default docs/results/sweeps)
  --only LIST      comma-separated parameter names, of: ${[...new Set(SWEEPS.map((s) => s.name))].join(', ')}
  --help           this text`;

const { nodes, seconds, out, only } = parseCommandLine(
  'sweep',
  USAGE,
  {
    nodes: { type: 'string' },
    seconds: { type: 'string' },
    out: { type: 'string' },
    only: { type: 'string' },
  },
  (parsed) => ({
    nodes: numberOption('nodes', stringValue(parsed, 'nodes'), 500, { min: 2, integer: true }),
    seconds: numberOption('seconds', stringValue(parsed, 'seconds'), 90, { min: 1 }),
    out: resolve(stringValue(parsed, 'out') ?? 'docs/results/sweeps'),
    only: (stringValue(parsed, 'only') ?? '').split(',').filter((x) => x !== ''),
  }),
);

mkdirSync(out, { recursive: true });
const results: { parameter: string; value: number; isDefault: boolean; summary: Summary }[] = [];
const md: string[] = [
  '# Protocol values the thesis leaves open: measured effect',
  '',
  `Each row is one seeded run (seed 1, ${nodes} members, ${seconds} simulated s, Lat2, thesis network model: \`--uplink-headroom 0 --packet-rate 1\`). Bold = our default. Command: \`npm run sweep -- --nodes ${nodes} --seconds ${seconds}\`.`,
  '',
];
for (const sweep of SWEEPS) {
  if (only.length > 0 && !only.includes(sweep.name)) continue;
  md.push(
    `## ${sweep.name} (${sweep.scenario}${sweep.dataLoss !== undefined ? `, ${100 * sweep.dataLoss}% loss` : ''}${sweep.seconds !== undefined ? `, ${sweep.seconds} s` : ''}): ${sweep.why}`,
    '',
  );
  md.push(
    `| value | ${sweep.columns.map(([c]) => c).join(' | ')} |`,
    `|---|${sweep.columns.map(() => '---').join('|')}|`,
  );
  for (const v of sweep.values) {
    const t0 = performance.now();
    const run = runScenario({
      ...DEFAULT_RUN,
      scenario: sweep.scenario,
      nodes,
      durationS: sweep.seconds ?? (sweep.scenario === 'burst10' ? Math.max(seconds, 70) : seconds),
      dataLoss: sweep.dataLoss ?? 0,
      lat: 2,
      uplinkHeadroom: 0,
      packetsPerSlicePerSecond: 1,
      protocol: { [sweep.name]: v },
    });
    const isDefault = DEFAULT_PROTOCOL[sweep.name] === v;
    results.push({ parameter: sweep.name, value: v, isDefault, summary: run.summary });
    const cells = sweep.columns.map(([, f]) => String(f(run.summary)));
    md.push(`| ${isDefault ? `**${v}**` : String(v)} | ${cells.join(' | ')} |`);
    process.stderr.write(
      `sweep: ${sweep.name}=${v} done in ${((performance.now() - t0) / 1000).toFixed(0)} s\n`,
    );
  }
  md.push('');
}
writeFileSync(join(out, 'sweep.json'), `${JSON.stringify(results, null, 2)}\n`);
writeFileSync(join(out, 'sweep.md'), `${md.join('\n')}\n`);
process.stdout.write(`${join(out, 'sweep.md')}\n`);
