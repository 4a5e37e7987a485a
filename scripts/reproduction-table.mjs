#!/usr/bin/env node
// Prints the thesis-vs-Chunkycast table of docs/reproduction.md from docs/results/*/summary.json,
// so every figure in the document is one a run wrote. Usage: node scripts/reproduction-table.mjs
// [--reliability] (the issue-4 table from docs/results/reliability/*/summary.json instead)
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
if (process.argv.includes('--reliability')) {
  // Issue 4's runs (docs/results/reliability/*): how every needed packet arrived, per scenario.
  const rel = (name) => load(join('reliability', name));
  const scenarios = [
    ['churn', 'churn (300 s), no link loss'],
    ['burst10', '10% burst at 30 s, no link loss'],
    ['loss1', 'static, GE loss 1% on every link'],
    ['loss2', 'static, GE loss 2% on every link'],
    ['loss5', 'static, GE loss 5% on every link'],
    ['loss5-sources', "static, GE loss 5% on the trees' first hops"],
    ['loss5-parity', 'static, GE loss 5% on every link, parity auto'],
  ];
  const count = (x) => (x === undefined || x === null ? '—' : Number(x).toLocaleString('en-US'));
  const share = (s, k) =>
    s === null ? '—' : `${((100 * s.playback[k]) / Math.max(1, s.playback.packets)).toFixed(3)}%`;
  const out = [
    '| run | packets needed | tree | repair | parity | origin | missed deadline | repair latency p50 / p90 / p99 | duplicates | origin bytes ÷ stream × audience | parity upload |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...scenarios.map(([name, label]) => {
      const s = rel(name);
      if (s === null) return `| ${label} | not run | | | | | | | | | |`;
      const l = s.repair.latencyMs;
      return `| ${label} | ${count(s.playback.packets)} | ${share(s, 'tree')} | ${share(s, 'repair')} | ${share(s, 'parity')} | ${share(s, 'origin')} | ${count(s.playback.missed)} (${share(s, 'missed')}) | ${num(l.p50 / 1000, 2)} / ${num(l.p90 / 1000, 2)} / ${num(l.p99 / 1000, 2)} s | ${pct(s.repair.duplicateFraction)} | ${num(100 * s.origin.shareOfAudienceBytes, 3)}% | ${s.parity.mode === 'off' ? '—' : pct(s.parity.uploadShare)} |`;
    }),
  ];
  const churn = rel('churn');
  const thesisRows = [
    '',
    '| metric | scenario | thesis (Chunkyspread, no repair) | Chunkyspread here, no repair | Chunkycast, with repair |',
    '|---|---|---|---|---|',
    `| Playback disruption per slice, p90 | churn, 5 s buffer | 1 s | ${num(get('churn-lat2', (x) => x.disruption.p90SecondsPerSlice5sBuffer))} s | ${num(churn?.disruption.p90SecondsPerSlice5sBuffer)} s |`,
    `| Slices never disrupted | churn, 5 s buffer | 85% | ${pct(get('churn-lat2', (x) => x.disruption.undisruptedSliceFraction5sBuffer))} | ${pct(churn?.disruption.undisruptedSliceFraction5sBuffer)} |`,
    `| Packets never delivered | churn | — | ${pct(get('churn-lat2', (x) => 1 - x.delivery.packetsDeliveredFraction))} | ${pct(churn === null ? null : 1 - churn.delivery.packetsDeliveredFraction)} |`,
    `| Missed playback deadlines (fixed delay, 5 s buffer) | churn | — | — | ${count(churn?.playback.missed)} of ${count(churn?.playback.packets)} |`,
    `| Missed playback deadlines (fixed delay, 5 s buffer) | 10% burst | — | — | ${count(rel('burst10')?.playback.missed)} of ${count(rel('burst10')?.playback.packets)} |`,
  ];
  process.stdout.write(`${[...out, ...thesisRows].join('\n')}\n`);
} else {
  const lines = [
    '| metric | scenario | thesis (Chunkyspread) | Chunkycast |',
    '|---|---|---|---|',
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}
