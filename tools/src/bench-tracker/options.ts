/** The command line of `npm run bench:tracker`: its flags, its usage text, and the options they give. */
import { resolve } from 'node:path';
import { MAX_SDP_BYTES } from '@chunkycast/wire';
import { UsageError, numberOption, stringValue, type ParsedCommandLine } from '../lib/args.js';

export const BENCH_TRACKER_USAGE = `usage: npm run bench:tracker -- [--peers P] [--join-rate R] [--duration S] [--out DIR] [options]

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
  --no-probe               do not preload the probe (tools/src/bench-tracker/probe.ts) into the
                           tracker (it reports the tracker's event-loop stalls and GC pauses each second)
  --nice N                 run the tracker and the generators at this nice value (default 0; a
                           negative value, written --nice=-5, needs CAP_SYS_NICE and shields them
                           from other load)
  --help                   print this help`;

export const BENCH_TRACKER_FLAGS = {
  peers: { type: 'string' },
  'join-rate': { type: 'string' },
  duration: { type: 'string' },
  out: { type: 'string' },
  'swarm-size': { type: 'string' },
  'relays-per-sec': { type: 'string' },
  'bootstraps-per-sec': { type: 'string' },
  'sdp-bytes': { type: 'string' },
  'client-procs': { type: 'string' },
  sweep: { type: 'string' },
  'tracker-core': { type: 'string' },
  'client-core': { type: 'string' },
  'fd-limit': { type: 'string' },
  'relay-p99-goal-ms': { type: 'string' },
  'tracker-cli': { type: 'string' },
  'no-probe': { type: 'boolean' },
  nice: { type: 'string' },
} as const;

/** The load of one run: what a sweep varies one field of. */
export interface BenchPoint {
  readonly peers: number;
  readonly joinRate: number;
  readonly duration: number;
  readonly swarmSize: number;
  readonly relaysPerSec: number;
  readonly bootstrapsPerSec: number;
  readonly sdpBytes: number;
}

/** The flags a sweep may vary, and the field of the point each sets. */
export const SWEEPABLE = {
  peers: 'peers',
  'join-rate': 'joinRate',
  'relays-per-sec': 'relaysPerSec',
  'swarm-size': 'swarmSize',
} as const satisfies Record<string, keyof BenchPoint>;
export type SweepFlag = keyof typeof SWEEPABLE;

export interface Sweep {
  readonly flag: SweepFlag;
  readonly key: (typeof SWEEPABLE)[SweepFlag];
  readonly values: readonly number[];
}

export interface BenchTrackerOptions extends BenchPoint {
  /** Output directory as given (resolved against the caller's directory), or null for the default. */
  readonly out: string | null;
  readonly clientProcs: number | null;
  readonly sweep: Sweep | null;
  readonly trackerCore: number;
  readonly clientCore: number;
  readonly fdLimit: number;
  readonly relayP99GoalMs: number;
  readonly nice: number;
  readonly probe: boolean;
  readonly trackerCli: string | null;
}

function isSweepFlag(name: string): name is SweepFlag {
  return Object.hasOwn(SWEEPABLE, name);
}

/** `NAME=V1,V2,…` of --sweep. */
export function parseSweep(text: string): Sweep {
  const match = /^([a-z-]+)=([\d.,]+)$/.exec(text);
  const name = match?.[1];
  const list = match?.[2];
  if (name === undefined || list === undefined || !isSweepFlag(name))
    throw new UsageError(`--sweep needs NAME=V1,V2,… with NAME one of ${Object.keys(SWEEPABLE).join(', ')}`);
  const values = list.split(',').map((v) => numberOption(`sweep ${name}`, v, 0, { min: 1 }));
  return { flag: name, key: SWEEPABLE[name], values };
}

/**
 * The options from the parsed flags; `cores` is this machine's core count (the pinned cores must
 * exist). Counts are floored as given (2.5 peers is 2), as they always were.
 */
export function benchTrackerOptions(parsed: ParsedCommandLine, cores: number): BenchTrackerOptions {
  const value = (flag: string): string | undefined => stringValue(parsed, flag);
  const number = (flag: string, fallback: number, min: number): number =>
    numberOption(flag, value(flag), fallback, { min });
  const count = (flag: string, fallback: number, min: number): number =>
    Math.floor(number(flag, fallback, min));
  const clientProcs = value('client-procs');
  const sweep = value('sweep');
  const out = value('out');
  const trackerCli = value('tracker-cli');
  const options: BenchTrackerOptions = {
    peers: count('peers', 1000, 2),
    joinRate: number('join-rate', 200, 1),
    duration: number('duration', 30, 1),
    out: out ?? null,
    swarmSize: count('swarm-size', 500, 2),
    relaysPerSec: number('relays-per-sec', 2000, 0),
    bootstrapsPerSec: number('bootstraps-per-sec', 100, 0),
    sdpBytes: count('sdp-bytes', 1500, 16),
    clientProcs: clientProcs === undefined ? null : count('client-procs', 1, 1),
    sweep: sweep === undefined ? null : parseSweep(sweep),
    trackerCore: count('tracker-core', 0, 0),
    clientCore: count('client-core', 1, 0),
    fdLimit: count('fd-limit', 65536, 1024),
    relayP99GoalMs: number('relay-p99-goal-ms', 20, 0.001),
    nice: numberOption('nice', value('nice'), 0, { min: -20, max: 19, integer: true }),
    probe: parsed.values['no-probe'] !== true,
    trackerCli: trackerCli ?? null,
  };
  if (options.sdpBytes > MAX_SDP_BYTES)
    throw new UsageError(`--sdp-bytes must be at most ${MAX_SDP_BYTES} (the protocol limit)`);
  if (options.trackerCore >= cores || options.clientCore >= cores)
    throw new UsageError(`--tracker-core and --client-core must be below ${cores} (this machine's cores)`);
  return options;
}

/** A path given on the command line, against the directory npm was run from. */
export function fromCaller(path: string): string {
  return resolve(process.env.INIT_CWD ?? process.cwd(), path);
}
