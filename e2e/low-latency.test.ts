// LL-HLS over the mesh (issue 14): ffmpeg packages a plain live stream, the tracker's origin publishes
// its LL-HLS view (`--ll-hls`: parts as byte ranges of the segment being written, blocking reload)
// and streams the segment in progress to the true source, which pushes its packets into the trees
// while ffmpeg writes them. Viewers run <mesh-player low-latency> (hls.js lowLatencyMode) and take
// parts from the mesh, each falling back to the origin on its own. Run by `npm run e2e` inside a
// loopback-only network namespace.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Stack,
  failWithEvidence,
  isIsolated,
  launchBrowser,
  log,
  meshShareOf,
  monitor,
  openViewer,
  percentile,
  startStream,
  startTracker,
  steadinessProblems,
  viewerUrl,
  waitFor,
  waitForPlaying,
  type Browser,
  type LiveStream,
  type Tracker,
  type Viewer,
  type ViewerSnapshot,
} from './src/harness.js';

/** Seconds the viewers are watched. */
const PLAY_S = 30;
const VIEWERS = 4;
/**
 * Live delay p95 allowed: hls.js holds PART-HOLD-BACK (1.5 s at 0.5 s parts) behind the edge, the
 * issue's goal is 3 s at N = 8 and 16; a small swarm on two shared cores gets the same bound.
 */
const MAX_LIVE_DELAY_P95_MS = 3000;
/**
 * An LL player holds ~2 s of buffer: on the shared 2-core CI machine one viewer of four stalled once
 * in one full run (2026-11-27; 0 in three others). More than one is a fault; the goal of none is
 * measured by bench:compare, not asserted here.
 */
const MAX_STALLS_PER_VIEWER = 1;
/** Share of media from the mesh: measured 96% (4 viewers, 60 s; 30 s here, to keep npm test under 20 min); a floor with room for a loaded CI machine. */
const MIN_MESH_SHARE = 0.8;

const stack = new Stack();
let stream: LiveStream;
let tracker: Tracker;
let browser: Browser;

const fail = (title: string, problems: readonly string[], viewers: readonly Viewer[]): Promise<never> =>
  failWithEvidence(title, problems, viewers, { tracker, stream });

const figure = (s: ViewerSnapshot | undefined, key: string): number => {
  const value = s?.stats?.[key];
  return typeof value === 'number' ? value : 0;
};

describe('LL-HLS over the mesh in Chromium', () => {
  beforeAll(async () => {
    expect(isIsolated(), 'e2e must run in a loopback-only network namespace (use npm run e2e)').toBe(true);
    stream = await startStream({ quiet: true });
    stack.add('ffmpeg', () => stream.stop());
    tracker = await startTracker({ originDir: stream.dir, sourceStream: 'live', extraArgs: ['--ll-hls'] });
    stack.add('tracker', () => tracker.stop());
    browser = await launchBrowser();
    stack.add('chromium', () => browser.close());
    await stream.waitForSegments(3);
    await waitFor('the tracker to be healthy', () => tracker.healthy(), { timeoutMs: 10_000 });
  });

  afterAll(async () => {
    await stack.stopAll();
  });

  test(`${VIEWERS} low-latency viewers play ${PLAY_S} s: parts from the mesh, at most one stall each, live delay p95 ≤ 3 s`, async () => {
    await tracker.resetOrigin();
    const viewers: Viewer[] = [];
    for (let i = 0; i < VIEWERS; i++)
      viewers.push(await openViewer(browser, viewerUrl(tracker.url, { lowLatency: 1 }), { label: `ll${i}` }));
    try {
      await waitForPlaying(viewers, { timeoutMs: 30_000 });
    } catch (error) {
      await fail('startup', [String(error)], viewers);
    }
    const series = await monitor(viewers, { durationMs: PLAY_S * 1000, intervalMs: 2000 });
    const problems: string[] = [];
    series.forEach((s, i) => problems.push(...steadinessProblems(viewers[i]?.label ?? `#${i}`, s)));
    const last = series.map((s) => s[s.length - 1] ?? { now: Date.now(), error: 'no sample' });
    for (const [i, s] of last.entries()) {
      const label = viewers[i]?.label ?? `#${i}`;
      if (figure(s, 'stalls') > MAX_STALLS_PER_VIEWER)
        problems.push(`${label}: ${figure(s, 'stalls')} stall(s)`);
      if (figure(s, 'partsFromMesh') === 0) problems.push(`${label}: no LL-HLS part came from the mesh`);
    }
    // Every sample after the first 10 s: the player's own live delay (from the signed time each
    // segment was finished; the one being written counts from the previous one's end).
    const delays = series.flatMap((s) => s.slice(5)).map((snap) => figure(snap, 'liveDelayMs'));
    const buffered = series.flatMap((s) => s.slice(5)).map((snap) => snap.video?.buffered ?? null);
    const p95 = percentile(delays, 95);
    const share = meshShareOf(last);
    const parts = last.reduce(
      (sum, s) => ({
        mesh: sum.mesh + figure(s, 'partsFromMesh'),
        origin: sum.origin + figure(s, 'partsFromOrigin'),
      }),
      { mesh: 0, origin: 0 },
    );
    log(
      `LL: live delay p50 ${percentile(delays, 50)?.toFixed(0)} ms, p95 ${p95?.toFixed(0)} ms over ${delays.length} samples; ` +
        `mesh share ${(100 * share.share).toFixed(1)}%; parts ${parts.mesh} from the mesh, ${parts.origin} from the origin; ` +
        `buffered ahead p10/p50 ${percentile(buffered, 10)?.toFixed(2)}/${percentile(buffered, 50)?.toFixed(2)} s; ` +
        `stalls ${last.map((s) => figure(s, 'stalls')).join(', ')}`,
    );
    if (p95 === null || !(p95 <= MAX_LIVE_DELAY_P95_MS))
      problems.push(`live delay p95 ${p95?.toFixed(0) ?? '—'} ms > ${MAX_LIVE_DELAY_P95_MS} ms`);
    if (!(share.share >= MIN_MESH_SHARE))
      problems.push(`mesh share ${(100 * share.share).toFixed(1)}% < ${100 * MIN_MESH_SHARE}%`);
    if (problems.length > 0) await fail('ll', problems, viewers);
    await Promise.all(viewers.map((v) => v.close()));
  });
});
