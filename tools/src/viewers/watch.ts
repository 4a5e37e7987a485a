/**
 * Watching viewers: sampling every page, bounded monitoring, steadiness of playback, and the swarm
 * figures one round of samples gives (mesh share, stalls, stream copies from the origin).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { percentile } from '../lib/stats.js';
import { errorMessage } from '../lib/wait.js';
import type { OriginCounters } from '../stack/tracker.js';
import type { ViewerHandle } from './browser.js';
import type { ViewerSnapshot } from './snapshot.js';

/** One snapshot of every viewer, taken in parallel; a page that fails to answer gives {error}. */
export async function sampleAll(viewers: readonly ViewerHandle[]): Promise<ViewerSnapshot[]> {
  return Promise.all(
    viewers.map(async (v) => {
      try {
        return await v.stats();
      } catch (error) {
        return { now: Date.now(), error: errorMessage(error) };
      }
    }),
  );
}

/**
 * Samples every viewer every `intervalMs` for `durationMs` (bounded count). Calls `onSample` with
 * each round. Returns the series: series[i] = snapshots of viewer i, oldest first.
 */
export async function monitor(
  viewers: readonly ViewerHandle[],
  {
    durationMs,
    intervalMs = 2000,
    onSample,
  }: {
    durationMs: number;
    intervalMs?: number;
    /** `last`: the final round, after which monitor returns (to take end-of-window readings). */
    onSample?: (snaps: ViewerSnapshot[], round: number, last: boolean) => void;
  },
): Promise<ViewerSnapshot[][]> {
  const series: ViewerSnapshot[][] = viewers.map(() => []);
  const rounds = Math.max(1, Math.round(durationMs / intervalMs));
  const start = Date.now();
  for (let round = 0; round <= rounds; round++) {
    const snaps = await sampleAll(viewers);
    snaps.forEach((s, i) => series[i]?.push(s));
    onSample?.(snaps, round, round === rounds);
    if (round === rounds) break;
    const next = start + (round + 1) * intervalMs;
    await sleep(Math.max(0, next - Date.now()));
  }
  return series;
}

/**
 * Problems with steady playback in a series of snapshots: between consecutive samples the video
 * must advance by at least `minRate` × the wall time between them (a stall of more than about
 * (1 − minRate) × interval shows up), and never report an error.
 */
export function steadinessProblems(
  label: string,
  snaps: readonly ViewerSnapshot[],
  { minRate = 0.5 }: { minRate?: number } = {},
): string[] {
  const problems: string[] = [];
  for (let i = 1; i < snaps.length; i++) {
    const a = snaps[i - 1];
    const b = snaps[i];
    if (a === undefined || b === undefined) continue;
    if (a.error !== undefined || b.error !== undefined) {
      problems.push(`${label}: page did not answer: ${a.error ?? b.error}`);
      continue;
    }
    const bError = b.video?.error;
    if (bError !== null && bError !== undefined) problems.push(`${label}: video error ${bError}`);
    const wallS = (b.now - a.now) / 1000;
    const advancedS = (b.video?.currentTime ?? 0) - (a.video?.currentTime ?? 0);
    if (!(advancedS >= minRate * wallS))
      problems.push(
        `${label}: currentTime ${a.video?.currentTime.toFixed(2)} → ${b.video?.currentTime.toFixed(2)} in ${wallS.toFixed(1)} s ` +
          `(sample ${i}, paused=${b.video?.paused}, readyState=${b.video?.readyState}, buffer ${b.video?.buffered.toFixed(2)} s)`,
      );
  }
  return problems;
}

/** Mesh share over all viewers: Σ bytesFromMesh / Σ (bytesFromMesh + bytesFromOrigin). */
export function meshShareOf(snaps: readonly ViewerSnapshot[]): {
  mesh: number;
  origin: number;
  share: number;
} {
  let mesh = 0;
  let origin = 0;
  for (const s of snaps) {
    mesh += s.stats?.bytesFromMesh ?? 0;
    origin += s.stats?.bytesFromOrigin ?? 0;
  }
  return { mesh, origin, share: mesh + origin === 0 ? 0 : mesh / (mesh + origin) };
}

/** A compact per-viewer summary for logs and diagnostics. */
export function brief(label: string, s: ViewerSnapshot): Record<string, unknown> {
  if (s.error !== undefined) return { viewer: label, error: s.error };
  const st = s.stats ?? {};
  return {
    viewer: label,
    t: s.video?.currentTime === undefined ? null : Number(s.video.currentTime.toFixed(2)),
    buf: s.video?.buffered === undefined ? null : Number(s.video.buffered.toFixed(2)),
    rate: s.video?.playbackRate ?? null,
    peers: st.peers,
    load: st.load,
    mesh: st.bytesFromMesh,
    origin: st.bytesFromOrigin,
    share: st.meshShare === undefined ? null : Number(st.meshShare.toFixed(3)),
    stalls: st.stalls,
    stallMs: st.stallMs,
    delayMs: st.liveDelayMs,
    verifyFail: st.verificationFailures,
    gum: s.gum,
  };
}

export interface SwarmSummary {
  readonly viewers: number;
  readonly playing: number;
  readonly meshShare: number;
  readonly bytesFromMesh: number;
  readonly bytesFromOrigin: number;
  readonly peersAvg: number;
  readonly stalls: number;
  readonly stallMs: number;
  readonly liveDelayMsP50: number | null;
  readonly originMediaBytes: number | null;
  readonly originViewerMediaBytes: number | null;
  readonly producedBytes: number | null;
  readonly streamCopiesFromOrigin: number | null;
}

/**
 * Swarm figures from one round of snapshots and the origin's counters: mesh share, stalls, peers,
 * live delay, and how many stream copies the origin served for the segments produced meanwhile.
 */
export function swarmSummary(
  snaps: readonly ViewerSnapshot[],
  origin: OriginCounters | null,
  produced: { bytes: number } | null,
): SwarmSummary {
  const live = snaps.filter((s) => s.error === undefined && s.stats !== null && s.stats !== undefined);
  const share = meshShareOf(live);
  const delays = live.map((s) => s.stats?.liveDelayMs);
  const sum = (figure: (s: ViewerSnapshot) => number | undefined): number =>
    live.reduce((a, s) => a + (figure(s) ?? 0), 0);
  return {
    viewers: snaps.length,
    playing: live.filter((s) => s.video && !s.video.paused && s.video.currentTime > 0).length,
    meshShare: share.share,
    bytesFromMesh: share.mesh,
    bytesFromOrigin: share.origin,
    peersAvg: live.length === 0 ? 0 : sum((s) => s.stats?.peers) / live.length,
    stalls: sum((s) => s.stats?.stalls),
    stallMs: sum((s) => s.stats?.stallMs),
    liveDelayMsP50: percentile(delays, 50),
    originMediaBytes: origin?.mediaBytes ?? null,
    originViewerMediaBytes: origin?.viewerMediaBytes ?? null,
    producedBytes: produced?.bytes ?? null,
    streamCopiesFromOrigin:
      origin !== null && produced !== null && produced.bytes > 0 ? origin.mediaBytes / produced.bytes : null,
  };
}

/** One line for progress output. */
export function summaryLine(elapsedS: number, sum: SwarmSummary): string {
  const pct = (x: number | null): string => (x === null ? '—' : `${(100 * x).toFixed(0)}%`);
  return (
    `t=${elapsedS.toFixed(0).padStart(4)}s  playing ${sum.playing}/${sum.viewers}  mesh ${pct(sum.meshShare)}` +
    `  origin ${sum.streamCopiesFromOrigin === null ? '—' : sum.streamCopiesFromOrigin.toFixed(2)} copies` +
    `  peers ${sum.peersAvg.toFixed(1)}  stalls ${sum.stalls} (${(sum.stallMs / 1000).toFixed(1)} s)` +
    `  delay p50 ${sum.liveDelayMsP50 === null ? '—' : `${(sum.liveDelayMsP50 / 1000).toFixed(1)} s`}`
  );
}
