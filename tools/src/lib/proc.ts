/**
 * The one reader of Linux's /proc for the tools: CPU time, memory and limits of processes and the
 * machine. Every reader returns null (never throws) when the process has exited meanwhile or /proc
 * is not there, because samplers race with the processes they watch.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

function read(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/** Kernel clock ticks per second (`getconf CLK_TCK`), the unit of /proc/PID/stat's CPU times. */
export const CLOCK_TICKS_PER_S: number = (() => {
  const result = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const ticks = Number(result.stdout.trim());
  // 100 is Linux's USER_HZ on every architecture Node runs on; getconf is only missing in odd images.
  return Number.isFinite(ticks) && ticks > 0 ? ticks : 100;
})();

export interface ProcessStat {
  readonly pid: number;
  readonly parentPid: number;
  /** User + system CPU time so far, in seconds. */
  readonly cpuSeconds: number;
}

/** The fields of a /proc/PID/stat or /proc/PID/task/TID/stat line the tools use. */
export interface StatFields {
  /** The command (a thread's name for a task), as the kernel keeps it: at most 15 bytes. */
  readonly comm: string;
  readonly parentPid: number;
  /** utime + stime, in clock ticks. */
  readonly cpuTicks: number;
  /** When the process or thread started, in clock ticks after boot: with the id, it names one. */
  readonly startTicks: number;
}

/** One stat line's fields, or null if it is not one (a truncated read). */
export function parseStatLine(stat: string): StatFields | null {
  const open = stat.indexOf('(');
  const close = stat.lastIndexOf(')');
  if (open < 0 || close < open) return null;
  // The command name may hold spaces and parentheses; the fields after its closing one do not.
  const fields = stat.slice(close + 2).split(' ');
  const parentPid = Number(fields[1]);
  const cpuTicks = Number(fields[11]) + Number(fields[12]);
  const startTicks = Number(fields[19]);
  if (![parentPid, cpuTicks, startTicks].every((v) => Number.isFinite(v) && v >= 0)) return null;
  return { comm: stat.slice(open + 1, close), parentPid, cpuTicks, startTicks };
}

/** /proc/PID/stat of one process, or null once it is gone. */
export function processStat(pid: number): ProcessStat | null {
  const stat = read(`/proc/${pid}/stat`);
  const fields = stat === null ? null : parseStatLine(stat);
  if (fields === null) return null;
  return { pid, parentPid: fields.parentPid, cpuSeconds: fields.cpuTicks / CLOCK_TICKS_PER_S };
}

export interface ThreadStat {
  readonly tid: number;
  /** The name the thread gave itself (stat's command field), truncated to 15 bytes. */
  readonly name: string;
  /** User + system CPU time of this thread so far, in seconds. */
  readonly cpuSeconds: number;
  readonly startTicks: number;
}

export interface ProcessThreads {
  /** The whole process's CPU time so far, s, read just before its threads: it includes threads that have exited. */
  readonly cpuSeconds: number;
  readonly threads: readonly ThreadStat[];
  /** Threads listed in /proc/PID/task but gone (or unreadable) by the time their stat was read. */
  readonly unreadable: number;
}

/** Every thread of one process with its CPU time, or null once the process is gone. */
export function processThreads(pid: number): ProcessThreads | null {
  const own = processStat(pid);
  if (own === null) return null;
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  const threads: ThreadStat[] = [];
  let unreadable = 0;
  for (const tid of tids) {
    const text = read(`/proc/${pid}/task/${tid}/stat`);
    const fields = text === null ? null : parseStatLine(text);
    if (!/^\d+$/.test(tid) || fields === null) {
      unreadable++;
      continue;
    }
    threads.push({
      tid: Number(tid),
      // stat's command field is the thread's name, the same 15 bytes as /proc/…/comm.
      name: fields.comm,
      cpuSeconds: fields.cpuTicks / CLOCK_TICKS_PER_S,
      startTicks: fields.startTicks,
    });
  }
  return { cpuSeconds: own.cpuSeconds, threads, unreadable };
}

/** Every process this one can see, by pid. */
export function allProcesses(): Map<number, ProcessStat> {
  const out = new Map<number, ProcessStat>();
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return out;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const stat = processStat(Number(name));
    if (stat !== null) out.set(stat.pid, stat);
  }
  return out;
}

/** The pids of `rootPid`'s descendants (children, grandchildren…), from one snapshot of /proc. */
export function descendantsOf(rootPid: number, processes = allProcesses()): number[] {
  const children = new Map<number, number[]>();
  for (const stat of processes.values()) {
    const list = children.get(stat.parentPid) ?? [];
    list.push(stat.pid);
    children.set(stat.parentPid, list);
  }
  const out: number[] = [];
  const stack = [...(children.get(rootPid) ?? [])];
  for (let pid = stack.pop(); pid !== undefined; pid = stack.pop()) {
    out.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return out;
}

function statusField(pid: number, field: string): number | null {
  const text = read(`/proc/${pid}/status`);
  if (text === null) return null;
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return match?.[1] === undefined ? null : Number(match[1]);
}

/**
 * Private footprint in kB: resident anonymous memory plus swap (RssAnon + VmSwap), which is how
 * Chromium computes a process's private footprint on Linux (its task manager's "memory footprint";
 * checked against its memory-infra dumps), or null. Unlike Pss it counts anonymous pages shared
 * between processes (copy-on-write after a fork) in full in each, and file-backed pages not at all.
 */
export function privateFootprintKb(pid: number): number | null {
  const anon = statusField(pid, 'RssAnon');
  return anon === null ? null : anon + (statusField(pid, 'VmSwap') ?? 0);
}

/** Resident set size in kB (VmRSS), or null. */
export function rssKb(pid: number): number | null {
  return statusField(pid, 'VmRSS');
}

/** Peak resident set size in kB (VmHWM), or null. */
export function peakRssKb(pid: number): number | null {
  return statusField(pid, 'VmHWM');
}

/**
 * Proportional set size in kB (smaps_rollup's Pss): memory shared between processes (a browser's
 * binary and libraries) divided among them rather than counted once per process. Costlier to read
 * than RSS.
 */
export function pssKb(pid: number): number | null {
  const text = read(`/proc/${pid}/smaps_rollup`);
  if (text === null) return null;
  const match = /^Pss:\s+(\d+) kB/m.exec(text);
  return match?.[1] === undefined ? null : Number(match[1]);
}

/** The process's soft limit on open files, or null. */
export function openFilesLimit(pid: number): number | null {
  const text = read(`/proc/${pid}/limits`);
  const match = text === null ? null : /Max open files\s+(\d+)/.exec(text);
  return match?.[1] === undefined ? null : Number(match[1]);
}

/** The executable's path and command line of a process, or null once it is gone. */
export function processCommand(pid: number): { executable: string; argv: string[] } | null {
  let executable: string;
  try {
    executable = readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return null;
  }
  const cmdline = read(`/proc/${pid}/cmdline`);
  if (cmdline === null) return null;
  return { executable, argv: cmdline.split('\0').filter((arg) => arg !== '') };
}

export interface CoreTimes {
  /** Jiffies spent neither idle nor waiting for I/O. */
  readonly busy: number;
  readonly total: number;
}

/** Busy and total jiffies per core from /proc/stat (to see load that is not ours), by core index. */
export function coreTimes(): Map<number, CoreTimes> {
  const cores = new Map<number, CoreTimes>();
  const text = read('/proc/stat');
  if (text === null) return cores;
  for (const line of text.split('\n')) {
    const match = /^cpu(\d+) (.*)$/.exec(line);
    if (match?.[1] === undefined || match[2] === undefined) continue;
    const v = match[2].trim().split(/\s+/).map(Number);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    cores.set(Number(match[1]), { busy: total - (v[3] ?? 0) - (v[4] ?? 0), total });
  }
  return cores;
}

/**
 * Busy and total jiffies of the whole machine, from /proc/stat's first (`cpu`) line: every field
 * counted in the total, idle and iowait not counted as busy. Zeros when /proc is not there.
 */
export function machineTimes(): CoreTimes {
  const line = (read('/proc/stat') ?? '').split('\n')[0] ?? '';
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);
  return { busy: total - idle, total };
}

/** The CPU's model name (/proc/cpuinfo), or null. */
export function cpuModel(): string | null {
  const text = read('/proc/cpuinfo');
  return (text === null ? null : /model name\s*:\s*(.*)/.exec(text)?.[1]?.trim()) ?? null;
}
