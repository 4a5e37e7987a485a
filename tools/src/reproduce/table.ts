#!/usr/bin/env node
/**
 * `npm run reproduce:table`: prints the thesis-vs-Chunkycast table of docs/reproduction.md from
 * docs/results/<run>/summary.json, so every figure in the document is one a run wrote.
 * `--reliability` prints issue 4's table (docs/results/reliability/<run>/summary.json) instead.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Summary } from '@chunkycast/sim';
import { parseCommandLine, stringValue } from '../lib/args.js';
import { fromRoot } from '../lib/paths.js';

const USAGE = `usage: npm run reproduce:table -- [--reliability] [--results DIR]

Prints the Markdown table of docs/reproduction.md from the runs' summary.json files.

options:
  --reliability   issue 4's table (DIR/reliability/*/summary.json) instead of the thesis's
  --results DIR   where the runs are (default docs/results)
  --help          this text`;

const { reliability, resultsDir } = parseCommandLine(
  'reproduce:table',
  USAGE,
  { reliability: { type: 'boolean' }, results: { type: 'string' } },
  (parsed) => ({
    reliability: parsed.values.reliability === true,
    resultsDir: resolve(
      process.env.INIT_CWD ?? process.cwd(),
      stringValue(parsed, 'results') ?? fromRoot('docs', 'results'),
    ),
  }),
);

/** A run's summary, or null when it has not been run. */
function load(name: string): Summary | null {
  const file = join(resultsDir, name, 'summary.json');
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Summary) : null;
}

const THESIS_RUN_NAMES = [
  'static-lat2',
  'static-lat0',
  'join-lat2',
  'join-lat0',
  'burst10-lat2',
  'burst50-lat2',
  'churn-lat2',
  'static-lat2-uplink',
] as const;
type ThesisRun = (typeof THESIS_RUN_NAMES)[number];
const runs = new Map<ThesisRun, Summary | null>(THESIS_RUN_NAMES.map((name) => [name, load(name)]));

type Figure = number | null | undefined;
const pct = (x: Figure): string => (x === undefined || x === null ? '—' : `${(100 * x).toFixed(1)}%`);
const num = (x: Figure, digits = 1): string => (x === undefined || x === null ? '—' : x.toFixed(digits));
function get<T>(run: ThesisRun, figure: (s: Summary) => T): T | null {
  const summary = runs.get(run) ?? null;
  return summary === null ? null : figure(summary);
}

/** [metric, scenario, thesis (Chunkyspread), ours] */
const rows: readonly (readonly [string, string, string, string])[] = [
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

/** Issue 4's runs (docs/results/reliability/*): how every needed packet arrived, per scenario. */
function reliabilityTable(): string[] {
  const rel = (name: string): Summary | null => load(join('reliability', name));
  const scenarios: readonly (readonly [string, string])[] = [
    ['churn', 'churn (300 s), no link loss'],
    ['burst10', '10% burst at 30 s, no link loss'],
    ['loss1', 'static, GE loss 1% on every link'],
    ['loss2', 'static, GE loss 2% on every link'],
    ['loss5', 'static, GE loss 5% on every link'],
    ['loss5-sources', "static, GE loss 5% on the trees' first hops"],
    ['loss5-parity', 'static, GE loss 5% on every link, parity auto'],
  ];
  const count = (x: Figure): string => (x === undefined || x === null ? '—' : x.toLocaleString('en-US'));
  type PacketPath = 'tree' | 'repair' | 'parity' | 'origin' | 'missed';
  const share = (s: Summary, path: PacketPath): string =>
    `${((100 * s.playback[path]) / Math.max(1, s.playback.packets)).toFixed(3)}%`;
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
  const burst10 = rel('burst10');
  const thesisRows = [
    '',
    '| metric | scenario | thesis (Chunkyspread, no repair) | Chunkyspread here, no repair | Chunkycast, with repair |',
    '|---|---|---|---|---|',
    `| Playback disruption per slice, p90 | churn, 5 s buffer | 1 s | ${num(get('churn-lat2', (x) => x.disruption.p90SecondsPerSlice5sBuffer))} s | ${num(churn?.disruption.p90SecondsPerSlice5sBuffer)} s |`,
    `| Slices never disrupted | churn, 5 s buffer | 85% | ${pct(get('churn-lat2', (x) => x.disruption.undisruptedSliceFraction5sBuffer))} | ${pct(churn?.disruption.undisruptedSliceFraction5sBuffer)} |`,
    `| Packets never delivered | churn | — | ${pct(get('churn-lat2', (x) => 1 - x.delivery.packetsDeliveredFraction))} | ${pct(churn === null ? null : 1 - churn.delivery.packetsDeliveredFraction)} |`,
    `| Missed playback deadlines (fixed delay, 5 s buffer) | churn | — | — | ${count(churn?.playback.missed)} of ${count(churn?.playback.packets)} |`,
    `| Missed playback deadlines (fixed delay, 5 s buffer) | 10% burst | — | — | ${count(burst10?.playback.missed)} of ${count(burst10?.playback.packets)} |`,
  ];
  return [...out, ...thesisRows];
}

const lines = reliability
  ? reliabilityTable()
  : [
      '| metric | scenario | thesis (Chunkyspread) | Chunkycast |',
      '|---|---|---|---|',
      ...rows.map((r) => `| ${r.join(' | ')} |`),
    ];
process.stdout.write(`${lines.join('\n')}\n`);
