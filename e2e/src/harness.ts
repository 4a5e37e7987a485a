/**
 * The e2e tests' harness: one import for everything a test drives. The stream, the tracker, the
 * cleanup stack, Chromium and the viewer helpers live in tools/src (shared with `npm start`, the
 * swarm, the comparison benchmark and the lab); what only the tests need is here.
 * Everything binds to 127.0.0.1; the tests run inside a loopback-only network namespace
 * (`npm run e2e`, tools/src/e2e/run.ts).
 */
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
  launchBrowser,
  openViewer,
  readViewer,
  viewerUrl,
  type Browser,
  type Viewer,
} from '../../tools/src/viewers/browser.js';
export type { ViewerSnapshot } from '../../tools/src/viewers/snapshot.js';
export {
  brief,
  hasPlayed,
  meshShareOf,
  monitor,
  sampleAll,
  steadinessProblems,
  swarmSummary,
  waitForPlaying,
} from '../../tools/src/viewers/watch.js';

/** A progress line of a test on stderr (vitest shows it beside the test's output). */
export function log(text: string): void {
  process.stderr.write(`e2e: ${text}\n`);
}
