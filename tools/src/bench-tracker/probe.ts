/**
 * Preloaded into the tracker by `npm run bench:tracker` (node --import), so the benchmark sees the
 * tracker's own event-loop stalls and GC pauses without changing the tracker: a relay that arrives
 * while the loop is blocked waits for it, whatever the load generator does. Once a second it writes
 * one JSON line to stderr (the tracker logs to stdout), then forgets. Costs a 5 ms timer.
 */
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import { round } from '../lib/stats.js';

/** The histogram's sampling period, ms: its values include it. */
const LOOP_RESOLUTION_MS = 5;
const REPORT_EVERY_MS = 1000;

/** One second of the tracker's life, as cli.ts reads it (`{"benchProbe": …}` on stderr). */
export interface ProbeReport {
  readonly atMs: number;
  readonly loopDelayP99Ms: number | null;
  /** The longest stall of the second. */
  readonly loopDelayMaxMs: number | null;
  readonly gcMs: number | null;
  readonly gcMaxMs: number | null;
  readonly gcCount: number;
  readonly heapUsedMB: number | null;
}

const loop = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
loop.enable();
let gcMs = 0;
let gcMaxMs = 0;
let gcCount = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gcMs += entry.duration;
    gcMaxMs = Math.max(gcMaxMs, entry.duration);
    gcCount++;
  }
}).observe({ entryTypes: ['gc'] });

setInterval(() => {
  // Nothing here may open a file: with every descriptor taken by sockets that would throw EMFILE
  // (process.memoryUsage() reads /proc) and, uncaught, take the tracker down with it.
  const probe: ProbeReport = {
    atMs: Date.now(),
    loopDelayP99Ms: round(loop.percentile(99) / 1e6, 2),
    loopDelayMaxMs: round(loop.max / 1e6, 2),
    gcMs: round(gcMs, 2),
    gcMaxMs: round(gcMaxMs, 2),
    gcCount,
    heapUsedMB: round(getHeapStatistics().used_heap_size / 2 ** 20, 2),
  };
  loop.reset();
  gcMs = 0;
  gcMaxMs = 0;
  gcCount = 0;
  try {
    process.stderr.write(`${JSON.stringify({ benchProbe: probe })}\n`);
  } catch {
    // a report lost is better than a tracker lost
  }
}, REPORT_EVERY_MS).unref();
