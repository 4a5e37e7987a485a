/**
 * CPU and memory of the browsers the benchmarks drive, read through the tools' one /proc reader
 * (lib/proc.ts): every process below this Node process whose executable is Chromium (the browser,
 * its zygotes, the GPU and utility processes such as the network service, and the renderers, one
 * per viewer page) or Firefox (the parent process, the socket process, media and utility
 * processes, and the web content processes, which count as renderers: they run the pages).
 * CPU: utime + stime of each process (/proc/PID/stat), differenced between two samples.
 * Memory: proportional set size (Pss in /proc/PID/smaps_rollup), so memory shared between the
 * processes (the Chromium binary, shared libraries) is divided among them instead of counted N times.
 */
import {
  allProcesses,
  descendantsOf,
  machineTimes,
  privateFootprintKb,
  processCommand,
  pssKb,
} from '../lib/proc.js';
import type { BrowserName } from '../viewers/browser.js';

export interface BrowserProcess {
  readonly pid: number;
  readonly browser: BrowserName;
  /**
   * Chromium's process type (`renderer`, `gpu-process`, `utility:NetworkService`…) or `browser`;
   * for Firefox `renderer` (its web content processes), `browser` (the parent) or `firefox:TYPE`
   * (`firefox:socket`, `firefox:rdd`…).
   */
  readonly type: string;
  /** CPU time so far, s. */
  readonly cpuS: number;
  /** Proportional set size, kB, in samples taken with memory (null if it could not be read). */
  readonly pssKb?: number | null;
  /** Private footprint (RssAnon + VmSwap), kB, in samples taken with memory (null if unreadable). */
  readonly footprintKb?: number | null;
}

export interface BrowserSample {
  readonly atMs: number;
  readonly processes: readonly BrowserProcess[];
}

/**
 * The browser and process type of a process, or null if it is neither browser's. Chromium gives a
 * child `--type=renderer`…; Firefox gives a child `-contentproc … TYPE`, TYPE last (`tab` for web
 * content: the pages).
 */
function browserProcessOf(pid: number): { browser: BrowserName; type: string } | null {
  const command = processCommand(pid);
  return command === null ? null : classifyBrowserProcess(command.executable, command.argv);
}

/** The browser and process type of an executable and its command line (browserProcessOf's rule). */
export function classifyBrowserProcess(
  executable: string,
  argv: readonly string[],
): { browser: BrowserName; type: string } | null {
  if (/firefox/i.test(executable)) {
    // A child of Firefox's fork server rewrites its command line as one space-separated string.
    const words = argv
      .join(' ')
      .split(/\s+/)
      .filter((w) => w !== '');
    if (!words.includes('-contentproc')) return { browser: 'firefox', type: 'browser' };
    const kind = words[words.length - 1] ?? 'unknown';
    return { browser: 'firefox', type: kind === 'tab' ? 'renderer' : `firefox:${kind}` };
  }
  if (!/chrom/i.test(executable)) return null;
  return { browser: 'chromium', type: chromiumType(argv) };
}

/**
 * The process type Chromium gives a child (`--type=renderer`…), or "browser" for the main one. A
 * renderer of the browser's own UI (`--top-chrome-webui`) is `renderer:webui`, not a page's: one
 * per browser whatever the pages, ~56 MiB of proportional size beside 16 pages, which counted as
 * renderers had added ~3.5 MiB to every viewer's memory at 16 viewers and ~7 at 8, in both arms.
 */
function chromiumType(argv: readonly string[]): string {
  const cmdline = argv.join('\0');
  const type = /--type=([a-z-]+)/.exec(cmdline)?.[1];
  if (type === undefined) return 'browser';
  // A zygote's child rewrites its command line as one space-separated string: match the word.
  if (type === 'renderer' && /(^|[\0 ])--top-chrome-webui([\0 ]|$)/.test(cmdline)) return 'renderer:webui';
  if (type === 'utility') {
    const sub = /--utility-sub-type=([A-Za-z.]+)/.exec(cmdline)?.[1];
    return sub === undefined ? 'utility' : `utility:${sub.split('.').pop() ?? sub}`;
  }
  return type;
}

/**
 * One reading of every Chromium and Firefox process under `rootPid`. `withMemory` adds Pss (a
 * costlier read, so the benchmark takes it less often).
 */
export function sampleBrowsers({
  rootPid = process.pid,
  withMemory = false,
}: { rootPid?: number; withMemory?: boolean } = {}): BrowserSample {
  const processes = allProcesses();
  const out: BrowserProcess[] = [];
  for (const pid of descendantsOf(rootPid, processes)) {
    const kind = browserProcessOf(pid);
    if (kind === null) continue;
    const cpuS = processes.get(pid)?.cpuSeconds ?? 0;
    out.push(
      withMemory
        ? { pid, ...kind, cpuS, pssKb: pssKb(pid), footprintKb: privateFootprintKb(pid) }
        : { pid, ...kind, cpuS },
    );
  }
  return { atMs: Date.now(), processes: out };
}

/** The part of a sample that is one browser's processes. */
export function ofBrowser(sample: BrowserSample, browser: BrowserName): BrowserSample {
  return { atMs: sample.atMs, processes: sample.processes.filter((p) => p.browser === browser) };
}

/** Busy and total jiffies of the whole machine, for "was the machine saturated". */
export function machineCpu(): { atMs: number; busy: number; total: number } {
  return { atMs: Date.now(), ...machineTimes() };
}

export interface CpuUse {
  readonly wallS: number;
  /** % of one core, all Chromium processes. */
  readonly allPct: number | null;
  /** % of one core, renderers only. */
  readonly renderersPct: number | null;
  readonly renderers: number;
  readonly processes: number;
  /**
   * % of one core by Chromium process type (`renderer`, `browser`, `gpu-process`,
   * `utility:NetworkService`…), summed over the processes of that type: the WebRTC sockets of every
   * page are the network service's, not their renderer's.
   */
  readonly byTypePct: Readonly<Record<string, number>>;
}

/**
 * CPU used between two samples, % of one core: all Chromium processes, and renderers only. A
 * process present in `b` but not in `a` started in between and counts from zero; one gone by `b`
 * is missed for its last interval (at most one sampling interval of one process).
 */
export function cpuBetween(a: BrowserSample, b: BrowserSample): CpuUse {
  const before = new Map(a.processes.map((p) => [p.pid, p.cpuS]));
  const wallS = (b.atMs - a.atMs) / 1000;
  let all = 0;
  let renderers = 0;
  const byType: Record<string, number> = {};
  for (const p of b.processes) {
    const used = Math.max(0, p.cpuS - (before.get(p.pid) ?? 0));
    all += used;
    if (p.type === 'renderer') renderers += used;
    byType[p.type] = (byType[p.type] ?? 0) + used;
  }
  return {
    wallS,
    allPct: wallS > 0 ? (100 * all) / wallS : null,
    renderersPct: wallS > 0 ? (100 * renderers) / wallS : null,
    renderers: b.processes.filter((p) => p.type === 'renderer').length,
    processes: b.processes.length,
    byTypePct: Object.fromEntries(
      Object.entries(byType).map(([type, used]) => [type, wallS > 0 ? (100 * used) / wallS : 0]),
    ),
  };
}

/**
 * Totals of one sample taken with memory, MiB: Pss of all Chromium processes and of renderers only,
 * and the renderers' private footprint.
 */
export function memoryOf(sample: BrowserSample): {
  allMiB: number;
  renderersMiB: number;
  renderersFootprintMiB: number;
} {
  let all = 0;
  let renderers = 0;
  let renderersFootprint = 0;
  for (const p of sample.processes) {
    if (p.type === 'renderer' && typeof p.footprintKb === 'number') renderersFootprint += p.footprintKb;
    if (typeof p.pssKb !== 'number') continue;
    all += p.pssKb;
    if (p.type === 'renderer') renderers += p.pssKb;
  }
  return {
    allMiB: all / 1024,
    renderersMiB: renderers / 1024,
    renderersFootprintMiB: renderersFootprint / 1024,
  };
}

/** Machine CPU busy % (all cores = 100 × cores) between two machineCpu() readings. */
export function machineBusyPct(
  a: { busy: number; total: number },
  b: { busy: number; total: number },
  cores: number,
): number | null {
  const total = b.total - a.total;
  return total > 0 ? (100 * cores * (b.busy - a.busy)) / total : null;
}
