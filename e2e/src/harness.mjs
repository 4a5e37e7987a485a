// The run-and-test harness: a real ffmpeg live stream, the real tracker (with the true source in
// process), Debian Chromium driven by playwright-core, and viewer pages of the demo. Shared by the
// e2e tests (e2e/mesh.test.mjs), `npm start` (scripts/start.mjs) and `npm run swarm`.
// Everything binds to 127.0.0.1; tests and benchmarks run inside a loopback-only network namespace
// (see runIsolated).
/* global window, document, Element -- the page functions below run in Chromium, not in Node */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export const logLine = (prefix, text) => process.stderr.write(`${prefix}: ${text}\n`);

/** A bounded ring of recent log lines, for diagnostics when something fails. */
class Ring {
  constructor(size) {
    this.size = size;
    this.lines = [];
  }
  push(line) {
    this.lines.push(line);
    if (this.lines.length > this.size) this.lines.splice(0, this.lines.length - this.size);
  }
  text() {
    return this.lines.join('\n');
  }
}

/** Polls `check` every `intervalMs` until it returns a value other than undefined/false/null. */
/** A numeric option's value, at least `min`; throws a message naming the flag otherwise. */
export function numberOption(flag, value, min) {
  const n = Number(value);
  if (value === undefined || !Number.isFinite(n) || n < min)
    throw new Error(`${flag} needs a number ≥ ${min}`);
  return n;
}

/** Parses a script's options or exits: 2 with the error and usage, 0 after printing usage for --help. */
export function parseCliOrExit(name, parse, usage, argv = process.argv.slice(2)) {
  let opts;
  try {
    opts = parse(argv);
  } catch (error) {
    process.stderr.write(`${name}: ${error.message}\n\n${usage}\n`);
    process.exit(2);
  }
  if (opts.help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  return opts;
}

export async function waitFor(what, check, { timeoutMs = 30_000, intervalMs = 250 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let lastError;
  for (let attempt = 0; attempt < Math.ceil(timeoutMs / intervalMs) + 2; attempt++) {
    try {
      const value = await check();
      if (value !== undefined && value !== false && value !== null) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) break;
    await sleep(intervalMs);
  }
  const cause = lastError === undefined ? '' : ` (last error: ${String(lastError?.message ?? lastError)})`;
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${cause}`);
}

export function percentile(values, p) {
  const sorted = values.filter((v) => typeof v === 'number' && Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index];
}

/** Whether this process sees only loopback interfaces (a test network namespace). */
export function isIsolated() {
  return Object.keys(networkInterfaces()).every((name) => name === 'lo');
}

/**
 * Re-runs this script inside a fresh loopback-only network namespace unless it already is in one.
 * Returns only in the isolated process; the parent waits for the child and exits with its code.
 */
export async function runIsolated(scriptPath, args) {
  if (isIsolated()) return;
  if (process.env.CHUNKYCAST_NETNS === '1') {
    logLine('netns', 'expected a loopback-only network namespace, but other interfaces are visible');
    process.exit(1);
  }
  if (spawnSync('which', ['unshare'], { stdio: 'ignore' }).status !== 0) {
    logLine('netns', '`unshare` (util-linux) is missing; cannot isolate the test network');
    process.exit(1);
  }
  // Root: a new network namespace. Otherwise a user namespace maps us to root inside it.
  const nsFlags = process.getuid?.() === 0 ? ['-n'] : ['-r', '-n'];
  const child = spawn(
    'unshare',
    [...nsFlags, 'sh', '-c', 'ip link set lo up && exec "$0" "$@"', process.execPath, scriptPath, ...args],
    { stdio: 'inherit', env: { ...process.env, CHUNKYCAST_NETNS: '1' } },
  );
  const forward = (signal) => () => child.kill(signal);
  const onInt = forward('SIGINT');
  const onTerm = forward('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  const code = await new Promise((resolve) => child.on('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
  if (code !== 0 && !isIsolatedCapable())
    logLine('netns', 'could not create a network namespace (needs root or unprivileged user namespaces)');
  process.exit(code);
}

function isIsolatedCapable() {
  const nsFlags = process.getuid?.() === 0 ? ['-n'] : ['-r', '-n'];
  return spawnSync('unshare', [...nsFlags, 'true'], { stdio: 'ignore' }).status === 0;
}

/**
 * Kills `child` if this process dies without stopping it (even by SIGKILL): a shell waits on a
 * pipe from us and, when the pipe closes, kills the child. Returns a function that disarms it.
 */
/** Calls `onLine` with each non-blank line a child's output stream writes (JSON log lines, mostly). */
export function forEachLine(readable, onLine) {
  let buffer = '';
  readable.setEncoding('utf8');
  readable.on('data', (chunk) => {
    buffer += chunk;
    let nl;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (line.trim() !== '') onLine(line);
    }
  });
}

export function tieToParent(child) {
  if (child.pid === undefined) return () => undefined;
  const guard = spawn('sh', ['-c', `read _; kill -KILL ${child.pid} 2>/dev/null`], {
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  guard.unref();
  guard.stdin.unref?.();
  child.once('exit', () => guard.kill('SIGKILL'));
  return () => guard.kill('SIGKILL');
}

/** Stops a child process: `signal`, then SIGKILL after `graceMs`. Resolves when it has exited. */
export async function stopProcess(child, { signal = 'SIGTERM', graceMs = 5000 } = {}) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

// ─── the live stream ─────────────────────────────────────────────────────────────────────────────

/**
 * Parses the media sequence and segment URIs of a media playlist.
 * @returns {{ sequence: number, segments: { sequence: number, uri: string, duration: number }[] }}
 */
export function parsePlaylist(text) {
  let sequence = 0;
  let duration = 0;
  const segments = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('#EXT-X-MEDIA-SEQUENCE:')) sequence = Number(line.slice(22));
    else if (line.startsWith('#EXTINF:')) duration = Number.parseFloat(line.slice(8));
    else if (line !== '' && !line.startsWith('#')) {
      segments.push({ sequence: sequence + segments.length, uri: line, duration });
    }
  }
  return { sequence, segments };
}

/**
 * Starts an ffmpeg test pattern (640x360 30 fps H.264 800 kbit/s + 440 Hz AAC), packaged as live
 * HLS with 2 s segments into `dir` (a fresh temp dir by default). The playlist lists 10 segments and
 * 6 more are kept on disk for late joiners. A watcher records every finished segment: its size and
 * when it appeared in the playlist (the moment the packager finished it).
 */
export async function startStream({ dir, segmentSeconds = 2, listSize = 10, quiet = false } = {}) {
  const origin = dir ?? mkdtempSync(join(tmpdir(), 'chunkycast-origin-'));
  const ownsDir = dir === undefined;
  const stderr = new Ring(50);
  // prettier-ignore
  const args = [
    '-hide_banner', '-loglevel', 'error', '-nostdin',
    '-re', '-f', 'lavfi', '-i', 'testsrc=size=640x360:rate=30',
    '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000',
    '-c:v', 'libx264', '-preset', 'veryfast', '-tune', 'zerolatency',
    '-g', String(30 * segmentSeconds), '-keyint_min', String(30 * segmentSeconds), '-sc_threshold', '0',
    '-b:v', '800k', '-maxrate', '800k', '-bufsize', '1600k', '-pix_fmt', 'yuv420p',
    '-c:a', 'aac', '-b:a', '96k',
    '-f', 'hls', '-hls_time', String(segmentSeconds), '-hls_list_size', String(listSize),
    '-hls_delete_threshold', '6',
    '-hls_flags', 'delete_segments+independent_segments+temp_file',
    join(origin, 'live.m3u8'),
  ];
  const proc = spawn('ffmpeg', args, { cwd: origin, stdio: ['ignore', 'ignore', 'pipe'] });
  tieToParent(proc);
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (chunk) => {
    for (const line of chunk.split('\n')) if (line.trim() !== '') stderr.push(line);
    if (!quiet) process.stderr.write(`ffmpeg: ${chunk}`);
  });
  const spawnError = new Promise((_, reject) => proc.once('error', reject));
  spawnError.catch(() => undefined);

  /** @type {Map<number, { sequence: number, uri: string, bytes: number, duration: number, readyAt: number }>} */
  const segments = new Map();
  const playlistPath = join(origin, 'live.m3u8');
  const poll = () => {
    if (!existsSync(playlistPath)) return;
    let text;
    try {
      text = readFileSync(playlistPath, 'utf8');
    } catch {
      return;
    }
    const now = Date.now();
    for (const s of parsePlaylist(text).segments) {
      if (segments.has(s.sequence)) continue;
      try {
        const st = statSync(join(origin, s.uri));
        // temp_file: the segment was renamed into place when finished, so its mtime is that moment.
        segments.set(s.sequence, { ...s, bytes: st.size, readyAt: Math.min(now, st.mtimeMs) });
      } catch {
        // deleted already (we were slower than the playlist window): nothing to record
      }
    }
  };
  const watcher = setInterval(poll, 200);

  const stream = {
    dir: origin,
    playlist: playlistPath,
    segments,
    proc,
    stderr,
    /** Sum of the bytes of segments finished in [fromMs, toMs]. */
    bytesProduced(fromMs, toMs = Date.now()) {
      poll();
      let bytes = 0;
      let count = 0;
      for (const s of segments.values())
        if (s.readyAt >= fromMs && s.readyAt <= toMs) {
          bytes += s.bytes;
          count++;
        }
      return { bytes, count };
    },
    /** Waits until the playlist lists `n` segments. */
    async waitForSegments(n, timeoutMs = 30_000) {
      await Promise.race([
        spawnError,
        waitFor(
          `${n} HLS segments from ffmpeg in ${origin}`,
          () => {
            if (proc.exitCode !== null) throw new Error(`ffmpeg exited (${proc.exitCode}): ${stderr.text()}`);
            poll();
            return segments.size >= n;
          },
          { timeoutMs, intervalMs: 200 },
        ),
      ]);
    },
    async stop() {
      clearInterval(watcher);
      // ffmpeg finishes its files on SIGINT (SIGTERM works too); SIGKILL after 3 s.
      await stopProcess(proc, { signal: 'SIGINT', graceMs: 3000 });
      if (ownsDir) rmSync(origin, { recursive: true, force: true });
    },
  };
  return stream;
}

// ─── the tracker ─────────────────────────────────────────────────────────────────────────────────

export const trackerCli = join(root, 'tracker', 'dist', 'cli.js');
export const demoDist = join(root, 'demo', 'dist');

/**
 * Starts the tracker CLI (rendezvous server, HLS origin for `originDir` at /live/, the demo at /,
 * and the true source of stream `sourceStream`). Resolves once it logs "listening".
 */
export async function startTracker({
  originDir,
  /** Address to bind (the lab binds its public segment's address). */
  host = '127.0.0.1',
  staticDir = demoDist,
  port = 0,
  sourceStream = 'live',
  logLevel = 'info',
  extraArgs = [],
  /** true: echo every log line to stderr; a function: echo the records it accepts. */
  echo = false,
  startTimeoutMs = 20_000,
  /** More environment variables for the tracker (secrets go here, not in argv). */
  env: extraEnv = {},
  /** The broadcaster key (the source's secret; /debug/* needs it as a bearer token). */
  broadcasterKey = process.env.CHUNKYCAST_BROADCASTER_KEY || randomBytes(24).toString('base64url'),
} = {}) {
  if (!existsSync(trackerCli))
    throw new Error(`${trackerCli} is missing: build the tracker first (npx tsc -b, or npm run setup)`);
  const args = [trackerCli, '--host', host, '--port', String(port), '--log-level', logLevel];
  if (originDir !== undefined) args.push('--origin-dir', originDir);
  if (staticDir !== undefined) args.push('--static-dir', staticDir);
  // null: no true source (an origin-only tracker, as the comparison benchmark's non-mesh arms use).
  if (sourceStream !== undefined && sourceStream !== null) args.push('--source-stream', sourceStream);
  args.push(...extraArgs);
  // The key goes in the environment, not argv, which other users of the machine can read.
  const env = { ...process.env, ...extraEnv, CHUNKYCAST_BROADCASTER_KEY: broadcasterKey };
  const proc = spawn(process.execPath, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  tieToParent(proc);
  const logs = new Ring(400);
  /** @type {(line: object) => void} */
  let onRecord = () => undefined;
  const records = [];
  forEachLine(proc.stdout, (line) => {
    logs.push(line);
    if (echo === true) process.stderr.write(`tracker: ${line}\n`);
    try {
      const record = JSON.parse(line);
      if (typeof echo === 'function' && echo(record)) process.stderr.write(`tracker: ${line}\n`);
      if (record.level === 'warn' || record.level === 'error') {
        records.push(record);
        if (records.length > 200) records.shift();
      }
      onRecord(record);
    } catch {
      // not JSON: kept in the ring as is
    }
  });
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (chunk) => {
    for (const line of chunk.split('\n')) if (line.trim() !== '') logs.push(`[stderr] ${line}`);
    if (echo !== false) process.stderr.write(`tracker (stderr): ${chunk}`);
  });
  const listening = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`tracker did not log "listening" within ${startTimeoutMs} ms:\n${logs.text()}`));
    }, startTimeoutMs);
    onRecord = (record) => {
      if (record.msg === 'listening') {
        clearTimeout(timer);
        resolve(record);
      }
    };
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`tracker exited (${code ?? signal}) before listening:\n${logs.text()}`));
    });
    proc.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
  onRecord = () => undefined;
  const url = String(listening.url);
  const getJson = async (path, init) => {
    const headers = { ...init?.headers, Authorization: `Bearer ${broadcasterKey}` };
    const response = await fetch(url + path, { ...init, headers, signal: AbortSignal.timeout(5000) });
    if (!response.ok) throw new Error(`${init?.method ?? 'GET'} ${path}: HTTP ${response.status}`);
    const type = response.headers.get('content-type') ?? '';
    return type.includes('json') ? response.json() : response.text();
  };
  return {
    proc,
    url,
    wsUrl: String(listening.wsUrl ?? `${url.replace(/^http/, 'ws')}/ws`),
    demoUrl: String(listening.demoUrl ?? `${url}/`),
    broadcasterKey,
    listening,
    logs,
    warnings: records,
    getJson,
    /** The origin's counters: media and playlist bytes and requests, source vs viewers. */
    origin: () => getJson('/debug/origin'),
    resetOrigin: () => getJson('/debug/origin/reset', { method: 'POST' }),
    swarm: (stream = 'live') => getJson(`/debug/swarm/${encodeURIComponent(stream)}`),
    healthy: async () => {
      try {
        await getJson('/healthz');
        return true;
      } catch {
        return false;
      }
    },
    stop: () => stopProcess(proc, { signal: 'SIGTERM', graceMs: 5000 }),
  };
}

// ─── Chromium ────────────────────────────────────────────────────────────────────────────────────

export function chromiumPath() {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  for (const name of ['chromium', 'chromium-browser']) {
    const r = spawnSync('which', [name], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim() !== '') return r.stdout.trim();
  }
  throw new Error('Chromium not found: install the Debian package `chromium` (npm run setup does it)');
}

export const chromiumArgs = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
  // Loopback WebRTC: host candidates on 127.0.0.1, which Chromium only gathers once the page holds
  // a media permission (hence the fake capture device and the getUserMedia call in pageInit).
  '--allow-loopback-in-peer-connection',
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
  // Viewers in background tabs must keep playing and running timers at full rate.
  '--autoplay-policy=no-user-gesture-required',
  '--disable-background-timer-throttling',
  '--disable-backgrounding-occluded-windows',
  '--disable-renderer-backgrounding',
];

/** The flags of chromiumArgs that give pages a (fake) media permission and loopback candidates. */
const MEDIA_ARGS = [
  '--allow-loopback-in-peer-connection',
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
];

/**
 * Runs in every page before its own scripts: asks for the (fake) microphone once, which lets
 * Chromium gather loopback ICE candidates, and records playback events independently of the SDK.
 */
function pageInit({ askMicrophone = true } = {}) {
  const rec = {
    firstPlayingMs: null,
    waitingAfterStart: 0,
    gum: 'pending',
    errors: [],
  };
  Object.defineProperty(window, '__e2e', { value: rec });
  // Media events do not bubble or cross shadow roots (<mesh-player> keeps its <video> in one), so
  // listen in the capture phase on the document and on every shadow root the page creates.
  const listen = (target) => {
    target.addEventListener(
      'playing',
      () => {
        if (rec.firstPlayingMs === null) rec.firstPlayingMs = performance.now();
      },
      true,
    );
    target.addEventListener(
      'waiting',
      () => {
        if (rec.firstPlayingMs !== null) rec.waitingAfterStart++;
      },
      true,
    );
  };
  listen(document);
  const attachShadow = Element.prototype.attachShadow;
  Element.prototype.attachShadow = function (init) {
    const shadow = attachShadow.call(this, init);
    listen(shadow);
    return shadow;
  };
  window.addEventListener('error', (e) => {
    if (rec.errors.length < 20) rec.errors.push(String(e.message));
  });
  window.addEventListener('unhandledrejection', (e) => {
    if (rec.errors.length < 20)
      rec.errors.push(`unhandled rejection: ${String(e.reason?.message ?? e.reason)}`);
  });
  const md = navigator.mediaDevices;
  rec.gumReady = !askMicrophone
    ? Promise.resolve((rec.gum = 'not asked'))
    : md === undefined
      ? Promise.resolve((rec.gum = 'unavailable'))
      : md.getUserMedia({ audio: true }).then(
          (s) => {
            rec.gum = 'granted';
            rec.gumStream = s; // kept open: the page keeps its capture permission
          },
          (e) => {
            rec.gum = `error: ${e.name}`;
          },
        );
}

/**
 * Launches Debian Chromium headless with a persistent context in a temp profile.
 * Pages opened by openViewer share this one context (≈15 MB per page).
 */
export async function launchBrowser({
  headless = true,
  executablePath = chromiumPath(),
  extraArgs = [],
  /**
   * Ask for the (fake) microphone in every page: Chromium then puts real addresses in its host
   * candidates (loopback WebRTC needs that). Without it, host candidates are mDNS names, as for a
   * viewer on the internet (the lab's default).
   */
  askMicrophone = true,
} = {}) {
  const { chromium } = await import('playwright-core');
  const userDataDir = mkdtempSync(join(tmpdir(), 'chunkycast-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    // The lab passes a wrapper that runs Chromium inside a viewer's network namespace.
    executablePath,
    headless,
    // Without the microphone, no fake capture device and no loopback candidates either: with the
    // fake device's auto-granted permission Chromium would show real host addresses all the same.
    args: [
      ...(askMicrophone ? chromiumArgs : chromiumArgs.filter((a) => !MEDIA_ARGS.includes(a))),
      ...extraArgs,
    ],
    viewport: { width: 640, height: 480 },
    ignoreDefaultArgs: ['--mute-audio'],
    // The caller's Stack closes the browser on signals, after the pages and before the tracker.
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
  });
  await context.addInitScript(pageInit, { askMicrophone });
  const pages = new Set();
  return {
    context,
    pages,
    askMicrophone,
    async close() {
      await context.close().catch(() => undefined);
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

/** Builds a viewer page URL of the demo: `/?stream=…` plus the given query parameters. */
export function viewerUrl(baseUrl, params = {}) {
  const u = new URL('/', baseUrl);
  u.searchParams.set('stream', 'live');
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, String(v));
  return u.toString();
}

/**
 * Opens one viewer page and returns a handle. `openedAt` is the wall time just before navigation;
 * `stats()` reads the player's stats plus the video element and our own event record.
 */
export async function openViewer(browser, url, { label } = {}) {
  const { context } = browser;
  // A granted media permission alone makes Chromium put real addresses in host candidates: only
  // for browsers that ask for the microphone (not the lab's, whose viewers use mDNS names).
  if (browser.askMicrophone !== false)
    await context.grantPermissions(['microphone', 'camera'], { origin: new URL(url).origin }).catch(() => {
      // older Chromium without the permission: getUserMedia in pageInit still asks for it
    });
  const page = await context.newPage();
  const console = new Ring(60);
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') console.push(`[${m.type()}] ${m.text()}`);
  });
  page.on('pageerror', (e) => console.push(`[pageerror] ${e.message}`));
  const openedAt = Date.now();
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 20_000 });
  const viewer = {
    page,
    label: label ?? url,
    url,
    openedAt,
    console,
    closed: false,
    stats: () => readViewer(page),
    async close() {
      viewer.closed = true;
      browser.pages.delete(viewer);
      await page.close({ runBeforeUnload: false }).catch(() => undefined);
    },
  };
  browser.pages.add(viewer);
  return viewer;
}

/** One snapshot of a viewer page (null fields when the player is not there yet). */
export async function readViewer(page) {
  return page.evaluate(() => {
    const rec = /** @type {any} */ (window).__e2e ?? null;
    const player = /** @type {any} */ (window).chunkycast?.player ?? null;
    const video = player?.video ?? document.querySelector('video');
    let stats = null;
    try {
      stats = player?.stats ? JSON.parse(JSON.stringify(player.stats)) : null;
    } catch (error) {
      stats = { error: String(error) };
    }
    return {
      now: Date.now(),
      pageMs: performance.now(),
      stats,
      video:
        video === null || video === undefined
          ? null
          : {
              currentTime: video.currentTime,
              paused: video.paused,
              readyState: video.readyState,
              buffered:
                video.buffered.length > 0
                  ? video.buffered.end(video.buffered.length - 1) - video.currentTime
                  : 0,
              error: video.error ? video.error.message || String(video.error.code) : null,
            },
      firstPlayingMs: rec?.firstPlayingMs ?? null,
      waitingAfterStart: rec?.waitingAfterStart ?? 0,
      gum: rec?.gum ?? null,
      errors: rec?.errors ?? [],
    };
  });
}

// ─── cleanup ─────────────────────────────────────────────────────────────────────────────────────

/** Stops everything started through it, last started first; safe to call twice. */
export class Stack {
  constructor() {
    this.items = [];
  }
  add(name, stop) {
    this.items.push({ name, stop });
  }
  async stopAll() {
    while (this.items.length > 0) {
      const { name, stop } = /** @type {{ name: string, stop: () => Promise<void> }} */ (this.items.pop());
      // The timer is cleared once stop() settles: only a stop that really hangs is reported.
      let timer;
      try {
        await Promise.race([
          stop(),
          new Promise((resolve) => {
            timer = setTimeout(() => resolve(logLine('harness', `stopping ${name} timed out`)), 10_000);
          }),
        ]);
      } catch (error) {
        logLine('harness', `stopping ${name} failed: ${String(error)}`);
      } finally {
        clearTimeout(timer);
      }
    }
  }
}

/** Files under `dir` (one level), for messages. */
export function listDir(dir) {
  try {
    return readdirSync(dir).join(' ');
  } catch {
    return '(missing)';
  }
}

// ─── watching viewers ────────────────────────────────────────────────────────────────────────────

/** One snapshot of every viewer, taken in parallel; a page that fails to answer gives {error}. */
export async function sampleAll(viewers) {
  return Promise.all(
    viewers.map(async (v) => {
      try {
        return await readViewer(v.page);
      } catch (error) {
        return { now: Date.now(), error: String(error?.message ?? error) };
      }
    }),
  );
}

/** Waits until every viewer has played (a 'playing' event and currentTime > 0). */
export async function waitForPlaying(viewers, { timeoutMs = 30_000 } = {}) {
  return waitFor(
    `${viewers.length} viewer(s) to start playing`,
    async () => {
      const snaps = await sampleAll(viewers);
      return snaps.every(
        (s) => s.firstPlayingMs !== null && s.firstPlayingMs !== undefined && s.video?.currentTime > 0,
      )
        ? snaps
        : false;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/**
 * Samples every viewer every `intervalMs` for `durationMs` (bounded count). Calls `onSample` with
 * each round. Returns the series: series[i] = snapshots of viewer i, oldest first.
 */
export async function monitor(viewers, { durationMs, intervalMs = 2000, onSample } = {}) {
  const series = viewers.map(() => []);
  const rounds = Math.max(1, Math.round(durationMs / intervalMs));
  const start = Date.now();
  for (let round = 0; round <= rounds; round++) {
    const snaps = await sampleAll(viewers);
    snaps.forEach((s, i) => series[i].push(s));
    onSample?.(snaps, round);
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
export function steadinessProblems(label, snaps, { minRate = 0.5 } = {}) {
  const problems = [];
  for (let i = 1; i < snaps.length; i++) {
    const a = snaps[i - 1];
    const b = snaps[i];
    if (a.error || b.error) {
      problems.push(`${label}: page did not answer: ${a.error ?? b.error}`);
      continue;
    }
    if (b.video?.error) problems.push(`${label}: video error ${b.video.error}`);
    const wall = (b.now - a.now) / 1000;
    const advanced = (b.video?.currentTime ?? 0) - (a.video?.currentTime ?? 0);
    if (!(advanced >= minRate * wall))
      problems.push(
        `${label}: currentTime ${a.video?.currentTime?.toFixed(2)} → ${b.video?.currentTime?.toFixed(2)} in ${wall.toFixed(1)} s ` +
          `(sample ${i}, paused=${b.video?.paused}, readyState=${b.video?.readyState}, buffer ${b.video?.buffered?.toFixed(2)} s)`,
      );
  }
  return problems;
}

/** Mesh share over all viewers: Σ bytesFromMesh / Σ (bytesFromMesh + bytesFromOrigin). */
export function meshShareOf(snaps) {
  let mesh = 0;
  let origin = 0;
  for (const s of snaps) {
    mesh += s.stats?.bytesFromMesh ?? 0;
    origin += s.stats?.bytesFromOrigin ?? 0;
  }
  return { mesh, origin, share: mesh + origin === 0 ? 0 : mesh / (mesh + origin) };
}

/** A compact per-viewer summary for logs and diagnostics. */
export function brief(label, s) {
  if (s.error) return { viewer: label, error: s.error };
  const st = s.stats ?? {};
  return {
    viewer: label,
    t: s.video?.currentTime === undefined ? null : Number(s.video.currentTime.toFixed(2)),
    buf: s.video?.buffered === undefined ? null : Number(s.video.buffered.toFixed(2)),
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

/**
 * Swarm figures from one round of snapshots and the origin's counters: mesh share, stalls, peers,
 * live delay, and how many stream copies the origin served for the segments produced meanwhile.
 */
export function swarmSummary(snaps, origin, produced) {
  const live = snaps.filter((s) => !s.error && s.stats);
  const share = meshShareOf(live);
  const delays = live.map((s) => s.stats.liveDelayMs).filter((d) => typeof d === 'number');
  return {
    viewers: snaps.length,
    playing: live.filter((s) => s.video && !s.video.paused && s.video.currentTime > 0).length,
    meshShare: share.share,
    bytesFromMesh: share.mesh,
    bytesFromOrigin: share.origin,
    peersAvg: live.length === 0 ? 0 : live.reduce((a, s) => a + (s.stats.peers ?? 0), 0) / live.length,
    stalls: live.reduce((a, s) => a + (s.stats.stalls ?? 0), 0),
    stallMs: live.reduce((a, s) => a + (s.stats.stallMs ?? 0), 0),
    liveDelayMsP50: percentile(delays, 50),
    originMediaBytes: origin?.mediaBytes ?? null,
    originViewerMediaBytes: origin?.viewerMediaBytes ?? null,
    producedBytes: produced?.bytes ?? null,
    streamCopiesFromOrigin:
      origin && produced && produced.bytes > 0 ? origin.mediaBytes / produced.bytes : null,
  };
}

/** One line for progress output. */
export function summaryLine(elapsedS, sum) {
  const pct = (x) => (x === null ? '—' : `${(100 * x).toFixed(0)}%`);
  return (
    `t=${elapsedS.toFixed(0).padStart(4)}s  playing ${sum.playing}/${sum.viewers}  mesh ${pct(sum.meshShare)}` +
    `  origin ${sum.streamCopiesFromOrigin === null ? '—' : sum.streamCopiesFromOrigin.toFixed(2)} copies` +
    `  peers ${sum.peersAvg.toFixed(1)}  stalls ${sum.stalls} (${(sum.stallMs / 1000).toFixed(1)} s)` +
    `  delay p50 ${sum.liveDelayMsP50 === null ? '—' : `${(sum.liveDelayMsP50 / 1000).toFixed(1)} s`}`
  );
}
