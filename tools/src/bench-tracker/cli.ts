#!/usr/bin/env node
/**
 * `npm run bench:tracker -- --peers P --join-rate R --duration S --out DIR`: the tracker load
 * benchmark. Starts the built tracker pinned to one core, and load generator processes (client.ts)
 * pinned to the other, all on loopback. The generators open P WebSocket sessions at R joins/s over
 * swarms of --swarm-size viewers, then hold them for S seconds while relaying offer-sized signals
 * between random pairs of the same swarm and asking for bootstrap peers. This process samples the
 * tracker's CPU and RSS from /proc every second and writes DIR/result.json, DIR/report.md and
 * DIR/*.svg. `--sweep NAME=V1,V2,…` runs one point per value (each with a fresh tracker) and reports
 * where the tracker bends. Progress goes to stderr.
 */
import { spawn, spawnSync, type ChildProcessByStdio } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { availableParallelism, cpus, loadavg, release } from 'node:os';
import { join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Readable, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseCommandLine } from '../lib/args.js';
import { fromRoot, root } from '../lib/paths.js';
import { coreTimes, cpuModel, openFilesLimit, processStat, rssKb, type CoreTimes } from '../lib/proc.js';
import { forEachLine, stopProcess, tieToParent } from '../lib/process.js';
import { mean, percentile, round } from '../lib/stats.js';
import {
  BENCH_TRACKER_FLAGS,
  BENCH_TRACKER_USAGE,
  benchTrackerOptions,
  fromCaller,
  type BenchPoint,
} from './options.js';
import { FD_OVERHEAD, plan } from './plan.js';
import type { ProbeReport } from './probe.js';
import type { GeneratorReport, JoinedReport, ResultReport, Tally, TickReport } from './protocol.js';
import {
  CPU_SATURATED_PCT,
  JOIN_RATE_TOLERANCE,
  writeOutputs,
  writeSweep,
  type ChildExit,
  type Machine,
  type PointResult,
  type RunPhase,
  type SweepPoint,
  type TimelineColumn,
  type TimelineSample,
} from './report.js';

/** Counted before this process pins itself to one core (which narrows what Node reports). */
const machineCores = availableParallelism();
const opts = parseCommandLine('bench:tracker', BENCH_TRACKER_USAGE, BENCH_TRACKER_FLAGS, (parsed) =>
  benchTrackerOptions(parsed, machineCores),
);
const out = fromCaller(opts.out ?? join(root, 'out', 'tracker-bench'));
const trackerCli =
  opts.trackerCli === null ? fromRoot('tracker', 'dist', 'cli.js') : fromCaller(opts.trackerCli);
// The generator and the probe are this directory's siblings, built with it.
const clientScript = fileURLToPath(new URL('./client.js', import.meta.url));
const probeScript = fileURLToPath(new URL('./probe.js', import.meta.url));
const progress = (text: string): void => {
  process.stderr.write(`bench:tracker: ${text}\n`);
};

const TRACKER_START_TIMEOUT_MS = 20_000;
const JOIN_TIMEOUT_MS = 10_000;
const RELAY_TIMEOUT_MS = 5_000;
const STOP_GRACE_MS = 5_000;
/** Slack of a run's watchdog beyond the sum of its phases' limits. */
const RUN_LIMIT_SLACK_MS = 30_000;
/** Between two points of a sweep: the kernel finishes closing the last point's sockets. */
const SWEEP_PAUSE_MS = 3000;
/** Lines of the tracker's (and each generator's) output kept for the report. */
const LOG_TAIL_LINES = 20;
const SAMPLE_MS = 1000;
/** How much other load on the tracker's core earns a caveat, in % of the core. */
const OTHER_LOAD_CAVEAT_PCT = 5;

// ─── processes ──────────────────────────────────────────────────────────────────────────────────

type Child = ChildProcessByStdio<Writable, Readable, Readable>;

/** Every child still running, killed on exit or interrupt. */
const children = new Set<Child>();

function killAll(): void {
  for (const child of children) child.kill('SIGKILL');
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    progress(`${signal}: killing the tracker and the load generators`);
    killAll();
    process.exit(130);
  });
process.on('exit', killAll);

/** The shell prefix that raises the open-files limit as far as allowed. */
const ULIMIT = `ulimit -n ${opts.fdLimit} 2>/dev/null || ulimit -n "$(ulimit -Hn)"`;

/**
 * Spawns `command args` pinned to `core`, with the open-files limit raised as far as allowed: the
 * wanted limit if this process may raise the hard limit (CAP_SYS_RESOURCE), else the hard limit.
 */
function spawnPinned(core: number, command: string, args: readonly string[], env: NodeJS.ProcessEnv): Child {
  const nice = opts.nice === 0 ? '' : `nice -n ${opts.nice} `;
  const script = `${ULIMIT}; exec ${nice}taskset -c ${core} "$@"`;
  const child = spawn('sh', ['-c', script, 'sh', command, ...args], {
    cwd: root,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  tieToParent(child);
  return child;
}

/** The open-files limit a child of ours gets (what spawnPinned's `ulimit` ends up with). */
function childFdLimit(): number {
  const r = spawnSync('sh', ['-c', `${ULIMIT}; ulimit -n`], { encoding: 'utf8' });
  const n = Number(r.stdout.trim());
  return Number.isFinite(n) ? n : 1024;
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => {
        done(port);
      });
    });
  });
}

/** CPU seconds (user + system) of a process, or null once it is gone. */
const cpuSeconds = (pid: number | undefined): number | null =>
  pid === undefined ? null : (processStat(pid)?.cpuSeconds ?? null);

function rssMB(pid: number | undefined): number | null {
  const kB = pid === undefined ? null : rssKb(pid);
  return kB === null ? null : kB / 1024;
}

interface Health {
  readonly connections?: number;
}

async function healthz(port: number): Promise<Health | null> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) });
    if (!res.ok) return null;
    return (await res.json()) as Health;
  } catch {
    return null;
  }
}

// ─── statistics ─────────────────────────────────────────────────────────────────────────────────

const r1 = (x: number | null | undefined): number | null => round(x, 1);
const r2 = (x: number | null | undefined): number | null => round(x, 2);
const r3 = (x: number | null | undefined): number | null => round(x, 3);
/** The largest value, null when there is none (nearest rank at 100 %: no spread of a huge array). */
const maximum = (values: readonly number[]): number | null => percentile(values, 100);

function addTallies(into: Tally, from: Tally | undefined): void {
  for (const [key, n] of Object.entries(from ?? {})) into[key] = (into[key] ?? 0) + n;
}

// ─── one run ────────────────────────────────────────────────────────────────────────────────────

interface GeneratorState {
  readonly child: Child;
  readonly index: number;
  latest: TickReport | null;
  joined: JoinedReport | null;
  result: ResultReport | null;
  readonly stderr: string[];
  exit: ChildExit | null;
}

function pushTail(lines: string[], line: string): void {
  lines.push(line);
  if (lines.length > LOG_TAIL_LINES) lines.shift();
}

async function runPoint(point: BenchPoint, dir: string, label: string | null): Promise<PointResult> {
  const clientFdLimit = childFdLimit();
  const layout = plan(point, clientFdLimit, opts.clientProcs);
  // Twice the time the join rate needs, plus half a minute: a slow tracker still gets to finish.
  const joinLimitS = Math.ceil((point.peers / point.joinRate) * 2 + 30);
  const joinWaitMs = (joinLimitS + JOIN_TIMEOUT_MS / 1000 + 5) * 1000;
  const runLimitMs =
    TRACKER_START_TIMEOUT_MS +
    joinWaitMs +
    point.duration * 1000 +
    RELAY_TIMEOUT_MS +
    3 * STOP_GRACE_MS +
    RUN_LIMIT_SLACK_MS;
  const startedAt = Date.now();
  const loadBefore = loadavg();
  const tag = label === null ? '' : `[${label}] `;

  const port = await freePort();
  // Only our own CHUNKYCAST_* settings: a source stream or join secret from the shell would change what is measured.
  const env: NodeJS.ProcessEnv = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('CHUNKYCAST_')),
  );
  Object.assign(env, {
    CHUNKYCAST_MAX_CONNECTIONS_PER_ADDRESS: '0',
    CHUNKYCAST_MAX_MESSAGES_PER_SECOND: '0',
    CHUNKYCAST_MAX_CONNECTIONS: '0',
  });
  const tracker = spawnPinned(
    opts.trackerCore,
    process.execPath,
    [
      ...(opts.probe ? ['--import', pathToFileURL(probeScript).href] : []),
      trackerCli,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--log-level',
      'warn',
    ],
    env,
  );
  const trackerLog: string[] = [];
  let trackerWarnings = 0;
  forEachLine(tracker.stdout, (line) => {
    trackerWarnings++;
    pushTail(trackerLog, line.slice(0, 500));
  });
  /** The probe's reports since the last timeline sample. */
  let probes: ProbeReport[] = [];
  forEachLine(tracker.stderr, (line) => {
    if (line.startsWith('{"benchProbe"')) {
      try {
        probes.push((JSON.parse(line) as { benchProbe: ProbeReport }).benchProbe);
        return;
      } catch {
        // not a probe line after all: kept in the log below
      }
    }
    pushTail(trackerLog, `[stderr] ${line.slice(0, 500)}`);
  });
  // Set from the exit event, hence a holder rather than a local that narrowing would pin to null.
  const trackerState: { exit: ChildExit | null } = { exit: null };
  tracker.once('exit', (code, signal) => {
    trackerState.exit = { code, signal };
  });

  const watchdog = setTimeout(() => {
    progress(`${tag}run exceeded its ${Math.round(runLimitMs / 1000)} s limit; killing everything`);
    killAll();
    process.exit(1);
  }, runLimitMs);

  // The tracker logs "listening" at info level only; at warn it is ready once /healthz answers.
  const readyBy = Date.now() + TRACKER_START_TIMEOUT_MS;
  while ((await healthz(port)) === null) {
    if (trackerState.exit !== null || Date.now() > readyBy) {
      killAll();
      throw new Error(
        `the tracker did not answer /healthz within ${TRACKER_START_TIMEOUT_MS} ms ` +
          `(exit ${JSON.stringify(trackerState.exit)}):\n${trackerLog.join('\n')}`,
      );
    }
    await sleep(100);
  }
  const trackerFdLimit = tracker.pid === undefined ? null : openFilesLimit(tracker.pid);
  if (trackerFdLimit !== null && point.peers > trackerFdLimit - FD_OVERHEAD)
    progress(
      `${tag}warning: the tracker may open ${trackerFdLimit} files, so it cannot hold ${point.peers} sockets ` +
        `(Node itself keeps some 20 descriptors open); expect joins beyond that to be reset`,
    );
  progress(
    `${tag}tracker pid ${tracker.pid ?? '?'} on core ${opts.trackerCore} (open files ≤ ${trackerFdLimit ?? 'null'}); ` +
      `${layout.clients.length} generator(s) on core ${opts.clientCore}; ${point.peers} peers in ` +
      `${layout.swarmCount} swarm(s) at ${point.joinRate} joins/s, ${point.relaysPerSec} relays/s`,
  );

  // ── load generators ──
  /** Latency samples as the generators report them: by phase, and since the last timeline sample. */
  const holdRelayMs: number[] = [];
  const joinRelayMs: number[] = [];
  const joinMs: number[] = [];
  const bootstrapMs: number[] = [];
  let secondRelayMs: number[] = [];
  const url = `ws://127.0.0.1:${port}/ws`;
  const clients = layout.clients.map((c, i): GeneratorState => {
    const share = c.peers / point.peers;
    const child = spawnPinned(
      opts.clientCore,
      process.execPath,
      [
        clientScript,
        '--url',
        url,
        '--swarms',
        c.swarms.join(','),
        '--join-rate',
        String(point.joinRate * share),
        '--relays-per-sec',
        String(point.relaysPerSec * share),
        '--bootstraps-per-sec',
        String(point.bootstrapsPerSec * share),
        '--sdp-bytes',
        String(point.sdpBytes),
        '--join-timeout-ms',
        String(JOIN_TIMEOUT_MS),
        '--relay-timeout-ms',
        String(RELAY_TIMEOUT_MS),
        '--join-limit-s',
        String(joinLimitS),
        '--lifetime-s',
        String(Math.ceil(runLimitMs / 1000)),
      ],
      process.env,
    );
    const state: GeneratorState = {
      child,
      index: i,
      latest: null,
      joined: null,
      result: null,
      stderr: [],
      exit: null,
    };
    forEachLine(child.stdout, (line) => {
      let record: GeneratorReport;
      try {
        record = JSON.parse(line) as GeneratorReport;
      } catch {
        state.stderr.push(`[stdout] ${line.slice(0, 300)}`);
        return;
      }
      if (record.type === 'tick') {
        state.latest = record;
        for (const [ms, hold] of record.relayMs) (hold === 1 ? holdRelayMs : joinRelayMs).push(ms);
        for (const [ms] of record.relayMs) secondRelayMs.push(ms);
        joinMs.push(...record.joinMs);
        bootstrapMs.push(...record.bootstrapMs);
      } else if (record.type === 'joined') state.joined = record;
      else state.result = record;
    });
    forEachLine(child.stderr, (line) => {
      pushTail(state.stderr, line.slice(0, 300));
    });
    child.once('exit', (code, signal) => {
      state.exit = { code, signal };
    });
    return state;
  });

  // ── sampling, every second, of the tracker, the generators and the cores ──
  let phase: RunPhase = 'join';
  const timeline: TimelineSample[] = [];
  const t0 = Date.now();
  let prev: {
    at: number;
    trackerCpu: number;
    clientCpu: number[];
    cores: Map<number, CoreTimes>;
    welcomed: number;
    relaysReceived: number;
  } = {
    at: performance.now(),
    trackerCpu: cpuSeconds(tracker.pid) ?? 0,
    clientCpu: clients.map((c) => cpuSeconds(c.child.pid) ?? 0),
    cores: coreTimes(),
    welcomed: 0,
    relaysReceived: 0,
  };
  let healthBusy = false;
  let lastHealth: Health | null = null;
  const sample = (): void => {
    const at = performance.now();
    const seconds = (at - prev.at) / 1000;
    const trackerCpu = cpuSeconds(tracker.pid);
    const clientCpu = clients.map((c, i) => cpuSeconds(c.child.pid) ?? prev.clientCpu[i] ?? 0);
    const cores = coreTimes();
    const coreBusy = (core: number): number | null => {
      const a = prev.cores.get(core);
      const b = cores.get(core);
      return a === undefined || b === undefined || b.total === a.total
        ? null
        : (100 * (b.busy - a.busy)) / (b.total - a.total);
    };
    const latest = clients.map((c) => c.latest).filter((x): x is TickReport => x !== null);
    const welcomed = latest.reduce((a, c) => a + c.welcomed, 0);
    const relaysReceived = latest.reduce((a, c) => a + c.relaysReceived, 0);
    const second = secondRelayMs;
    secondRelayMs = [];
    const trackerCpuPct = trackerCpu === null ? null : (100 * (trackerCpu - prev.trackerCpu)) / seconds;
    const core0 = coreBusy(opts.trackerCore);
    const probeMax = (key: 'loopDelayMaxMs' | 'gcMaxMs'): number | null =>
      probes.length === 0 ? null : Math.max(...probes.map((p) => p[key] ?? 0));
    const lastProbe = probes[probes.length - 1];
    const row: TimelineSample = {
      tS: r1((Date.now() - t0) / 1000),
      phase,
      trackerCpuPct: r1(trackerCpuPct),
      trackerRssMB: r1(rssMB(tracker.pid)),
      clientCpuPct: r1((100 * clientCpu.reduce((a, v, i) => a + v - (prev.clientCpu[i] ?? 0), 0)) / seconds),
      trackerCoreBusyPct: r1(core0),
      clientCoreBusyPct: r1(coreBusy(opts.clientCore)),
      trackerCoreOtherPct:
        core0 === null || trackerCpuPct === null ? null : r1(Math.max(0, core0 - trackerCpuPct)),
      sessions: latest.reduce((a, c) => a + c.held, 0),
      trackerConnections: lastHealth?.connections ?? null,
      joinsPerSec: r1((welcomed - prev.welcomed) / seconds),
      relaysPerSec: r1((relaysReceived - prev.relaysReceived) / seconds),
      relayMsP50: r3(percentile(second, 50)),
      relayMsP99: r3(percentile(second, 99)),
      relayMsMax: r3(maximum(second)),
      clientLoopDelayP99Ms: latest.length === 0 ? null : Math.max(...latest.map((c) => c.loopDelayP99Ms)),
      clientLoopDelayMaxMs: latest.length === 0 ? null : Math.max(...latest.map((c) => c.loopDelayMaxMs)),
      trackerLoopDelayMaxMs: probeMax('loopDelayMaxMs'),
      trackerGcMs: probes.length === 0 ? null : r1(probes.reduce((a, p) => a + (p.gcMs ?? 0), 0)),
      trackerGcMaxMs: probeMax('gcMaxMs'),
      trackerHeapMB: lastProbe === undefined ? null : r1(lastProbe.heapUsedMB),
    };
    timeline.push(row);
    probes = [];
    prev = { at, trackerCpu: trackerCpu ?? prev.trackerCpu, clientCpu, cores, welcomed, relaysReceived };
    progress(
      `${tag}${String(row.tS).padStart(5)} s ${phase.padEnd(4)} sessions ${row.sessions} ` +
        `joins/s ${row.joinsPerSec ?? 'null'} relays/s ${row.relaysPerSec ?? 'null'} p99 ${row.relayMsP99 ?? '-'} ms ` +
        `tracker ${row.trackerCpuPct ?? 'null'}% ${row.trackerRssMB ?? 'null'} MB, generators ${row.clientCpuPct ?? 'null'}%`,
    );
    if (!healthBusy) {
      healthBusy = true;
      void healthz(port).then((h) => {
        lastHealth = h ?? lastHealth;
        healthBusy = false;
      });
    }
  };
  const sampler = setInterval(sample, SAMPLE_MS);

  const waitFor = async (condition: () => boolean, limitMs: number): Promise<boolean> => {
    const until = Date.now() + limitMs;
    while (!condition() && Date.now() < until) {
      if (trackerState.exit !== null) return false;
      await sleep(50);
    }
    return condition();
  };

  // ── join phase: until every generator has tried all its sessions and heard back ──
  const allJoined = await waitFor(
    () => clients.every((c) => c.joined !== null || c.exit !== null),
    joinWaitMs,
  );
  if (!allJoined) progress(`${tag}join phase hit its ${joinLimitS} s limit`);
  const joinEndedAt = Date.now();
  // ── hold phase ──
  phase = 'hold';
  for (const c of clients) c.child.stdin.write('hold\n');
  const holdStartedAt = Date.now();
  progress(
    `${tag}join phase over after ${((joinEndedAt - t0) / 1000).toFixed(1)} s; holding ${point.duration} s`,
  );
  while (Date.now() - holdStartedAt < point.duration * 1000 && trackerState.exit === null) await sleep(100);
  const heldAtEnd = clients.reduce((a, c) => a + (c.latest?.held ?? 0), 0);
  const trackerConnectionsAtEnd = (await healthz(port))?.connections ?? null;
  phase = 'stop';
  for (const c of clients) c.child.stdin.write('stop\n');
  await waitFor(() => clients.every((c) => c.result !== null || c.exit !== null), RELAY_TIMEOUT_MS + 10_000);
  clearInterval(sampler);
  // The drain's last samples (relays sent while holding, delivered after the stop) get a row too.
  sample();
  const trackerDiedEarly = trackerState.exit;
  await Promise.all(clients.map((c) => stopProcess(c.child, { graceMs: STOP_GRACE_MS })));
  await stopProcess(tracker, { graceMs: STOP_GRACE_MS });
  clearTimeout(watchdog);

  // ── results ──
  const results: Partial<ResultReport>[] = clients.map((c) => c.result ?? c.latest ?? {});
  type Counter = {
    [K in keyof ResultReport]: ResultReport[K] extends number ? K : never;
  }[keyof ResultReport];
  const sum = (key: Counter): number => results.reduce((a, r) => a + (r[key] ?? 0), 0);
  const trackerErrors: Tally = {};
  const socketErrors: Tally = {};
  for (const r of results) {
    addTallies(trackerErrors, r.trackerErrors);
    addTallies(socketErrors, r.socketErrors);
  }
  const welcomed = sum('welcomed');
  const joinSpanMs = Math.max(0, ...results.map((r) => r.joinSpanMs ?? 0));
  const phaseValues = (which: RunPhase, key: TimelineColumn): number[] =>
    timeline
      .filter((s) => s.phase === which)
      .map((s) => s[key])
      .filter((v): v is number => v !== null);
  // The first second of each phase straddles the boundary; leave it out of the phase's means.
  const steady = (which: RunPhase, key: TimelineColumn): number[] => phaseValues(which, key).slice(1);
  const all = (key: TimelineColumn): number[] =>
    timeline.map((s) => s[key]).filter((v): v is number => v !== null);
  const sessionsHeld = results.reduce((a, r) => a + (r.heldAtStop ?? r.held ?? 0), 0);
  const joinsPerSec = joinSpanMs > 0 ? welcomed / (joinSpanMs / 1000) : null;
  const cpuPct = mean(steady('hold', 'trackerCpuPct'));
  const cpuPctJoin = mean(steady('join', 'trackerCpuPct'));
  const clientCpuPct = mean(steady('hold', 'clientCpuPct'));
  const clientCpuPctJoin = mean(steady('join', 'clientCpuPct'));
  const rssPeak = Math.max(0, ...all('trackerRssMB'));
  const relayMsP99 = percentile(holdRelayMs, 99);

  /** Which goals this point misses, each on its own (a sweep reports where each first bends). */
  const failed = {
    sessions: sessionsHeld < point.peers,
    joinRate: joinsPerSec === null || joinsPerSec < JOIN_RATE_TOLERANCE * point.joinRate,
    relayP99: relayMsP99 === null || relayMsP99 >= opts.relayP99GoalMs,
    cpu: (cpuPct ?? 0) >= CPU_SATURATED_PCT || (cpuPctJoin ?? 0) >= CPU_SATURATED_PCT,
    trackerExited: trackerDiedEarly !== null,
  };
  const show = (x: number | null): string => (x === null ? 'null' : String(x));
  const reasons: string[] = [];
  if (failed.sessions) reasons.push(`held ${sessionsHeld} of ${point.peers} sessions`);
  if (failed.joinRate)
    reasons.push(`joins/s ${show(r1(joinsPerSec))} < ${JOIN_RATE_TOLERANCE * 100} % of ${point.joinRate}`);
  if (failed.relayP99) reasons.push(`relay p99 ${show(r2(relayMsP99))} ms ≥ ${opts.relayP99GoalMs} ms`);
  if (failed.cpu)
    reasons.push(`tracker CPU saturated (join ${show(r1(cpuPctJoin))} %, hold ${show(r1(cpuPct))} %)`);
  if (failed.trackerExited) reasons.push(`tracker exited early ${JSON.stringify(trackerDiedEarly)}`);
  const generatorSaturated =
    (clientCpuPct ?? 0) >= CPU_SATURATED_PCT || (clientCpuPctJoin ?? 0) >= CPU_SATURATED_PCT;
  // A generator whose core is full sends late and reads late: the figures then bound the tracker from below.
  const caveats: string[] = [];
  if (generatorSaturated)
    caveats.push(
      `the load generators saturate their core (join ${show(r1(clientCpuPctJoin))} %, hold ${show(r1(clientCpuPct))} %): ` +
        'latencies include their queueing and rates may be theirs, not the tracker’s',
    );
  const otherLoad = mean(all('trackerCoreOtherPct'));
  if ((otherLoad ?? 0) >= OTHER_LOAD_CAVEAT_PCT)
    caveats.push(`other load on the tracker's core averaged ${show(r1(otherLoad))} % (shared machine)`);
  if (trackerFdLimit !== null && point.peers > trackerFdLimit - FD_OVERHEAD)
    caveats.push(
      `the tracker's open-files limit is ${trackerFdLimit} (${trackerFdLimit < opts.fdLimit ? 'the hard limit, which this process may not raise' : 'as asked'}), ` +
        'and Node itself keeps some 20 descriptors open, so not every session fits in it',
    );

  const holdPhaseLoopDelays = phaseValues('hold', 'trackerLoopDelayMaxMs');
  const result: PointResult = {
    peers: point.peers,
    joinRate: point.joinRate,
    duration: point.duration,
    swarmSize: point.swarmSize,
    swarms: layout.swarmCount,
    relaysPerSecTarget: point.relaysPerSec,
    bootstrapsPerSecTarget: point.bootstrapsPerSec,
    sdpBytes: point.sdpBytes,
    sessionsHeld,
    trackerConnectionsAtEnd,
    heldBeforeStop: heldAtEnd,
    joinsPerSec: r1(joinsPerSec),
    joinPhaseS: r1((joinEndedAt - t0) / 1000),
    joinMsP50: r2(percentile(joinMs, 50)),
    joinMsP99: r2(percentile(joinMs, 99)),
    joinMsMax: r2(maximum(joinMs)),
    relayMsP50: r3(percentile(holdRelayMs, 50)),
    relayMsP99: r3(relayMsP99),
    relayMsMax: r3(maximum(holdRelayMs)),
    relays: holdRelayMs.length,
    relaysPerSec: r1(holdRelayMs.length / point.duration),
    joinPhaseRelays: {
      relays: joinRelayMs.length,
      relayMsP50: r3(percentile(joinRelayMs, 50)),
      relayMsP99: r3(percentile(joinRelayMs, 99)),
      relayMsMax: r3(maximum(joinRelayMs)),
    },
    bootstrap: {
      requests: sum('bootstrapsSent'),
      answered: sum('bootstrapsAnswered'),
      peersReturned: sum('bootstrapPeersReturned'),
      foreignPeers: sum('bootstrapForeignPeers'),
      notYetWelcomedPeers: sum('bootstrapUnknownPeers'),
      msP50: r3(percentile(bootstrapMs, 50)),
      msP99: r3(percentile(bootstrapMs, 99)),
    },
    cpuPct: r1(cpuPct),
    cpuPctJoin: r1(cpuPctJoin),
    cpuPctPeak: r1(Math.max(0, ...all('trackerCpuPct'))),
    rssMB: r1(rssPeak),
    rssKBPerSession: sessionsHeld > 0 ? r1((rssPeak * 1024) / sessionsHeld) : null,
    // Rough unit costs (the hold phase's CPU also pays for heartbeats and bootstraps; the join
    // phase's for the relays running meanwhile, subtracted at the hold phase's cost).
    cpuUsPerRelay:
      cpuPct === null || holdRelayMs.length === 0
        ? null
        : r1((cpuPct * 1e4) / (holdRelayMs.length / point.duration)),
    cpuUsPerJoin:
      cpuPctJoin === null || cpuPct === null || joinsPerSec === null || joinsPerSec === 0
        ? null
        : r1(((cpuPctJoin - cpuPct) * 1e4) / joinsPerSec),
    clientCpuPct: r1(clientCpuPct),
    clientCpuPctJoin: r1(clientCpuPctJoin),
    clientLoopDelayP99MsMax: Math.max(0, ...all('clientLoopDelayP99Ms')),
    // Who stalled: seconds of the hold phase in which the tracker's (or a generator's) event loop
    // was blocked for at least the relay goal; a relay in flight then waits at least that long.
    stalls: {
      trackerLoopDelayMaxMs: opts.probe ? Math.max(0, ...holdPhaseLoopDelays) : null,
      trackerStalledSeconds: opts.probe
        ? holdPhaseLoopDelays.filter((ms) => ms >= opts.relayP99GoalMs).length
        : null,
      trackerGcMaxMs: opts.probe ? Math.max(0, ...phaseValues('hold', 'trackerGcMaxMs')) : null,
      generatorLoopDelayMaxMs: Math.max(0, ...phaseValues('hold', 'clientLoopDelayMaxMs')),
      generatorStalledSeconds: phaseValues('hold', 'clientLoopDelayMaxMs').filter(
        (ms) => ms >= opts.relayP99GoalMs,
      ).length,
      holdSeconds: phaseValues('hold', 'tS').length,
    },
    trackerCoreOtherPct: r1(otherLoad),
    failures: {
      joinTimeouts: sum('joinTimeouts'),
      connectFailures: sum('connectFailures'),
      closedBeforeWelcome: sum('closedBeforeWelcome'),
      closedAfterWelcome: sum('closedAfterWelcome'),
      notAttempted: sum('notAttempted'),
      relaysLost: sum('relaysLost'),
      relayMismatches: sum('relayMismatches'),
      relaysSkipped: sum('relaysSkipped'),
      unexpectedMessages: sum('unexpectedMessages'),
      trackerErrors,
      socketErrors,
    },
    trackerWarnings,
    trackerLogTail: trackerLog.slice(-5),
    trackerExit: trackerDiedEarly,
    generators: clients.map((c) => ({
      peers: layout.clients[c.index]?.peers ?? 0,
      swarms: layout.clients[c.index]?.swarms.length ?? 0,
      exit: c.exit,
      finished: c.result?.reason ?? null,
      stderrTail: c.stderr.slice(-5),
    })),
    limits: { trackerOpenFiles: trackerFdLimit, generatorOpenFiles: clientFdLimit },
    verdict: { ok: reasons.length === 0, failed, reasons, generatorSaturated, caveats },
    machine: machine(loadBefore),
    tracker: trackerBuild(),
    startedAt: new Date(startedAt).toISOString(),
    timeline,
  };
  writeOutputs(dir, result, commandLine(), opts.relayP99GoalMs);
  progress(
    `${tag}${result.sessionsHeld}/${result.peers} held, ${show(result.joinsPerSec)} joins/s, relay p50 ${show(result.relayMsP50)} ` +
      `p99 ${show(result.relayMsP99)} max ${show(result.relayMsMax)} ms, tracker CPU ${show(result.cpuPct)} % (join ${show(result.cpuPctJoin)} %, ` +
      `peak ${show(result.cpuPctPeak)} %), RSS ${show(result.rssMB)} MB → ${relative(process.cwd(), dir) || '.'}/`,
  );
  return result;
}

/** Which tracker was measured: the commit, whether tracker/src differs from it, and when dist was built. */
function trackerBuild(): PointResult['tracker'] {
  const git = (args: string[]): string =>
    spawnSync('git', args, { cwd: root, encoding: 'utf8' }).stdout.trim();
  let builtAt: string | null;
  try {
    builtAt = statSync(trackerCli).mtime.toISOString();
  } catch {
    builtAt = null;
  }
  return {
    cli: relative(root, trackerCli),
    commit: git(['rev-parse', '--short', 'HEAD']) || null,
    srcChanged: git(['status', '--porcelain', '--', 'tracker/src', 'packages/wire/src']) !== '',
    builtAt,
  };
}

function machine(loadBefore: readonly number[]): Machine {
  return {
    nproc: machineCores,
    cpuModel: cpuModel() ?? cpus()[0]?.model ?? 'unknown',
    node: process.version,
    kernel: release(),
    loadAverageBefore: loadBefore.map((x) => r2(x)),
    trackerCore: opts.trackerCore,
    generatorCore: opts.clientCore,
    nice: opts.nice,
  };
}

/** The command that made the outputs, without --out (the reader has them where they are). */
function commandLine(): string {
  const args = process.argv.slice(2).filter((_, i, a) => a[i] !== '--out' && a[i - 1] !== '--out');
  return `npm run bench:tracker -- ${args.join(' ')}`.trim();
}

// ─── main ───────────────────────────────────────────────────────────────────────────────────────

if (!existsSync(trackerCli)) {
  progress(`${trackerCli} is missing: build first (npx tsc -b, or npm run setup)`);
  process.exit(1);
}
// This process parses the generators' reports; keep it off the tracker's core.
spawnSync('taskset', ['-a', '-pc', String(opts.clientCore), String(process.pid)], { stdio: 'ignore' });

const base: BenchPoint = {
  peers: opts.peers,
  joinRate: opts.joinRate,
  duration: opts.duration,
  swarmSize: opts.swarmSize,
  relaysPerSec: opts.relaysPerSec,
  bootstrapsPerSec: opts.bootstrapsPerSec,
  sdpBytes: opts.sdpBytes,
};
try {
  if (opts.sweep === null) {
    const r = await runPoint(base, out, null);
    process.exitCode = r.trackerExit === null ? 0 : 1;
  } else {
    const sweep = opts.sweep;
    const points: SweepPoint[] = [];
    for (const value of sweep.values) {
      const label = `${sweep.flag}-${value}`;
      const point: BenchPoint = { ...base, [sweep.key]: value };
      const result = await runPoint(point, join(out, label), label);
      points.push({ value, label, result });
      await sleep(SWEEP_PAUSE_MS);
    }
    const summary = writeSweep(out, sweep, points, commandLine(), opts.relayP99GoalMs);
    progress(
      summary.bend === null
        ? `no point bent up to ${sweep.flag} = ${sweep.values[sweep.values.length - 1] ?? '?'}`
        : `bends at ${sweep.flag} = ${summary.bend.value}: ${summary.bend.reasons.join('; ')}`,
    );
  }
} catch (e) {
  progress(e instanceof Error ? e.message : String(e));
  killAll();
  process.exit(1);
}
// Node keeps no handle open after the children are gone; exit explicitly in case a guard lingers.
process.exit();
