#!/usr/bin/env node
// `npm start`: a live stream shared by a browser mesh, on this machine. Starts an ffmpeg test
// stream packaged as HLS into a temp origin directory, the tracker (rendezvous server, origin at
// /live/, the demo at /, the true source in process) on 127.0.0.1, and prints the viewer and
// broadcaster URLs. `--viewers N` also opens N headless Chromium viewers and prints a swarm summary
// every 5 s. Ctrl-C stops everything. The simulator that `npm start` used to run is `npm run sim`.
import { createServer } from 'node:net';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  numberOption as num,
  parseCliOrExit,
  Stack,
  demoDist,
  launchBrowser,
  openViewer,
  sampleAll,
  startStream,
  startTracker,
  summaryLine,
  swarmSummary,
  viewerUrl,
} from '../e2e/src/harness.mjs';

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

function parseArgs(argv) {
  const o = {
    port: 8080,
    portGiven: false,
    viewers: 0,
    duration: null,
    targetLoad: undefined,
    maxLoad: undefined,
    logLevel: 'warn',
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') o.help = true;
    else if (a === '--port') {
      o.port = num(a, argv[++i], 0);
      o.portGiven = true;
    } else if (a === '--viewers') o.viewers = Math.floor(num(a, argv[++i], 0));
    else if (a === '--duration') o.duration = num(a, argv[++i], 1);
    else if (a === '--target-load') o.targetLoad = num(a, argv[++i], 0);
    else if (a === '--max-load') o.maxLoad = num(a, argv[++i], 0);
    else if (a === '--log-level') {
      o.logLevel = argv[++i];
      if (!['debug', 'info', 'warn', 'error'].includes(o.logLevel))
        throw new Error('--log-level: debug|info|warn|error');
    } else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const opts = parseCliOrExit('start', parseArgs, USAGE);

const portFree = (port) =>
  new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });

const stack = new Stack();
let stopping = false;
async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  process.stderr.write('\nstart: stopping…\n');
  await stack.stopAll();
  process.exit(code);
}
process.on('SIGINT', () => {
  if (stopping) process.exit(130); // a second Ctrl-C: do not wait
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
  const levels = ['debug', 'info', 'warn', 'error'];
  const tracker = await startTracker({
    originDir: stream.dir,
    port,
    // "listening" is an info line: the tracker logs at info at least, we show from --log-level up.
    logLevel: opts.logLevel === 'debug' ? 'debug' : 'info',
    echo: (r) => levels.indexOf(r.level) >= levels.indexOf(opts.logLevel),
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
  const started = Date.now();
  const deadline = opts.duration === null ? Infinity : started + opts.duration * 1000;
  if (opts.viewers > 0) {
    await stream.waitForSegments(3);
    const browser = await launchBrowser();
    stack.add('chromium', () => browser.close());
    await tracker.resetOrigin();
    const windowStart = Date.now();
    const url = viewerUrl(tracker.url, { targetLoad: opts.targetLoad, maxLoad: opts.maxLoad });
    const viewers = [];
    for (let i = 0; i < opts.viewers && !stopping; i++) {
      viewers.push(await openViewer(browser, url, { label: `v${i}` }));
      await sleep(200);
    }
    process.stdout.write(`  ${viewers.length} headless viewer(s) open (${url})\n\n`);
    // One summary every 5 s until Ctrl-C or --duration.
    for (let round = 0; !stopping && Date.now() < deadline; round++) {
      await sleep(Math.min(5000, Math.max(0, deadline - Date.now())));
      if (stopping) break;
      const snaps = await sampleAll(viewers);
      const origin = await tracker.origin().catch(() => null);
      const sum = swarmSummary(snaps, origin, stream.bytesProduced(windowStart));
      process.stdout.write(`${summaryLine((Date.now() - windowStart) / 1000, sum)}\n`);
    }
  } else if (opts.duration !== null) {
    await sleep(Math.max(0, deadline - Date.now()));
  } else {
    await new Promise(() => undefined); // until Ctrl-C
  }
  await shutdown(0);
} catch (error) {
  process.stderr.write(`start: ${error?.stack ?? error}\n`);
  await shutdown(1);
}
