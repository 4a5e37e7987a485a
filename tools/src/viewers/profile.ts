/**
 * Chromium's JS profiler on one viewer page (DevTools protocol): where its main thread's time goes,
 * summed by source file and part through the demo's source maps (lib/cpu-profile.ts); and a heap
 * snapshot of one, summed by kind and by owner of its ArrayBuffers (lib/heap-snapshot.ts); and a
 * memory-infra dump of every process of its browser, by allocator (lib/memory-dump.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { CDPSession, Page } from 'playwright-core';
import { summarizeProfile, sourceMapsIn, type CpuProfile, type ProfileSummary } from '../lib/cpu-profile.js';
import { summarizeHeapSnapshot, type HeapSnapshotJson, type HeapSummary } from '../lib/heap-snapshot.js';
import { processMemoryFromTrace, type ProcessMemory, type TraceEvent } from '../lib/memory-dump.js';
import { errorMessage } from '../lib/wait.js';
import { demoDist } from '../stack/tracker.js';

/** Runs `use` with a DevTools session on `page`, detached afterwards whatever happens. */
async function withSession<T>(page: Page, use: (cdp: CDPSession) => Promise<T>): Promise<T> {
  const cdp = await page.context().newCDPSession(page);
  try {
    return await use(cdp);
  } finally {
    await cdp.detach().catch(() => undefined);
  }
}

/** A profile starts this far into a run's window by default: past the viewers' start-up. */
export const PROFILE_WARMUP_MS = 10_000;
/** Chromium's sampling interval: 1 ms, fine enough for per-packet work. */
const PROFILE_SAMPLING_US = 1000;

export interface PageProfile {
  /** The raw profile, to write as a `.cpuprofile` that DevTools opens. */
  readonly raw: CpuProfile;
  readonly summary: ProfileSummary;
}

/**
 * Profiles `page` from `startAfterMs` from now, for `durationMs`. Never rejects: a profile that fails
 * (the page went away) is reported through `onFailure` and resolves to null, so a caller may start it
 * and await it only when its run ends (a rejection left until then would end the process).
 */
export async function profilePage(
  page: Page,
  { startAfterMs, durationMs }: { startAfterMs: number; durationMs: number },
  onFailure: (message: string) => void,
): Promise<PageProfile | null> {
  try {
    return await recordProfile(page, startAfterMs, durationMs);
  } catch (error) {
    onFailure(errorMessage(error));
    return null;
  }
}

async function recordProfile(page: Page, startAfterMs: number, durationMs: number): Promise<PageProfile> {
  return withSession(page, async (cdp) => {
    await sleep(Math.max(0, startAfterMs));
    await cdp.send('Profiler.enable');
    await cdp.send('Profiler.setSamplingInterval', { interval: PROFILE_SAMPLING_US });
    await cdp.send('Profiler.start');
    await sleep(Math.max(0, durationMs));
    const { profile } = await cdp.send('Profiler.stop');
    const raw = profile as unknown as CpuProfile;
    return { raw, summary: summarizeProfile(raw, sourceMapsIn(demoDist)) };
  });
}

export interface PageHeap {
  /** The snapshot as Chromium wrote it, to save as a `.heapsnapshot` that DevTools opens. */
  readonly raw: string;
  readonly summary: HeapSummary;
}

/**
 * A heap snapshot of `page` (after a garbage collection: Chromium takes one first), summed
 * (lib/heap-snapshot.ts). Never rejects: a failure is reported through `onFailure` and gives null.
 */
export async function heapSnapshotOf(
  page: Page,
  onFailure: (message: string) => void,
): Promise<PageHeap | null> {
  try {
    return await withSession(page, async (cdp) => {
      const chunks: string[] = [];
      cdp.on('HeapProfiler.addHeapSnapshotChunk', (event) => {
        chunks.push(event.chunk);
      });
      await cdp.send('HeapProfiler.enable');
      await cdp.send('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
      const raw = chunks.join('');
      return { raw, summary: summarizeHeapSnapshot(JSON.parse(raw) as HeapSnapshotJson) };
    });
  } catch (error) {
    onFailure(errorMessage(error));
    return null;
  }
}

/** A memory dump that takes longer than this is given up (one here ends within a few seconds). */
const MEMORY_DUMP_TIMEOUT_MS = 30_000;

/**
 * A detailed memory-infra dump of every process of `page`'s browser (a trace is global, so one
 * page's DevTools session dumps them all), by allocator (lib/memory-dump.ts). Never rejects: a
 * failure is reported through `onFailure` and gives null.
 */
export async function memoryDumpOf(
  page: Page,
  onFailure: (message: string) => void,
): Promise<ProcessMemory[] | null> {
  try {
    return await withSession(page, async (cdp) => {
      const events: TraceEvent[] = [];
      cdp.on('Tracing.dataCollected', (event) => {
        events.push(...(event.value as unknown as TraceEvent[]));
      });
      const complete = new Promise<'complete'>((resolve) => {
        cdp.once('Tracing.tracingComplete', () => {
          resolve('complete');
        });
      });
      await cdp.send('Tracing.start', {
        traceConfig: {
          includedCategories: ['disabled-by-default-memory-infra'],
          excludedCategories: ['*'],
          // No periodic dumps: only the one asked for below. The protocol's type says string
          // values; Chromium reads this as its trace config's memory_dump_config.
          memoryDumpConfig: { triggers: [] } as unknown as Record<string, string>,
        },
        transferMode: 'ReportEvents',
      });
      const dump = await cdp.send('Tracing.requestMemoryDump', {
        deterministic: false,
        levelOfDetail: 'detailed',
      });
      await cdp.send('Tracing.end');
      // An unref'd timer: a trace that ends in time leaves nothing keeping the process up.
      const ended = await Promise.race([
        complete,
        sleep(MEMORY_DUMP_TIMEOUT_MS, 'timeout' as const, { ref: false }),
      ]);
      if (ended === 'timeout') throw new Error(`the trace did not end within ${MEMORY_DUMP_TIMEOUT_MS} ms`);
      if (!dump.success) throw new Error('Chromium reported the memory dump as failed');
      const processes = processMemoryFromTrace(events);
      if (processes.length === 0) throw new Error('the trace held no process memory dump');
      return processes;
    });
  } catch (error) {
    onFailure(errorMessage(error));
    return null;
  }
}

/**
 * A full garbage collection in each page's renderer (DevTools' `HeapProfiler.collectGarbage`), so
 * that a memory dump after it shows what the pages still hold rather than what awaits collection.
 * Never rejects: pages that fail are reported through `onFailure`; returns how many were collected.
 */
export async function collectGarbageIn(
  pages: readonly Page[],
  onFailure: (message: string) => void,
): Promise<number> {
  let collected = 0;
  for (const page of pages) {
    try {
      await withSession(page, (cdp) => cdp.send('HeapProfiler.collectGarbage'));
      collected++;
    } catch (error) {
      onFailure(errorMessage(error));
    }
  }
  return collected;
}
