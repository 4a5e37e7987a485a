import { describe, expect, it } from 'vitest';
import type {
  FragmentLoaderContext,
  HlsConfig,
  Loader,
  LoaderCallbacks,
  LoaderConfiguration,
  LoaderContext,
  LoaderStats,
} from 'hls.js';
import { createMeshFragmentLoader, meshWaitBudgetMs, partWaitBudgetMs } from '../src/loader.js';
import type { MeshFragmentLoaderOptions } from '../src/loader.js';
import type { SegmentProvider } from '../src/types.js';

interface PendingWait {
  readonly sequence: number;
  readonly deadlineMs: number;
  readonly signal: AbortSignal | undefined;
  resolve(bytes: Uint8Array | null): void;
}

/** A mesh that has the segments it is given, and answers null at the deadline otherwise. */
class FakeProvider implements SegmentProvider {
  readonly expected = new Set<number>();
  readonly waits: PendingWait[] = [];
  readonly originBytes: number[] = [];
  readonly meshSequences: number[] = [];
  failWith: Error | null = null;

  waitForSegment(sequence: number, deadlineMs: number, signal?: AbortSignal): Promise<Uint8Array | null> {
    if (this.failWith !== null) return Promise.reject(this.failWith);
    return new Promise((resolve) => {
      const wait: PendingWait = { sequence, deadlineMs, signal, resolve };
      this.waits.push(wait);
      const timer = setTimeout(
        () => {
          resolve(null);
        },
        Math.max(0, deadlineMs - performance.now()),
      );
      signal?.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve(null);
      });
    });
  }
  readonly rangeWaits: (PendingWait & { readonly start: number; readonly end: number })[] = [];
  waitForRange(
    sequence: number,
    start: number,
    end: number,
    deadlineMs: number,
    signal?: AbortSignal,
  ): Promise<Uint8Array | null> {
    return new Promise((resolve) => {
      this.rangeWaits.push({ sequence, start, end, deadlineMs, signal, resolve });
      const timer = setTimeout(
        () => {
          resolve(null);
        },
        Math.max(0, deadlineMs - performance.now()),
      );
      signal?.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve(null);
      });
    });
  }
  /** The mesh completes the segment: every wait for it resolves with the bytes. */
  complete(sequence: number, bytes: Uint8Array): void {
    for (const wait of this.waits) if (wait.sequence === sequence) wait.resolve(bytes);
  }
  expectsSegment(sequence: number): boolean {
    return this.expected.has(sequence);
  }
  noteOriginSegment(bytes: number, part = false): void {
    if (part) this.originParts.push(bytes);
    this.originBytes.push(bytes);
  }
  readonly kept: { sequence: number; bytes: Uint8Array }[] = [];
  keepOriginSegment(sequence: number, bytes: Uint8Array): void {
    this.kept.push({ sequence, bytes });
  }
  readonly meshParts: number[] = [];
  readonly originParts: number[] = [];
  noteMeshSegment(sequence: number, part = false): void {
    if (part) this.meshParts.push(sequence);
    else this.meshSequences.push(sequence);
  }
  noteStall(_ms: number): void {}
  publishedAtMs(_sequence: number): number | undefined {
    return undefined;
  }
}

/** Stands in for hls.js's HTTP loader: the test decides when and how each request ends. */
class FakeOrigin implements Loader<LoaderContext> {
  static readonly instances: FakeOrigin[] = [];
  stats: LoaderStats = {
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
  context: LoaderContext | null = null;
  callbacks: LoaderCallbacks<LoaderContext> | null = null;
  aborts = 0;
  destroyed = false;
  constructor(readonly config: HlsConfig) {
    FakeOrigin.instances.push(this);
  }
  load(
    context: LoaderContext,
    _config: LoaderConfiguration,
    callbacks: LoaderCallbacks<LoaderContext>,
  ): void {
    this.context = context;
    this.callbacks = callbacks;
    this.stats.loading.start = performance.now();
  }
  respond(bytes: number): void {
    const now = performance.now();
    this.stats.loading.first = now;
    this.stats.loading.end = now;
    this.stats.loaded = bytes;
    this.stats.total = bytes;
    const context = this.context!;
    this.callbacks!.onSuccess({ url: context.url, data: new ArrayBuffer(bytes) }, this.stats, context, null);
  }
  abort(): void {
    this.aborts++;
    this.stats.aborted = true;
    this.callbacks?.onAbort?.(this.stats, this.context!, null);
  }
  destroy(): void {
    this.destroyed = true;
    this.callbacks = null;
  }
}

interface Recorded {
  readonly events: string[];
  readonly successes: { data: unknown; stats: LoaderStats }[];
  readonly progress: unknown[];
  readonly callbacks: LoaderCallbacks<FragmentLoaderContext>;
}

function record(withProgress = false): Recorded {
  const events: string[] = [];
  const successes: { data: unknown; stats: LoaderStats }[] = [];
  const progress: unknown[] = [];
  const callbacks: LoaderCallbacks<FragmentLoaderContext> = {
    onSuccess: (response, stats) => {
      events.push('success');
      successes.push({ data: response.data, stats });
    },
    onError: (error) => {
      events.push(`error ${error.code}`);
    },
    onTimeout: () => {
      events.push('timeout');
    },
    onAbort: () => {
      events.push('abort');
    },
  };
  if (withProgress) {
    callbacks.onProgress = (_stats, _context, data) => {
      events.push('progress');
      progress.push(data);
    };
  }
  return { events, successes, progress, callbacks };
}

// Only loadPolicy is current; hls.js still fills the deprecated fields, which the adapter ignores.
const loaderConfig = {
  loadPolicy: { maxTimeToFirstByteMs: 10_000, maxLoadTimeMs: 20_000, timeoutRetry: null, errorRetry: null },
} as LoaderConfiguration;

/**
 * An LL-HLS part: bytes [start, end) of segment `sn` (or a part in a file of its own). hls.js knows
 * no URL yet for a segment still being written (`inProgress`).
 */
function partContext(
  sn: number,
  start: number,
  end: number,
  ownFile = false,
  inProgress = false,
): FragmentLoaderContext {
  const url = `http://127.0.0.1/live/seg${sn}.ts`;
  return {
    url: ownFile ? `${url}.part` : url,
    responseType: 'arraybuffer',
    type: 'media-fragment',
    frag: { sn, url: inProgress ? '' : url },
    part: { url: ownFile ? `${url}.part` : url, duration: 0.5 },
    rangeStart: ownFile ? 0 : start,
    rangeEnd: ownFile ? 0 : end,
  } as unknown as FragmentLoaderContext;
}

function fragContext(sn: number | 'initSegment'): FragmentLoaderContext {
  return {
    url: `http://127.0.0.1/live/seg${sn}.ts`,
    responseType: 'arraybuffer',
    type: 'media-fragment',
    frag: { sn },
    part: null,
  } as unknown as FragmentLoaderContext;
}

/** What hls.js does: construct the fLoader with its config, then load one fragment. */
function start(
  provider: FakeProvider,
  sn: number | 'initSegment',
  options: MeshFragmentLoaderOptions = {},
  withProgress = false,
): { loader: Loader<FragmentLoaderContext>; rec: Recorded; originsBefore: number } {
  const MeshLoader = createMeshFragmentLoader(provider, { defaultLoader: FakeOrigin, ...options });
  const loader = new MeshLoader({} as HlsConfig);
  const rec = record(withProgress);
  const originsBefore = FakeOrigin.instances.length;
  loader.load(fragContext(sn), loaderConfig, rec.callbacks);
  return { loader, rec, originsBefore };
}

const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => {
    setTimeout(resolve, ms);
  });

describe('meshWaitBudgetMs', () => {
  it('waits startupWaitMs when nothing is buffered', () => {
    expect(meshWaitBudgetMs(0)).toBe(300);
    expect(meshWaitBudgetMs(0, { startupWaitMs: 700 })).toBe(700);
    expect(meshWaitBudgetMs(Number.NaN, { startupWaitMs: 700 })).toBe(700);
    // The startup wait is also bounded by maxWaitMs.
    expect(meshWaitBudgetMs(0, { startupWaitMs: 9000, maxWaitMs: 2000 })).toBe(2000);
  });
  it('keeps the safety margin for the origin and clamps to [0, maxWaitMs]', () => {
    expect(meshWaitBudgetMs(3000)).toBe(1500);
    expect(meshWaitBudgetMs(1000)).toBe(0);
    expect(meshWaitBudgetMs(20_000)).toBe(4000);
    expect(meshWaitBudgetMs(6000, { safetyMarginMs: 500, maxWaitMs: 10_000 })).toBe(5500);
  });
});

describe('partWaitBudgetMs', () => {
  it('gives a part the buffer less a small margin, none at startup, at most twice the part or partMaxWaitMs', () => {
    expect(partWaitBudgetMs(0, 500)).toBe(0);
    expect(partWaitBudgetMs(700, 2000)).toBe(200);
    expect(partWaitBudgetMs(3000, 2000)).toBe(1000);
    expect(partWaitBudgetMs(3000, 300)).toBe(600);
    expect(partWaitBudgetMs(3000, 500, { partWaitShareOfDuration: 0.5 })).toBe(250);
    expect(partWaitBudgetMs(400, 500)).toBe(0);
    // A part whose duration is unknown is bounded by partMaxWaitMs only.
    expect(partWaitBudgetMs(3000, Number.NaN)).toBe(1000);
    expect(partWaitBudgetMs(3000, 4000, { partMaxWaitMs: 2000, partSafetyMarginMs: 200 })).toBe(2000);
    expect(partWaitBudgetMs(3000, 1000, { partWaitShareOfDuration: 0.1 })).toBe(100);
  });
});

describe('createMeshFragmentLoader with LL-HLS parts', () => {
  const startPart = (
    provider: FakeProvider,
    context: FragmentLoaderContext,
    bufferAheadMs: number,
  ): { rec: Recorded; originsBefore: number } => {
    const MeshLoader = createMeshFragmentLoader(provider, {
      defaultLoader: FakeOrigin,
      bufferAheadMs: () => bufferAheadMs,
    });
    const loader = new MeshLoader({} as HlsConfig);
    const rec = record();
    const originsBefore = FakeOrigin.instances.length;
    loader.load(context, loaderConfig, rec.callbacks);
    return { rec, originsBefore };
  };

  it('waits for a byte-range part from the mesh and hands it over without counting a segment', async () => {
    const provider = new FakeProvider();
    provider.expected.add(4);
    const { rec, originsBefore } = startPart(provider, partContext(4, 1000, 5000), 1500);
    expect(provider.rangeWaits.map((w) => [w.sequence, w.start, w.end])).toEqual([[4, 1000, 5000]]);
    provider.rangeWaits[0]!.resolve(new Uint8Array(4000));
    await sleep(0);
    expect(rec.events).toEqual(['success']);
    expect((rec.successes[0]!.data as ArrayBuffer).byteLength).toBe(4000);
    expect(provider.meshSequences).toEqual([]);
    expect(provider.meshParts).toEqual([4]);
    expect(FakeOrigin.instances.length).toBe(originsBefore);
  });

  it('takes the part from the origin when the mesh misses its deadline', async () => {
    const provider = new FakeProvider();
    provider.expected.add(4);
    const { rec, originsBefore } = startPart(provider, partContext(4, 0, 100), 530); // 30 ms
    expect(FakeOrigin.instances.length).toBe(originsBefore);
    await sleep(60);
    expect(FakeOrigin.instances.length).toBe(originsBefore + 1);
    FakeOrigin.instances.at(-1)!.respond(100);
    expect(rec.events).toEqual(['success']);
    expect(provider.originBytes).toEqual([100]);
    expect(provider.originParts).toEqual([100]);
    expect(provider.kept).toEqual([]); // a part is not a segment to keep
  });

  it('takes parts of a segment still being written from the mesh once parts are known to be its ranges', async () => {
    const provider = new FakeProvider();
    provider.expected.add(4).add(5);
    const MeshLoader = createMeshFragmentLoader(provider, {
      defaultLoader: FakeOrigin,
      bufferAheadMs: () => 2000,
    });
    const load = (context: FragmentLoaderContext): void => {
      new MeshLoader({} as HlsConfig).load(context, loaderConfig, record().callbacks);
    };
    const originsBefore = FakeOrigin.instances.length;
    // Not known yet: the part could be a range of a part file of its own.
    load(partContext(5, 0, 100, false, true));
    expect(FakeOrigin.instances.length).toBe(originsBefore + 1);
    // A part of a listed segment shows parts are ranges of their segment's file…
    load(partContext(4, 0, 100));
    // …so the next in-progress part waits for the mesh.
    load(partContext(5, 100, 200, false, true));
    expect(provider.rangeWaits.map((w) => [w.sequence, w.start])).toEqual([
      [4, 0],
      [5, 100],
    ]);
    expect(FakeOrigin.instances.length).toBe(originsBefore + 1);
    await sleep(0);
  });

  it('goes to the origin at once at startup, for parts in files of their own, and unexpected segments', () => {
    const provider = new FakeProvider();
    provider.expected.add(4);
    for (const [context, buffer] of [
      [partContext(4, 0, 100), 0],
      [partContext(4, 0, 100, true), 3000],
      [partContext(9, 0, 100), 3000],
    ] as const) {
      const { originsBefore } = startPart(provider, context, buffer);
      expect(FakeOrigin.instances.length).toBe(originsBefore + 1);
    }
    expect(provider.rangeWaits).toEqual([]);
  });
});

describe('createMeshFragmentLoader', () => {
  it('hands over mesh bytes with honest stats and counts a mesh segment', async () => {
    const provider = new FakeProvider();
    provider.expected.add(5);
    const { loader, rec, originsBefore } = start(provider, 5, { bufferAheadMs: () => 3000 }, true);
    const wait = provider.waits[0]!;
    expect(wait.sequence).toBe(5);
    // 3000 ms buffered − 1500 ms margin. Both are fractional clock readings: (start + 1500) − start
    // is 1500 only to within a rounding error (CI once read 1500.0000000000002).
    expect(wait.deadlineMs - loader.stats.loading.start).toBeCloseTo(1500, 6);
    await sleep(5);
    const bytes = new Uint8Array([1, 2, 3, 4, 5, 6, 7]);
    provider.complete(5, bytes);
    await sleep(0);

    expect(rec.events).toEqual(['progress', 'success']);
    const { data, stats } = rec.successes[0]!;
    expect(data).toBeInstanceOf(ArrayBuffer);
    expect([...new Uint8Array(data as ArrayBuffer)]).toEqual([...bytes]);
    // A copy: hls.js may transfer (detach) it without touching the session's bytes.
    expect(data).not.toBe(bytes.buffer);
    expect(stats).toBe(loader.stats);
    expect(stats.loaded).toBe(7);
    expect(stats.total).toBe(7);
    expect(stats.loading.start).toBeGreaterThan(0);
    expect(stats.loading.first - stats.loading.start).toBeGreaterThanOrEqual(4);
    expect(stats.loading.end).toBeGreaterThanOrEqual(stats.loading.first);
    expect(provider.meshSequences).toEqual([5]);
    expect(provider.originBytes).toEqual([]);
    expect(FakeOrigin.instances.length).toBe(originsBefore);
  });

  it('falls back to the origin at the deadline and counts origin bytes', async () => {
    const provider = new FakeProvider();
    provider.expected.add(6);
    const { loader, rec, originsBefore } = start(provider, 6, { startupWaitMs: 40 });
    const startMs = loader.stats.loading.start;
    await sleep(15);
    expect(FakeOrigin.instances.length).toBe(originsBefore);
    await sleep(60);
    expect(FakeOrigin.instances.length).toBe(originsBefore + 1);
    const origin = FakeOrigin.instances.at(-1)!;
    expect(origin.context?.url).toBe('http://127.0.0.1/live/seg6.ts');
    origin.respond(1000);

    expect(rec.events).toEqual(['success']);
    const { stats } = rec.successes[0]!;
    expect(stats).toBe(loader.stats);
    expect(stats.loaded).toBe(1000);
    // The wait for the mesh is part of what hls.js waited for.
    expect(stats.loading.start).toBe(startMs);
    expect(stats.loading.end - startMs).toBeGreaterThanOrEqual(40);
    expect(provider.originBytes).toEqual([1000]);
    expect(provider.meshSequences).toEqual([]);
    // The mesh completing late changes nothing.
    provider.complete(6, new Uint8Array(3));
    await sleep(0);
    expect(rec.events).toEqual(['success']);
  });

  it('goes to the origin at once for a segment the mesh does not expect', () => {
    const provider = new FakeProvider();
    const { rec, originsBefore } = start(provider, 7);
    expect(provider.waits).toEqual([]);
    expect(FakeOrigin.instances.length).toBe(originsBefore + 1);
    FakeOrigin.instances.at(-1)!.respond(500);
    expect(rec.events).toEqual(['success']);
    expect(provider.originBytes).toEqual([500]);
    // The whole segment is offered to the provider to keep, as a copy of what hls.js gets.
    expect(provider.kept.map((k) => [k.sequence, k.bytes.length])).toEqual([[7, 500]]);
    const given = rec.successes[0]!.data as ArrayBuffer;
    expect(provider.kept[0]!.bytes.buffer).not.toBe(given);
  });

  it('sends init segments to the origin and counts their bytes as origin bytes', () => {
    const provider = new FakeProvider();
    const { rec, originsBefore } = start(provider, 'initSegment');
    expect(provider.waits).toEqual([]);
    expect(FakeOrigin.instances.length).toBe(originsBefore + 1);
    FakeOrigin.instances.at(-1)!.respond(800);
    expect(rec.events).toEqual(['success']);
    expect(provider.originBytes).toEqual([800]);
  });

  it('falls back to the origin when the provider fails', async () => {
    const provider = new FakeProvider();
    provider.expected.add(8);
    provider.failWith = new Error('session closed badly');
    const { rec, originsBefore } = start(provider, 8);
    await sleep(0);
    expect(FakeOrigin.instances.length).toBe(originsBefore + 1);
    FakeOrigin.instances.at(-1)!.respond(10);
    expect(rec.events).toEqual(['success']);
  });

  it('abort during the mesh wait cancels the wait and reports one abort', async () => {
    const provider = new FakeProvider();
    provider.expected.add(9);
    const { loader, rec, originsBefore } = start(provider, 9, { startupWaitMs: 30 });
    const signal = provider.waits[0]!.signal!;
    expect(signal.aborted).toBe(false);
    loader.abort();
    expect(signal.aborted).toBe(true);
    expect(loader.stats.aborted).toBe(true);
    expect(rec.events).toEqual(['abort']);
    provider.complete(9, new Uint8Array(4));
    await sleep(50);
    // Neither the late mesh bytes nor the deadline start anything.
    expect(rec.events).toEqual(['abort']);
    expect(FakeOrigin.instances.length).toBe(originsBefore);
    expect(provider.meshSequences).toEqual([]);
  });

  it('abort during the origin fetch aborts the origin loader and reports one abort', () => {
    const provider = new FakeProvider();
    const { loader, rec } = start(provider, 10);
    const origin = FakeOrigin.instances.at(-1)!;
    loader.abort();
    expect(origin.aborts).toBe(1);
    expect(rec.events).toEqual(['abort']);
    expect(loader.stats.aborted).toBe(true);
    loader.abort();
    expect(rec.events).toEqual(['abort']);
  });

  it('destroy stops everything without further callbacks', async () => {
    const provider = new FakeProvider();
    provider.expected.add(11);
    const { loader, rec, originsBefore } = start(provider, 11, { startupWaitMs: 20 });
    loader.destroy();
    expect(provider.waits[0]!.signal!.aborted).toBe(true);
    await sleep(40);
    expect(rec.events).toEqual([]);
    expect(FakeOrigin.instances.length).toBe(originsBefore);

    const second = start(provider, 12);
    const origin = FakeOrigin.instances.at(-1)!;
    second.loader.destroy();
    expect(origin.destroyed).toBe(true);
  });

  it('forwards origin errors with the merged stats', () => {
    const provider = new FakeProvider();
    const { loader, rec } = start(provider, 13);
    const origin = FakeOrigin.instances.at(-1)!;
    origin.stats.retry = 2;
    origin.callbacks!.onError({ code: 404, text: 'Not Found' }, origin.context!, null, origin.stats);
    expect(rec.events).toEqual(['error 404']);
    expect(loader.stats.retry).toBe(2);
    expect(provider.originBytes).toEqual([]);
  });

  it('uses the hls.js config loader when no default loader is given', () => {
    const provider = new FakeProvider();
    const MeshLoader = createMeshFragmentLoader(provider);
    const before = FakeOrigin.instances.length;
    const loader = new MeshLoader({ loader: FakeOrigin } as unknown as HlsConfig);
    loader.load(fragContext(14), loaderConfig, record().callbacks);
    expect(FakeOrigin.instances.length).toBe(before + 1);
  });

  it('refuses to be used twice', () => {
    const provider = new FakeProvider();
    const { loader } = start(provider, 15);
    expect(() => {
      loader.load(fragContext(16), loaderConfig, record().callbacks);
    }).toThrow(/only be used once/);
  });
});
