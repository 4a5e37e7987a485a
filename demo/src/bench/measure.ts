// What every page of the comparison benchmark (`npm run bench:compare`) exposes to the harness, so
// that the three arms (plain hls.js, p2p-media-loader, <mesh-player>) are measured by the same code:
// `window.chunkycast.player = { video, hls, stats }`, read by tools/src/viewers/browser.ts's readViewer.
// Stalls and the fragment at the playhead are observed here, on the <video> element and hls.js's
// own events, identically for every arm; the live delay is computed by the harness from the
// playing fragment's sequence number and the moment the packager finished that segment.
import Hls from 'hls.js';
import type { ErrorData, FragChangedData, HlsConfig } from 'hls.js';

/** Which delivery the page measures. */
export type Arm = 'http' | 'p2pml' | 'mesh';

/** Where each page's media bytes came from, as the arm itself reports it. */
export interface DeliveryStats {
  /** Bytes the arm says it received from other viewers. */
  readonly p2pBytes: number;
  /** Bytes the arm says it fetched from the origin. */
  readonly httpBytes: number;
  /** Connected peers (0 for plain hls.js). */
  readonly peers: number;
}

/** The figures every benchmark page reports (the harness JSON-clones them each sample). */
export interface BenchStats extends DeliveryStats {
  readonly arm: Arm;
  /** p2pBytes / (p2pBytes + httpBytes): the arm's own offload figure (0 before any byte). */
  readonly p2pShare: number;
  readonly currentTime: number;
  readonly playing: boolean;
  /** Stalls after playback first started: a `waiting` not caused by a seek, until `playing`. */
  readonly stalls: number;
  /** Their total length, ms, including a stall still under way. */
  readonly stallMs: number;
  /** Media sequence number of the fragment at the playhead (hls.js FRAG_CHANGED), if known. */
  readonly playingSn: number | null;
  /** That fragment's end on the media timeline, s. */
  readonly playingFragEndS: number | null;
  /** That fragment's duration, s. */
  readonly playingFragDurationS: number | null;
  /** Fatal hls.js errors seen (each followed by the standard recovery). */
  readonly fatalErrors: number;
  /** Extra figures of the arm (the mesh player's own stall and delay figures, for cross-checks). */
  readonly extra: Readonly<Record<string, number | string | boolean | null>>;
}

/**
 * Marks of the startup timeline kept (the scripts' fetches, the page's start, a manifest, a few
 * fragments or parts asked and loaded, the first frame).
 */
const STARTUP_TIMELINE_MARKS = 24;

/**
 * When the page's own script began (ms since navigation), set by `markPageStart()` at the top of an
 * arm's `start()`: what lies between the scripts' arrival and it is their evaluation, what lies
 * between it and the probe is the arm's own set-up (for the mesh, the player's).
 */
let pageStartMs: number | null = null;

/** Call first thing in an arm's `start()`. */
export function markPageStart(): void {
  pageStartMs ??= performance.now();
}

/**
 * The page's first and last byte (`page:`), then its scripts as `file:requested-arrived` (resource
 * timing, ms since navigation).
 */
function scriptFetches(): string[] {
  const fetches: string[] = [];
  // The page itself: asked for at 0, its first byte and its last (a slow server shows here).
  const page = performance.getEntriesByType('navigation')[0];
  if (page instanceof PerformanceNavigationTiming)
    fetches.push(`page:${String(Math.round(page.responseStart))}-${String(Math.round(page.responseEnd))}`);
  for (const entry of performance.getEntriesByType('resource')) {
    if (!(entry instanceof PerformanceResourceTiming)) continue;
    // Module scripts and the chunks the build preloads for them (`link rel=modulepreload`).
    const path = new URL(entry.name).pathname;
    if (!/\.(js|ts)$/.test(path)) continue;
    const file = (path.split('/').pop() ?? path).replace(/-[\w-]{8}\.js$/, '');
    fetches.push(`${file}:${String(Math.round(entry.startTime))}-${String(Math.round(entry.responseEnd))}`);
  }
  return fetches;
}

/** hls.js settings the harness records with the results, read from the running instance. */
const RECORDED_HLS_SETTINGS = [
  'liveSyncDurationCount',
  'liveSyncDuration',
  'liveMaxLatencyDurationCount',
  'maxBufferLength',
  'maxMaxBufferLength',
  'backBufferLength',
  'lowLatencyMode',
  'maxLiveSyncPlaybackRate',
  'startFragPrefetch',
  'capLevelToPlayerSize',
] as const;

/** `?lowLatency=1`: LL-HLS (hls.js lowLatencyMode, the player's `low-latency`); off otherwise. */
export function lowLatencyFromQuery(params: URLSearchParams): boolean {
  return params.get('lowLatency') === '1';
}

/** A playlist segment count from the query string (`?liveSync=3`), or null when absent. */
export function liveSyncFromQuery(params: URLSearchParams): number | null {
  const raw = params.get('liveSync');
  if (raw === null || raw.trim() === '') return null;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`liveSync="${raw}" is not a positive number`);
  return value;
}

/** The page's <video>: muted autoplay without controls, the same for every arm. */
export function createVideo(container: HTMLElement): HTMLVideoElement {
  const video = document.createElement('video');
  video.muted = true;
  video.defaultMuted = true;
  video.autoplay = true;
  video.playsInline = true;
  video.className = 'player';
  container.append(video);
  return video;
}

/**
 * What <mesh-player> does with hls.js besides loading: play once the manifest is parsed, restart
 * loading 2 s after a fatal network error, recover fatal media errors. Plain pages use it so that
 * all arms recover alike. Returns a counter of fatal errors.
 */
export function attachPlayerPolicy(hls: Hls, video: HTMLVideoElement): { readonly fatal: () => number } {
  let fatal = 0;
  hls.on(Hls.Events.MANIFEST_PARSED, () => {
    video.play().catch(() => {
      // Autoplay is allowed by the harness's Chromium flags; a refusal shows up as no `playing`.
    });
  });
  hls.on(Hls.Events.ERROR, (_event, data: ErrorData) => {
    if (!data.fatal) return;
    fatal++;
    if (data.type === Hls.ErrorTypes.NETWORK_ERROR) {
      setTimeout(() => {
        hls.startLoad();
      }, 2000);
    } else if (data.type === Hls.ErrorTypes.MEDIA_ERROR) hls.recoverMediaError();
  });
  return { fatal: () => fatal };
}

/** Watches one <video> and its hls.js instance for the figures every arm reports alike. */
export class PlaybackProbe {
  #startedPlaying = false;
  #stallStartMs: number | null = null;
  #stalls = 0;
  #stallMs = 0;
  #playingSn: number | null = null;
  #playingFragEndS: number | null = null;
  #playingFragDurationS: number | null = null;
  /** `what@ms` (ms since the page's navigation) of the first manifest, fragments and frame. */
  readonly #startupTimeline: string[] = [];

  constructor(
    readonly video: HTMLVideoElement,
    readonly hls: Hls,
  ) {
    // Where a slow start goes: the manifest, the first fragments asked for and loaded, the first frame.
    const mark = (what: string): void => {
      if (this.#startupTimeline.length < STARTUP_TIMELINE_MARKS)
        this.#startupTimeline.push(`${what}@${String(Math.round(performance.now()))}`);
    };
    this.#startupTimeline.push(...scriptFetches());
    if (pageStartMs !== null) this.#startupTimeline.push(`start@${String(Math.round(pageStartMs))}`);
    mark('probe'); // the page's script ran: what comes before it is the page's own load
    hls.once(Hls.Events.MANIFEST_LOADED, () => {
      mark('manifest');
    });
    hls.on(Hls.Events.FRAG_LOADING, (_event, data) => {
      if (typeof data.frag.sn === 'number' && data.part === undefined) mark(`ask${String(data.frag.sn)}`);
    });
    hls.on(Hls.Events.FRAG_LOADED, (_event, data) => {
      if (typeof data.frag.sn !== 'number') return;
      if (data.part === null) mark(`got${String(data.frag.sn)}`);
      // LL-HLS parts only until the first frame: the startup is what the marks are for.
      else if (!this.#startedPlaying) mark(`got${String(data.frag.sn)}.${String(data.part.index)}`);
    });
    video.addEventListener('playing', () => {
      if (!this.#startedPlaying) mark('playing');
      this.#startedPlaying = true;
      if (this.#stallStartMs === null) return;
      this.#stalls++;
      this.#stallMs += performance.now() - this.#stallStartMs;
      this.#stallStartMs = null;
    });
    video.addEventListener('waiting', () => {
      // Before the first frame it is startup; a seek's wait is not a stall (the rule <mesh-player> uses).
      if (!this.#startedPlaying || video.seeking || this.#stallStartMs !== null) return;
      this.#stallStartMs = performance.now();
    });
    hls.on(Hls.Events.FRAG_CHANGED, (_event, data: FragChangedData) => {
      const frag = data.frag;
      this.#playingSn = typeof frag.sn === 'number' ? frag.sn : null;
      this.#playingFragEndS = frag.end;
      this.#playingFragDurationS = frag.duration;
    });
  }

  stats(arm: Arm, delivery: DeliveryStats, fatalErrors: number, extra: BenchStats['extra'] = {}): BenchStats {
    const video = this.video;
    const total = delivery.p2pBytes + delivery.httpBytes;
    return {
      arm,
      ...delivery,
      p2pShare: total === 0 ? 0 : delivery.p2pBytes / total,
      currentTime: video.currentTime,
      playing: !video.paused && !video.ended && this.#stallStartMs === null && video.readyState > 2,
      stalls: this.#stalls,
      stallMs: this.#stallMs + (this.#stallStartMs === null ? 0 : performance.now() - this.#stallStartMs),
      playingSn: this.#playingSn,
      playingFragEndS: this.#playingFragEndS,
      playingFragDurationS: this.#playingFragDurationS,
      fatalErrors,
      extra: { ...extra, startupTimeline: this.#startupTimeline.join(' ') },
    };
  }
}

/** The hls.js settings in force (after any library adjusted them), for the results file. */
export function hlsSettings(hls: Hls): Record<string, unknown> {
  const config = hls.config as unknown as Record<keyof HlsConfig, unknown>;
  // JSON has no Infinity (hls.js's "no limit" for several of these): written as a string.
  const jsonable = (value: unknown): unknown =>
    typeof value === 'number' && !Number.isFinite(value) ? String(value) : (value ?? null);
  return Object.fromEntries(RECORDED_HLS_SETTINGS.map((key) => [key, jsonable(config[key])]));
}

/** The object the harness reads: `window.chunkycast.player` (stats) and `.settings()` (config). */
export interface BenchHooks {
  readonly player: { readonly video: HTMLVideoElement; readonly hls: Hls; readonly stats: BenchStats };
  readonly settings: () => Record<string, unknown>;
}

export function expose(hooks: BenchHooks): void {
  // Reflect.set: the demo's viewer page declares its own `window.chunkycast` type.
  Reflect.set(window, 'chunkycast', hooks);
}

/** Shows a start-up failure on the page and in the console (the harness collects both). */
export function fail(error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  console.error(`benchmark page: ${message}`);
  const note = document.createElement('p');
  note.className = 'error';
  note.textContent = message;
  document.body.append(note);
}
