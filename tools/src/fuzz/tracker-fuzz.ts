/**
 * The tracker fuzzer (`npm run fuzz:tracker`, cli.ts): sends a bounded number of random and mutated
 * frames to a tracker running as a separate process on loopback, over several concurrent connections
 * (one the stream's true source, most viewers, one that mostly never joins), and checks every answer
 * in order against an oracle (frames.ts). A crash shows as the process exiting; its RSS is sampled
 * from /proc each second.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, sign as signBytes, verify as verifyBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket, type RawData } from 'ws';
import { createRandom, type Random } from '@chunkycast/engine';
import { DEFAULT_MAX_BAD_FRAMES } from '@chunkycast/tracker';
import {
  announcementSigningBytes,
  decodeClientMessage,
  decodeServerMessage,
  type ClientMessage,
  type SegmentAnnouncement,
  type TrackerErrorCode,
  CLOSE_REPLACED,
} from '@chunkycast/wire';
import { fromRoot } from '../lib/paths.js';
import { rssKb } from '../lib/proc.js';
import { forEachLine, stopProcess, tieToParent } from '../lib/process.js';
import { round } from '../lib/stats.js';
import {
  CLOSE_TOO_MANY_BAD_FRAMES,
  FRAME_CLASSES,
  FrameGenerator,
  judgeFrame,
  predictReply,
  type ConnectionRole,
  type ConnectionState,
  type FuzzFrame,
  type Prediction,
  type PredictionContext,
  type ReplyKind,
} from './frames.js';

export { FRAME_CLASSES, type FrameClass } from './frames.js';

export interface TrackerFuzzOptions {
  /** Frames to send in all (sentinels and joins included). */
  readonly frames: number;
  /** Stops by itself after this long even if frames remain. */
  readonly maxSeconds: number;
  /** Master seed of the frame generators (each connection gets its own stream). */
  readonly seed: number;
  readonly connections: number;
  /** Frames sent back to back on a connection before waiting for all their answers. */
  readonly batchFrames: number;
  /** The tracker's limit of undecodable frames per connection (it is started with its default). */
  readonly maxBadFrames: number;
  /** How long a batch may wait for its answers before they count as missing. */
  readonly batchTimeoutMs: number;
  /** The tracker's RSS after the run may exceed its RSS after warm-up by at most this. */
  readonly rssGrowthLimitMB: number;
  /** Share of the frames sent before the warm-up RSS is taken. */
  readonly warmupFraction: number;
  /** Idle time after the run, before the final RSS reading. */
  readonly idleMs: number;
  /** The tracker's built CLI. */
  readonly trackerCli: string;
  /**
   * Extra environment for the tracker, applied last. Tests use it to give the tracker a setting the
   * oracle does not expect (the oracle must then report mismatches).
   */
  readonly trackerEnv: Readonly<Record<string, string>>;
  /** Progress line interval (0: none). */
  readonly progressMs: number;
  readonly progress: (line: string) => void;
}

export const DEFAULT_FUZZ_OPTIONS: TrackerFuzzOptions = {
  frames: 1_000_000,
  maxSeconds: 900,
  seed: 1,
  connections: 16,
  batchFrames: 128,
  maxBadFrames: DEFAULT_MAX_BAD_FRAMES,
  batchTimeoutMs: 20_000,
  rssGrowthLimitMB: 32,
  warmupFraction: 0.1,
  idleMs: 2_000,
  trackerCli: fromRoot('tracker', 'dist', 'cli.js'),
  trackerEnv: {},
  progressMs: 5_000,
  progress: (line) => {
    process.stderr.write(`${line}\n`);
  },
};

export interface MismatchSample {
  readonly kind: string;
  readonly connection: number;
  /** Frame number on its connection (0 = the first after connecting). */
  readonly frameIndex: number | null;
  readonly cls: string | null;
  readonly expected: string;
  readonly got: string;
  readonly frameBytes: number | null;
  readonly framePreview: string | null;
}

export interface TrackerFuzzResult {
  readonly seed: number;
  readonly connections: number;
  readonly framesRequested: number;
  readonly framesSent: number;
  readonly seconds: number;
  readonly framesPerSec: number;
  readonly stoppedBy: 'frames' | 'time' | 'crash' | 'refused';
  /** Frames sent per generator class (plus `opening` joins and `sentinel` bootstraps). */
  readonly framesByClass: Record<string, number>;
  /** Frames the oracle judged undecodable / decodable / connection-closing. */
  readonly badFrames: number;
  readonly decodableFrames: number;
  readonly closingFrames: number;
  /** Error frames received, by code (typed answers to bad frames and semantic refusals alike). */
  readonly errorsByCode: Record<string, number>;
  /** Bad frames answered with exactly the oracle's code. */
  readonly badFramesAnswered: number;
  /**
   * Bad frames still waiting when the tracker closed the connection unasked (answered by that
   * disconnect). The fuzzer ends a batch at the frame reaching the bad-frame limit, so normally 0.
   */
  readonly badFramesAnsweredByDisconnect: number;
  /** Bad frames whose answers were not awaited because the fuzzer cut its own connection. */
  readonly badFramesCutByUs: number;
  /** Viewer joins with the connection's own resume ticket that got their old peer id back. */
  readonly resumesHonoured: number;
  /** Connections the tracker closed (4000) because a join with their resume ticket took their id. */
  readonly replacedByResume: number;
  /** Server-initiated closes, by close code. */
  readonly disconnectsByCode: Record<string, number>;
  /** Closes with a code nothing sent had called for (not counted as mismatches; see report). */
  readonly unexpectedDisconnectsByCode: Record<string, number>;
  readonly reconnects: number;
  /** Connections the fuzzer cut itself (TCP reset right after a batch), to exercise mid-handling closes. */
  readonly clientAborts: number;
  readonly connectFailures: number;
  readonly batchTimeouts: number;
  /** Frames answered other than the oracle says (missing, wrong code, wrong close). Must be 0. */
  readonly mismatches: number;
  readonly mismatchesByKind: Record<string, number>;
  /** By the frame's class and what the oracle expected of it: one cause is usually one key. */
  readonly mismatchesByExpected: Record<string, number>;
  readonly mismatchSamples: readonly MismatchSample[];
  /** The whole frames of those samples (payloads of binary frames as `base64:…`), to reproduce them. */
  readonly mismatchFrames: readonly { readonly sample: MismatchSample; readonly payload: string }[];
  /** Tracker frames its own peer-side decoder (decodeServerMessage) refuses. */
  readonly serverFrameViolations: number;
  /** By the decoder's refusal (`code: message`, numbers as N). */
  readonly serverFrameViolationsByKind: Record<string, number>;
  readonly serverFrameViolationSamples: readonly string[];
  readonly signalsReceived: number;
  readonly announcesReceived: number;
  readonly welcomes: number;
  readonly trackerCrashed: boolean;
  readonly trackerExit: { readonly code: number | null; readonly signal: string | null } | null;
  /** SIGTERM at the end made it shut down gracefully with exit code 0. */
  readonly trackerStoppedCleanly: boolean;
  /** Frames whose handler threw (the tracker's /debug/metrics handlerFaults; 0 if unreadable). */
  readonly trackerHandlerFaults: number;
  /** Error-level log lines of the tracker (a handler fault logs one). */
  readonly trackerErrorLogs: number;
  readonly trackerErrorLines: readonly string[];
  /** The tracker's /debug/metrics after the run (null if it could not be read). */
  readonly trackerMetrics: unknown;
  readonly rssMBBeforeRun: number | null;
  /** RSS once `warmupFraction` of the frames were sent. */
  readonly rssMBStart: number | null;
  /** RSS after the run and `idleMs` of idling, the fuzzer's connections closed. */
  readonly rssMBEnd: number | null;
  readonly rssMBMax: number | null;
  readonly rssGrowthMB: number | null;
  readonly rssGrowthLimitMB: number;
  readonly memoryFlat: boolean;
  /** [seconds since start, RSS MB], one a second. */
  readonly rssSamples: readonly (readonly [number, number])[];
  readonly passed: boolean;
}

// ─────────────────────────────── the tracker process ───────────────────────────────

interface TrackerExit {
  readonly code: number | null;
  readonly signal: string | null;
}

/** The tracker as a child process: its address, its log levels, and whether (how) it exited. */
class TrackerProcess {
  url = '';
  wsUrl = '';
  /** Set once the process is gone. */
  exited: TrackerExit | null = null;
  readonly exit: Promise<TrackerExit>;
  readonly levels: Record<string, number> = {};
  readonly errorLines: string[] = [];
  /** The last lines it printed, for a start failure's message. */
  readonly tail: string[] = [];
  private onListening: ((record: { url?: unknown; wsUrl?: unknown }) => void) | null = null;

  constructor(private readonly child: ChildProcess) {
    // If this process dies first, even by SIGKILL, the tracker must not outlive it.
    tieToParent(child);
    this.exit = new Promise((resolveExit) => {
      child.once('exit', (code, signal) => {
        this.exited = { code, signal };
        resolveExit(this.exited);
      });
    });
    if (child.stdout !== null)
      forEachLine(child.stdout, (line) => {
        this.onStdoutLine(line);
      });
    if (child.stderr !== null)
      forEachLine(child.stderr, (line) => {
        this.remember(`[stderr] ${line}`);
      });
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  /** Resolves once the tracker logs `listening`; rejects if it exits or stays silent first. */
  listening(timeoutMs: number): Promise<void> {
    return new Promise((resolveListening, reject) => {
      const timer = setTimeout(() => {
        this.child.kill('SIGKILL');
        reject(new Error(`tracker did not log "listening" within ${timeoutMs} ms:\n${this.tail.join('\n')}`));
      }, timeoutMs);
      void this.exit.then((e) => {
        clearTimeout(timer);
        reject(
          new Error(`tracker exited (${e.code ?? e.signal}) before listening:\n${this.tail.join('\n')}`),
        );
      });
      this.onListening = (record) => {
        clearTimeout(timer);
        this.url = String(record.url);
        this.wsUrl = String(record.wsUrl);
        resolveListening();
      };
    });
  }

  async stop(): Promise<TrackerExit> {
    if (this.exited !== null) return this.exited;
    await stopProcess(this.child, { signal: 'SIGTERM', graceMs: TRACKER_STOP_TIMEOUT_MS });
    return this.exit;
  }

  private remember(line: string): void {
    this.tail.push(line);
    if (this.tail.length > 50) this.tail.shift();
  }

  private onStdoutLine(line: string): void {
    this.remember(line);
    let record: { level?: unknown; msg?: unknown; url?: unknown; wsUrl?: unknown };
    try {
      record = JSON.parse(line) as typeof record;
    } catch {
      return;
    }
    const level = String(record.level);
    this.levels[level] = (this.levels[level] ?? 0) + 1;
    if (level === 'error' && this.errorLines.length < 10) this.errorLines.push(line.slice(0, 2000));
    if (record.msg === 'listening') this.onListening?.(record);
  }
}

const TRACKER_START_TIMEOUT_MS = 20_000;
const TRACKER_STOP_TIMEOUT_MS = 5_000;

async function startTracker(
  cli: string,
  args: readonly string[],
  maxBadFrames: number,
  extraEnv: Readonly<Record<string, string>>,
): Promise<TrackerProcess> {
  // Only the limits this run sets: a CHUNKYCAST_* variable of the caller's shell must not change it.
  const env: Record<string, string | undefined> = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('CHUNKYCAST_')),
  );
  // The fuzzer sends tens of thousands of frames a second from one address: no rate or connection
  // limits (0 = unlimited; a tracker without these settings ignores them). The bad-frame limit stays.
  env.CHUNKYCAST_MAX_MESSAGES_PER_SECOND = '0';
  env.CHUNKYCAST_MAX_CONNECTIONS_PER_ADDRESS = '0';
  env.CHUNKYCAST_MAX_CONNECTIONS = '0';
  // The bad-frame limit the oracle expects (the tracker's default, stated so a default change shows).
  env.CHUNKYCAST_MAX_BAD_FRAMES = String(maxBadFrames);
  Object.assign(env, extraEnv);
  const tracker = new TrackerProcess(
    spawn(process.execPath, [cli, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  await tracker.listening(TRACKER_START_TIMEOUT_MS);
  return tracker;
}

/** Resident set size of a process in MB, to 0.1 MB (null where /proc is not available). */
function readRssMB(pid: number): number | null {
  const kB = rssKb(pid);
  return kB === null ? null : round(kB / 1024, 1);
}

// ─────────────────────────────── the run ───────────────────────────────

/** The fields of a tracker frame the fuzzer reads (from the raw JSON, so a refused frame still counts). */
interface ReplyFields {
  readonly type?: unknown;
  readonly code?: unknown;
  readonly peerId?: unknown;
  readonly sourceId?: unknown;
  readonly peers?: unknown;
  readonly resume?: unknown;
  readonly resumed?: unknown;
  readonly message?: unknown;
}

/** What was sent, for mismatch reports. */
interface SentFrame {
  readonly cls: string;
  readonly payload: string | Buffer;
  readonly connection: number;
  readonly index: number;
}

type Expectation =
  | { readonly kind: 'close'; readonly code: number; readonly sent: SentFrame }
  | { readonly kind: 'bad'; readonly code: TrackerErrorCode; readonly sent: SentFrame }
  | {
      readonly kind: 'reply';
      readonly prediction: Prediction;
      /** The connection's state epoch after this frame: a welcome updates the state only if still current. */
      readonly epoch: number;
      /** A viewer join with this connection's own valid ticket: the welcome must give this id back. */
      readonly resumeOf: number | null;
      /** A signal's target: an `unknownPeer` naming another peer is not this frame's answer. */
      readonly signalTo: number | null;
      readonly sent: SentFrame;
    };

interface Planned {
  readonly payload: string | Buffer;
  readonly binary: boolean;
  readonly cls: string;
  readonly expectation: (sent: SentFrame) => Expectation;
  /** The tracker must close the connection with this code right after answering this frame. */
  readonly thenClose?: number;
}

class Stats {
  framesSent = 0;
  readonly framesByClass: Record<string, number> = Object.fromEntries(
    [...FRAME_CLASSES, 'opening', 'sentinel'].map((c) => [c, 0]),
  );
  badFrames = 0;
  decodableFrames = 0;
  closingFrames = 0;
  readonly errorsByCode: Record<string, number> = {};
  badFramesAnswered = 0;
  badFramesAnsweredByDisconnect = 0;
  badFramesCutByUs = 0;
  resumesHonoured = 0;
  replacedByResume = 0;
  readonly disconnectsByCode: Record<string, number> = {};
  readonly unexpectedDisconnectsByCode: Record<string, number> = {};
  reconnects = 0;
  clientAborts = 0;
  connectFailures = 0;
  batchTimeouts = 0;
  mismatches = 0;
  readonly mismatchesByKind: Record<string, number> = {};
  readonly mismatchesByExpected: Record<string, number> = {};
  readonly mismatchSamples: MismatchSample[] = [];
  /** Whole frames of the first mismatches, for reproducing them. */
  readonly mismatchFrames: { sample: MismatchSample; payload: string }[] = [];
  serverFrameViolations = 0;
  readonly serverFrameViolationsByKind: Record<string, number> = {};
  readonly serverFrameViolationSamples: string[] = [];
  signalsReceived = 0;
  announcesReceived = 0;
  welcomes = 0;
}

const MAX_SAMPLES = 20;
const MAX_CONNECT_FAILURES_IN_A_ROW = 20;
const CLIENT_ABORT_PROBABILITY = 0.002;

function bump(counts: Record<string, number>, key: string | number): void {
  counts[key] = (counts[key] ?? 0) + 1;
}

/** Peer ids worth signalling: our connections' members now, and ids seen in welcomes and peer lists. */
class PeerDirectory {
  private readonly live = new Map<number, number>();
  private readonly seen: number[] = [];
  private seenNext = 0;

  setLive(connection: number, peerId: number | null): void {
    if (peerId === null) this.live.delete(connection);
    else this.live.set(connection, peerId);
  }

  noteSeen(peerId: number): void {
    if (this.seen.length < 256) this.seen.push(peerId);
    else this.seen[this.seenNext++ % 256] = peerId;
  }

  pick(random: Random): number {
    const x = random.nextFloat();
    if (x < 0.5 && this.live.size > 0) return [...this.live.values()][random.int(this.live.size)] ?? 0;
    if (x < 0.7 && this.seen.length > 0) return this.seen[random.int(this.seen.length)] ?? 0;
    if (x < 0.97) return random.nextU32();
    return random.int(2) === 0 ? 0 : 0xffff_ffff;
  }
}

interface RunContext {
  readonly options: TrackerFuzzOptions;
  readonly stats: Stats;
  readonly directory: PeerDirectory;
  readonly prediction: PredictionContext;
  readonly wsUrl: string;
  /** Set when frames or time ran out or the tracker died: sessions finish their batch and close. */
  stopping: boolean;
  /** Called after every batch is sent (warm-up RSS, limits). */
  onBatchSent(): void;
  /** A connection could not be opened many times in a row: stop. */
  refused(): void;
}

function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

function openSocket(url: string): Promise<WebSocket> {
  return new Promise((resolveOpen, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: 10_000 });
    const onError = (e: Error): void => {
      reject(e);
    };
    ws.once('error', onError);
    ws.once('open', () => {
      ws.off('error', onError);
      resolveOpen(ws);
    });
  });
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}

function preview(payload: string | Buffer): string {
  return typeof payload === 'string'
    ? payload.slice(0, 300)
    : `bytes:${payload.subarray(0, 150).toString('hex')}`;
}

/** One of the fuzzer's connections, across reconnects: its role, its generator, a frame held over. */
class Worker {
  readonly generator: FrameGenerator;
  /** A connection-closing frame drawn mid-batch waits to be the next batch on its own. */
  held: FuzzFrame | null = null;
  /** The latest welcome's resume ticket and what it claims. */
  resume: {
    readonly ticket: string;
    readonly peerId: number;
    readonly stream: string;
    readonly role: string;
  } | null = null;
  readonly random: Random;

  constructor(
    readonly index: number,
    readonly role: ConnectionRole,
    readonly homeStream: string,
    seedRandom: Random,
    private readonly run: RunContext,
    sign: (a: SegmentAnnouncement) => string,
  ) {
    this.random = seedRandom.fork(index);
    this.generator = new FrameGenerator(this.random.fork(1), {
      role,
      homeStream,
      broadcasterKey: run.prediction.broadcasterKey,
      sign,
      pickPeerId: (r) => run.directory.pick(r),
      resumeTicket: () => this.resume?.ticket ?? null,
    });
  }

  async loop(): Promise<void> {
    let first = true;
    let failuresInARow = 0;
    while (!this.run.stopping) {
      let ws: WebSocket;
      try {
        ws = await openSocket(this.run.wsUrl);
        failuresInARow = 0;
      } catch {
        this.run.stats.connectFailures++;
        // A tracker that keeps refusing (a connection limit it was not told to lift) ends the run.
        if (++failuresInARow >= MAX_CONNECT_FAILURES_IN_A_ROW) this.run.refused();
        await sleep(100);
        continue;
      }
      if (!first) this.run.stats.reconnects++;
      first = false;
      await new Session(ws, this, this.run).run();
    }
  }
}

/** One WebSocket of a worker: sends batches, matches every answer in order, ends at a close. */
class Session {
  private readonly queue: Expectation[] = [];
  private readonly state: ConnectionState = { joined: null, peerId: null };
  /** Bumped on every predicted state change (see Expectation.epoch). */
  private epoch = 0;
  private badAnswered = 0;
  /** Undecodable frames sent on this connection: the one reaching the limit is the last answered. */
  private badSent = 0;
  private frameIndex = 0;
  private closed = false;
  private closedByUs = false;
  private wake: (() => void) | null = null;
  private readonly closedPromise: Promise<void>;

  constructor(
    private readonly ws: WebSocket,
    private readonly worker: Worker,
    private readonly context: RunContext,
  ) {
    ws.on('message', (data, isBinary) => {
      this.onMessage(data, isBinary);
    });
    ws.on('error', () => {
      // A reset while the tracker closes is normal here; the close event that follows says what happened.
    });
    this.closedPromise = new Promise((done) => {
      ws.once('close', (code) => {
        this.onClose(code);
        done();
      });
    });
  }

  async run(): Promise<void> {
    const { options, stats } = this.context;
    let first = true;
    while (!this.closed && !this.context.stopping) {
      const room = Math.min(options.batchFrames, options.frames - stats.framesSent);
      if (room <= 0) {
        this.context.stopping = true;
        break;
      }
      const planned = this.plan(room, first);
      first = false;
      for (const p of planned) {
        const sent: SentFrame = {
          cls: p.cls,
          payload: p.payload,
          connection: this.worker.index,
          index: this.frameIndex++,
        };
        this.queue.push(p.expectation(sent));
        if (p.thenClose !== undefined) this.queue.push({ kind: 'close', code: p.thenClose, sent });
        this.ws.send(p.payload, { binary: p.binary });
        stats.framesSent++;
        bump(stats.framesByClass, p.cls);
      }
      this.context.onBatchSent();
      if (this.worker.random.nextFloat() < CLIENT_ABORT_PROBABILITY) {
        // Gone mid-batch, as a crashed browser tab would be: the tracker may still be handling frames.
        stats.clientAborts++;
        this.closedByUs = true;
        this.ws.terminate();
        break;
      }
      const outcome = await this.drained();
      if (outcome === 'timeout') {
        stats.batchTimeouts++;
        for (const e of this.queue.splice(0))
          if (e.kind !== 'reply' || !e.prediction.optional)
            this.mismatch(e.kind === 'close' ? 'noClose' : 'noAnswer', e.sent, describe(e), 'nothing');
        this.closedByUs = true;
        this.ws.terminate();
        break;
      }
    }
    if (!this.closed) {
      this.closedByUs = true;
      this.ws.close(1000, 'fuzz run over');
      const timer = setTimeout(() => {
        this.ws.terminate();
      }, 2_000);
      await this.closedPromise;
      clearTimeout(timer);
    } else await this.closedPromise;
    this.context.directory.setLive(this.worker.index, null);
  }

  /** The next batch: up to `room` frames, the last one always answered (a sentinel, or a barrier join). */
  private plan(room: number, first: boolean): Planned[] {
    const planned: Planned[] = [];
    const { stats } = this.context;
    const opening = first && room > 1 ? this.worker.generator.opening() : null;
    if (opening !== null) {
      const barrier = this.planDecodable(planned, opening, false, 'opening');
      if (barrier) return planned;
    }
    while (planned.length < room - 1) {
      const frame = this.worker.held ?? this.worker.generator.next(this.state);
      this.worker.held = null;
      const verdict = judgeFrame(frame);
      if (verdict.kind === 'close') {
        if (planned.length > 0) {
          this.worker.held = frame;
          break;
        }
        stats.closingFrames++;
        planned.push({
          payload: frame.payload,
          binary: frame.binary,
          cls: frame.cls,
          expectation: (sent) => ({ kind: 'close', code: verdict.code, sent }),
        });
        // Followed by a sentinel: if the tracker wrongly keeps the connection, its answer shows it at once.
        break;
      }
      if (verdict.kind === 'bad') {
        stats.badFrames++;
        this.badSent++;
        const last = this.badSent === this.context.options.maxBadFrames;
        planned.push({
          payload: frame.payload,
          binary: frame.binary,
          cls: frame.cls,
          expectation: (sent) => ({ kind: 'bad', code: verdict.code, sent }),
          ...(last ? { thenClose: CLOSE_TOO_MANY_BAD_FRAMES } : {}),
        });
        // Nothing after it would be answered: the batch ends with the tracker's 1008.
        if (last) return planned;
        continue;
      }
      stats.decodableFrames++;
      const barrier = this.predict(planned, frame.payload, frame.binary, frame.cls, verdict.message);
      if (barrier) return planned;
    }
    this.planDecodable(planned, this.worker.generator.sentinel(), false, 'sentinel');
    return planned;
  }

  /** Plans a frame known to decode; returns whether it is a barrier. */
  private planDecodable(planned: Planned[], text: string, binary: boolean, cls: string): boolean {
    const decoded = decodeClientMessage(text);
    if (!decoded.ok)
      throw new Error(`fuzzer bug: its ${cls} frame does not decode: ${decoded.error.message}`);
    this.context.stats.decodableFrames++;
    return this.predict(planned, text, binary, cls, decoded.message);
  }

  private predict(
    planned: Planned[],
    payload: string | Buffer,
    binary: boolean,
    cls: string,
    message: ClientMessage,
  ): boolean {
    const before = this.state.joined;
    const ticket = this.worker.resume;
    const resumeOf =
      message.type === 'join' &&
      before === null &&
      ticket !== null &&
      message.resume === ticket.ticket &&
      message.role === 'viewer' &&
      ticket.role === 'viewer' &&
      message.stream === ticket.stream
        ? ticket.peerId
        : null;
    const prediction = predictReply(message, this.state, this.context.prediction);
    if (this.state.joined !== before) this.epoch++;
    if (this.state.peerId === null) this.context.directory.setLive(this.worker.index, null);
    const epoch = this.epoch;
    planned.push({
      payload,
      binary,
      cls,
      expectation: (sent) => ({
        kind: 'reply',
        prediction,
        epoch,
        resumeOf,
        signalTo: message.type === 'signal' ? message.to : null,
        sent,
      }),
    });
    return prediction.barrier;
  }

  /** Resolves when every frame sent is accounted for, the socket closed, or the batch timed out. */
  private drained(): Promise<'drained' | 'closed' | 'timeout'> {
    if (this.closed) return Promise.resolve('closed');
    if (this.queue.length === 0) return Promise.resolve('drained');
    return new Promise((done) => {
      const timer = setTimeout(() => {
        this.wake = null;
        done('timeout');
      }, this.context.options.batchTimeoutMs);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = null;
        done(this.closed ? 'closed' : 'drained');
      };
    });
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    const { stats } = this.context;
    const text = rawText(data);
    if (isBinary) {
      this.violation('binary frame', text);
      return;
    }
    // Every tracker frame must pass the peers' own decoder (the SDK drops what it refuses).
    const decoded = decodeServerMessage(text);
    // Kinds without their numbers, so one cause counts as one kind.
    if (!decoded.ok)
      this.violation(`${decoded.error.code}: ${decoded.error.message.replace(/\d+/g, 'N')}`, text);
    // Matched on the raw JSON even if the peer-side decoder refused it: the code is what is checked.
    let message: ReplyFields;
    try {
      message = JSON.parse(text) as typeof message;
    } catch {
      return;
    }
    switch (message.type) {
      case 'signal':
        stats.signalsReceived++;
        return;
      case 'announce':
        stats.announcesReceived++;
        return;
      case 'welcome':
        this.match('welcome', message);
        return;
      case 'peers':
        if (Array.isArray(message.peers))
          for (const id of message.peers) if (typeof id === 'number') this.context.directory.noteSeen(id);
        this.match('peers', message);
        return;
      case 'error':
        bump(stats.errorsByCode, String(message.code));
        this.match(`error:${String(message.code)}` as ReplyKind, message);
        return;
      default:
      // The decoder refused it already (unknownType).
    }
  }

  /** Attributes one reply to the oldest frames still waiting, in order. */
  private match(kind: ReplyKind, message: ReplyFields): void {
    const { stats } = this.context;
    const peer = namedPeer(kind, message);
    for (;;) {
      const head = this.queue.shift();
      if (head === undefined) {
        this.mismatch('unexpectedReply', null, 'nothing', kind);
        break;
      }
      if (accepts(head, kind, peer)) {
        if (head.kind === 'bad') {
          this.badAnswered++;
          stats.badFramesAnswered++;
        } else if (kind === 'welcome' && head.kind === 'reply') this.welcomed(head, message);
        break;
      }
      if (head.kind === 'reply' && head.prediction.optional) continue;
      // A wrong answer, or none: if a later frame may take this reply, this frame got none, and
      // matching goes on from there (so one missing answer does not shift all the others).
      if (head.kind === 'close' || this.queue.some((e) => accepts(e, kind, peer))) {
        this.mismatch(head.kind === 'close' ? 'noClose' : 'noAnswer', head.sent, describe(head), kind);
        continue;
      }
      this.mismatch(
        head.kind === 'bad' ? 'badFrameWrongAnswer' : 'validFrameWrongAnswer',
        head.sent,
        describe(head),
        kind,
      );
      break;
    }
    if (this.queue.length === 0) this.wake?.();
  }

  private welcomed(head: Extract<Expectation, { kind: 'reply' }>, message: ReplyFields): void {
    const { stats, directory } = this.context;
    stats.welcomes++;
    if (typeof message.sourceId === 'number') directory.noteSeen(message.sourceId);
    if (head.resumeOf !== null) {
      if (message.resumed === true && message.peerId === head.resumeOf) stats.resumesHonoured++;
      else
        this.mismatch(
          'resumeNotHonoured',
          head.sent,
          `welcome resumed:true peerId:${head.resumeOf}`,
          `welcome resumed:${String(message.resumed)} peerId:${String(message.peerId)}`,
        );
    }
    // A later frame of the same batch (a leave) already changed the state: this welcome is history.
    if (head.epoch !== this.epoch || typeof message.peerId !== 'number') return;
    const prediction = head.prediction;
    if (prediction.joins !== null && this.state.joined === null) {
      this.state.joined = prediction.joins;
      this.epoch++;
    }
    this.state.peerId = message.peerId;
    directory.setLive(this.worker.index, message.peerId);
    if (typeof message.resume === 'string' && this.state.joined !== null)
      this.worker.resume = {
        ticket: message.resume,
        peerId: message.peerId,
        stream: this.state.joined.stream,
        role: this.state.joined.role,
      };
  }

  private onClose(code: number): void {
    const { stats, options } = this.context;
    this.closed = true;
    this.context.directory.setLive(this.worker.index, null);
    if (this.closedByUs) {
      for (const e of this.queue.splice(0)) if (e.kind === 'bad') stats.badFramesCutByUs++;
      this.wake?.();
      return;
    }
    bump(stats.disconnectsByCode, code);
    const head = this.queue[0];
    if (code === CLOSE_REPLACED) {
      // Replaced by a join that presented this connection's resume ticket: a legitimate end, not
      // an answer to a frame (the fuzzer's workers keep and re-send real tickets, sometimes while
      // their previous socket is still registered at the tracker).
      stats.replacedByResume++;
    } else if (head?.kind === 'close') {
      this.queue.shift();
      if (head.code !== code)
        this.mismatch('wrongCloseCode', head.sent, `close ${head.code}`, `close ${code}`);
    } else if (code === CLOSE_TOO_MANY_BAD_FRAMES) {
      if (this.badAnswered !== options.maxBadFrames)
        this.mismatch(
          'badFrameLimit',
          null,
          `close 1008 after ${options.maxBadFrames} bad frames`,
          `close 1008 after ${this.badAnswered}`,
        );
    } else if (!this.context.stopping) bump(stats.unexpectedDisconnectsByCode, code);
    for (const e of this.queue.splice(0)) if (e.kind === 'bad') stats.badFramesAnsweredByDisconnect++;
    this.wake?.();
  }

  private mismatch(kind: string, sent: SentFrame | null, expected: string, got: string): void {
    const { stats } = this.context;
    stats.mismatches++;
    bump(stats.mismatchesByKind, kind);
    bump(stats.mismatchesByExpected, `${sent?.cls ?? '-'} frame, expected ${expected}`);
    if (stats.mismatchSamples.length >= MAX_SAMPLES) return;
    const sample: MismatchSample = {
      kind,
      connection: this.worker.index,
      frameIndex: sent?.index ?? null,
      cls: sent?.cls ?? null,
      expected,
      got,
      frameBytes:
        sent === null
          ? null
          : typeof sent.payload === 'string'
            ? Buffer.byteLength(sent.payload)
            : sent.payload.length,
      framePreview: sent === null ? null : preview(sent.payload),
    };
    stats.mismatchSamples.push(sample);
    if (sent !== null)
      stats.mismatchFrames.push({
        sample,
        payload:
          typeof sent.payload === 'string' ? sent.payload : `base64:${sent.payload.toString('base64')}`,
      });
  }

  private violation(kind: string, frame: string): void {
    const { stats } = this.context;
    stats.serverFrameViolations++;
    bump(stats.serverFrameViolationsByKind, kind);
    if (stats.serverFrameViolationSamples.length < 10)
      stats.serverFrameViolationSamples.push(`${kind}: ${frame.slice(0, 300)}`);
  }
}

/**
 * Whether `reply` may be the answer to `e`. `peer` is the id an unknownPeer error names (null if it
 * names none): with several signals waiting, some of them relayed, it tells whose refusal it is.
 */
function accepts(e: Expectation, reply: ReplyKind, peer: number | null): boolean {
  if (e.kind === 'close') return false;
  if (e.kind === 'bad') return reply === `error:${e.code}`;
  if (peer !== null && e.signalTo !== null && e.signalTo !== peer) return false;
  return e.prediction.replies.includes(reply);
}

/** The peer id an unknownPeer error names ("peer 123 is not in stream …"), if any. */
function namedPeer(kind: ReplyKind, message: ReplyFields): number | null {
  if (kind !== 'error:unknownPeer' || typeof message.message !== 'string') return null;
  const id = /\bpeer (\d+)\b/.exec(message.message)?.[1];
  return id === undefined ? null : Number(id);
}

function describe(e: Expectation): string {
  if (e.kind === 'close') return `close ${e.code}`;
  if (e.kind === 'bad') return `error:${e.code}`;
  const p = e.prediction;
  return [...p.replies, ...(p.optional ? ['nothing'] : [])].join('|') || 'nothing';
}

/** The roles of the connections: one source, viewers of two streams, and one loner. */
function roleOf(index: number, connections: number): { role: ConnectionRole; homeStream: string } {
  if (index === 0) return { role: 'source', homeStream: 'fuzz' };
  if (index === connections - 1 && connections > 2) return { role: 'loner', homeStream: 'fuzz-c' };
  return { role: 'viewer', homeStream: index % 4 === 3 ? 'fuzz-b' : 'fuzz' };
}

/** Runs one bounded fuzz campaign against a fresh tracker process and returns what it saw. */
export async function runTrackerFuzz(
  overrides: Partial<TrackerFuzzOptions> = {},
): Promise<TrackerFuzzResult> {
  const options: TrackerFuzzOptions = { ...DEFAULT_FUZZ_OPTIONS, ...overrides };
  if (!Number.isInteger(options.frames) || options.frames < 1)
    throw new RangeError('frames must be a positive integer');
  if (!Number.isInteger(options.connections) || options.connections < 1 || options.connections > 64)
    throw new RangeError('connections must be an integer in 1‥64');
  if (!Number.isInteger(options.batchFrames) || options.batchFrames < 2)
    throw new RangeError('batchFrames must be ≥ 2');

  const broadcasterKey = `fuzz-broadcaster-key-${options.seed}`;
  const keys = generateKeyPairSync('ed25519');
  const dir = await mkdtemp(join(tmpdir(), 'chunkycast-fuzz-'));
  const keyFile = join(dir, 'signing-key.pem');
  await writeFile(keyFile, keys.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });

  const stats = new Stats();
  const rssSamples: [number, number][] = [];
  let tracker: TrackerProcess | null = null;
  try {
    tracker = await startTracker(
      options.trackerCli,
      [
        '--host',
        '127.0.0.1',
        '--port',
        '0',
        '--broadcaster-key',
        broadcasterKey,
        '--signing-key',
        keyFile,
        '--log-level',
        'info',
      ],
      options.maxBadFrames,
      options.trackerEnv,
    );
    const proc = tracker;
    const t0 = Date.now();
    const seconds = (): number => (Date.now() - t0) / 1000;
    const rssMBBeforeRun = readRssMB(proc.pid);
    // Written from timers and callbacks, hence an object rather than narrowed locals.
    const rss: { start: number | null; max: number | null } = { start: null, max: rssMBBeforeRun };
    const outcome: { stoppedBy: TrackerFuzzResult['stoppedBy'] } = { stoppedBy: 'frames' };
    const warmupFrames = Math.min(
      options.frames,
      Math.max(
        options.batchFrames * options.connections,
        Math.floor(options.frames * options.warmupFraction),
      ),
    );

    const run: RunContext = {
      options,
      stats,
      directory: new PeerDirectory(),
      prediction: {
        broadcasterKey,
        verifyAnnouncement: (a) => {
          const signature = Buffer.from(a.signature, 'base64');
          return (
            signature.length === 64 &&
            verifyBytes(null, announcementSigningBytes(a), keys.publicKey, signature)
          );
        },
      },
      wsUrl: proc.wsUrl,
      stopping: false,
      refused: () => {
        if (!run.stopping) outcome.stoppedBy = 'refused';
        run.stopping = true;
      },
      onBatchSent: () => {
        if (rss.start === null && stats.framesSent >= warmupFrames) rss.start = readRssMB(proc.pid);
        if (seconds() >= options.maxSeconds && !run.stopping) {
          outcome.stoppedBy = 'time';
          run.stopping = true;
        }
      },
    };
    void proc.exit.then(() => {
      if (!run.stopping) outcome.stoppedBy = 'crash';
      run.stopping = true;
    });

    const sampler = setInterval(() => {
      const now = readRssMB(proc.pid);
      if (now !== null) {
        rssSamples.push([Math.round(seconds()), now]);
        rss.max = Math.max(rss.max ?? 0, now);
      }
      if (seconds() >= options.maxSeconds && !run.stopping) {
        outcome.stoppedBy = 'time';
        run.stopping = true;
      }
    }, 1_000);
    const progress =
      options.progressMs > 0
        ? setInterval(() => {
            const s = seconds();
            const closes = Object.entries(stats.disconnectsByCode)
              .map(([code, n]) => `${code}:${n}`)
              .join(' ');
            options.progress(
              `fuzz: ${stats.framesSent}/${options.frames} frames (${((100 * stats.framesSent) / options.frames).toFixed(0)}%), ` +
                `${Math.round(stats.framesSent / Math.max(s, 0.001))} frames/s, mismatches ${stats.mismatches}, ` +
                `disconnects ${closes || 'none'}, reconnects ${stats.reconnects}, tracker RSS ${rssSamples[rssSamples.length - 1]?.[1] ?? '?'} MB`,
            );
          }, options.progressMs)
        : null;

    const sign = (a: SegmentAnnouncement): string =>
      signBytes(null, announcementSigningBytes(a), keys.privateKey).toString('base64');
    const master = createRandom(options.seed);
    const workers = Array.from({ length: options.connections }, (_, i) => {
      const { role, homeStream } = roleOf(i, options.connections);
      return new Worker(i, role, homeStream, master, run, sign);
    });
    await Promise.all(workers.map((w) => w.loop()));
    const runSeconds = seconds();
    if (progress !== null) clearInterval(progress);

    // Memory after the load is gone, once the tracker had a moment to collect.
    await sleep(options.idleMs);
    clearInterval(sampler);
    const rssMBEnd = proc.exited === null ? readRssMB(proc.pid) : null;
    if (rssMBEnd !== null) rss.max = Math.max(rss.max ?? 0, rssMBEnd);
    const trackerMetrics = proc.exited === null ? await fetchMetrics(proc.url, broadcasterKey) : null;
    const trackerCrashed = proc.exited !== null;
    const trackerExit = trackerCrashed ? proc.exited : null;
    if (trackerCrashed) outcome.stoppedBy = 'crash';
    const stopExit = await proc.stop();
    const warm = rss.start;
    const rssGrowthMB = warm !== null && rssMBEnd !== null ? Math.round((rssMBEnd - warm) * 10) / 10 : null;
    const memoryFlat = rssGrowthMB !== null && rssGrowthMB <= options.rssGrowthLimitMB;
    const handlerFaults = handlerFaultsOf(trackerMetrics);
    const result: TrackerFuzzResult = {
      seed: options.seed,
      connections: options.connections,
      framesRequested: options.frames,
      framesSent: stats.framesSent,
      seconds: Math.round(runSeconds * 10) / 10,
      framesPerSec: Math.round(stats.framesSent / Math.max(runSeconds, 0.001)),
      stoppedBy: outcome.stoppedBy,
      framesByClass: stats.framesByClass,
      badFrames: stats.badFrames,
      decodableFrames: stats.decodableFrames,
      closingFrames: stats.closingFrames,
      errorsByCode: stats.errorsByCode,
      badFramesAnswered: stats.badFramesAnswered,
      badFramesAnsweredByDisconnect: stats.badFramesAnsweredByDisconnect,
      badFramesCutByUs: stats.badFramesCutByUs,
      resumesHonoured: stats.resumesHonoured,
      replacedByResume: stats.replacedByResume,
      disconnectsByCode: stats.disconnectsByCode,
      unexpectedDisconnectsByCode: stats.unexpectedDisconnectsByCode,
      reconnects: stats.reconnects,
      clientAborts: stats.clientAborts,
      connectFailures: stats.connectFailures,
      batchTimeouts: stats.batchTimeouts,
      mismatches: stats.mismatches,
      mismatchesByKind: stats.mismatchesByKind,
      mismatchesByExpected: stats.mismatchesByExpected,
      mismatchSamples: stats.mismatchSamples,
      mismatchFrames: stats.mismatchFrames,
      serverFrameViolations: stats.serverFrameViolations,
      serverFrameViolationsByKind: stats.serverFrameViolationsByKind,
      serverFrameViolationSamples: stats.serverFrameViolationSamples,
      signalsReceived: stats.signalsReceived,
      announcesReceived: stats.announcesReceived,
      welcomes: stats.welcomes,
      trackerCrashed,
      trackerExit,
      trackerErrorLogs: proc.levels.error ?? 0,
      trackerErrorLines: proc.errorLines,
      trackerMetrics,
      rssMBBeforeRun,
      rssMBStart: warm,
      rssMBEnd,
      rssMBMax: rss.max,
      rssGrowthMB,
      rssGrowthLimitMB: options.rssGrowthLimitMB,
      memoryFlat,
      rssSamples,
      trackerHandlerFaults: handlerFaults,
      trackerStoppedCleanly: !trackerCrashed && stopExit.code === 0,
      passed:
        outcome.stoppedBy !== 'refused' &&
        stats.mismatches === 0 &&
        // A frame the tracker sent that the peers' own decoder refuses is a bug too.
        stats.serverFrameViolations === 0 &&
        !trackerCrashed &&
        handlerFaults === 0 &&
        (proc.levels.error ?? 0) === 0 &&
        memoryFlat,
    };
    return result;
  } finally {
    await tracker?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

async function fetchMetrics(url: string, broadcasterKey: string): Promise<unknown> {
  try {
    const response = await fetch(`${url}/debug/metrics`, {
      headers: { Authorization: `Bearer ${broadcasterKey}` },
      signal: AbortSignal.timeout(5_000),
    });
    return response.ok ? ((await response.json()) as unknown) : null;
  } catch {
    return null;
  }
}

function handlerFaultsOf(metrics: unknown): number {
  if (typeof metrics !== 'object' || metrics === null) return 0;
  const faults = (metrics as { handlerFaults?: unknown }).handlerFaults;
  return typeof faults === 'number' ? faults : 0;
}

// ─────────────────────────────── report ───────────────────────────────

function table(counts: Record<string, number>): string {
  const rows = Object.entries(counts).filter(([, n]) => n > 0);
  if (rows.length === 0) return 'none\n';
  return ['| | count |', '| --- | ---: |', ...rows.map(([k, n]) => `| ${k} | ${n} |`)].join('\n') + '\n';
}

export function fuzzReportMarkdown(result: TrackerFuzzResult, command: string): string {
  const mb = (v: number | null): string => (v === null ? 'n/a' : `${v} MB`);
  return [
    '# Tracker fuzz run',
    '',
    `\`${command}\``,
    '',
    `**${result.passed ? 'PASS' : 'FAIL'}** — ${result.framesSent} frames in ${result.seconds} s (${result.framesPerSec} frames/s) over ${result.connections} connections, seed ${result.seed}, stopped by ${result.stoppedBy}.`,
    '',
    '| | |',
    '| --- | ---: |',
    `| frames sent | ${result.framesSent} |`,
    `| bad frames (undecodable) / decodable / closing | ${result.badFrames} / ${result.decodableFrames} / ${result.closingFrames} |`,
    `| bad frames answered with the oracle's code | ${result.badFramesAnswered} |`,
    `| bad frames answered by an unasked-for disconnect | ${result.badFramesAnsweredByDisconnect} |`,
    `| bad frames not awaited (the fuzzer cut its own connection) | ${result.badFramesCutByUs} |`,
    `| rejoins with the connection's own resume ticket given their id back | ${result.resumesHonoured} |`,
    `| connections replaced (4000) by a join with their resume ticket | ${result.replacedByResume} |`,
    `| **mismatches** | **${result.mismatches}** |`,
    `| tracker crashed | ${result.trackerCrashed ? `yes (${JSON.stringify(result.trackerExit)})` : 'no'} |`,
    `| tracker shut down cleanly on SIGTERM afterwards | ${result.trackerStoppedCleanly ? 'yes' : 'no'} |`,
    `| tracker error log lines / handler faults | ${result.trackerErrorLogs} / ${result.trackerHandlerFaults} |`,
    `| reconnects / client aborts / batch timeouts | ${result.reconnects} / ${result.clientAborts} / ${result.batchTimeouts} |`,
    `| tracker frames its peer decoder refuses | ${result.serverFrameViolations} |`,
    `| signals relayed to us / announcements received | ${result.signalsReceived} / ${result.announcesReceived} |`,
    `| tracker RSS before / after warm-up / end (idle) / max | ${mb(result.rssMBBeforeRun)} / ${mb(result.rssMBStart)} / ${mb(result.rssMBEnd)} / ${mb(result.rssMBMax)} |`,
    `| RSS growth after warm-up (bound ${result.rssGrowthLimitMB} MB) | ${mb(result.rssGrowthMB)} — ${result.memoryFlat ? 'flat' : 'NOT flat'} |`,
    '',
    '## Error frames received, by code',
    '',
    table(result.errorsByCode),
    '## Disconnects by close code',
    '',
    table(result.disconnectsByCode),
    '## Frames sent, by class',
    '',
    table(result.framesByClass),
    ...(result.mismatches > 0
      ? [
          '## Mismatches',
          '',
          table(result.mismatchesByKind),
          table(result.mismatchesByExpected),
          'The first ones:',
          '',
          '```json',
          JSON.stringify(result.mismatchSamples, null, 2),
          '```',
          '',
        ]
      : []),
    ...(result.trackerErrorLines.length > 0
      ? [
          '## Tracker error log lines (first ones)',
          '',
          '```',
          ...result.trackerErrorLines.slice(0, 5),
          '```',
          '',
        ]
      : []),
    ...(result.serverFrameViolations > 0
      ? [
          '## Tracker frames its own peer-side decoder refuses',
          '',
          table(result.serverFrameViolationsByKind),
          ...result.serverFrameViolationSamples
            .slice(0, 3)
            .map((frame) => `- \`${frame.slice(0, 160).replace(/`/g, "'")}…\``),
          '',
        ]
      : []),
  ].join('\n');
}

export async function writeFuzzReport(
  result: TrackerFuzzResult,
  outDir: string,
  command: string,
): Promise<void> {
  await mkdir(outDir, { recursive: true });
  const { mismatchFrames, ...summary } = result;
  await writeFile(join(outDir, 'result.json'), JSON.stringify(summary, null, 2) + '\n');
  await writeFile(join(outDir, 'report.md'), fuzzReportMarkdown(result, command));
  // Whole frames (up to ~600 KB each) only when there is something to reproduce.
  if (mismatchFrames.length > 0)
    await writeFile(
      join(outDir, 'mismatch-frames.jsonl'),
      mismatchFrames.map((m) => JSON.stringify(m)).join('\n') + '\n',
    );
}
