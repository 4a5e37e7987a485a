/**
 * The e2e tests' harness: one import for everything a test drives. The stream, the tracker, the
 * cleanup stack, the browsers (Chromium, Firefox) and the viewer helpers live in tools/src (shared with `npm start`, the
 * swarm, the comparison benchmark and the lab); what only the tests need is here.
 * Everything binds to 127.0.0.1; the tests run inside a loopback-only network namespace
 * (`npm run e2e`, tools/src/e2e/run.ts).
 */
import { waitFor } from '../../tools/src/lib/wait.js';
import type { LiveStream } from '../../tools/src/stack/stream.js';
import type { Tracker } from '../../tools/src/stack/tracker.js';
import type { ViewerHandle } from '../../tools/src/viewers/browser.js';
import type { ViewerSnapshot } from '../../tools/src/viewers/snapshot.js';
import { brief, sampleAll } from '../../tools/src/viewers/watch.js';

export { isIsolated, runIsolated } from '../../tools/src/lib/netns.js';
export { root } from '../../tools/src/lib/paths.js';
export { forEachLine, stopProcess, tieToParent } from '../../tools/src/lib/process.js';
export { percentile } from '../../tools/src/lib/stats.js';
export { Ring, waitFor } from '../../tools/src/lib/wait.js';
export { Stack } from '../../tools/src/stack/cleanup.js';
export { parsePlaylist, startStream, type LiveStream } from '../../tools/src/stack/stream.js';
export { demoDist, startTracker, trackerCli, type Tracker } from '../../tools/src/stack/tracker.js';
export {
  chromiumArgs,
  chromiumPath,
  hidePlayer,
  launchBrowser,
  openViewer,
  readViewer,
  viewerUrl,
  type Browser,
  type BrowserName,
  type Viewer,
  type ViewerHandle,
} from '../../tools/src/viewers/browser.js';
export {
  hiddenTabMissing,
  openHiddenTabViewer,
  type HiddenTabViewer,
} from '../../tools/src/viewers/hidden-tab.js';
export { bytesByDirection } from '../../tools/src/swarm/browsers.js';
export { launchWebKit, type WebKitPage } from '../../tools/src/viewers/webkit.js';
export type { ViewerSnapshot } from '../../tools/src/viewers/snapshot.js';
export {
  brief,
  meshShareOf,
  monitor,
  sampleAll,
  steadinessProblems,
  swarmSummary,
} from '../../tools/src/viewers/watch.js';

/** Whether a snapshot's page has played: a 'playing' event and currentTime > 0. */
export function hasPlayed(s: ViewerSnapshot): boolean {
  return s.firstPlayingMs !== null && s.firstPlayingMs !== undefined && (s.video?.currentTime ?? 0) > 0;
}

/** Waits until every viewer has played; returns the snapshots that showed it. */
export async function waitForPlaying(
  viewers: readonly ViewerHandle[],
  { timeoutMs = 30_000 }: { timeoutMs?: number } = {},
): Promise<ViewerSnapshot[]> {
  return waitFor(
    `${viewers.length} viewer(s) to start playing`,
    async () => {
      const snaps = await sampleAll(viewers);
      return snaps.every(hasPlayed) ? snaps : false;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/** A progress line of a test on stderr (vitest shows it beside the test's output). */
export function log(text: string): void {
  process.stderr.write(`e2e: ${text}\n`);
}

/**
 * Throws with every problem, after printing what explains them: each viewer's stats and console,
 * the tracker's view of the swarm and its origin counters, its last log lines, and ffmpeg's errors.
 */
export async function failWithEvidence(
  title: string,
  problems: readonly string[],
  viewers: readonly ViewerHandle[],
  { tracker, stream }: { readonly tracker: Tracker; readonly stream?: LiveStream },
): Promise<never> {
  const snaps = await sampleAll(viewers);
  const lines = [`${title}: ${problems.length} problem(s)`, ...problems.map((p) => `  - ${p}`), ''];
  snaps.forEach((s, i) => {
    const v = viewers[i];
    if (v === undefined) return;
    lines.push(
      `── ${v.label} (${v.url}) ──`,
      JSON.stringify(brief(v.label, s)),
      `full: ${JSON.stringify(s)}`,
    );
    if (v.console.lines.length > 0) lines.push('console:', v.console.text());
  });
  const swarm = await tracker.swarm('live').catch((e: unknown) => `(unavailable: ${String(e)})`);
  const origin = await tracker.origin().catch((e: unknown) => `(unavailable: ${String(e)})`);
  lines.push('── tracker /debug/swarm/live ──', JSON.stringify(swarm));
  lines.push('── tracker /debug/origin ──', JSON.stringify(origin));
  lines.push('── tracker log (last lines) ──', tracker.logs.lines.slice(-60).join('\n'));
  if (stream !== undefined && stream.stderr.lines.length > 0)
    lines.push('── ffmpeg ──', stream.stderr.text());
  process.stderr.write(`${lines.join('\n')}\n`);
  // One line: the test runner's summary (scripts/test.mjs) keeps only a failure's first line, and CI
  // prints only the summary's tail.
  throw new Error(`${title}: ${problems.join('; ')}`);
}
