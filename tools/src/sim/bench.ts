#!/usr/bin/env node
/**
 * `npm run bench:sim`: what the simulator costs. Each run is a separate process (so peak memory is
 * that run's own), and the results go to OUT/bench.json, OUT/bench.md and OUT/scaling.svg.
 *
 *   npm run bench:sim                     static 5000 Lat2 120 s, churn 5000, scaling 1000…10000
 *   npm run bench:sim -- --only static    just the headline static run
 *   npm run bench:sim -- --scale 1000,2000 --scale-seconds 30 --out DIR
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { linePlot } from '@chunkycast/sim';
import { numberOption, parseCommandLine, stringValue } from '../lib/args.js';
import { fromRoot } from '../lib/paths.js';
import { simulatorNodeFlags } from '../lib/sim-process.js';

const USAGE = `usage: npm run bench:sim -- [options]

Runs the simulator's cost benchmark, each run in its own process, and writes OUT/bench.json,
OUT/bench.md and OUT/scaling.svg.

options:
  --out DIR               output directory (default sim-out/bench)
  --only LIST             which of static,churn,scale to run (default all three):
                          static = 5000 members, Lat2, 120 s (goal ≤ 30 s wall);
                          churn = 5000 members (goal ≤ 300 s wall); scale = the --scale sizes
  --scale LIST            member counts of the scaling runs (default 1000,2000,5000,10000)
  --scale-seconds S       simulated seconds of each scaling run (default 60)
  --uplink-headroom H     passed to every run (default 0, the thesis's model)
  --packet-rate R         passed to every run (default 1)
  --help                  this text`;

interface BenchOptions {
  readonly out: string;
  readonly only: readonly string[];
  readonly scale: readonly number[];
  readonly scaleSeconds: number;
  /** Flags every run gets, as given (they are recorded in bench.json). */
  readonly extra: readonly string[];
}

/** A number flag kept as the text given: it is passed on to the simulator and recorded verbatim. */
function numericText(flag: string, value: string | undefined, fallback: string): string {
  numberOption(flag, value, 0, { min: 0 });
  return value ?? fallback;
}

const options = parseCommandLine<BenchOptions>(
  'bench:sim',
  USAGE,
  {
    out: { type: 'string' },
    only: { type: 'string' },
    scale: { type: 'string' },
    'scale-seconds': { type: 'string' },
    'uplink-headroom': { type: 'string' },
    'packet-rate': { type: 'string' },
  },
  (parsed) => ({
    out: resolve(stringValue(parsed, 'out') ?? 'sim-out/bench'),
    only: (stringValue(parsed, 'only') ?? 'static,churn,scale').split(','),
    // Sizes below two members are not a swarm; they are left out as before.
    scale: (stringValue(parsed, 'scale') ?? '1000,2000,5000,10000')
      .split(',')
      .map(Number)
      .filter((n) => Number.isInteger(n) && n >= 2),
    scaleSeconds: numberOption('scale-seconds', stringValue(parsed, 'scale-seconds'), 60, { min: 1 }),
    extra: [
      '--uplink-headroom',
      numericText('uplink-headroom', stringValue(parsed, 'uplink-headroom'), '0'),
      '--packet-rate',
      numericText('packet-rate', stringValue(parsed, 'packet-rate'), '1'),
    ],
  }),
);

interface BenchRun {
  name: string;
  scenario: string;
  nodes: number;
  simSeconds: number;
  wallSeconds: number;
  peakRssMB: number;
  events: number;
  eventsPerSecond: number;
  wallPerSimSecond: number;
  goalWallSeconds: number | null;
}

const simulatorCli = fromRoot('packages', 'sim', 'dist', 'cli.js');

function runOne(
  name: string,
  scenario: string,
  nodes: number,
  durationS: number | null,
  goal: number | null,
): BenchRun {
  const dir = join(options.out, 'runs', name);
  const cliArgs = [
    '--scenario',
    scenario,
    '--nodes',
    String(nodes),
    '--lat',
    '2',
    '--seed',
    '1',
    '--out',
    dir,
    ...options.extra,
  ];
  if (durationS !== null) cliArgs.push('--duration', String(durationS));
  process.stderr.write(`bench: ${name} (${cliArgs.join(' ')})\n`);
  // Synchronous on purpose: one run at a time, nothing else in this process to do meanwhile.
  const r = spawnSync(process.execPath, [...simulatorNodeFlags, simulatorCli, ...cliArgs], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  if (r.status !== 0) throw new Error(`bench run ${name} failed (exit ${r.status ?? r.signal})`);
  const summary = JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8')) as {
    simSeconds: number;
    wallSeconds: number;
    peakRssMB: number;
    events: number;
  };
  const run: BenchRun = {
    name,
    scenario,
    nodes,
    simSeconds: summary.simSeconds,
    wallSeconds: summary.wallSeconds,
    peakRssMB: summary.peakRssMB,
    events: summary.events,
    eventsPerSecond: Math.round(summary.events / summary.wallSeconds),
    wallPerSimSecond: Math.round((summary.wallSeconds / summary.simSeconds) * 1000) / 1000,
    goalWallSeconds: goal,
  };
  process.stdout.write(
    `${name}: ${run.wallSeconds.toFixed(1)} s wall for ${run.simSeconds} simulated s, peak ${run.peakRssMB} MB, ${(run.events / 1e6).toFixed(1)}M events (${(run.eventsPerSecond / 1000).toFixed(0)}k/s)${goal === null ? '' : `; goal ≤ ${goal} s: ${run.wallSeconds <= goal ? 'met' : 'missed'}`}\n`,
  );
  return run;
}

/** Wall-time goals of the two headline runs, in seconds: what the simulator must stay within. */
const STATIC_GOAL_WALL_S = 30;
const CHURN_GOAL_WALL_S = 300;

const { out, only, scale, scaleSeconds, extra } = options;
mkdirSync(out, { recursive: true });
const runs: BenchRun[] = [];
if (only.includes('static'))
  runs.push(runOne('static-5000-lat2-120s', 'static', 5000, 120, STATIC_GOAL_WALL_S));
if (only.includes('churn')) runs.push(runOne('churn-5000-lat2', 'churn', 5000, null, CHURN_GOAL_WALL_S));
if (only.includes('scale'))
  for (const n of scale)
    runs.push(runOne(`static-${n}-lat2-${scaleSeconds}s`, 'static', n, scaleSeconds, null));

const machine = {
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model ?? 'unknown',
  totalMemGB: Math.round(totalmem() / 2 ** 30),
  node: process.version,
};
writeFileSync(join(out, 'bench.json'), `${JSON.stringify({ machine, flags: extra, runs }, null, 2)}\n`);
const scaling = runs.filter((r) => r.name.startsWith('static-') && r.simSeconds === scaleSeconds);
const md = [
  '# Simulator cost',
  '',
  `Machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.totalMemGB} GB, Node ${machine.node}; one core per run. Flags: \`${extra.join(' ')}\`.`,
  '',
  '| run | simulated s | wall s | goal | peak MB | events | events/s | wall s per simulated s |',
  '|---|---|---|---|---|---|---|---|',
  ...runs.map(
    (r) =>
      `| ${r.name} | ${r.simSeconds} | ${r.wallSeconds.toFixed(1)} | ${r.goalWallSeconds === null ? '—' : `≤ ${r.goalWallSeconds}${r.wallSeconds <= r.goalWallSeconds ? ' (met)' : ' (missed)'}`} | ${r.peakRssMB} | ${(r.events / 1e6).toFixed(1)}M | ${(r.eventsPerSecond / 1000).toFixed(0)}k | ${r.wallPerSimSecond} |`,
  ),
  '',
  scaling.length >= 2
    ? `Scaling (static, ${scaleSeconds} simulated s): wall time per simulated second per 1000 members goes ${scaling.map((r) => `${((1000 * r.wallPerSimSecond) / r.nodes).toFixed(3)} s at ${r.nodes}`).join(', ')}: events grow linearly with members, the cost per event grows with the working set (cache misses).`
    : '',
  '',
  '![scaling](scaling.svg)',
  '',
].join('\n');
writeFileSync(join(out, 'bench.md'), md);
writeFileSync(
  join(out, 'scaling.svg'),
  linePlot({
    title: `Simulator cost vs members (static, ${scaleSeconds} simulated s)`,
    xLabel: 'members',
    yLabel: 'wall seconds per simulated second',
    series: [
      { name: 'wall s / simulated s', points: scaling.map((r) => ({ x: r.nodes, y: r.wallPerSimSecond })) },
    ],
  }),
);
process.stdout.write(`${join(out, 'bench.md')}\n`);
