// CPU and memory of the Chromium the benchmark drives, read from /proc (Linux): every process
// below this Node process whose executable is Chromium (the browser, its zygotes, the GPU and
// utility processes such as the network service, and the renderers, one per viewer page).
// CPU: utime + stime of each process (/proc/PID/stat), differenced between two samples.
// Memory: proportional set size (Pss in /proc/PID/smaps_rollup), so memory shared between the
// processes (the Chromium binary, shared libraries) is divided among them instead of counted N times.
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

const CLOCK_TICKS_PER_S = (() => {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const n = Number(r.stdout?.trim());
  return Number.isFinite(n) && n > 0 ? n : 100;
})();

function read(path) {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null; // the process exited meanwhile
  }
}

/** pid → { ppid, ticks } of every process, from /proc/PID/stat. */
function allProcesses() {
  const out = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = read(`/proc/${name}/stat`);
    if (stat === null) continue;
    // Fields after the command name (which may contain spaces and parentheses).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ppid = Number(fields[1]);
    const ticks = Number(fields[11]) + Number(fields[12]);
    out.set(Number(name), { ppid, ticks });
  }
  return out;
}

/** The process type Chromium gives a child (`--type=renderer`…), or "browser" for the main one. */
function chromiumType(pid) {
  let exe;
  try {
    exe = readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return null;
  }
  if (!/chrom/i.test(exe)) return null;
  const cmdline = read(`/proc/${pid}/cmdline`) ?? '';
  const m = /--type=([a-z-]+)/.exec(cmdline);
  if (m === null) return 'browser';
  if (m[1] === 'utility') {
    const sub = /--utility-sub-type=([A-Za-z.]+)/.exec(cmdline);
    return sub === null ? 'utility' : `utility:${sub[1].split('.').pop()}`;
  }
  return m[1];
}

function pssKb(pid) {
  const text = read(`/proc/${pid}/smaps_rollup`);
  if (text === null) return null;
  const m = /^Pss:\s+(\d+) kB/m.exec(text);
  return m === null ? null : Number(m[1]);
}

/**
 * One reading of every Chromium process under `rootPid`: [{ pid, type, cpuS, pssKb? }].
 * `withMemory` adds Pss (a costlier read, so the benchmark takes it less often).
 */
export function sampleChromium({ rootPid = process.pid, withMemory = false } = {}) {
  const procs = allProcesses();
  const children = new Map();
  for (const [pid, p] of procs) {
    const list = children.get(p.ppid) ?? [];
    list.push(pid);
    children.set(p.ppid, list);
  }
  const out = [];
  const stack = [...(children.get(rootPid) ?? [])];
  for (let guard = 0; stack.length > 0 && guard < 10_000; guard++) {
    const pid = /** @type {number} */ (stack.pop());
    stack.push(...(children.get(pid) ?? []));
    const type = chromiumType(pid);
    if (type === null) continue;
    const entry = { pid, type, cpuS: (procs.get(pid)?.ticks ?? 0) / CLOCK_TICKS_PER_S };
    if (withMemory) entry.pssKb = pssKb(pid);
    out.push(entry);
  }
  return { atMs: Date.now(), processes: out };
}

/** Busy and total jiffies of the whole machine (/proc/stat), for "was the machine saturated". */
export function machineCpu() {
  const line = (read('/proc/stat') ?? '').split('\n')[0] ?? '';
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);
  return { atMs: Date.now(), busy: total - idle, total };
}

/**
 * CPU used between two samples, % of one core: all Chromium processes, and renderers only. A
 * process present in `b` but not in `a` started in between and counts from zero; one gone by `b`
 * is missed for its last interval (at most one sampling interval of one process).
 */
export function cpuBetween(a, b) {
  const before = new Map(a.processes.map((p) => [p.pid, p.cpuS]));
  const wallS = (b.atMs - a.atMs) / 1000;
  let all = 0;
  let renderers = 0;
  for (const p of b.processes) {
    const used = Math.max(0, p.cpuS - (before.get(p.pid) ?? 0));
    all += used;
    if (p.type === 'renderer') renderers += used;
  }
  return {
    wallS,
    allPct: wallS > 0 ? (100 * all) / wallS : null,
    renderersPct: wallS > 0 ? (100 * renderers) / wallS : null,
    renderers: b.processes.filter((p) => p.type === 'renderer').length,
    processes: b.processes.length,
  };
}

/** Pss totals of one sample taken with memory, MiB: all Chromium processes and renderers only. */
export function memoryOf(sample) {
  let all = 0;
  let renderers = 0;
  for (const p of sample.processes) {
    if (typeof p.pssKb !== 'number') continue;
    all += p.pssKb;
    if (p.type === 'renderer') renderers += p.pssKb;
  }
  return { allMiB: all / 1024, renderersMiB: renderers / 1024 };
}

/** Machine CPU busy % (all cores = 100 × cores) between two machineCpu() readings. */
export function machineBusyPct(a, b, cores) {
  const total = b.total - a.total;
  return total > 0 ? (100 * cores * (b.busy - a.busy)) / total : null;
}
