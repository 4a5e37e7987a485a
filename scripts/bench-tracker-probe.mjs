// Preloaded into the tracker by `npm run bench:tracker` (node --import), so the benchmark sees the
// tracker's own event-loop stalls and GC pauses without changing the tracker: a relay that arrives
// while the loop is blocked waits for it, whatever the load generator does. Once a second it writes
// one JSON line to stderr (the tracker logs to stdout), then forgets. Costs a 5 ms timer.
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';

const loop = monitorEventLoopDelay({ resolution: 5 });
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

const round = (x) => Math.round(x * 100) / 100;
setInterval(() => {
  // Nothing here may open a file: with every descriptor taken by sockets that would throw EMFILE
  // (process.memoryUsage() reads /proc) and, uncaught, take the tracker down with it.
  const probe = {
    atMs: Date.now(),
    // The histogram's values include its 5 ms sampling period; its max is the longest stall.
    loopDelayP99Ms: round(loop.percentile(99) / 1e6),
    loopDelayMaxMs: round(loop.max / 1e6),
    gcMs: round(gcMs),
    gcMaxMs: round(gcMaxMs),
    gcCount,
    heapUsedMB: round(getHeapStatistics().used_heap_size / 2 ** 20),
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
}, 1000).unref();
