/**
 * CPU of Chromium's processes by thread (bench:cost): which of a renderer's threads take its CPU
 * (the page's main thread, WebRTC's network and signalling threads, media, the compositor, the
 * thread pool) and the same for the network service. Read through lib/proc.ts from
 * /proc/PID/task/TID at the start and the end of a window, and grouped by thread name, so that the
 * figures of many renderers add up name by name.
 */
import { processThreads, type ProcessThreads } from '../lib/proc.js';
import type { BrowserSample } from './browser-stats.js';

/** The process types whose threads are read: the viewers' renderers and the WebRTC sockets' process. */
export const THREAD_PROCESS_TYPES: readonly string[] = ['renderer', 'utility:NetworkService'];

/**
 * What a process's main thread (tid = pid) is reported as. Chromium names its main threads
 * (CrRendererMain, CrBrowserMain…) only for itself: on Linux it leaves the kernel's name alone,
 * which would rename the process, so /proc shows the executable's name ("chromium").
 */
export const MAIN_THREAD = '(main thread)';

export interface SampledThread {
  /** tid and start time: a tid the kernel gave again to a new thread is another thread. */
  readonly key: string;
  readonly name: string;
  /** CPU time so far, s. */
  readonly cpuS: number;
}

export interface SampledProcess {
  readonly pid: number;
  readonly type: string;
  /** The whole process's CPU time so far, s (threads that have exited included). */
  readonly cpuS: number;
  readonly threads: readonly SampledThread[];
}

export interface ThreadSample {
  readonly atMs: number;
  readonly processes: readonly SampledProcess[];
  /** Processes of the browser sample gone before their threads could be read. */
  readonly processesGone: number;
  /** Threads listed but gone, or unreadable, by the time their stat was read. */
  readonly threadsUnreadable: number;
}

/**
 * The threads of the processes of `types` in a browser sample. A process or thread that exits
 * between being listed and being read is skipped and counted, never thrown on. `read` is
 * lib/proc.ts's reader (a stand-in in tests).
 */
export function sampleThreads(
  sample: BrowserSample,
  {
    types = THREAD_PROCESS_TYPES,
    read = processThreads,
    now = Date.now,
  }: {
    types?: readonly string[];
    read?: (pid: number) => ProcessThreads | null;
    now?: () => number;
  } = {},
): ThreadSample {
  const processes: SampledProcess[] = [];
  let processesGone = 0;
  let threadsUnreadable = 0;
  for (const p of sample.processes) {
    if (!types.includes(p.type)) continue;
    const found = read(p.pid);
    if (found === null) {
      processesGone++;
      continue;
    }
    threadsUnreadable += found.unreadable;
    processes.push({
      pid: p.pid,
      type: p.type,
      cpuS: found.cpuSeconds,
      threads: found.threads.map((t) => ({
        key: `${t.tid}@${t.startTicks}`,
        name: t.tid === p.pid ? MAIN_THREAD : t.name,
        cpuS: t.cpuSeconds,
      })),
    });
  }
  return { atMs: now(), processes, processesGone, threadsUnreadable };
}

/**
 * The name a thread's CPU is reported under: its name without a trailing number, so that numbered
 * threads of one kind ("CompositorTileWorker1", "Worker 3", "pool-12") make one row. Chromium's
 * own long names arrive already cut to 15 bytes by the kernel ("ThreadPoolForeg" for every
 * ThreadPoolForegroundWorker), which merges them the same way.
 */
export function threadGroupName(comm: string): string {
  const trimmed = comm.trim();
  const stripped = trimmed.replace(/[\s_#.:/-]*\d+$/, '');
  return stripped === '' ? trimmed : stripped;
}

export interface ThreadCpuOfType {
  /** % of one core by thread name (threadGroupName), summed over the processes of the type. */
  readonly byNamePct: Readonly<Record<string, number>>;
  /**
   * % of one core the processes used beyond what their threads at the end account for: threads
   * that exited during the window (a process's own counter keeps their time, the task list loses
   * them) and threads that could not be read at the end.
   */
  readonly unattributedPct: number;
  /** % of one core of the processes themselves (/proc/PID/stat), exited threads included. */
  readonly processesPct: number;
  readonly processes: number;
}

export interface ThreadCpu {
  readonly wallS: number;
  readonly byType: Readonly<Record<string, ThreadCpuOfType>>;
  readonly threadsAtStart: number;
  readonly threadsAtEnd: number;
  /** Threads at the end that were not there at the start: counted from 0. */
  readonly threadsAppeared: number;
  /** Threads at the start gone by the end: their time in the window is not attributed to a name. */
  readonly threadsVanished: number;
  /** Threads that could not be read, at the start and the end together (skipped). */
  readonly threadsUnreadable: number;
  /** Processes gone before their threads were read, at the start and the end together (skipped). */
  readonly processesGone: number;
}

/**
 * CPU used by thread name between two thread samples, % of one core, per process type. A thread
 * or process present at the end but not at the start started in between and counts from zero; one
 * gone by the end is lost to its name (a gone thread's time still shows in `unattributedPct`, a
 * gone process's nowhere, as in cpuBetween).
 */
export function threadCpuBetween(a: ThreadSample, b: ThreadSample): ThreadCpu {
  const wallS = (b.atMs - a.atMs) / 1000;
  const pctOf = (seconds: number): number => (wallS > 0 ? (100 * seconds) / wallS : 0);
  const before = new Map(a.processes.map((p) => [p.pid, p]));
  const threadsBefore = new Map(a.processes.flatMap((p) => p.threads.map((t) => [t.key, t.cpuS] as const)));
  const threadsAfter = new Set(b.processes.flatMap((p) => p.threads.map((t) => t.key)));
  const totals = new Map<
    string,
    { byName: Map<string, number>; threadsS: number; processS: number; n: number }
  >();
  let appeared = 0;
  for (const p of b.processes) {
    const start = before.get(p.pid);
    // A pid reused by a process of another type is another process: it counts from zero.
    const processFrom = start !== undefined && start.type === p.type ? start.cpuS : 0;
    const total = totals.get(p.type) ?? { byName: new Map<string, number>(), threadsS: 0, processS: 0, n: 0 };
    totals.set(p.type, total);
    total.n++;
    total.processS += Math.max(0, p.cpuS - processFrom);
    for (const t of p.threads) {
      const from = threadsBefore.get(t.key);
      if (from === undefined) appeared++;
      const used = Math.max(0, t.cpuS - (from ?? 0));
      const name = threadGroupName(t.name);
      total.byName.set(name, (total.byName.get(name) ?? 0) + used);
      total.threadsS += used;
    }
  }
  const vanished = [...threadsBefore.keys()].filter((key) => !threadsAfter.has(key)).length;
  const byType: Record<string, ThreadCpuOfType> = {};
  for (const [type, total] of totals) {
    byType[type] = {
      byNamePct: Object.fromEntries([...total.byName].map(([name, s]) => [name, pctOf(s)])),
      unattributedPct: pctOf(Math.max(0, total.processS - total.threadsS)),
      processesPct: pctOf(total.processS),
      processes: total.n,
    };
  }
  return {
    wallS,
    byType,
    threadsAtStart: threadsBefore.size,
    threadsAtEnd: threadsAfter.size,
    threadsAppeared: appeared,
    threadsVanished: vanished,
    threadsUnreadable: a.threadsUnreadable + b.threadsUnreadable,
    processesGone: a.processesGone + b.processesGone,
  };
}

export interface ThreadCpuRow {
  readonly name: string;
  readonly cpuPctPerViewer: number;
}

export interface ThreadCpuPerViewer {
  /** Every thread name of the type, busiest first, % of one core ÷ viewers. */
  readonly threads: readonly ThreadCpuRow[];
  /** Time of threads that exited or could not be read at the end, % of one core ÷ viewers. */
  readonly unattributedCpuPctPerViewer: number;
  /** The processes' own total, % of one core ÷ viewers: the rows above add up to it. */
  readonly processesCpuPctPerViewer: number;
}

/**
 * One process type's thread CPU divided by the viewer count (the renderers summed over the
 * viewers; the one network service shared by them), or null if no process of the type was read.
 */
export function threadCpuPerViewer(cpu: ThreadCpu, type: string, viewers: number): ThreadCpuPerViewer | null {
  const ofType = cpu.byType[type];
  if (ofType === undefined || viewers <= 0) return null;
  const perViewer = (pct: number): number => Math.round((100 * pct) / viewers) / 100;
  return {
    threads: Object.entries(ofType.byNamePct)
      .map(([name, pct]) => ({ name, cpuPctPerViewer: perViewer(pct) }))
      .sort((x, y) => y.cpuPctPerViewer - x.cpuPctPerViewer || x.name.localeCompare(y.name)),
    unattributedCpuPctPerViewer: perViewer(ofType.unattributedPct),
    processesCpuPctPerViewer: perViewer(ofType.processesPct),
  };
}
