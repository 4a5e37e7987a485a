/**
 * One lab run: builds the network (network.ts), starts ffmpeg, coturn and the tracker with the
 * true source on the public segment, one Chromium per home, watches every viewer for the duration
 * and returns the figures (result.json's shape). The caller must already be in its own
 * loopback-only network namespace (the lab's CLI and `npm run e2e` make sure of it).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { percentile } from '../lib/stats.js';
import { errorMessage } from '../lib/wait.js';
import { Stack } from '../stack/cleanup.js';
import { startStream } from '../stack/stream.js';
import { startTracker, type OriginCounters } from '../stack/tracker.js';
import {
  chromiumPath,
  hidePlayer,
  launchBrowser,
  openViewer,
  viewerUrl,
  type Browser,
  type Viewer,
} from '../viewers/browser.js';
import type { PlayerStatsSnapshot, ViewerSnapshot } from '../viewers/snapshot.js';
import { sampleAll } from '../viewers/watch.js';
import { startCoturn, type Coturn } from './coturn.js';
import {
  LAB_PUBLIC_IP,
  buildLab,
  readUplinkBytes,
  type Home,
  type Lab,
  type UplinkReading,
} from './network.js';
import { SCENARIOS, type Scenario } from './scenarios.js';

/** Uplink counters are read this often; peaks are over 1 s windows (two samples apart). */
const UPLINK_SAMPLE_MS = 500;
/** Viewer pages are read this often. */
const PAGE_SAMPLE_MS = 2000;
/** "Saturated": a 1 s window above this share of the home's uplink cap. */
const SATURATED_SHARE = 0.9;
/** A viewer is opened this long after the previous one (a gentle flash crowd). */
const STAGGER_MS = 500;

/** A Chromium that runs inside `namespace`: Playwright starts this script instead of the binary. */
function chromiumWrapper(dir: string, namespace: string): string {
  const path = join(dir, `chromium-${namespace}.sh`);
  writeFileSync(path, `#!/bin/sh\nexec ip netns exec ${namespace} ${chromiumPath()} "$@"\n`);
  chmodSync(path, 0o755);
  return path;
}

export interface LabOptions {
  scenarioName: string;
  durationS: number;
  progress?: (line: string) => void;
  showVideo?: boolean;
  echo?: boolean;
  exposeHostAddresses?: boolean;
}

/**
 * Runs `scenarioName` for `durationS` seconds after the last viewer opened. `progress(line)` gets a
 * line every few seconds. Returns the figures and every page's console (for consoles.txt).
 */
export async function runLab({
  scenarioName,
  durationS,
  progress = () => undefined,
  showVideo = false,
  echo = false,
  exposeHostAddresses = false,
}: LabOptions): Promise<{ result: LabResult; consoles: string[] }> {
  const scenario = SCENARIOS[scenarioName];
  if (scenario === undefined)
    throw new Error(
      `unknown lab scenario ${JSON.stringify(scenarioName)} (${Object.keys(SCENARIOS).join(', ')})`,
    );
  const stack = new Stack();
  const stopOnSignal = (): void => {
    void stack.stopAll().then(() => process.exit(130));
  };
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  const scratch = mkdtempSync(join(tmpdir(), 'chunkycast-lab-'));
  stack.add('scratch directory', () => {
    rmSync(scratch, { recursive: true, force: true });
    return Promise.resolve();
  });
  try {
    progress(`building the network: ${scenario.homes.length} homes`);
    const lab = buildLab(scenario.homes.map((h) => ({ ...h })));
    stack.add('lab network', () => {
      lab.destroy();
      return Promise.resolve();
    });

    const stream = await startStream({ quiet: true });
    stack.add('ffmpeg', () => stream.stop());
    await stream.waitForSegments(2);

    const turnSecret = randomBytes(24).toString('base64url');
    let coturn: Coturn | null = null;
    const trackerArgs: string[] = [];
    if (scenario.ice !== 'none') {
      const started = await startCoturn({ ip: LAB_PUBLIC_IP, secret: turnSecret, echo });
      coturn = started;
      stack.add('coturn', () => started.stop());
      trackerArgs.push('--stun-urls', coturn.stunUrl, '--turn-urls', coturn.turnUrls.join(','));
    }
    const tracker = await startTracker({
      originDir: stream.dir,
      host: LAB_PUBLIC_IP,
      extraArgs: trackerArgs,
      // The TURN secret goes in the environment, not argv.
      env: coturn === null ? {} : { CHUNKYCAST_TURN_SECRET: turnSecret },
      echo: echo ? true : (r) => r.level === 'error',
    });
    stack.add('tracker', () => tracker.stop());
    const health = (await tracker.getJson('/healthz')) as LabResult['trackerHealth'];

    progress(`starting ${lab.homes.length} Chromium, one per home`);
    const homes: { home: Home; browser: Browser }[] = [];
    // The pages come from http://198.18.0.1, which is not a secure context, and the SDK needs
    // WebCrypto (secure contexts only): real deployments serve HTTPS; the lab tells Chromium to
    // treat its one origin as secure rather than run a CA. The pages do not ask for the microphone,
    // so Chromium hides its host addresses behind mDNS names as it does for any viewer on the
    // internet; `exposeHostAddresses` asks for it, and host candidates then carry addresses.
    const browserArgs = [`--unsafely-treat-insecure-origin-as-secure=${tracker.url}`];
    for (const home of lab.homes) {
      const browser = await launchBrowser({
        executablePath: chromiumWrapper(scratch, home.namespace),
        extraArgs: browserArgs,
        askMicrophone: exposeHostAddresses,
      });
      stack.add(`chromium in ${home.namespace}`, () => browser.close());
      homes.push({ home, browser });
    }

    await tracker.resetOrigin();
    const windowStart = Date.now();
    const params = { ...(scenario.capacity === 'fixed' ? { uploadCapacity: 'fixed' } : {}) };
    const viewers: Viewer[] = [];
    for (const h of homes) {
      const url = viewerUrl(tracker.url, params);
      const viewer = await openViewer(h.browser, url, { label: h.home.name });
      viewers.push(viewer);
      if (!showVideo) await hidePlayer(viewer);
      await sleep(STAGGER_MS);
    }

    // Uplink sampling runs on its own clock beside the page sampling.
    const uplink: UplinkSeries = { readings: [] };
    /** Cleared when the page sampling ends: an object, so the loop reads it afresh. */
    const sampling = { on: true };
    const uplinkLoop = (async () => {
      // Bounded by the page sampling below, which ends after `rounds` rounds.
      while (sampling.on) {
        const t = Date.now();
        uplink.readings.push(await readUplinkBytes(lab));
        await sleep(Math.max(0, UPLINK_SAMPLE_MS - (Date.now() - t)));
      }
    })();

    const pageSeries: ViewerSnapshot[][] = viewers.map(() => []);
    const rounds = Math.max(1, Math.round((durationS * 1000) / PAGE_SAMPLE_MS));
    const monitorStart = Date.now();
    for (let round = 0; round <= rounds; round++) {
      const snaps = await sampleAll(viewers);
      snaps.forEach((s, i) => pageSeries[i]?.push(s));
      if (round % 5 === 0 || round === rounds)
        progress(progressLine((Date.now() - monitorStart) / 1000, snaps));
      if (round === rounds) break;
      await sleep(Math.max(0, monitorStart + (round + 1) * PAGE_SAMPLE_MS - Date.now()));
    }
    sampling.on = false;
    await uplinkLoop;
    const windowEnd = Date.now();
    const origin = await tracker.origin();
    const produced = stream.bytesProduced(windowStart, windowEnd);
    let metricsText = '';
    try {
      metricsText = String(await tracker.getJson('/metrics'));
    } catch (error) {
      process.stderr.write(`lab: could not read /metrics: ${errorMessage(error)}\n`);
    }
    const consoles = viewers.map((v) => v.console.text());
    const result = summarise({
      scenarioName,
      scenario,
      durationS,
      lab,
      pageSeries,
      uplink,
      origin,
      produced,
      health,
      coturn,
      metricsText,
      windowStart,
      windowEnd,
    });
    return { result, consoles };
  } finally {
    process.removeListener('SIGINT', stopOnSignal);
    process.removeListener('SIGTERM', stopOnSignal);
    await stack.stopAll();
  }
}

/** The stats of the snapshots that have them. */
function statsOf(snaps: readonly ViewerSnapshot[]): PlayerStatsSnapshot[] {
  return snaps.flatMap((s) => (s.error === undefined && s.stats ? [s.stats] : []));
}

function progressLine(elapsedS: number, snaps: readonly ViewerSnapshot[]): string {
  const live = statsOf(snaps);
  let mesh = 0;
  let orig = 0;
  let stalls = 0;
  let relayed = 0;
  for (const st of live) {
    mesh += st.bytesFromMesh ?? 0;
    orig += st.bytesFromOrigin ?? 0;
    stalls += st.stalls ?? 0;
    relayed += st.relayedBytes ?? 0;
  }
  const playing = snaps.filter((s) => s.video && !s.video.paused && s.video.currentTime > 0).length;
  const peers = live.map((st) => st.peers ?? 0);
  return (
    `t=${elapsedS.toFixed(0).padStart(4)}s  playing ${playing}/${snaps.length}  mesh ${mesh + orig > 0 ? ((100 * mesh) / (mesh + orig)).toFixed(0) : '—'}%` +
    `  peers ${peers.join(',')}  stalls ${stalls}  relayed ${(relayed / 1024).toFixed(0)} KiB`
  );
}

/**
 * Peak upload over 1 s windows (readings two apart) and the longest run of windows above
 * SATURATED_SHARE of the cap. `readings`: one home's `{ bytes, atMs }` (or null) per round.
 */
export function uplinkFigures(
  readings: readonly (UplinkReading | null | undefined)[],
  capKbps: number,
): { peakKbps: number; longestSaturatedMs: number } {
  let peakKbps = 0;
  let longestSaturatedMs = 0;
  let runStart: number | null = null;
  for (let i = 2; i < readings.length; i++) {
    const r0 = readings[i - 2];
    const r1 = readings[i];
    if (r0 === null || r1 === null || r0 === undefined || r1 === undefined || r1.atMs <= r0.atMs) continue;
    const t0 = r0.atMs;
    const t1 = r1.atMs;
    const kbps = ((r1.bytes - r0.bytes) * 8) / (t1 - t0);
    peakKbps = Math.max(peakKbps, kbps);
    if (kbps > SATURATED_SHARE * capKbps) {
      runStart ??= t0;
      longestSaturatedMs = Math.max(longestSaturatedMs, t1 - runStart);
    } else runStart = null;
  }
  return { peakKbps, longestSaturatedMs };
}

/** Σ mesh ÷ Σ media bytes received by all viewers between the middle and the end of the window. */
function secondHalfMeshShare(pageSeries: readonly ViewerSnapshot[][]): number | null {
  let mesh = 0;
  let media = 0;
  for (const series of pageSeries) {
    const withStats = statsOf(series.filter((x) => x.stats));
    const mid = withStats[Math.floor(withStats.length / 2)];
    const end = withStats[withStats.length - 1];
    if (mid === undefined || end === undefined || mid === end) continue;
    const m = (end.bytesFromMesh ?? 0) - (mid.bytesFromMesh ?? 0);
    const o = (end.bytesFromOrigin ?? 0) - (mid.bytesFromOrigin ?? 0);
    mesh += m;
    media += m + o;
  }
  return media > 0 ? mesh / media : null;
}

/**
 * Every link a viewer had open at some sample, each as last read: viewers close links they no
 * longer use (the SDK's idle links), so the links open at the end are not all that connected
 * (a hole punched early and closed later still shows that the NATs let it through).
 */
function linksOverRun(
  series: readonly ViewerSnapshot[],
  last: PlayerStatsSnapshot,
  idToName: ReadonlyMap<number | string, string>,
): LabLink[] {
  const byPeer = new Map<number | string, LabLink>();
  const openAtEnd = new Set((last.peerLinks ?? []).map((l) => l.peer));
  // `last` is the series' last sample: its links are read with the others.
  for (const snap of series)
    for (const l of snap.stats?.peerLinks ?? [])
      byPeer.set(l.peer, {
        peer: l.peer,
        peerName: idToName.get(l.peer) ?? `#${l.peer}`,
        // A route read once stays known: a last reading without one is a link closing.
        route: l.route ?? byPeer.get(l.peer)?.route ?? 'unknown',
        localCandidateType: l.localCandidateType ?? null,
        remoteCandidateType: l.remoteCandidateType ?? null,
        rttMs: l.rttMs ?? null,
        bytesSent: l.bytesSent ?? 0,
        bytesReceived: l.bytesReceived ?? 0,
        openAtEnd: openAtEnd.has(l.peer),
      });
  return [...byPeer.values()];
}

/** The samples at which a page's stall count went up, in s from the window's start. */
function stallTimes(series: readonly ViewerSnapshot[], windowStart: number): number[] {
  const times: number[] = [];
  let seen = 0;
  for (const snap of series) {
    const stalls = snap.stats?.stalls ?? 0;
    if (stalls > seen) times.push(Math.round((snap.now - windowStart) / 100) / 10);
    seen = Math.max(seen, stalls);
  }
  return times;
}

/** One viewer's loads at one sample: TL/ML, measured capacity, slices it roots, children. */
function loadPoint(snap: ViewerSnapshot, st: PlayerStatsSnapshot, windowStart: number): LoadPoint {
  const slices = st.slices ?? [];
  return {
    atS: Math.round((snap.now - windowStart) / 100) / 10,
    load: st.load ?? null,
    targetLoad: st.targetLoad ?? null,
    maxLoad: st.maxLoad ?? null,
    capacityKbps: st.uploadCapacityKbps ?? null,
    slicesRooted: slices.filter((sl) => sl.parent !== null && sl.parent === st.sourceId).length,
    children: slices.reduce((n, sl) => n + sl.children.length, 0),
    meshShare: st.meshShare ?? null,
  };
}

const ROUTE_ORDER = ['relay', 'prflx', 'srflx', 'host'];

function summarise(run: LabRun): LabResult {
  const { scenario, lab, pageSeries, uplink, origin, produced, windowStart } = run;
  const last = pageSeries.map((s): ViewerSnapshot | undefined => s[s.length - 1]);
  const idToName = new Map<number | string, string>();
  let sourceId: number | string | null = null;
  for (const [i, snap] of last.entries()) {
    const st = snap?.stats;
    const name = lab.homes[i]?.name;
    if (st?.peerId !== null && st?.peerId !== undefined && name !== undefined) idToName.set(st.peerId, name);
    if (st?.sourceId !== null && st?.sourceId !== undefined) sourceId = st.sourceId;
  }
  if (sourceId !== null) idToName.set(sourceId, 'source');
  const viewers = lab.homes.map((home, i): LabViewer => {
    const series = pageSeries[i] ?? [];
    const snap = last[i];
    const st: PlayerStatsSnapshot = snap?.stats ?? {};
    const homeReadings = uplink.readings.map((row) => row[i] ?? null);
    const up = uplinkFigures(homeReadings, home.uplinkKbps);
    const firstBytes = homeReadings.find((r) => r !== null)?.bytes ?? 0;
    const lastBytes = [...homeReadings].reverse().find((r) => r !== null)?.bytes ?? 0;
    const secondHalf = statsOf(series.slice(Math.floor(series.length / 2)));
    const peersSeen = secondHalf.map((s) => s.peers ?? 0);
    const delays = series.map((s) => s.stats?.liveDelayMs);
    const links = linksOverRun(series, st, idToName);
    return {
      name: home.name,
      nat: home.nat,
      address: home.address,
      publicAddress: home.publicAddress,
      uplinkKbps: home.uplinkKbps,
      downlinkKbps: home.downlinkKbps,
      peerId: st.peerId ?? null,
      startupMs: typeof snap?.firstPlayingMs === 'number' ? Math.round(snap.firstPlayingMs) : null,
      stalls: st.stalls ?? null,
      stallMs: st.stallMs ?? null,
      stallsAtS: stallTimes(series, windowStart),
      meshShare: st.meshShare ?? null,
      bytesFromMesh: st.bytesFromMesh ?? 0,
      bytesFromOrigin: st.bytesFromOrigin ?? 0,
      bytesFromRepair: st.bytesFromRepair ?? 0,
      mediaUploadBytes: st.uploadBytes ?? 0,
      uplinkBytes: lastBytes - firstBytes,
      peakUploadKbps1s: Math.round(up.peakKbps),
      peakUploadShareOfCap: home.uplinkKbps > 0 ? up.peakKbps / home.uplinkKbps : null,
      longestAbove90PctMs: up.longestSaturatedMs,
      peers: st.peers ?? 0,
      peersMinSecondHalf: peersSeen.length === 0 ? 0 : Math.min(...peersSeen),
      peersByRoute: st.peersByRoute ?? null,
      relayedBytes: st.relayedBytes ?? 0,
      connectFailures: st.connectFailures ?? null,
      load: st.load ?? null,
      targetLoad: st.targetLoad ?? null,
      maxLoad: st.maxLoad ?? null,
      uploadCapacityKbps: st.uploadCapacityKbps ?? null,
      uploadCapacitySource: st.uploadCapacitySource ?? null,
      liveDelayMsP50: percentile(delays, 50),
      liveDelayMsP95: percentile(delays, 95),
      links,
      // How the loads and the tree roles moved (every 4 s): where a viewer's upload went.
      timeline: series
        .filter((_, k) => k % 2 === 0)
        .flatMap((s) => (s.stats ? [loadPoint(s, s.stats, windowStart)] : [])),
      errors: snap?.errors ?? [],
    };
  });
  // Who connected to whom: one edge per pair, its route the less direct of the two ends' views.
  const edges = new Map<string, LabEdge>();
  for (const v of viewers)
    for (const l of v.links) {
      const [a = v.name, b = l.peerName] = [v.name, l.peerName].sort();
      const key = `${a}~${b}`;
      const prev = edges.get(key);
      const route =
        prev === undefined
          ? l.route
          : (ROUTE_ORDER.find((r) => r === prev.route || r === l.route) ?? l.route);
      edges.set(key, { a, b, route });
    }
  const sum = (f: (v: LabViewer) => number | null): number => viewers.reduce((a, v) => a + (f(v) ?? 0), 0);
  const mesh = sum((v) => v.bytesFromMesh);
  const fromOrigin = sum((v) => v.bytesFromOrigin);
  // Each relayed byte is counted by both ends when both are viewers: halve for the traffic itself.
  const relayedBytes = sum((v) => v.relayedBytes) / 2;
  const startups = viewers.map((v) => v.startupMs);
  const allDelays = pageSeries.flatMap((s) => s.map((x) => x.stats?.liveDelayMs));
  const symmetric = viewers.filter((v) => v.nat === 'symmetric');
  return {
    scenario: run.scenarioName,
    description: scenario.description,
    ice: scenario.ice,
    capacity: scenario.capacity,
    durationS: run.durationS,
    windowMs: run.windowEnd - run.windowStart,
    network: {
      publicSegment: `${LAB_PUBLIC_IP}/24`,
      emulatedDelay: false,
      note: 'netem is not in this kernel: no emulated delay or loss; every link has sub-millisecond latency',
    },
    trackerHealth: run.health,
    meshShare: mesh + fromOrigin === 0 ? 0 : mesh / (mesh + fromOrigin),
    // The same over the second half of the window only: the swarm past its first minute's warm-up
    // (trees built, uplinks measured), which the whole-window figure averages in.
    meshShareSecondHalf: secondHalfMeshShare(pageSeries),
    bytesFromMesh: mesh,
    bytesFromOrigin: fromOrigin,
    originMediaBytes: origin.mediaBytes,
    originViewerMediaBytes: origin.viewerMediaBytes,
    producedBytes: produced.bytes,
    producedSegments: produced.count,
    streamCopiesFromOrigin: produced.bytes > 0 ? origin.mediaBytes / produced.bytes : null,
    streamCopiesFromOriginToViewers: produced.bytes > 0 ? origin.viewerMediaBytes / produced.bytes : null,
    stalls: sum((v) => v.stalls),
    stallMs: sum((v) => v.stallMs),
    neverPlayed: startups.filter((s) => s === null).length,
    startupMsP50: percentile(
      startups.filter((s) => s !== null),
      50,
    ),
    startupMsP95: percentile(
      startups.filter((s) => s !== null),
      95,
    ),
    liveDelayMsP95: percentile(allDelays, 95),
    relayedBytes,
    relayedShareOfMesh: mesh > 0 ? relayedBytes / mesh : null,
    minPeers: Math.min(...viewers.map((v) => v.peersMinSecondHalf)),
    symmetricViewersViaRelay: symmetric.filter((v) => v.links.some((l) => l.route === 'relay')).length,
    symmetricViewers: symmetric.length,
    viewersSaturatedOver2s: viewers.filter((v) => v.longestAbove90PctMs > 2000).map((v) => v.name),
    turnAllocations: run.coturn?.counters.allocations ?? 0,
    edges: [...edges.values()],
    viewers,
    metrics: pickMetrics(run.metricsText),
  };
}

/** The tracker's connectivity aggregates from its Prometheus text (lines about peer links). */
function pickMetrics(text: string): string[] {
  return text.split('\n').filter((l) => /^chunkycast_peer_/.test(l));
}

/** Every home's uplink counter, one row per reading round. */
interface UplinkSeries {
  readonly readings: (UplinkReading | null)[][];
}

/** What summarise() needs of a finished run. */
interface LabRun {
  readonly scenarioName: string;
  readonly scenario: Scenario;
  readonly durationS: number;
  readonly lab: Lab;
  readonly pageSeries: readonly ViewerSnapshot[][];
  readonly uplink: UplinkSeries;
  readonly origin: OriginCounters;
  readonly produced: { bytes: number; count: number };
  readonly health: LabResult['trackerHealth'];
  readonly coturn: Coturn | null;
  readonly metricsText: string;
  readonly windowStart: number;
  readonly windowEnd: number;
}

/** One viewer's loads at one sample. */
export interface LoadPoint {
  readonly atS: number;
  readonly load: number | null;
  readonly targetLoad: number | null;
  readonly maxLoad: number | null;
  readonly capacityKbps: number | null;
  readonly slicesRooted: number;
  readonly children: number;
  readonly meshShare: number | null;
}

/** One peer link of a viewer, as last read while it was open. */
export interface LabLink {
  readonly peer: number | string;
  readonly peerName: string;
  readonly route: string;
  readonly localCandidateType: string | null;
  readonly remoteCandidateType: string | null;
  readonly rttMs: number | null;
  readonly bytesSent: number;
  readonly bytesReceived: number;
  /** Still open at the end of the run (false: open at some sample, closed by the end). */
  readonly openAtEnd: boolean;
}

/** Who connected to whom, with the less direct of the two ends' routes. */
export interface LabEdge {
  readonly a: string;
  readonly b: string;
  readonly route: string;
}

/** One viewer's figures (result.json's `viewers[]`). */
export interface LabViewer {
  readonly name: string;
  readonly nat: string;
  readonly address: string;
  readonly publicAddress: string;
  readonly uplinkKbps: number;
  readonly downlinkKbps: number;
  readonly peerId: number | string | null;
  readonly startupMs: number | null;
  readonly stalls: number | null;
  readonly stallMs: number | null;
  /** When the page's stall count went up (s from the window's start, at the sample that showed it). */
  readonly stallsAtS: readonly number[];
  readonly meshShare: number | null;
  readonly bytesFromMesh: number;
  readonly bytesFromOrigin: number;
  readonly bytesFromRepair: number;
  readonly mediaUploadBytes: number;
  readonly uplinkBytes: number;
  readonly peakUploadKbps1s: number;
  readonly peakUploadShareOfCap: number | null;
  readonly longestAbove90PctMs: number;
  readonly peers: number;
  readonly peersMinSecondHalf: number;
  readonly peersByRoute: Readonly<Record<string, number>> | null;
  readonly relayedBytes: number;
  readonly connectFailures: number | null;
  readonly load: number | null;
  readonly targetLoad: number | null;
  readonly maxLoad: number | null;
  readonly uploadCapacityKbps: number | null;
  readonly uploadCapacitySource: string | null;
  readonly liveDelayMsP50: number | null;
  readonly liveDelayMsP95: number | null;
  /** Every link open at some sample of the run (`openAtEnd` says which were still open). */
  readonly links: readonly LabLink[];
  readonly timeline: readonly LoadPoint[];
  readonly errors: readonly string[];
}

/** result.json of a lab run. */
export interface LabResult {
  readonly scenario: string;
  readonly description: string;
  readonly ice: string;
  readonly capacity: string;
  readonly durationS: number;
  readonly windowMs: number;
  readonly network: {
    readonly publicSegment: string;
    readonly emulatedDelay: boolean;
    readonly note: string;
  };
  readonly trackerHealth: { readonly ice?: { readonly warning?: string | null } } & Record<string, unknown>;
  readonly meshShare: number;
  readonly meshShareSecondHalf: number | null;
  readonly bytesFromMesh: number;
  readonly bytesFromOrigin: number;
  readonly originMediaBytes: number;
  readonly originViewerMediaBytes: number;
  readonly producedBytes: number;
  readonly producedSegments: number;
  readonly streamCopiesFromOrigin: number | null;
  readonly streamCopiesFromOriginToViewers: number | null;
  readonly stalls: number;
  readonly stallMs: number;
  readonly neverPlayed: number;
  readonly startupMsP50: number | null;
  readonly startupMsP95: number | null;
  readonly liveDelayMsP95: number | null;
  readonly relayedBytes: number;
  readonly relayedShareOfMesh: number | null;
  readonly minPeers: number;
  readonly symmetricViewersViaRelay: number;
  readonly symmetricViewers: number;
  readonly viewersSaturatedOver2s: readonly string[];
  readonly turnAllocations: number;
  readonly edges: readonly LabEdge[];
  readonly viewers: readonly LabViewer[];
  readonly metrics: readonly string[];
  /** Set by the CLI. */
  command?: string;
  wallS?: number;
}
