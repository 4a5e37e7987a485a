#!/usr/bin/env node
/**
 * The load generator of `npm run bench:tracker` (started by cli.ts, one or more processes pinned to
 * their own core). It opens its share of the WebSocket sessions at its share of the join rate, joins
 * each to one of its swarms, asks for bootstrap peers after each welcome, and relays offer-sized
 * signals between random pairs of joined peers of the same swarm. Every swarm lives in one client
 * process, so the sender and the receiver of a signal share one clock: the id travels in the
 * signal's `link` field, the send time stays here, and the receiver measures latency.
 *
 * Talks to the orchestrator in JSON lines (protocol.ts): commands on stdin (`hold`: all sessions are
 * in, measure the steady phase; `stop`: stop sending, drain, report), reports on stdout (`tick` each
 * second, `joined` when its join phase is over, `result` at the end). Exits on its own when stdin
 * closes or its lifetime runs out, so an orchestrator that died cannot leave it running.
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { UsageError, numberOption, parseCommandLine, stringValue } from '../lib/args.js';
import { forEachLine } from '../lib/process.js';
import { round } from '../lib/stats.js';
import type { GeneratorPhase, GeneratorReport, GeneratorSummary, Tally } from './protocol.js';

const USAGE = `usage: node tools/dist/bench-tracker/client.js --url WS_URL --swarms LIST [options]

  --url URL               the tracker's WebSocket URL (ws://127.0.0.1:PORT/ws)
  --swarms LIST           comma-separated stream:peers pairs this process joins (e.g. bench-0:500,bench-2:500)
  --join-rate R           joins per second this process attempts (default 100)
  --relays-per-sec Q      signals per second this process relays (default 200)
  --bootstraps-per-sec B  bootstrap requests per second in the steady phase (default 10)
  --sdp-bytes N           SDP size of each relayed offer (default 1500)
  --join-timeout-ms MS    connect→welcome limit per session (default 10000)
  --relay-timeout-ms MS   a relay not delivered by then is lost (default 5000)
  --join-limit-s S        stop attempting joins after this long (default 120)
  --lifetime-s S          exit no matter what after this long (default 600)
  --address-base N        first source address is 127.0.0.N (default 2; spread over N..254)`;

/** The highest last octet of a loopback source address. */
const LAST_LOOPBACK_OCTET = 254;

interface SwarmShare {
  readonly stream: string;
  readonly peers: number;
}

function parseSwarms(text: string): SwarmShare[] {
  if (text === '') throw new UsageError('--swarms needs stream:peers pairs');
  return text.split(',').map((pair) => {
    const match = /^([A-Za-z0-9._-]{1,64}):(\d+)$/.exec(pair);
    if (match?.[1] === undefined || match[2] === undefined)
      throw new UsageError(`--swarms: "${pair}" is not stream:peers`);
    return { stream: match[1], peers: Number(match[2]) };
  });
}

const opts = parseCommandLine(
  'bench-tracker-client',
  USAGE,
  {
    url: { type: 'string' },
    swarms: { type: 'string' },
    'join-rate': { type: 'string' },
    'relays-per-sec': { type: 'string' },
    'bootstraps-per-sec': { type: 'string' },
    'sdp-bytes': { type: 'string' },
    'join-timeout-ms': { type: 'string' },
    'relay-timeout-ms': { type: 'string' },
    'join-limit-s': { type: 'string' },
    'lifetime-s': { type: 'string' },
    'address-base': { type: 'string' },
  },
  (parsed) => {
    const number = (flag: string, fallback: number, min: number): number =>
      numberOption(flag, stringValue(parsed, flag), fallback, { min });
    const url = stringValue(parsed, 'url');
    if (url === undefined || !/^ws:\/\/127\.0\.0\.1:\d+\//.test(url))
      throw new UsageError('--url must be a loopback ws://127.0.0.1:PORT/… URL');
    const swarms = stringValue(parsed, 'swarms');
    if (swarms === undefined) throw new UsageError('--swarms is required');
    const addressBase = Math.floor(number('address-base', 2, 1));
    if (addressBase > LAST_LOOPBACK_OCTET)
      throw new UsageError(`--address-base must be at most ${LAST_LOOPBACK_OCTET}`);
    return {
      url,
      swarms: parseSwarms(swarms),
      joinRate: number('join-rate', 100, 0.001),
      relaysPerSec: number('relays-per-sec', 200, 0),
      bootstrapsPerSec: number('bootstraps-per-sec', 10, 0),
      sdpBytes: Math.floor(number('sdp-bytes', 1500, 16)),
      joinTimeoutMs: number('join-timeout-ms', 10_000, 100),
      relayTimeoutMs: number('relay-timeout-ms', 5_000, 100),
      joinLimitS: number('join-limit-s', 120, 1),
      lifetimeS: number('lifetime-s', 600, 1),
      addressBase,
    };
  },
);

const emit = (record: GeneratorReport): void => {
  process.stdout.write(`${JSON.stringify(record)}\n`);
};
const now = (): number => performance.now();

/** Peers each bootstrap asks for (a viewer's first request; within the protocol's 64). */
const BOOTSTRAP_COUNT = 8;
/** Handshakes in flight at most: five seconds' worth, so a stalled tracker cannot make this unbounded. */
const maxPendingJoins = Math.max(100, Math.ceil(opts.joinRate * 5));
/** The pacing loop's period: short, so sends are spread rather than bunched. */
const PACE_MS = 2;
/** A stalled loop does not catch up with more than this much of a rate's backlog at once. */
const MAX_BACKLOG_S = 1;
/** Report period, and how often joins and relays past their time limit are failed. */
const TICK_MS = 1000;
const EXPIRE_MS = 250;
/** How often the drain after `stop` checks for relays still in flight. */
const DRAIN_POLL_MS = 20;
/** Relay ids wrap before this (they travel as JSON numbers in `link`). */
const MAX_RELAY_ID = 0xffff_fff0;

// ─── sessions and swarms ────────────────────────────────────────────────────────────────────────

interface Swarm {
  readonly stream: string;
  readonly peers: number;
  readonly joined: Session[];
}

interface Session {
  readonly index: number;
  readonly swarm: Swarm;
  ws: WebSocket | null;
  state: 'new' | 'connecting' | 'joining' | 'joined' | 'gone';
  startedAt: number;
  peerId: number;
  /** Position in its swarm's `joined` list, -1 when not joined. */
  slot: number;
  /** Send times of its bootstrap requests still unanswered, oldest first. */
  readonly bootstrapsSentAt: number[];
}

const swarms: Swarm[] = opts.swarms.map((s) => ({ stream: s.stream, peers: s.peers, joined: [] }));
/** Join order interleaves the swarms so they all grow together, like concurrent streams. */
const sessions: Session[] = [];
{
  const remaining = swarms.map((s) => s.peers);
  for (let added = true; added;) {
    added = false;
    swarms.forEach((swarm, k) => {
      const left = remaining[k] ?? 0;
      if (left > 0) {
        remaining[k] = left - 1;
        added = true;
        sessions.push({
          index: sessions.length,
          swarm,
          ws: null,
          state: 'new',
          startedAt: 0,
          peerId: 0,
          slot: -1,
          bootstrapsSentAt: [],
        });
      }
    });
  }
}
/** Every joined session of this process, for picking a random sender in O(1). */
const joinedAll: Session[] = [];
/** Each joined session's position in joinedAll (its `slot` is its position in its swarm's list). */
const allSlot = new Map<Session, number>();
/** The swarm of every peer id this process has been welcomed as (ids stay unique per tracker). */
const swarmOf = new Map<number, Swarm>();

function addJoined(session: Session): void {
  session.slot = session.swarm.joined.length;
  session.swarm.joined.push(session);
  swarmOf.set(session.peerId, session.swarm);
  allSlot.set(session, joinedAll.length);
  joinedAll.push(session);
}

function removeJoined(session: Session): void {
  const list = session.swarm.joined;
  const last = list.pop();
  if (last !== session && last !== undefined) {
    list[session.slot] = last;
    last.slot = session.slot;
  }
  session.slot = -1;
  const at = allSlot.get(session);
  allSlot.delete(session);
  const lastAll = joinedAll.pop();
  if (lastAll !== session && lastAll !== undefined && at !== undefined) {
    joinedAll[at] = lastAll;
    allSlot.set(lastAll, at);
  }
}

/** A uniformly random element of a non-empty list. */
function pickFrom<T>(list: readonly T[]): T | undefined {
  return list[Math.floor(Math.random() * list.length)];
}

// ─── counters ───────────────────────────────────────────────────────────────────────────────────

let phase: GeneratorPhase = 'join';
const counters = {
  attempted: 0,
  welcomed: 0,
  joinTimeouts: 0,
  connectFailures: 0,
  closedBeforeWelcome: 0,
  closedAfterWelcome: 0,
  relaysSent: 0,
  relaysReceived: 0,
  relaysLost: 0,
  relayMismatches: 0,
  relaysSkipped: 0,
  bootstrapsSent: 0,
  bootstrapsAnswered: 0,
  bootstrapPeersReturned: 0,
  bootstrapForeignPeers: 0,
  bootstrapUnknownPeers: 0,
  unexpectedMessages: 0,
};
/** Tracker `error` replies by code. */
const trackerErrors: Tally = {};
/** Socket-level errors (ECONNRESET, EMFILE, …) by code or message. */
const socketErrors: Tally = {};
let firstAttemptAt: number | null = null;
let lastWelcomeAt: number | null = null;
let joinPhaseEndedAt: number | null = null;

/** Samples since the last tick (sent to the orchestrator, which keeps them). */
let tickRelayMs: [number, 0 | 1][] = [];
let tickJoinMs: number[] = [];
let tickBootstrapMs: number[] = [];

const tally = (table: Tally, key: string): void => {
  table[key] = (table[key] ?? 0) + 1;
};

const round3 = (x: number): number => round(x, 3) ?? x;

// ─── joining ────────────────────────────────────────────────────────────────────────────────────

let nextToOpen = 0;
let pendingJoins = 0;

/** The fields of a tracker message this generator reads. */
interface TrackerMessage {
  readonly type?: unknown;
  readonly peerId?: unknown;
  readonly peers?: unknown;
  readonly code?: unknown;
  readonly from?: unknown;
  readonly data?: { readonly link?: unknown; readonly sdp?: unknown } | null;
}

function open(session: Session): void {
  counters.attempted++;
  pendingJoins++;
  session.state = 'connecting';
  session.startedAt = now();
  firstAttemptAt ??= session.startedAt;
  // Spread over 127.0.0.N..254 so no single source address runs out of ephemeral ports.
  const host = opts.addressBase + (session.index % (LAST_LOOPBACK_OCTET + 1 - opts.addressBase));
  const ws = new WebSocket(opts.url, {
    localAddress: `127.0.0.${host}`,
    perMessageDeflate: false,
    handshakeTimeout: opts.joinTimeoutMs,
  });
  session.ws = ws;
  ws.on('open', () => {
    if (session.state !== 'connecting') return;
    session.state = 'joining';
    ws.send(JSON.stringify({ type: 'join', stream: session.swarm.stream, role: 'viewer' }));
  });
  ws.on('message', (data, isBinary) => {
    if (isBinary) {
      counters.unexpectedMessages++;
      return;
    }
    let message: TrackerMessage;
    try {
      // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a text frame: a Buffer of UTF-8
      message = JSON.parse(data.toString()) as TrackerMessage;
    } catch {
      counters.unexpectedMessages++;
      return;
    }
    onMessage(session, message);
  });
  ws.on('error', (e: Error & { code?: string }) => {
    tally(socketErrors, e.code ?? e.message.slice(0, 60));
  });
  ws.on('close', () => {
    const was = session.state;
    session.state = 'gone';
    if (was === 'joined') {
      counters.closedAfterWelcome++;
      removeJoined(session);
    } else if (was === 'connecting') {
      pendingJoins--;
      counters.connectFailures++;
    } else if (was === 'joining') {
      pendingJoins--;
      counters.closedBeforeWelcome++;
    }
  });
}

function onMessage(session: Session, message: TrackerMessage): void {
  switch (message.type) {
    case 'welcome': {
      if (session.state !== 'joining') {
        counters.unexpectedMessages++;
        return;
      }
      const at = now();
      session.state = 'joined';
      session.peerId = Number(message.peerId);
      pendingJoins--;
      counters.welcomed++;
      lastWelcomeAt = at;
      tickJoinMs.push(round3(at - session.startedAt));
      addJoined(session);
      sendBootstrap(session);
      return;
    }
    case 'signal':
      onSignal(session, message);
      return;
    case 'peers': {
      const sentAt = session.bootstrapsSentAt.shift();
      if (sentAt === undefined) {
        counters.unexpectedMessages++;
        return;
      }
      counters.bootstrapsAnswered++;
      tickBootstrapMs.push(round3(now() - sentAt));
      for (const id of Array.isArray(message.peers) ? (message.peers as unknown[]) : []) {
        counters.bootstrapPeersReturned++;
        const swarm = typeof id === 'number' ? swarmOf.get(id) : undefined;
        // A member of another of our swarms (or the asker itself) is a leak; an id we have not
        // been welcomed as yet is most likely a join whose welcome is still on its way to us.
        if (id === session.peerId || (swarm !== undefined && swarm !== session.swarm))
          counters.bootstrapForeignPeers++;
        else if (swarm === undefined) counters.bootstrapUnknownPeers++;
      }
      return;
    }
    case 'error':
      tally(trackerErrors, String(message.code));
      return;
    case 'announce':
      return;
    default:
      counters.unexpectedMessages++;
  }
}

/** Fails handshakes and joins that have taken longer than the join timeout. */
function expireJoins(): void {
  const limit = now() - opts.joinTimeoutMs;
  for (const s of sessions.slice(0, nextToOpen)) {
    if ((s.state === 'connecting' || s.state === 'joining') && s.startedAt < limit) {
      s.state = 'gone';
      pendingJoins--;
      counters.joinTimeouts++;
      s.ws?.terminate();
    }
  }
}

// ─── relaying and bootstrap ─────────────────────────────────────────────────────────────────────

/** An offer-sized SDP body (only its size matters to the tracker, which relays it verbatim). */
const sdp = ((): string => {
  const head =
    'v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\n' +
    'a=extmap-allow-mixed\r\na=msid-semantic: WMS\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n' +
    'c=IN IP4 0.0.0.0\r\na=ice-ufrag:bench\r\na=ice-pwd:benchbenchbenchbenchbench\r\na=ice-options:trickle\r\n';
  let body = head;
  for (let i = 0; body.length < opts.sdpBytes; i++)
    body += `a=candidate:${i} 1 udp 2122260223 127.0.0.1 ${50000 + i} typ host generation 0\r\n`;
  return body.slice(0, opts.sdpBytes);
})();
const sdpJson = JSON.stringify(sdp);

interface InFlightRelay {
  readonly sentAt: number;
  readonly from: number;
  readonly to: Session;
  readonly phase: GeneratorPhase;
}

/** In-flight relays by id (the signal's `link`): when sent, by whom, to whom, in which phase. */
const inFlight = new Map<number, InFlightRelay>();
let nextRelayId = 1;

function sendRelay(): boolean {
  if (joinedAll.length < 2) return false;
  const from = pickFrom(joinedAll);
  if (from === undefined || from.ws === null) return false;
  const peers = from.swarm.joined;
  if (peers.length < 2) return false;
  // A random other member: draw from the list without `from`'s own slot.
  let k = Math.floor(Math.random() * (peers.length - 1));
  if (k >= from.slot) k++;
  const to = peers[k];
  if (to === undefined) return false;
  const id = nextRelayId;
  nextRelayId = nextRelayId >= MAX_RELAY_ID ? 1 : nextRelayId + 1;
  inFlight.set(id, { sentAt: now(), from: from.peerId, to, phase });
  // Built by concatenation: the generator's own cost per relay is what limits the rates it can offer.
  from.ws.send(`{"type":"signal","to":${to.peerId},"data":{"type":"offer","sdp":${sdpJson},"link":${id}}}`);
  counters.relaysSent++;
  return true;
}

function onSignal(session: Session, message: TrackerMessage): void {
  const id = message.data?.link;
  const sent = typeof id === 'number' ? inFlight.get(id) : undefined;
  if (sent === undefined || typeof id !== 'number') {
    counters.unexpectedMessages++;
    return;
  }
  inFlight.delete(id);
  if (sent.to !== session || sent.from !== message.from || message.data?.sdp !== sdp) {
    counters.relayMismatches++;
    return;
  }
  counters.relaysReceived++;
  tickRelayMs.push([round3(now() - sent.sentAt), sent.phase === 'hold' ? 1 : 0]);
}

function expireRelays(all = false): void {
  const limit = now() - opts.relayTimeoutMs;
  for (const [id, sent] of inFlight) {
    // Insertion order is send order, so the first young entry ends the scan.
    if (!all && sent.sentAt >= limit) break;
    inFlight.delete(id);
    counters.relaysLost++;
  }
}

function sendBootstrap(session: Session): boolean {
  if (session.state !== 'joined' || session.ws === null) return false;
  session.bootstrapsSentAt.push(now());
  session.ws.send(JSON.stringify({ type: 'bootstrap', count: BOOTSTRAP_COUNT }));
  counters.bootstrapsSent++;
  return true;
}

// ─── pacing ─────────────────────────────────────────────────────────────────────────────────────

const startedAt = now();
let relayClockStart: number | null = null;
let relaysDue = 0;
let bootstrapsDue = 0;
let bootstrapClockStart: number | null = null;
let sending = true;

/** How many events a rate owes since `since`, at most MAX_BACKLOG_S of it beyond `done`. */
function owed(rate: number, since: number, done: number): { send: number; skipped: number } {
  const due = Math.floor(((now() - since) / 1000) * rate);
  const backlog = due - done;
  const cap = Math.max(1, Math.ceil(rate * MAX_BACKLOG_S));
  return { send: Math.min(backlog, cap), skipped: Math.max(0, backlog - cap) };
}

function pace(): void {
  const t = now();
  // Joins: open-loop at the join rate, bounded by the in-flight cap and the join time limit.
  if (phase === 'join' && nextToOpen < sessions.length && t - startedAt < opts.joinLimitS * 1000) {
    const due = Math.min(sessions.length, Math.floor(((t - startedAt) / 1000) * opts.joinRate) + 1);
    while (nextToOpen < due && pendingJoins < maxPendingJoins) {
      const session = sessions[nextToOpen++];
      if (session !== undefined) open(session);
    }
  }
  if (phase === 'join' && joinPhaseEndedAt === null) {
    const allTried = nextToOpen >= sessions.length || t - startedAt >= opts.joinLimitS * 1000;
    if (allTried && pendingJoins === 0) {
      joinPhaseEndedAt = t;
      // A fresh tick first, so the orchestrator's picture is current when the phase changes.
      tick();
      emit({ type: 'joined', atMs: Date.now(), ...summary() });
    }
  }
  if (!sending) return;
  // Relays start as soon as some swarm has two members; the rate is kept from then on.
  if (opts.relaysPerSec > 0 && joinedAll.length >= 2) {
    relayClockStart ??= t;
    const o = owed(opts.relaysPerSec, relayClockStart, relaysDue);
    counters.relaysSkipped += o.skipped;
    relaysDue += o.skipped;
    for (let i = 0; i < o.send; i++) {
      relaysDue++;
      if (!sendRelay()) counters.relaysSkipped++;
    }
  }
  if (phase === 'hold' && opts.bootstrapsPerSec > 0 && joinedAll.length > 0) {
    bootstrapClockStart ??= t;
    const o = owed(opts.bootstrapsPerSec, bootstrapClockStart, bootstrapsDue);
    bootstrapsDue += o.skipped + o.send;
    for (let i = 0; i < o.send; i++) {
      const session = pickFrom(joinedAll);
      if (session !== undefined) sendBootstrap(session);
    }
  }
}

function summary(): GeneratorSummary {
  const joinSpanMs =
    firstAttemptAt === null || lastWelcomeAt === null ? null : lastWelcomeAt - firstAttemptAt;
  return {
    peers: sessions.length,
    held: joinedAll.length,
    pendingJoins,
    notAttempted: sessions.length - nextToOpen,
    joinSpanMs: joinSpanMs === null ? null : round3(joinSpanMs),
    inFlightRelays: inFlight.size,
    ...counters,
    trackerErrors,
    socketErrors,
  };
}

// 1 ms resolution: the histogram's values include its own sampling period.
const loopDelay = monitorEventLoopDelay({ resolution: 1 });
loopDelay.enable();

function tick(): void {
  emit({
    type: 'tick',
    atMs: Date.now(),
    phase,
    ...summary(),
    loopDelayP99Ms: round3(loopDelay.percentile(99) / 1e6),
    loopDelayMaxMs: round3(loopDelay.max / 1e6),
    relayMs: tickRelayMs,
    joinMs: tickJoinMs,
    bootstrapMs: tickBootstrapMs,
  });
  loopDelay.reset();
  tickRelayMs = [];
  tickJoinMs = [];
  tickBootstrapMs = [];
}

const paceTimer = setInterval(pace, PACE_MS);
const tickTimer = setInterval(tick, TICK_MS);
const expireTimer = setInterval(() => {
  expireJoins();
  expireRelays();
}, EXPIRE_MS);

// ─── commands and shutdown ──────────────────────────────────────────────────────────────────────

let stopping = false;

function finish(reason: string): void {
  if (stopping) return;
  stopping = true;
  sending = false;
  const heldAtStop = joinedAll.length;
  const drainUntil = now() + opts.relayTimeoutMs;
  const drain = setInterval(() => {
    if (inFlight.size > 0 && now() < drainUntil) return;
    clearInterval(drain);
    clearInterval(paceTimer);
    clearInterval(expireTimer);
    clearInterval(tickTimer);
    expireRelays(true);
    tick();
    emit({ type: 'result', atMs: Date.now(), reason, heldAtStop, ...summary() });
    // The kernel closes the sockets; a graceful close of thousands would only add noise.
    process.exit(0);
  }, DRAIN_POLL_MS);
}

forEachLine(process.stdin, (line) => {
  const command = line.trim();
  if (command === 'hold') phase = 'hold';
  else if (command === 'stop') finish('stopped');
  else process.stderr.write(`bench-tracker-client: unknown command ${JSON.stringify(command)}\n`);
});
process.stdin.on('end', () => {
  finish('stdin closed');
});
setTimeout(() => {
  finish('lifetime over');
}, opts.lifetimeS * 1000).unref();
