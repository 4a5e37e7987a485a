/** bench:cost's figures, goals (issue 17) and Markdown report. */
import type { ThreadCpu, ThreadCpuRow } from '../bench-compare/browser-threads.js';
import type { CompareRun } from '../bench-compare/report.js';
import { ARRAY_BUFFER_PARTITION, MEMORY_PARTS, type MemoryByPart } from '../lib/memory-dump.js';

export interface CostRow {
  readonly viewers: number;
  readonly arm: string;
  /** % of one core per viewer: all renderer processes ÷ viewers (the steady part of the window). */
  readonly rendererCpuPerViewerPct: number | null;
  /** The same for every Chromium process (browser, GPU, network service, renderers). */
  readonly chromiumCpuPerViewerPct: number | null;
  readonly cpuByProcessTypePct: Readonly<Record<string, number>>;
  /** Proportional set size, MiB per viewer. */
  readonly rendererMemPerViewerMB: number | null;
  /** Private footprint (RssAnon + VmSwap, Chromium's own measure), MiB per viewer, averaged likewise. */
  readonly rendererFootprintPerViewerMB: number | null;
  readonly chromiumMemPerViewerMB: number | null;
  readonly jsHeapPerViewerMB: number | null;
  /** Summed over the viewers at the end (getVideoPlaybackQuality). */
  readonly droppedFrames: number | null;
  readonly totalFrames: number | null;
  readonly stalls: number;
  readonly neverPlayed: number;
  readonly playingAtEnd: number;
  readonly p2pShare: number | null;
  readonly streamCopiesFromOrigin: number | null;
  /** % of one core: the tracker process (origin and signalling). */
  readonly trackerCpuPct: number | null;
  /** % of one core: the true source's own process (mesh only). */
  readonly sourceCpuPct: number | null;
  readonly sourceCpuPerSlicePct: number | null;
  readonly machineBusyPct: number | null;
  readonly windowS: number | null;
  /**
   * CPU by thread name of all renderers, % of one core ÷ viewers, busiest first (every name; the
   * report keeps the busiest). Over the steady part, like rendererCpuPerViewerPct. Null: not read.
   */
  readonly rendererThreads: readonly ThreadCpuRow[] | null;
  /** The same for the network service process (shared by the viewers, so ÷ viewers too). */
  readonly networkServiceThreads: readonly ThreadCpuRow[] | null;
  /** How the thread figures were read, and what they could not attribute. */
  readonly threadSampling: ThreadSampling | null;
  readonly profile: {
    readonly profiledMs: number;
    readonly busyMs: number;
    readonly parts: Readonly<Record<string, number>>;
    readonly functions: readonly { readonly name: string; readonly selfMs: number }[];
  } | null;
  /**
   * The renderers' memory by allocator from a memory-infra dump at the end of the window, MiB ÷
   * viewers (every process the dump names `Renderer`: one per viewer page, as the first viewer takes
   * the blank page). Null: no dump (or it failed).
   */
  readonly rendererMemoryByPart: MemoryByPart | null;
  /** The same after a full garbage collection in every page: what the pages still hold. */
  readonly rendererMemoryAfterCollectionByPart: MemoryByPart | null;
}

/**
 * ThreadCpu's counts: threads at the start and the end, those that appeared and vanished in the
 * window, and what could not be read.
 */
export type ThreadCounts = Pick<
  ThreadCpu,
  | 'threadsAtStart'
  | 'threadsAtEnd'
  | 'threadsAppeared'
  | 'threadsVanished'
  | 'threadsUnreadable'
  | 'processesGone'
>;

/** How the thread figures were read. */
export interface ThreadSampling extends ThreadCounts {
  /** Between the two thread readings, s. */
  readonly windowS: number;
  /**
   * % of one core ÷ viewers the processes used that no thread at the end accounts for: threads
   * that exited during the window (or could not be read at its end).
   */
  readonly rendererUnattributedCpuPctPerViewer: number | null;
  /** The renderer processes' own total over the same readings: the threads and the above add up to it. */
  readonly rendererProcessesCpuPctPerViewer: number | null;
  readonly networkServiceUnattributedCpuPctPerViewer: number | null;
  readonly networkServiceProcessesCpuPctPerViewer: number | null;
}

export interface CostRun {
  readonly command: string;
  readonly durationS: number;
  readonly hideVideo: boolean;
  readonly profileS: number;
  /** The machine, as bench:compare records it (without the player and tool versions). */
  readonly environment: Pick<
    CompareRun['environment'],
    'node' | 'cpus' | 'cpuModel' | 'memGiB' | 'kernel' | 'startedAt'
  >;
  readonly elapsedS: number;
  readonly rows: readonly CostRow[];
  readonly failures: readonly { readonly viewers: number; readonly arm: string; readonly error: string }[];
}

export interface CostGoal {
  readonly viewers: number;
  readonly goal: string;
  readonly target: number;
  readonly measured: number | null;
  /** null: not measured (a trial failed or had no figure). */
  readonly met: boolean | null;
}

/** Issue 17's ratio limit, mesh ÷ plain hls.js, for renderer CPU and memory per viewer. */
export const COST_RATIO_LIMIT = 1.2;
/** The viewer counts the issue sets its goals at. */
const GOAL_VIEWERS = [8, 16] as const;

/** Issue 17's goals at the viewer counts that ran. */
export function costGoals(rows: readonly CostRow[]): CostGoal[] {
  const goals: CostGoal[] = [];
  const ratio = (a: number | null | undefined, b: number | null | undefined): number | null =>
    a === null || a === undefined || b === null || b === undefined || b <= 0 ? null : a / b;
  const judge = (measured: number | null, target: number): boolean | null =>
    measured === null ? null : measured <= target;
  for (const n of GOAL_VIEWERS) {
    const http = rows.find((r) => r.viewers === n && r.arm === 'http');
    const mesh = rows.find((r) => r.viewers === n && r.arm === 'mesh');
    if (http === undefined && mesh === undefined) continue;
    const cpu = ratio(mesh?.rendererCpuPerViewerPct, http?.rendererCpuPerViewerPct);
    goals.push({
      viewers: n,
      goal: 'renderer CPU per viewer, mesh ÷ http',
      target: COST_RATIO_LIMIT,
      measured: cpu,
      met: judge(cpu, COST_RATIO_LIMIT),
    });
    const mem = ratio(mesh?.rendererMemPerViewerMB, http?.rendererMemPerViewerMB);
    goals.push({
      viewers: n,
      goal: 'renderer memory per viewer, mesh ÷ http',
      target: COST_RATIO_LIMIT,
      measured: mem,
      met: judge(mem, COST_RATIO_LIMIT),
    });
    if (n === 16) {
      const stalls = mesh === undefined ? null : mesh.stalls + mesh.neverPlayed;
      goals.push({
        viewers: n,
        goal: 'mesh stalls (and viewers that never played)',
        target: 0,
        measured: stalls,
        met: judge(stalls, 0),
      });
      const dropped = mesh?.droppedFrames ?? null;
      const httpDropped = http?.droppedFrames ?? null;
      goals.push({
        viewers: n,
        goal: 'mesh dropped frames, at most plain hls.js’s',
        target: httpDropped ?? Number.NaN,
        measured: dropped,
        met: dropped === null || httpDropped === null ? null : dropped <= httpDropped,
      });
    }
  }
  return goals;
}

/** A server's CPU shared out over the viewers it served (null: not measured). */
const perViewer = (pct: number | null, viewers: number): number | null =>
  pct === null || viewers <= 0 ? null : pct / viewers;
const num = (x: number | null | undefined, digits = 1): string =>
  x === null || x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits);
const pct = (x: number | null): string => (x === null ? '—' : `${(100 * x).toFixed(1)}%`);

/** One row of an arms table: its label and its figure for a trial (null: —). */
type ArmsRow = readonly [label: string, value: (r: CostRow) => number | null];

/**
 * A Markdown table with one column per viewer count comparing the arms of the trials `measured`
 * (http → mesh), a header cell `head` and a row per `rows`, figures to `digits` decimals.
 */
function armsTable(
  measured: readonly CostRow[],
  head: string,
  rows: readonly ArmsRow[],
  digits: number,
): string {
  const counts = [...new Set(measured.map((r) => r.viewers))].sort((a, b) => a - b);
  const columns = counts.map((n) => ({ n, trials: measured.filter((r) => r.viewers === n) }));
  return [
    `| ${head} | ${columns.map((c) => `${c.n} viewers, ${c.trials.map((r) => r.arm).join(' → ')}`).join(' | ')} |`,
    `|---|${columns.map(() => '---|').join('')}`,
    ...rows.map(
      ([label, value]) =>
        `| ${label} | ${columns.map((c) => c.trials.map((r) => num(value(r), digits)).join(' → ')).join(' | ')} |`,
    ),
  ].join('\n');
}

/** Thread names a thread table lists by name; the rest make one "other" row, so the table stays short. */
export const THREAD_TABLE_NAMES = 10;

/**
 * A Markdown table of CPU by thread name, % of one core per viewer: a row per name (the busiest
 * over all trials, by their largest figure in any), one column per viewer count comparing the
 * arms (http → mesh), then the rest, the time of threads that exited, and the processes' total.
 * Null if no trial has thread figures.
 */
export function threadTable(
  rows: readonly CostRow[],
  threadsOf: (r: CostRow) => readonly ThreadCpuRow[] | null,
  unattributedOf: (s: ThreadSampling) => number | null,
  totalOf: (s: ThreadSampling) => number | null,
): string | null {
  const measured = rows.filter((r) => threadsOf(r) !== null);
  if (measured.length === 0) return null;
  const largest = new Map<string, number>();
  for (const r of measured)
    for (const t of threadsOf(r) ?? [])
      largest.set(t.name, Math.max(largest.get(t.name) ?? 0, t.cpuPctPerViewer));
  const ranked = [...largest].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([name]) => name);
  const named = ranked.slice(0, THREAD_TABLE_NAMES);
  const rest = ranked.length - named.length;
  const figureOf = (r: CostRow, name: string): number =>
    threadsOf(r)?.find((t) => t.name === name)?.cpuPctPerViewer ?? 0;
  const lines: ArmsRow[] = [
    ...named.map((name): ArmsRow => [`\`${name.replaceAll('|', '\\|')}\``, (r) => figureOf(r, name)]),
    ...(rest > 0
      ? [
          [
            `other (${rest} names)`,
            (r: CostRow) =>
              (threadsOf(r) ?? [])
                .filter((t) => !named.includes(t.name))
                .reduce((a, t) => a + t.cpuPctPerViewer, 0),
          ] as const,
        ]
      : []),
    [
      'threads that exited in the window',
      (r) => (r.threadSampling === null ? null : unattributedOf(r.threadSampling)),
    ],
    ['all (the processes’ own total)', (r) => (r.threadSampling === null ? null : totalOf(r.threadSampling))],
  ];
  return armsTable(measured, 'thread', lines, 2);
}

/**
 * A Markdown table of the renderers' memory by allocator, MiB per viewer: a row per part and the
 * private footprint, one column per viewer count comparing the arms (http → mesh). Null if no
 * trial has a dump.
 */
export function memoryPartsTable(
  rows: readonly CostRow[],
  partsOf: (r: CostRow) => MemoryByPart | null,
): string | null {
  const measured = rows.filter((r) => partsOf(r) !== null);
  if (measured.length === 0) return null;
  const of =
    (value: (m: MemoryByPart) => number | null) =>
    (r: CostRow): number | null => {
      const m = partsOf(r);
      return m === null ? null : value(m);
    };
  return armsTable(
    measured,
    'part',
    [
      ...MEMORY_PARTS.flatMap((part): ArmsRow[] => {
        const row: ArmsRow = [`${part.name}: ${part.what}`, of((m) => m.partsMiB[part.name] ?? null)];
        if (part.path !== ARRAY_BUFFER_PARTITION) return [row];
        // Within that part, not a part of its own: what live buffers occupy of it.
        return [
          row,
          [
            '… of which live buffers (the rest: freed slots kept resident)',
            of((m) => m.arrayBuffersInUseMiB ?? null) /* absent from older result.json */,
          ],
        ];
      }),
      ['other: the footprint less the parts', of((m) => m.otherMiB)],
      ['**private footprint**', of((m) => m.privateFootprintMiB)],
    ],
    1,
  );
}

export function costReport(run: CostRun): { markdown: string; goals: CostGoal[] } {
  const goals = costGoals(run.rows);
  const rows = run.rows.map(
    (r) =>
      `| ${r.viewers} | ${r.arm} | ${num(r.rendererCpuPerViewerPct)} | ${num(r.chromiumCpuPerViewerPct)} | ${num(r.rendererMemPerViewerMB, 0)} | ${num(r.rendererFootprintPerViewerMB, 0)} | ${num(r.jsHeapPerViewerMB)} | ${r.droppedFrames ?? '—'} / ${r.totalFrames ?? '—'} | ${r.stalls}${r.neverPlayed > 0 ? ` (+${r.neverPlayed} never played)` : ''} | ${pct(r.p2pShare)} | ${num(r.streamCopiesFromOrigin, 2)} | ${num(r.trackerCpuPct)} (${num(perViewer(r.trackerCpuPct, r.viewers), 2)}) | ${num(r.sourceCpuPct)} (${num(perViewer(r.sourceCpuPct, r.viewers), 2)}, ${num(r.sourceCpuPerSlicePct, 2)}) | ${r.machineBusyPct ?? '—'}% |`,
  );
  const types = [...new Set(run.rows.flatMap((r) => Object.keys(r.cpuByProcessTypePct)))].sort();
  const typeRows = run.rows.map(
    (r) =>
      `| ${r.viewers} | ${r.arm} | ${types.map((t) => num(r.cpuByProcessTypePct[t] ?? null)).join(' | ')} |`,
  );
  const goalRows = goals.map(
    (g) =>
      `| ${g.viewers} | ${g.goal} | ≤ ${num(g.target, g.target === COST_RATIO_LIMIT ? 2 : 0)} | ${num(g.measured, g.target === COST_RATIO_LIMIT ? 2 : 0)} | ${g.met === null ? 'not measured' : g.met ? 'met' : '**missed**'} |`,
  );
  const profiled = run.rows.filter((r) => r.profile !== null);
  const parts = [...new Set(profiled.flatMap((r) => Object.keys(r.profile?.parts ?? {})))].filter(
    (p) => p !== 'idle',
  );
  // Busy ms per second profiled, so trials of different length compare.
  const perSecond = (r: CostRow, part: string): string => {
    const p = r.profile;
    if (p === null || p.profiledMs <= 0) return '—';
    return num((1000 * (p.parts[part] ?? 0)) / p.profiledMs, 1);
  };
  const profileHead = profiled.map((r) => `${r.arm} × ${r.viewers}`);
  const profileRows = [
    `| main thread busy | ${profiled.map((r) => (r.profile === null ? '—' : num((1000 * r.profile.busyMs) / r.profile.profiledMs, 1))).join(' | ')} |`,
    ...parts.map((part) => `| ${part} | ${profiled.map((r) => perSecond(r, part)).join(' | ')} |`),
  ];
  const largestMesh = [...profiled].reverse().find((r) => r.arm === 'mesh');
  const failures = run.failures.map((f) => `- ${f.arm} × ${f.viewers}: ${f.error}`);
  const rendererThreads = threadTable(
    run.rows,
    (r) => r.rendererThreads,
    (s) => s.rendererUnattributedCpuPctPerViewer,
    (s) => s.rendererProcessesCpuPctPerViewer,
  );
  const networkThreads = threadTable(
    run.rows,
    (r) => r.networkServiceThreads,
    (s) => s.networkServiceUnattributedCpuPctPerViewer,
    (s) => s.networkServiceProcessesCpuPctPerViewer,
  );
  const memoryParts = memoryPartsTable(run.rows, (r) => r.rendererMemoryByPart);
  const memoryPartsAfterCollection = memoryPartsTable(run.rows, (r) => r.rendererMemoryAfterCollectionByPart);
  const samplingLines = run.rows.flatMap((r) => {
    const s = r.threadSampling;
    return s === null
      ? []
      : [
          `- ${r.arm} × ${r.viewers}: ${s.threadsAtStart} → ${s.threadsAtEnd} threads over ${num(s.windowS, 0)} s, ${s.threadsAppeared} appeared, ${s.threadsVanished} vanished, ${s.threadsUnreadable} unreadable and ${s.processesGone} processes gone (skipped)`,
        ];
  });
  const markdown = `# What a viewer pays: plain hls.js against the mesh

Command: \`${run.command}\`

Machine: ${run.environment.cpus} × ${run.environment.cpuModel}, ${run.environment.memGiB} GiB, ${run.environment.kernel}, Node ${run.environment.node}; started ${run.environment.startedAt}, took ${run.elapsedS} s.
Each arm on a fresh swarm of one ffmpeg stream (640×360, 30 fps, ~900 kbit/s, 2 s segments) at hls.js's
default live position, ${run.durationS} s after the last viewer opened; players ${run.hideVideo ? 'hidden (display: none: decoded and played, not painted)' : 'painted'}.
CPU is % of one core over the steady part of the window, from /proc (utime + stime); memory is
proportional set size (shared pages divided among the processes), averaged over the window (the goal
below is judged on it), and the private footprint beside it is Chromium's own measure of a process
(resident anonymous memory and swap, from /proc/PID/status; shared anonymous pages in full, the
binary's pages not at all), averaged likewise. The true source runs as its own process.

| viewers | arm | renderer CPU % / viewer | all Chromium CPU % / viewer | renderer MiB / viewer | renderer footprint MiB / viewer | JS heap MiB / viewer | dropped / total frames | stalls | p2p share | origin copies | tracker CPU % (per viewer) | true source CPU % (per viewer, per slice) | machine busy |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}

## Goals (issue 17)

| viewers | goal | target | measured | |
|---|---|---|---|---|
${goalRows.join('\n')}

## Renderer memory by allocator, MiB per viewer

${
  memoryParts === null
    ? 'No memory dump was taken.'
    : `Chromium's memory-infra dump (DevTools \`Tracing.requestMemoryDump\`, detailed) of every process at the
end of each arm's window, the renderers summed and divided by the viewer count: one moment, where
the columns above are averages over the window (a renderer's size swings with its collections, so
compare arms on those). The private footprint is as above. Parts do not overlap, but each is its
allocator's committed size, not all of it resident: "other" (stacks, code pages and what no
allocator reports, less committed memory that is not resident) can be negative.

${memoryParts}

Then again after a full garbage collection in every page (DevTools \`HeapProfiler.collectGarbage\`):
what the pages still hold. The difference is garbage that was waiting for a collection, which the
renderer's memory above includes.

${memoryPartsAfterCollection ?? 'No dump after a collection (one of the collections or the dump failed).'}`
}

## CPU by Chromium process type, % of one core, all viewers together

The network service carries every page's WebRTC sockets, so part of the mesh's cost lands there and
not in the renderers.

| viewers | arm | ${types.join(' | ')} |
|---|---|${types.map(() => '---|').join('')}
${typeRows.join('\n')}

## CPU by thread, % of one core per viewer

${
  rendererThreads === null
    ? 'Threads were not read.'
    : `Every renderer's and the network service's threads, from /proc/PID/task/TID/stat (utime + stime)
at the start and the end of the steady part, by thread name (the stat line's command field, which the kernel
cuts to 15 bytes; trailing numbers dropped), summed over the processes and divided by the viewer count.
The busiest ${THREAD_TABLE_NAMES} names over all trials are listed. A thread that started in the window counts from zero;
one that exited in it is lost to its name, and its time shows only as "threads that exited" (the
process's own counter minus its remaining threads'). A process's main thread is "(main thread)": the
renderer's runs the page's JS (Chromium's CrRendererMain, which /proc shows under the executable's name).${
        run.profileS > 0
          ? `
\`v8:ProfEvntProc\` is V8's sampling profiler, busy in viewer v0's renderer while it is profiled
(--profile): the benchmark's cost, not the player's.`
          : ''
      }

Renderers:

${rendererThreads}

Network service (one process, shared by the viewers):

${networkThreads ?? 'Not read.'}

Threads read:

${samplingLines.join('\n')}
`
}
## Where viewer v0's main thread went

${
  profiled.length === 0
    ? 'No profile was taken (--profile 0).'
    : `Chromium's sampling profiler on viewer v0's page for ${run.profileS} s per trial, from 10 s after the last
viewer opened: ms of self time per second, by part (through the demo's source maps). Only the main
thread: the renderer's other threads (media decoding, WebRTC's network thread) and the network
service are not in it. The raw profiles are in profiles/ (open them in DevTools).

| part | ${profileHead.join(' | ')} |
|---|${profileHead.map(() => '---|').join('')}
${profileRows.join('\n')}
${
  largestMesh?.profile === null || largestMesh === undefined
    ? ''
    : `
Busiest functions, mesh × ${largestMesh.viewers} (ms of self time in ${num(largestMesh.profile.profiledMs / 1000, 0)} s):

| function | self ms |
|---|---|
${largestMesh.profile.functions
  .filter((f) => !f.name.startsWith('(idle)'))
  .map((f) => `| ${f.name.replaceAll('|', '\\|')} | ${f.selfMs} |`)
  .join('\n')}
`
}`
}
![Renderer CPU per viewer](renderer-cpu.svg)
${failures.length === 0 ? '' : `\n## Trials that failed\n\n${failures.join('\n')}\n`}`;
  return { markdown, goals };
}
