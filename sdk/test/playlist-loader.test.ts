import { describe, expect, it } from 'vitest';
import type {
  HlsConfig,
  Loader,
  LoaderCallbacks,
  LoaderConfiguration,
  LoaderContext,
  LoaderStats,
  PlaylistLoaderContext,
} from 'hls.js';
import { emptyStats } from '../src/loader.js';
import {
  createMeshPlaylistLoader,
  DEFAULT_HOLD_BUFFER_MARGIN_MS,
  playlistEdge,
  RELOAD_LEAD_MS,
  reloadInStepMs,
  stepReloadSchedule,
} from '../src/playlist-loader.js';
import type { SegmentProvider } from '../src/types.js';

interface HeldWait {
  readonly sequence: number;
  readonly deadlineMs: number;
  readonly signal: AbortSignal | undefined;
  resolve(held: boolean): void;
}

/** A mesh whose segments arrive when the test says; waits resolve only by hand (no timers). */
class FakeMesh implements SegmentProvider {
  readonly heldAt = new Map<number, number>();
  /** Segments announced (the origin lists them); null: the provider cannot tell. */
  announced: Set<number> | null = null;
  readonly waits: HeldWait[] = [];
  failWith: Error | null = null;

  waitUntilHeld(sequence: number, deadlineMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.failWith !== null) return Promise.reject(this.failWith);
    if (this.heldAt.has(sequence)) return Promise.resolve(true);
    return new Promise((resolve) => {
      // As the session's store does: a wait that ends takes its abort listener with it (the loader
      // waits again and again with one signal while it holds a playlist back).
      const onAbort = (): void => {
        finish(false);
      };
      const finish = (held: boolean): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve(held);
      };
      this.waits.push({ sequence, deadlineMs, signal, resolve: finish });
      signal?.addEventListener('abort', onAbort);
    });
  }
  segmentHeldAtMs(sequence: number): number | undefined {
    return this.heldAt.get(sequence);
  }
  segmentAnnounced(sequence: number): boolean | undefined {
    return this.announced?.has(sequence);
  }
  /** The mesh comes to hold a segment at `atMs`: waits for it resolve. */
  hold(sequence: number, atMs: number): void {
    this.heldAt.set(sequence, atMs);
    for (const wait of this.waits) if (wait.sequence === sequence) wait.resolve(true);
  }
  waitForSegment(): Promise<Uint8Array | null> {
    return Promise.resolve(null);
  }
  waitForRange(): Promise<Uint8Array | null> {
    return Promise.resolve(null);
  }
  expectsSegment(): boolean {
    return true;
  }
  noteOriginSegment(): void {}
  noteMeshSegment(): void {}
  noteStall(): void {}
  publishedAtMs(): number | undefined {
    return undefined;
  }
}

interface OriginLoad {
  readonly context: PlaylistLoaderContext;
  readonly callbacks: LoaderCallbacks<LoaderContext>;
  readonly stats: LoaderStats;
  aborted: boolean;
  /** The origin answers with this playlist; its request is taken to have started at `startMs`. */
  succeed(text: string, startMs: number): void;
}

/** hls.js's HTTP loader, answering by hand. */
function fakeOrigin(): { loads: OriginLoad[]; Loader: new (config: HlsConfig) => Loader<LoaderContext> } {
  const loads: OriginLoad[] = [];
  class Origin implements Loader<LoaderContext> {
    stats: LoaderStats = emptyStats();
    context: LoaderContext | null = null;
    private record: OriginLoad | null = null;
    load(
      context: LoaderContext,
      _config: LoaderConfiguration,
      callbacks: LoaderCallbacks<LoaderContext>,
    ): void {
      this.context = context;
      const stats = this.stats;
      const load: OriginLoad = {
        context: context as PlaylistLoaderContext,
        callbacks,
        stats,
        aborted: false,
        succeed: (text, startMs) => {
          stats.loading.start = startMs;
          stats.loading.first = startMs + 5;
          stats.loading.end = startMs + 6;
          callbacks.onSuccess({ url: context.url, data: text }, stats, context, null);
        },
      };
      loads.push(load);
      this.record = load;
    }
    abort(): void {
      if (this.record !== null) this.record.aborted = true;
    }
    destroy(): void {}
  }
  return { loads, Loader: Origin };
}

const URL_ = 'http://origin.test/live/stream.m3u8';

function context(type = 'level', url = URL_): PlaylistLoaderContext {
  return {
    url,
    type,
    responseType: 'text',
    level: 0,
    id: null,
    groupId: null,
    pathwayId: undefined,
    levelDetails: undefined,
    deliveryDirectives: null,
    levelOrTrack: null,
  } as unknown as PlaylistLoaderContext;
}

/** A live playlist of 2 s segments whose last one is `last`, listing three. */
function playlist(last: number, extra = ''): string {
  const lines = [
    '#EXTM3U',
    '#EXT-X-VERSION:3',
    '#EXT-X-TARGETDURATION:2',
    `#EXT-X-MEDIA-SEQUENCE:${last - 2}`,
  ];
  if (extra !== '') lines.push(extra);
  for (let s = last - 2; s <= last; s++) lines.push('#EXTINF:2.000000,', `seg${s}.ts`);
  return lines.join('\n') + '\n';
}

/** The loaders under test pass the configuration through untouched. */
const config = {} as LoaderConfiguration;

interface Harness {
  readonly mesh: FakeMesh;
  readonly loads: OriginLoad[];
  readonly successes: LoaderStats[];
  readonly aborts: number[];
  /** onHold's (heldMs, found), in order. */
  readonly holds: [number, boolean][];
  /** What happened, in order: `edge <last sequence>` (onMediaPlaylist) and `success` (hls.js's callback). */
  readonly events: string[];
  /** Starts one playlist load, as hls.js does (a new loader per request). */
  load(ctx?: PlaylistLoaderContext): Loader<PlaylistLoaderContext>;
  nowMs: number;
}

function harness(options: { maxHoldMs?: number; bufferAheadMs?: number } = {}): Harness {
  const mesh = new FakeMesh();
  const origin = fakeOrigin();
  const h: Harness = {
    mesh,
    loads: origin.loads,
    successes: [],
    aborts: [],
    holds: [],
    events: [],
    nowMs: 1000,
    load: (ctx = context()) => {
      const loader = new PLoader({} as HlsConfig);
      loader.load(ctx, config, {
        onSuccess: (_response, stats) => {
          h.successes.push(stats);
          h.events.push('success');
        },
        onError: () => {
          throw new Error('unexpected error');
        },
        onTimeout: () => {
          throw new Error('unexpected timeout');
        },
        onAbort: () => {
          h.aborts.push(h.nowMs);
        },
      });
      return loader;
    },
  };
  const PLoader = createMeshPlaylistLoader(mesh, {
    defaultLoader: origin.Loader,
    nowMs: () => h.nowMs,
    onHold: (heldMs, found) => h.holds.push([heldMs, found]),
    onMediaPlaylist: (edge) => h.events.push(`edge ${edge.lastSequence}`),
    ...(options.maxHoldMs === undefined ? {} : { maxHoldMs: options.maxHoldMs }),
    ...(options.bufferAheadMs === undefined ? {} : { bufferAheadMs: () => options.bufferAheadMs ?? 0 }),
  });
  return h;
}

/** Lets promise callbacks run. */
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

describe('playlistEdge', () => {
  it('reads the last media sequence number, the target duration and the end', () => {
    expect(playlistEdge(playlist(12))).toEqual({
      lastSequence: 12,
      targetDurationMs: 2000,
      ended: false,
      originBlocks: false,
    });
    expect(playlistEdge(playlist(12) + '#EXT-X-ENDLIST\n')?.ended).toBe(true);
    expect(
      playlistEdge(playlist(12, '#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.5'))
        ?.originBlocks,
    ).toBe(true);
    expect(playlistEdge(playlist(12, '#EXT-X-SERVER-CONTROL:CAN-SKIP-UNTIL=12'))?.originBlocks).toBe(false);
  });

  it('counts from media sequence 0 when the tag is missing, and handles CRLF', () => {
    const text = '#EXTM3U\r\n#EXT-X-TARGETDURATION:4\r\n#EXTINF:4,\r\na.ts\r\n#EXTINF:4,\r\nb.ts\r\n';
    expect(playlistEdge(text)).toEqual({
      lastSequence: 1,
      targetDurationMs: 4000,
      ended: false,
      originBlocks: false,
    });
  });

  it('refuses what is not a media playlist it can time', () => {
    expect(playlistEdge('<html>')).toBeNull();
    expect(playlistEdge('#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n')).toBeNull();
    expect(playlistEdge('#EXTM3U\n#EXTINF:2,\na.ts\n')).toBeNull(); // no target duration
    expect(playlistEdge('#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:-4\n')).toBeNull();
    expect(playlistEdge('#EXTM3U\n#EXT-X-TARGETDURATION:2\n' + ' '.repeat(1 << 20))).toBeNull();
  });
});

describe('createMeshPlaylistLoader', () => {
  /** A harness that has loaded the live playlist once (segments up to 12) at 1000. */
  function loaded(options: { maxHoldMs?: number; bufferAheadMs?: number } = {}): Harness {
    const h = harness(options);
    h.load(context('manifest'));
    h.loads[0]?.succeed(playlist(12), 1000);
    return h;
  }

  it("tells the main rendition's media playlists before hls.js parses them, and no other playlist", () => {
    const h = loaded();
    expect(h.events).toEqual(['edge 12', 'success']);
    h.mesh.hold(13, 1500);
    h.load();
    h.loads[1]?.succeed(playlist(13), 1500);
    h.load(context('audioTrack', `${URL_}.audio`));
    h.loads[2]?.succeed(playlist(13), 1600);
    h.load(context('level', `${URL_}?_HLS_msn=14`));
    h.loads[3]?.succeed(playlist(14), 1700);
    h.load(context('manifest', `${URL_}.multivariant`));
    h.loads[4]?.succeed('#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n', 1800);
    expect(h.events).toEqual(['edge 12', 'success', 'edge 13', 'success', 'success', 'success', 'success']);
  });

  it('loads the first copy of a playlist at once, without asking the mesh', () => {
    const h = loaded();
    expect(h.loads).toHaveLength(1);
    expect(h.successes).toHaveLength(1);
    expect(h.mesh.waits).toHaveLength(0);
  });

  it('holds a reload until the mesh holds the next segment, then asks the origin', async () => {
    const h = loaded();
    h.nowMs = 1500;
    h.load();
    expect(h.loads).toHaveLength(1); // held
    expect(h.mesh.waits.map((w) => [w.sequence, w.deadlineMs])).toEqual([[13, 2500]]); // half of 2 s
    h.nowMs = 1800;
    h.mesh.hold(13, 1800);
    await settle();
    expect(h.loads).toHaveLength(2);
    expect(h.holds).toEqual([[300, true]]);
    h.loads[1]?.succeed(playlist(13), 1800);
    expect(h.successes).toHaveLength(2);
    // hls.js sees the whole wait: the load started when it asked.
    expect(h.successes[1]?.loading.start).toBe(1500);
  });

  it('asks the origin when the hold ends without the segment: never later than hls.js would retry', async () => {
    const h = loaded();
    h.load();
    h.nowMs = 2000;
    h.mesh.waits[0]?.resolve(false);
    await settle();
    expect(h.loads).toHaveLength(2);
    expect(h.holds).toEqual([[1000, false]]);
  });

  it('asks the origin when the mesh fails', async () => {
    const h = loaded();
    h.mesh.failWith = new Error('session closed');
    h.load();
    await settle();
    expect(h.loads).toHaveLength(2);
    expect(h.holds).toEqual([[0, false]]);
  });

  it('does not hold when the mesh holds the next segment already', () => {
    const h = loaded();
    h.mesh.hold(13, 2900);
    h.load();
    expect(h.loads).toHaveLength(2);
    expect(h.mesh.waits).toHaveLength(0);
  });

  it('respects maxHoldMs', () => {
    const h = loaded({ maxHoldMs: 300 });
    h.nowMs = 2000;
    h.load();
    expect(h.mesh.waits[0]?.deadlineMs).toBe(2300);
  });

  it('ends a hold before the buffer runs dry, and does not hold a short buffer at all', () => {
    const h = loaded({ bufferAheadMs: 800 });
    h.nowMs = 2000;
    h.load();
    expect(h.mesh.waits[0]?.deadlineMs).toBe(2000 + 800 - DEFAULT_HOLD_BUFFER_MARGIN_MS);
    const short = loaded({ bufferAheadMs: DEFAULT_HOLD_BUFFER_MARGIN_MS });
    short.load();
    expect(short.loads).toHaveLength(2);
    expect(short.mesh.waits).toHaveLength(0);
  });

  it('holds past the buffer bound while the origin cannot list the segment yet, until it does', async () => {
    const h = loaded({ bufferAheadMs: 300 }); // below the margin: no hold if the origin listed it
    h.mesh.announced = new Set();
    h.nowMs = 2000;
    h.load();
    expect(h.loads).toHaveLength(1);
    // The bound has passed at once: the hold looks for the announcement every 50 ms.
    expect(h.mesh.waits.map((w) => w.deadlineMs)).toEqual([2050]);
    h.nowMs = 2050;
    h.mesh.waits[0]?.resolve(false);
    await settle();
    expect(h.loads).toHaveLength(1);
    expect(h.mesh.waits[1]?.deadlineMs).toBe(2100);
    h.mesh.announced.add(13);
    h.nowMs = 2100;
    h.mesh.waits[1]?.resolve(false);
    await settle();
    expect(h.loads).toHaveLength(2);
    expect(h.holds).toEqual([[100, false]]);
  });

  it('ends such a hold when the mesh holds the segment, and at half a target duration in any case', async () => {
    const held = loaded({ bufferAheadMs: 300 });
    held.mesh.announced = new Set();
    held.nowMs = 2000;
    held.load();
    held.nowMs = 2030;
    held.mesh.hold(13, 2030);
    await settle();
    expect(held.holds).toEqual([[30, true]]);
    const capped = loaded({ bufferAheadMs: 300 });
    capped.mesh.announced = new Set();
    capped.nowMs = 2000;
    capped.load();
    for (let i = 0; capped.loads.length < 2 && i < 100; i++) {
      const wait = capped.mesh.waits.at(-1);
      capped.nowMs = wait?.deadlineMs ?? capped.nowMs;
      wait?.resolve(false);
      await settle();
    }
    expect(capped.holds).toEqual([[1000, false]]);
    expect(capped.mesh.waits.every((w) => w.deadlineMs <= 3000)).toBe(true);
  });

  it('with the segment announced, a hold ends at the buffer bound as before', async () => {
    const h = loaded({ bufferAheadMs: 800 });
    h.mesh.announced = new Set([13]);
    h.nowMs = 2000;
    h.load();
    expect(h.mesh.waits[0]?.deadlineMs).toBe(2300);
    h.nowMs = 2300;
    h.mesh.waits[0]?.resolve(false);
    await settle();
    expect(h.holds).toEqual([[300, false]]);
    const thin = loaded({ bufferAheadMs: 300 });
    thin.mesh.announced = new Set([13]);
    thin.load();
    expect(thin.loads).toHaveLength(2);
  });

  it('does not hold playlists the origin blocks itself, ended ones, or reloads with delivery directives', () => {
    for (const text of [
      playlist(12, '#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES'),
      playlist(12) + '#EXT-X-ENDLIST\n',
    ]) {
      const h = harness();
      h.load();
      h.loads[0]?.succeed(text, 1000);
      h.load();
      expect(h.loads).toHaveLength(2);
      expect(h.mesh.waits).toHaveLength(0);
    }
    const h = loaded();
    h.load(context('level', `${URL_}?_HLS_msn=13`));
    h.load({ ...context(), deliveryDirectives: {} } as PlaylistLoaderContext);
    expect(h.loads).toHaveLength(3);
    expect(h.mesh.waits).toHaveLength(0);
  });

  it('remembers a bounded number of playlists, and none with delivery directives', () => {
    const h = loaded();
    // LL-HLS reloads: a new URL each, none remembered (the first playlist stays, and is held).
    for (let msn = 13; msn < 60; msn++) {
      h.load(context('level', `${URL_}?_HLS_msn=${String(msn)}`));
      h.loads.at(-1)?.succeed(playlist(msn), 1000 + msn);
    }
    h.load();
    expect(h.mesh.waits.map((w) => w.sequence)).toEqual([13]);
    // Many renditions: the oldest is forgotten (its reload is not held any more).
    for (let rendition = 0; rendition < 40; rendition++) {
      h.load(context('level', `${URL_}.v${String(rendition)}`));
      h.loads.at(-1)?.succeed(playlist(12), 2000);
    }
    const before = h.mesh.waits.length;
    h.load(context('manifest'));
    expect(h.mesh.waits).toHaveLength(before);
    h.load(context('level', `${URL_}.v39`));
    expect(h.mesh.waits).toHaveLength(before + 1);
  });

  it('does not hold audio or subtitle playlists: the mesh carries the main rendition', () => {
    const h = harness();
    h.load(context('audioTrack'));
    h.loads[0]?.succeed(playlist(12), 1000);
    h.load(context('audioTrack'));
    expect(h.loads).toHaveLength(2);
  });

  it('a provider without the mesh (origin only) changes nothing', () => {
    const origin = fakeOrigin();
    const PLoader = createMeshPlaylistLoader(
      {
        waitForSegment: () => Promise.resolve(null),
        waitForRange: () => Promise.resolve(null),
        expectsSegment: () => false,
        noteOriginSegment: () => undefined,
        noteMeshSegment: () => undefined,
        noteStall: () => undefined,
        publishedAtMs: () => undefined,
      },
      { defaultLoader: origin.Loader },
    );
    const callbacks = {
      onSuccess: () => undefined,
      onError: () => undefined,
      onTimeout: () => undefined,
    };
    new PLoader({} as HlsConfig).load(context(), config, callbacks);
    origin.loads[0]?.succeed(playlist(12), 1000);
    new PLoader({} as HlsConfig).load(context(), config, callbacks);
    expect(origin.loads).toHaveLength(2);
  });

  it('an abort during the hold reports it and never asks the origin', async () => {
    const h = loaded();
    h.nowMs = 1200;
    const loader = h.load();
    loader.abort();
    expect(h.aborts).toEqual([1200]);
    h.mesh.hold(13, 1300);
    await settle();
    expect(h.loads).toHaveLength(1);
  });

  it('an abort after the hold aborts the origin request', async () => {
    const h = loaded();
    const loader = h.load();
    h.mesh.hold(13, 1300);
    await settle();
    loader.abort();
    expect(h.loads[1]?.aborted).toBe(true);
  });

  it('a loader is used once', () => {
    const h = harness();
    const loader = h.load();
    expect(() => {
      loader.load(context(), config, {
        onSuccess: () => undefined,
        onError: () => undefined,
        onTimeout: () => undefined,
      });
    }).toThrow(/only be used once/);
  });
});

describe('reloadInStepMs', () => {
  it('moves a late reload to shortly before the next segment is due', () => {
    // The mesh held the newest segment at 1000; hls.js would reload at 4500, 1.5 s after the next is due.
    expect(reloadInStepMs({ scheduledMs: 4500, heldAtMs: 1000, intervalMs: 2000 })).toBe(
      3000 - RELOAD_LEAD_MS,
    );
    expect(reloadInStepMs({ scheduledMs: 4500, heldAtMs: 1000, intervalMs: 2000, leadMs: 0 })).toBe(3000);
  });

  it('leaves a reload alone that comes early enough already, or when nothing is known', () => {
    expect(reloadInStepMs({ scheduledMs: 2700, heldAtMs: 1000, intervalMs: 2000, leadMs: 250 })).toBeNull();
    expect(reloadInStepMs({ scheduledMs: 2750, heldAtMs: 1000, intervalMs: 2000, leadMs: 250 })).toBeNull();
    expect(reloadInStepMs({ scheduledMs: 2999, heldAtMs: 1000, intervalMs: 2000, leadMs: 0 })).toBeNull();
    expect(reloadInStepMs({ scheduledMs: 4500, heldAtMs: undefined, intervalMs: 2000 })).toBeNull();
    expect(reloadInStepMs({ scheduledMs: 4500, heldAtMs: 1000, intervalMs: 0 })).toBeNull();
  });

  it('never moves a reload by more than one interval', () => {
    // The mesh held the newest segment long before: at most one interval earlier than hls.js's schedule.
    expect(reloadInStepMs({ scheduledMs: 9000, heldAtMs: 1000, intervalMs: 2000 })).toBe(7000);
  });
});

describe('stepReloadSchedule', () => {
  const details = (over: Partial<Parameters<typeof stepReloadSchedule>[0]> = {}) => ({
    live: true,
    canBlockReload: false,
    updated: true,
    endSN: 12,
    targetduration: 2,
    fragments: [{ duration: 2 }, { duration: 1.5 }],
    requestScheduled: 4500,
    ...over,
  });
  const mesh = { segmentHeldAtMs: (sequence: number) => (sequence === 12 ? 1000 : undefined) };

  it("moves hls.js's next reload by its own interval near the live edge (the last segment's duration)", () => {
    // Held at 1000; the next is due 1.5 s later (the last segment's duration), hls.js would reload at 3000.
    const d = details({ requestScheduled: 3000 });
    expect(stepReloadSchedule(d, mesh)).toBe(3000 - (2500 - RELOAD_LEAD_MS));
    expect(d.requestScheduled).toBe(2500 - RELOAD_LEAD_MS);
  });

  it('leaves LL-HLS, finished, unchanged and unknown playlists alone', () => {
    for (const d of [
      details({ live: false }),
      details({ canBlockReload: true }),
      details({ updated: false }),
      details({ endSN: 13 }),
    ]) {
      expect(stepReloadSchedule(d, mesh)).toBe(0);
      expect(d.requestScheduled).toBe(4500);
    }
    expect(stepReloadSchedule(details(), {})).toBe(0);
  });
});
