/**
 * `npm run bench:compare -- --viewers N --duration S --out DIR`: origin load and playback of plain
 * hls.js, hls.js + p2p-media-loader and the Chunkycast mesh, each on a fresh swarm of N headless
 * Chromium viewers of one ffmpeg live stream, inside a loopback-only network namespace. Writes
 * DIR/result.json, DIR/report.md and DIR/*.svg. Progress goes to stderr.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { noPositionals, numberOption, parseCommandLine, stringValue, UsageError } from '../lib/args.js';
import { runIsolated } from '../lib/netns.js';
import { resolveOut, withoutOut } from '../lib/out-dir.js';
import { fromRoot, root } from '../lib/paths.js';
import { errorMessage, errorStack } from '../lib/wait.js';
import { Stack, guardRun } from '../stack/cleanup.js';
import { startStream } from '../stack/stream.js';
import { chromiumPath } from '../viewers/browser.js';
import { addRatios, checkGoals, plots, reportMarkdown, type CompareRun } from './report.js';
import {
  ARMS,
  runTrial,
  summarizeTrial,
  trialBoundS,
  type Arm,
  type TrialPlan,
  type TrialSummary,
} from './trial.js';

const PLAYLIST_SEGMENTS = 10;
const SETTINGS = ['default', 'low', 'll', 'deep'] as const;
type Setting = (typeof SETTINGS)[number];
/** hls.js's default live position, segments behind the edge. */
const DEFAULT_LIVE_SYNC = 3;

const USAGE = `usage: npm run bench:compare -- [--viewers N] [--duration S] [--out DIR] [options]

Runs three arms in turn, each on a fresh swarm of N headless Chromium viewers of one ffmpeg live
stream served by one origin that counts its media bytes: http (plain hls.js), p2pml (hls.js +
p2p-media-loader with a local bittorrent-tracker), mesh (<mesh-player>, tracker + true source).
Each at the default live position, a low one, and LL-HLS. Writes DIR/result.json, DIR/report.md
and DIR/*.svg.

options:
  --viewers N        viewers per arm (default 4)
  --duration S       seconds to watch after the last viewer opened, per arm and setting (default 60)
  --out DIR          output directory (default out/bench-compare-N)
  --stagger MS       ms between opening two viewers (default 250)
  --arms LIST        arms to run, comma-separated, of ${ARMS.join(',')} (default all)
  --settings LIST    live positions, comma-separated (default all):
                       default  3 segments behind the edge (hls.js's default), every arm
                       low      1 segment behind (see --low-sync), every arm
                       ll       LL-HLS: the origin publishes parts (tracker --ll-hls), http and mesh in
                                hls.js lowLatencyMode at the playlist's PART-HOLD-BACK (p2p-media-loader
                                cannot take parts: its reference is its best position, deep)
                       deep     p2pml only, at p2p-media-loader's own target position (see --deep-sync)
  --low-sync LIST    the low setting per arm, e.g. http=1,p2pml=1.5,mesh=1 (default 1 for every arm)
  --deep-sync N      p2pml's deep position in segments, or "auto" to leave liveSyncDurationCount
                     unset so p2p-media-loader picks it itself (default ${PLAYLIST_SEGMENTS - 1}: what it picks
                     for this ${PLAYLIST_SEGMENTS}-segment playlist, but set up front so that hls.js starts there)
  --hide-video       hide the players (display: none) in every arm: decoded but not painted
  --help             print this help`;

/** A comma-separated list of `allowed` items. */
function list<T extends string>(flag: string, value: string, allowed: readonly T[]): T[] {
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items)
    if (!(allowed as readonly string[]).includes(item))
      throw new UsageError(`--${flag}: unknown "${item}" (of ${allowed.join(', ')})`);
  if (items.length === 0) throw new UsageError(`--${flag} needs at least one of ${allowed.join(', ')}`);
  return items as T[];
}

const isArm = (name: string | undefined): name is Arm =>
  (ARMS as readonly (string | undefined)[]).includes(name);

const opts = parseCommandLine(
  'bench:compare',
  USAGE,
  {
    viewers: { type: 'string' },
    duration: { type: 'string' },
    out: { type: 'string' },
    stagger: { type: 'string' },
    arms: { type: 'string' },
    settings: { type: 'string' },
    'low-sync': { type: 'string' },
    'deep-sync': { type: 'string' },
    'hide-video': { type: 'boolean' },
  },
  (parsed) => {
    noPositionals(parsed);
    const viewers = Math.floor(numberOption('viewers', stringValue(parsed, 'viewers'), 4, { min: 1 }));
    const arms = stringValue(parsed, 'arms');
    const settings = stringValue(parsed, 'settings');
    const lowSync: Record<Arm, number> = { http: 1, p2pml: 1, mesh: 1 };
    for (const pair of (stringValue(parsed, 'low-sync') ?? '').split(',').filter(Boolean)) {
      const [arm, segments] = pair.split('=');
      if (!isArm(arm)) throw new UsageError(`--low-sync: unknown arm "${arm ?? ''}"`);
      lowSync[arm] = numberOption(`low-sync ${arm}`, segments ?? '', 0, { min: 0.1 });
    }
    const deepSync = stringValue(parsed, 'deep-sync');
    return {
      viewers,
      durationS: numberOption('duration', stringValue(parsed, 'duration'), 60, { min: 10 }),
      out: resolveOut(stringValue(parsed, 'out') ?? fromRoot('out', `bench-compare-${viewers}`)),
      staggerMs: numberOption('stagger', stringValue(parsed, 'stagger'), 250, { min: 0 }),
      arms: arms === undefined ? [...ARMS] : list('arms', arms, ARMS),
      settings: settings === undefined ? [...SETTINGS] : list<Setting>('settings', settings, SETTINGS),
      lowSync,
      deepSync:
        deepSync === 'auto' ? null : numberOption('deep-sync', deepSync, PLAYLIST_SEGMENTS - 1, { min: 0.1 }),
      hideVideo: parsed.values['hide-video'] === true,
    };
  },
);
// Resolved before re-running in the namespace, relative to where npm was run.
const forwarded = withoutOut(process.argv.slice(2));
await runIsolated(fileURLToPath(import.meta.url), [...forwarded, '--out', opts.out]);
const out = opts.out;

const progress = (text: string): void => {
  process.stderr.write(`bench:compare: ${text}\n`);
};

/** The trials in order: per setting, the arms that run at it, with their live position. */
function plan(): TrialPlan[] {
  const trials: TrialPlan[] = [];
  for (const setting of opts.settings) {
    for (const arm of opts.arms) {
      if (setting === 'deep' && arm !== 'p2pml') continue;
      if (setting === 'll' && arm === 'p2pml') continue;
      const liveSync =
        setting === 'default'
          ? DEFAULT_LIVE_SYNC
          : setting === 'low'
            ? opts.lowSync[arm]
            : setting === 'll'
              ? null
              : opts.deepSync;
      trials.push({ arm, setting, liveSync, lowLatency: setting === 'll' });
    }
  }
  return trials;
}

const trials = plan();
// Bounded: a generous ceiling on the whole run (each trial: start-up, opening the pages, watching,
// teardown), after which everything is stopped and the run fails.
const perTrialS = trialBoundS(opts.durationS, opts.viewers, opts.staggerMs);
const ceilingMs = (2 * trials.length * perTrialS + 120) * 1000;

const stack = new Stack();
const guard = guardRun(stack, { ceilingMs, progress });

/** The installed version of an npm package (root, demo or e2e node_modules), or null. */
function version(pkg: string): string | null {
  for (const dir of [
    join(root, 'node_modules', pkg),
    join(root, 'demo', 'node_modules', pkg),
    join(root, 'e2e', 'node_modules', pkg),
  ]) {
    try {
      return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
    } catch {
      // not installed there
    }
  }
  return null;
}

function firstLine(command: string, args: readonly string[]): string | null {
  const r = spawnSync(command, args, { encoding: 'utf8' });
  const line = r.stdout.split('\n')[0]?.trim();
  return line === undefined || line === '' ? null : line;
}

try {
  const started = new Date();
  const stream = await startStream({ quiet: true, listSize: PLAYLIST_SEGMENTS });
  stack.add('ffmpeg', () => stream.stop());
  await stream.waitForSegments(3);
  progress(`stream up; ${trials.length} trial(s) of ${opts.viewers} viewer(s) × ${opts.durationS} s`);

  const results: TrialSummary[] = [];
  const failures: CompareRun['failures'][number][] = [];
  for (const trial of trials) {
    try {
      const raw = await runTrial({
        ...trial,
        stream,
        viewers: opts.viewers,
        durationS: opts.durationS,
        staggerMs: opts.staggerMs,
        hideVideo: opts.hideVideo,
        progress,
      });
      const summary = summarizeTrial(raw, stream.segments);
      results.push(summary);
      progress(
        `${trial.arm} @ ${trial.setting}: origin ${(summary.originMediaBytes / 1048576).toFixed(2)} MiB` +
          ` (${summary.streamCopiesFromOrigin ?? '—'} copies), p2p ${summary.p2pShare ?? '—'}, startup p95 ${summary.startupMsP95 ?? '—'} ms,` +
          ` stalls ${summary.stalls}, delay p50/p95 ${summary.liveDelayMsP50 ?? '—'}/${summary.liveDelayMsP95 ?? '—'} ms,` +
          ` CPU ${summary.cpuPerViewerPct ?? '—'}%/viewer, ${summary.memPerViewerMB ?? '—'} MiB/viewer`,
      );
    } catch (error) {
      if (guard.stopping()) break;
      progress(`${trial.arm} @ ${trial.setting} failed: ${errorStack(error)}`);
      failures.push({ ...trial, error: errorMessage(error) });
    }
  }
  addRatios(results);
  const goals = checkGoals(results);
  const relOut = relative(root, out) || '.';
  const run: CompareRun = {
    viewers: opts.viewers,
    durationS: opts.durationS,
    command: `npm run bench:compare -- ${[...forwarded, '--out', relOut.startsWith('..') ? out : relOut].join(' ')}`,
    staggerMs: opts.staggerMs,
    hideVideo: opts.hideVideo,
    stream: {
      segmentSeconds: 2,
      listSize: PLAYLIST_SEGMENTS,
      video: '640x360 30 fps H.264 800 kbit/s',
      audio: 'AAC 96 kbit/s',
    },
    liveSync: {
      default: Object.fromEntries(opts.arms.map((a) => [a, DEFAULT_LIVE_SYNC])),
      low: Object.fromEntries(opts.arms.map((a) => [a, opts.lowSync[a]])),
      deep: { p2pml: opts.deepSync },
    },
    environment: {
      node: process.version,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown CPU',
      memGiB: Math.round(totalmem() / 2 ** 30),
      kernel: `Linux ${release()}`,
      chromium: firstLine(chromiumPath(), ['--version']),
      ffmpeg: firstLine('ffmpeg', ['-version'])?.split(' Copyright')[0] ?? null,
      versions: Object.fromEntries(
        [
          'p2p-media-loader-core',
          'p2p-media-loader-hlsjs',
          'bittorrent-tracker',
          'hls.js',
          'playwright-core',
        ].map((p) => [p, version(p)]),
      ),
      startedAt: started.toISOString(),
    },
    methodLink: relative(out, join(root, 'docs', 'benchmarks', 'README.md')),
    elapsedS: (Date.now() - started.getTime()) / 1000,
    results,
    goals,
    failures,
  };
  mkdirSync(out, { recursive: true });
  const plotFiles = results.length === 0 ? {} : plots(run);
  for (const [name, svg] of Object.entries(plotFiles)) writeFileSync(join(out, name), `${svg}\n`);
  writeFileSync(join(out, 'result.json'), `${JSON.stringify(run, null, 2)}\n`);
  let report = reportMarkdown(run, plotFiles);
  if (failures.length > 0)
    report += `\n## Trials that failed\n\n${failures.map((f) => `- ${f.arm} @ ${f.setting}: ${f.error}`).join('\n')}\n`;
  writeFileSync(join(out, 'report.md'), report);
  await stack.stopAll();
  process.stdout.write(`${join(out, 'report.md')}\n`);
  process.exit(failures.length === 0 ? 0 : 1);
} catch (error) {
  progress(`failed: ${errorStack(error)}`);
  await stack.stopAll();
  process.exit(1);
}
