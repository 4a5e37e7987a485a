import { describe, expect, it } from 'vitest';
import {
  MAIN_THREAD,
  sampleThreads,
  threadCpuBetween,
  threadCpuPerViewer,
  threadGroupName,
  type SampledProcess,
  type ThreadSample,
} from '../src/bench-compare/browser-threads.js';
import type { BrowserSample } from '../src/bench-compare/browser-stats.js';
import { parseStatLine, processThreads, type ProcessThreads } from '../src/lib/proc.js';
import { threadTable, type CostRow } from '../src/bench-cost/report.js';

/** A /proc/PID/task/TID/stat line as Linux writes it: utime, stime and starttime in ticks. */
function statLine(tid: number, comm: string, utime: number, stime: number, startTicks: number): string {
  return (
    `${tid} (${comm}) S 1200 1200 1200 0 -1 4194560 12345 0 0 0 ${utime} ${stime} 0 0 20 0 25 0 ` +
    `${startTicks} 123456789 12345 18446744073709551615 1 1 0 0 0 0 0 4098 1073743080 0 0 0 -1 1 0 0 0 0 0\n`
  );
}

describe('/proc stat lines', () => {
  it('read CPU ticks, start time and the name, whose spaces and parentheses do not shift the fields', () => {
    expect(parseStatLine(statLine(4321, 'CrRendererMain', 250, 40, 987654))).toEqual({
      comm: 'CrRendererMain',
      parentPid: 1200,
      cpuTicks: 290,
      startTicks: 987654,
    });
    expect(parseStatLine(statLine(4322, 'a) b (c) S 9 9', 7, 3, 55))).toEqual({
      comm: 'a) b (c) S 9 9',
      parentPid: 1200,
      cpuTicks: 10,
      startTicks: 55,
    });
  });

  it('refuse a truncated or empty line instead of returning NaN', () => {
    expect(parseStatLine('')).toBeNull();
    expect(parseStatLine('4321 (CrRendererMain) S 1200 1200')).toBeNull();
    expect(parseStatLine('4321 CrRendererMain S 1200')).toBeNull();
  });

  it('list this process’s threads, and give null for a process that is not there', () => {
    const own = processThreads(process.pid);
    expect(own).not.toBeNull();
    expect(own?.threads.some((t) => t.tid === process.pid)).toBe(true);
    expect(own?.threads.every((t) => t.cpuSeconds >= 0 && t.name !== '')).toBe(true);
    expect(processThreads(2 ** 22 + 1)).toBeNull();
  });
});

describe('thread names', () => {
  it('drop trailing numbers so that numbered threads of one kind make one row', () => {
    expect(threadGroupName('CompositorTileWorker2')).toBe('CompositorTileWorker');
    expect(threadGroupName('Worker 3')).toBe('Worker');
    expect(threadGroupName('pool-12')).toBe('pool');
    expect(threadGroupName('ThreadPoolForeg')).toBe('ThreadPoolForeg');
    expect(threadGroupName('WebRTC_Network')).toBe('WebRTC_Network');
    expect(threadGroupName('v8:ProfEvntProc')).toBe('v8:ProfEvntProc');
    // A name that is only a number stays one.
    expect(threadGroupName('1234')).toBe('1234');
  });
});

const TICKS = 100;

/** A reader standing in for /proc: per pid, the process's ticks and its threads [tid, name, ticks, start]. */
function fakeProc(
  table: Record<number, { ticks: number; threads: [number, string, number, number][]; unreadable?: number }>,
): (pid: number) => ProcessThreads | null {
  return (pid) => {
    const p = table[pid];
    if (p === undefined) return null;
    return {
      cpuSeconds: p.ticks / TICKS,
      threads: p.threads.map(([tid, name, ticks, startTicks]) => ({
        tid,
        name,
        cpuSeconds: ticks / TICKS,
        startTicks,
      })),
      unreadable: p.unreadable ?? 0,
    };
  };
}

const browserSample: BrowserSample = {
  atMs: 0,
  processes: [
    { pid: 1, browser: 'chromium', type: 'browser', cpuS: 1 },
    { pid: 10, browser: 'chromium', type: 'renderer', cpuS: 1 },
    { pid: 11, browser: 'chromium', type: 'renderer', cpuS: 1 },
    { pid: 20, browser: 'chromium', type: 'utility:NetworkService', cpuS: 1 },
  ],
};

describe('thread samples', () => {
  it('read renderers and the network service only, and skip and count what is gone', () => {
    const sample = sampleThreads(browserSample, {
      // Renderer 11 exited after the process listing.
      read: fakeProc({
        1: { ticks: 5, threads: [[1, 'chromium', 5, 1]] },
        10: {
          ticks: 30,
          threads: [
            [10, 'chromium', 20, 7],
            [12, 'WebRTC_W_and_N', 10, 7],
          ],
          unreadable: 2,
        },
        20: { ticks: 4, threads: [[21, 'NetworkService', 4, 8]] },
      }),
      now: () => 5000,
    });
    expect(sample.atMs).toBe(5000);
    expect(sample.processes.map((p) => [p.pid, p.type])).toEqual([
      [10, 'renderer'],
      [20, 'utility:NetworkService'],
    ]);
    // The main thread carries the executable's name in /proc: it is named by its tid instead.
    expect(sample.processes[0]?.threads).toEqual([
      { key: '10@7', name: MAIN_THREAD, cpuS: 0.2 },
      { key: '12@7', name: 'WebRTC_W_and_N', cpuS: 0.1 },
    ]);
    expect(sample.processesGone).toBe(1);
    expect(sample.threadsUnreadable).toBe(2);
  });
});

function processOf(
  pid: number,
  type: string,
  ticks: number,
  threads: [number, string, number, number][],
): SampledProcess {
  return {
    pid,
    type,
    cpuS: ticks / TICKS,
    threads: threads.map(([tid, name, t, start]) => ({ key: `${tid}@${start}`, name, cpuS: t / TICKS })),
  };
}

const sample = (atMs: number, processes: SampledProcess[], threadsUnreadable = 0): ThreadSample => ({
  atMs,
  processes,
  processesGone: 0,
  threadsUnreadable,
});

describe('CPU by thread between two samples', () => {
  // Two renderers and the network service over 10 s.
  const start = sample(0, [
    processOf(10, 'renderer', 100, [
      [10, 'CrRendererMain', 60, 1],
      [12, 'WebRTC_Network', 20, 1],
      [13, 'DedicatedWorker', 20, 1],
    ]),
    processOf(11, 'renderer', 50, [
      [11, 'CrRendererMain', 40, 2],
      [14, 'CompositorTileWorker1', 10, 2],
    ]),
    processOf(20, 'utility:NetworkService', 10, [[21, 'NetworkService', 10, 3]]),
  ]);
  const end = sample(
    10_000,
    [
      // The dedicated worker exited: its 20 ticks + what it used in the window are gone from the task list.
      processOf(10, 'renderer', 400, [
        [10, 'CrRendererMain', 160, 1],
        [12, 'WebRTC_Network', 120, 1],
        [15, 'Media', 50, 9],
      ]),
      processOf(11, 'renderer', 200, [
        [11, 'CrRendererMain', 100, 2],
        // A new thread that got a tid used before: another start time, so it counts from zero.
        [14, 'CompositorTileWorker2', 30, 99],
        [16, 'CompositorTileWorker3', 20, 9],
      ]),
      processOf(20, 'utility:NetworkService', 60, [[21, 'NetworkService', 60, 3]]),
    ],
    1,
  );
  const cpu = threadCpuBetween(start, end);

  it('sum each thread name over the processes of a type, new threads from zero', () => {
    expect(cpu.wallS).toBe(10);
    const renderer = cpu.byType.renderer;
    // CrRendererMain: (160 − 60) + (100 − 40) = 160 ticks = 1.6 s in 10 s.
    expect(renderer?.byNamePct.CrRendererMain).toBeCloseTo(16, 10);
    expect(renderer?.byNamePct.WebRTC_Network).toBeCloseTo(10, 10);
    expect(renderer?.byNamePct.Media).toBeCloseTo(5, 10);
    // Both tile workers are new (one by its start time), and one row: 30 + 20 ticks.
    expect(renderer?.byNamePct.CompositorTileWorker).toBeCloseTo(5, 10);
    expect(renderer?.byNamePct.DedicatedWorker).toBeUndefined();
    expect(renderer?.processesPct).toBeCloseTo(45, 10);
    expect(renderer?.processes).toBe(2);
    expect(cpu.byType['utility:NetworkService']?.byNamePct.NetworkService).toBeCloseTo(5, 10);
  });

  it('put the time of threads that exited under none of the names, and count them', () => {
    // Processes used 450 ticks; the threads there at the end 360.
    expect(cpu.byType.renderer?.unattributedPct).toBeCloseTo(9, 10);
    expect(cpu.byType['utility:NetworkService']?.unattributedPct).toBe(0);
    expect(cpu.threadsAtStart).toBe(6);
    expect(cpu.threadsAtEnd).toBe(7);
    expect(cpu.threadsAppeared).toBe(3);
    expect(cpu.threadsVanished).toBe(2);
    expect(cpu.threadsUnreadable).toBe(1);
  });

  it('count a renderer that started in the window from zero', () => {
    const later = threadCpuBetween(
      sample(0, []),
      sample(2000, [processOf(30, 'renderer', 40, [[30, 'CrRendererMain', 40, 5]])]),
    );
    expect(later.byType.renderer?.byNamePct.CrRendererMain).toBeCloseTo(20, 10);
    expect(later.byType.renderer?.unattributedPct).toBe(0);
  });

  it('divide by the viewer count, busiest first', () => {
    const perViewer = threadCpuPerViewer(cpu, 'renderer', 2);
    expect(perViewer?.threads).toEqual([
      { name: 'CrRendererMain', cpuPctPerViewer: 8 },
      { name: 'WebRTC_Network', cpuPctPerViewer: 5 },
      { name: 'CompositorTileWorker', cpuPctPerViewer: 2.5 },
      { name: 'Media', cpuPctPerViewer: 2.5 },
    ]);
    expect(perViewer?.unattributedCpuPctPerViewer).toBe(4.5);
    expect(perViewer?.processesCpuPctPerViewer).toBe(22.5);
    expect(threadCpuPerViewer(cpu, 'gpu-process', 2)).toBeNull();
  });
});

describe('the thread table', () => {
  const trial = (viewers: number, arm: string, threads: [string, number][]): CostRow =>
    ({
      viewers,
      arm,
      rendererThreads: threads.map(([name, cpuPctPerViewer]) => ({ name, cpuPctPerViewer })),
      threadSampling: {
        rendererUnattributedCpuPctPerViewer: 0.1,
        rendererProcessesCpuPctPerViewer: threads.reduce((a, [, pct]) => a + pct, 0.1),
      },
    }) as unknown as CostRow;

  it('compare the arms by name, the busiest ten by name and the rest as "other"', () => {
    const many = Array.from({ length: 12 }, (_, i): [string, number] => [
      `T${String(i).padStart(2, '0')}`,
      0.5,
    ]);
    const table = threadTable(
      [
        trial(2, 'http', [['CrRendererMain', 2], ...many]),
        trial(2, 'mesh', [
          ['CrRendererMain', 4],
          ['WebRTC_Network', 3],
        ]),
      ],
      (r) => r.rendererThreads,
      (s) => s.rendererUnattributedCpuPctPerViewer,
      (s) => s.rendererProcessesCpuPctPerViewer,
    );
    const lines = table?.split('\n') ?? [];
    expect(lines[0]).toBe('| thread | 2 viewers, http → mesh |');
    expect(lines[2]).toBe('| `CrRendererMain` | 2.00 → 4.00 |');
    expect(lines[3]).toBe('| `WebRTC_Network` | 0.00 → 3.00 |');
    // 10 names, then the 4 of the twelve 0.5% threads that did not fit.
    expect(lines[12]).toBe('| other (4 names) | 2.00 → 0.00 |');
    expect(lines[13]).toBe('| threads that exited in the window | 0.10 → 0.10 |');
    expect(lines[14]).toBe('| all (the processes’ own total) | 8.10 → 7.10 |');
    expect(lines).toHaveLength(15);
  });

  it('say nothing when no trial read threads', () => {
    expect(
      threadTable(
        [],
        () => null,
        () => null,
        () => null,
      ),
    ).toBeNull();
  });
});
