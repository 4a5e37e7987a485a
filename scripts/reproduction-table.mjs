#!/usr/bin/env node
// Prints the thesis-vs-Chunkycast table of docs/reproduction.md from docs/results/*/summary.json,
// so every figure in the document is one a run wrote. Usage: node scripts/reproduction-table.mjs
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const load = (name) => {
  const file = join(root, 'docs', 'results', name, 'summary.json');
  return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : null;
};
const runs = Object.fromEntries(
  [
    'static-lat2',
    'static-lat0',
    'join-lat2',
    'join-lat0',
    'burst10-lat2',
    'burst50-lat2',
    'churn-lat2',
    'static-lat2-uplink',
  ].map((n) => [n, load(n)]),
);
const pct = (x) => (x === undefined || x === null ? '—' : `${(100 * x).toFixed(1)}%`);
const num = (x, d = 1) => (x === undefined || x === null ? '—' : Number(x).toFixed(d));
const get = (run, f) => (runs[run] === null ? null : f(runs[run]));
const rows = [
  // [metric, scenario, thesis CS, ours, run]
  [
    'Nodes exactly at TL',
    'Lat0 static / join',
    '>80% / ≈90%',
    `${pct(get('static-lat0', (s) => s.load.atTargetFraction))} / ${pct(get('join-lat0', (s) => s.load.atTargetFraction))}`,
  ],
  [
    'Nodes within 25% of TL',
    'Lat2 static / join',
    'almost 90%',
    `${pct(get('static-lat2', (s) => s.load.within25PctFraction))} / ${pct(get('join-lat2', (s) => s.load.within25PctFraction))}`,
  ],
  [
    'Nodes within LLT–ULT',
    'Lat2 static / join',
    '—',
    `${pct(get('static-lat2', (s) => s.load.withinRangeFraction))} / ${pct(get('join-lat2', (s) => s.load.withinRangeFraction))}`,
  ],
  [
    'Max excess load (p95)',
    'Lat2 static / join',
    'about 20%',
    `${num(
      get('static-lat2', (s) => s.load.maxExcessPct),
      0,
    )}% (${num(
      get('static-lat2', (s) => s.load.p95ExcessPct),
      0,
    )}%) / ${num(
      get('join-lat2', (s) => s.load.maxExcessPct),
      0,
    )}% (${num(
      get('join-lat2', (s) => s.load.p95ExcessPct),
      0,
    )}%)`,
  ],
  [
    '90th pct max latency (normalised)',
    'Lat2 static / join',
    '≈7 / ≈9',
    `${num(
      get('static-lat2', (s) => s.latency.p90MaxNormalized),
      2,
    )} / ${num(
      get('join-lat2', (s) => s.latency.p90MaxNormalized),
      2,
    )}`,
  ],
  [
    '90th pct avg latency (normalised)',
    'Lat2 static / join',
    '≈4 / ≈6',
    `${num(
      get('static-lat2', (s) => s.latency.p90AvgNormalized),
      2,
    )} / ${num(
      get('join-lat2', (s) => s.latency.p90AvgNormalized),
      2,
    )}`,
  ],
  [
    'Overlay stretch in [1, 2]',
    'Lat2 static',
    '>90% of nodes',
    pct(get('static-lat2', (s) => s.stretch.fractionWithin1to2)),
  ],
  [
    '90th pct max hop length, below the slice source (from the true source)',
    'Lat2 static / join',
    '≈8',
    `${num(
      get('static-lat2', (s) => s.hops.p90Max - 1),
      0,
    )} / ${num(
      get('join-lat2', (s) => s.hops.p90Max - 1),
      0,
    )} (${num(
      get('static-lat2', (s) => s.hops.p90Max),
      0,
    )} / ${num(
      get('join-lat2', (s) => s.hops.p90Max),
      0,
    )})`,
  ],
  [
    '90th pct startup time',
    'join (joiners)',
    '≈8 s',
    `${num(get('join-lat2', (s) => s.startup.p90Seconds))} s`,
  ],
  [
    '90th pct startup time',
    'static (from stream start)',
    '7 s',
    `${num(get('static-lat2', (s) => s.startup.p90Seconds))} s`,
  ],
  [
    'Convergence (last load switch)',
    'Lat0 static / join',
    '18 s / 70 s',
    `${num(get('static-lat0', (s) => s.convergence.seconds))} s / ${num(get('join-lat0', (s) => s.convergence.seconds))} s`,
  ],
  [
    'Convergence (last switch)',
    'Lat2 static / join',
    '≤60 s / ≈120 s',
    `${num(get('static-lat2', (s) => s.convergence.seconds))} s / ${num(get('join-lat2', (s) => s.convergence.seconds))} s`,
  ],
  [
    '99% of load switches done by',
    'Lat0 static / join',
    '—',
    `${num(
      get('static-lat0', (s) => s.convergence.switches99Seconds),
      0,
    )} s / ${num(
      get('join-lat0', (s) => s.convergence.switches99Seconds),
      0,
    )} s`,
  ],
  [
    '99% of switches done by',
    'Lat2 static / join',
    '—',
    `${num(
      get('static-lat2', (s) => s.convergence.switches99Seconds),
      0,
    )} s / ${num(
      get('join-lat2', (s) => s.convergence.switches99Seconds),
      0,
    )} s`,
  ],
  [
    'Switch msgs/node/s peak (max, p95, median)',
    'Lat2 join',
    '60, ≈20, ≈8',
    get(
      'join-lat2',
      (s) =>
        `${s.overhead.peakMsgsPerNodePerSecMax}, ${s.overhead.peakMsgsPerNodePerSecP95}, ${s.overhead.peakMsgsPerNodePerSecMedian}`,
    ) ?? '—',
  ],
  [
    'Failed switch requests',
    'join',
    '≈50%',
    pct(get('join-lat2', (s) => s.overhead.failedSwitchRequestFraction)),
  ],
  [
    '90th pct recovery (from detection)',
    '10% burst, Lat2',
    '≈5 s',
    `${num(
      get('burst10-lat2', (s) => s.recovery?.p90Seconds),
      2,
    )} s (max ${num(
      get('burst10-lat2', (s) => s.recovery?.maxSeconds),
      2,
    )} s)`,
  ],
  [
    '90th pct recovery (from detection)',
    '50% burst, Lat2',
    '10 s',
    `${num(
      get('burst50-lat2', (s) => s.recovery?.p90Seconds),
      2,
    )} s (max ${num(
      get('burst50-lat2', (s) => s.recovery?.maxSeconds),
      2,
    )} s)`,
  ],
  [
    'Control overhead peak (max, median)',
    '10% burst, Lat2',
    '42, 12 msgs/s/node',
    get(
      'burst10-lat2',
      (s) => `${s.overhead.peakMsgsPerNodePerSecMax}, ${s.overhead.peakMsgsPerNodePerSecMedian}`,
    ) ?? '—',
  ],
  [
    'Playback disruption per slice, p90',
    'churn, 0 s buffer',
    '20 s',
    `${num(get('churn-lat2', (s) => s.disruption.p90SecondsPerSlice0sBuffer))} s`,
  ],
  [
    'Playback disruption per slice, p90',
    'churn, 5 s buffer',
    '1 s',
    `${num(get('churn-lat2', (s) => s.disruption.p90SecondsPerSlice5sBuffer))} s`,
  ],
  [
    'Slices never disrupted',
    'churn, 5 s buffer',
    '85%',
    pct(get('churn-lat2', (s) => s.disruption.undisruptedSliceFraction5sBuffer)),
  ],
];
const lines = [
  '| metric | scenario | thesis (Chunkyspread) | Chunkycast |',
  '|---|---|---|---|',
  ...rows.map((r) => `| ${r.join(' | ')} |`),
];
process.stdout.write(`${lines.join('\n')}\n`);
