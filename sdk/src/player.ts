// <mesh-player>: a <video> played by hls.js whose media segments come from the mesh when they can
// and from the origin otherwise. Playback never depends on the mesh: without a tracker, with a bad
// attribute, or when the session fails, the element is a plain hls.js player.
import Hls from 'hls.js';
import type { ErrorData, FragChangedData, LevelLoadedData } from 'hls.js';
import { validateIceServers, type TrackerErrorCode } from '@chunkycast/wire';
import { faultsOf, withFaults } from './faults.js';
import {
  DEFAULT_LIVE_MARGIN_MS,
  MARGIN_BUILD_RATE,
  MAX_LIVE_MARGIN_MS,
  liveCatchUpRate,
  liveSyncWithMarginS,
} from './live-catch-up.js';
import { createMeshFragmentLoader } from './loader.js';
import { createMeshPlaylistLoader, stepReloadSchedule } from './playlist-loader.js';
import { MAX_UPLOAD_LIMIT_KBPS, MeshSession } from './session.js';
import type { MeshErrorCode, MeshSessionOptions, MeshStats, SegmentProvider } from './types.js';
import { MeshError, STARTUP_SEGMENTS } from './types.js';
import { parseUploadMode } from './upload-policy.js';

/** What the player adds to the session's stats. */
export interface MeshPlayerStats extends MeshStats {
  /** The video's playhead, seconds. */
  readonly currentTime: number;
  /** Media buffered ahead of the playhead, ms. */
  readonly bufferAheadMs: number;
  /** Playing (not paused, ended or stalled). */
  readonly playing: boolean;
  /** Wall-clock age of the media at the playhead, ms, when the segment's publication time is known. */
  readonly liveDelayMs: number | null;
  /** Whether a mesh session runs (false: plain HTTP playback). */
  readonly meshEnabled: boolean;
  /**
   * Why the mesh is off although `tracker` asks for it: `no-webrtc` (no RTCPeerConnection, e.g.
   * WebKitGTK builds without WebRTC), `no-mse` (neither MediaSource nor ManagedMediaSource: the
   * browser plays HLS itself, which the mesh cannot feed), `config` (a bad attribute); null when the
   * mesh runs or was not asked for.
   */
  readonly meshOffReason: 'no-webrtc' | 'no-mse' | 'config' | null;
  /** Who plays the stream: `hls.js` (MSE or ManagedMediaSource), `native` (the video's own HLS), or `none`. */
  readonly playback: 'hls.js' | 'native' | 'none';
  /**
   * Live playlist reloads held until the mesh held the next segment (playlist-loader.ts), and the
   * ms they were held in all; `playlistReloadsHeldFound` of them ended with the segment held.
   */
  readonly playlistReloadsHeld: number;
  readonly playlistReloadsHeldFound: number;
  readonly playlistHeldMs: number;
  /**
   * Reloads hls.js was told to make earlier, in step with the mesh (`stepReloadSchedule`), and by how
   * many ms in all.
   */
  readonly playlistReloadsStepped: number;
  readonly playlistSteppedMs: number;
}

export type MeshPlayerErrorCode = MeshErrorCode | 'playback' | 'unsupported';

export interface MeshPlayerErrorDetail {
  readonly code: MeshPlayerErrorCode;
  readonly message: string;
  /** With `trackerRefused`: the tracker's error code (`badToken`, `badKey`, `originNotAllowed`, …). */
  readonly trackerCode?: TrackerErrorCode;
}

const OBSERVED = [
  'src',
  'tracker',
  'stream',
  'target-load',
  'max-load',
  'upload-capacity',
  'max-upload-kbps',
  'upload',
  'public-key',
  'token',
  'ice-servers',
  'ice-transport-policy',
  'packet-repair',
  'live-sync',
  'live-margin-ms',
  'catch-up-rate',
  'low-latency',
  'autoplay',
  'muted',
  'controls',
] as const;

/** Attributes that only set a property of the video: no need to rebuild the pipeline. */
const VIDEO_FLAGS = new Set(['autoplay', 'muted', 'controls']);

const DEFAULT_LIVE_SYNC_SEGMENTS = 3;

/**
 * The playback rate a player behind its live position catches up at (`catch-up-rate`; 1 turns it
 * off). In `low-latency` mode it is hls.js's maxLiveSyncPlaybackRate: after a stall or a late start
 * an LL player plays up to 10% faster (pitch kept) until it is back at PART-HOLD-BACK from the edge;
 * hls.js only does so with more than 1 s buffered. hls.js's default, 1, never catches up, so one
 * stall added its length to the live delay for good (e2e low-latency: p95 3.1 s in a loaded full
 * run against 1.4–2.1 s alone). hls.js applies it in lowLatencyMode only, so outside it the player
 * does the same itself (live-catch-up.ts). The bench's plain hls.js page uses the same rate in LL mode.
 */
export const LOW_LATENCY_CATCH_UP_RATE = 1.1;
/** hls.js caps its catch-up rate at 2. */
const MAX_CATCH_UP_RATE = 2;
const STATS_INTERVAL_MS = 1000;
const STREAM_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** The protocol's ticket syntax (wire's MAX_TICKET_LENGTH): checked here so a typo says so at once. */
const TOKEN = /^[A-Za-z0-9_.-]{1,512}$/;
/** Playhead closer than this to a buffered range's start still counts as inside it. */
const BUFFER_TOLERANCE_S = 0.1;
/** hls.js NETWORK_ERROR restart delay: long enough not to hammer a failing origin. */
const NETWORK_RETRY_MS = 2000;

/**
 * Counts bytes and segments when no session runs, so that `stats` means the same thing with and
 * without the mesh (all from the origin then).
 */
class OriginOnly implements SegmentProvider {
  bytesFromOrigin = 0;
  segmentsFromOrigin = 0;
  waitForSegment(): Promise<Uint8Array | null> {
    return Promise.resolve(null);
  }
  waitForRange(): Promise<Uint8Array | null> {
    return Promise.resolve(null);
  }
  expectsSegment(): boolean {
    return false;
  }
  partsFromOrigin = 0;
  noteOriginSegment(bytes: number, part = false): void {
    this.bytesFromOrigin += bytes;
    if (part) this.partsFromOrigin++;
    else this.segmentsFromOrigin++;
  }
  noteMeshSegment(): void {}
  noteStall(): void {}
  publishedAtMs(): number | undefined {
    return undefined;
  }
}

interface ParsedAttributes {
  readonly src: string | null;
  readonly mesh: MeshSessionOptions | null;
  /** hls.js liveSyncDurationCount; null: hls.js's own choice (PART-HOLD-BACK in low-latency mode). */
  readonly liveSyncSegments: number | null;
  /** `live-margin-ms`: outside LL mode, at least one target duration plus this from the edge. */
  readonly liveMarginMs: number;
  /** `low-latency`: LL-HLS (hls.js lowLatencyMode), parts from the mesh with the origin per part. */
  readonly lowLatency: boolean;
  /** `catch-up-rate`: the playback rate while behind the live position, in [1, 2]; 1 is off. */
  readonly catchUpRate: number;
  readonly errors: readonly string[];
}

function parseCount(name: string, raw: string | null, errors: string[]): number | undefined | null {
  if (raw === null || raw.trim() === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) {
    errors.push(`${name}="${raw}" is not a non-negative whole number of slices`);
    return null;
  }
  return value;
}

/**
 * A numeric attribute: `fallback` when absent or empty; when not a finite number that `valid`
 * accepts, `fallback` and an error saying `<name>="<raw>" is not <expected>`.
 */
function numberAttribute<T extends number | null>(
  get: (name: string) => string | null,
  name: string,
  fallback: T,
  valid: (value: number) => boolean,
  expected: string,
  errors: string[],
): number | T {
  const raw = get(name);
  if (raw === null || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (Number.isFinite(value) && valid(value)) return value;
  errors.push(`${name}="${raw}" is not ${expected}`);
  return fallback;
}

// Pure, so the rules are the same whether attributes arrive from HTML or from script.
export function parseAttributes(get: (name: string) => string | null): ParsedAttributes {
  const errors: string[] = [];
  const src = get('src');
  const lowLatencyRaw = get('low-latency');
  // A boolean attribute: present means on, but `low-latency="false"` is read as the author meant it.
  const lowLatency = lowLatencyRaw !== null && lowLatencyRaw.trim().toLowerCase() !== 'false';
  // In low-latency mode hls.js holds back PART-HOLD-BACK from the edge unless told a position.
  const liveSyncSegments = numberAttribute(
    get,
    'live-sync',
    lowLatency ? null : DEFAULT_LIVE_SYNC_SEGMENTS,
    (value) => value > 0,
    `a positive number of segments; using ${lowLatency ? "the playlist's PART-HOLD-BACK" : '3'}`,
    errors,
  );
  const liveMarginMs = numberAttribute(
    get,
    'live-margin-ms',
    DEFAULT_LIVE_MARGIN_MS,
    (value) => value >= 0 && value <= MAX_LIVE_MARGIN_MS,
    `a number of ms from 0 (off) to ${MAX_LIVE_MARGIN_MS}; using ${DEFAULT_LIVE_MARGIN_MS}`,
    errors,
  );
  const catchUpRate = numberAttribute(
    get,
    'catch-up-rate',
    LOW_LATENCY_CATCH_UP_RATE,
    (value) => value >= 1 && value <= MAX_CATCH_UP_RATE,
    `a playback rate from 1 (off) to ${MAX_CATCH_UP_RATE}; using ${LOW_LATENCY_CATCH_UP_RATE}`,
    errors,
  );
  const tracker = get('tracker');
  if (tracker === null || tracker.trim() === '')
    return { src, mesh: null, liveSyncSegments, liveMarginMs, lowLatency, catchUpRate, errors };

  let meshUsable = true;
  if (!/^wss?:\/\//i.test(tracker)) {
    errors.push(`tracker="${tracker}" is not a ws:// or wss:// URL; playing from the origin only`);
    meshUsable = false;
  }
  const stream = get('stream') ?? '';
  if (!STREAM_ID.test(stream)) {
    errors.push(`stream="${stream}" must be 1–64 of A–Z a–z 0–9 . _ -; playing from the origin only`);
    meshUsable = false;
  }
  const targetLoad = parseCount('target-load', get('target-load'), errors);
  const maxLoad = parseCount('max-load', get('max-load'), errors);
  if (targetLoad === null || maxLoad === null) {
    errors.push('the mesh is off because of the load attributes; playing from the origin only');
    meshUsable = false;
  }
  const uploadCapacity = parseUploadCapacity(get('upload-capacity'), errors);
  const packetRepair = parsePacketRepair(get('packet-repair'), errors);
  const maxUploadKbps = parseMaxUploadKbps(get('max-upload-kbps'), errors);
  if (maxUploadKbps === null) meshUsable = false;
  // A bad value is reported and read as `off`: nobody uploads because of a typo.
  const uploadRaw = get('upload');
  const upload = parseUploadMode(uploadRaw);
  if (upload.error !== null) errors.push(upload.error);
  const publicKey = get('public-key');
  const token = get('token');
  if (token !== null && token !== '' && !TOKEN.test(token)) {
    errors.push('token is not 1–512 of A–Z a–z 0–9 _ . -; playing from the origin only');
    meshUsable = false;
  }
  const iceServers = parseIceServers(get('ice-servers'), errors);
  if (iceServers === null) meshUsable = false;
  const policy = get('ice-transport-policy');
  if (policy !== null && policy !== '' && policy !== 'all' && policy !== 'relay') {
    errors.push(`ice-transport-policy="${policy}" must be all or relay; playing from the origin only`);
    meshUsable = false;
  }
  if (!meshUsable)
    return { src, mesh: null, liveSyncSegments, liveMarginMs, lowLatency, catchUpRate, errors };
  const mesh: MeshSessionOptions = {
    tracker,
    stream,
    ...(targetLoad === undefined || targetLoad === null ? {} : { targetLoad }),
    ...(maxLoad === undefined || maxLoad === null ? {} : { maxLoad }),
    ...(uploadCapacity === undefined ? {} : { uploadCapacity }),
    ...(packetRepair === undefined ? {} : { packetRepair }),
    ...(maxUploadKbps === undefined || maxUploadKbps === null ? {} : { maxUploadKbps }),
    ...(uploadRaw === null || uploadRaw.trim() === '' ? {} : { upload: upload.mode }),
    ...(publicKey === null || publicKey === '' ? {} : { publicKey }),
    ...(token === null || token === '' ? {} : { token }),
    ...(iceServers === null || iceServers === undefined ? {} : { iceServers }),
    ...(policy === 'all' || policy === 'relay' ? { iceTransportPolicy: policy } : {}),
  };
  return { src, mesh, liveSyncSegments, liveMarginMs, lowLatency, catchUpRate, errors };
}

/**
 * The `ice-servers` attribute: a JSON array of RTCIceServer objects, checked like the tracker's
 * (wire's validateIceServers: at most 8 servers of 4 stun:/turn: URLs, bounded strings). `urls` may
 * be one string, as RTCPeerConnection allows. Undefined when absent, null (with a message) when bad.
 */
export function parseIceServers(raw: string | null, errors: string[]): RTCIceServer[] | null | undefined {
  if (raw === null || raw.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    errors.push(
      'ice-servers is not JSON (an array of {"urls": […], "username", "credential"}); playing from the origin only',
    );
    return null;
  }
  const normalised = Array.isArray(value)
    ? value.map((server: unknown) =>
        typeof server === 'object' &&
        server !== null &&
        typeof (server as { urls?: unknown }).urls === 'string'
          ? { ...server, urls: [(server as { urls: string }).urls] }
          : server,
      )
    : value;
  const checked = validateIceServers(normalised);
  if (!checked.ok) {
    errors.push(`ice-servers: ${checked.error.message}; playing from the origin only`);
    return null;
  }
  return checked.message.map((server) => ({ ...server, urls: [...server.urls] }));
}

/**
 * The `upload-capacity` attribute: `measured` (the default: loads follow the measured uplink) or
 * `fixed` (the load attributes as given). Anything else is reported and the default is used: it only
 * ever lowers the loads.
 */
export function parseUploadCapacity(raw: string | null, errors: string[]): 'measured' | 'fixed' | undefined {
  if (raw === null || raw.trim() === '') return undefined;
  const value = raw.trim();
  if (value === 'measured' || value === 'fixed') return value;
  errors.push(`upload-capacity="${raw}" must be measured or fixed; using measured`);
  return undefined;
}

/**
 * The `packet-repair` attribute: `segment` (the session's repair of whole segments) or `engine` (the
 * engine's deadline-aware packet repair; see MeshSessionOptions.packetRepair). Anything else is
 * reported and the default is used: either path is safe, the loader's origin fetch backs both.
 */
export function parsePacketRepair(raw: string | null, errors: string[]): 'engine' | 'segment' | undefined {
  if (raw === null || raw.trim() === '') return undefined;
  const value = raw.trim();
  if (value === 'engine' || value === 'segment') return value;
  errors.push(`packet-repair="${raw}" must be engine or segment; using the default`);
  return undefined;
}

/**
 * The `max-upload-kbps` attribute: an upload cap in kbit/s (a non-negative number, 0: receive-only).
 * Undefined when absent, null (with a message) when bad: the mesh is then off, since a viewer who
 * set a cap must not upload uncapped because of a typo.
 */
export function parseMaxUploadKbps(raw: string | null, errors: string[]): number | null | undefined {
  if (raw === null || raw.trim() === '') return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0 || value > MAX_UPLOAD_LIMIT_KBPS) {
    errors.push(
      `max-upload-kbps="${raw}" is not a number of kbit/s in 0‥${MAX_UPLOAD_LIMIT_KBPS}; playing from the origin only`,
    );
    return null;
  }
  return value;
}

function emptyStats(stream: string): MeshStats {
  return {
    stream,
    peerId: null,
    sourceId: null,
    trackerConnected: false,
    trackerState: 'idle',
    trackerReconnects: 0,
    trackerDisconnectedMs: 0,
    trackerLastOutageMs: null,
    peerIdChanges: 0,
    trackerSignalsDropped: 0,
    heldPacketsDropped: 0,
    forwardsDropped: 0,
    peers: 0,
    bytesFromMesh: 0,
    bytesFromOrigin: 0,
    meshShare: 0,
    segmentsFromMesh: 0,
    segmentsFromOrigin: 0,
    startupSegmentsFromMesh: 0,
    startupSegmentsFromOrigin: 0,
    welcomeAfterMs: null,
    firstDialAfterMs: null,
    firstLinkAfterMs: null,
    segmentsKeptFromOrigin: 0,
    partsFromMesh: 0,
    partsFromOrigin: 0,
    packetSignaturesVerified: 0,
    packetSignaturesForged: 0,
    segmentsCompletedFromOrigin: 0,
    uploadBytes: 0,
    load: 0,
    targetLoad: 0,
    maxLoad: 0,
    uploadCapacityKbps: null,
    uploadCapacitySource: 'fixed',
    // No session: nothing is uploaded whatever the attribute says (meshEnabled is false).
    upload: 'auto',
    receiveOnlyReasons: [],
    slices: [],
    stalls: 0,
    stallMs: 0,
    verificationFailures: 0,
    forgedPackets: 0,
    forgedSequences: 0,
    parentsDistrusted: 0,
    announcementsFromPeers: 0,
    announcementsForwarded: 0,
    forgedAnnouncements: 0,
    peerAnnouncementsRateLimited: 0,
    peerAnnouncementsRefused: 0,
    injectedLosses: 0,
    peersCutOff: 0,
    bytesFromRepair: 0,
    bytesFromPacketRepair: 0,
    repairRequests: 0,
    repairsReasked: 0,
    repairPacketsServed: 0,
    packetRepair: 'segment',
    repairPacketsFromPeers: 0,
    repairPacketsFromOrigin: 0,
    repairOriginBytes: 0,
    repairOriginRefused: 0,
    repairPacketsExpired: 0,
    engineRepairCounters: null,
    peerLinks: [],
    peersByRoute: { host: 0, srflx: 0, prflx: 0, relay: 0 },
    relayedBytes: 0,
    connectFailures: 0,
    idleLinksClosed: 0,
    traffic: {},
    transportBytesSent: 0,
    transportBytesReceived: 0,
  };
}

// Importing the SDK where there is no DOM (SSR, Node tests of the index) must not throw; the element
// is only defined where customElements exists.
const ElementBase: typeof HTMLElement =
  typeof HTMLElement === 'undefined' ? (Object as unknown as typeof HTMLElement) : HTMLElement;

/**
 * `<mesh-player src tracker stream token ice-servers ice-transport-policy target-load max-load
 * upload-capacity packet-repair max-upload-kbps upload public-key live-sync autoplay muted controls>`.
 * Events: 'stats' (CustomEvent<MeshPlayerStats>, every second), 'peers' (CustomEvent<{peers}>),
 * 'error' (CustomEvent<MeshPlayerErrorDetail>), 'trackerdisconnected', 'trackerreconnected' and
 * 'connection-failed' (the session's, passed on).
 */
export class MeshPlayer extends ElementBase {
  static get observedAttributes(): readonly string[] {
    return OBSERVED;
  }

  readonly #video: HTMLVideoElement;
  #hls: Hls | null = null;
  #session: MeshSession | null = null;
  #originOnly = new OriginOnly();
  #provider: SegmentProvider = this.#originOnly;
  #stream = '';
  #statsTimer: ReturnType<typeof setInterval> | null = null;
  #retryTimer: ReturnType<typeof setTimeout> | null = null;
  #restartQueued = false;
  #connected = false;
  /** Tears down the listeners of the current pipeline. */
  #teardown: (() => void)[] = [];
  #playingSn: number | null = null;
  #playingFragEndS = 0;
  #playingFragDurationS = 0;
  #startedPlaying = false;
  #stallStartMs: number | null = null;
  #stalls = 0;
  #stallMs = 0;
  #playlistTiming = { held: 0, heldFound: 0, heldMs: 0, stepped: 0, steppedMs: 0 };
  #lastError: MeshPlayerErrorDetail | null = null;
  #meshOffReason: MeshPlayerStats['meshOffReason'] = null;
  #playback: MeshPlayerStats['playback'] = 'none';

  constructor() {
    super();
    const root = this.attachShadow({ mode: 'open' });
    const style = document.createElement('style');
    style.textContent =
      ':host{display:block;position:relative;background:#000}' +
      ':host([hidden]){display:none}' +
      'video{display:block;width:100%;height:100%;background:#000}';
    this.#video = document.createElement('video');
    this.#video.playsInline = true;
    root.append(style, this.#video);
  }

  /** The element's <video> (its currentTime, buffered ranges, play()…). */
  get video(): HTMLVideoElement {
    return this.#video;
  }

  /** The hls.js instance of the current pipeline (null before connecting or with native HLS). */
  get hls(): Hls | null {
    return this.#hls;
  }

  /** The mesh session, or null when playing from the origin only. */
  get session(): MeshSession | null {
    return this.#session;
  }

  /** The last error reported with an 'error' event, for listeners attached late. */
  get lastError(): MeshPlayerErrorDetail | null {
    return this.#lastError;
  }

  get stats(): MeshPlayerStats {
    let base = emptyStats(this.#stream);
    if (this.#session !== null) {
      try {
        base = this.#session.stats();
      } catch {
        // A session that cannot report yet must not break the page's stats display.
      }
    } else {
      const origin = this.#originOnly;
      base = {
        ...base,
        bytesFromOrigin: origin.bytesFromOrigin,
        segmentsFromOrigin: origin.segmentsFromOrigin,
        startupSegmentsFromOrigin: Math.min(STARTUP_SEGMENTS, origin.segmentsFromOrigin),
        partsFromOrigin: origin.partsFromOrigin,
      };
    }
    const video = this.#video;
    return {
      ...base,
      // The player sees every stall itself; the session only hears of the ended ones.
      stalls: this.#stalls,
      stallMs: this.#stallMs + (this.#stallStartMs === null ? 0 : performance.now() - this.#stallStartMs),
      currentTime: video.currentTime,
      bufferAheadMs: this.#bufferAheadMs(false),
      playing: !video.paused && !video.ended && this.#stallStartMs === null && video.readyState > 2,
      liveDelayMs: this.#liveDelayMs(),
      meshEnabled: this.#session !== null,
      meshOffReason: this.#meshOffReason,
      playback: this.#playback,
      playlistReloadsHeld: this.#playlistTiming.held,
      playlistReloadsHeldFound: this.#playlistTiming.heldFound,
      playlistHeldMs: Math.round(this.#playlistTiming.heldMs),
      playlistReloadsStepped: this.#playlistTiming.stepped,
      playlistSteppedMs: Math.round(this.#playlistTiming.steppedMs),
    };
  }

  connectedCallback(): void {
    this.#connected = true;
    this.#applyVideoFlags();
    this.#start();
  }

  disconnectedCallback(): void {
    this.#connected = false;
    this.#stop();
  }

  attributeChangedCallback(name: string, oldValue: string | null, newValue: string | null): void {
    if (oldValue === newValue) return;
    if (VIDEO_FLAGS.has(name)) {
      this.#applyVideoFlags();
      return;
    }
    if (!this.#connected || this.#restartQueued) return;
    // Several attributes set one after another make one restart.
    this.#restartQueued = true;
    queueMicrotask(() => {
      this.#restartQueued = false;
      if (!this.#connected) return;
      this.#stop();
      this.#start();
    });
  }

  #applyVideoFlags(): void {
    const video = this.#video;
    video.controls = this.hasAttribute('controls');
    // The property, not only the attribute: autoplay policies read the muted state.
    video.muted = this.hasAttribute('muted');
    video.defaultMuted = video.muted;
    video.autoplay = this.hasAttribute('autoplay');
  }

  #start(): void {
    const attributes = parseAttributes((name) => this.getAttribute(name));
    for (const message of attributes.errors) this.#reportError({ code: 'config', message });
    const src = attributes.src;
    this.#stream = attributes.mesh?.stream ?? this.getAttribute('stream') ?? '';
    this.#resetPlaybackState();
    this.#statsTimer = setInterval(() => {
      this.dispatchEvent(new CustomEvent<MeshPlayerStats>('stats', { detail: this.stats }));
    }, STATS_INTERVAL_MS);
    this.#watchVideo();
    this.#meshOffReason = attributes.mesh === null && this.hasAttribute('tracker') ? 'config' : null;
    this.#playback = 'none';
    if (src === null || src === '') return;

    if (!Hls.isSupported()) {
      // Older iOS Safari has neither MSE nor ManagedMediaSource but plays HLS itself; the mesh
      // feeds hls.js, so such a browser plays from the origin.
      if (attributes.mesh !== null) {
        this.#meshOffReason = 'no-mse';
        this.#reportError({
          code: 'unsupported',
          message:
            'this browser has neither MediaSource nor ManagedMediaSource: the mesh is off and the video plays HLS itself from the origin',
        });
      }
      if (this.#video.canPlayType('application/vnd.apple.mpegurl') !== '') {
        this.#playback = 'native';
        this.#video.src = src;
        this.#autoplay();
      } else {
        this.#reportError({ code: 'unsupported', message: 'this browser can play neither MSE nor HLS' });
      }
      return;
    }

    this.#playback = 'hls.js';
    if (attributes.mesh !== null) {
      if (typeof RTCPeerConnection === 'undefined') {
        this.#meshOffReason = 'no-webrtc';
        this.#reportError({
          code: 'unsupported',
          message: 'this browser has no WebRTC (RTCPeerConnection): the mesh is off, playing from the origin',
        });
      } else this.#connectSession(attributes.mesh);
    }
    const provider = this.#provider;
    /** The target duration of the last media playlist loaded, s (null before the first). */
    let targetDurationS: number | null = null;
    const hls = new Hls({
      // hls.js turns LL-HLS on by default; here it is the author's choice (`low-latency`).
      lowLatencyMode: attributes.lowLatency,
      maxLiveSyncPlaybackRate: attributes.catchUpRate,
      ...(attributes.liveSyncSegments === null ? {} : { liveSyncDurationCount: attributes.liveSyncSegments }),
      fLoader: createMeshFragmentLoader(provider, {
        // Before the first frame only the first segment loaded counts as buffered (see
        // #bufferAheadMs), and with nothing buffered a whole segment waits for the mesh at most the
        // loader's startupWaitMs (300 ms). An LL player starts at PART-HOLD-BACK (1.5 s) from the
        // edge, where a 1.5 s wait was the whole of it (startup p95 3.5 s against http's 1.5 s,
        // bench:compare ll, N = 8): there nothing counts before the first frame.
        bufferAheadMs: () => this.#bufferAheadMs(!attributes.lowLatency),
      }),
      // Live playlist reloads in step with the mesh (playlist-loader.ts): outside LL-HLS, hls.js
      // would learn of a segment the mesh already holds up to a target duration late.
      pLoader: createMeshPlaylistLoader(provider, {
        bufferAheadMs: () => this.#bufferAheadMs(false),
        onHold: (heldMs, found) => {
          this.#playlistTiming.held++;
          if (found) this.#playlistTiming.heldFound++;
          this.#playlistTiming.heldMs += heldMs;
        },
        onMediaPlaylist: (edge) => {
          targetDurationS = edge.targetDurationMs / 1000;
          // After the first frame only: the player starts at hls.js's own position (see below).
          if (this.#startedPlaying) this.#applyLiveMargin(targetDurationS, attributes);
        },
      }),
    });
    this.#hls = hls;
    // The margin is built from the first frame on: one segment behind, the first segment after it
    // is the likeliest to come late (the viewer's trees are still forming), and 0.95× gains 100 ms
    // by then (8 viewers, `low`: first-cycle stalls of 2–27 ms).
    const onFirstFrame = (): void => {
      if (targetDurationS !== null) this.#applyLiveMargin(targetDurationS, attributes);
    };
    this.#video.addEventListener('playing', onFirstFrame, { once: true });
    this.#teardown.push(() => {
      this.#video.removeEventListener('playing', onFirstFrame);
    });
    hls.on(Hls.Events.FRAG_CHANGED, (_event, data: FragChangedData) => {
      const frag = data.frag;
      this.#playingSn = typeof frag.sn === 'number' ? frag.sn : null;
      this.#playingFragEndS = frag.end;
      this.#playingFragDurationS = frag.duration;
    });
    // hls.js carries `requestScheduled` over to the next reload's schedule (playlist-loader.ts).
    hls.on(Hls.Events.LEVEL_LOADED, (_event, data: LevelLoadedData) => {
      const earlierByMs = stepReloadSchedule(data.details, provider);
      if (earlierByMs === 0) return;
      this.#playlistTiming.stepped++;
      this.#playlistTiming.steppedMs += earlierByMs;
    });
    hls.on(Hls.Events.MANIFEST_PARSED, () => {
      this.#autoplay();
    });
    hls.on(Hls.Events.ERROR, (_event, data: ErrorData) => {
      this.#onHlsError(hls, data);
    });
    const marginBuildRate = attributes.liveMarginMs > 0 ? MARGIN_BUILD_RATE : 1;
    if (!attributes.lowLatency && (attributes.catchUpRate > 1 || marginBuildRate < 1))
      this.#catchUp(hls, attributes.catchUpRate, marginBuildRate);
    hls.loadSource(src);
    hls.attachMedia(this.#video);
  }

  /**
   * Outside LL mode, at least a target duration plus `live-margin-ms` from the edge
   * (liveSyncWithMarginS), set as hls.js's target latency once playback has started: hls.js picks
   * the start position from it on its first playlist, and a margin there would start in the segment
   * before the newest, one more start-up segment from the origin. The rate controller (#catchUp)
   * builds the margin by playing at MARGIN_BUILD_RATE. Set on each playlist before hls.js reads it, so
   * a rendition with another target duration moves the target with it.
   */
  #applyLiveMargin(targetDurationS: number, attributes: ParsedAttributes): void {
    const hls = this.#hls;
    if (hls === null || attributes.lowLatency || attributes.liveSyncSegments === null) return;
    // hls.config.liveSyncDuration (s) outranks liveSyncDurationCount while set (undefined: the
    // count rules). Set directly, not through hls.targetLatency, whose setter also forgets hls.js's
    // count of stalls.
    const targetS =
      liveSyncWithMarginS(attributes.liveSyncSegments, targetDurationS, attributes.liveMarginMs) ?? undefined;
    if (hls.config.liveSyncDuration !== targetS) hls.config.liveSyncDuration = targetS;
  }

  /**
   * Outside LL mode, play faster while behind the live position (live-catch-up.ts; hls.js does it in
   * LL mode), and slower while ahead of a live margin hls.js's target latency includes
   * (#applyLiveMargin).
   */
  #catchUp(hls: Hls, maxRate: number, marginBuildRate: number): void {
    const video = this.#video;
    const onTimeUpdate = (): void => {
      if (this.#hls !== hls || video.paused || this.#stallStartMs !== null) return;
      const rate = liveCatchUpRate({
        latencyS: hls.latency,
        targetLatencyS: hls.targetLatency,
        bufferAheadS: this.#bufferAheadMs(false) / 1000,
        maxRate,
        minRate: marginBuildRate,
        // Only while hls.js's target includes the margin (#applyLiveMargin).
        buildMargin: hls.config.liveSyncDuration !== undefined,
        currentRate: video.playbackRate,
      });
      if (rate !== null) video.playbackRate = rate;
    };
    video.addEventListener('timeupdate', onTimeUpdate);
    this.#teardown.push(() => {
      video.removeEventListener('timeupdate', onTimeUpdate);
      if (video.playbackRate === maxRate || video.playbackRate === marginBuildRate) video.playbackRate = 1;
    });
  }

  #connectSession(options: MeshSessionOptions): void {
    let session: MeshSession;
    try {
      // Test faults attached to this element (internal: `@chunkycast/sdk/testing`) go to the session.
      session = MeshSession.connect(withFaults({ ...options }, faultsOf(this)));
    } catch (error) {
      this.#meshOffReason = 'config';
      this.#reportError({ code: 'config', message: `mesh off: ${String(error)}` });
      return;
    }
    this.#session = session;
    this.#provider = session;
    const onPeers = (event: Event): void => {
      const detail: unknown = event instanceof CustomEvent ? event.detail : undefined;
      this.dispatchEvent(new CustomEvent('peers', { detail }));
    };
    const onError = (event: Event): void => {
      const detail: unknown = event instanceof CustomEvent ? event.detail : undefined;
      if (detail instanceof MeshError)
        this.#reportError({
          code: detail.code,
          message: detail.message,
          ...(detail.trackerCode === undefined ? {} : { trackerCode: detail.trackerCode }),
        });
      else this.#reportError({ code: 'peer', message: String(detail) });
    };
    const onTracker = (event: Event): void => {
      const detail: unknown = event instanceof CustomEvent ? event.detail : undefined;
      this.dispatchEvent(new CustomEvent(event.type, { detail }));
    };
    session.addEventListener('peers', onPeers);
    session.addEventListener('error', onError);
    session.addEventListener('trackerdisconnected', onTracker);
    session.addEventListener('trackerreconnected', onTracker);
    session.addEventListener('connection-failed', onTracker);
    this.#teardown.push(() => {
      session.removeEventListener('peers', onPeers);
      session.removeEventListener('error', onError);
      session.removeEventListener('trackerdisconnected', onTracker);
      session.removeEventListener('trackerreconnected', onTracker);
      session.removeEventListener('connection-failed', onTracker);
    });
  }

  #watchVideo(): void {
    const video = this.#video;
    const onPlaying = (): void => {
      this.#startedPlaying = true;
      if (this.#stallStartMs === null) return;
      const ms = performance.now() - this.#stallStartMs;
      this.#stallStartMs = null;
      this.#stalls++;
      this.#stallMs += ms;
      this.#provider.noteStall(ms);
    };
    const onWaiting = (): void => {
      // Before the first frame it is startup, and a seek's wait is the viewer's doing: not stalls.
      if (!this.#startedPlaying || video.seeking || this.#stallStartMs !== null) return;
      this.#stallStartMs = performance.now();
    };
    video.addEventListener('playing', onPlaying);
    video.addEventListener('waiting', onWaiting);
    this.#teardown.push(() => {
      video.removeEventListener('playing', onPlaying);
      video.removeEventListener('waiting', onWaiting);
    });
  }

  #autoplay(): void {
    if (!this.hasAttribute('autoplay')) return;
    this.#video.play().catch((error: unknown) => {
      // Browsers refuse unmuted autoplay without a gesture; the controls still let the viewer start.
      if (error instanceof DOMException && error.name === 'NotAllowedError') return;
      if (error instanceof DOMException && error.name === 'AbortError') return;
      this.#reportError({ code: 'playback', message: `play() failed: ${String(error)}` });
    });
  }

  #onHlsError(hls: Hls, data: ErrorData): void {
    if (!data.fatal) return;
    this.#reportError({ code: 'playback', message: `hls.js ${data.type}: ${data.details}` });
    // The recovery hls.js documents: restart loading on network errors, recover media errors.
    if (data.type === Hls.ErrorTypes.NETWORK_ERROR) {
      if (this.#retryTimer !== null) clearTimeout(this.#retryTimer);
      this.#retryTimer = setTimeout(() => {
        this.#retryTimer = null;
        if (this.#hls === hls) hls.startLoad();
      }, NETWORK_RETRY_MS);
    } else if (data.type === Hls.ErrorTypes.MEDIA_ERROR) {
      hls.recoverMediaError();
    }
  }

  #reportError(detail: MeshPlayerErrorDetail): void {
    this.#lastError = detail;
    // Asynchronously: errors found while the element upgrades would otherwise fire before the page
    // had a chance to add its listener.
    setTimeout(() => {
      this.dispatchEvent(new CustomEvent<MeshPlayerErrorDetail>('error', { detail }));
    }, 0);
  }

  #resetPlaybackState(): void {
    this.#playingSn = null;
    this.#startedPlaying = false;
    this.#stallStartMs = null;
  }

  #stop(): void {
    for (const undo of this.#teardown) undo();
    this.#teardown = [];
    if (this.#statsTimer !== null) clearInterval(this.#statsTimer);
    this.#statsTimer = null;
    if (this.#retryTimer !== null) clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
    this.#hls?.destroy();
    this.#hls = null;
    this.#session?.close();
    this.#session = null;
    this.#originOnly = new OriginOnly();
    this.#provider = this.#originOnly;
    const video = this.#video;
    video.removeAttribute('src');
    video.load();
  }

  #bufferAheadMs(startsAtFirstRange: boolean): number {
    const video = this.#video;
    const now = video.currentTime;
    const ranges = video.buffered;
    for (let i = 0; i < ranges.length; i++) {
      if (ranges.start(i) - BUFFER_TOLERANCE_S <= now && now <= ranges.end(i)) {
        return Math.max(0, (ranges.end(i) - now) * 1000);
      }
    }
    // Before the first frame the playhead is not in the buffer yet, and hls.js asks for the second
    // segment as soon as the first is in. It starts playing at its live sync position, which a whole
    // number of segments behind the edge is the start of the first segment it loaded: that segment
    // is ahead. (Counted as nothing, the second segment's mesh wait was the 300 ms startup wait,
    // shorter than a joining viewer's first data channel takes to open.) Not in LL-HLS, whose start
    // (PART-HOLD-BACK from the edge) falls inside a segment: there startup stays the origin's.
    if (startsAtFirstRange && !this.#startedPlaying && ranges.length > 0)
      return (ranges.end(0) - ranges.start(0)) * 1000;
    return 0;
  }

  #liveDelayMs(): number | null {
    const sn = this.#playingSn;
    const delay =
      sn === null
        ? null
        : liveDelayMs({
            nowMs: Date.now(),
            currentTimeS: this.#video.currentTime,
            fragStartS: this.#playingFragEndS - this.#playingFragDurationS,
            fragDurationS: this.#playingFragDurationS,
            publishedAtMs: this.#provider.publishedAtMs(sn),
            announcedDurationMs: this.#provider.segmentDurationMs?.(sn),
            previousPublishedAtMs: this.#provider.publishedAtMs(sn - 1),
          });
    if (delay !== null) return delay;
    // Without announcements, EXT-X-PROGRAM-DATE-TIME (if the playlist has it) gives the same.
    const playingDate = this.#hls?.playingDate;
    return playingDate ? Date.now() - playingDate.getTime() : null;
  }
}

/** What {@link liveDelayMs} needs: the fragment at the playhead and its segment's announcements. */
export interface LiveDelayInput {
  readonly nowMs: number;
  readonly currentTimeS: number;
  /** Where hls.js's fragment at the playhead starts on the media timeline, s. */
  readonly fragStartS: number;
  /** Its duration as hls.js reported it when the playhead entered it (in LL mode, maybe a part of it). */
  readonly fragDurationS: number;
  /** When the packager finished that segment (its announcement), Unix ms. */
  readonly publishedAtMs: number | undefined;
  /** Its duration as announced, ms. */
  readonly announcedDurationMs: number | undefined;
  /** When the packager finished the segment before it. */
  readonly previousPublishedAtMs: number | undefined;
}

/**
 * Live delay, ms: how long ago the media at the playhead was captured, assuming a real-time
 * packager. A finished segment's media ends when it was published, so the playhead's was captured
 * the rest of the segment earlier. The rest is counted against the announced duration: an LL player
 * enters a segment while it is written, and hls.js's fragment then ends where the parts listed so
 * far end (the figure was up to a segment short, e2e and bench:compare ll). A segment still being
 * written began where the previous one, published, ended. Null when neither is announced.
 */
export function liveDelayMs(input: LiveDelayInput): number | null {
  const playedS = Math.max(input.currentTimeS - input.fragStartS, 0);
  if (input.publishedAtMs !== undefined) {
    const durationS =
      input.announcedDurationMs === undefined ? input.fragDurationS : input.announcedDurationMs / 1000;
    const remainingS = Math.min(Math.max(durationS - playedS, 0), durationS);
    return input.nowMs - input.publishedAtMs + remainingS * 1000;
  }
  if (input.previousPublishedAtMs !== undefined)
    return input.nowMs - input.previousPublishedAtMs - playedS * 1000;
  return null;
}

/** Defines `<mesh-player>` once (the browser entry calls it on import). */
export function defineMeshPlayer(name = 'mesh-player'): void {
  if (typeof customElements === 'undefined' || customElements.get(name) !== undefined) return;
  customElements.define(name, MeshPlayer);
}
