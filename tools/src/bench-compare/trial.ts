/**
 * The comparison benchmark's trials (`npm run bench:compare`): one arm (plain hls.js, hls.js +
 * p2p-media-loader, <mesh-player>) at one live position, on a fresh swarm of N Chromium viewers
 * watching the shared ffmpeg stream through a fresh tracker whose /live/ origin counts the bytes.
 * The viewers are opened, sampled and judged by the same code as `npm run swarm` (openViewer,
 * monitor, readViewer, steadinessProblems, percentile); the pages are demo/bench/*.html, which
 * expose the same measurement hooks (demo/src/bench/measure.ts).
 */
import { cpus } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { mean, percentile, round } from '../lib/stats.js';
import { processStat } from '../lib/proc.js';
import { errorMessage, waitFor } from '../lib/wait.js';
import { Stack } from '../stack/cleanup.js';
import type { FinishedSegment, LiveStream } from '../stack/stream.js';
import { startSource, temporarySigningKey } from '../stack/source.js';
import { startTracker, type OriginCounters } from '../stack/tracker.js';
import { hidePlayer, launchBrowser, openViewer, type Viewer } from '../viewers/browser.js';
import { collectGarbageIn, memoryDumpOf, profilePage, type PageProfile } from '../viewers/profile.js';
import type { ProcessMemory } from '../lib/memory-dump.js';
import type { ViewerSnapshot } from '../viewers/snapshot.js';
import { monitor, steadinessProblems } from '../viewers/watch.js';
import {
  cpuBetween,
  machineBusyPct,
  machineCpu,
  memoryOf,
  sampleBrowsers,
  type BrowserSample,
  type CpuUse,
} from './browser-stats.js';
import { sampleThreads, threadCpuBetween, type ThreadCpu, type ThreadSample } from './browser-threads.js';
import { startWebTorrentTracker, type WebTorrentTracker } from './wt-tracker.js';

export const ARMS = ['http', 'p2pml', 'mesh'] as const;
export type Arm = (typeof ARMS)[number];

export const ARM_LABELS: Readonly<Record<Arm, string>> = {
  http: 'http (plain hls.js)',
  p2pml: 'p2pml (hls.js + p2p-media-loader)',
  mesh: 'mesh (<mesh-player>)',
};

/** The swarm every p2p-media-loader viewer joins (its `swarmId`). */
export const P2PML_SWARM_ID = 'chunkycast-bench-live';
export const SAMPLE_INTERVAL_MS = 2000;
/** Memory (Pss) is read every this many samples: reading smaps of every process costs CPU. */
const MEMORY_EVERY_ROUNDS = 5;
/** A progress line every this many samples. */
const PROGRESS_EVERY_ROUNDS = 10;

/** The page URL of one arm's viewer, served by the tracker from demo/dist/bench/. */
export function benchPageUrl(
  arm: Arm,
  trackerUrl: string,
  {
    liveSync,
    lowLatency = false,
    wtTrackerUrl,
  }: { liveSync: number | null; lowLatency?: boolean; wtTrackerUrl?: string | undefined },
): string {
  const u = new URL(`/bench/${arm}.html`, trackerUrl);
  if (liveSync !== null) u.searchParams.set('liveSync', String(liveSync));
  if (lowLatency) u.searchParams.set('lowLatency', '1');
  if (arm === 'p2pml') {
    u.searchParams.set('tracker', wtTrackerUrl ?? '');
    u.searchParams.set('swarm', P2PML_SWARM_ID);
  }
  if (arm === 'mesh') u.searchParams.set('stream', 'live');
  return u.toString();
}

/**
 * Live delay of one sample, ms: the moment the packager finished the segment at the playhead (its
 * file renamed into place, as the stream watcher records it) to now, plus the part of that segment
 * still ahead of the playhead (its media was captured that much earlier); for a segment still being
 * written, the previous one's finish less what of this one has played. What is ahead is counted
 * from the fragment's start and the segment's EXTINF: in LL mode hls.js reports the fragment as
 * far as its parts were listed when the playhead entered it, and its end was up to a segment short
 * (live delays of 0.07 s in one run and 1.6 s in the next, with the samples every segment length).
 * The same definition as <mesh-player>'s own liveDelayMs, computed here for every arm from the
 * fragment hls.js reports playing (FRAG_CHANGED), so no arm's own clock or announcement enters it.
 */
export function liveDelayMs(
  snap: ViewerSnapshot,
  segments: ReadonlyMap<number, FinishedSegment>,
): number | null {
  const st = snap.stats;
  if (!st || typeof st.playingSn !== 'number' || snap.firstPlayingMs === null) return null;
  const fragStartS = (st.playingFragEndS ?? 0) - (st.playingFragDurationS ?? 0);
  const playedS = Math.max((st.currentTime ?? 0) - fragStartS, 0);
  const segment = segments.get(st.playingSn);
  if (segment !== undefined) {
    const remainingS = Math.min(Math.max(segment.duration - playedS, 0), segment.duration);
    return snap.now - segment.readyAt + remainingS * 1000;
  }
  const previous = segments.get(st.playingSn - 1);
  return previous === undefined ? null : snap.now - previous.readyAt - playedS * 1000;
}

/** One point of the origin's counters during a trial, s after the window opened. */
export interface OriginPoint {
  readonly tS: number;
  readonly mediaBytes: number;
  readonly playlistBytes: number;
}

export interface TrialPlan {
  readonly arm: Arm;
  readonly setting: string;
  /** Segments behind the live edge; null: the library's own choice. */
  readonly liveSync: number | null;
  /** LL-HLS: the origin publishes parts (`--ll-hls`) and the player runs hls.js in lowLatencyMode. */
  readonly lowLatency: boolean;
}

/** One trial's raw measurements. */
export interface TrialRaw extends TrialPlan {
  readonly url: string;
  readonly windowStart: number;
  readonly monitorStart: number;
  readonly windowEnd: number;
  readonly labels: readonly string[];
  readonly series: readonly ViewerSnapshot[][];
  readonly origin: OriginCounters;
  readonly originSeries: readonly OriginPoint[];
  readonly produced: { bytes: number; count: number };
  readonly cpu: {
    readonly window: CpuUse;
    readonly steady: CpuUse;
    /**
     * % of one core: the tracker process (origin, signalling, and the true source in the mesh arm
     * unless it ran apart).
     */
    readonly trackerPct: number | null;
    /** % of one core: the true source's own process (mesh arm with `separateSource`), else null. */
    readonly sourcePct: number | null;
    readonly machineBusyPct: number | null;
    readonly memory: readonly { allMiB: number; renderersMiB: number; renderersFootprintMiB: number }[];
    /**
     * CPU by thread of the renderers and the network service over the steady part (the samples
     * `steady` is read from), when asked for (`threads`), else null.
     */
    readonly threads: ThreadCpu | null;
  };
  readonly settings: unknown;
  readonly consoleTails: readonly string[][];
  readonly wtTrackerStderr: string | null;
  readonly profile: PageProfile | null;
  /**
   * The processes' memory by allocator at the end of the window (`memoryDump`), as it was and again
   * after a full collection in every page; null when not asked for, and each dump null if it failed.
   */
  readonly memoryDump: {
    readonly asIs: readonly ProcessMemory[] | null;
    readonly afterCollection: readonly ProcessMemory[] | null;
  } | null;
}

export interface TrialOptions extends TrialPlan {
  readonly stream: LiveStream;
  readonly viewers: number;
  readonly durationS: number;
  readonly staggerMs: number;
  readonly hideVideo: boolean;
  readonly progress: (line: string) => void;
  /** Profile viewer v0's page (bench:cost): from `startAfterMs` after it opened, for `durationMs`. */
  readonly profile?: { readonly startAfterMs: number; readonly durationMs: number };
  /**
   * Mesh arm: run the true source as its own process (chunkycast-source) rather than in the
   * tracker's, so that its CPU is read apart (bench:cost).
   */
  readonly separateSource?: boolean;
  /**
   * Also read every renderer's and the network service's threads at the start and the end of the
   * steady part (bench:cost): CPU by thread name.
   */
  readonly threads?: boolean;
  /**
   * Take a memory-infra dump of every Chromium process at the end of the window (bench:cost):
   * memory by allocator, as it is and after a full collection in every page.
   */
  readonly memoryDump?: boolean;
}

/**
 * A generous bound on one trial, s: start-up, opening the pages (about 2 s each plus the stagger),
 * watching, teardown. The benchmarks stop a run that takes twice its trials' bounds.
 */
export function trialBoundS(durationS: number, viewers: number, staggerMs: number): number {
  return durationS + (viewers * (staggerMs + 2000)) / 1000 + 60;
}

function cpuCount(): number {
  return Math.max(1, cpus().length);
}

/**
 * Runs one arm at one live position and returns its raw measurements. Everything it starts
 * (tracker, WebTorrent tracker, Chromium) is stopped before it returns, also on failure.
 */
export async function runTrial({
  arm,
  setting,
  liveSync,
  lowLatency,
  stream,
  viewers: count,
  durationS,
  staggerMs,
  hideVideo,
  progress,
  profile: profileWindow,
  separateSource = false,
  threads = false,
  memoryDump = false,
}: TrialOptions): Promise<TrialRaw> {
  const stack = new Stack();
  try {
    const sourceApart = arm === 'mesh' && separateSource;
    const key = sourceApart ? temporarySigningKey() : null;
    if (key !== null)
      stack.add('signing key', () => {
        key.remove();
        return Promise.resolve();
      });
    const tracker = await startTracker({
      originDir: stream.dir,
      sourceStream: arm === 'mesh' && !sourceApart ? 'live' : null,
      extraArgs: [...(lowLatency ? ['--ll-hls'] : []), ...(key === null ? [] : ['--signing-key', key.path])],
    });
    stack.add('tracker', () => tracker.stop());
    const source =
      key === null
        ? null
        : await startSource({
            trackerWsUrl: tracker.wsUrl,
            playlistUrl: `${tracker.url}/live/live.m3u8`,
            signingKeyFile: key.path,
            broadcasterKey: tracker.broadcasterKey,
          });
    if (source !== null) stack.add('true source', () => source.stop());
    let wt: WebTorrentTracker | null = null;
    if (arm === 'p2pml') {
      const started = await startWebTorrentTracker();
      wt = started;
      stack.add('bittorrent-tracker', () => started.stop());
    }
    const browser = await launchBrowser();
    stack.add('chromium', () => browser.close());
    if (arm === 'mesh') {
      // The true source must be in the swarm before viewers come, as it would be in production.
      await waitFor(
        'the true source to join the tracker',
        async () => (await tracker.swarm('live')).sourceConnected,
        { timeoutMs: 20_000, intervalMs: 250 },
      );
    }
    const url = benchPageUrl(arm, tracker.url, { liveSync, lowLatency, wtTrackerUrl: wt?.wsUrl });
    progress(
      `${arm} @ ${setting} (liveSync ${liveSync ?? (lowLatency ? 'PART-HOLD-BACK' : 'library default')}): opening ${count} viewer(s) at ${url}`,
    );

    await tracker.resetOrigin();
    const windowStart = Date.now();
    // The counters just after the reset (bytes of requests already under way may land here).
    const originAtStart = await tracker.origin();
    const cpuAtStart = sampleBrowsers();
    const trackerPid = tracker.proc.pid;
    const sourcePid = source?.proc.pid;
    const pages: Viewer[] = [];
    for (let i = 0; i < count; i++) {
      const viewer = await openViewer(browser, url, { label: `v${i}` });
      pages.push(viewer);
      if (hideVideo) await hidePlayer(viewer);
      if (staggerMs > 0) await sleep(staggerMs);
    }
    const profiling =
      profileWindow === undefined || pages[0] === undefined
        ? null
        : profilePage(pages[0].page, profileWindow, (message) => {
            progress(`${arm} @ ${setting}: profile of v0 failed: ${message}`);
          });
    const monitorStart = Date.now();
    const chromiumSamples: BrowserSample[] = [sampleBrowsers({ withMemory: true })];
    // Read right after the process samples that bound the steady part, so that both cover one window;
    // only at its two ends, because reading every thread of every renderer is not free.
    const threadSamples: ThreadSample[] =
      threads && chromiumSamples[0] !== undefined ? [sampleThreads(chromiumSamples[0])] : [];
    // The tracker's process (with the true source in it in the mesh arm), over the same steady part.
    const cpuSecondsOf = (pid: number | undefined): number | null =>
      pid === undefined ? null : (processStat(pid)?.cpuSeconds ?? null);
    const trackerCpuAtMonitor = cpuSecondsOf(trackerPid);
    const sourceCpuAtMonitor = cpuSecondsOf(sourcePid);
    const machineSamples = [machineCpu()];
    const originPending: Promise<OriginPoint | null>[] = [
      Promise.resolve({
        tS: 0,
        mediaBytes: originAtStart.mediaBytes,
        playlistBytes: originAtStart.playlistBytes,
      }),
    ];
    const series = await monitor(pages, {
      durationMs: durationS * 1000,
      intervalMs: SAMPLE_INTERVAL_MS,
      onSample: (snaps, round, last) => {
        const atMs = Date.now();
        originPending.push(
          tracker.origin().then(
            (o) => ({
              tS: (atMs - windowStart) / 1000,
              mediaBytes: o.mediaBytes,
              playlistBytes: o.playlistBytes,
            }),
            () => null,
          ),
        );
        if (round > 0) {
          const sample = sampleBrowsers({ withMemory: round % MEMORY_EVERY_ROUNDS === 0 });
          chromiumSamples.push(sample);
          machineSamples.push(machineCpu());
          if (last && threadSamples.length > 0) threadSamples.push(sampleThreads(sample));
        }
        if (round % PROGRESS_EVERY_ROUNDS === 0) {
          const playing = snaps.filter((s) => s.stats?.playing === true).length;
          const stalls = snaps.reduce((a, s) => a + (s.stats?.stalls ?? 0), 0);
          const share = snaps.reduce((a, s) => a + (s.stats?.p2pBytes ?? 0), 0);
          const total = share + snaps.reduce((a, s) => a + (s.stats?.httpBytes ?? 0), 0);
          progress(
            `${arm} @ ${setting} t=${((atMs - windowStart) / 1000).toFixed(0)}s playing ${playing}/${count}` +
              ` p2p ${total === 0 ? '—' : `${((100 * share) / total).toFixed(0)}%`} stalls ${stalls}`,
          );
        }
      },
    });
    const windowEnd = Date.now();
    const trackerCpuAtEnd = cpuSecondsOf(trackerPid);
    const sourceCpuAtEnd = cpuSecondsOf(sourcePid);
    const pctOfCore = (from: number | null, to: number | null): number | null =>
      from === null || to === null || windowEnd <= monitorStart
        ? null
        : (100 * (to - from)) / ((windowEnd - monitorStart) / 1000);
    const profile = profiling === null ? null : await profiling;
    // After the window's last samples, so that the traces and collections cost nothing they measure.
    const dumpFailed = (what: string) => (message: string) => {
      progress(`${arm} @ ${setting}: ${what} failed: ${message}`);
    };
    const firstViewer = pages[0];
    let dumped: TrialRaw['memoryDump'] = null;
    if (memoryDump && firstViewer !== undefined) {
      const asIs = await memoryDumpOf(firstViewer.page, dumpFailed('memory dump'));
      const collected = await collectGarbageIn(
        pages.map((p) => p.page),
        dumpFailed('garbage collection'),
      );
      // A dump after collecting in only some pages would mix the two states.
      const afterCollection =
        collected === pages.length
          ? await memoryDumpOf(firstViewer.page, dumpFailed('memory dump after a collection'))
          : null;
      dumped = { asIs, afterCollection };
    }
    const origin = await tracker.origin();
    const originSeries = (await Promise.all(originPending)).filter((x): x is OriginPoint => x !== null);
    originSeries.push({
      tS: (windowEnd - windowStart) / 1000,
      mediaBytes: origin.mediaBytes,
      playlistBytes: origin.playlistBytes,
    });
    const firstPage = pages[0]?.page;
    const settings: unknown =
      firstPage === undefined
        ? null
        : await firstPage
            .evaluate(() => {
              const globals = globalThis as unknown as { chunkycast?: { settings?: () => unknown } };
              return globals.chunkycast?.settings?.() ?? null;
            })
            .catch((error: unknown) => ({ error: errorMessage(error) }));
    const consoleTails = pages.map((p) => p.console.text().split('\n').filter(Boolean).slice(-5));
    // At least the one sample taken before monitoring started.
    const firstChromium = chromiumSamples[0] ?? cpuAtStart;
    const lastChromium = chromiumSamples[chromiumSamples.length - 1] ?? cpuAtStart;
    const firstMachine = machineSamples[0] ?? machineCpu();
    const lastMachine = machineSamples[machineSamples.length - 1] ?? firstMachine;
    return {
      arm,
      setting,
      liveSync,
      lowLatency,
      url,
      windowStart,
      monitorStart,
      windowEnd,
      labels: pages.map((p) => p.label),
      series,
      origin,
      originSeries,
      produced: stream.bytesProduced(windowStart, windowEnd),
      cpu: {
        // The whole window incl. opening the pages, and the steady part after the last one opened.
        window: cpuBetween(cpuAtStart, lastChromium),
        steady: cpuBetween(firstChromium, lastChromium),
        machineBusyPct: machineBusyPct(firstMachine, lastMachine, cpuCount()),
        trackerPct: pctOfCore(trackerCpuAtMonitor, trackerCpuAtEnd),
        sourcePct: pctOfCore(sourceCpuAtMonitor, sourceCpuAtEnd),
        memory: chromiumSamples.filter((s) => s.processes.some((p) => 'pssKb' in p)).map(memoryOf),
        threads:
          threadSamples[0] === undefined || threadSamples[1] === undefined
            ? null
            : threadCpuBetween(threadSamples[0], threadSamples[1]),
      },
      settings,
      consoleTails,
      wtTrackerStderr: wt?.stderr() ?? null,
      profile,
      memoryDump: dumped,
    };
  } finally {
    await stack.stopAll();
  }
}

function producedSeries(
  segments: ReadonlyMap<number, FinishedSegment>,
  fromMs: number,
  toMs: number,
): { tS: number; bytes: number }[] {
  const finished = [...segments.values()]
    .filter((s) => s.readyAt >= fromMs && s.readyAt <= toMs)
    .sort((a, b) => a.readyAt - b.readyAt);
  let bytes = 0;
  const points = [{ tS: 0, bytes: 0 }];
  for (const s of finished) {
    bytes += s.bytes;
    points.push({ tS: (s.readyAt - fromMs) / 1000, bytes });
  }
  return points;
}

/** One viewer's figures in a trial. */
export interface TrialViewer {
  readonly viewer: string;
  readonly startupMs: number | null;
  readonly stalls: number | null;
  readonly stallMs: number | null;
  readonly p2pBytes: number | null;
  readonly httpBytes: number | null;
  readonly p2pShare: number | null;
  readonly peers: number | null;
  readonly liveDelayMsP50: number | null;
  readonly liveDelayMsP95: number | null;
  readonly stuckIntervals: number;
  readonly fatalErrors: number | null;
  readonly extra: Readonly<Record<string, number | string | boolean | null>>;
  readonly pageErrors: readonly string[];
  readonly sampleError: string | null;
  readonly console: readonly string[];
}

/** The figures of one trial (result.json's `results[]`). */
export interface TrialSummary {
  readonly arm: Arm;
  readonly setting: string;
  readonly liveSyncSegments: number | null;
  readonly viewers: number;
  readonly windowS: number | null;
  readonly originMediaBytes: number;
  readonly originBytesPerViewerMinute: number | null;
  /** Filled by addRatios. */
  originRatioToHttp: number | null;
  controlSetting?: string | null;
  readonly streamCopiesFromOrigin: number | null;
  readonly originSourceMediaBytes: number | null;
  readonly originViewerMediaBytes: number | null;
  readonly originMediaRequests: number | null;
  readonly originPlaylistBytes: number | null;
  readonly originPlaylistRequests: number | null;
  readonly producedBytes: number;
  readonly producedSegments: number;
  readonly producedSeries: readonly { tS: number; bytes: number }[];
  readonly p2pShare: number | null;
  readonly startupMsP50: number | null;
  readonly startupMsP95: number | null;
  readonly neverPlayed: number;
  readonly stalls: number;
  readonly stallMs: number | null;
  readonly stuckIntervals: number;
  readonly liveDelayMsP50: number | null;
  readonly liveDelayMsP95: number | null;
  readonly armOwnLiveDelayMsP50: number | null;
  readonly armOwnLiveDelayMsP95: number | null;
  readonly cpuPerViewerPct: number | null;
  readonly rendererCpuPerViewerPct: number | null;
  /** % of one core per Chromium process type, all viewers together (see CpuUse.byTypePct). */
  readonly cpuByProcessTypePct: Readonly<Record<string, number>>;
  /** % of one core: the tracker process, true source included in the mesh arm. */
  readonly trackerCpuPct: number | null;
  readonly memPerViewerMB: number | null;
  readonly rendererMemPerViewerMB: number | null;
  /** The renderers' private footprint (RssAnon + VmSwap, Chromium's own measure), MiB ÷ viewers. */
  readonly rendererFootprintPerViewerMB: number | null;
  readonly chromiumProcesses: number;
  readonly chromiumRenderers: number;
  readonly machineBusyPct: number | null;
  readonly playingAtEnd: number;
  readonly url: string;
  readonly pageSettings: unknown;
  readonly originSeries: readonly OriginPoint[];
  readonly liveDelaySamplesMs: readonly number[];
  readonly perViewer: readonly TrialViewer[];
}

/**
 * The figures of one trial (everything but the ratio to the control, which needs the http trial).
 * `segments`: the stream watcher's map (sequence → readyAt) for the live delay.
 */
export function summarizeTrial(
  trial: TrialRaw,
  segments: ReadonlyMap<number, FinishedSegment>,
): TrialSummary {
  const n = trial.series.length;
  const last = trial.series.map((s) => s[s.length - 1] ?? { now: trial.windowEnd, error: 'no sample' });
  const windowS = (trial.windowEnd - trial.windowStart) / 1000;
  const delaysOf = (samples: readonly ViewerSnapshot[]): number[] =>
    samples.map((x) => liveDelayMs(x, segments)).filter((d): d is number => d !== null);
  const perViewer = trial.series.map((samples, i): TrialViewer => {
    const s = last[i] ?? { now: trial.windowEnd };
    const st = s.stats ?? {};
    const label = trial.labels[i] ?? `v${i}`;
    const delays = delaysOf(samples);
    const playingFrom = samples.findIndex((x) => (x.video?.currentTime ?? 0) > 0);
    const stuck = playingFrom < 0 ? [] : steadinessProblems(label, samples.slice(playingFrom));
    return {
      viewer: label,
      startupMs: typeof s.firstPlayingMs === 'number' ? Math.round(s.firstPlayingMs) : null,
      stalls: st.stalls ?? null,
      stallMs: round(st.stallMs ?? null, 0),
      p2pBytes: st.p2pBytes ?? null,
      httpBytes: st.httpBytes ?? null,
      p2pShare: round(st.p2pShare ?? null, 4),
      peers: st.peers ?? null,
      liveDelayMsP50: round(percentile(delays, 50), 0),
      liveDelayMsP95: round(percentile(delays, 95), 0),
      stuckIntervals: stuck.length,
      fatalErrors: st.fatalErrors ?? null,
      extra: st.extra ?? {},
      pageErrors: s.errors ?? [],
      sampleError: s.error ?? null,
      console: trial.consoleTails[i] ?? [],
    };
  });
  const delays = trial.series.flatMap(delaysOf);
  // Cross-check: the arm's own live delay figure where it has one (<mesh-player>'s liveDelayMs).
  const ownDelays = trial.series.flatMap((samples) =>
    samples
      .filter((x) => x.firstPlayingMs !== null && x.firstPlayingMs !== undefined)
      .map((x) => x.stats?.extra?.playerLiveDelayMs)
      .filter((d): d is number => typeof d === 'number'),
  );
  const startups = perViewer.map((v) => v.startupMs);
  const p2p = perViewer.reduce((a, v) => a + (v.p2pBytes ?? 0), 0);
  const http = perViewer.reduce((a, v) => a + (v.httpBytes ?? 0), 0);
  const memory = trial.cpu.memory;
  const produced = trial.produced;
  const perViewerOf = (total: number | null): number | null => (total === null ? null : total / n);
  return {
    arm: trial.arm,
    setting: trial.setting,
    liveSyncSegments: trial.liveSync,
    viewers: n,
    windowS: round(windowS, 1),
    originMediaBytes: trial.origin.mediaBytes,
    originBytesPerViewerMinute: round(trial.origin.mediaBytes / (n * (windowS / 60)), 0),
    originRatioToHttp: null,
    /** Origin media bytes ÷ bytes of the segments ffmpeg finished in the window. */
    streamCopiesFromOrigin: produced.bytes > 0 ? round(trial.origin.mediaBytes / produced.bytes, 3) : null,
    originSourceMediaBytes: trial.origin.sourceMediaBytes,
    originViewerMediaBytes: trial.origin.viewerMediaBytes,
    originMediaRequests: trial.origin.mediaRequests,
    originPlaylistBytes: trial.origin.playlistBytes,
    originPlaylistRequests: trial.origin.playlistRequests,
    producedBytes: produced.bytes,
    producedSegments: produced.count,
    /** Cumulative bytes of the segments finished since the window opened: one stream copy. */
    producedSeries: producedSeries(segments, trial.windowStart, trial.windowEnd),
    p2pShare: trial.arm === 'http' ? null : p2p + http === 0 ? 0 : round(p2p / (p2p + http), 4),
    startupMsP50: percentile(startups, 50),
    startupMsP95: percentile(startups, 95),
    neverPlayed: startups.filter((s) => s === null).length,
    stalls: perViewer.reduce((a, v) => a + (v.stalls ?? 0), 0),
    stallMs: round(
      perViewer.reduce((a, v) => a + (v.stallMs ?? 0), 0),
      0,
    ),
    stuckIntervals: perViewer.reduce((a, v) => a + v.stuckIntervals, 0),
    liveDelayMsP50: round(percentile(delays, 50), 0),
    liveDelayMsP95: round(percentile(delays, 95), 0),
    armOwnLiveDelayMsP50: round(percentile(ownDelays, 50), 0),
    armOwnLiveDelayMsP95: round(percentile(ownDelays, 95), 0),
    cpuPerViewerPct: round(perViewerOf(trial.cpu.steady.allPct), 1),
    rendererCpuPerViewerPct: round(perViewerOf(trial.cpu.steady.renderersPct), 1),
    cpuByProcessTypePct: Object.fromEntries(
      Object.entries(trial.cpu.steady.byTypePct).map(([type, pct]) => [type, round(pct, 1) ?? 0]),
    ),
    trackerCpuPct: round(trial.cpu.trackerPct, 1),
    memPerViewerMB: round(perViewerOf(mean(memory.map((m) => m.allMiB))), 1),
    rendererMemPerViewerMB: round(perViewerOf(mean(memory.map((m) => m.renderersMiB))), 1),
    rendererFootprintPerViewerMB: round(perViewerOf(mean(memory.map((m) => m.renderersFootprintMiB))), 1),
    chromiumProcesses: trial.cpu.steady.processes,
    chromiumRenderers: trial.cpu.steady.renderers,
    machineBusyPct: round(trial.cpu.machineBusyPct, 0),
    playingAtEnd: last.filter((s) => s.stats?.playing === true).length,
    url: trial.url,
    pageSettings: trial.settings,
    originSeries: trial.originSeries,
    liveDelaySamplesMs: delays.map((d) => Math.round(d)),
    perViewer,
  };
}
