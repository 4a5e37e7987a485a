#!/usr/bin/env node
// `npm run bench:tracker -- --peers P --join-rate R --duration S --out DIR`: the tracker load
// benchmark. Starts the built tracker pinned to one core, and load generator processes
// (scripts/bench-tracker-client.mjs) pinned to the other, all on loopback. The generators open P
// WebSocket sessions at R joins/s over swarms of --swarm-size viewers, then hold them for S seconds
// while relaying offer-sized signals between random pairs of the same swarm and asking for bootstrap
// peers. This process samples the tracker's CPU and RSS from /proc every second and writes
// DIR/result.json, DIR/report.md and DIR/*.svg. `--sweep NAME=V1,V2,…` runs one point per value
// (each with a fresh tracker) and reports where the tracker bends. Progress goes to stderr.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, cpus, loadavg, release } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { numberOption as num, parseCliOrExit, root, tieToParent } from '../e2e/src/harness.mjs';

const USAGE = `usage: npm run bench:tracker -- [--peers P] [--join-rate R] [--duration S] [--out DIR] [options]

Opens P WebSocket sessions to one tracker process pinned to one core, at R joins/s, holds them for S
seconds while relaying signalling between random pairs, and writes DIR/result.json, DIR/report.md
and DIR/*.svg (the tracker's CPU and RSS, sessions, joins/s and relay latency over time).

options:
  --peers P                sessions to open (default 1000)
  --join-rate R            joins per second (default 200)
  --duration S             seconds to hold all sessions and relay, after the join phase (default 30)
  --out DIR                output directory (default out/tracker-bench)
  --swarm-size N           viewers per stream; P is spread over ceil(P/N) streams (default 500)
  --relays-per-sec Q       signals relayed per second, from the first join on (default 2000)
  --bootstraps-per-sec B   bootstrap requests per second while holding (default 100; every joiner
                           also sends one after its welcome)
  --sdp-bytes N            size of each relayed SDP offer (default 1500)
  --client-procs K         load generator processes (default: enough for ≤ 12000 sessions each,
                           since one process's open files are capped)
  --sweep NAME=V1,V2,…     one run per value of peers, join-rate, relays-per-sec or swarm-size,
                           each with a fresh tracker; DIR/report.md says where the tracker bends
  --tracker-core N         core the tracker is pinned to (default 0)
  --client-core N          core the load generators (and this process) are pinned to (default 1)
  --fd-limit N             open-files limit asked for each child (default 65536; capped by the
                           hard limit when this process may not raise it)
  --relay-p99-goal-ms MS   relay p99 above which a point counts as bent (default 20)
  --tracker-cli FILE       run this Node script as the tracker instead of tracker/dist/cli.js (it gets
                           the same flags and environment; for comparing a modified tracker)
  --no-probe               do not preload scripts/bench-tracker-probe.mjs into the tracker (it
                           reports the tracker's event-loop stalls and GC pauses each second)
  --nice N                 run the tracker and the generators at this nice value (default 0; a
                           negative value needs CAP_SYS_NICE and shields them from other load)
  --help                   print this help`;

const SWEEPABLE = {
  peers: 'peers',
  'join-rate': 'joinRate',
  'relays-per-sec': 'relaysPerSec',
  'swarm-size': 'swarmSize',
};

function parseArgs(argv) {
  const o = {
    peers: 1000,
    joinRate: 200,
    duration: 30,
    out: null,
    swarmSize: 500,
    relaysPerSec: 2000,
    bootstrapsPerSec: 100,
    sdpBytes: 1500,
    clientProcs: null,
    sweep: null,
    trackerCore: 0,
    clientCore: 1,
    fdLimit: 65536,
    relayP99GoalMs: 20,
    nice: 0,
    probe: true,
    trackerCli: null,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') o.help = true;
    else if (a === '--peers') o.peers = Math.floor(num(a, argv[++i], 2));
    else if (a === '--join-rate') o.joinRate = num(a, argv[++i], 1);
    else if (a === '--duration') o.duration = num(a, argv[++i], 1);
    else if (a === '--out') {
      o.out = argv[++i];
      if (o.out === undefined) throw new Error('--out needs a directory');
    } else if (a === '--swarm-size') o.swarmSize = Math.floor(num(a, argv[++i], 2));
    else if (a === '--relays-per-sec') o.relaysPerSec = num(a, argv[++i], 0);
    else if (a === '--bootstraps-per-sec') o.bootstrapsPerSec = num(a, argv[++i], 0);
    else if (a === '--sdp-bytes') o.sdpBytes = Math.floor(num(a, argv[++i], 16));
    else if (a === '--client-procs') o.clientProcs = Math.floor(num(a, argv[++i], 1));
    else if (a === '--tracker-core') o.trackerCore = Math.floor(num(a, argv[++i], 0));
    else if (a === '--client-core') o.clientCore = Math.floor(num(a, argv[++i], 0));
    else if (a === '--fd-limit') o.fdLimit = Math.floor(num(a, argv[++i], 1024));
    else if (a === '--relay-p99-goal-ms') o.relayP99GoalMs = num(a, argv[++i], 0.001);
    else if (a === '--sweep') o.sweep = parseSweep(argv[++i]);
    else if (a === '--no-probe') o.probe = false;
    else if (a === '--tracker-cli') {
      o.trackerCli = argv[++i];
      if (o.trackerCli === undefined) throw new Error('--tracker-cli needs a file');
    } else if (a === '--nice') {
      o.nice = Number(argv[++i]);
      if (!Number.isInteger(o.nice) || o.nice < -20 || o.nice > 19)
        throw new Error('--nice needs an integer in -20‥19');
    } else throw new Error(`unknown option ${a}`);
  }
  if (o.sdpBytes > 16 * 1024) throw new Error('--sdp-bytes must be at most 16384 (the protocol limit)');
  const cores = availableParallelism();
  if (o.trackerCore >= cores || o.clientCore >= cores)
    throw new Error(`--tracker-core and --client-core must be below ${cores} (this machine's cores)`);
  return o;
}

function parseSweep(text) {
  const m = /^([a-z-]+)=([\d.,]+)$/.exec(text ?? '');
  if (m === null || !(m[1] in SWEEPABLE))
    throw new Error(`--sweep needs NAME=V1,V2,… with NAME one of ${Object.keys(SWEEPABLE).join(', ')}`);
  const values = m[2].split(',').map((v) => num(`--sweep ${m[1]}`, v, 1));
  return { flag: m[1], key: SWEEPABLE[m[1]], values };
}

/** Counted before this process pins itself to one core (which narrows what Node reports). */
const machineCores = availableParallelism();
const opts = parseCliOrExit('bench:tracker', parseArgs, USAGE);
const out = resolve(process.env.INIT_CWD ?? process.cwd(), opts.out ?? join(root, 'out', 'tracker-bench'));
const trackerCli =
  opts.trackerCli === null
    ? join(root, 'tracker', 'dist', 'cli.js')
    : resolve(process.env.INIT_CWD ?? process.cwd(), opts.trackerCli);
const clientScript = join(root, 'scripts', 'bench-tracker-client.mjs');
const probeScript = join(root, 'scripts', 'bench-tracker-probe.mjs');
const progress = (text) => process.stderr.write(`bench:tracker: ${text}\n`);

/** A point meets the goal when it holds every session, joins at ≥ 95 % of the rate asked and stays under this CPU. */
const JOIN_RATE_TOLERANCE = 0.95;
const CPU_SATURATED_PCT = 90;
/** Sessions one generator process takes at most (its open files are capped like the tracker's). */
const SESSIONS_PER_CLIENT = 12_000;
/** Open files a Node process uses besides its sockets (stdio, epoll, pipes, …), with margin. */
const FD_OVERHEAD = 64;
const TRACKER_START_TIMEOUT_MS = 20_000;
const JOIN_TIMEOUT_MS = 10_000;
const RELAY_TIMEOUT_MS = 5_000;
const STOP_GRACE_MS = 5_000;
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

// ─── processes ──────────────────────────────────────────────────────────────────────────────────

/** Every child still running, killed on exit or interrupt. */
const children = new Set();

function killAll() {
  for (const child of children) child.kill('SIGKILL');
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'])
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    progress(`${signal}: killing the tracker and the load generators`);
    killAll();
    process.exit(130);
  });
process.on('exit', killAll);

/**
 * Spawns `command args` pinned to `core`, with the open-files limit raised as far as allowed: the
 * wanted limit if this process may raise the hard limit (CAP_SYS_RESOURCE), else the hard limit.
 */
function spawnPinned(core, command, args, env) {
  const nice = opts.nice === 0 ? '' : `nice -n ${opts.nice} `;
  const script = `ulimit -n ${opts.fdLimit} 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec ${nice}taskset -c ${core} "$@"`;
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

async function stopChild(child, graceMs = STOP_GRACE_MS) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** The open-files limit a child of ours gets (what spawnPinned's `ulimit` ends up with). */
function childFdLimit() {
  const r = spawnSync(
    'sh',
    ['-c', `ulimit -n ${opts.fdLimit} 2>/dev/null || ulimit -n "$(ulimit -Hn)"; ulimit -n`],
    { encoding: 'utf8' },
  );
  const n = Number(r.stdout.trim());
  return Number.isFinite(n) ? n : 1024;
}

function freePort() {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => done(address.port));
    });
  });
}

/** CPU seconds (user + system) of a process, or null once it is gone. */
function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses; the fields after its closing one do not.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return null;
  }
}

function rssMB(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? null : Number(m[1]) / 1024;
  } catch {
    return null;
  }
}

function fdLimitOf(pid) {
  try {
    const m = /Max open files\s+(\d+)/.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
    return m === null ? null : Number(m[1]);
  } catch {
    return null;
  }
}

/** Busy and total jiffies per core from /proc/stat, to see load that is not ours. */
function coreTimes() {
  const cores = {};
  for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
    const m = /^cpu(\d+) (.*)$/.exec(line);
    if (m === null) continue;
    const v = m[2].trim().split(/\s+/).map(Number);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    cores[m[1]] = { busy: total - (v[3] ?? 0) - (v[4] ?? 0), total };
  }
  return cores;
}

async function healthz(port) {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) });
    if (!res.ok) return null;
    return await res.json();
  } catch {
    return null;
  }
}

// ─── statistics ─────────────────────────────────────────────────────────────────────────────────

/** Nearest-rank percentile of an ascending array, or null when empty. */
function pct(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const sortNum = (values) => Float64Array.from(values).sort();
const mean = (values) => (values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length);
const r1 = (x) => (x === null || x === undefined ? null : Math.round(x * 10) / 10);
const r2 = (x) => (x === null || x === undefined ? null : Math.round(x * 100) / 100);
const r3 = (x) => (x === null || x === undefined ? null : Math.round(x * 1000) / 1000);

function addTallies(into, from) {
  for (const [key, n] of Object.entries(from ?? {})) into[key] = (into[key] ?? 0) + n;
}

// ─── one run ────────────────────────────────────────────────────────────────────────────────────

/** Splits P peers into swarms of about swarmSize and the swarms over K generator processes. */
function plan(point, clientFdLimit) {
  const swarmCount = Math.ceil(point.peers / point.swarmSize);
  const perClient = Math.max(1000, Math.min(SESSIONS_PER_CLIENT, clientFdLimit - FD_OVERHEAD - 200));
  const wanted = opts.clientProcs ?? Math.ceil(point.peers / perClient);
  const clientCount = Math.max(1, Math.min(wanted, swarmCount));
  const clients = Array.from({ length: clientCount }, () => ({ swarms: [], peers: 0 }));
  for (let j = 0; j < swarmCount; j++) {
    const peers = Math.floor(point.peers / swarmCount) + (j < point.peers % swarmCount ? 1 : 0);
    const c = clients[j % clientCount];
    c.swarms.push(`bench-${j}:${peers}`);
    c.peers += peers;
  }
  return { swarmCount, clients };
}

async function runPoint(point, dir, label) {
  const clientFdLimit = childFdLimit();
  const layout = plan(point, clientFdLimit);
  const joinLimitS = Math.ceil((point.peers / point.joinRate) * 2 + 30);
  const runLimitMs =
    TRACKER_START_TIMEOUT_MS +
    (joinLimitS + JOIN_TIMEOUT_MS / 1000 + 5) * 1000 +
    point.duration * 1000 +
    RELAY_TIMEOUT_MS +
    3 * STOP_GRACE_MS +
    30_000;
  const startedAt = Date.now();
  const loadBefore = loadavg();
  const tag = label === null ? '' : `[${label}] `;

  const port = await freePort();
  // Only our own CHUNKYCAST_* settings: a source stream or join secret from the shell would change what is measured.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CHUNKYCAST_')));
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
  const trackerLog = [];
  let trackerWarnings = 0;
  createInterface({ input: tracker.stdout }).on('line', (line) => {
    trackerWarnings++;
    trackerLog.push(line.slice(0, 500));
    if (trackerLog.length > 20) trackerLog.shift();
  });
  /** The probe's reports since the last timeline sample. */
  let probes = [];
  createInterface({ input: tracker.stderr }).on('line', (line) => {
    if (line.startsWith('{"benchProbe"')) {
      try {
        probes.push(JSON.parse(line).benchProbe);
        return;
      } catch {
        // not a probe line after all: kept in the log below
      }
    }
    trackerLog.push(`[stderr] ${line.slice(0, 500)}`);
    if (trackerLog.length > 20) trackerLog.shift();
  });
  let trackerExit = null;
  tracker.once('exit', (code, signal) => {
    trackerExit = { code, signal };
  });

  const watchdog = setTimeout(() => {
    progress(`${tag}run exceeded its ${Math.round(runLimitMs / 1000)} s limit; killing everything`);
    killAll();
    process.exit(1);
  }, runLimitMs);

  // The tracker logs "listening" at info level only; at warn it is ready once /healthz answers.
  const readyBy = Date.now() + TRACKER_START_TIMEOUT_MS;
  while ((await healthz(port)) === null) {
    if (trackerExit !== null || Date.now() > readyBy) {
      killAll();
      throw new Error(
        `the tracker did not answer /healthz within ${TRACKER_START_TIMEOUT_MS} ms ` +
          `(exit ${JSON.stringify(trackerExit)}):\n${trackerLog.join('\n')}`,
      );
    }
    await sleep(100);
  }
  const trackerFdLimit = fdLimitOf(tracker.pid);
  if (trackerFdLimit !== null && point.peers > trackerFdLimit - FD_OVERHEAD)
    progress(
      `${tag}warning: the tracker may open ${trackerFdLimit} files, so it cannot hold ${point.peers} sockets ` +
        `(Node itself keeps some 20 descriptors open); expect joins beyond that to be reset`,
    );
  progress(
    `${tag}tracker pid ${tracker.pid} on core ${opts.trackerCore} (open files ≤ ${trackerFdLimit}); ` +
      `${layout.clients.length} generator(s) on core ${opts.clientCore}; ${point.peers} peers in ` +
      `${layout.swarmCount} swarm(s) at ${point.joinRate} joins/s, ${point.relaysPerSec} relays/s`,
  );

  // ── load generators ──
  /** Latency samples as the generators report them: by phase, and since the last timeline sample. */
  const holdRelayMs = [];
  const joinRelayMs = [];
  const joinMs = [];
  const bootstrapMs = [];
  let secondRelayMs = [];
  const url = `ws://127.0.0.1:${port}/ws`;
  const clients = layout.clients.map((c, i) => {
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
    const state = { child, index: i, latest: null, joined: null, result: null, stderr: [], exit: null };
    createInterface({ input: child.stdout }).on('line', (line) => {
      let record;
      try {
        record = JSON.parse(line);
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
      else if (record.type === 'result') state.result = record;
    });
    createInterface({ input: child.stderr }).on('line', (line) => {
      state.stderr.push(line.slice(0, 300));
      if (state.stderr.length > 20) state.stderr.shift();
    });
    child.once('exit', (code, signal) => {
      state.exit = { code, signal };
    });
    return state;
  });

  // ── sampling, every second, of the tracker, the generators and the cores ──
  let phase = 'join';
  const timeline = [];
  const t0 = Date.now();
  let prev = {
    at: performance.now(),
    trackerCpu: cpuSeconds(tracker.pid) ?? 0,
    clientCpu: clients.map((c) => cpuSeconds(c.child.pid) ?? 0),
    cores: coreTimes(),
    welcomed: 0,
    relaysReceived: 0,
  };
  let healthBusy = false;
  let lastHealth = null;
  const sample = () => {
    const at = performance.now();
    const seconds = (at - prev.at) / 1000;
    const trackerCpu = cpuSeconds(tracker.pid);
    const clientCpu = clients.map((c, i) => cpuSeconds(c.child.pid) ?? prev.clientCpu[i] ?? 0);
    const cores = coreTimes();
    const coreBusy = (core) => {
      const a = prev.cores[core];
      const b = cores[core];
      return a === undefined || b === undefined || b.total === a.total
        ? null
        : (100 * (b.busy - a.busy)) / (b.total - a.total);
    };
    const latest = clients.map((c) => c.latest).filter((x) => x !== null);
    const welcomed = latest.reduce((a, c) => a + c.welcomed, 0);
    const relaysReceived = latest.reduce((a, c) => a + c.relaysReceived, 0);
    const sorted = sortNum(secondRelayMs);
    secondRelayMs = [];
    const trackerCpuPct = trackerCpu === null ? null : (100 * (trackerCpu - prev.trackerCpu)) / seconds;
    const core0 = coreBusy(String(opts.trackerCore));
    timeline.push({
      tS: r1((Date.now() - t0) / 1000),
      phase,
      trackerCpuPct: r1(trackerCpuPct),
      trackerRssMB: r1(rssMB(tracker.pid)),
      clientCpuPct: r1((100 * clientCpu.reduce((a, v, i) => a + v - (prev.clientCpu[i] ?? 0), 0)) / seconds),
      trackerCoreBusyPct: r1(core0),
      clientCoreBusyPct: r1(coreBusy(String(opts.clientCore))),
      // What else ran on the tracker's core (other processes, interrupts); ≈ 0 on a quiet machine.
      trackerCoreOtherPct:
        core0 === null || trackerCpuPct === null ? null : r1(Math.max(0, core0 - trackerCpuPct)),
      sessions: latest.reduce((a, c) => a + c.held, 0),
      trackerConnections: lastHealth?.connections ?? null,
      joinsPerSec: r1((welcomed - prev.welcomed) / seconds),
      relaysPerSec: r1((relaysReceived - prev.relaysReceived) / seconds),
      relayMsP50: r3(pct(sorted, 50)),
      relayMsP99: r3(pct(sorted, 99)),
      relayMsMax: r3(sorted.length === 0 ? null : sorted[sorted.length - 1]),
      clientLoopDelayP99Ms: latest.length === 0 ? null : Math.max(...latest.map((c) => c.loopDelayP99Ms)),
      clientLoopDelayMaxMs: latest.length === 0 ? null : Math.max(...latest.map((c) => c.loopDelayMaxMs)),
      trackerLoopDelayMaxMs: probes.length === 0 ? null : Math.max(...probes.map((p) => p.loopDelayMaxMs)),
      trackerGcMs: probes.length === 0 ? null : r1(probes.reduce((a, p) => a + p.gcMs, 0)),
      trackerGcMaxMs: probes.length === 0 ? null : Math.max(...probes.map((p) => p.gcMaxMs)),
      trackerHeapMB: probes.length === 0 ? null : r1(probes[probes.length - 1].heapUsedMB),
    });
    probes = [];
    prev = { at, trackerCpu: trackerCpu ?? prev.trackerCpu, clientCpu, cores, welcomed, relaysReceived };
    const last = timeline[timeline.length - 1];
    progress(
      `${tag}${String(last.tS).padStart(5)} s ${phase.padEnd(4)} sessions ${last.sessions} ` +
        `joins/s ${last.joinsPerSec} relays/s ${last.relaysPerSec} p99 ${last.relayMsP99 ?? '-'} ms ` +
        `tracker ${last.trackerCpuPct}% ${last.trackerRssMB} MB, generators ${last.clientCpuPct}%`,
    );
    if (!healthBusy) {
      healthBusy = true;
      void healthz(port).then((h) => {
        lastHealth = h ?? lastHealth;
        healthBusy = false;
      });
    }
  };
  const sampler = setInterval(sample, 1000);

  const waitFor = async (condition, limitMs) => {
    const until = Date.now() + limitMs;
    while (!condition() && Date.now() < until) {
      if (trackerExit !== null) return false;
      await sleep(50);
    }
    return condition();
  };

  // ── join phase: until every generator has tried all its sessions and heard back ──
  const allJoined = await waitFor(
    () => clients.every((c) => c.joined !== null || c.exit !== null),
    (joinLimitS + JOIN_TIMEOUT_MS / 1000 + 5) * 1000,
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
  while (Date.now() - holdStartedAt < point.duration * 1000 && trackerExit === null) await sleep(100);
  const heldAtEnd = clients.reduce((a, c) => a + (c.latest?.held ?? 0), 0);
  const trackerConnectionsAtEnd = (await healthz(port))?.connections ?? null;
  phase = 'stop';
  for (const c of clients) c.child.stdin.write('stop\n');
  await waitFor(() => clients.every((c) => c.result !== null || c.exit !== null), RELAY_TIMEOUT_MS + 10_000);
  clearInterval(sampler);
  // The drain's last samples (relays sent while holding, delivered after the stop) get a row too.
  sample();
  const trackerDiedEarly = trackerExit;
  await Promise.all(clients.map((c) => stopChild(c.child)));
  await stopChild(tracker);
  clearTimeout(watchdog);

  // ── results ──
  const results = clients.map((c) => c.result ?? c.latest ?? {});
  const sum = (key) => results.reduce((a, r) => a + (typeof r[key] === 'number' ? r[key] : 0), 0);
  const trackerErrors = {};
  const socketErrors = {};
  for (const r of results) {
    addTallies(trackerErrors, r.trackerErrors);
    addTallies(socketErrors, r.socketErrors);
  }
  const welcomed = sum('welcomed');
  const joinSpanMs = Math.max(0, ...results.map((r) => r.joinSpanMs ?? 0));
  const holdSorted = sortNum(holdRelayMs);
  const joinRelaySorted = sortNum(joinRelayMs);
  const joinSorted = sortNum(joinMs);
  const bootSorted = sortNum(bootstrapMs);
  const phaseValues = (which, key) =>
    timeline.filter((s) => s.phase === which && s[key] !== null).map((s) => s[key]);
  // The first second of each phase straddles the boundary; leave it out of the phase's means.
  const steady = (which, key) => phaseValues(which, key).slice(1);
  const all = (key) => timeline.filter((s) => s[key] !== null).map((s) => s[key]);
  const sessionsHeld = results.reduce((a, r) => a + (r.heldAtStop ?? r.held ?? 0), 0);
  const joinsPerSec = joinSpanMs > 0 ? welcomed / (joinSpanMs / 1000) : null;
  const cpuPct = mean(steady('hold', 'trackerCpuPct'));
  const cpuPctJoin = mean(steady('join', 'trackerCpuPct'));
  const clientCpuPct = mean(steady('hold', 'clientCpuPct'));
  const clientCpuPctJoin = mean(steady('join', 'clientCpuPct'));
  const rssPeak = Math.max(0, ...all('trackerRssMB'));
  const relayMsP99 = pct(holdSorted, 99);

  /** Which goals this point misses, each on its own (a sweep reports where each first bends). */
  const failed = {
    sessions: sessionsHeld < point.peers,
    joinRate: joinsPerSec === null || joinsPerSec < JOIN_RATE_TOLERANCE * point.joinRate,
    relayP99: relayMsP99 === null || relayMsP99 >= opts.relayP99GoalMs,
    cpu: (cpuPct ?? 0) >= CPU_SATURATED_PCT || (cpuPctJoin ?? 0) >= CPU_SATURATED_PCT,
    trackerExited: trackerDiedEarly !== null,
  };
  const reasons = [];
  if (failed.sessions) reasons.push(`held ${sessionsHeld} of ${point.peers} sessions`);
  if (failed.joinRate)
    reasons.push(`joins/s ${r1(joinsPerSec)} < ${JOIN_RATE_TOLERANCE * 100} % of ${point.joinRate}`);
  if (failed.relayP99) reasons.push(`relay p99 ${r2(relayMsP99)} ms ≥ ${opts.relayP99GoalMs} ms`);
  if (failed.cpu) reasons.push(`tracker CPU saturated (join ${r1(cpuPctJoin)} %, hold ${r1(cpuPct)} %)`);
  if (failed.trackerExited) reasons.push(`tracker exited early ${JSON.stringify(trackerDiedEarly)}`);
  const generatorSaturated =
    (clientCpuPct ?? 0) >= CPU_SATURATED_PCT || (clientCpuPctJoin ?? 0) >= CPU_SATURATED_PCT;
  // A generator whose core is full sends late and reads late: the figures then bound the tracker from below.
  const caveats = [];
  if (generatorSaturated)
    caveats.push(
      `the load generators saturate their core (join ${r1(clientCpuPctJoin)} %, hold ${r1(clientCpuPct)} %): ` +
        'latencies include their queueing and rates may be theirs, not the tracker’s',
    );
  const otherLoad = mean(all('trackerCoreOtherPct'));
  if ((otherLoad ?? 0) >= 5)
    caveats.push(`other load on the tracker's core averaged ${r1(otherLoad)} % (shared machine)`);
  if (trackerFdLimit !== null && point.peers > trackerFdLimit - FD_OVERHEAD)
    caveats.push(
      `the tracker's open-files limit is ${trackerFdLimit} (${trackerFdLimit < opts.fdLimit ? 'the hard limit, which this process may not raise' : 'as asked'}), ` +
        'and Node itself keeps some 20 descriptors open, so not every session fits in it',
    );

  const result = {
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
    joinMsP50: r2(pct(joinSorted, 50)),
    joinMsP99: r2(pct(joinSorted, 99)),
    joinMsMax: r2(joinSorted.length === 0 ? null : joinSorted[joinSorted.length - 1]),
    relayMsP50: r3(pct(holdSorted, 50)),
    relayMsP99: r3(relayMsP99),
    relayMsMax: r3(holdSorted.length === 0 ? null : holdSorted[holdSorted.length - 1]),
    relays: holdSorted.length,
    relaysPerSec: r1(holdSorted.length / point.duration),
    joinPhaseRelays: {
      relays: joinRelaySorted.length,
      relayMsP50: r3(pct(joinRelaySorted, 50)),
      relayMsP99: r3(pct(joinRelaySorted, 99)),
      relayMsMax: r3(joinRelaySorted.length === 0 ? null : joinRelaySorted[joinRelaySorted.length - 1]),
    },
    bootstrap: {
      requests: sum('bootstrapsSent'),
      answered: sum('bootstrapsAnswered'),
      peersReturned: sum('bootstrapPeersReturned'),
      foreignPeers: sum('bootstrapForeignPeers'),
      notYetWelcomedPeers: sum('bootstrapUnknownPeers'),
      msP50: r3(pct(bootSorted, 50)),
      msP99: r3(pct(bootSorted, 99)),
    },
    cpuPct: r1(cpuPct),
    cpuPctJoin: r1(cpuPctJoin),
    cpuPctPeak: r1(Math.max(0, ...all('trackerCpuPct'))),
    rssMB: r1(rssPeak),
    rssKBPerSession: sessionsHeld > 0 ? r1((rssPeak * 1024) / sessionsHeld) : null,
    // Rough unit costs (the hold phase's CPU also pays for heartbeats and bootstraps; the join
    // phase's for the relays running meanwhile, subtracted at the hold phase's cost).
    cpuUsPerRelay:
      cpuPct === null || holdSorted.length === 0
        ? null
        : r1((cpuPct * 1e4) / (holdSorted.length / point.duration)),
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
      trackerLoopDelayMaxMs: opts.probe ? Math.max(0, ...phaseValues('hold', 'trackerLoopDelayMaxMs')) : null,
      trackerStalledSeconds: opts.probe
        ? phaseValues('hold', 'trackerLoopDelayMaxMs').filter((ms) => ms >= opts.relayP99GoalMs).length
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
      peers: layout.clients[c.index].peers,
      swarms: layout.clients[c.index].swarms.length,
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
  writeOutputs(dir, result);
  progress(
    `${tag}${result.sessionsHeld}/${result.peers} held, ${result.joinsPerSec} joins/s, relay p50 ${result.relayMsP50} ` +
      `p99 ${result.relayMsP99} max ${result.relayMsMax} ms, tracker CPU ${result.cpuPct} % (join ${result.cpuPctJoin} %, ` +
      `peak ${result.cpuPctPeak} %), RSS ${result.rssMB} MB → ${relative(process.cwd(), dir) || '.'}/`,
  );
  return result;
}

/** Which tracker was measured: the commit, whether tracker/src differs from it, and when dist was built. */
function trackerBuild() {
  const git = (args) => spawnSync('git', args, { cwd: root, encoding: 'utf8' }).stdout?.trim() ?? '';
  let builtAt = null;
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

function machine(loadBefore) {
  const model = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'));
  return {
    nproc: machineCores,
    cpuModel: model?.[1]?.trim() ?? cpus()[0]?.model ?? 'unknown',
    node: process.version,
    kernel: release(),
    loadAverageBefore: loadBefore.map((x) => r2(x)),
    trackerCore: opts.trackerCore,
    generatorCore: opts.clientCore,
    nice: opts.nice,
  };
}

// ─── outputs ────────────────────────────────────────────────────────────────────────────────────

const { linePlot } = await import(join(root, 'packages', 'sim', 'dist', 'plot.js')).catch(() => {
  throw new Error('packages/sim/dist/plot.js is missing: build first (npx tsc -b, or npm run setup)');
});

const series = (timeline, key) => timeline.map((s) => ({ x: s.tS, y: s[key] ?? Number.NaN }));

function commandLine(extra = {}) {
  const args = process.argv.slice(2).filter((_, i, a) => a[i] !== '--out' && a[i - 1] !== '--out');
  const flags = Object.entries(extra).flatMap(([k, v]) => [`--${k}`, String(v)]);
  return `npm run bench:tracker -- ${[...args, ...flags].join(' ')}`.trim();
}

function machineLines(m) {
  return [
    `- machine: ${m.nproc} cores (\`nproc\`), ${m.cpuModel}, Node ${m.node}, Linux ${m.kernel}`,
    `- load average before the run: ${m.loadAverageBefore.join(', ')}`,
    `- tracker pinned to core ${m.trackerCore}; load generators and this orchestrator to core ${m.generatorCore}` +
      (m.nice === 0 ? '' : `; tracker and generators at nice ${m.nice}`),
  ];
}

function writeOutputs(dir, r, extra = {}) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'result.json'), `${JSON.stringify(r, null, 2)}\n`);
  const t = r.timeline;
  const plots = {
    'sessions.svg': linePlot({
      title: `Sessions held (${r.peers} peers at ${r.joinRate} joins/s)`,
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'Sessions',
      series: [
        { name: 'sessions welcomed and open (generators)', points: series(t, 'sessions') },
        { name: 'connections (tracker /healthz)', points: series(t, 'trackerConnections') },
      ],
      yMin: 0,
    }),
    'rates.svg': linePlot({
      title: 'Joins and relays per second',
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'Per second',
      series: [
        { name: 'joins/s (welcomes)', points: series(t, 'joinsPerSec') },
        { name: 'relays/s (delivered)', points: series(t, 'relaysPerSec') },
      ],
      yMin: 0,
    }),
    'relay-latency.svg': linePlot({
      title: 'Signal relay latency per second (sender → tracker → receiver)',
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'Latency (ms)',
      series: [
        { name: 'p50', points: series(t, 'relayMsP50') },
        { name: 'p99', points: series(t, 'relayMsP99') },
        { name: 'max', points: series(t, 'relayMsMax') },
      ],
      yMin: 0,
    }),
    'cpu.svg': linePlot({
      title: 'CPU (% of one core)',
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'CPU (%)',
      series: [
        { name: 'tracker', points: series(t, 'trackerCpuPct') },
        { name: 'load generators', points: series(t, 'clientCpuPct') },
        { name: "other load on the tracker's core", points: series(t, 'trackerCoreOtherPct') },
      ],
      yMin: 0,
      yMax: 110,
    }),
    'stalls.svg': linePlot({
      title: 'Longest stall per second: event loops and relays',
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'ms',
      series: [
        { name: 'slowest relay', points: series(t, 'relayMsMax') },
        { name: "tracker's event loop (probe)", points: series(t, 'trackerLoopDelayMaxMs') },
        { name: "generators' event loops", points: series(t, 'clientLoopDelayMaxMs') },
        { name: 'tracker GC pause', points: series(t, 'trackerGcMaxMs') },
      ],
      yMin: 0,
    }),
    'rss.svg': linePlot({
      title: 'Tracker resident memory',
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'RSS (MB)',
      series: [{ name: 'tracker RSS', points: series(t, 'trackerRssMB') }],
      yMin: 0,
    }),
  };
  for (const [name, svg] of Object.entries(plots)) writeFileSync(join(dir, name), `${svg}\n`);

  const f = r.failures;
  const tally = (o) =>
    Object.keys(o).length === 0
      ? 'none'
      : Object.entries(o)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ');
  const yes = (ok) => (ok ? 'yes' : '**no**');
  const lines = [
    `# Tracker load benchmark: ${r.peers} peers at ${r.joinRate} joins/s`,
    '',
    `\`${extra.command ?? commandLine()}\` — ${r.startedAt}`,
    '',
    ...machineLines(r.machine),
    `- ${r.swarms} swarm(s) of ≤ ${r.swarmSize} viewers, ${r.relaysPerSecTarget} relays/s of ${r.sdpBytes}-byte offers, ` +
      `${r.bootstrapsPerSecTarget} bootstraps/s while holding, ${r.duration} s hold; ${r.generators.length} generator process(es)`,
    `- open-files limit: tracker ${r.limits.trackerOpenFiles}, generators ${r.limits.generatorOpenFiles}`,
    `- tracker: ${r.tracker.cli} at commit ${r.tracker.commit ?? '?'}${r.tracker.srcChanged ? ' (tracker/src or wire changed since)' : ''}, built ${r.tracker.builtAt ?? '?'}`,
    '',
    '| | goal | measured | met |',
    '| --- | --- | --- | --- |',
    `| sessions held | ${r.peers} | ${r.sessionsHeld} (tracker: ${r.trackerConnectionsAtEnd ?? '?'}) | ${yes(r.sessionsHeld >= r.peers)} |`,
    `| joins/s (welcomes) | ${r.joinRate} | ${r.joinsPerSec} (join p50 ${r.joinMsP50} ms, p99 ${r.joinMsP99} ms) | ${yes((r.joinsPerSec ?? 0) >= JOIN_RATE_TOLERANCE * r.joinRate)} |`,
    `| relay p99 while holding | < ${opts.relayP99GoalMs} ms | ${r.relayMsP99} ms (p50 ${r.relayMsP50}, max ${r.relayMsMax}; ${r.relays} relays, ${r.relaysPerSec}/s) | ${yes(r.relayMsP99 !== null && r.relayMsP99 < opts.relayP99GoalMs)} |`,
    `| relay p99 while joining | | ${r.joinPhaseRelays.relayMsP99} ms (p50 ${r.joinPhaseRelays.relayMsP50}, max ${r.joinPhaseRelays.relayMsMax}; ${r.joinPhaseRelays.relays} relays) | |`,
    `| tracker CPU (% of one core) | < ${CPU_SATURATED_PCT} | hold ${r.cpuPct}, join ${r.cpuPctJoin}, peak ${r.cpuPctPeak} | ${yes((r.cpuPct ?? 0) < CPU_SATURATED_PCT && (r.cpuPctJoin ?? 0) < CPU_SATURATED_PCT)} |`,
    `| tracker RSS (peak) | | ${r.rssMB} MB (${r.rssKBPerSession ?? '?'} KB per session) | |`,
    `| bootstrap | | ${r.bootstrap.answered}/${r.bootstrap.requests} answered, p99 ${r.bootstrap.msP99} ms, ${r.bootstrap.foreignPeers} foreign ids, ${r.bootstrap.notYetWelcomedPeers} not yet welcomed | |`,
    `| tracker CPU per unit (rough) | | ${r.cpuUsPerRelay ?? '?'} µs per relay while holding, ${r.cpuUsPerJoin ?? '?'} µs per join | |`,
    `| load generators' CPU | | hold ${r.clientCpuPct}, join ${r.clientCpuPctJoin}; loop delay p99 ≤ ${r.clientLoopDelayP99MsMax} ms | |`,
    `| stalls ≥ ${opts.relayP99GoalMs} ms while holding | | tracker loop: ${r.stalls.trackerStalledSeconds ?? '?'} of ${r.stalls.holdSeconds} s (longest ${r.stalls.trackerLoopDelayMaxMs ?? '?'} ms, GC ≤ ${r.stalls.trackerGcMaxMs ?? '?'} ms); generators: ${r.stalls.generatorStalledSeconds} s (longest ${r.stalls.generatorLoopDelayMaxMs} ms) | |`,
    '',
    `Failures: join timeouts ${f.joinTimeouts}, connect failures ${f.connectFailures}, closed before welcome ` +
      `${f.closedBeforeWelcome}, closed after welcome ${f.closedAfterWelcome}, not attempted ${f.notAttempted}, ` +
      `relays lost ${f.relaysLost}, mismatched ${f.relayMismatches}, skipped ${f.relaysSkipped}; tracker errors: ` +
      `${tally(f.trackerErrors)}; socket errors: ${tally(f.socketErrors)}; tracker log lines at warn or above: ${r.trackerWarnings}.`,
    '',
    r.verdict.ok ? 'Verdict: every goal met.' : `Verdict: bent — ${r.verdict.reasons.join('; ')}.`,
    ...r.verdict.caveats.map((c) => `\nCaveat: ${c}.`),
    '',
    '![sessions](sessions.svg) ![rates](rates.svg)',
    '![relay latency](relay-latency.svg) ![stalls](stalls.svg) ![cpu](cpu.svg) ![rss](rss.svg)',
    '',
  ];
  writeFileSync(join(dir, 'report.md'), lines.join('\n'));
}

function writeSweep(dir, sweep, points, command) {
  mkdirSync(dir, { recursive: true });
  const bendIndex = points.findIndex((p) => !p.result.verdict.ok);
  const firstValue = (test) => points.find((p) => test(p.result))?.value ?? null;
  /** Where each goal first fails, and where the generators (not the tracker) run out of CPU. */
  const bendBy = {
    sessions: firstValue((r) => r.verdict.failed.sessions),
    joinRate: firstValue((r) => r.verdict.failed.joinRate),
    relayP99: firstValue((r) => r.verdict.failed.relayP99),
    cpu: firstValue((r) => r.verdict.failed.cpu),
    generatorSaturated: firstValue((r) => r.verdict.generatorSaturated),
  };
  const summary = {
    sweep: sweep.flag,
    values: sweep.values,
    bend:
      bendIndex < 0
        ? null
        : { value: points[bendIndex].value, reasons: points[bendIndex].result.verdict.reasons },
    bendBy,
    points: points.map(({ value, label, result: r }) => ({
      value,
      dir: label,
      peers: r.peers,
      joinRate: r.joinRate,
      relaysPerSecTarget: r.relaysPerSecTarget,
      swarmSize: r.swarmSize,
      sessionsHeld: r.sessionsHeld,
      joinsPerSec: r.joinsPerSec,
      joinMsP99: r.joinMsP99,
      relayMsP50: r.relayMsP50,
      relayMsP99: r.relayMsP99,
      relayMsMax: r.relayMsMax,
      joinPhaseRelayMsP99: r.joinPhaseRelays.relayMsP99,
      relaysPerSec: r.relaysPerSec,
      cpuPct: r.cpuPct,
      cpuPctJoin: r.cpuPctJoin,
      cpuPctPeak: r.cpuPctPeak,
      rssMB: r.rssMB,
      clientCpuPct: r.clientCpuPct,
      clientCpuPctJoin: r.clientCpuPctJoin,
      trackerCoreOtherPct: r.trackerCoreOtherPct,
      failures: r.failures,
      verdict: r.verdict,
    })),
    machine: points[0]?.result.machine ?? null,
  };
  writeFileSync(join(dir, 'sweep.json'), `${JSON.stringify(summary, null, 2)}\n`);
  const xs = points.map((p) => p.value);
  const xy = (key) => points.map((p) => ({ x: p.value, y: p.result[key] ?? Number.NaN }));
  writeFileSync(
    join(dir, 'sweep-latency.svg'),
    `${linePlot({
      title: `Relay latency while holding, by ${sweep.flag}`,
      xLabel: sweep.flag,
      yLabel: 'Latency (ms)',
      series: [
        { name: 'p50', points: xy('relayMsP50') },
        { name: 'p99', points: xy('relayMsP99') },
        {
          name: `goal (p99 < ${opts.relayP99GoalMs} ms)`,
          points: xs.map((x) => ({ x, y: opts.relayP99GoalMs })),
        },
      ],
      yMin: 0,
    })}\n`,
  );
  writeFileSync(
    join(dir, 'sweep-cpu.svg'),
    `${linePlot({
      title: `Tracker CPU and joins/s, by ${sweep.flag}`,
      xLabel: sweep.flag,
      yLabel: '% of one core',
      series: [
        { name: 'tracker CPU while joining', points: xy('cpuPctJoin') },
        { name: 'tracker CPU while holding', points: xy('cpuPct') },
        { name: 'load generators while joining', points: xy('clientCpuPctJoin') },
      ],
      yMin: 0,
      yMax: 110,
    })}\n`,
  );
  const first = points[0]?.result;
  const lines = [
    `# Tracker load sweep over ${sweep.flag}`,
    '',
    `\`${command}\``,
    '',
    ...(first === undefined ? [] : machineLines(first.machine)),
    '',
    `A point bends when it holds fewer sessions than it opened, joins below ${JOIN_RATE_TOLERANCE * 100} % of the ` +
      `rate asked, has a relay p99 ≥ ${opts.relayP99GoalMs} ms while holding, or the tracker's CPU averages ≥ ` +
      `${CPU_SATURATED_PCT} % in a phase.`,
    '',
    '| ' +
      [
        sweep.flag,
        'peers',
        'joins/s asked',
        'relays/s asked',
        'held',
        'joins/s',
        'join p99 ms',
        'relay p50 ms',
        'relay p99 ms',
        'relay max ms',
        'relay p99 joining ms',
        'tracker CPU join/hold/peak %',
        'RSS MB',
        'generators CPU join/hold %',
        'bent because',
      ].join(' | ') +
      ' |',
    `|${' --- |'.repeat(15)}`,
    ...points.map(
      ({ value, label, result: r }) =>
        `| [${value}](${label}/report.md) | ${r.peers} | ${r.joinRate} | ${r.relaysPerSecTarget} | ${r.sessionsHeld} | ` +
        `${r.joinsPerSec} | ${r.joinMsP99} | ${r.relayMsP50} | ${r.relayMsP99} | ${r.relayMsMax} | ` +
        `${r.joinPhaseRelays.relayMsP99} | ${r.cpuPctJoin}/${r.cpuPct}/${r.cpuPctPeak} | ${r.rssMB} | ` +
        `${r.clientCpuPctJoin}/${r.clientCpuPct} | ${r.verdict.reasons.join('; ') || '—'}` +
        `${r.verdict.caveats.length > 0 ? ` (caveat: ${r.verdict.caveats.join('; ')})` : ''} |`,
    ),
    '',
    bendIndex < 0
      ? `No point bent: the tracker met every goal up to ${sweep.flag} = ${xs[xs.length - 1]}.`
      : `It bends at ${sweep.flag} = ${points[bendIndex].value}: ${points[bendIndex].result.verdict.reasons.join('; ')}.`,
    '',
    `First ${sweep.flag} at which each goal fails (— = none up to ${xs[xs.length - 1]}): sessions held ` +
      `${bendBy.sessions ?? '—'}, joins/s ${bendBy.joinRate ?? '—'}, relay p99 ${bendBy.relayP99 ?? '—'}, ` +
      `tracker CPU ${bendBy.cpu ?? '—'}; the load generators saturate their core from ` +
      `${bendBy.generatorSaturated ?? '— (never)'}${bendBy.generatorSaturated === null ? '' : ' on (figures there bound the tracker from below)'}.`,
    '',
    '![relay latency by point](sweep-latency.svg) ![cpu by point](sweep-cpu.svg)',
    '',
  ];
  writeFileSync(join(dir, 'report.md'), lines.join('\n'));
  return summary;
}

// ─── main ───────────────────────────────────────────────────────────────────────────────────────

if (!existsSync(trackerCli)) {
  progress(`${trackerCli} is missing: build first (npx tsc -b, or npm run setup)`);
  process.exit(1);
}
// This process parses the generators' reports; keep it off the tracker's core.
spawnSync('taskset', ['-a', '-pc', String(opts.clientCore), String(process.pid)], { stdio: 'ignore' });

const base = {
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
    const points = [];
    for (const value of opts.sweep.values) {
      const label = `${opts.sweep.flag}-${value}`;
      const point = { ...base, [opts.sweep.key]: value };
      const result = await runPoint(point, join(out, label), label);
      points.push({ value, label, result });
      // Let the kernel finish closing the last point's sockets before the next starts.
      await sleep(3000);
    }
    const summary = writeSweep(out, opts.sweep, points, commandLine());
    progress(
      summary.bend === null
        ? `no point bent up to ${opts.sweep.flag} = ${opts.sweep.values[opts.sweep.values.length - 1]}`
        : `bends at ${opts.sweep.flag} = ${summary.bend.value}: ${summary.bend.reasons.join('; ')}`,
    );
  }
} catch (e) {
  progress(e instanceof Error ? e.message : String(e));
  killAll();
  process.exit(1);
}
// Node keeps no handle open after the children are gone; exit explicitly in case a guard lingers.
process.exit();
