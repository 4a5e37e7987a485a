/**
 * Chromium's JS profiler on one viewer page (DevTools protocol): where its main thread's time goes,
 * summed by source file and part through the demo's source maps (lib/cpu-profile.ts); and a heap
 * snapshot of one, summed by kind and by owner of its ArrayBuffers (lib/heap-snapshot.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Page } from 'playwright-core';
import { summarizeProfile, sourceMapsIn, type CpuProfile, type ProfileSummary } from '../lib/cpu-profile.js';
import { summarizeHeapSnapshot, type HeapSnapshotJson, type HeapSummary } from '../lib/heap-snapshot.js';
import { errorMessage } from '../lib/wait.js';
import { demoDist } from '../stack/tracker.js';

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
  const cdp = await page.context().newCDPSession(page);
  try {
    await sleep(Math.max(0, startAfterMs));
    await cdp.send('Profiler.enable');
    await cdp.send('Profiler.setSamplingInterval', { interval: PROFILE_SAMPLING_US });
    await cdp.send('Profiler.start');
    await sleep(Math.max(0, durationMs));
    const { profile } = await cdp.send('Profiler.stop');
    const raw = profile as unknown as CpuProfile;
    return { raw, summary: summarizeProfile(raw, sourceMapsIn(demoDist)) };
  } finally {
    await cdp.detach().catch(() => undefined);
  }
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
    const cdp = await page.context().newCDPSession(page);
    try {
      const chunks: string[] = [];
      cdp.on('HeapProfiler.addHeapSnapshotChunk', (event) => {
        chunks.push(event.chunk);
      });
      await cdp.send('HeapProfiler.enable');
      await cdp.send('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
      const raw = chunks.join('');
      return { raw, summary: summarizeHeapSnapshot(JSON.parse(raw) as HeapSnapshotJson) };
    } finally {
      await cdp.detach().catch(() => undefined);
    }
  } catch (error) {
    onFailure(errorMessage(error));
    return null;
  }
}
