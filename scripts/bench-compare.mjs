#!/usr/bin/env node
// `npm run bench:compare -- --viewers N --duration S --out DIR`: what plain hls.js, hls.js +
// p2p-media-loader and <mesh-player> each deliver on the same stream, from the same origin, to the
// same number of real browsers. Inside a loopback-only network namespace, one ffmpeg live stream
// runs throughout; each arm at each live position gets a fresh tracker (the origin, counting its
// bytes; with the true source only for the mesh arm), a fresh Chromium and N fresh viewer pages.
// Writes DIR/result.json, DIR/report.md and DIR/*.svg. Progress goes to stderr.
import { cpus, release, totalmem } from 'node:os';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  numberOption as num,
  parseCliOrExit,
  Stack,
  chromiumPath,
  root,
  runIsolated,
  startStream,
} from '../e2e/src/harness.mjs';
import { ARMS, runTrial, summarizeTrial } from '../e2e/src/bench/compare.mjs';
import { addRatios, checkGoals, plots, reportMarkdown } from '../e2e/src/bench/compare-report.mjs';

const PLAYLIST_SEGMENTS = 10;
const SETTINGS = ['default', 'low', 'deep'];

const USAGE = `usage: npm run bench:compare -- [--viewers N] [--duration S] [--out DIR] [options]

Runs three arms in turn, each on a fresh swarm of N headless Chromium viewers of one ffmpeg live
stream served by one origin that counts its media bytes: http (plain hls.js), p2pml (hls.js +
p2p-media-loader with a local bittorrent-tracker), mesh (<mesh-player>, tracker + true source).
Each at the default live position and at a low-latency one. Writes DIR/result.json, DIR/report.md
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
                       deep     p2pml only, at p2p-media-loader's own target position (see --deep-sync)
  --low-sync LIST    the low setting per arm, e.g. http=1,p2pml=1.5,mesh=1 (default 1 for every arm)
  --deep-sync N      p2pml's deep position in segments, or "auto" to leave liveSyncDurationCount
                     unset so p2p-media-loader picks it itself (default ${PLAYLIST_SEGMENTS - 1}: what it picks
                     for this ${PLAYLIST_SEGMENTS}-segment playlist, but set up front so that hls.js starts there)
  --hide-video       hide the players (display: none) in every arm: decoded but not painted
  --help             print this help`;

function list(flag, value, allowed) {
  if (value === undefined) throw new Error(`${flag} needs a comma-separated list`);
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items)
    if (!allowed.includes(item)) throw new Error(`${flag}: unknown "${item}" (of ${allowed.join(', ')})`);
  if (items.length === 0) throw new Error(`${flag} needs at least one of ${allowed.join(', ')}`);
  return items;
}

function parseArgs(argv) {
  const o = {
    viewers: 4,
    duration: 60,
    out: null,
    stagger: 250,
    arms: [...ARMS],
    settings: [...SETTINGS],
    lowSync: { http: 1, p2pml: 1, mesh: 1 },
    deepSync: PLAYLIST_SEGMENTS - 1,
    hideVideo: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') o.help = true;
    else if (a === '--viewers') o.viewers = Math.floor(num(a, argv[++i], 1));
    else if (a === '--duration') o.duration = num(a, argv[++i], 10);
    else if (a === '--out') {
      o.out = argv[++i];
      if (o.out === undefined) throw new Error('--out needs a directory');
    } else if (a === '--stagger') o.stagger = num(a, argv[++i], 0);
    else if (a === '--arms') o.arms = list(a, argv[++i], ARMS);
    else if (a === '--settings') o.settings = list(a, argv[++i], SETTINGS);
    else if (a === '--low-sync') {
      const value = argv[++i];
      if (value === undefined) throw new Error('--low-sync needs arm=segments pairs');
      for (const pair of value.split(',')) {
        const [arm, segments] = pair.split('=');
        if (!ARMS.includes(arm)) throw new Error(`--low-sync: unknown arm "${arm}"`);
        o.lowSync[arm] = num(`--low-sync ${arm}`, segments, 0.1);
      }
    } else if (a === '--deep-sync') {
      const value = argv[++i];
      o.deepSync = value === 'auto' ? null : num(a, value, 0.1);
    } else if (a === '--hide-video') o.hideVideo = true;
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const opts = parseCliOrExit('bench:compare', parseArgs, USAGE);
// Resolved before re-running in the namespace, relative to where npm was run.
const out = resolve(
  process.env.INIT_CWD ?? process.cwd(),
  opts.out ?? join(root, 'out', `bench-compare-${opts.viewers}`),
);
const forwarded = process.argv.slice(2).filter((_, i, a) => a[i] !== '--out' && a[i - 1] !== '--out');
await runIsolated(fileURLToPath(import.meta.url), [...forwarded, '--out', out]);

const progress = (text) => process.stderr.write(`bench:compare: ${text}\n`);

/** The trials in order: per setting, the arms that run at it, with their live position. */
function plan() {
  const trials = [];
  for (const setting of opts.settings) {
    for (const arm of opts.arms) {
      if (setting === 'deep' && arm !== 'p2pml') continue;
      const liveSync = setting === 'default' ? 3 : setting === 'low' ? opts.lowSync[arm] : opts.deepSync;
      trials.push({ arm, setting, liveSync });
    }
  }
  return trials;
}

const trials = plan();
// Bounded: a generous ceiling on the whole run (each trial: start-up, opening the pages, watching,
// teardown), after which everything is stopped and the run fails.
const perTrialS = opts.duration + (opts.viewers * (opts.stagger + 2000)) / 1000 + 60;
const ceilingMs = (2 * trials.length * perTrialS + 120) * 1000;

const stack = new Stack();
let stopping = false;
const abort = (why, code) => {
  if (stopping) process.exit(code);
  stopping = true;
  progress(`${why}; stopping`);
  void stack.stopAll().then(() => process.exit(code));
};
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => abort('interrupted', 130));
const watchdog = setTimeout(
  () => abort(`still running after ${Math.round(ceilingMs / 1000)} s`, 1),
  ceilingMs,
);
watchdog.unref();

function version(pkg) {
  for (const dir of [
    join(root, 'node_modules', pkg),
    join(root, 'demo', 'node_modules', pkg),
    join(root, 'e2e', 'node_modules', pkg),
  ]) {
    try {
      return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version;
    } catch {
      // not installed there
    }
  }
  return null;
}

function firstLine(command, args) {
  const r = spawnSync(command, args, { encoding: 'utf8' });
  return (r.stdout ?? '').split('\n')[0]?.trim() || null;
}

try {
  const started = new Date();
  const stream = await startStream({ quiet: true, listSize: PLAYLIST_SEGMENTS });
  stack.add('ffmpeg', () => stream.stop());
  await stream.waitForSegments(3);
  progress(`stream up; ${trials.length} trial(s) of ${opts.viewers} viewer(s) × ${opts.duration} s`);

  const results = [];
  const failures = [];
  for (const trial of trials) {
    try {
      const raw = await runTrial({
        ...trial,
        stream,
        viewers: opts.viewers,
        durationS: opts.duration,
        staggerMs: opts.stagger,
        hideVideo: opts.hideVideo,
        progress,
      });
      const summary = summarizeTrial(raw, stream.segments);
      results.push(summary);
      progress(
        `${trial.arm} @ ${trial.setting}: origin ${(summary.originMediaBytes / 1048576).toFixed(2)} MiB` +
          ` (${summary.streamCopiesFromOrigin} copies), p2p ${summary.p2pShare ?? '—'}, startup p95 ${summary.startupMsP95} ms,` +
          ` stalls ${summary.stalls}, delay p50/p95 ${summary.liveDelayMsP50}/${summary.liveDelayMsP95} ms,` +
          ` CPU ${summary.cpuPerViewerPct}%/viewer, ${summary.memPerViewerMB} MiB/viewer`,
      );
    } catch (error) {
      if (stopping) break;
      progress(`${trial.arm} @ ${trial.setting} failed: ${error?.stack ?? error}`);
      failures.push({ ...trial, error: String(error?.message ?? error) });
    }
  }
  addRatios(results);
  const goals = checkGoals(results);
  const relOut = relative(root, out) || '.';
  const run = {
    viewers: opts.viewers,
    durationS: opts.duration,
    command: `npm run bench:compare -- ${[...forwarded, '--out', relOut.startsWith('..') ? out : relOut].join(' ')}`,
    staggerMs: opts.stagger,
    hideVideo: opts.hideVideo,
    stream: {
      segmentSeconds: 2,
      listSize: PLAYLIST_SEGMENTS,
      video: '640x360 30 fps H.264 800 kbit/s',
      audio: 'AAC 96 kbit/s',
    },
    liveSync: {
      default: Object.fromEntries(opts.arms.map((a) => [a, 3])),
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
  const plotFiles = results.length === 0 ? {} : await plots(run);
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
  progress(`failed: ${error?.stack ?? error}`);
  await stack.stopAll();
  process.exit(1);
}
