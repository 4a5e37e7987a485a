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
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { linePlot } from './plot.js';

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

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, 'cli.js');
const args = process.argv.slice(2);
const value = (flag: string, fallback: string): string => {
  const i = args.indexOf(flag);
  return i >= 0 && args[i + 1] !== undefined ? (args[i + 1] ?? fallback) : fallback;
};
const out = resolve(value('--out', 'sim-out/bench'));
const only = value('--only', 'static,churn,scale').split(',');
const scale = value('--scale', '1000,2000,5000,10000')
  .split(',')
  .map(Number)
  .filter((n) => Number.isInteger(n) && n >= 2);
const scaleSeconds = Number(value('--scale-seconds', '60'));
const extra = [
  '--uplink-headroom',
  value('--uplink-headroom', '0'),
  '--packet-rate',
  value('--packet-rate', '1'),
];

function runOne(
  name: string,
  scenario: string,
  nodes: number,
  durationS: number | null,
  goal: number | null,
): BenchRun {
  const dir = join(out, 'runs', name);
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
    ...extra,
  ];
  if (durationS !== null) cliArgs.push('--duration', String(durationS));
  process.stderr.write(`bench: ${name} (${cliArgs.join(' ')})\n`);
  const r = spawnSync(
    process.execPath,
    ['--max-semi-space-size=64', '--max-old-space-size=16384', cli, ...cliArgs],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
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

mkdirSync(out, { recursive: true });
const runs: BenchRun[] = [];
if (only.includes('static')) runs.push(runOne('static-5000-lat2-120s', 'static', 5000, 120, 30));
if (only.includes('churn')) runs.push(runOne('churn-5000-lat2', 'churn', 5000, null, 300));
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
