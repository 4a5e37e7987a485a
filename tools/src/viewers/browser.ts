/**
 * Debian Chromium driven by playwright-core, and viewer pages of the demo in it: launching with the
 * flags loopback WebRTC needs, opening a viewer, and reading one snapshot of a page.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { Ring } from '../lib/wait.js';
import type { PlayerStatsSnapshot, ViewerSnapshot } from './snapshot.js';

/** How long a viewer page may take to load its document. */
const NAVIGATION_TIMEOUT_MS = 20_000;
/** Page errors each page records (the first ones: later ones are usually the same). */
const PAGE_ERRORS_KEPT = 20;

/** The Chromium binary: CHROMIUM_PATH, or Debian's `chromium` (or `chromium-browser`) on PATH. */
export function chromiumPath(): string {
  const fromEnvironment = process.env.CHROMIUM_PATH;
  if (fromEnvironment !== undefined && fromEnvironment !== '') return fromEnvironment;
  for (const name of ['chromium', 'chromium-browser']) {
    const r = spawnSync('which', [name], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim() !== '') return r.stdout.trim();
  }
  throw new Error('Chromium not found: install the Debian package `chromium` (npm run setup does it)');
}

/** The Firefox binary: FIREFOX_PATH, or Debian's `firefox-esr` (or `firefox`). */
export function firefoxPath(): string {
  const fromEnvironment = process.env.FIREFOX_PATH;
  if (fromEnvironment !== undefined && fromEnvironment !== '') return fromEnvironment;
  for (const candidate of ['/usr/lib/firefox-esr/firefox-esr', '/usr/lib/firefox/firefox'])
    if (existsSync(candidate)) return candidate;
  for (const name of ['firefox-esr', 'firefox']) {
    const r = spawnSync('which', [name], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim() !== '') return r.stdout.trim();
  }
  throw new Error('Firefox not found: install the Debian package `firefox-esr` (npm run setup does it)');
}

/** The browsers a viewer can run in. */
export type BrowserName = 'chromium' | 'firefox';
export const BROWSER_NAMES: readonly BrowserName[] = ['chromium', 'firefox'];

/** `chromium --version` or `firefox-esr --version`, for results. */
export function browserVersion(name: BrowserName): string {
  const r = spawnSync(name === 'chromium' ? chromiumPath() : firefoxPath(), ['--version'], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  return r.stdout.trim();
}

/**
 * Viewers in background tabs must keep playing and running timers at full rate: the flags that stop
 * Chromium throttling them (hiddenTabViewer leaves them out to get a really hidden viewer).
 */
export const KEEP_BACKGROUND_RUNNING_ARGS: readonly string[] = [
  '--disable-background-timer-throttling',
  '--disable-backgrounding-occluded-windows',
  '--disable-renderer-backgrounding',
];

export const chromiumArgs: readonly string[] = [
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
  '--autoplay-policy=no-user-gesture-required',
  ...KEEP_BACKGROUND_RUNNING_ARGS,
];

/** The flags of chromiumArgs that give pages a (fake) media permission and loopback candidates. */
const MEDIA_ARGS: readonly string[] = [
  '--allow-loopback-in-peer-connection',
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
];

/** What pageInit records in every page (`window.__e2e`). */
interface PageRecord {
  firstPlayingMs: number | null;
  waitingAfterStart: number;
  gum: string;
  errors: string[];
  gumReady?: Promise<unknown>;
}

/**
 * Runs in every page before its own scripts: asks for the (fake) microphone once, which lets
 * Chromium gather loopback ICE candidates, and records playback events independently of the SDK.
 * Serialised by Playwright: it may use only what it declares itself.
 */
function pageInit({ askMicrophone }: { askMicrophone: boolean }): void {
  const rec: PageRecord = { firstPlayingMs: null, waitingAfterStart: 0, gum: 'pending', errors: [] };
  Object.defineProperty(window, '__e2e', { value: rec });
  // Media events do not bubble or cross shadow roots (<mesh-player> keeps its <video> in one), so
  // listen in the capture phase on the document and on every shadow root the page creates.
  const listen = (target: Document | ShadowRoot): void => {
    target.addEventListener(
      'playing',
      () => {
        rec.firstPlayingMs ??= performance.now();
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
  const attachShadow = Element.prototype.attachShadow; // eslint-disable-line @typescript-eslint/unbound-method -- called with its element below
  Element.prototype.attachShadow = function (this: Element, init: ShadowRootInit): ShadowRoot {
    const shadow = attachShadow.call(this, init);
    listen(shadow);
    return shadow;
  };
  window.addEventListener('error', (e) => {
    if (rec.errors.length < 20) rec.errors.push(e.message);
  });
  window.addEventListener('unhandledrejection', (e: PromiseRejectionEvent) => {
    const reason: unknown = e.reason;
    if (rec.errors.length < 20)
      rec.errors.push(`unhandled rejection: ${reason instanceof Error ? reason.message : String(reason)}`);
  });
  const md = navigator.mediaDevices as MediaDevices | undefined;
  if (!askMicrophone) {
    rec.gum = 'not asked';
    rec.gumReady = Promise.resolve(rec.gum);
  } else if (md === undefined) {
    rec.gum = 'unavailable';
    rec.gumReady = Promise.resolve(rec.gum);
  } else
    rec.gumReady = md.getUserMedia({ audio: true }).then(
      (s) => {
        rec.gum = 'granted';
        // The grant is what lets Chromium show loopback host candidates; the capture itself is not
        // needed and was not free: the fake microphone kept Chromium's audio service at ~2.5% of a
        // core per page (swarm, 3 viewers: 7.5% against 0.2% with the tracks stopped; links, mesh
        // share and stalls the same), in every arm of every benchmark.
        for (const track of s.getTracks()) track.stop();
      },
      (e: unknown) => {
        rec.gum = `error: ${e instanceof Error ? e.name : String(e)}`;
      },
    );
}

export interface Browser {
  readonly name: BrowserName;
  readonly context: BrowserContext;
  /** The viewers open in it. */
  readonly pages: Set<Viewer>;
  readonly askMicrophone: boolean;
  close(): Promise<void>;
}

export interface LaunchOptions {
  /** Which browser (default chromium). */
  browser?: BrowserName;
  headless?: boolean;
  /** The lab passes a wrapper that runs Chromium inside a viewer's network namespace. */
  executablePath?: string;
  extraArgs?: readonly string[];
  /**
   * Ask for the (fake) microphone in every page: Chromium then puts real addresses in its host
   * candidates (loopback WebRTC needs that). Without it, host candidates are mDNS names, as for a
   * viewer on the internet (the lab's default).
   */
  askMicrophone?: boolean;
}

/**
 * Firefox preferences (its `user.js`) for every viewer: autoplay allowed, as Chromium's
 * `--autoplay-policy`. Playwright's own defaults already keep background tabs' timers unthrottled
 * (`dom.min_background_timeout_value` 0, budget throttling off).
 */
const FIREFOX_PREFS: Readonly<Record<string, string | number | boolean>> = {
  'media.autoplay.default': 0,
  'media.autoplay.blocking_policy': 0,
  // Keep decoding hidden players (hidePlayer), as Chromium does: a benchmark must not compare a
  // decoding browser with one that skips the video.
  'media.suspend-background-video.enabled': false,
};

/**
 * The prefs that give pages a media permission and loopback candidates: Firefox's equivalents of
 * MEDIA_ARGS and Chromium's granted permission. A Firefox page without a persistent microphone or
 * camera permission gathers on the default route's interface only (none in a loopback-only
 * namespace, where ICE then fails with no candidate at all); a live capture of the fake device did
 * not count here (checked on ESR 153), so the permission is granted to every site by default.
 * Loopback candidates also need `ice.loopback`.
 */
const FIREFOX_MEDIA_PREFS: Readonly<Record<string, string | number | boolean>> = {
  'permissions.default.microphone': 1,
  'permissions.default.camera': 1,
  'media.navigator.streams.fake': true,
  // Without it even a fake device prompts, and nobody answers a prompt in a headless browser.
  'media.navigator.permission.disabled': true,
  'media.peerconnection.ice.loopback': true,
  'media.peerconnection.ice.obfuscate_host_addresses': false,
};

/**
 * Launches a headless browser with a persistent context in a temp profile: Debian Chromium (the
 * default) or Debian Firefox ESR over WebDriver BiDi (Playwright's `moz-firefox` channel).
 * Pages opened by openViewer share this one context (≈15 MB per page).
 *
 * Firefox needs playwright-core 1.64: 1.65 sends `emulation.setMediaFeaturesOverride` when it
 * creates a context, a BiDi command Firefox has only from 159 (Debian has ESR 140 and 153), and the
 * launch fails with `unknown command` (docs/browsers.md).
 */
export async function launchBrowser({
  browser: name = 'chromium',
  headless = true,
  executablePath,
  extraArgs = [],
  askMicrophone = true,
}: LaunchOptions = {}): Promise<Browser> {
  const { chromium, firefox } = await import('playwright-core');
  const userDataDir = mkdtempSync(join(tmpdir(), `chunkycast-${name}-`));
  const common = {
    headless,
    viewport: { width: 640, height: 480 },
    // The caller's Stack closes the browser on signals, after the pages and before the tracker.
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
  };
  const context =
    name === 'firefox'
      ? await firefox.launchPersistentContext(userDataDir, {
          ...common,
          channel: 'moz-firefox',
          executablePath: executablePath ?? firefoxPath(),
          firefoxUserPrefs: askMicrophone ? { ...FIREFOX_PREFS, ...FIREFOX_MEDIA_PREFS } : FIREFOX_PREFS,
          args: [...extraArgs],
        })
      : await chromium.launchPersistentContext(userDataDir, {
          ...common,
          executablePath: executablePath ?? chromiumPath(),
          // Without the microphone, no fake capture device and no loopback candidates either: with the
          // fake device's auto-granted permission Chromium would show real host addresses all the same.
          args: [
            ...(askMicrophone ? chromiumArgs : chromiumArgs.filter((a) => !MEDIA_ARGS.includes(a))),
            ...extraArgs,
          ],
          ignoreDefaultArgs: ['--mute-audio'],
        });
  await context.addInitScript(pageInit, { askMicrophone });
  return {
    name,
    context,
    pages: new Set(),
    askMicrophone,
    async close() {
      await context.close().catch(() => undefined);
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Hides a viewer's player (display: none): it still decodes and plays but is not painted, about
 * 25% less CPU per viewer, for many viewers on few cores. (Firefox would also stop decoding a
 * hidden video after 10 s; FIREFOX_PREFS turns that off, so both browsers keep decoding.)
 */
export async function hidePlayer(viewer: Viewer): Promise<void> {
  await viewer.page.addStyleTag({ content: 'mesh-player, video { display: none !important; }' });
}

/** Builds a viewer page URL of the demo: `/?stream=live` plus the given query parameters. */
export function viewerUrl(
  baseUrl: string,
  params: Readonly<Record<string, string | number | boolean | undefined>> = {},
): string {
  const u = new URL('/', baseUrl);
  u.searchParams.set('stream', 'live');
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, String(v));
  return u.toString();
}

/** A viewer page however it is driven: what sampling, monitoring and failure reports need. */
export interface ViewerHandle {
  readonly label: string;
  readonly url: string;
  /** Wall time just before navigation. */
  readonly openedAt: number;
  /** The page's console errors and warnings, and uncaught page errors. */
  readonly console: Ring;
  closed: boolean;
  stats(): Promise<ViewerSnapshot>;
  close(): Promise<void>;
}

/** A viewer page in a Playwright-driven browser. */
export interface Viewer extends ViewerHandle {
  readonly page: Page;
}

/**
 * Opens one viewer page and returns a handle. `openedAt` is the wall time just before navigation;
 * `stats()` reads the player's stats plus the video element and our own event record.
 */
export async function openViewer(
  browser: Browser,
  url: string,
  {
    label,
    initScript,
  }: {
    label?: string;
    /** Script run in the page before its own (a test's stand-ins for browser APIs). */
    initScript?: string;
  } = {},
): Promise<Viewer> {
  const { context } = browser;
  // A granted media permission alone makes Chromium put real addresses in host candidates: only
  // for browsers that ask for the microphone (not the lab's, whose viewers use mDNS names).
  // Firefox's prefs grant it instead (BiDi's permissions.setPermission refuses the microphone).
  if (browser.askMicrophone && browser.name === 'chromium')
    await context.grantPermissions(['microphone', 'camera'], { origin: new URL(url).origin }).catch(() => {
      // older Chromium without the permission: getUserMedia in pageInit still asks for it
    });
  // The first viewer takes the blank page the persistent context opened with: left blank, its
  // renderer (~14 MiB) was counted among the viewers' in every benchmark.
  const blank = browser.pages.size === 0 ? context.pages().find((p) => p.url() === 'about:blank') : undefined;
  const page = blank ?? (await context.newPage());
  if (initScript !== undefined) await page.addInitScript(initScript);
  const console = new Ring(60);
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') console.push(`[${m.type()}] ${m.text()}`);
  });
  page.on('pageerror', (e) => {
    console.push(`[pageerror] ${e.message}`);
  });
  const openedAt = Date.now();
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: NAVIGATION_TIMEOUT_MS });
  const viewer: Viewer = {
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

/** What a page exposes to the harness: the demo's and the benchmark pages' `window.chunkycast`. */
interface PageGlobals {
  __e2e?: PageRecord;
  chunkycast?: { player?: { video?: HTMLVideoElement; stats?: unknown } | null };
}

/** One snapshot of a viewer page (null fields when the player is not there yet). */
export async function readViewer(page: Page): Promise<ViewerSnapshot> {
  return page.evaluate(snapshotPage, PAGE_ERRORS_KEPT);
}

/**
 * One snapshot of a viewer page, run inside the page (serialised by Playwright, or as source text
 * over raw CDP by hiddenTabViewer): it may use only what it declares itself.
 */
export function snapshotPage(errorsKept: number): ViewerSnapshot {
  const globals = window as unknown as PageGlobals;
  const rec = globals.__e2e ?? null;
  const player = globals.chunkycast?.player ?? null;
  const video = player?.video ?? document.querySelector('video');
  let stats: PlayerStatsSnapshot | null = null;
  try {
    stats =
      player?.stats === undefined || player.stats === null
        ? null
        : (JSON.parse(JSON.stringify(player.stats)) as PlayerStatsSnapshot);
  } catch (error) {
    stats = { error: String(error) };
  }
  const quality =
    video !== null && typeof video.getVideoPlaybackQuality === 'function'
      ? video.getVideoPlaybackQuality()
      : null;
  return {
    now: Date.now(),
    pageMs: performance.now(),
    stats,
    video:
      video === null
        ? null
        : {
            currentTime: video.currentTime,
            paused: video.paused,
            playbackRate: video.playbackRate,
            readyState: video.readyState,
            buffered:
              video.buffered.length > 0
                ? video.buffered.end(video.buffered.length - 1) - video.currentTime
                : 0,
            error: video.error ? video.error.message || String(video.error.code) : null,
            ...(quality === null
              ? {}
              : { droppedFrames: quality.droppedVideoFrames, totalFrames: quality.totalVideoFrames }),
          },
    jsHeapBytes:
      (performance as Performance & { memory?: { usedJSHeapSize?: number } }).memory?.usedJSHeapSize ?? null,
    firstPlayingMs: rec?.firstPlayingMs ?? null,
    waitingAfterStart: rec?.waitingAfterStart ?? 0,
    gum: rec?.gum ?? null,
    errors: (rec?.errors ?? []).slice(0, errorsKept),
  };
}

/**
 * Source text calling `fn(arg)`, for pages driven over raw CDP (hiddenTabViewer). `__name` is
 * defined because a bundler keeping function names (esbuild under vitest) calls it inside `fn`.
 */
function sourceCall(fn: (arg: never) => unknown, arg: unknown): string {
  return `(() => { const __name = (f) => f; return (${fn.toString()})(${JSON.stringify(arg)}); })()`;
}

/** The expression a raw CDP `Runtime.evaluate` runs for one snapshot (see snapshotPage). */
export const SNAPSHOT_EXPRESSION = sourceCall(snapshotPage, PAGE_ERRORS_KEPT);

/** pageInit as a script for raw CDP's `Page.addScriptToEvaluateOnNewDocument`. */
export const PAGE_INIT_SCRIPT = sourceCall(pageInit, { askMicrophone: true });
