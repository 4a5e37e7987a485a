// Live playlist reloads in step with the mesh: an hls.js playlist loader (`pLoader`) and the
// schedule it needs beside it.
//
// Why: outside LL-HLS, hls.js learns of a new segment only by reloading the playlist, on a schedule
// it keeps in `LevelDetails.requestScheduled`: set from its first request, then one segment
// duration on per reload that found a new segment (half a target duration after one that found
// nothing). Its reloads keep whatever phase the first one had against the packager's, so a viewer
// can learn of every segment up to a segment duration after it was listed. One segment behind live
// (`live-sync="1"`) its buffer is about one segment, and a segment learnt of that late is a stall,
// even when the mesh has held it since it was listed (the true source pushes packets while the
// packager writes and announces the segment once the playlist lists it). At 8 viewers that was most
// of the mesh's stalls at that position: 6 of 7 in the first 8 s
// (docs/results/low-latency/n8-low-ll-engine); the mesh held each new segment 0.2–1.8 s (mean per
// viewer) before hls.js asked for the playlist that listed it. A plain origin cannot be asked to
// block the reload (LL-HLS's `_HLS_msn` needs its support), but the mesh knows when a segment is
// out. So:
// - `stepReloadSchedule` moves hls.js's next reload to when the mesh should hold the next segment,
//   judged from when it came to hold the newest one (`reloadInStepMs`; the player calls it on each
//   LEVEL_LOADED, and hls.js carries `requestScheduled` over to the next reload's schedule);
// - the playlist loader holds a reload that would find nothing new (the mesh does not hold the
//   segment after the last one listed) until the mesh holds it, and then asks the origin, which
//   lists it by then (the true source announces a segment only once the playlist lists it). The
//   hold lasts at most half a target duration (what hls.js would wait after a reload that found
//   nothing, so the answer is never later than without the mesh), and ends 500 ms before the
//   buffer would run dry, so that a segment the origin lists can still come from the origin (but
//   not before the origin lists it: until then the origin's answer would be the same playlist). A
//   first version held without the buffer bound, and a viewer whose buffer ran out while the mesh
//   was a few hundred ms behind the origin stalled; one that asked the origin first and held only
//   an unchanged answer took two requests per segment (8 viewers, `low`, 180 s: 2276 playlist
//   requests against 1568, the true source's included).
import type {
  HlsConfig,
  Loader,
  LoaderCallbacks,
  LoaderConfiguration,
  LoaderStats,
  PlaylistLoaderConstructor,
  PlaylistLoaderContext,
} from 'hls.js';
import type { SegmentProvider } from './types.js';
import { emptyStats, type DefaultLoaderConstructor } from './loader.js';

export interface MeshPlaylistLoaderOptions {
  /**
   * Longest a reload is held waiting for the mesh, ms. Default: half the playlist's target duration,
   * the wait the HLS specification (RFC 8216 §6.3.4) asks of a client after a reload that found no
   * change, so a held reload is never answered later than hls.js's own retry would be.
   */
  readonly maxHoldMs?: number;
  /** The HTTP loader used for the origin. Default: the `loader` of the hls.js config. */
  readonly defaultLoader?: DefaultLoaderConstructor;
  /** Clock on the performance.now() scale (the scale of the provider's deadlines). */
  readonly nowMs?: () => number;
  /**
   * Milliseconds of media buffered ahead of the playhead: a hold ends
   * {@link DEFAULT_HOLD_BUFFER_MARGIN_MS} (`holdBufferMarginMs`) before the buffer would run dry.
   * Without it only `maxHoldMs` and half the target duration bound a hold.
   */
  readonly bufferAheadMs?: () => number;
  readonly holdBufferMarginMs?: number;
  /** A held reload went to the origin after `heldMs`; `found`: the mesh held the next segment by then. */
  readonly onHold?: (heldMs: number, found: boolean) => void;
  /**
   * A copy of the main rendition's media playlist came from the origin (no LL-HLS delivery
   * directives): called before hls.js parses it, so what it sets in hls.js applies to that load
   * (`<mesh-player>` sets its position from the target duration here: hls.js picks the start
   * position on the first LEVEL_LOADED, before a listener of the page could run).
   */
  readonly onMediaPlaylist?: (edge: PlaylistEdge) => void;
}

/** What a reload needs to know of the last copy of a media playlist. */
export interface PlaylistEdge {
  /** Media sequence number of the last segment listed (-1: none listed). */
  readonly lastSequence: number;
  readonly targetDurationMs: number;
  /** `#EXT-X-ENDLIST`: the stream ended, nothing more will be listed. */
  readonly ended: boolean;
  /** `CAN-BLOCK-RELOAD=YES`: the origin blocks reloads itself (LL-HLS), nothing to hold here. */
  readonly originBlocks: boolean;
}

/** Media playlists whose edge is remembered at once: one per rendition hls.js switches between. */
const MAX_PLAYLISTS_REMEMBERED = 16;

/** A live playlist is a few KB; anything much larger is not parsed here (and not held). */
const MAX_PLAYLIST_CHARS = 1 << 20;

/**
 * The edge of an HLS media playlist (RFC 8216 §4.3.3): its last media sequence number, target
 * duration and whether it ended. Null for a multivariant playlist, text that is not a playlist, or
 * one too large to scan.
 */
export function playlistEdge(text: string): PlaylistEdge | null {
  if (text.length > MAX_PLAYLIST_CHARS || !text.startsWith('#EXTM3U')) return null;
  let mediaSequence = 0;
  let segments = 0;
  let targetDurationS = Number.NaN;
  let ended = false;
  let originBlocks = false;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line.startsWith('#EXT')) continue;
    if (line.startsWith('#EXTINF:')) segments++;
    else if (line.startsWith('#EXT-X-MEDIA-SEQUENCE:')) mediaSequence = Number(line.slice(22));
    else if (line.startsWith('#EXT-X-TARGETDURATION:')) targetDurationS = Number(line.slice(22));
    else if (line === '#EXT-X-ENDLIST') ended = true;
    else if (line.startsWith('#EXT-X-SERVER-CONTROL:'))
      originBlocks = /(^|[:,])CAN-BLOCK-RELOAD=YES/.test(line);
    else if (line.startsWith('#EXT-X-STREAM-INF:')) return null;
  }
  if (!Number.isSafeInteger(mediaSequence) || mediaSequence < 0) return null;
  if (!(targetDurationS > 0 && Number.isFinite(targetDurationS))) return null;
  return {
    lastSequence: mediaSequence + segments - 1,
    targetDurationMs: targetDurationS * 1000,
    ended,
    originBlocks,
  };
}

/**
 * hls.js's context types (its LoaderContextType values) of the main rendition's playlist: the mesh
 * carries that rendition's segments, not an audio or subtitle track's.
 */
const MAIN_PLAYLISTS: ReadonlySet<string> = new Set(['manifest', 'level']);

/**
 * Whether a load of this playlist could be held: the main rendition's, without LL-HLS delivery
 * directives (with them hls.js already asks the origin to block the reload).
 */
function mayHold(context: PlaylistLoaderContext): boolean {
  return (
    MAIN_PLAYLISTS.has(context.type) &&
    context.deliveryDirectives === null &&
    !/[?&]_HLS_(msn|part)=/.test(context.url)
  );
}

/**
 * Buffer a held reload leaves for the playlist's and the segment's fetch: the hold ends this long
 * before the buffer would run dry, so a segment the origin lists can still come from the origin.
 */
export const DEFAULT_HOLD_BUFFER_MARGIN_MS = 500;

/** A hold past its buffer bound, waiting for the origin to list the segment, looks this often. */
const ANNOUNCEMENT_POLL_MS = 50;

/**
 * Returns a playlist-loader class for hls.js's `pLoader` config. A reload of a live media playlist
 * whose next segment the mesh does not hold yet waits for it, within
 * {@link MeshPlaylistLoaderOptions.maxHoldMs} and what is buffered, before going to the origin. The
 * first load of a playlist, and every load the provider cannot help with, goes to the origin at once.
 */
export function createMeshPlaylistLoader(
  provider: SegmentProvider,
  options: MeshPlaylistLoaderOptions = {},
): PlaylistLoaderConstructor {
  const nowMs = options.nowMs ?? ((): number => performance.now());
  /** Whether the origin lists this segment (the provider has its announcement); true if it cannot tell. */
  const originLists = (sequence: number): boolean => provider.segmentAnnounced?.(sequence) ?? true;
  /** The last copy of each media playlist loaded, by URL: hls.js makes a loader per request. */
  const edges = new Map<string, PlaylistEdge>();

  /**
   * Where to wait and until when, or null: load at once. The hold ends at `capMs` (half a target
   * duration) in any case, and at `boundMs` (the buffer less its margin) once the origin lists the
   * segment: before that, the origin would answer with the playlist unchanged, and hls.js would then
   * wait half a target duration before asking again (a stall with a thin buffer: a viewer's first
   * reload, one segment behind, came 27 ms before the listing with 272 ms buffered and stalled).
   */
  const holdFor = (
    context: PlaylistLoaderContext,
  ): { sequence: number; capMs: number; boundMs: number } | null => {
    const edge = edges.get(context.url);
    if (
      provider.waitUntilHeld === undefined ||
      edge === undefined ||
      edge.ended ||
      edge.originBlocks ||
      !mayHold(context) ||
      provider.segmentHeldAtMs?.(edge.lastSequence + 1) !== undefined
    )
      return null;
    const sequence = edge.lastSequence + 1;
    const bufferAheadMs = options.bufferAheadMs?.() ?? Infinity;
    const capMs = Math.min(options.maxHoldMs ?? Infinity, edge.targetDurationMs / 2);
    const boundMs = bufferAheadMs - (options.holdBufferMarginMs ?? DEFAULT_HOLD_BUFFER_MARGIN_MS);
    if (capMs <= 0 || (boundMs <= 0 && originLists(sequence))) return null;
    return { sequence, capMs, boundMs };
  };

  /**
   * Remembers the playlist just loaded (its edge is what the next reload waits past). Only loads a
   * later one could hold: an LL-HLS reload's URL changes with every part (`_HLS_msn`), and
   * remembering those would grow the map for as long as the stream plays. A few renditions at most
   * are remembered, the oldest forgotten first.
   */
  const noteLoaded = (context: PlaylistLoaderContext, data: unknown): void => {
    const url = context.url;
    edges.delete(url);
    if (!mayHold(context)) return;
    const edge = typeof data === 'string' ? playlistEdge(data) : null;
    if (edge === null) return;
    options.onMediaPlaylist?.(edge);
    edges.set(url, edge);
    const oldest = edges.keys().next();
    if (edges.size > MAX_PLAYLISTS_REMEMBERED && oldest.done !== true) edges.delete(oldest.value);
  };

  return class MeshPlaylistLoader implements Loader<PlaylistLoaderContext> {
    context: PlaylistLoaderContext | null = null;
    private ownStats: LoaderStats = emptyStats();
    private origin: Loader<PlaylistLoaderContext> | null = null;
    private holdAbort: AbortController | null = null;
    private callbacks: LoaderCallbacks<PlaylistLoaderContext> | null = null;
    /** When hls.js asked (a held reload's stats start there: hls.js sees the whole wait). */
    private askedAtMs = 0;

    constructor(private readonly hlsConfig: HlsConfig) {}

    /** The origin loader's stats once it runs (hls.js reads them through the callbacks too). */
    get stats(): LoaderStats {
      return this.origin?.stats ?? this.ownStats;
    }

    load(
      context: PlaylistLoaderContext,
      config: LoaderConfiguration,
      callbacks: LoaderCallbacks<PlaylistLoaderContext>,
    ): void {
      if (this.context !== null) throw new Error('MeshPlaylistLoader can only be used once');
      this.context = context;
      this.callbacks = callbacks;
      this.askedAtMs = nowMs();
      const hold = holdFor(context);
      const waitUntilHeld = provider.waitUntilHeld?.bind(provider);
      if (hold === null || waitUntilHeld === undefined) {
        this.loadFromOrigin(config);
        return;
      }
      const holdAbort = new AbortController();
      this.holdAbort = holdAbort;
      const release = (found: boolean): void => {
        if (holdAbort.signal.aborted || this.callbacks === null) return;
        this.holdAbort = null;
        options.onHold?.(nowMs() - this.askedAtMs, found);
        this.loadFromOrigin(config);
      };
      const capAtMs = this.askedAtMs + hold.capMs;
      const boundAtMs = this.askedAtMs + hold.boundMs;
      const wait = (): void => {
        const now = nowMs();
        if (now >= capAtMs || (now >= boundAtMs && originLists(hold.sequence))) {
          release(false);
          return;
        }
        // Past the buffer bound, the announcement is looked for every ANNOUNCEMENT_POLL_MS.
        const untilMs = Math.min(capAtMs, now < boundAtMs ? boundAtMs : now + ANNOUNCEMENT_POLL_MS);
        waitUntilHeld(hold.sequence, untilMs, holdAbort.signal).then(
          (held) => {
            if (held) release(true);
            else if (!holdAbort.signal.aborted) wait();
          },
          // A failing provider must not cost the viewer the playlist: the origin still has it.
          () => {
            release(false);
          },
        );
      };
      wait();
    }

    abort(): void {
      if (this.holdAbort !== null) {
        this.holdAbort.abort();
        this.holdAbort = null;
        const callbacks = this.callbacks;
        this.callbacks = null;
        this.ownStats.aborted = true;
        if (this.context !== null) callbacks?.onAbort?.(this.ownStats, this.context, null);
        return;
      }
      this.origin?.abort();
    }

    destroy(): void {
      this.holdAbort?.abort();
      this.holdAbort = null;
      this.callbacks = null;
      this.origin?.destroy();
      this.origin = null;
    }

    getCacheAge(): number | null {
      return this.origin?.getCacheAge?.() ?? null;
    }

    getResponseHeader(name: string): string | null {
      return this.origin?.getResponseHeader?.(name) ?? null;
    }

    private loadFromOrigin(config: LoaderConfiguration): void {
      const context = this.context;
      const callbacks = this.callbacks;
      if (context === null || callbacks === null) return;
      const Origin = options.defaultLoader ?? this.hlsConfig.loader;
      const origin = new Origin(this.hlsConfig) as Loader<PlaylistLoaderContext>;
      this.origin = origin;
      origin.load(context, config, {
        ...callbacks,
        onSuccess: (response, stats, ctx, networkDetails) => {
          noteLoaded(ctx, response.data);
          // hls.js asked at askedAtMs: a held reload's wait is part of its load.
          stats.loading.start = Math.min(stats.loading.start, this.askedAtMs);
          callbacks.onSuccess(response, stats, ctx, networkDetails);
        },
      });
    }
  };
}

/**
 * How early a reload is scheduled before the mesh is expected to hold the next segment; the loader
 * holds a reload that comes early. Not 0: a reload that comes after the origin lists the segment
 * but before the mesh holds it has hls.js ask for the segment with a short buffer, and the fragment
 * loader then takes it from the origin rather than wait (8 viewers, `low`, 180 s: 2.03 stream
 * copies from the origin with 0, against 1.11 with 250 ms).
 */
export const RELOAD_LEAD_MS = 250;

export interface ReloadInStepInput {
  /** hls.js's next reload (`LevelDetails.requestScheduled`), performance.now() ms. */
  readonly scheduledMs: number;
  /** When the mesh came to hold the newest segment listed (same clock), if it does. */
  readonly heldAtMs: number | undefined;
  /** The next segment is due this long after the newest one: hls.js's reload interval, ms. */
  readonly intervalMs: number;
  /** Default {@link RELOAD_LEAD_MS}. */
  readonly leadMs?: number;
}

/**
 * When hls.js should next reload a live playlist it just loaded, to learn of the next segment about
 * when the mesh holds it: the newest segment's arrival in the mesh plus one interval, less a lead.
 * Null to leave hls.js's schedule alone: nothing known, or hls.js reloads that early already. Never
 * earlier than one interval before hls.js's own schedule (a reload stays one per segment).
 */
export function reloadInStepMs(input: ReloadInStepInput): number | null {
  if (input.heldAtMs === undefined || !(input.intervalMs > 0)) return null;
  const steppedMs = Math.max(
    input.heldAtMs + input.intervalMs - (input.leadMs ?? RELOAD_LEAD_MS),
    input.scheduledMs - input.intervalMs,
  );
  return steppedMs < input.scheduledMs ? steppedMs : null;
}

/** The fields of hls.js's `LevelDetails` that its reload schedule reads and sets. */
export interface ReloadSchedule {
  readonly live: boolean;
  readonly canBlockReload: boolean;
  /** The load that gave these details found a new segment. */
  readonly updated: boolean;
  readonly endSN: number;
  readonly targetduration: number;
  readonly fragments: readonly { readonly duration: number }[];
  requestScheduled: number;
}

/**
 * On hls.js's `LEVEL_LOADED`: moves the details' next reload (`requestScheduled`, which hls.js
 * carries over to its next schedule) into step with the mesh by {@link reloadInStepMs}. Only a live
 * playlist without blocking reloads that just found a new segment. Returns how many ms earlier the
 * reload now comes (0: left alone).
 */
export function stepReloadSchedule(
  details: ReloadSchedule,
  provider: Pick<SegmentProvider, 'segmentHeldAtMs'>,
): number {
  if (!details.live || details.canBlockReload || !details.updated) return 0;
  const lastDurationS = details.fragments.at(-1)?.duration ?? 0;
  const steppedMs = reloadInStepMs({
    scheduledMs: details.requestScheduled,
    heldAtMs: provider.segmentHeldAtMs?.(details.endSN),
    // hls.js's own interval near the live edge (computeReloadInterval).
    intervalMs:
      1000 *
      (lastDurationS > 0 && lastDurationS < details.targetduration ? lastDurationS : details.targetduration),
  });
  if (steppedMs === null) return 0;
  const earlierByMs = details.requestScheduled - steppedMs;
  details.requestScheduled = steppedMs;
  return earlierByMs;
}
