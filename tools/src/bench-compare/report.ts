/**
 * The comparison benchmark's outputs: ratios to the control, the goals of issue 5 checked against
 * the figures, DIR/report.md and the SVG plots (origin bytes over time, live delay CDF), drawn with
 * the simulator's dependency-free plot helpers (@chunkycast/sim's plot.ts).
 */
import { cdfPlot, linePlot } from '@chunkycast/sim';
import { ARM_LABELS, type Arm, type TrialSummary } from './trial.js';

/** One goal of issue 5, checked. `margin` is signed so that negative means missed. */
export interface Goal {
  readonly setting: string;
  readonly goal: string;
  readonly target: number | null;
  readonly measured: number | null;
  readonly unit: string;
  readonly met: boolean | null;
  readonly margin: number | null;
}

/** result.json: the run's settings, environment, every trial's figures and the goals. */
export interface CompareRun {
  readonly viewers: number;
  readonly durationS: number;
  readonly command: string;
  readonly staggerMs: number;
  readonly hideVideo: boolean;
  readonly stream: {
    readonly segmentSeconds: number;
    readonly listSize: number;
    readonly video: string;
    readonly audio: string;
  };
  readonly liveSync: {
    readonly default: Readonly<Record<string, number>>;
    readonly low: Readonly<Record<string, number>>;
    readonly deep: { readonly p2pml: number | null };
  };
  readonly environment: {
    readonly node: string;
    readonly cpus: number;
    readonly cpuModel: string;
    readonly memGiB: number;
    readonly kernel: string;
    readonly chromium: string | null;
    readonly ffmpeg: string | null;
    readonly versions: Readonly<Record<string, string | null>>;
    readonly startedAt: string;
  };
  readonly methodLink: string;
  readonly elapsedS: number;
  readonly results: TrialSummary[];
  readonly goals: readonly Goal[];
  readonly failures: readonly { arm: Arm; setting: string; liveSync: number | null; error: string }[];
}

/** What the benchmark pages' `settings()` reports (demo/src/bench/*.ts), as far as the report reads it. */
interface PageSettings {
  readonly error?: string;
  readonly given?: unknown;
  readonly p2pmlEffective?: { readonly core?: unknown };
  readonly hls?: unknown;
}

const pageSettingsOf = (r: TrialSummary): PageSettings | null =>
  typeof r.pageSettings === 'object' && r.pageSettings !== null ? r.pageSettings : null;

/** The reference http trial for a setting: the same setting, or the default one for p2pml-only settings. */
function controlFor(results: readonly TrialSummary[], setting: string): TrialSummary | null {
  return (
    results.find((r) => r.arm === 'http' && r.setting === setting) ??
    results.find((r) => r.arm === 'http' && r.setting === 'default') ??
    null
  );
}

/** Fills originRatioToHttp: origin bytes per viewer-minute ÷ the control's (windows differ by a second or two). */
export function addRatios(results: TrialSummary[]): void {
  for (const r of results) {
    const control = controlFor(results, r.setting);
    r.originRatioToHttp =
      control === null ||
      control.originBytesPerViewerMinute === null ||
      !(control.originBytesPerViewerMinute > 0) ||
      r.originBytesPerViewerMinute === null
        ? null
        : Number((r.originBytesPerViewerMinute / control.originBytesPerViewerMinute).toFixed(3));
    r.controlSetting = control?.setting ?? null;
  }
}

/** Issue 14's origin targets per live position, in stream copies (issue 5's 1.1 elsewhere). */
const COPY_TARGETS: Readonly<Record<string, number>> = { default: 1.05, low: 1.2, ll: 1.3 };
/** How far the mesh's live delay p95 may exceed http's at a position (issue 14; issue 5's 0.5 s elsewhere). */
const DELAY_ALLOWANCE_MS: Readonly<Record<string, number>> = { low: 300, ll: 300 };
/** LL-HLS must stay low latency in absolute terms too (issue 14). */
const LL_DELAY_P95_MAX_MS = 3000;

/**
 * The mesh arm's goals (issues 5 and 14), checked at every N: per setting, origin ≤ the position's
 * stream copies (default 1.05, low 1.2, ll 1.3) and ≤ ½ of p2pml's per viewer-minute where p2pml ran
 * at the same setting, live delay p95 ≤ http's + 0.3 s (low, ll; 0.5 s at default) and ≤ 3 s at
 * ll, startup p95 ≤ http's + 0.3 s, no stalls. `margin` is how far from the target, signed so that
 * negative means missed.
 */
export function checkGoals(results: readonly TrialSummary[]): Goal[] {
  const goals: Goal[] = [];
  for (const mesh of results.filter((r) => r.arm === 'mesh')) {
    const http = results.find((r) => r.arm === 'http' && r.setting === mesh.setting);
    const p2pml = results.find((r) => r.arm === 'p2pml' && r.setting === mesh.setting);
    const add = (
      goal: string,
      target: number | null,
      measured: number | null,
      unit: string,
      lowerIsBetter = true,
    ): void => {
      const ok =
        target === null || measured === null ? null : lowerIsBetter ? measured <= target : measured >= target;
      const margin =
        target === null || measured === null ? null : lowerIsBetter ? target - measured : measured - target;
      goals.push({ setting: mesh.setting, goal, target, measured, unit, met: ok, margin });
    };
    const copies = COPY_TARGETS[mesh.setting] ?? 1.1;
    add(`origin media bytes ≤ ${copies} stream copies`, copies, mesh.streamCopiesFromOrigin, 'copies');
    if (p2pml !== undefined)
      add(
        'origin bytes per viewer-minute ≤ ½ of p2pml’s',
        p2pml.originBytesPerViewerMinute == null ? null : p2pml.originBytesPerViewerMinute / 2,
        mesh.originBytesPerViewerMinute,
        'B/viewer-min',
      );
    const allowanceMs = DELAY_ALLOWANCE_MS[mesh.setting] ?? 500;
    add(
      `live delay p95 ≤ http’s p95 + ${allowanceMs / 1000} s`,
      http !== undefined && http.liveDelayMsP95 !== null ? http.liveDelayMsP95 + allowanceMs : null,
      mesh.liveDelayMsP95,
      'ms',
    );
    if (mesh.setting === 'll') add('live delay p95 ≤ 3 s', LL_DELAY_P95_MAX_MS, mesh.liveDelayMsP95, 'ms');
    add(
      'startup p95 ≤ http’s p95 + 0.3 s',
      http !== undefined && http.startupMsP95 !== null ? http.startupMsP95 + 300 : null,
      mesh.startupMsP95,
      'ms',
    );
    add('no stalls', 0, mesh.stalls, 'stalls');
    if (mesh.setting === 'default')
      add(
        'first segments from neighbours: ≥ ½ of each viewer’s first 3 from the mesh',
        STARTUP_MESH_SHARE_MIN,
        startupMeshShare(mesh),
        'share',
        false,
      );
  }
  return goals;
}

/**
 * At the default position a joining viewer's first segments should come from neighbours rather
 * than the origin (issue 14): most of them, since the first viewer of a swarm has no neighbour yet.
 */
const STARTUP_MESH_SHARE_MIN = 0.5;

/** Of the viewers' first three whole segments (the player's startupSegmentsFrom… stats), the mesh's share. */
export function startupMeshShare(mesh: TrialSummary): number | null {
  let fromMesh = 0;
  let total = 0;
  for (const v of mesh.perViewer) {
    const m = v.extra.startupSegmentsFromMesh;
    const o = v.extra.startupSegmentsFromOrigin;
    if (typeof m !== 'number' || typeof o !== 'number') continue;
    fromMesh += m;
    total += m + o;
  }
  return total === 0 ? null : Number((fromMesh / total).toFixed(3));
}

/** A millisecond figure of a viewer's extra stats, rounded, or — when absent. */
function msText(value: number | string | boolean | null | undefined): string {
  return typeof value === 'number' ? String(Math.round(value)) : '—';
}

/** One line of evidence per missed goal, from the figures of the same run. */
function whyLines(run: CompareRun): string[] {
  const lines: string[] = [];
  const find = (arm: Arm, setting: string): TrialSummary | undefined =>
    run.results.find((r) => r.arm === arm && r.setting === setting);
  for (const g of run.goals.filter((x) => x.met === false)) {
    const mesh = find('mesh', g.setting);
    const http = find('http', g.setting);
    const p2pml = find('p2pml', g.setting);
    if (mesh === undefined) continue;
    const copies = (bytes: number | null): string =>
      bytes !== null && mesh.producedBytes > 0 ? (bytes / mesh.producedBytes).toFixed(2) : '—';
    const extraSum = (key: string): number =>
      mesh.perViewer.reduce((a, v) => {
        const value = v.extra[key];
        return a + (typeof value === 'number' ? value : 0);
      }, 0);
    const busy = `machine ${mesh.machineBusyPct ?? '—'}% busy of ${100 * run.environment.cpus}%`;
    if (g.goal.startsWith('origin media bytes'))
      lines.push(
        `${g.setting}, origin copies: the true source fetched ${copies(mesh.originSourceMediaBytes)} copies and the viewers ${copies(mesh.originViewerMediaBytes)} ` +
          `(${extraSum('segmentsFromOrigin')} whole segments and ` +
          `${extraSum('segmentsCompletedFromOrigin')} completions from the origin; ` +
          `mesh share ${pct(mesh.p2pShare)}); a ${run.durationS} s window also holds every viewer's start-up.`,
      );
    else if (g.goal.includes('p2pml'))
      lines.push(
        `${g.setting}, against p2pml: mesh ${mib(mesh.originBytesPerViewerMinute)} vs p2pml ${mib(p2pml?.originBytesPerViewerMinute)} MiB per viewer-minute.`,
      );
    else if (g.goal.startsWith('live delay'))
      lines.push(
        `${g.setting}, live delay: mesh p50 / p95 ${s1(mesh.liveDelayMsP50)} / ${s1(mesh.liveDelayMsP95)} s vs http ${s1(http?.liveDelayMsP50)} / ${s1(http?.liveDelayMsP95)} s ` +
          `(the mesh player's own figure: ${s1(mesh.armOwnLiveDelayMsP50)} / ${s1(mesh.armOwnLiveDelayMsP95)} s); ${busy}.`,
      );
    else if (g.goal.startsWith('startup'))
      lines.push(
        `${g.setting}, startup: mesh per viewer ${mesh.perViewer.map((v) => s1(v.startupMs)).join(', ')} s vs http ${http?.perViewer.map((v) => s1(v.startupMs)).join(', ') ?? '—'} s; ${busy}.`,
      );
    else if (g.goal.startsWith('first segments'))
      lines.push(
        `${g.setting}, first segments: from the mesh / origin per viewer ${mesh.perViewer.map((v) => `${String(v.extra.startupSegmentsFromMesh ?? '—')}/${String(v.extra.startupSegmentsFromOrigin ?? '—')}`).join(', ')}; ` +
          `tracker welcome / first connection started / first data channel open per viewer ${mesh.perViewer.map((v) => `${msText(v.extra.welcomeAfterMs)}/${msText(v.extra.firstDialAfterMs)}/${msText(v.extra.firstLinkAfterMs)}`).join(', ')} ms after the session started.`,
      );
    else if (g.goal === 'no stalls')
      lines.push(
        `${g.setting}, stalls: per viewer ${mesh.perViewer.map((v) => v.stalls ?? '—').join(', ')} (${s1(mesh.stallMs)} s in all; http ${http?.stalls ?? '—'}); ${busy}.`,
      );
  }
  return lines;
}

const s1 = (ms: number | null | undefined): string =>
  ms === null || ms === undefined ? '—' : (ms / 1000).toFixed(2);
const mib = (b: number | null | undefined): string =>
  b === null || b === undefined ? '—' : (b / 1048576).toFixed(2);
const pct = (x: number | null | undefined): string =>
  x === null || x === undefined ? '—' : `${(100 * x).toFixed(1)}%`;
const num = (x: number | null | undefined, d = 2): string =>
  x === null || x === undefined ? '—' : x.toFixed(d);

function formatGoalValue(value: number | null, unit: string): string {
  if (value === null) return '—';
  if (unit === 'ms') return `${(value / 1000).toFixed(2)} s`;
  if (unit === 'B/viewer-min') return `${(value / 1048576).toFixed(2)} MiB`;
  if (unit === 'copies') return value.toFixed(3);
  if (unit === 'share') return `${(100 * value).toFixed(1)}%`;
  return String(value);
}

function groupTitle(group: string): string {
  return group === 'low' ? '1 segment behind' : group === 'll' ? 'LL-HLS' : 'default position';
}

/** The SVG plots: per live position, origin bytes over time and the live delay CDF, one line per arm. */
export function plots(run: CompareRun): Record<string, string> {
  const files: Record<string, string> = {};
  const groups = new Map<string, TrialSummary[]>();
  for (const r of run.results) {
    // p2pml-only settings are drawn with the default position's arms, for comparison.
    const group = r.setting === 'low' || r.setting === 'll' ? r.setting : 'default';
    groups.set(group, [...(groups.get(group) ?? []), r]);
  }
  for (const [group, rows] of groups) {
    const name = (r: TrialSummary): string =>
      `${r.arm}${r.setting === group ? '' : ` (${r.setting})`}, liveSync ${r.liveSyncSegments ?? 'auto'}`;
    const copy = rows.find((r) => r.arm === 'http') ?? rows[0];
    const oneCopy =
      copy === undefined
        ? []
        : [
            {
              name: 'one stream copy (segments produced)',
              points: copy.producedSeries.map((p) => ({ x: p.tS, y: p.bytes / 1048576 })),
            },
          ];
    files[`origin-bytes-${group}.svg`] = linePlot({
      title: `Origin media bytes over time, ${run.viewers} viewers (${groupTitle(group)})`,
      xLabel: 'seconds since the first viewer opened',
      yLabel: 'origin media MiB (cumulative)',
      yMin: 0,
      series: [
        ...rows.map((r) => ({
          name: name(r),
          points: r.originSeries.map((p) => ({ x: p.tS, y: p.mediaBytes / 1048576 })),
        })),
        ...oneCopy,
      ],
    });
    files[`live-delay-cdf-${group}.svg`] = cdfPlot({
      title: `Live delay, ${run.viewers} viewers (${groupTitle(group)})`,
      xLabel: 'live delay, s (packager finished the segment → viewer plays it)',
      series: rows.map((r) => ({ name: name(r), values: r.liveDelaySamplesMs.map((d) => d / 1000) })),
    });
  }
  return files;
}

export function reportMarkdown(run: CompareRun, plotFiles: Readonly<Record<string, string>>): string {
  const rows = run.results.map(
    (r) =>
      `| ${r.setting} | ${r.arm} | ${r.liveSyncSegments ?? 'auto'} | ${mib(r.originMediaBytes)} | ${mib(r.originBytesPerViewerMinute)} | ${num(r.originRatioToHttp, 3)} | ${num(r.streamCopiesFromOrigin)} | ${pct(r.p2pShare)} | ${s1(r.startupMsP50)} / ${s1(r.startupMsP95)} | ${r.stalls} (${s1(r.stallMs)} s) | ${s1(r.liveDelayMsP50)} / ${s1(r.liveDelayMsP95)} | ${num(r.cpuPerViewerPct, 1)} | ${num(r.memPerViewerMB, 0)} |`,
  );
  const goalRows = run.goals.map(
    (g) =>
      `| ${g.setting} | ${g.goal} | ${formatGoalValue(g.target, g.unit)} | ${formatGoalValue(g.measured, g.unit)} | ${g.met === null ? 'n/a' : g.met ? 'met' : '**missed**'} | ${g.met === false && g.margin !== null ? `by ${formatGoalValue(-g.margin, g.unit)}` : ''} |`,
  );
  const detailRows = run.results.map(
    (r) =>
      `| ${r.setting} | ${r.arm} | ${mib(r.originSourceMediaBytes)} | ${mib(r.originViewerMediaBytes)} | ${r.originMediaRequests ?? '—'} | ${mib(r.originPlaylistBytes)} | ${r.producedSegments} (${mib(r.producedBytes)}) | ${r.playingAtEnd}/${r.viewers} | ${r.neverPlayed} | ${r.stuckIntervals} | ${num(r.rendererCpuPerViewerPct, 1)} | ${num(r.rendererMemPerViewerMB, 0)} | ${r.machineBusyPct ?? '—'}% |`,
  );
  // CPU by Chromium process type (all viewers together) and the tracker's: where an arm's cost lands.
  const types = [...new Set(run.results.flatMap((r) => Object.keys(r.cpuByProcessTypePct)))].sort();
  const cpuRows = run.results.map(
    (r) =>
      `| ${r.setting} | ${r.arm} | ${types.map((t) => num(r.cpuByProcessTypePct[t] ?? null, 1)).join(' | ')} | ${num(r.trackerCpuPct ?? null, 1)} |`,
  );
  const p2pml = run.results.find((r) => {
    const settings = pageSettingsOf(r);
    return r.arm === 'p2pml' && settings !== null && settings.error === undefined;
  });
  const p2pmlSettings = p2pml === undefined ? null : pageSettingsOf(p2pml);
  const problems: string[] = [];
  for (const r of run.results) {
    if (r.neverPlayed > 0) problems.push(`${r.arm} @ ${r.setting}: ${r.neverPlayed} viewer(s) never played.`);
    const errs = r.perViewer.flatMap((v) => v.pageErrors);
    if (errs.length > 0)
      problems.push(`${r.arm} @ ${r.setting}: page errors: ${[...new Set(errs)].slice(0, 3).join('; ')}`);
    if (r.machineBusyPct !== null && r.machineBusyPct > 90 * run.environment.cpus)
      problems.push(
        `${r.arm} @ ${r.setting}: the machine was ${r.machineBusyPct}% busy (of ${100 * run.environment.cpus}%): CPU-bound, so stalls and delays there may be the machine's, not the arm's.`,
      );
  }
  const misses = whyLines(run);
  // String(null) is "null", as the template literal printed a missing version before.
  const version = (name: string): string => String(run.environment.versions[name] ?? null);
  const images = Object.keys(plotFiles)
    .sort()
    .map((f) => `![${f}](${f})`)
    .join('\n\n');
  return `# Origin load and playback: plain hls.js, p2p-media-loader, Chunkycast mesh — ${run.viewers} viewers, ${run.durationS} s

Command: \`${run.command}\`

Machine: ${run.environment.cpus} × ${run.environment.cpuModel}, ${run.environment.memGiB} GiB, ${run.environment.kernel}.
Software: Node ${run.environment.node}; ${String(run.environment.chromium)}; ${String(run.environment.ffmpeg)};
hls.js ${version('hls.js')}; p2p-media-loader-core / -hlsjs ${version('p2p-media-loader-core')} / ${version('p2p-media-loader-hlsjs')};
bittorrent-tracker ${version('bittorrent-tracker')}. Started ${run.environment.startedAt}; the run took ${Math.round(run.elapsedS)} s.

Each row is a fresh swarm of ${run.viewers} headless Chromium viewers (one browser, one page each, opened
${run.staggerMs} ms apart) watching the same ffmpeg live stream (2 s segments, ${run.stream.listSize}-segment playlist,
~0.9 Mbit/s) from the same origin (the tracker's /live/, which counts the media bytes it serves),
for ${run.durationS} s after the last viewer opened${run.hideVideo ? ' (videos hidden with display: none: decoded, not painted)' : ''}.
Arms: ${Object.values(ARM_LABELS).join('; ')}.
Position: hls.js \`liveSyncDurationCount\` (<mesh-player>'s \`live-sync\`) in segments behind the live edge.
The method and every setting are explained in [docs/benchmarks/README.md](${run.methodLink}).

| setting | arm | live sync | origin media MiB | MiB / viewer-min | ratio to http | stream copies | p2p share (own figure) | startup p50 / p95 s | stalls (total s) | live delay p50 / p95 s | CPU % / viewer | MiB / viewer |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}

## Goals (issues 5 and 14, mesh arm; set for N = 8 and 16)

| setting | goal | target | measured | | missed by |
|---|---|---|---|---|---|
${goalRows.join('\n')}

${misses.length === 0 ? '' : `What the figures say about the misses (the causes need a reading of the run):\n\n${misses.map((m) => `- ${m}`).join('\n')}\n`}
## Details

| setting | arm | origin → true source MiB | origin → viewers MiB | media requests | playlist MiB | segments produced (MiB) | playing at end | never played | stuck 2 s intervals | renderer CPU % / viewer | renderer MiB / viewer | machine busy |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
${detailRows.join('\n')}

CPU, % of one core, all viewers together, after the last viewer opened (the network service carries
every page's WebRTC sockets; the tracker process also runs the true source in the mesh arm):

| setting | arm | ${types.join(' | ')} | tracker |
|---|---|${types.map(() => '---|').join('')}---|
${cpuRows.join('\n')}

${problems.length === 0 ? 'No viewer failed to play and no page reported an error.' : problems.map((p) => `- ${p}`).join('\n')}

## Plots

${images}

## p2p-media-loader settings used

Given by the page (everything else is the library's default):

\`\`\`json
${JSON.stringify(p2pmlSettings?.given ?? null, null, 2)}
\`\`\`

In force in the running library (\`HlsJsP2PEngine.getConfig()\`, functions omitted) and hls.js's
resulting settings (p2p-media-loader lowers \`maxBufferLength\` itself):

\`\`\`json
${JSON.stringify({ core: p2pmlSettings?.p2pmlEffective?.core ?? null, hls: p2pmlSettings?.hls ?? null }, null, 2)}
\`\`\`
`;
}
