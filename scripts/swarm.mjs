#!/usr/bin/env node
// `npm run swarm -- --viewers N --duration S --out DIR`: the browser swarm benchmark. Inside a
// loopback-only network namespace: an ffmpeg live stream, the tracker with the true source, and N
// headless Chromium viewers of the demo for S seconds. Writes DIR/result.json (mesh share, origin
// load in stream copies, startup, stalls, live delay, per-viewer details) and DIR/report.md.
// Progress goes to stderr.
import { cpus } from 'node:os';
import { mkdirSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  numberOption as num,
  parseCliOrExit,
  Stack,
  brief,
  chromiumPath,
  launchBrowser,
  monitor,
  openViewer,
  percentile,
  root,
  runIsolated,
  startStream,
  startTracker,
  steadinessProblems,
  summaryLine,
  swarmSummary,
  viewerUrl,
} from '../e2e/src/harness.mjs';

const USAGE = `usage: npm run swarm -- [--viewers N] [--duration S] [--out DIR] [options]

N headless Chromium viewers watch an ffmpeg live stream through the mesh for S seconds, inside a
loopback-only network namespace. Writes DIR/result.json and DIR/report.md.

options:
  --viewers N       viewers (default 6)
  --duration S      seconds to watch after the last viewer opened (default 60)
  --out DIR         output directory (default out/swarm-N)
  --stagger MS      ms between opening two viewers (default 250)
  --target-load TL  viewers' target load in slices (default: the SDK's)
  --max-load ML     viewers' maximum load in slices (default: the SDK's)
  --hide-video      hide the players (display: none): they still decode and play, but skip painting,
                    about 25% less CPU per viewer (for large swarms on few cores)
  --help            print this help`;

function parseArgs(argv) {
  const o = { viewers: 6, duration: 60, out: null, stagger: 250, targetLoad: undefined, maxLoad: undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') o.help = true;
    else if (a === '--viewers') o.viewers = Math.floor(num(a, argv[++i], 1));
    else if (a === '--duration') o.duration = num(a, argv[++i], 4);
    else if (a === '--out') {
      o.out = argv[++i];
      if (o.out === undefined) throw new Error('--out needs a directory');
    } else if (a === '--stagger') o.stagger = num(a, argv[++i], 0);
    else if (a === '--target-load') o.targetLoad = num(a, argv[++i], 0);
    else if (a === '--max-load') o.maxLoad = num(a, argv[++i], 0);
    else if (a === '--hide-video') o.hideVideo = true;
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const opts = parseCliOrExit('swarm', parseArgs, USAGE);
// The output path is resolved before re-running in the namespace, relative to where npm was run.
const out = resolve(
  process.env.INIT_CWD ?? process.cwd(),
  opts.out ?? join(root, 'out', `swarm-${opts.viewers}`),
);
const forwarded = process.argv.slice(2).filter((_, i, a) => a[i] !== '--out' && a[i - 1] !== '--out');
await runIsolated(fileURLToPath(import.meta.url), [...forwarded, '--out', out]);

const progress = (text) => process.stderr.write(`swarm: ${text}\n`);
const stack = new Stack();
let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'])
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    progress('interrupted; stopping');
    void stack.stopAll().then(() => process.exit(130));
  });

try {
  const started = new Date();
  const stream = await startStream({ quiet: true });
  stack.add('ffmpeg', () => stream.stop());
  await stream.waitForSegments(1);
  const tracker = await startTracker({ originDir: stream.dir });
  stack.add('tracker', () => tracker.stop());
  const browser = await launchBrowser();
  stack.add('chromium', () => browser.close());
  await stream.waitForSegments(3);
  progress(`stream, tracker and Chromium up; opening ${opts.viewers} viewer(s)`);

  await tracker.resetOrigin();
  const windowStart = Date.now();
  const url = viewerUrl(tracker.url, { targetLoad: opts.targetLoad, maxLoad: opts.maxLoad });
  const viewers = [];
  for (let i = 0; i < opts.viewers; i++) {
    const viewer = await openViewer(browser, url, { label: `v${i}` });
    viewers.push(viewer);
    if (opts.hideVideo)
      await viewer.page.addStyleTag({ content: 'mesh-player, video { display: none !important; }' });
    if (opts.stagger > 0) await sleep(opts.stagger);
  }
  progress(`${viewers.length} viewer(s) open after ${((Date.now() - windowStart) / 1000).toFixed(1)} s`);

  const series = await monitor(viewers, {
    durationMs: opts.duration * 1000,
    intervalMs: 2000,
    onSample: (snaps, round) => {
      if (round % 5 !== 0) return;
      const sum = swarmSummary(snaps, null, null);
      progress(summaryLine((Date.now() - windowStart) / 1000, sum));
    },
  });
  const windowEnd = Date.now();
  const origin = await tracker.origin();
  const produced = stream.bytesProduced(windowStart, windowEnd);
  const last = series.map((s) => s[s.length - 1]);
  const sum = swarmSummary(last, origin, produced);

  const perViewer = viewers.map((v, i) => {
    const s = last[i];
    const st = s.stats ?? {};
    const delays = series[i].map((x) => x.stats?.liveDelayMs).filter((d) => typeof d === 'number');
    // Stuck intervals: samples 2 s apart in which the video advanced less than 1 s, once playing.
    const playingFrom = series[i].findIndex((x) => (x.video?.currentTime ?? 0) > 0);
    const stuck = playingFrom < 0 ? [] : steadinessProblems(v.label, series[i].slice(playingFrom));
    return {
      viewer: v.label,
      startupMs:
        s.firstPlayingMs === null || s.firstPlayingMs === undefined ? null : Math.round(s.firstPlayingMs),
      bytesFromMesh: st.bytesFromMesh ?? null,
      bytesFromOrigin: st.bytesFromOrigin ?? null,
      meshShare: st.meshShare ?? null,
      segmentsFromMesh: st.segmentsFromMesh ?? null,
      segmentsFromOrigin: st.segmentsFromOrigin ?? null,
      uploadBytes: st.uploadBytes ?? null,
      peers: st.peers ?? null,
      load: st.load ?? null,
      stalls: st.stalls ?? null,
      stallMs: st.stallMs ?? null,
      verificationFailures: st.verificationFailures ?? null,
      // Where the media came from: the trees, neighbours on request (repair), the origin (whole
      // segments, or byte ranges completing a segment the mesh delivered in part).
      delivery: {
        treeBytes: (st.bytesFromMesh ?? 0) - (st.bytesFromRepair ?? 0),
        repairBytes: st.bytesFromRepair ?? null,
        originBytes: st.bytesFromOrigin ?? null,
        segmentsFromMesh: st.segmentsFromMesh ?? null,
        segmentsCompletedFromOrigin: st.segmentsCompletedFromOrigin ?? null,
        segmentsFromOrigin: st.segmentsFromOrigin ?? null,
        forgedPacketsDropped: st.forgedPackets ?? null,
      },
      liveDelayMsP50: percentile(delays, 50),
      liveDelayMsP95: percentile(delays, 95),
      currentTime: s.video?.currentTime ?? null,
      stuckIntervals: stuck.length,
      pageErrors: s.errors ?? [],
      error: s.error ?? null,
    };
  });
  const allDelays = series.flatMap((ser) =>
    ser.map((x) => x.stats?.liveDelayMs).filter((d) => typeof d === 'number'),
  );
  const startups = perViewer.map((v) => v.startupMs);
  const chromium = spawnSync(chromiumPath(), ['--version'], { encoding: 'utf8' }).stdout.trim();
  const result = {
    viewers: opts.viewers,
    durationS: Math.round((windowEnd - windowStart) / 100) / 10,
    meshShare: sum.meshShare,
    originMediaBytes: origin.mediaBytes,
    streamCopiesFromOrigin: sum.streamCopiesFromOrigin,
    /** The same without the true source's ingest: what the viewers' fallbacks cost the origin. */
    streamCopiesFromOriginToViewers: produced.bytes > 0 ? origin.viewerMediaBytes / produced.bytes : null,
    startupMsP50: percentile(startups, 50),
    startupMsP95: percentile(startups, 95),
    stalls: sum.stalls,
    stallMs: sum.stallMs,
    liveDelayMsP50: percentile(allDelays, 50),
    liveDelayMsP95: percentile(allDelays, 95),
    playingAtEnd: sum.playing,
    neverPlayed: startups.filter((s) => s === null).length,
    stuckIntervals: perViewer.reduce((a, v) => a + v.stuckIntervals, 0),
    bytesFromMesh: sum.bytesFromMesh,
    bytesFromOrigin: sum.bytesFromOrigin,
    /** Totals of the viewers' `delivery` (per-source counts). */
    delivery: Object.fromEntries(
      [
        'treeBytes',
        'repairBytes',
        'originBytes',
        'segmentsFromMesh',
        'segmentsCompletedFromOrigin',
        'segmentsFromOrigin',
        'forgedPacketsDropped',
      ].map((key) => [key, perViewer.reduce((a, v) => a + (v.delivery[key] ?? 0), 0)]),
    ),
    originSourceMediaBytes: origin.sourceMediaBytes,
    originViewerMediaBytes: origin.viewerMediaBytes,
    producedSegments: produced.count,
    producedBytes: produced.bytes,
    settings: {
      durationS: opts.duration,
      staggerMs: opts.stagger,
      hideVideo: opts.hideVideo === true,
      targetLoad: opts.targetLoad ?? null,
      maxLoad: opts.maxLoad ?? null,
      segmentSeconds: 2,
      sampleIntervalMs: 2000,
    },
    environment: { node: process.version, cpus: cpus().length, chromium, startedAt: started.toISOString() },
    perViewer,
  };
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'result.json'), `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(join(out, 'report.md'), report(result));
  for (const v of last.map((s, i) => brief(viewers[i].label, s))) progress(JSON.stringify(v));
  progress(summaryLine((windowEnd - windowStart) / 1000, sum));
  await stack.stopAll();
  process.stdout.write(`${join(out, 'report.md')}\n`);
  process.exit(0);
} catch (error) {
  progress(`failed: ${error?.stack ?? error}`);
  await stack.stopAll();
  process.exit(1);
}

function report(r) {
  const pct = (x) => (x === null ? '—' : `${(100 * x).toFixed(1)}%`);
  const ms = (x) => (x === null ? '—' : `${(x / 1000).toFixed(2)} s`);
  const mib = (x) => (x === null ? '—' : `${(x / 1048576).toFixed(2)} MiB`);
  const rows = [
    ['viewers', r.viewers],
    ['measured window', `${r.durationS} s`],
    ['mesh share of viewers’ media bytes', pct(r.meshShare)],
    [
      'origin media bytes (source + viewers)',
      `${mib(r.originMediaBytes)} (${mib(r.originViewerMediaBytes)} to viewers)`,
    ],
    [
      'stream copies served by the origin (to viewers only)',
      r.streamCopiesFromOrigin === null
        ? '—'
        : `${r.streamCopiesFromOrigin.toFixed(2)} (${r.streamCopiesFromOriginToViewers.toFixed(2)})`,
    ],
    ['startup p50 / p95 (page open → first playing)', `${ms(r.startupMsP50)} / ${ms(r.startupMsP95)}`],
    ['stalls (total, after start)', `${r.stalls} (${ms(r.stallMs)})`],
    ['live delay p50 / p95', `${ms(r.liveDelayMsP50)} / ${ms(r.liveDelayMsP95)}`],
    ['viewers playing at the end', `${r.playingAtEnd} / ${r.viewers}`],
  ];
  const viewerRows = r.perViewer.map(
    (v) =>
      `| ${v.viewer} | ${ms(v.startupMs)} | ${pct(v.meshShare)} | ${mib(v.bytesFromOrigin)} | ${mib(v.uploadBytes)} | ${v.peers ?? '—'} | ${v.load ?? '—'} | ${v.stalls ?? '—'} | ${ms(v.liveDelayMsP50)} |`,
  );
  return `# Browser swarm: ${r.viewers} viewers, ${r.durationS} s

| metric | value |
|---|---|
${rows.map(([k, v]) => `| ${k} | ${v} |`).join('\n')}

| viewer | startup | mesh share | from origin | uploaded | peers | load | stalls | live delay p50 |
|---|---|---|---|---|---|---|---|---|
${viewerRows.join('\n')}

## How it was made

\`npm run swarm -- --viewers ${r.viewers} --duration …\` (scripts/swarm.mjs) on ${r.environment.cpus} cores,
Node ${r.environment.node}, ${r.environment.chromium}, started ${r.environment.startedAt}. Everything ran
inside a loopback-only network namespace: ffmpeg packaged a 640×360 30 fps test pattern (H.264
800 kbit/s + AAC 96 kbit/s) as live HLS with 2 s segments; the tracker served it at /live/ with the
true source in process; ${r.viewers} viewer pages of the demo (\`/?stream=live\`) were opened
${r.settings.staggerMs} ms apart in one headless Chromium context and sampled every 2 s${r.settings.hideVideo ? ' (players hidden with display: none, so not painted)' : ''}.

- **Mesh share**: Σ bytesFromMesh / Σ (bytesFromMesh + bytesFromOrigin) over the viewers' player stats.
- **Stream copies**: media bytes the origin served in the window (the true source's ingest included,
  which is one copy) ÷ bytes of the segments ffmpeg finished in the window (${r.producedSegments} segments,
  ${mib(r.producedBytes)}).
- **Startup**: from the page's navigation start to the video's first \`playing\` event.
- **Live delay**: the player's \`stats.liveDelayMs\` samples (the packager finishing a segment → the
  viewer playing it), pooled over viewers and samples.
- **Stalls**: the player's stalls after playback first started.
`;
}
