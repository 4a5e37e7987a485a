/**
 * The runs of `npm run reproduce`: every thesis scenario, and issue 4's reliability scenarios, as
 * simulator command lines. The thesis's model (no uplink limits, --uplink-headroom 0) unless a run
 * says otherwise.
 */

export const GROUPS = ['thesis', 'reliability', 'all'] as const;
export type Group = (typeof GROUPS)[number];

export interface ReproductionRun {
  /** Its directory under the results directory (docs/results by default). */
  readonly name: string;
  /** Simulator flags; the runner adds --nodes, --seed and --out. */
  readonly args: readonly string[];
}

// The thesis comparison runs keep Chunkyspread as published: no repair, no parity.
const thesis = ['--uplink-headroom', '0', '--packet-rate', '1', '--set', 'repairHelpers=0'];
const network = ['--uplink-headroom', '0', '--packet-rate', '1', '--lat', '2'];

export const THESIS_RUNS: readonly ReproductionRun[] = [
  // 600 s of churn instead of the thesis's 1200 s: the full run takes about four hours here.
  { name: 'churn-lat2', args: ['--scenario', 'churn', '--lat', '2', '--duration', '600', ...thesis] },
  { name: 'static-lat2', args: ['--scenario', 'static', '--lat', '2', ...thesis] },
  { name: 'static-lat0', args: ['--scenario', 'static', '--lat', '0', ...thesis] },
  { name: 'join-lat2', args: ['--scenario', 'join', '--lat', '2', ...thesis] },
  { name: 'join-lat0', args: ['--scenario', 'join', '--lat', '0', ...thesis] },
  { name: 'burst10-lat2', args: ['--scenario', 'burst10', '--lat', '2', ...thesis] },
  { name: 'burst50-lat2', args: ['--scenario', 'burst50', '--lat', '2', ...thesis] },
  {
    name: 'static-lat2-uplink',
    args: ['--scenario', 'static', '--lat', '2', '--uplink-headroom', '1.1', '--packet-rate', '1'],
  },
];

// Gilbert–Elliott loss (mean burst 4 packets) on every link, or on the trees' first hops only.
export const RELIABILITY_RUNS: readonly ReproductionRun[] = [
  // 300 s of churn (250 s of joins and departures, 50 s settling): at 5000 members with repair the
  // thesis's 1200 s would take hours here; departures start at 90 s (the Pareto minimum stay).
  { name: 'reliability/churn', args: ['--scenario', 'churn', '--duration', '300', ...network] },
  { name: 'reliability/burst10', args: ['--scenario', 'burst10', ...network] },
  { name: 'reliability/loss1', args: ['--scenario', 'static', '--data-loss', '0.01', ...network] },
  { name: 'reliability/loss2', args: ['--scenario', 'static', '--data-loss', '0.02', ...network] },
  { name: 'reliability/loss5', args: ['--scenario', 'static', '--data-loss', '0.05', ...network] },
  {
    name: 'reliability/loss5-sources',
    args: ['--scenario', 'static', '--data-loss', '0.05', '--loss-at', 'sources', ...network],
  },
  {
    name: 'reliability/loss5-parity',
    args: ['--scenario', 'static', '--data-loss', '0.05', '--parity', 'auto', ...network],
  },
];

/** The runs of `group`, narrowed to the names in `only` when it is not empty, in order. */
export function selectRuns(group: Group, only: readonly string[]): ReproductionRun[] {
  return [
    ...(group === 'thesis' || group === 'all' ? THESIS_RUNS : []),
    ...(group === 'reliability' || group === 'all' ? RELIABILITY_RUNS : []),
  ].filter((run) => only.length === 0 || only.includes(run.name));
}

/** The simulator's flags for one run: its own, then the members, the seed and its output directory. */
export function simulatorArgs(run: ReproductionRun, nodes: number, outDir: string): string[] {
  return [...run.args, '--nodes', String(nodes), '--seed', '1', '--out', outDir];
}
