// The hls.js fragment loader (`fLoader`) that asks the mesh first and the origin second. It is a thin
// adapter: the session decides whether a segment is coming and verifies its bytes; this file only
// decides how long the player can afford to wait, and falls back to hls.js's own HTTP loader.
import type {
  FragmentLoaderConstructor,
  FragmentLoaderContext,
  HlsConfig,
  Loader,
  LoaderCallbacks,
  LoaderConfiguration,
  LoaderContext,
  LoaderResponse,
  LoaderStats,
} from 'hls.js';
import type { SegmentProvider } from './types.js';

/** A loader class hls.js could use for `loader`: its HTTP loader, or anything with the same shape. */
export type DefaultLoaderConstructor = new (config: HlsConfig) => Loader<LoaderContext>;

export interface MeshFragmentLoaderOptions {
  /**
   * Milliseconds of media buffered ahead of the playhead (the player reads its video's buffered
   * ranges). Without it the loader assumes startup (nothing buffered) for every segment.
   */
  readonly bufferAheadMs?: () => number;
  /** Buffer kept in reserve for the origin fetch after a mesh wait gives up. Default 1500 ms. */
  readonly safetyMarginMs?: number;
  /** Never wait for the mesh longer than this, whatever the buffer. Default 4000 ms. */
  readonly maxWaitMs?: number;
  /**
   * Wait allowed when nothing is buffered yet (startup, or after a seek). Default 300 ms: until the
   * video plays, every wait is added to the viewer's startup, and hls.js asks for the first two or
   * three segments back to back before it plays. At 1500 ms (the earlier default) a mesh viewer
   * started 0.5–2.8 s after opening against plain hls.js's 0.2–0.65 s (bench:compare default,
   * N = 8): a joining viewer's second segment, from before it joined, waited for a first data
   * channel that opened 0.4–2.2 s after the page.
   */
  readonly startupWaitMs?: number;
  /**
   * LL-HLS parts: buffer kept in reserve for the origin fetch of a part after a mesh wait gives
   * up. Default 500 ms (a part is small and the origin answers it at once; an LL player keeps only
   * 1–3 s of buffer, so the margin of whole segments would leave the mesh no time at all).
   */
  readonly partSafetyMarginMs?: number;
  /** Never wait for a part from the mesh longer than this. Default 1000 ms (two parts of 0.5 s). */
  readonly partMaxWaitMs?: number;
  /**
   * Never wait for a part longer than this multiple of its own duration. Default 2 (1 s for the
   * 0.5 s parts of the tracker's LL view, the same as partMaxWaitMs). hls.js loads parts one after
   * another, so a wait longer than the part plays drains the buffer; but a cap of half the part
   * (0.25 s) made things worse where it was tried (bench:compare ll, N = 8, a saturated 2-core
   * machine: 28 stalls and 2.05 stream copies against 18 and 1.37 with 1 s), because under that
   * load the browsers' mesh lags more than 0.25 s. Lower it where viewers have CPU to spare: the
   * mesh holds a part 33 ms (p50) to 167 ms (max) after the origin lists it (4 Node viewers).
   */
  readonly partWaitShareOfDuration?: number;
  /**
   * The HTTP loader used for the origin. Default: the `loader` of the hls.js config the fragment
   * loader is constructed with (hls.js's own XHR/fetch loader unless the page replaced it).
   */
  readonly defaultLoader?: DefaultLoaderConstructor;
  /** Clock on the performance.now() scale (the scale of `waitForSegment`'s deadline). */
  readonly nowMs?: () => number;
}

export const DEFAULT_SAFETY_MARGIN_MS = 1500;
export const DEFAULT_MAX_WAIT_MS = 4000;
export const DEFAULT_STARTUP_WAIT_MS = 300;
export const DEFAULT_PART_SAFETY_MARGIN_MS = 500;
export const DEFAULT_PART_MAX_WAIT_MS = 1000;
export const DEFAULT_PART_WAIT_SHARE_OF_DURATION = 2;

/**
 * How long the loader may wait for the mesh before asking the origin: what is buffered minus a
 * margin for the origin fetch itself, within [0, maxWaitMs]; `startupWaitMs` when nothing is
 * buffered (a small price at startup for what the mesh holds already or brings at once).
 */
export function meshWaitBudgetMs(bufferAheadMs: number, options: MeshFragmentLoaderOptions = {}): number {
  const safetyMarginMs = options.safetyMarginMs ?? DEFAULT_SAFETY_MARGIN_MS;
  const maxWaitMs = options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
  const startupWaitMs = options.startupWaitMs ?? DEFAULT_STARTUP_WAIT_MS;
  if (!Number.isFinite(bufferAheadMs) || bufferAheadMs <= 0) {
    return Math.max(0, Math.min(startupWaitMs, maxWaitMs));
  }
  return Math.max(0, Math.min(bufferAheadMs - safetyMarginMs, maxWaitMs));
}

/**
 * The mesh wait for an LL-HLS part of `partDurationMs`: the buffer minus a small margin, within
 * [0, partMaxWaitMs] and at most `partWaitShareOfDuration` times the part's own duration; none with
 * nothing buffered (startup is the origin's: the parts' playlist already holds the player at the
 * live edge, where the mesh has had no time to run ahead).
 */
export function partWaitBudgetMs(
  bufferAheadMs: number,
  partDurationMs: number,
  options: MeshFragmentLoaderOptions = {},
): number {
  const margin = options.partSafetyMarginMs ?? DEFAULT_PART_SAFETY_MARGIN_MS;
  const maxWaitMs = options.partMaxWaitMs ?? DEFAULT_PART_MAX_WAIT_MS;
  const share = options.partWaitShareOfDuration ?? DEFAULT_PART_WAIT_SHARE_OF_DURATION;
  if (!Number.isFinite(bufferAheadMs) || bufferAheadMs <= 0) return 0;
  const ofPart = Number.isFinite(partDurationMs) && partDurationMs > 0 ? partDurationMs * share : maxWaitMs;
  return Math.max(0, Math.min(bufferAheadMs - margin, maxWaitMs, ofPart));
}

/** Zeroed loader stats (hls.js fills its own on every load; a loader hands out its own object). */
export function emptyStats(): LoaderStats {
  return {
    aborted: false,
    loaded: 0,
    retry: 0,
    total: 0,
    chunkCount: 0,
    bwEstimate: 0,
    loading: { start: 0, first: 0, end: 0 },
    parsing: { start: 0, end: 0 },
    buffering: { start: 0, first: 0, end: 0 },
  };
}

function byteLengthOf(data: LoaderResponse['data'], stats: LoaderStats): number {
  if (data instanceof ArrayBuffer) return data.byteLength;
  if (ArrayBuffer.isView(data)) return data.byteLength;
  if (typeof data === 'string') return data.length;
  return Math.max(stats.loaded, stats.total);
}

type State = 'idle' | 'mesh' | 'origin' | 'done';

/**
 * Returns a fragment-loader class for hls.js's `fLoader` config. Media segments (numeric `sn`) the
 * provider expects are awaited from the mesh within the budget of {@link meshWaitBudgetMs}; on a
 * miss, an abort of the wait, or a segment the provider does not expect, the fragment is fetched by
 * the default HTTP loader. LL-HLS parts given as byte ranges of their segment are awaited the same
 * way within {@link partWaitBudgetMs} (the mesh has them as soon as their packets arrive, before
 * the segment is complete), each part falling back to the origin on its own. Init segments, parts
 * in files of their own and fragments whose IV sits in the payload go straight to the origin, and
 * their bytes are counted as origin bytes too (the origin served them, and the share of mesh bytes
 * should not look better than it is).
 */
export function createMeshFragmentLoader(
  provider: SegmentProvider,
  options: MeshFragmentLoaderOptions = {},
): FragmentLoaderConstructor {
  const nowMs = options.nowMs ?? ((): number => performance.now());

  /**
   * Whether this stream's parts are byte ranges of their segment's file (what the mesh holds), not
   * ranges of part files of their own: learned from a part whose segment hls.js already knows the
   * URL of (a listed one) and remembered, since the segment being written has no URL in hls.js yet.
   * Null until learned; false sticks (one packager, one way of cutting parts).
   */
  let partsAreSegmentRanges: boolean | null = null;
  const partIsRangeOfSegment = (context: FragmentLoaderContext): boolean => {
    const part = context.part;
    if (part === null) return false;
    if (context.frag.url !== '' && partsAreSegmentRanges !== false)
      partsAreSegmentRanges = part.url === context.frag.url;
    return partsAreSegmentRanges === true;
  };

  return class MeshFragmentLoader implements Loader<FragmentLoaderContext> {
    // hls.js keeps a reference to this object (frag.stats = loader.stats) before calling load(), so
    // it is filled in place, also with the origin loader's numbers on a fallback.
    stats: LoaderStats = emptyStats();
    context: FragmentLoaderContext | null = null;
    private state: State = 'idle';
    private callbacks: LoaderCallbacks<FragmentLoaderContext> | null = null;
    private waitAbort: AbortController | null = null;
    private origin: Loader<FragmentLoaderContext> | null = null;

    constructor(private readonly hlsConfig: HlsConfig) {}

    load(
      context: FragmentLoaderContext,
      config: LoaderConfiguration,
      callbacks: LoaderCallbacks<FragmentLoaderContext>,
    ): void {
      if (this.state !== 'idle') throw new Error('MeshFragmentLoader can only be used once');
      this.context = context;
      this.callbacks = callbacks;
      this.stats.loading.start = nowMs();
      const sn = context.frag.sn;
      // A part is a byte range of its segment's file when hls.js asks for a range of the segment's URL.
      const range =
        context.part !== null && context.rangeEnd !== undefined && context.rangeEnd > 0
          ? { start: context.rangeStart ?? 0, end: context.rangeEnd }
          : null;
      const meshable =
        typeof sn === 'number' &&
        (context.part === null || (range !== null && partIsRangeOfSegment(context))) &&
        context.resetIV !== true &&
        provider.expectsSegment(sn);
      if (!meshable) {
        this.loadFromOrigin(config);
        return;
      }
      const bufferAheadMs = options.bufferAheadMs?.() ?? 0;
      const budgetMs =
        range === null
          ? meshWaitBudgetMs(bufferAheadMs, options)
          : partWaitBudgetMs(bufferAheadMs, (context.part?.duration ?? 0) * 1000, options);
      if (range !== null && budgetMs <= 0) {
        this.loadFromOrigin(config);
        return;
      }
      this.state = 'mesh';
      const waitAbort = new AbortController();
      this.waitAbort = waitAbort;
      const settle = (bytes: Uint8Array | null): void => {
        if (this.state !== 'mesh' || waitAbort.signal.aborted) return;
        if (bytes === null) this.loadFromOrigin(config);
        else this.deliverMeshBytes(sn, bytes, range !== null);
      };
      const deadlineMs = this.stats.loading.start + budgetMs;
      (range === null
        ? provider.waitForSegment(sn, deadlineMs, waitAbort.signal, context.url)
        : provider.waitForRange(sn, range.start, range.end, deadlineMs, waitAbort.signal)
      ).then(settle, () => {
        // A failing provider must not cost the viewer the segment: the origin still has it.
        settle(null);
      });
    }

    abort(): void {
      const state = this.state;
      if (state === 'done' || state === 'idle') return;
      this.stats.aborted = true;
      this.waitAbort?.abort();
      if (state === 'origin' && this.origin !== null) {
        // The origin loader reports the abort through onAbort, which forwards it (see wrap below).
        this.origin.abort();
        if (this.state !== 'done') this.finish()?.onAbort?.(this.stats, this.requireContext(), null);
        return;
      }
      this.finish()?.onAbort?.(this.stats, this.requireContext(), null);
    }

    destroy(): void {
      this.waitAbort?.abort();
      this.origin?.destroy();
      this.origin = null;
      this.callbacks = null;
      this.context = null;
      this.state = 'done';
    }

    getCacheAge(): number | null {
      return this.origin?.getCacheAge?.() ?? null;
    }

    getResponseHeader(name: string): string | null {
      return this.origin?.getResponseHeader?.(name) ?? null;
    }

    /** Marks the load finished and hands out the callbacks once (later events are dropped). */
    private finish(): LoaderCallbacks<FragmentLoaderContext> | null {
      const callbacks = this.callbacks;
      this.state = 'done';
      this.callbacks = null;
      return callbacks;
    }

    private requireContext(): FragmentLoaderContext {
      if (this.context === null) throw new Error('MeshFragmentLoader has no context');
      return this.context;
    }

    private deliverMeshBytes(sequence: number, bytes: Uint8Array, part: boolean): void {
      const context = this.requireContext();
      // A copy, never a view of the session's buffer: hls.js may transfer the ArrayBuffer to its
      // transmuxer worker, which would detach bytes the session still serves to other viewers.
      const data = bytes.slice().buffer;
      const endMs = nowMs();
      const stats = this.stats;
      stats.loading.first = endMs;
      stats.loading.end = endMs;
      stats.loaded = data.byteLength;
      stats.total = data.byteLength;
      stats.chunkCount = 1;
      provider.noteMeshSegment(sequence, part);
      const callbacks = this.finish();
      if (callbacks === null) return;
      // Like hls.js's fetch loader with an unbounded high-water mark: the whole payload as one
      // progress chunk, then success (progressive mode reads the chunks, the rest reads success).
      callbacks.onProgress?.(stats, context, data, null);
      callbacks.onSuccess({ url: context.url, data, code: 200 }, stats, context, null);
    }

    private loadFromOrigin(config: LoaderConfiguration): void {
      const context = this.requireContext();
      const callbacks = this.callbacks;
      if (callbacks === null) return;
      this.state = 'origin';
      const Origin = options.defaultLoader ?? this.hlsConfig.loader;
      const origin = new Origin(this.hlsConfig) as Loader<FragmentLoaderContext>;
      this.origin = origin;
      const copyStats = (from: LoaderStats): void => {
        // loading.start stays ours: hls.js measures the whole wait, mesh attempt included.
        const to = this.stats;
        to.aborted = from.aborted || to.aborted;
        to.loaded = from.loaded;
        to.total = from.total;
        to.retry = from.retry;
        to.chunkCount = from.chunkCount;
        to.bwEstimate = from.bwEstimate;
        if (from.loading.first > 0) to.loading.first = from.loading.first;
        if (from.loading.end > 0) to.loading.end = from.loading.end;
      };
      const live = (): boolean => this.state === 'origin' && this.origin === origin;
      origin.load(context, config, {
        onSuccess: (response, stats, ctx, networkDetails) => {
          if (!live()) return;
          copyStats(stats);
          provider.noteOriginSegment(byteLengthOf(response.data, stats), ctx.part !== null);
          // A copy now: hls.js may transfer the buffer to its transmuxer worker after onSuccess.
          if (typeof ctx.frag.sn === 'number' && ctx.part === null && response.data instanceof ArrayBuffer)
            provider.keepOriginSegment?.(ctx.frag.sn, new Uint8Array(response.data.slice(0)));
          this.finish()?.onSuccess(response, this.stats, ctx, networkDetails);
        },
        onError: (error, ctx, networkDetails, stats) => {
          if (!live()) return;
          copyStats(stats);
          this.finish()?.onError(error, ctx, networkDetails, this.stats);
        },
        onTimeout: (stats, ctx, networkDetails) => {
          if (!live()) return;
          copyStats(stats);
          this.finish()?.onTimeout(this.stats, ctx, networkDetails);
        },
        onAbort: (stats, ctx, networkDetails) => {
          if (!live()) return;
          copyStats(stats);
          this.stats.aborted = true;
          this.finish()?.onAbort?.(this.stats, ctx, networkDetails);
        },
        onProgress:
          callbacks.onProgress === undefined
            ? undefined
            : (stats, ctx, data, networkDetails): void => {
                if (!live()) return;
                copyStats(stats);
                callbacks.onProgress?.(this.stats, ctx, data, networkDetails);
              },
      });
    }
  };
}
