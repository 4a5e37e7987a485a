import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Distributions, Summary } from './metrics.js';
import type { BanSummary } from './adversaries.js';
import { cdfPlot, linePlot } from './plot.js';
import type { SecondSample } from './measurement.js';

export interface ReportFiles {
  readonly summary: string;
  readonly report: string;
  readonly plots: readonly string[];
}

function fmt(value: number | null | undefined, digits = 2): string {
  if (value === null || value === undefined || Number.isNaN(value)) return '—';
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

function pct(value: number): string {
  return `${(100 * value).toFixed(1)}%`;
}

/** Write `summary.json`, `report.md` and the SVG plots into `dir`. */
export function writeReport(
  dir: string,
  summary: Summary,
  dist: Distributions,
  samples: readonly SecondSample[],
  command: string,
): ReportFiles {
  mkdirSync(dir, { recursive: true });
  const plots: string[] = [];
  const save = (name: string, svg: string): void => {
    writeFileSync(join(dir, name), svg);
    plots.push(name);
  };
  /** One line over time from the per-second samples. */
  const overTime = (
    name: string,
    y: (s: SecondSample) => number,
  ): { name: string; points: { x: number; y: number }[] } => ({
    name,
    points: samples.map((s) => ({ x: s.t / 1000, y: y(s) })),
  });
  const label = `${summary.scenario}, ${summary.nodes} nodes, Lat${summary.lat}, seed ${summary.seed}`;
  save(
    'load-cdf.svg',
    cdfPlot({
      title: `Excess load (load − TL)/TL — ${label}`,
      xLabel: 'excess load (%)',
      series: [{ name: `Lat${summary.lat}`, values: dist.excessLoadPct }],
    }),
  );
  save(
    'latency-cdf.svg',
    cdfPlot({
      title: `Slice latency normalised to the median network latency — ${label}`,
      xLabel: 'latency / median network latency',
      series: [
        { name: 'max over slices', values: dist.maxLatencyNormalized },
        { name: 'average over slices', values: dist.avgLatencyNormalized },
      ],
    }),
  );
  save(
    'convergence.svg',
    linePlot({
      title: `Convergence over time — ${label}`,
      xLabel: 'time (s)',
      yLabel: 'fraction of members',
      series: [
        overTime('load in LLT–ULT', (s) => s.withinRangeFraction),
        overTime('load = TL', (s) => s.atTargetFraction),
        overTime('all 16 slices', (s) => s.completeFraction),
      ],
    }),
  );
  save(
    'switches.svg',
    linePlot({
      title: `Successful parent switches per member per second — ${label}`,
      xLabel: 'time (s)',
      yLabel: 'switches / member / s',
      series: [
        overTime('load', (s) => (s.alive > 0 ? (s.optimisingSwitches - s.latencySwitches) / s.alive : 0)),
        overTime('latency', (s) => (s.alive > 0 ? s.latencySwitches / s.alive : 0)),
        overTime('forced', (s) => (s.alive > 0 ? s.forcedSwitches / s.alive : 0)),
      ],
    }),
  );
  save(
    'overhead.svg',
    linePlot({
      title: `Switch messages sent per member per second — ${label}`,
      xLabel: 'time (s)',
      yLabel: 'messages / member / s',
      series: [
        overTime('max', (s) => s.switchMsgsMax),
        overTime('95th percentile', (s) => s.switchMsgsP95),
        overTime('median', (s) => s.switchMsgsMedian),
      ],
    }),
  );
  save(
    'startup-cdf.svg',
    cdfPlot({
      title: `Startup time (join → all slices) — ${label}`,
      xLabel: 'seconds',
      series: [{ name: summary.startup.population, values: dist.startupSeconds }],
    }),
  );
  if (summary.recovery !== null) {
    save(
      'recovery-cdf.svg',
      cdfPlot({
        title: `Recovery after the failure burst — ${label}`,
        xLabel: 'seconds disconnected from ≥ 1 slice tree',
        series: [
          { name: 'from detection', values: dist.recoverySeconds },
          { name: 'from the failure', values: dist.recoveryFromFailureSeconds },
        ],
      }),
    );
  }
  save(
    'disruption-cdf.svg',
    cdfPlot({
      title: `Playback disruption per slice — ${label}`,
      xLabel: 'seconds of disruption per slice',
      series: [
        { name: '0 s buffer', values: dist.disruption0s },
        { name: '5 s buffer', values: dist.disruption5s },
      ],
    }),
  );
  if (dist.repairLatencyMs.length + dist.originLatencyMs.length > 0) {
    save(
      'repair-latency-cdf.svg',
      cdfPlot({
        title: `Missing → filled, per packet — ${label}`,
        xLabel: 'seconds from "missing" to arrival',
        series: [
          { name: 'repaired by neighbours', values: dist.repairLatencyMs.map((x) => x / 1000) },
          { name: 'fetched from the origin', values: dist.originLatencyMs.map((x) => x / 1000) },
        ],
      }),
    );
  }
  save(
    'hops-cdf.svg',
    cdfPlot({
      title: `Max hops from the true source — ${label}`,
      xLabel: 'hops',
      series: [{ name: 'max over slices', values: dist.maxHops }],
    }),
  );

  const s = summary;
  const rows: [string, string][] = [
    ['members at end', fmt(s.membersAtEnd)],
    ['load within LLT–ULT', pct(s.load.withinRangeFraction)],
    ['load within 25% of TL', pct(s.load.within25PctFraction)],
    ['load exactly TL', pct(s.load.atTargetFraction)],
    ['max / p95 excess load', `${fmt(s.load.maxExcessPct, 1)}% / ${fmt(s.load.p95ExcessPct, 1)}%`],
    ['90th pct max latency (normalised)', fmt(s.latency.p90MaxNormalized)],
    ['90th pct avg latency (normalised)', fmt(s.latency.p90AvgNormalized)],
    ['median network latency', `${fmt(s.latency.medianNetworkLatencyMs)} ms`],
    ['stretch in [1, 2]', pct(s.stretch.fractionWithin1to2)],
    [
      '90th pct max hops (from the true source; below the slice source)',
      `${fmt(s.hops.p90Max)}; ${fmt(s.hops.p90MaxBelowSliceSource)}`,
    ],
    [`90th pct startup (${s.startup.population})`, `${fmt(s.startup.p90Seconds)} s`],
    ['convergence (last load/latency switch)', `${fmt(s.convergence.seconds, 1)} s`],
    ['99% of load/latency switches done by', `${fmt(s.convergence.switches99Seconds, 0)} s`],
    [
      'last load / latency switch',
      `${s.convergence.lastLoadSwitchSeconds ?? '–'} s / ${s.convergence.lastLatencySwitchSeconds ?? '–'} s`,
    ],
    [
      'recovery p90 / max (from detection)',
      s.recovery === null ? '—' : `${fmt(s.recovery.p90Seconds)} s / ${fmt(s.recovery.maxSeconds)} s`,
    ],
    [
      'recovery p90 (from the failure)',
      s.recovery === null ? '—' : `${fmt(s.recovery.p90FromFailureSeconds)} s`,
    ],
    [
      'peak switch msgs/member/s (max, p95, median)',
      `${fmt(s.overhead.peakMsgsPerNodePerSecMax)}, ${fmt(s.overhead.peakMsgsPerNodePerSecP95)}, ${fmt(s.overhead.peakMsgsPerNodePerSecMedian)}`,
    ],
    ['control bytes/member/s', fmt(s.overhead.controlBytesPerNodePerSec, 0)],
    ['failed switch requests', pct(s.overhead.failedSwitchRequestFraction)],
    ['packets delivered', pct(s.delivery.packetsDeliveredFraction)],
    ['duplicates', pct(s.delivery.duplicateFraction)],
    [
      'disruption p90 per slice (0 s / 5 s buffer)',
      `${fmt(s.disruption.p90SecondsPerSlice0sBuffer)} s / ${fmt(s.disruption.p90SecondsPerSlice5sBuffer)} s`,
    ],
    [
      `packets needed by playing members (${fmt(s.playback.bufferMs / 1000)} s buffer)`,
      fmt(s.playback.packets),
    ],
    [
      'of which by tree / repair / parity / origin / missed',
      `${fmt(s.playback.tree)} / ${fmt(s.playback.repair)} / ${fmt(s.playback.parity)} / ${fmt(s.playback.origin)} / ${fmt(s.playback.missed)}`,
    ],
    ['on time', pct(s.playback.onTimeFraction)],
    ['members with a missed deadline', `${fmt(s.playback.membersWithMisses)} of ${fmt(s.playback.members)}`],
    [
      'repair latency p50 / p90 / p99 / max',
      `${fmt(s.repair.latencyMs.p50)} / ${fmt(s.repair.latencyMs.p90)} / ${fmt(s.repair.latencyMs.p99)} / ${fmt(s.repair.latencyMs.max)} ms`,
    ],
    [
      'repair requests / NAK not held / busy / pending / timeouts',
      `${fmt(s.repair.requestsSent)} / ${fmt(s.repair.naksNotHeld)} / ${fmt(s.repair.naksBusy)} / ${fmt(s.repair.naksPending)} / ${fmt(s.repair.timeouts)}`,
    ],
    ['duplicates (tree, repair and origin copies)', pct(s.repair.duplicateFraction)],
    [
      'origin bytes (share of stream × audience)',
      `${fmt(s.origin.bytes)} B (${pct(s.origin.shareOfAudienceBytes)})`,
    ],
    [
      `parity (${s.parity.mode}): upload share, stripes on / off, rebuilt`,
      `${pct(s.parity.uploadShare)}, ${fmt(s.parity.stripesActive)} / ${fmt(s.parity.stripesIdle)}, ${fmt(s.parity.recovered)}`,
    ],
    ['loops detected', fmt(s.loops.detected)],
    [
      'slice roots (members: distinct roots / most slices one roots)',
      `${s.roots.bySize.map((r) => `${r.members}: ${r.distinctRoots} / ${r.maxSlicesPerRoot}`).join(', ')}; ${s.roots.moves} moved`,
    ],
    ...productionRows(s.production),
    ['wall time / events', `${fmt(s.wallSeconds)} s / ${s.events.toLocaleString('en-US')}`],
    ...(s.codec.sampleEvery > 1
      ? [
          [
            'messages through the codec (sampled)',
            `1 in ${fmt(s.codec.sampleEvery)}: ${s.codec.encoded.toLocaleString('en-US')} of ${s.codec.messages.toLocaleString('en-US')}`,
          ] as [string, string],
        ]
      : []),
  ];
  const adv = s.adversaries;
  if (adv !== undefined) {
    rows.unshift(
      [
        'hostile members (figures below are of the honest ones)',
        `${fmt(adv.hostileMembers)}: ${adv.specs.map((x) => `${x.kind} ${pct(x.fraction)}`).join(', ')}`,
      ],
      ['honest origin share (packets asked of the origin ÷ needed)', pct(adv.honestOriginShare)],
      [
        'honest members cut off by honest ones',
        `${fmt(adv.honestMembersCutOff)} (${fmt(adv.honestCutOffPairs)} pairs)`,
      ],
      [
        'rendezvous ban: hostile / honest members banned; seconds to ban p50/p95/max; messages refused',
        banCell(adv.rendezvousBan),
      ],
    );
    for (const k of adv.kinds)
      rows.push([
        `${k.kind}: attackers harming / victim pairs; longest episode p50/p95/max; all episodes p95; attackers stopped ≤ 30 s; pairs cut off (p95 after first harm)`,
        `${fmt(k.attackersHarming)} of ${fmt(k.attackers)} / ${fmt(k.victimPairs)}; ${fmt(k.harmSeconds.p50)}/${fmt(k.harmSeconds.p95)}/${fmt(k.harmSeconds.max)} s; ${fmt(k.exposureSeconds.p95)} s; ${pct(k.attackersStoppedWithin30sFraction)}; ${pct(k.pairsCutOffFraction)} (${fmt(k.cutOffSeconds.p95)} s)`,
      ]);
  }
  const md = [
    `# Simulation: ${label}`,
    '',
    `Command: \`${command}\``,
    '',
    `${s.simSeconds} simulated seconds, ${s.packetsPerSlicePerSecond} packets per slice per second.`,
    '',
    '| metric | value |',
    '|---|---|',
    ...rows.map(([k, v]) => `| ${k} | ${v} |`),
    '',
    ...plots.map((p) => `![${p}](${p})`),
    '',
  ].join('\n');
  writeFileSync(join(dir, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`);
  // The once-a-second samples behind the plots over time, to re-plot or compare runs.
  writeFileSync(join(dir, 'timeline.json'), `${JSON.stringify(samples)}\n`);
  // The raw repair latencies, so the distribution can be re-plotted or compared across runs.
  writeFileSync(
    join(dir, 'repair-latency.json'),
    `${JSON.stringify({ repairMs: dist.repairLatencyMs, originMs: dist.originLatencyMs })}\n`,
  );
  writeFileSync(join(dir, 'report.md'), md);
  return { summary: join(dir, 'summary.json'), report: join(dir, 'report.md'), plots };
}

/** Write → receive rows (see Summary.production): the whole stream, then the steady window. */
function productionRows(production: Summary['production']): [string, string][] {
  const mode =
    production.segmentMs === null ? production.mode : `${production.mode}, ${fmt(production.segmentMs)} ms`;
  const figures = (f: { mean: number; p90: number; p99: number }): string =>
    `${fmt(f.mean, 1)} / ${fmt(f.p90, 1)} / ${fmt(f.p99, 1)} ms`;
  const rows: [string, string][] = [];
  for (const [name, w] of [
    ['all', production.all],
    ['steady', production.steady],
  ] as const) {
    const from = `written from ${fmt(w.fromWriteMs / 1000, 1)} s`;
    rows.push(
      [
        `production (${mode}), ${name} (${from}): packets measured / not held by all; source wait mean / max`,
        `${fmt(w.packets)} / ${fmt(w.packetsNotHeldByAll)}; ${fmt(w.sourceWaitMs.mean, 1)} / ${fmt(w.sourceWaitMs.max, 1)} ms`,
      ],
      [`write → last member mean / p90 / p99, ${name}`, figures(w.writeToLastMemberMs)],
      [`write → 90% of members mean / p90 / p99, ${name}`, figures(w.writeTo90PctMs)],
      [`write → each member mean / p90 / p99, ${name}`, figures(w.writeToEachMemberMs)],
    );
  }
  return rows;
}

/** The report's cell for the rendezvous ban: who was banned, when, and what it refused. */
function banCell(ban: BanSummary): string {
  if (!ban.enabled) return 'off (--no-rendezvous-ban)';
  const when = ban.secondsToBan;
  const seconds = when === null ? '–' : `${fmt(when.p50)}/${fmt(when.p95)}/${fmt(when.max)} s`;
  return `${fmt(ban.hostileBanned)} / ${fmt(ban.honestBanned)}; ${seconds}; ${fmt(ban.messagesRefused)}`;
}
