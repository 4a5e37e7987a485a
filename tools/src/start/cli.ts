/**
 * `npm start`: a live stream shared by a browser mesh, on this machine. Starts an ffmpeg test
 * stream packaged as HLS into a temp origin directory, the tracker (rendezvous server, origin at
 * /live/, the demo at /, the true source in process) on 127.0.0.1, and prints the viewer and
 * broadcaster URLs. `--viewers N` also opens N headless Chromium viewers and prints a swarm summary
 * every 5 s. Ctrl-C stops everything. The simulator that `npm start` used to run is `npm run sim`.
 *
 * The product demo: it uses the stack (stream, tracker, cleanup) and the viewer helpers, never the
 * e2e test harness.
 */
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { choiceOption, noPositionals, numberOption, parseCommandLine, stringValue } from '../lib/args.js';
import { errorStack } from '../lib/wait.js';
import { Stack } from '../stack/cleanup.js';
import { startStream } from '../stack/stream.js';
import { demoDist, startTracker } from '../stack/tracker.js';
import { launchBrowser, openViewer, viewerUrl, type Viewer } from '../viewers/browser.js';
import { sampleAll, summaryLine, swarmSummary } from '../viewers/watch.js';

const USAGE = `usage: npm start -- [options]

Runs an ffmpeg live test stream, the tracker with the true source and the demo on 127.0.0.1,
and prints the viewer and broadcaster URLs. Ctrl-C stops everything.

options:
  --port N          tracker port (default 8080; a free port if 8080 is taken; 0 = any free port)
  --viewers N       also open N headless Chromium viewers and print a swarm summary every 5 s
  --duration S      stop by itself after S seconds
  --target-load TL  target load (slices) of the headless viewers (default: the SDK's)
  --max-load ML     maximum load (slices) of the headless viewers (default: the SDK's)
  --log-level L     tracker log level shown on stderr: debug|info|warn|error (default warn)
  --help            print this help

The simulator is \`npm run sim\`; the browser swarm benchmark is \`npm run swarm\`.`;

const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
/** How often the headless viewers' swarm summary is printed. */
const SUMMARY_INTERVAL_MS = 5000;
/** Between opening two headless viewers. */
const VIEWER_STAGGER_MS = 200;

const opts = parseCommandLine(
  'start',
  USAGE,
  {
    port: { type: 'string' },
    viewers: { type: 'string' },
    duration: { type: 'string' },
    'target-load': { type: 'string' },
    'max-load': { type: 'string' },
    'log-level': { type: 'string' },
  },
  (parsed) => {
    noPositionals(parsed);
    const optional = (flag: string, min: number): number | undefined => {
      const value = stringValue(parsed, flag);
      return value === undefined ? undefined : numberOption(flag, value, 0, { min });
    };
    return {
      port: numberOption('port', stringValue(parsed, 'port'), 8080, { min: 0, max: 65535, integer: true }),
      viewers: Math.floor(numberOption('viewers', stringValue(parsed, 'viewers'), 0, { min: 0 })),
      durationS: optional('duration', 1) ?? null,
      targetLoad: optional('target-load', 0),
      maxLoad: optional('max-load', 0),
      logLevel: choiceOption('log-level', stringValue(parsed, 'log-level'), LOG_LEVELS, 'warn'),
    };
  },
);

const portFree = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => {
      resolve(false);
    });
    server.listen(port, '127.0.0.1', () =>
      server.close(() => {
        resolve(true);
      }),
    );
  });

const stack = new Stack();
/** Set by the signal handlers: an object, so the loops below read it afresh. */
const state = { stopping: false };
const stopping = (): boolean => state.stopping;
async function shutdown(code: number): Promise<never> {
  if (!state.stopping) {
    state.stopping = true;
    process.stderr.write('\nstart: stopping…\n');
    await stack.stopAll();
  }
  process.exit(code);
}
process.on('SIGINT', () => {
  if (state.stopping) process.exit(130); // a second Ctrl-C: do not wait
  void shutdown(0);
});
process.on('SIGTERM', () => void shutdown(0));

try {
  if (!existsSync(join(demoDist, 'index.html')))
    process.stderr.write('start: demo/dist is missing (run `npm run build:demo`): the pages will be 404\n');
  let port = opts.port;
  if (port !== 0 && !(await portFree(port))) {
    process.stderr.write(`start: port ${port} is busy; using a free port instead\n`);
    port = 0;
  }
  const stream = await startStream();
  stack.add('ffmpeg', () => stream.stop());
  // The true source retries until the playlist exists; waiting for it spares a warning.
  await stream.waitForSegments(1);
  const shownFrom = LOG_LEVELS.indexOf(opts.logLevel);
  const tracker = await startTracker({
    originDir: stream.dir,
    port,
    // "listening" is an info line: the tracker logs at info at least, we show from --log-level up.
    logLevel: opts.logLevel === 'debug' ? 'debug' : 'info',
    echo: (r) => LOG_LEVELS.indexOf(r.level as (typeof LOG_LEVELS)[number]) >= shownFrom,
  });
  stack.add('tracker', () => tracker.stop());
  const viewer = viewerUrl(tracker.url);
  // The console reads the broadcaster key from the fragment, which the browser never sends to a server.
  const broadcaster = new URL(
    `/broadcaster.html?stream=live#key=${encodeURIComponent(tracker.broadcasterKey)}`,
    tracker.url,
  ).toString();
  process.stdout.write(
    [
      '',
      '  Chunkycast is running (stream "live": ffmpeg test pattern, 2 s HLS segments)',
      '',
      `  viewer       ${viewer}`,
      `  broadcaster  ${broadcaster}`,
      `  tracker      ${tracker.wsUrl}`,
      `  origin       ${tracker.url}/live/live.m3u8`,
      '',
      `  Open the viewer URL in several tabs to build a mesh. Ctrl-C stops everything.`,
      '',
      '',
    ].join('\n'),
  );
  const deadline = opts.durationS === null ? Infinity : Date.now() + opts.durationS * 1000;
  if (opts.viewers > 0) {
    await stream.waitForSegments(3);
    const browser = await launchBrowser();
    stack.add('chromium', () => browser.close());
    await tracker.resetOrigin();
    const windowStart = Date.now();
    const url = viewerUrl(tracker.url, { targetLoad: opts.targetLoad, maxLoad: opts.maxLoad });
    const viewers: Viewer[] = [];
    for (let i = 0; i < opts.viewers && !stopping(); i++) {
      viewers.push(await openViewer(browser, url, { label: `v${i}` }));
      await sleep(VIEWER_STAGGER_MS);
    }
    process.stdout.write(`  ${viewers.length} headless viewer(s) open (${url})\n\n`);
    // One summary every 5 s until Ctrl-C or --duration.
    while (!stopping() && Date.now() < deadline) {
      await sleep(Math.min(SUMMARY_INTERVAL_MS, Math.max(0, deadline - Date.now())));
      if (stopping()) break;
      const snaps = await sampleAll(viewers);
      const origin = await tracker.origin().catch(() => null);
      const sum = swarmSummary(snaps, origin, stream.bytesProduced(windowStart));
      process.stdout.write(`${summaryLine((Date.now() - windowStart) / 1000, sum)}\n`);
    }
  } else if (opts.durationS !== null) {
    await sleep(Math.max(0, deadline - Date.now()));
  } else {
    await new Promise(() => undefined); // until Ctrl-C
  }
  await shutdown(0);
} catch (error) {
  process.stderr.write(`start: ${errorStack(error)}\n`);
  await shutdown(1);
}
