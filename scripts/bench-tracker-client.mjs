#!/usr/bin/env node
// The load generator of `npm run bench:tracker` (started by scripts/bench-tracker.mjs, one or more
// processes pinned to their own core). It opens its share of the WebSocket sessions at its share of
// the join rate, joins each to one of its swarms, asks for bootstrap peers after each welcome, and
// relays offer-sized signals between random pairs of joined peers of the same swarm. Every swarm
// lives in one client process, so the sender and the receiver of a signal share one clock: the id
// travels in the signal's `link` field, the send time stays here, and the receiver measures latency.
//
// Talks to the orchestrator in JSON lines: commands on stdin (`hold`: all sessions are in, measure
// the steady phase; `stop`: stop sending, drain, report), reports on stdout (`tick` each second,
// `joined` when its join phase is over, `result` at the end). Exits on its own when stdin closes or
// its lifetime runs out, so an orchestrator that died cannot leave it running.
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import WebSocket from 'ws';

const USAGE = `usage: node scripts/bench-tracker-client.mjs --url WS_URL --swarms LIST [options]

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

function parseArgs(argv) {
  const o = {
    url: null,
    swarms: null,
    joinRate: 100,
    relaysPerSec: 200,
    bootstrapsPerSec: 10,
    sdpBytes: 1500,
    joinTimeoutMs: 10_000,
    relayTimeoutMs: 5_000,
    joinLimitS: 120,
    lifetimeS: 600,
    addressBase: 2,
  };
  const num = (flag, value, min) => {
    const n = Number(value);
    if (value === undefined || !Number.isFinite(n) || n < min)
      throw new Error(`${flag} needs a number ≥ ${min}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') o.help = true;
    else if (a === '--url') o.url = argv[++i] ?? null;
    else if (a === '--swarms') o.swarms = parseSwarms(argv[++i]);
    else if (a === '--join-rate') o.joinRate = num(a, argv[++i], 0.001);
    else if (a === '--relays-per-sec') o.relaysPerSec = num(a, argv[++i], 0);
    else if (a === '--bootstraps-per-sec') o.bootstrapsPerSec = num(a, argv[++i], 0);
    else if (a === '--sdp-bytes') o.sdpBytes = Math.floor(num(a, argv[++i], 16));
    else if (a === '--join-timeout-ms') o.joinTimeoutMs = num(a, argv[++i], 100);
    else if (a === '--relay-timeout-ms') o.relayTimeoutMs = num(a, argv[++i], 100);
    else if (a === '--join-limit-s') o.joinLimitS = num(a, argv[++i], 1);
    else if (a === '--lifetime-s') o.lifetimeS = num(a, argv[++i], 1);
    else if (a === '--address-base') o.addressBase = Math.floor(num(a, argv[++i], 1));
    else throw new Error(`unknown option ${a}`);
  }
  if (o.help) return o;
  if (o.url === null || !/^ws:\/\/127\.0\.0\.1:\d+\//.test(o.url))
    throw new Error('--url must be a loopback ws://127.0.0.1:PORT/… URL');
  if (o.swarms === null) throw new Error('--swarms is required');
  if (o.addressBase > 254) throw new Error('--address-base must be at most 254');
  return o;
}

function parseSwarms(text) {
  if (text === undefined || text === '') throw new Error('--swarms needs stream:peers pairs');
  return text.split(',').map((pair) => {
    const m = /^([A-Za-z0-9._-]{1,64}):(\d+)$/.exec(pair);
    if (m === null) throw new Error(`--swarms: "${pair}" is not stream:peers`);
    return { stream: m[1], peers: Number(m[2]) };
  });
}

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (e) {
  process.stderr.write(`bench-tracker-client: ${e.message}\n\n${USAGE}\n`);
  process.exit(2);
}
if (opts.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}

const emit = (record) => process.stdout.write(`${JSON.stringify(record)}\n`);
const now = () => performance.now();

/** Peers each bootstrap asks for (a viewer's first request; within the protocol's 64). */
const BOOTSTRAP_COUNT = 8;
/** Handshakes in flight at most: five seconds' worth, so a stalled tracker cannot make this unbounded. */
const maxPendingJoins = Math.max(100, Math.ceil(opts.joinRate * 5));
/** The pacing loop's period: short, so sends are spread rather than bunched. */
const PACE_MS = 2;
/** A stalled loop does not catch up with more than this much of a rate's backlog at once. */
const MAX_BACKLOG_S = 1;

// ─── sessions and swarms ────────────────────────────────────────────────────────────────────────

/**
 * @typedef {{ index: number, swarm: Swarm, ws: WebSocket | null, state: 'new' | 'connecting' | 'joining' | 'joined' | 'gone',
 *   startedAt: number, peerId: number, slot: number, bootstrapsSentAt: number[] }} Session
 * @typedef {{ stream: string, peers: number, joined: Session[] }} Swarm
 */
/** @type {Swarm[]} */
const swarms = opts.swarms.map((s) => ({ stream: s.stream, peers: s.peers, joined: [] }));
/** Join order interleaves the swarms so they all grow together, like concurrent streams. */
/** @type {Session[]} */
const sessions = [];
{
  const remaining = swarms.map((s) => s.peers);
  for (let added = true; added;) {
    added = false;
    for (let k = 0; k < swarms.length; k++) {
      if (remaining[k] > 0) {
        remaining[k]--;
        added = true;
        const swarm = swarms[k];
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
    }
  }
}
/** Every joined session of this process, for picking a random sender in O(1). */
/** @type {Session[]} */
const joinedAll = [];
/** Each joined session's position in joinedAll (its `slot` is its position in its swarm's list). */
const allSlot = new Map();
/** The swarm of every peer id this process has been welcomed as (ids stay unique per tracker). */
const swarmOf = new Map();

function addJoined(session) {
  session.slot = session.swarm.joined.length;
  session.swarm.joined.push(session);
  swarmOf.set(session.peerId, session.swarm);
  allSlot.set(session, joinedAll.length);
  joinedAll.push(session);
}

function removeJoined(session) {
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

// ─── counters ───────────────────────────────────────────────────────────────────────────────────

let phase = 'join';
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
const trackerErrors = {};
/** Socket-level errors (ECONNRESET, EMFILE, …) by code or message. */
const socketErrors = {};
let firstAttemptAt = null;
let lastWelcomeAt = null;
let joinPhaseEndedAt = null;

/** Samples since the last tick (sent to the orchestrator, which keeps them). */
let tickRelayMs = [];
let tickJoinMs = [];
let tickBootstrapMs = [];

const tally = (table, key) => {
  table[key] = (table[key] ?? 0) + 1;
};

const round3 = (x) => Math.round(x * 1000) / 1000;

// ─── joining ────────────────────────────────────────────────────────────────────────────────────

let nextToOpen = 0;
let pendingJoins = 0;

function open(session) {
  counters.attempted++;
  pendingJoins++;
  session.state = 'connecting';
  session.startedAt = now();
  firstAttemptAt ??= session.startedAt;
  // Spread over 127.0.0.N..254 so no single source address runs out of ephemeral ports.
  const host = opts.addressBase + (session.index % (255 - opts.addressBase));
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
    let message;
    try {
      message = JSON.parse(data.toString());
    } catch {
      counters.unexpectedMessages++;
      return;
    }
    onMessage(session, message);
  });
  ws.on('error', (e) => {
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

function onMessage(session, message) {
  switch (message.type) {
    case 'welcome': {
      if (session.state !== 'joining') {
        counters.unexpectedMessages++;
        return;
      }
      const at = now();
      session.state = 'joined';
      session.peerId = message.peerId;
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
      for (const id of message.peers) {
        counters.bootstrapPeersReturned++;
        const swarm = swarmOf.get(id);
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
function expireJoins() {
  const limit = now() - opts.joinTimeoutMs;
  for (let i = 0; i < nextToOpen; i++) {
    const s = sessions[i];
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
const sdp = (() => {
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

/** In-flight relays by id (the signal's `link`): when sent, by whom, to whom, in which phase. */
const inFlight = new Map();
let nextRelayId = 1;

function sendRelay() {
  if (joinedAll.length < 2) return false;
  const from = joinedAll[Math.floor(Math.random() * joinedAll.length)];
  const peers = from.swarm.joined;
  if (peers.length < 2) return false;
  // A random other member: draw from the list without `from`'s own slot.
  let k = Math.floor(Math.random() * (peers.length - 1));
  if (k >= from.slot) k++;
  const to = peers[k];
  const id = nextRelayId;
  nextRelayId = nextRelayId >= 0xffff_fff0 ? 1 : nextRelayId + 1;
  inFlight.set(id, { sentAt: now(), from: from.peerId, to, phase });
  // Built by concatenation: the generator's own cost per relay is what limits the rates it can offer.
  from.ws.send(`{"type":"signal","to":${to.peerId},"data":{"type":"offer","sdp":${sdpJson},"link":${id}}}`);
  counters.relaysSent++;
  return true;
}

function onSignal(session, message) {
  const id = message.data?.link;
  const sent = typeof id === 'number' ? inFlight.get(id) : undefined;
  if (sent === undefined) {
    counters.unexpectedMessages++;
    return;
  }
  inFlight.delete(id);
  if (sent.to !== session || sent.from !== message.from || message.data.sdp !== sdp) {
    counters.relayMismatches++;
    return;
  }
  counters.relaysReceived++;
  tickRelayMs.push([round3(now() - sent.sentAt), sent.phase === 'hold' ? 1 : 0]);
}

function expireRelays(all = false) {
  const limit = now() - opts.relayTimeoutMs;
  for (const [id, sent] of inFlight) {
    // Insertion order is send order, so the first young entry ends the scan.
    if (!all && sent.sentAt >= limit) break;
    inFlight.delete(id);
    counters.relaysLost++;
  }
}

function sendBootstrap(session) {
  if (session.state !== 'joined') return false;
  session.bootstrapsSentAt.push(now());
  session.ws.send(JSON.stringify({ type: 'bootstrap', count: BOOTSTRAP_COUNT }));
  counters.bootstrapsSent++;
  return true;
}

// ─── pacing ─────────────────────────────────────────────────────────────────────────────────────

const startedAt = now();
let relayClockStart = null;
let relaysDue = 0;
let bootstrapsDue = 0;
let bootstrapClockStart = null;
let sending = true;

/** How many events a rate owes since `since`, at most MAX_BACKLOG_S of it beyond `done`. */
function owed(rate, since, done) {
  const due = Math.floor(((now() - since) / 1000) * rate);
  const backlog = due - done;
  const cap = Math.max(1, Math.ceil(rate * MAX_BACKLOG_S));
  return { due, send: Math.min(backlog, cap), skipped: Math.max(0, backlog - cap) };
}

function pace() {
  const t = now();
  // Joins: open-loop at the join rate, bounded by the in-flight cap and the join time limit.
  if (phase === 'join' && nextToOpen < sessions.length && t - startedAt < opts.joinLimitS * 1000) {
    const due = Math.min(sessions.length, Math.floor(((t - startedAt) / 1000) * opts.joinRate) + 1);
    while (nextToOpen < due && pendingJoins < maxPendingJoins) open(sessions[nextToOpen++]);
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
    for (let i = 0; i < o.send; i++) sendBootstrap(joinedAll[Math.floor(Math.random() * joinedAll.length)]);
  }
}

function summary() {
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

function tick() {
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
const tickTimer = setInterval(tick, 1000);
const expireTimer = setInterval(() => {
  expireJoins();
  expireRelays();
}, 250);

// ─── commands and shutdown ──────────────────────────────────────────────────────────────────────

let stopping = false;

function finish(reason) {
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
  }, 20);
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const command = line.trim();
  if (command === 'hold') phase = 'hold';
  else if (command === 'stop') finish('stopped');
  else process.stderr.write(`bench-tracker-client: unknown command ${JSON.stringify(command)}\n`);
});
lines.on('close', () => {
  finish('stdin closed');
});
setTimeout(() => {
  finish('lifetime over');
}, opts.lifetimeS * 1000).unref();
