// The comparison benchmark's outputs: ratios to the control, the goals of issue 5 checked against
// the figures, DIR/report.md and the SVG plots (origin bytes over time, live delay CDF), drawn with
// the simulator's dependency-free plot helpers (packages/sim/dist/plot.js).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { root } from '../harness.mjs';
import { ARM_LABELS } from './compare.mjs';

/** The reference http trial for a setting: the same setting, or the default one for p2pml-only settings. */
function controlFor(results, setting) {
  return (
    results.find((r) => r.arm === 'http' && r.setting === setting) ??
    results.find((r) => r.arm === 'http' && r.setting === 'default') ??
    null
  );
}

/** Fills originRatioToHttp: origin bytes per viewer-minute ÷ the control's (windows differ by a second or two). */
export function addRatios(results) {
  for (const r of results) {
    const control = controlFor(results, r.setting);
    r.originRatioToHttp =
      control === null || !(control.originBytesPerViewerMinute > 0)
        ? null
        : Number((r.originBytesPerViewerMinute / control.originBytesPerViewerMinute).toFixed(3));
    r.controlSetting = control?.setting ?? null;
  }
}

/**
 * Issue 5's goals for the mesh arm (set for N = 16, checked at every N): per setting, origin ≤ 1.1
 * stream copies and ≤ ½ of p2pml's (per viewer-minute, same setting), live delay p95 ≤ http's +
 * 0.5 s, startup p95 ≤ http's + 0.3 s, no stalls. `margin` is how far from the target, signed so
 * that negative means missed.
 */
export function checkGoals(results) {
  const goals = [];
  for (const mesh of results.filter((r) => r.arm === 'mesh')) {
    const http = results.find((r) => r.arm === 'http' && r.setting === mesh.setting);
    const p2pml = results.find((r) => r.arm === 'p2pml' && r.setting === mesh.setting);
    const add = (goal, target, measured, unit, lowerIsBetter = true) => {
      const ok =
        target === null || measured === null ? null : lowerIsBetter ? measured <= target : measured >= target;
      const margin =
        target === null || measured === null ? null : lowerIsBetter ? target - measured : measured - target;
      goals.push({ setting: mesh.setting, goal, target, measured, unit, met: ok, margin });
    };
    add('origin media bytes ≤ 1.1 stream copies', 1.1, mesh.streamCopiesFromOrigin, 'copies');
    add(
      'origin bytes per viewer-minute ≤ ½ of p2pml’s',
      p2pml ? p2pml.originBytesPerViewerMinute / 2 : null,
      mesh.originBytesPerViewerMinute,
      'B/viewer-min',
    );
    add(
      'live delay p95 ≤ http’s p95 + 0.5 s',
      http && http.liveDelayMsP95 !== null ? http.liveDelayMsP95 + 500 : null,
      mesh.liveDelayMsP95,
      'ms',
    );
    add(
      'startup p95 ≤ http’s p95 + 0.3 s',
      http && http.startupMsP95 !== null ? http.startupMsP95 + 300 : null,
      mesh.startupMsP95,
      'ms',
    );
    add('no stalls', 0, mesh.stalls, 'stalls');
  }
  return goals;
}

/** One line of evidence per missed goal, from the figures of the same run. */
function whyLines(run) {
  const lines = [];
  const find = (arm, setting) => run.results.find((r) => r.arm === arm && r.setting === setting);
  for (const g of run.goals.filter((x) => x.met === false)) {
    const mesh = find('mesh', g.setting);
    const http = find('http', g.setting);
    const p2pml = find('p2pml', g.setting);
    if (mesh === undefined) continue;
    const copies = (bytes) => (mesh.producedBytes > 0 ? (bytes / mesh.producedBytes).toFixed(2) : '—');
    const busy = `machine ${mesh.machineBusyPct ?? '—'}% busy of ${100 * run.environment.cpus}%`;
    if (g.goal.startsWith('origin media bytes'))
      lines.push(
        `${g.setting}, origin copies: the true source fetched ${copies(mesh.originSourceMediaBytes)} copies and the viewers ${copies(mesh.originViewerMediaBytes)} ` +
          `(${mesh.perViewer.reduce((a, v) => a + (v.extra.segmentsFromOrigin ?? 0), 0)} whole segments and ` +
          `${mesh.perViewer.reduce((a, v) => a + (v.extra.segmentsCompletedFromOrigin ?? 0), 0)} completions from the origin; ` +
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
    else if (g.goal === 'no stalls')
      lines.push(
        `${g.setting}, stalls: per viewer ${mesh.perViewer.map((v) => v.stalls ?? '—').join(', ')} (${s1(mesh.stallMs)} s in all; http ${http?.stalls ?? '—'}); ${busy}.`,
      );
  }
  return lines;
}

const s1 = (ms) => (ms === null || ms === undefined ? '—' : (ms / 1000).toFixed(2));
const mib = (b) => (b === null || b === undefined ? '—' : (b / 1048576).toFixed(2));
const pct = (x) => (x === null || x === undefined ? '—' : `${(100 * x).toFixed(1)}%`);
const num = (x, d = 2) => (x === null || x === undefined ? '—' : x.toFixed(d));

function formatGoalValue(value, unit) {
  if (value === null) return '—';
  if (unit === 'ms') return `${(value / 1000).toFixed(2)} s`;
  if (unit === 'B/viewer-min') return `${(value / 1048576).toFixed(2)} MiB`;
  if (unit === 'copies') return value.toFixed(3);
  return String(value);
}

/** The SVG plots: per live position, origin bytes over time and the live delay CDF, one line per arm. */
export async function plots(run) {
  const { cdfPlot, linePlot } = await import(pathToFileURL(join(root, 'packages/sim/dist/plot.js')).href);
  const files = {};
  const groups = new Map();
  for (const r of run.results) {
    // p2pml-only settings are drawn with the default position's arms, for comparison.
    const group = r.setting === 'low' ? 'low' : 'default';
    groups.set(group, [...(groups.get(group) ?? []), r]);
  }
  for (const [group, rows] of groups) {
    const name = (r) =>
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
      title: `Origin media bytes over time, ${run.viewers} viewers (${group === 'low' ? 'low latency' : 'default position'})`,
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
      title: `Live delay, ${run.viewers} viewers (${group === 'low' ? 'low latency' : 'default position'})`,
      xLabel: 'live delay, s (packager finished the segment → viewer plays it)',
      series: rows.map((r) => ({ name: name(r), values: r.liveDelaySamplesMs.map((d) => d / 1000) })),
    });
  }
  return files;
}

export function reportMarkdown(run, plotFiles) {
  const rows = run.results.map(
    (r) =>
      `| ${r.setting} | ${r.arm} | ${r.liveSyncSegments ?? 'auto'} | ${mib(r.originMediaBytes)} | ${mib(r.originBytesPerViewerMinute)} | ${num(r.originRatioToHttp, 3)} | ${num(r.streamCopiesFromOrigin)} | ${pct(r.p2pShare)} | ${s1(r.startupMsP50)} / ${s1(r.startupMsP95)} | ${r.stalls} (${s1(r.stallMs)} s) | ${s1(r.liveDelayMsP50)} / ${s1(r.liveDelayMsP95)} | ${num(r.cpuPerViewerPct, 1)} | ${num(r.memPerViewerMB, 0)} |`,
  );
  const goalRows = run.goals.map(
    (g) =>
      `| ${g.setting} | ${g.goal} | ${formatGoalValue(g.target, g.unit)} | ${formatGoalValue(g.measured, g.unit)} | ${g.met === null ? 'n/a' : g.met ? 'met' : '**missed**'} | ${g.met === false ? `by ${formatGoalValue(-g.margin, g.unit)}` : ''} |`,
  );
  const detailRows = run.results.map(
    (r) =>
      `| ${r.setting} | ${r.arm} | ${mib(r.originSourceMediaBytes)} | ${mib(r.originViewerMediaBytes)} | ${r.originMediaRequests ?? '—'} | ${mib(r.originPlaylistBytes)} | ${r.producedSegments} (${mib(r.producedBytes)}) | ${r.playingAtEnd}/${r.viewers} | ${r.neverPlayed} | ${r.stuckIntervals} | ${num(r.rendererCpuPerViewerPct, 1)} | ${num(r.rendererMemPerViewerMB, 0)} | ${r.machineBusyPct ?? '—'}% |`,
  );
  const p2pml = run.results.find((r) => r.arm === 'p2pml' && r.pageSettings && !r.pageSettings.error);
  const problems = [];
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
  const images = Object.keys(plotFiles)
    .sort()
    .map((f) => `![${f}](${f})`)
    .join('\n\n');
  return `# Origin load and playback: plain hls.js, p2p-media-loader, Chunkycast mesh — ${run.viewers} viewers, ${run.durationS} s

Command: \`${run.command}\`

Machine: ${run.environment.cpus} × ${run.environment.cpuModel}, ${run.environment.memGiB} GiB, ${run.environment.kernel}.
Software: Node ${run.environment.node}; ${run.environment.chromium}; ${run.environment.ffmpeg};
hls.js ${run.environment.versions['hls.js']}; p2p-media-loader-core / -hlsjs ${run.environment.versions['p2p-media-loader-core']} / ${run.environment.versions['p2p-media-loader-hlsjs']};
bittorrent-tracker ${run.environment.versions['bittorrent-tracker']}. Started ${run.environment.startedAt}; the run took ${Math.round(run.elapsedS)} s.

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

## Goals (issue 5, mesh arm; set for N = 16)

| setting | goal | target | measured | | missed by |
|---|---|---|---|---|---|
${goalRows.join('\n')}

${misses.length === 0 ? '' : `What the figures say about the misses (the causes need a reading of the run):\n\n${misses.map((m) => `- ${m}`).join('\n')}\n`}
## Details

| setting | arm | origin → true source MiB | origin → viewers MiB | media requests | playlist MiB | segments produced (MiB) | playing at end | never played | stuck 2 s intervals | renderer CPU % / viewer | renderer MiB / viewer | machine busy |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
${detailRows.join('\n')}

${problems.length === 0 ? 'No viewer failed to play and no page reported an error.' : problems.map((p) => `- ${p}`).join('\n')}

## Plots

${images}

## p2p-media-loader settings used

Given by the page (everything else is the library's default):

\`\`\`json
${JSON.stringify(p2pml?.pageSettings?.given ?? null, null, 2)}
\`\`\`

In force in the running library (\`HlsJsP2PEngine.getConfig()\`, functions omitted) and hls.js's
resulting settings (p2p-media-loader lowers \`maxBufferLength\` itself):

\`\`\`json
${JSON.stringify({ core: p2pml?.pageSettings?.p2pmlEffective?.core ?? null, hls: p2pml?.pageSettings?.hls ?? null }, null, 2)}
\`\`\`
`;
}
