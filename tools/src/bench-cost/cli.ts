/**
 * `npm run bench:cost -- --viewers 1,4,8,16 --duration S --out DIR`: what a viewer pays (issue 17).
 * For each viewer count, plain hls.js and the mesh in turn on one ffmpeg live stream (the comparison
 * benchmark's trials, at hls.js's default live position): renderer CPU and memory per viewer, the
 * page's JS heap and dropped frames, CPU by Chromium process type and by thread name (renderers and
 * the network service), the tracker's and the true source's CPU (the source runs as its own process
 * here), the renderers' memory by allocator (a memory-infra dump at the end of each trial), and a
 * profile of one viewer's main thread by part. Writes DIR/result.json, DIR/report.md, DIR/*.svg and DIR/profiles/*.cpuprofile.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { linePlot } from '@chunkycast/sim';
import { noPositionals, numberOption, parseCommandLine, stringValue, UsageError } from '../lib/args.js';
import type { ProfileSummary } from '../lib/cpu-profile.js';
import { runIsolated } from '../lib/netns.js';
import { resolveOut, withoutOut } from '../lib/out-dir.js';
import { fromRoot, root } from '../lib/paths.js';
import { mean, round } from '../lib/stats.js';
import { memoryByPart, type MemoryByPart, type ProcessMemory } from '../lib/memory-dump.js';
import { errorMessage, errorStack } from '../lib/wait.js';
import { Stack, guardRun } from '../stack/cleanup.js';
import { startStream } from '../stack/stream.js';
import { PROFILE_WARMUP_MS } from '../viewers/profile.js';
import { runTrial, summarizeTrial, trialBoundS, type Arm, type TrialRaw } from '../bench-compare/trial.js';
import { threadCpuPerViewer, type ThreadCpu } from '../bench-compare/browser-threads.js';
import { costReport, type CostRow, type CostRun, type ThreadCounts } from './report.js';

const USAGE = `usage: npm run bench:cost -- [--viewers LIST] [--duration S] [--out DIR] [options]

What a viewer pays: for each viewer count, plain hls.js (http) and the Chunkycast mesh in turn,
each on a fresh swarm of headless Chromium viewers of one ffmpeg live stream, inside a
loopback-only network namespace. Per viewer: renderer CPU and memory, JS heap, dropped frames;
CPU by Chromium process type and by thread (renderers, network service); the tracker's and the
true source's CPU; the renderers' memory by allocator (one memory-infra dump at the end of each
arm); a profile of viewer v0's main thread. Writes DIR/result.json, DIR/report.md, DIR/*.svg and DIR/profiles/.

options:
  --viewers LIST   viewer counts, comma-separated (default 1,4,8,16)
  --duration S     seconds per arm after the last viewer opened (default 120)
  --out DIR        output directory (default out/bench-cost)
  --stagger MS     ms between opening two viewers (default 250)
  --show-video     paint the players (default: hidden with display:none, so that 16 viewers fit on
                   2 cores; the video is still decoded and played)
  --profile S      profile viewer v0's main thread for S seconds in every trial, starting 10 s after
                   the last viewer opened (default 30; 0: no profile)
  --help           print this help`;

/** hls.js's default live position, segments behind the edge (bench:compare's `default`). */
const LIVE_SYNC = 3;
const PLAYLIST_SEGMENTS = 10;
const ARMS: readonly Arm[] = ['http', 'mesh'];

const opts = parseCommandLine(
  'bench:cost',
  USAGE,
  {
    viewers: { type: 'string' },
    duration: { type: 'string' },
    out: { type: 'string' },
    stagger: { type: 'string' },
    'show-video': { type: 'boolean' },
    profile: { type: 'string' },
  },
  (parsed) => {
    noPositionals(parsed);
    const counts = (stringValue(parsed, 'viewers') ?? '1,4,8,16')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((s) => Math.floor(numberOption('viewers', s, 1, { min: 1 })));
    if (counts.length === 0) throw new UsageError('--viewers needs at least one count');
    const durationS = numberOption('duration', stringValue(parsed, 'duration'), 120, { min: 20 });
    const profileS = numberOption('profile', stringValue(parsed, 'profile'), 30, { min: 0 });
    if (profileS * 1000 > durationS * 1000 - PROFILE_WARMUP_MS)
      throw new UsageError(
        `--profile ${profileS} does not fit in --duration ${durationS} after a 10 s warm-up`,
      );
    return {
      counts,
      durationS,
      out: resolveOut(stringValue(parsed, 'out') ?? fromRoot('out', 'bench-cost')),
      staggerMs: numberOption('stagger', stringValue(parsed, 'stagger'), 250, { min: 0 }),
      hideVideo: parsed.values['show-video'] !== true,
      profileS,
    };
  },
);
const forwarded = withoutOut(process.argv.slice(2));
await runIsolated(fileURLToPath(import.meta.url), [...forwarded, '--out', opts.out]);

const progress = (text: string): void => {
  process.stderr.write(`bench:cost: ${text}\n`);
};
const stack = new Stack();
// Bounded: each trial's start-up, opening, watching and teardown, twice over, then the run fails.
const ceilingMs =
  2 *
  opts.counts.reduce((a, n) => a + ARMS.length * trialBoundS(opts.durationS, n, opts.staggerMs), 120) *
  1000;
const guard = guardRun(stack, { ceilingMs, progress });

/** ThreadSampling's counts, taken from the thread reading they describe. */
function threadCounts({
  threadsAtStart,
  threadsAtEnd,
  threadsAppeared,
  threadsVanished,
  threadsUnreadable,
  processesGone,
}: ThreadCpu): ThreadCounts {
  return { threadsAtStart, threadsAtEnd, threadsAppeared, threadsVanished, threadsUnreadable, processesGone };
}

/** One trial's row: per-viewer figures from the comparison benchmark's summary and raw samples. */
function costRow(raw: TrialRaw, segments: Parameters<typeof summarizeTrial>[1]): CostRow {
  const s = summarizeTrial(raw, segments);
  const n = s.viewers;
  const last = raw.series.map((x) => x[x.length - 1]);
  const heaps = last.map((x) => x?.jsHeapBytes ?? null).filter((b): b is number => typeof b === 'number');
  const frames = (key: 'droppedFrames' | 'totalFrames'): number | null => {
    const values = last.map((x) => x?.video?.[key]).filter((v): v is number => typeof v === 'number');
    return values.length === 0 ? null : values.reduce((a, b) => a + b, 0);
  };
  const sourcePct = raw.cpu.sourcePct;
  const threads = raw.cpu.threads;
  const renderer = threads === null ? null : threadCpuPerViewer(threads, 'renderer', n);
  const network = threads === null ? null : threadCpuPerViewer(threads, 'utility:NetworkService', n);
  return {
    viewers: n,
    arm: raw.arm,
    rendererCpuPerViewerPct: s.rendererCpuPerViewerPct,
    chromiumCpuPerViewerPct: s.cpuPerViewerPct,
    cpuByProcessTypePct: s.cpuByProcessTypePct,
    rendererMemPerViewerMB: s.rendererMemPerViewerMB,
    rendererFootprintPerViewerMB: s.rendererFootprintPerViewerMB,
    chromiumMemPerViewerMB: s.memPerViewerMB,
    jsHeapPerViewerMB: heaps.length === 0 ? null : round((mean(heaps) ?? 0) / 1048576, 1),
    droppedFrames: frames('droppedFrames'),
    totalFrames: frames('totalFrames'),
    stalls: s.stalls,
    neverPlayed: s.neverPlayed,
    playingAtEnd: s.playingAtEnd,
    p2pShare: s.p2pShare,
    streamCopiesFromOrigin: s.streamCopiesFromOrigin,
    trackerCpuPct: s.trackerCpuPct,
    sourceCpuPct: round(sourcePct, 1),
    // The true source sends each of the 16 slices to its root once: its CPU per slice forwarded.
    sourceCpuPerSlicePct: sourcePct === null ? null : round(sourcePct / 16, 2),
    machineBusyPct: s.machineBusyPct,
    windowS: s.windowS,
    rendererThreads: renderer?.threads ?? null,
    networkServiceThreads: network?.threads ?? null,
    threadSampling:
      threads === null
        ? null
        : {
            windowS: round(threads.wallS, 1) ?? 0,
            rendererUnattributedCpuPctPerViewer: renderer?.unattributedCpuPctPerViewer ?? null,
            rendererProcessesCpuPctPerViewer: renderer?.processesCpuPctPerViewer ?? null,
            networkServiceUnattributedCpuPctPerViewer: network?.unattributedCpuPctPerViewer ?? null,
            networkServiceProcessesCpuPctPerViewer: network?.processesCpuPctPerViewer ?? null,
            ...threadCounts(threads),
          },
    profile: raw.profile === null ? null : compactProfile(raw.profile.summary),
    rendererMemoryByPart: byPart(raw.memoryDump?.asIs ?? null, n),
    rendererMemoryAfterCollectionByPart: byPart(raw.memoryDump?.afterCollection ?? null, n),
  };
}

/** The renderers' memory by part per viewer, its figures to 0.01 MiB (result.json). */
function byPart(dump: readonly ProcessMemory[] | null, viewers: number): MemoryByPart | null {
  const m = dump === null ? null : memoryByPart(dump, 'Renderer', viewers);
  if (m === null) return null;
  return {
    processes: m.processes,
    privateFootprintMiB: round(m.privateFootprintMiB, 2),
    partsMiB: Object.fromEntries(Object.entries(m.partsMiB).map(([k, v]) => [k, round(v, 2) ?? 0])),
    otherMiB: round(m.otherMiB, 2),
    arrayBuffersInUseMiB: round(m.arrayBuffersInUseMiB, 2),
  };
}

/** A profile's parts and its ten busiest functions (result.json; the whole profile is on disk). */
function compactProfile(p: ProfileSummary): CostRow['profile'] {
  return {
    profiledMs: round(p.profiledMs, 0) ?? 0,
    busyMs: round(p.busyMs, 0) ?? 0,
    parts: Object.fromEntries(p.categories.map((c) => [c.name, round(c.selfMs, 0) ?? 0])),
    functions: p.functions.slice(0, 10).map((f) => ({ name: f.name, selfMs: round(f.selfMs, 0) ?? 0 })),
  };
}

try {
  const started = new Date();
  const stream = await startStream({ quiet: true, listSize: PLAYLIST_SEGMENTS });
  stack.add('ffmpeg', () => stream.stop());
  await stream.waitForSegments(3);
  progress(
    `stream up; viewer counts ${opts.counts.join(', ')}, ${ARMS.join(' and ')}, ${opts.durationS} s each`,
  );
  mkdirSync(join(opts.out, 'profiles'), { recursive: true });
  const rows: CostRow[] = [];
  const failures: { viewers: number; arm: Arm; error: string }[] = [];
  for (const n of opts.counts) {
    for (const arm of ARMS) {
      if (guard.stopping()) break;
      try {
        const raw = await runTrial({
          arm,
          setting: 'default',
          liveSync: LIVE_SYNC,
          lowLatency: false,
          stream,
          viewers: n,
          durationS: opts.durationS,
          staggerMs: opts.staggerMs,
          hideVideo: opts.hideVideo,
          progress,
          separateSource: true,
          threads: true,
          memoryDump: true,
          ...(opts.profileS > 0
            ? { profile: { startAfterMs: PROFILE_WARMUP_MS, durationMs: opts.profileS * 1000 } }
            : {}),
        });
        if (raw.profile !== null)
          writeFileSync(
            join(opts.out, 'profiles', `${arm}-${n}-v0.cpuprofile`),
            JSON.stringify(raw.profile.raw),
          );
        const row = costRow(raw, stream.segments);
        rows.push(row);
        progress(
          `${arm} × ${n}: renderer ${row.rendererCpuPerViewerPct ?? '—'}% of a core and ${row.rendererMemPerViewerMB ?? '—'} MiB per viewer,` +
            ` JS heap ${row.jsHeapPerViewerMB ?? '—'} MiB, stalls ${row.stalls}, dropped frames ${row.droppedFrames ?? '—'},` +
            ` tracker ${row.trackerCpuPct ?? '—'}%, source ${row.sourceCpuPct ?? '—'}%, machine ${row.machineBusyPct ?? '—'}%`,
        );
      } catch (error) {
        if (guard.stopping()) break;
        progress(`${arm} × ${n} failed: ${errorStack(error)}`);
        failures.push({ viewers: n, arm, error: errorMessage(error) });
      }
    }
  }
  const relOut = relative(root, opts.out) || '.';
  const run: CostRun = {
    command: `npm run bench:cost -- ${[...forwarded, '--out', relOut.startsWith('..') ? opts.out : relOut].join(' ')}`,
    durationS: opts.durationS,
    hideVideo: opts.hideVideo,
    profileS: opts.profileS,
    environment: {
      node: process.version,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown CPU',
      memGiB: Math.round(totalmem() / 2 ** 30),
      kernel: `Linux ${release()}`,
      startedAt: started.toISOString(),
    },
    elapsedS: Math.round((Date.now() - started.getTime()) / 1000),
    rows,
    failures,
  };
  const { markdown, goals } = costReport(run);
  const plot = linePlot({
    title: 'Renderer CPU per viewer',
    xLabel: 'viewers',
    yLabel: '% of one core per viewer',
    yMin: 0,
    series: ARMS.map((arm) => ({
      name: arm === 'http' ? 'plain hls.js' : 'mesh',
      points: rows
        .filter((r) => r.arm === arm && r.rendererCpuPerViewerPct !== null)
        .map((r) => ({ x: r.viewers, y: r.rendererCpuPerViewerPct ?? 0 })),
    })),
  });
  writeFileSync(join(opts.out, 'renderer-cpu.svg'), `${plot}\n`);
  writeFileSync(join(opts.out, 'result.json'), `${JSON.stringify({ ...run, goals }, null, 2)}\n`);
  writeFileSync(join(opts.out, 'report.md'), markdown);
  await stack.stopAll();
  process.stdout.write(`${join(opts.out, 'report.md')}\n`);
  process.exit(failures.length === 0 ? 0 : 1);
} catch (error) {
  progress(`failed: ${errorStack(error)}`);
  await stack.stopAll();
  process.exit(1);
}
