/**
 * `npm run swarm -- --viewers N --duration S --out DIR`: the browser swarm benchmark. Inside a
 * loopback-only network namespace: an ffmpeg live stream, the tracker with the true source, and N
 * headless Chromium viewers of the demo for S seconds. Writes DIR/result.json (mesh share, origin
 * load in stream copies, startup, stalls, live delay, per-viewer details) and DIR/report.md.
 * Progress goes to stderr.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { profileMarkdown } from '../lib/cpu-profile.js';
import { heapMarkdown } from '../lib/heap-snapshot.js';
import { UsageError, noPositionals, numberOption, parseCommandLine, stringValue } from '../lib/args.js';
import { runIsolated } from '../lib/netns.js';
import { resolveOut, withoutOut } from '../lib/out-dir.js';
import { fromRoot } from '../lib/paths.js';
import { percentile } from '../lib/stats.js';
import { rootSpreadOf, type RootSpread } from './roots.js';
import { sourceLinksOf, type SourceLinks } from './source-links.js';
import {
  trafficBetween,
  trafficMarkdown,
  trafficSummary,
  type TrafficReading,
  type TrafficSummary,
  type ViewerTraffic,
} from './traffic.js';
import { DEFAULT_PROTOCOL } from '@chunkycast/engine';
import { errorStack } from '../lib/wait.js';
import { Stack } from '../stack/cleanup.js';
import { startStream } from '../stack/stream.js';
import { startTracker } from '../stack/tracker.js';
import { cpuBetween, memoryOf, ofBrowser, sampleBrowsers } from '../bench-compare/browser-stats.js';
import {
  browserVersion,
  hidePlayer,
  launchBrowser,
  openViewer,
  viewerUrl,
  type Browser,
  type BrowserName,
  type Viewer,
  type ViewerHandle,
} from '../viewers/browser.js';
import { openHiddenTabViewer, type HiddenTabViewer } from '../viewers/hidden-tab.js';
// A profile starts PROFILE_WARMUP_MS into the window, or a quarter of the way if that is shorter.
import { heapSnapshotOf, PROFILE_WARMUP_MS, profilePage } from '../viewers/profile.js';
import type { ViewerSnapshot } from '../viewers/snapshot.js';
import { brief, monitor, steadinessProblems, summaryLine, swarmSummary } from '../viewers/watch.js';
import {
  bytesByDirection,
  crossDirections,
  interleave,
  parseBrowserMix,
  type BrowserCount,
} from './browsers.js';

const USAGE = `usage: npm run swarm -- [--viewers N | --browsers MIX] [--duration S] [--out DIR] [options]

N headless viewers watch an ffmpeg live stream through the mesh for S seconds, inside a
loopback-only network namespace. Writes DIR/result.json and DIR/report.md.

options:
  --viewers N       viewers, all in Chromium (default 6)
  --browsers MIX    viewers per browser, e.g. chromium:4,firefox:4 (Debian Chromium and Firefox
                    ESR), opened in turn; result.json then has byBrowser (mesh share, stalls,
                    startup, live delay, CPU and memory per viewer) and bytesByDirection (media on
                    each browser-pair direction)
  --duration S      seconds to watch after the last viewer opened (default 60)
  --out DIR         output directory (default out/swarm-N)
  --stagger MS      ms between opening two viewers (default 250)
  --target-load TL  viewers' target load in slices (default: the SDK's)
  --max-load ML     viewers' maximum load in slices (default: the SDK's)
  --packet-repair M viewers' repair (issue 14): engine, segment, or split (even-numbered viewers
                    engine, odd segment: both measured in one run; result.json's byPacketRepair)
                    (default: the SDK's)
  --drop-received F each viewer loses this fraction (0‥1) of the media arriving on its links (the
                    demo's ?fault=drop-received:F), so that repair has work on loopback
  --hide-video      hide the players (display: none): they still decode and play, but skip painting,
                    about 25% less CPU per viewer (for large swarms on few cores)
  --profile-viewer S
                    record Chromium's CPU profile of viewer v0's page for S seconds, from 10 s into
                    the window: DIR/v0.cpuprofile (open in DevTools) and, in report.md and
                    result.json's profile, its self time by part, source file and function
  --freeze-after S  freeze viewer v0's page S seconds into the window, for the rest of the run
                    (Chromium's Page.setWebLifecycleState: what a browser does to a background tab
                    it freezes): its JavaScript stops, its links stay open, and result.json's
                    frozen says how many children it had and how its neighbours fared. v0 is not
                    sampled (a frozen page answers nothing); needs v0 in Chromium
  --hidden-tab      open viewer v0 in a really hidden tab: its own headful Chromium on a private
                    X display (Xvfb), the viewer in a background tab behind a blank one, driven
                    over CDP (Playwright's pages are never hidden). result.json's hiddenTab: its
                    visibility and timer rate at the start and the end, its load and upload over
                    the run, and the other viewers' stalls. Run longer than 300 s to reach
                    Chromium's intensive throttling of pages hidden for 5 minutes. Needs v0 in
                    Chromium; not with --profile-viewer, --freeze-after or --heap-snapshot
  --heap-snapshot   take a heap snapshot of viewer v0's page at the end of the window (after a
                    garbage collection): DIR/v0.heapsnapshot (open in DevTools) and, in report.md
                    and result.json's heap, its size by kind and its ArrayBuffer bytes by owner.
                    Needs v0 in Chromium
  --help            print this help`;

/** Every viewer page is read this often. */
const SAMPLE_INTERVAL_MS = 2000;
/** The SDK's slices: the engine's default M. */
const SLICES = DEFAULT_PROTOCOL.slices;
/** A progress line every this many samples. */
const PROGRESS_EVERY_ROUNDS = 5;
const SEGMENT_SECONDS = 2;

const opts = parseCommandLine(
  'swarm',
  USAGE,
  {
    viewers: { type: 'string' },
    browsers: { type: 'string' },
    duration: { type: 'string' },
    out: { type: 'string' },
    stagger: { type: 'string' },
    'target-load': { type: 'string' },
    'max-load': { type: 'string' },
    'hide-video': { type: 'boolean' },
    'packet-repair': { type: 'string' },
    'drop-received': { type: 'string' },
    'profile-viewer': { type: 'string' },
    'freeze-after': { type: 'string' },
    'hidden-tab': { type: 'boolean' },
    'heap-snapshot': { type: 'boolean' },
  },
  (parsed) => {
    noPositionals(parsed);
    const optional = (flag: string): number | undefined => {
      const value = stringValue(parsed, flag);
      return value === undefined ? undefined : numberOption(flag, value, 0, { min: 0 });
    };
    const browsersSpec = stringValue(parsed, 'browsers');
    if (browsersSpec !== undefined && stringValue(parsed, 'viewers') !== undefined)
      throw new UsageError('give --viewers or --browsers, not both');
    const mix: BrowserCount[] =
      browsersSpec === undefined
        ? [
            {
              browser: 'chromium',
              viewers: Math.floor(numberOption('viewers', stringValue(parsed, 'viewers'), 6, { min: 1 })),
            },
          ]
        : parseBrowserMix(browsersSpec);
    const viewers = mix.reduce((a, c) => a + c.viewers, 0);
    const packetRepair = stringValue(parsed, 'packet-repair');
    if (
      packetRepair !== undefined &&
      packetRepair !== 'engine' &&
      packetRepair !== 'segment' &&
      packetRepair !== 'split'
    )
      throw new UsageError(`--packet-repair must be engine, segment or split, got ${packetRepair}`);
    const dropReceived = stringValue(parsed, 'drop-received');
    const profile = stringValue(parsed, 'profile-viewer');
    const freeze = stringValue(parsed, 'freeze-after');
    if (freeze !== undefined && mix[0]?.browser !== 'chromium')
      throw new UsageError('--freeze-after freezes v0 through Chromium: list chromium first in --browsers');
    const hiddenTab = parsed.values['hidden-tab'] === true;
    const heapSnapshot = parsed.values['heap-snapshot'] === true;
    if (heapSnapshot && mix[0]?.browser !== 'chromium')
      throw new UsageError('--heap-snapshot reads v0 through Chromium: list chromium first in --browsers');
    if (hiddenTab && mix[0]?.browser !== 'chromium')
      throw new UsageError('--hidden-tab opens v0 in Chromium: list chromium first in --browsers');
    if (hiddenTab && (freeze !== undefined || profile !== undefined || heapSnapshot))
      throw new UsageError(
        '--hidden-tab drives v0 over raw CDP: not with --freeze-after, --profile-viewer or --heap-snapshot',
      );
    return {
      viewers,
      mix,
      durationS: numberOption('duration', stringValue(parsed, 'duration'), 60, { min: 4 }),
      out: resolveOut(stringValue(parsed, 'out') ?? fromRoot('out', `swarm-${viewers}`)),
      staggerMs: numberOption('stagger', stringValue(parsed, 'stagger'), 250, { min: 0 }),
      targetLoad: optional('target-load'),
      maxLoad: optional('max-load'),
      hideVideo: parsed.values['hide-video'] === true,
      packetRepair,
      dropReceived:
        dropReceived === undefined
          ? undefined
          : numberOption('drop-received', dropReceived, 0, { min: 0, max: 1 }),
      profileS: profile === undefined ? undefined : numberOption('profile-viewer', profile, 0, { min: 1 }),
      freezeAfterS: freeze === undefined ? undefined : numberOption('freeze-after', freeze, 0, { min: 1 }),
      hiddenTab,
      heapSnapshot,
    };
  },
);
// The output path is resolved before re-running in the namespace, relative to where npm was run.
await runIsolated(fileURLToPath(import.meta.url), [...withoutOut(process.argv.slice(2)), '--out', opts.out]);

const progress = (text: string): void => {
  process.stderr.write(`swarm: ${text}\n`);
};
const stack = new Stack();
let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    progress('interrupted; stopping');
    void stack.stopAll().then(() => process.exit(130));
  });

const numbers = (values: readonly unknown[]): number[] =>
  values.filter((d): d is number => typeof d === 'number');

try {
  const started = new Date();
  const stream = await startStream({ quiet: true });
  stack.add('ffmpeg', () => stream.stop());
  await stream.waitForSegments(1);
  const tracker = await startTracker({ originDir: stream.dir });
  stack.add('tracker', () => tracker.stop());
  const browsers = new Map<BrowserName, Browser>();
  for (const { browser: name } of opts.mix) {
    const browser = await launchBrowser({ browser: name });
    stack.add(name, () => browser.close());
    browsers.set(name, browser);
  }
  const browserOfViewer = interleave(opts.mix);
  await stream.waitForSegments(3);
  progress(`stream, tracker and ${[...browsers.keys()].join(', ')} up; opening ${opts.viewers} viewer(s)`);

  await tracker.resetOrigin();
  const windowStart = Date.now();
  const processesAtStart = sampleBrowsers();
  const viewers: ViewerHandle[] = [];
  /** v0 with --hidden-tab (also in `viewers`). */
  let hidden: HiddenTabViewer | null = null;
  let hiddenAtStart: HiddenTabState | null = null;
  const rootsAsOpened: RootSpread[] = [];
  for (let i = 0; i < opts.viewers; i++) {
    const name = browserOfViewer[i] ?? 'chromium';
    const browser = browsers.get(name);
    if (browser === undefined) throw new Error(`no ${name} launched`);
    const url = viewerUrl(tracker.url, {
      targetLoad: opts.targetLoad,
      maxLoad: opts.maxLoad,
      packetRepair: packetRepairOf(i),
      fault: opts.dropReceived === undefined ? undefined : `drop-received:${opts.dropReceived}`,
    });
    const label = opts.mix.length > 1 ? `v${i}-${name}` : `v${i}`;
    if (i === 0 && opts.hiddenTab) {
      const h = await openHiddenTabViewer(url, { label: `${label}-hidden` });
      stack.add('hidden tab', () => h.close());
      hidden = h;
      viewers.push(h);
      // A hidden tab paints nothing: --hide-video has nothing to add.
      hiddenAtStart = await hiddenTabState(h);
      progress(
        `${h.label}: ${hiddenAtStart.visibility}, ${hiddenAtStart.timerTicksIn2s} ticks of a 10 ms interval in 2 s`,
      );
    } else {
      const viewer = await openViewer(browser, url, { label });
      viewers.push(viewer);
      if (opts.hideVideo) await hidePlayer(viewer);
    }
    if (opts.staggerMs > 0) await sleep(opts.staggerMs);
    // Where the slice trees are rooted as the swarm grows (the true source spreads them, issue 16).
    const snaps = await Promise.all(viewers.map((v) => v.stats()));
    rootsAsOpened.push(rootSpreadOf(snaps, SLICES, (Date.now() - windowStart) / 1000));
  }
  progress(`${viewers.length} viewer(s) open after ${((Date.now() - windowStart) / 1000).toFixed(1)} s`);

  const first = viewers[0];
  const profiling =
    opts.profileS === undefined || first === undefined || !('page' in first)
      ? null
      : profilePage(
          (first as Viewer).page,
          {
            startAfterMs: Math.min(PROFILE_WARMUP_MS, (opts.durationS * 1000) / 4),
            durationMs: Math.min(opts.profileS * 1000, opts.durationS * 1000 - PROFILE_WARMUP_MS),
          },
          (message) => {
            progress(`profile of v0 failed: ${message}`);
          },
        );
  if (profiling !== null) progress(`profiling v0 for up to ${opts.profileS ?? 0} s`);
  const frozen =
    opts.freezeAfterS === undefined || first === undefined || !('page' in first)
      ? null
      : freezeLater(first as Viewer, opts.freezeAfterS);
  // A frozen page answers nothing: with --freeze-after, v0 is left out of the samples.
  const watched = frozen === null ? viewers : viewers.slice(1);
  // The true source's peer connections over the run (issue 17: what it holds as the audience grows).
  const sourceLinks: SourceLinks[] = [];
  const readSourceLinks = async (): Promise<void> => {
    try {
      const links = sourceLinksOf(await tracker.swarm(), (Date.now() - windowStart) / 1000);
      if (links !== null) sourceLinks.push(links);
    } catch {
      // The tracker did not answer this time: a missing sample, not a failed run.
    }
  };
  const sourceReads: Promise<void>[] = [];
  const watchedSeries = await monitor(watched, {
    durationMs: opts.durationS * 1000,
    intervalMs: SAMPLE_INTERVAL_MS,
    onSample: (snaps, round, lastRound) => {
      if (lastRound || round % PROGRESS_EVERY_ROUNDS === 0) sourceReads.push(readSourceLinks());
      if (round % PROGRESS_EVERY_ROUNDS !== 0) return;
      const sum = swarmSummary(snaps, null, null);
      progress(summaryLine((Date.now() - windowStart) / 1000, sum));
    },
  });
  await Promise.all(sourceReads);
  const series: ViewerSnapshot[][] = frozen === null ? watchedSeries : [[], ...watchedSeries];
  const windowEnd = Date.now();
  const processesAtEnd = sampleBrowsers({ withMemory: true });
  const hiddenAtEnd = hidden === null ? null : await hiddenTabState(hidden);
  const profile = profiling === null ? null : await profiling;
  const heap =
    !opts.heapSnapshot || first === undefined || !('page' in first)
      ? null
      : await heapSnapshotOf((first as Viewer).page, (message) => {
          progress(`heap snapshot of v0 failed: ${message}`);
        });
  const origin = await tracker.origin();
  const produced = stream.bytesProduced(windowStart, windowEnd);
  // monitor() takes at least one round, so every series has a last sample.
  const last: ViewerSnapshot[] = series.map((s) => s[s.length - 1] ?? { now: windowEnd, error: 'no sample' });
  const sum = swarmSummary(last, origin, produced);

  const perViewer = viewers.map((v, i) => {
    const s = last[i] ?? { now: windowEnd };
    const samples = series[i] ?? [];
    const st = s.stats ?? {};
    const delays = numbers(samples.map((x) => x.stats?.liveDelayMs));
    // Stuck intervals: samples 2 s apart in which the video advanced less than 1 s, once playing.
    const playingFrom = samples.findIndex((x) => (x.video?.currentTime ?? 0) > 0);
    const stuck = playingFrom < 0 ? [] : steadinessProblems(v.label, samples.slice(playingFrom));
    return {
      viewer: v.label,
      browser: browserOfViewer[i] ?? 'chromium',
      startupMs:
        s.firstPlayingMs === null || s.firstPlayingMs === undefined ? null : Math.round(s.firstPlayingMs),
      bytesFromMesh: st.bytesFromMesh ?? null,
      bytesFromOrigin: st.bytesFromOrigin ?? null,
      meshShare: st.meshShare ?? null,
      segmentsFromMesh: st.segmentsFromMesh ?? null,
      segmentsFromOrigin: st.segmentsFromOrigin ?? null,
      uploadBytes: st.uploadBytes ?? null,
      // What the viewer's data channels carried by message type, and its transports' byte totals
      // (issue 17: what its datagrams are besides the media).
      traffic: trafficOfWindow(samples),
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
      // Which repair the viewer ran (issue 14), and what it recovered.
      repair: {
        mode: typeof st.packetRepair === 'string' ? st.packetRepair : null,
        packetsFromPeers: typeof st.repairPacketsFromPeers === 'number' ? st.repairPacketsFromPeers : null,
        packetsFromOrigin: typeof st.repairPacketsFromOrigin === 'number' ? st.repairPacketsFromOrigin : null,
        originBytes: typeof st.repairOriginBytes === 'number' ? st.repairOriginBytes : null,
        engineCounters: numberRecord(st.engineRepairCounters),
      },
      liveDelayMsP50: percentile(delays, 50),
      liveDelayMsP95: percentile(delays, 95),
      currentTime: s.video?.currentTime ?? null,
      stuckIntervals: stuck.length,
      pageErrors: s.errors ?? [],
      error: s.error ?? null,
    };
  });
  /** Stalls of every viewer but v0 over the whole window (with --freeze-after or --hidden-tab). */
  const othersStalls = {
    othersStalls: perViewer.slice(1).reduce((a, v) => a + (v.stalls ?? 0), 0),
    othersStallMs: perViewer.slice(1).reduce((a, v) => a + (v.stallMs ?? 0), 0),
  };
  const allDelays = series.flatMap((ser) => numbers(ser.map((x) => x.stats?.liveDelayMs)));
  const startups = perViewer.map((v) => v.startupMs);
  const versions = Object.fromEntries(opts.mix.map((c) => [c.browser, browserVersion(c.browser)]));
  const byBrowser = Object.fromEntries(
    opts.mix.map(({ browser: name, viewers: count }) => {
      const mine = perViewer.filter((v) => v.browser === name);
      const mySeries = series.filter((_, i) => browserOfViewer[i] === name);
      const myLast = last.filter((_, i) => browserOfViewer[i] === name);
      const mySum = swarmSummary(myLast, null, null);
      const cpu = cpuBetween(ofBrowser(processesAtStart, name), ofBrowser(processesAtEnd, name));
      const memory = memoryOf(ofBrowser(processesAtEnd, name));
      const perViewerOf = (x: number | null): number | null => (x === null ? null : x / count);
      return [
        name,
        {
          viewers: count,
          version: versions[name] ?? null,
          meshShare: mySum.meshShare,
          stalls: mySum.stalls,
          stallMs: mySum.stallMs,
          playingAtEnd: mySum.playing,
          startupMsP95: percentile(
            mine.map((v) => v.startupMs),
            95,
          ),
          liveDelayMsP95: percentile(
            mySeries.flatMap((ser) => numbers(ser.map((x) => x.stats?.liveDelayMs))),
            95,
          ),
          /** % of one core per viewer: the browser's page processes, and all its processes. */
          rendererCpuPctPerViewer: perViewerOf(cpu.renderersPct),
          browserCpuPctPerViewer: perViewerOf(cpu.allPct),
          cpuPctByProcessType: cpu.byTypePct,
          /** Pss at the end of the window per viewer, MiB: page processes, and all processes. */
          rendererMemoryMiBPerViewer: memory.renderersMiB / count,
          browserMemoryMiBPerViewer: memory.allMiB / count,
        },
      ];
    }),
  );
  const directions = bytesByDirection(series, browserOfViewer);
  const deliveryKeys = [
    'treeBytes',
    'repairBytes',
    'originBytes',
    'segmentsFromMesh',
    'segmentsCompletedFromOrigin',
    'segmentsFromOrigin',
    'forgedPacketsDropped',
  ] as const;
  const result: SwarmResult = {
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
      deliveryKeys.map((key) => [key, perViewer.reduce((a, v) => a + (v.delivery[key] ?? 0), 0)]),
    ),
    originSourceMediaBytes: origin.sourceMediaBytes,
    originViewerMediaBytes: origin.viewerMediaBytes,
    producedSegments: produced.count,
    producedBytes: produced.bytes,
    settings: {
      browsers: opts.mix,
      durationS: opts.durationS,
      staggerMs: opts.staggerMs,
      hideVideo: opts.hideVideo,
      targetLoad: opts.targetLoad ?? null,
      maxLoad: opts.maxLoad ?? null,
      segmentSeconds: SEGMENT_SECONDS,
      packetRepair: opts.packetRepair ?? null,
      dropReceived: opts.dropReceived ?? null,
      sampleIntervalMs: SAMPLE_INTERVAL_MS,
    },
    environment: {
      node: process.version,
      cpus: cpus().length,
      chromium: versions.chromium ?? null,
      browsers: versions,
      startedAt: started.toISOString(),
    },
    byBrowser,
    bytesByDirection: directions,
    /** Every viewer-to-viewer direction between two different browsers that carried no media. */
    crossDirectionsWithoutMedia: crossDirections(opts.mix).filter((d) => (directions[d] ?? 0) === 0),
    frozen:
      frozen === null
        ? null
        : {
            ...(await frozen),
            ...othersStalls,
          },
    hiddenTab:
      hidden === null
        ? null
        : {
            viewer: hidden.label,
            atStart: hiddenAtStart,
            atEnd: hiddenAtEnd,
            /** Its load (slice children), bytes forwarded and receive-only reasons, sample by sample. */
            samples: (series[0] ?? []).map((x) => ({
              tS: Math.round((x.now - windowStart) / 100) / 10,
              load: x.stats?.load ?? null,
              uploadBytes: x.stats?.uploadBytes ?? null,
              receiveOnlyReasons: x.stats?.receiveOnlyReasons ?? null,
              currentTime: x.video?.currentTime ?? null,
            })),
            mostLoad: Math.max(0, ...(series[0] ?? []).map((x) => x.stats?.load ?? 0)),
            uploadBytes: perViewer[0]?.uploadBytes ?? null,
            ...othersStalls,
          },
    byPacketRepair: byPacketRepair(perViewer),
    /** Viewers rooting slices (their parent is the true source): after each opened, and at the end. */
    rootSpread: {
      asOpened: rootsAsOpened,
      atEnd: rootSpreadOf(last, SLICES, (windowEnd - windowStart) / 1000),
    },
    profile: profile === null ? null : { viewer: 'v0', ...profile.summary },
    heap: heap === null ? null : { viewer: 'v0', ...heap.summary },
    /** What the data channels carried, by message type, per viewer per second of the window. */
    traffic: trafficSummary(perViewer.map((v) => v.traffic)),
    /** The true source's peer connections, read every PROGRESS_EVERY_ROUNDS samples and at the end. */
    sourceLinks,
    perViewer,
  };
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(join(opts.out, 'result.json'), `${JSON.stringify(result, null, 2)}\n`);
  if (profile !== null) writeFileSync(join(opts.out, 'v0.cpuprofile'), JSON.stringify(profile.raw));
  if (heap !== null) writeFileSync(join(opts.out, 'v0.heapsnapshot'), heap.raw);
  writeFileSync(
    join(opts.out, 'report.md'),
    report(result) +
      (profile === null ? '' : `\n${profileMarkdown(profile.summary, "Where viewer v0's CPU went")}`) +
      (heap === null ? '' : `\n${heapMarkdown(heap.summary, "What viewer v0's JS heap held at the end")}`),
  );
  last.forEach((s, i) => {
    progress(JSON.stringify(brief(viewers[i]?.label ?? `v${i}`, s)));
  });
  progress(summaryLine((windowEnd - windowStart) / 1000, sum));
  await stack.stopAll();
  process.stdout.write(`${join(opts.out, 'report.md')}\n`);
  process.exit(0);
} catch (error) {
  progress(`failed: ${errorStack(error)}`);
  await stack.stopAll();
  process.exit(1);
}

/**
 * Freezes `viewer`'s page `afterS` seconds from now (CDP Page.setWebLifecycleState, as Chromium
 * freezes background tabs) and reports when, and how many children it had just before.
 */
async function freezeLater(
  viewer: Viewer,
  afterS: number,
): Promise<{
  viewer: string;
  atS: number;
  children: number;
  slicesWithChildren: number;
  error: string | null;
}> {
  await sleep(afterS * 1000);
  const slices = (await viewer.stats()).stats?.slices ?? [];
  const before = {
    viewer: viewer.label,
    atS: afterS,
    children: new Set(slices.flatMap((x) => x.children.map(String))).size,
    slicesWithChildren: slices.filter((x) => x.children.length > 0).length,
  };
  try {
    const cdp = await viewer.page.context().newCDPSession(viewer.page);
    await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });
    progress(
      `${viewer.label} frozen with ${before.children} children on ${before.slicesWithChildren} slices`,
    );
    return { ...before, error: null };
  } catch (error) {
    progress(`could not freeze ${viewer.label}: ${String(error)}`);
    return { ...before, error: String(error) };
  }
}

/** Viewer i's `packetRepair` query parameter (split: even engine, odd segment; none: the SDK's). */
function packetRepairOf(i: number): string | undefined {
  if (opts.packetRepair === 'split') return i % 2 === 0 ? 'engine' : 'segment';
  return opts.packetRepair;
}

/** A page's object of counters, numbers only (anything else from the page is left out). */
function numberRecord(x: unknown): Record<string, number> | null {
  if (typeof x !== 'object' || x === null) return null;
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(x)) if (typeof v === 'number') out[k] = v;
  return out;
}

interface RepairFigures {
  readonly stalls: number | null;
  readonly stallMs: number | null;
  readonly bytesFromOrigin: number | null;
  readonly liveDelayMsP50: number | null;
  readonly delivery: { readonly segmentsFromOrigin: number | null; readonly repairBytes: number | null };
  readonly repair: {
    readonly mode: string | null;
    readonly packetsFromPeers: number | null;
    readonly packetsFromOrigin: number | null;
    readonly originBytes: number | null;
    readonly engineCounters: Readonly<Record<string, number>> | null;
  };
}

/**
 * The viewers grouped by the repair they ran, summed: the one-run comparison of issue 14 (the
 * groups share the stream, the tracker, the machine and each other as neighbours).
 */
function byPacketRepair(perViewer: readonly RepairFigures[]): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const v of perViewer) {
    const mode = v.repair.mode ?? 'unknown';
    const g = (out[mode] ??= {
      viewers: 0,
      stalls: 0,
      stallMs: 0,
      segmentsFromOrigin: 0,
      bytesFromOrigin: 0,
      repairBytesFromPeers: 0,
      repairPacketsFromPeers: 0,
      repairPacketsFromOrigin: 0,
      repairOriginBytes: 0,
    });
    const add = (key: string, x: number | null): void => {
      g[key] = (g[key] ?? 0) + (x ?? 0);
    };
    add('viewers', 1);
    add('stalls', v.stalls);
    add('stallMs', v.stallMs);
    add('segmentsFromOrigin', v.delivery.segmentsFromOrigin);
    add('bytesFromOrigin', v.bytesFromOrigin);
    add('repairBytesFromPeers', v.delivery.repairBytes);
    add('repairPacketsFromPeers', v.repair.packetsFromPeers);
    add('repairPacketsFromOrigin', v.repair.packetsFromOrigin);
    add('repairOriginBytes', v.repair.originBytes);
    // The engine's own counters (engine repair), summed: why packets went to the origin.
    for (const [k, x] of Object.entries(v.repair.engineCounters ?? {})) add(`engine.${k}`, x);
  }
  return out;
}

/** One browser's viewers in result.json (`byBrowser`). */
interface BrowserFigures {
  readonly viewers: number;
  readonly version: string | null;
  readonly meshShare: number;
  readonly stalls: number;
  readonly stallMs: number;
  readonly playingAtEnd: number;
  readonly startupMsP95: number | null;
  readonly liveDelayMsP95: number | null;
  readonly rendererCpuPctPerViewer: number | null;
  readonly browserCpuPctPerViewer: number | null;
  readonly rendererMemoryMiBPerViewer: number;
  readonly browserMemoryMiBPerViewer: number;
}

/** result.json's figures that report.md shows. */
interface SwarmResult {
  readonly viewers: number;
  readonly durationS: number;
  readonly meshShare: number;
  readonly originMediaBytes: number;
  readonly streamCopiesFromOrigin: number | null;
  readonly streamCopiesFromOriginToViewers: number | null;
  readonly startupMsP50: number | null;
  readonly startupMsP95: number | null;
  readonly stalls: number;
  readonly stallMs: number;
  readonly liveDelayMsP50: number | null;
  readonly liveDelayMsP95: number | null;
  readonly playingAtEnd: number;
  readonly originViewerMediaBytes: number;
  readonly producedSegments: number;
  readonly producedBytes: number;
  readonly byPacketRepair: Readonly<Record<string, Readonly<Record<string, number>>>>;
  readonly settings: {
    readonly staggerMs: number;
    readonly hideVideo: boolean;
    readonly [key: string]: unknown;
  };
  readonly environment: {
    readonly node: string;
    readonly cpus: number;
    readonly chromium: string | null;
    readonly browsers: Readonly<Record<string, string>>;
    readonly startedAt: string;
  };
  readonly byBrowser: Readonly<Record<string, BrowserFigures>>;
  readonly bytesByDirection: Readonly<Record<string, number>>;
  readonly crossDirectionsWithoutMedia: readonly string[];
  readonly rootSpread: { readonly asOpened: readonly RootSpread[]; readonly atEnd: RootSpread };
  readonly traffic: TrafficSummary | null;
  readonly sourceLinks: readonly SourceLinks[];
  readonly perViewer: readonly {
    readonly viewer: string;
    readonly startupMs: number | null;
    readonly meshShare: number | null;
    readonly bytesFromOrigin: number | null;
    readonly uploadBytes: number | null;
    readonly peers: number | null;
    readonly load: number | null;
    readonly stalls: number | null;
    readonly liveDelayMsP50: number | null;
  }[];
  readonly [figure: string]: unknown;
}

/** Whether the hidden tab is still hidden, and how often its timers run. */
interface HiddenTabState {
  readonly visibility: string;
  readonly timerTicksIn2s: number;
}

async function hiddenTabState(h: HiddenTabViewer): Promise<HiddenTabState> {
  return { visibility: await h.visibility(), timerTicksIn2s: await h.timerTicks(2000) };
}

/** What --hidden-tab reports (result.json's hiddenTab). */
interface HiddenTabFigures {
  readonly viewer: string;
  readonly atStart: HiddenTabState | null;
  readonly atEnd: HiddenTabState | null;
  readonly samples: readonly {
    readonly tS: number;
    readonly load: number | null;
    readonly uploadBytes: number | null;
    readonly receiveOnlyReasons: unknown;
  }[];
  readonly mostLoad: number;
  readonly uploadBytes: number | null;
  readonly othersStalls: number;
  readonly othersStallMs: number;
}

/** report.md's paragraph on the hidden tab, with its load once a minute; empty without --hidden-tab. */
function hiddenTabSection(figures: unknown): string {
  if (typeof figures !== 'object' || figures === null) return '';
  const h = figures as HiddenTabFigures;
  const state = (x: HiddenTabFigures['atStart']): string =>
    x === null ? '?' : `${x.visibility}, ${x.timerTicksIn2s} ticks of a 10 ms interval in 2 s`;
  const byMinute = h.samples.filter(
    (x, i) => i === 0 || Math.floor(x.tS / 60) !== Math.floor((h.samples[i - 1]?.tS ?? 0) / 60),
  );
  const rows = byMinute.map(
    (x) =>
      `| ${x.tS.toFixed(0)} s | ${x.load ?? '—'} | ${x.uploadBytes === null ? '—' : (x.uploadBytes / 1048576).toFixed(2)} | ${JSON.stringify(x.receiveOnlyReasons)} |`,
  );
  return `Viewer ${h.viewer} in a hidden tab: at the start ${state(h.atStart)}; at the end ${state(h.atEnd)}. Most load
${h.mostLoad}, ${h.uploadBytes === null ? '?' : (h.uploadBytes / 1048576).toFixed(2)} MiB forwarded; the other viewers stalled ${h.othersStalls} time(s) (${(h.othersStallMs / 1000).toFixed(2)} s).

| time | load | forwarded MiB | receive-only reasons |
|---|---|---|---|
${rows.join('\n')}

`;
}

function report(r: SwarmResult): string {
  const pct = (x: number | null): string => (x === null ? '—' : `${(100 * x).toFixed(1)}%`);
  const ms = (x: number | null): string => (x === null ? '—' : `${(x / 1000).toFixed(2)} s`);
  const mib = (x: number | null): string => (x === null ? '—' : `${(x / 1048576).toFixed(2)} MiB`);
  const rows: [string, string | number][] = [
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
        : `${r.streamCopiesFromOrigin.toFixed(2)} (${r.streamCopiesFromOriginToViewers?.toFixed(2)})`,
    ],
    ['startup p50 / p95 (page open → first playing)', `${ms(r.startupMsP50)} / ${ms(r.startupMsP95)}`],
    ['stalls (total, after start)', `${r.stalls} (${ms(r.stallMs)})`],
    ['live delay p50 / p95', `${ms(r.liveDelayMsP50)} / ${ms(r.liveDelayMsP95)}`],
    ['viewers playing at the end', `${r.playingAtEnd} / ${r.viewers}`],
    [
      'slice roots as viewers opened (viewers: roots / most slices on one)',
      r.rootSpread.asOpened.map((x) => `${x.viewers}: ${x.distinctRoots} / ${x.maxSlicesPerRoot}`).join(', '),
    ],
    [
      'true source’s open links (connected since it started): first read, most, at the end',
      sourceLinksLine(r.sourceLinks),
    ],
    [
      'slice roots at the end (roots / most slices on one / slices unrooted)',
      `${r.rootSpread.atEnd.distinctRoots} / ${r.rootSpread.atEnd.maxSlicesPerRoot} / ${r.rootSpread.atEnd.unrootedSlices}`,
    ],
  ];
  const viewerRows = r.perViewer.map(
    (v) =>
      `| ${v.viewer} | ${ms(v.startupMs)} | ${pct(v.meshShare)} | ${mib(v.bytesFromOrigin)} | ${mib(v.uploadBytes)} | ${v.peers ?? '—'} | ${v.load ?? '—'} | ${v.stalls ?? '—'} | ${ms(v.liveDelayMsP50)} |`,
  );
  const one = (x: number | null): string => (x === null ? '—' : x.toFixed(1));
  const browserRows = Object.entries(r.byBrowser).map(
    ([name, b]) =>
      `| ${name} (${b.version ?? '?'}) | ${b.viewers} | ${pct(b.meshShare)} | ${b.stalls} (${ms(b.stallMs)}) | ${ms(b.startupMsP95)} | ${ms(b.liveDelayMsP95)} | ${one(b.rendererCpuPctPerViewer)} / ${one(b.browserCpuPctPerViewer)} | ${b.rendererMemoryMiBPerViewer.toFixed(0)} / ${b.browserMemoryMiBPerViewer.toFixed(0)} |`,
  );
  const directionRows = Object.entries(r.bytesByDirection)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([direction, bytes]) => `| ${direction} | ${mib(bytes)} |`);
  const repairRows = Object.entries(r.byPacketRepair).map(
    ([mode, g]) =>
      `| ${mode} | ${g.viewers ?? 0} | ${g.stalls ?? 0} (${ms(g.stallMs ?? 0)}) | ${g.segmentsFromOrigin ?? 0} | ${mib(g.bytesFromOrigin ?? 0)} | ${g.repairPacketsFromPeers ?? 0} | ${g.repairPacketsFromOrigin ?? 0} | ${mib(g.repairOriginBytes ?? 0)} |`,
  );
  return `# Browser swarm: ${r.viewers} viewers, ${r.durationS} s

| metric | value |
|---|---|
${rows.map(([k, v]) => `| ${k} | ${v} |`).join('\n')}

By browser (CPU: % of one core per viewer, its page processes / all its processes; memory: Pss per
viewer at the end, MiB, the same two):

| browser | viewers | mesh share | stalls | startup p95 | live delay p95 | CPU % / viewer | memory MiB / viewer |
|---|---|---|---|---|---|---|---|
${browserRows.join('\n')}

Media received per direction (sender → receiver, from each viewer's per-link counts)${r.crossDirectionsWithoutMedia.length > 0 ? `; **no media on ${r.crossDirectionsWithoutMedia.join(', ')}**` : ''}:

| direction | media |
|---|---|
${directionRows.join('\n')}

| viewer | startup | mesh share | from origin | uploaded | peers | load | stalls | live delay p50 |
|---|---|---|---|---|---|---|---|---|
${viewerRows.join('\n')}

${trafficMarkdown(r.traffic)}${hiddenTabSection(r.hiddenTab)}Repair by path (issue 14; \`--packet-repair split\` measures both in one run):

| repair | viewers | stalls | whole segments from origin | from origin | packets repaired from peers | packets repaired from origin | origin bytes for repair |
|---|---|---|---|---|---|---|---|
${repairRows.join('\n')}

## How it was made

\`npm run swarm -- --viewers ${r.viewers} --duration …\` (tools/src/swarm/cli.ts) on ${r.environment.cpus} cores,
Node ${r.environment.node}, ${Object.values(r.environment.browsers).join(', ')}, started ${r.environment.startedAt}. Everything ran
inside a loopback-only network namespace: ffmpeg packaged a 640×360 30 fps test pattern (H.264
800 kbit/s + AAC 96 kbit/s) as live HLS with 2 s segments; the tracker served it at /live/ with the
true source in process; ${r.viewers} viewer pages of the demo (\`/?stream=live\`) were opened
${r.settings.staggerMs} ms apart, one headless browser context per browser kind, and sampled every 2 s${r.settings.hideVideo ? ' (players hidden with display: none, so not painted)' : ''}.

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

/** A viewer's traffic counts over the window: its first sample with stats to its last. */
function trafficOfWindow(samples: readonly ViewerSnapshot[]): ViewerTraffic | null {
  const withStats = samples.filter((x) => x.stats?.traffic !== undefined);
  const first = withStats[0];
  const last = withStats[withStats.length - 1];
  if (first === undefined || last === undefined) return null;
  const reading = (x: ViewerSnapshot): TrafficReading => ({
    atMs: x.now,
    traffic: x.stats?.traffic,
    transportBytesSent: x.stats?.transportBytesSent,
    transportBytesReceived: x.stats?.transportBytesReceived,
  });
  return trafficBetween(reading(first), reading(last));
}

function sourceLinksLine(reads: readonly SourceLinks[]): string {
  const first = reads[0];
  const last = reads[reads.length - 1];
  if (first === undefined || last === undefined) return '—';
  const most = reads.reduce((a, b) => (b.open > a.open ? b : a), first);
  const one = (x: SourceLinks): string => `${x.open} (${x.connected}) at ${x.tS.toFixed(0)} s`;
  return `${one(first)}, ${one(most)}, ${one(last)}`;
}
