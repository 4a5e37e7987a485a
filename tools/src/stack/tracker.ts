/**
 * The tracker as a child process, as deployed: the rendezvous server, the HLS origin for a
 * directory at /live/, the demo at / and the true source in process. Resolves once it logs
 * "listening"; its /debug/* counters are read with the broadcaster key.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { OriginStats } from '@chunkycast/tracker';
import { fromRoot, root } from '../lib/paths.js';
import { forEachLine, stopProcess, prioritiseBroadcaster, tieToParent } from '../lib/process.js';
import { Ring } from '../lib/wait.js';

export const trackerCli: string = fromRoot('tracker', 'dist', 'cli.js');
export const demoDist: string = fromRoot('demo', 'dist');

/** Timeout of one /debug or /healthz request. */
const REQUEST_TIMEOUT_MS = 5000;
/** Warnings and errors kept for the tests to inspect. */
const WARNINGS_KEPT = 200;

/** One JSON log line of the tracker (pino's layout: level as a label, msg, fields). */
export interface LogRecord {
  readonly level?: string;
  readonly msg?: string;
  readonly [field: string]: unknown;
}

/** The origin's counters (/debug/origin): the tracker's own type, so the two cannot drift apart. */
export type OriginCounters = OriginStats;

/** The tracker's view of one stream's swarm (/debug/swarm/NAME). */
export interface SwarmView {
  readonly sourceConnected?: boolean;
  readonly [field: string]: unknown;
}

export interface TrackerOptions {
  originDir?: string;
  /** Address to bind (the lab binds its public segment's address). */
  host?: string;
  staticDir?: string;
  port?: number;
  /** null: no true source (an origin-only tracker, as the comparison benchmark's non-mesh arms use). */
  sourceStream?: string | null;
  logLevel?: string;
  extraArgs?: readonly string[];
  /** true: echo every log line to stderr; a function: echo the records it accepts. */
  echo?: boolean | ((record: LogRecord) => boolean);
  startTimeoutMs?: number;
  /** More environment variables for the tracker (secrets go here, not in argv). */
  env?: Readonly<Record<string, string>>;
  /** The broadcaster key (the source's secret; /debug/* needs it as a bearer token). */
  broadcasterKey?: string;
}

export interface Tracker {
  readonly proc: ChildProcess;
  readonly url: string;
  readonly wsUrl: string;
  readonly demoUrl: string;
  readonly broadcasterKey: string;
  readonly listening: LogRecord;
  readonly logs: Ring;
  /** The latest warnings and errors it logged. */
  readonly warnings: LogRecord[];
  /** GET (or `init.method`) `path` with the broadcaster key: parsed JSON, or the text. */
  getJson(path: string, init?: RequestInit): Promise<unknown>;
  origin(): Promise<OriginCounters>;
  resetOrigin(): Promise<unknown>;
  swarm(stream?: string): Promise<SwarmView>;
  healthy(): Promise<boolean>;
  stop(): Promise<void>;
}

function parseRecord(line: string): LogRecord | null {
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === 'object' && value !== null ? (value as LogRecord) : null;
  } catch {
    return null; // not JSON: kept in the ring as is
  }
}

/** CHUNKYCAST_BROADCASTER_KEY when set and not empty. */
function keyFromEnvironment(): string | undefined {
  const key = process.env.CHUNKYCAST_BROADCASTER_KEY;
  return key === undefined || key === '' ? undefined : key;
}

/** Starts the tracker CLI. Resolves once it logs "listening". */
export async function startTracker({
  originDir,
  host = '127.0.0.1',
  staticDir = demoDist,
  port = 0,
  sourceStream = 'live',
  logLevel = 'info',
  extraArgs = [],
  echo = false,
  startTimeoutMs = 20_000,
  env: extraEnv = {},
  broadcasterKey = keyFromEnvironment() ?? randomBytes(24).toString('base64url'),
}: TrackerOptions = {}): Promise<Tracker> {
  if (!existsSync(trackerCli))
    throw new Error(`${trackerCli} is missing: build the tracker first (npx tsc -b, or npm run setup)`);
  const args = [trackerCli, '--host', host, '--port', String(port), '--log-level', logLevel];
  if (originDir !== undefined) args.push('--origin-dir', originDir);
  args.push('--static-dir', staticDir);
  if (sourceStream !== null) args.push('--source-stream', sourceStream);
  args.push(...extraArgs);
  // The key goes in the environment, not argv, which other users of the machine can read.
  const env = { ...process.env, ...extraEnv, CHUNKYCAST_BROADCASTER_KEY: broadcasterKey };
  const proc = spawn(process.execPath, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  tieToParent(proc);
  prioritiseBroadcaster(proc);
  const logs = new Ring(400);
  let onRecord: (record: LogRecord) => void = () => undefined;
  const warnings: LogRecord[] = [];
  forEachLine(proc.stdout, (line) => {
    logs.push(line);
    if (echo === true) process.stderr.write(`tracker: ${line}\n`);
    const record = parseRecord(line);
    if (record === null) return;
    if (typeof echo === 'function' && echo(record)) process.stderr.write(`tracker: ${line}\n`);
    if (record.level === 'warn' || record.level === 'error') {
      warnings.push(record);
      if (warnings.length > WARNINGS_KEPT) warnings.shift();
    }
    onRecord(record);
  });
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (chunk: string) => {
    for (const line of chunk.split('\n')) if (line.trim() !== '') logs.push(`[stderr] ${line}`);
    if (echo !== false) process.stderr.write(`tracker (stderr): ${chunk}`);
  });
  const listening = await new Promise<LogRecord>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`tracker did not log "listening" within ${startTimeoutMs} ms:\n${logs.text()}`));
    }, startTimeoutMs);
    onRecord = (record) => {
      if (record.msg === 'listening') {
        clearTimeout(timer);
        resolve(record);
      }
    };
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`tracker exited (${code ?? signal}) before listening:\n${logs.text()}`));
    });
    proc.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
  onRecord = () => undefined;
  const url = String(listening.url);
  const getJson = async (path: string, init?: RequestInit): Promise<unknown> => {
    const headers = {
      ...(init?.headers as Record<string, string> | undefined),
      Authorization: `Bearer ${broadcasterKey}`,
    };
    const response = await fetch(url + path, {
      ...init,
      headers,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    if (!response.ok) throw new Error(`${init?.method ?? 'GET'} ${path}: HTTP ${response.status}`);
    const type = response.headers.get('content-type') ?? '';
    return type.includes('json') ? ((await response.json()) as unknown) : response.text();
  };
  return {
    proc,
    url,
    wsUrl: typeof listening.wsUrl === 'string' ? listening.wsUrl : `${url.replace(/^http/, 'ws')}/ws`,
    demoUrl: typeof listening.demoUrl === 'string' ? listening.demoUrl : `${url}/`,
    broadcasterKey,
    listening,
    logs,
    warnings,
    getJson,
    origin: async () => (await getJson('/debug/origin')) as OriginCounters,
    resetOrigin: () => getJson('/debug/origin/reset', { method: 'POST' }),
    swarm: async (stream = 'live') =>
      (await getJson(`/debug/swarm/${encodeURIComponent(stream)}`)) as SwarmView,
    healthy: async () => {
      try {
        await getJson('/healthz');
        return true;
      } catch {
        return false;
      }
    },
    stop: () => stopProcess(proc, { signal: 'SIGTERM', graceMs: 5000 }),
  };
}
