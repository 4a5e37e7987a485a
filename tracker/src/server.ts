/**
 * The tracker: one HTTP server carrying the rendezvous WebSocket (/ws), the HLS origin (/live/*),
 * health and metrics (/healthz, /metrics), the broadcaster's debug JSON (/debug/*, behind the
 * broadcaster key) and optionally the demo's files. It only introduces peers and relays their
 * signalling; media never passes through it.
 *
 * Peer ids, bootstrap samples, relays to members held elsewhere and announcements go through a
 * Cluster (cluster.ts): in memory for a single process (the default), or Redis (`redisUrl`) so that
 * several tracker processes serve one swarm. This process keeps its own connections and members.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, WebSocket, type RawData } from 'ws';
import {
  announcementSigningBytes,
  decodeClientMessage,
  encodeTrackerMessage,
  MAX_RECENT_ANNOUNCEMENTS,
  MAX_TRACKER_FRAME_BYTES,
  STREAM_ID_PATTERN,
  type ClientMessage,
  type ConnectivityReport,
  type PeerId,
  type ServerMessage,
  type SignedAnnouncement,
  TRACKER_ERROR_CODES,
  type TrackerErrorCode,
  CLOSE_REPLACED,
} from '@chunkycast/wire';
import { silentLogger, type Logger } from './log.js';
import { ConnectivityCounters } from './connectivity.js';
import {
  checkIceSettings,
  DEFAULT_TURN_TTL_S,
  ICE_RENEW_AT_FRACTION,
  iceConfigFor,
  iceExpires,
  iceHealth,
  NO_ICE_WARNING,
  type IceSettings,
} from './ice.js';
import { importPublicKey } from './keys.js';
import { addressKey, AddressCounts, LIMIT_KINDS, TokenBucket, type LimitKind } from './limits.js';
import {
  DISCONNECT_REASONS,
  PROMETHEUS_CONTENT_TYPE,
  renderPrometheus,
  RESUME_OUTCOMES,
  type DisconnectReason,
  type TrackerMetrics,
} from './metrics.js';
import { emptyOriginStats, Origin, sendStatus, serveStatic, type OriginStats } from './origin.js';
import {
  MemoryCluster,
  type Cluster,
  type ClusterHandlers,
  type ClusterTiming,
  type MemberLossReason,
  type MemoryHub,
} from './cluster.js';
import { connectRedisCluster } from './redis-cluster.js';
import { SwarmRegistry, type Member, type Swarm } from './swarm.js';
import {
  deriveTrackerSecret,
  makeResumeTicket,
  readResumeTicket,
  sourceIdFor,
  verifyJoinToken,
  type ResumeClaim,
} from './tickets.js';

export interface TrackerOptions {
  /** Address to bind; 127.0.0.1 by default. */
  readonly host?: string;
  /** 0 (the default here) = any free port. */
  readonly port?: number;
  /** The secret a peer must present to join as a stream's true source, and /debug/* needs. */
  readonly broadcasterKey: string;
  /**
   * Base64 raw Ed25519 public key of the broadcaster: sent to viewers in `welcome` and used to
   * refuse forged announcements. Null: announcements are relayed unchecked, viewers get no key.
   */
  readonly publicKey?: string | null;
  readonly originDir?: string | null;
  readonly staticDir?: string | null;
  readonly log?: Logger;
  /** WebSocket ping interval; a socket missing two pongs in a row is dropped. */
  readonly heartbeatMs?: number;
  /** Undecodable frames one socket may send before it is disconnected (1008); 0 = no limit. */
  readonly maxBadFrames?: number;
  /** Frames per second one connection may send, sustained; 0 = no limit. The true source is exempt. */
  readonly maxMessagesPerSecond?: number;
  /** Bucket size of the message rate: frames one connection may send at once (default 5 s worth). */
  readonly messageBurst?: number;
  /** Open WebSockets per client address (IPv6: per /64); 0 = no limit. */
  readonly maxConnectionsPerAddress?: number;
  /** Open WebSockets in this tracker; 0 = no limit. */
  readonly maxConnections?: number;
  /**
   * Open plain HTTP connections per client address (IPv6: per /64), not counting those that became
   * WebSockets (`maxConnectionsPerAddress` bounds those); 0 = no limit.
   */
  readonly maxHttpConnectionsPerAddress?: number;
  /** How long a client may take to send its request headers before it gets 408 and is closed. */
  readonly httpHeadersTimeoutMs?: number;
  /** When set, a viewer join needs a valid, unexpired join token for its stream (`makeJoinToken`). */
  readonly joinSecret?: string | null;
  /** When set, a WebSocket whose Origin header is not listed is refused (`originNotAllowed`, 1008). */
  readonly allowedOrigins?: readonly string[] | null;
  /** HMAC key of resume tickets and source ids; default derived from the broadcaster key. */
  readonly trackerSecret?: string | null;
  /** Lifetime of the resume ticket in each `welcome`. */
  readonly resumeTicketTtlS?: number;
  /** How long close() lets clients and in-flight HTTP finish before cutting them off. */
  readonly closeGraceMs?: number;
  /** Wall clock (unix ms) for tokens, tickets and rate limits; injectable for tests. */
  readonly now?: () => number;
  /**
   * redis://… or rediss://…: share swarms with every tracker process using this Redis (and key
   * prefix). They must all have the same tracker secret (or broadcaster key) and public key. Null or
   * absent: this process alone, in memory. A Redis that cannot be reached makes createTracker
   * reject with ClusterStartError.
   */
  readonly redisUrl?: string | null;
  /** Prepended to every Redis key and channel (default `chunkycast:`), so deployments can share a Redis. */
  readonly redisKeyPrefix?: string;
  /** Liveness timing of the cluster (DEFAULT_CLUSTER_TIMING); shorter in tests. */
  readonly clusterTiming?: Partial<ClusterTiming>;
  /**
   * Tests: several trackers in one process share swarms through this in-memory hub, as processes
   * do through Redis. Ignored when `redisUrl` is set.
   */
  readonly clusterHub?: MemoryHub;
  /** `stun:` URLs every peer gets (default none). */
  readonly stunUrls?: readonly string[];
  /** `turn:`/`turns:` URLs every peer gets with credentials of its own (needs `turnSecret`). */
  readonly turnUrls?: readonly string[];
  /** The TURN REST API's shared secret (coturn `static-auth-secret`). */
  readonly turnSecret?: string | null;
  /** Lifetime of a peer's TURN credentials, seconds (default DEFAULT_TURN_TTL_S); renewed at 80%. */
  readonly turnTtlS?: number;
}

export const DEFAULT_HEARTBEAT_MS = 15_000;
/** At most this many ticks per heartbeat round (see the heartbeat timer in createTracker). */
const HEARTBEAT_SLICES = 50;
export const DEFAULT_MAX_BAD_FRAMES = 100;
export const DEFAULT_MAX_MESSAGES_PER_SECOND = 20;
/** Bursts of this many seconds' worth of the message rate pass (20/s → 100 frames at once). */
export const MESSAGE_BURST_SECONDS = 5;
export const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 256;
export const DEFAULT_MAX_CONNECTIONS = 100_000;
/** Same as for WebSockets: a CGNAT address or a campus can carry hundreds of viewers. */
export const DEFAULT_MAX_HTTP_CONNECTIONS_PER_ADDRESS = 256;
/**
 * A client on a slow mobile link sends its few hundred bytes of headers in well under a second;
 * Node's own default (60 s, checked every 30 s) let one slow-loris socket live about 89 s.
 */
export const DEFAULT_HTTP_HEADERS_TIMEOUT_MS = 10_000;
/** How often Node checks header and request timeouts; the header time itself when shorter. */
const HTTP_TIMEOUT_CHECK_MS = 1_000;
/**
 * A whole request (headers and body) must arrive within this. The tracker reads no request bodies,
 * so this only bounds a client dribbling one; it is never below the header time (Node requires it).
 */
const HTTP_REQUEST_TIMEOUT_MS = 30_000;
/**
 * Resume tickets are only handed out in `welcome`, so one must outlive the session it belongs to:
 * a viewer that has watched for hours must still get its id back when the tracker restarts. 12 h
 * covers a long event; a leaked ticket lets its holder take over only that one viewer's id.
 */
export const DEFAULT_RESUME_TICKET_TTL_S = 12 * 3600;
const DEFAULT_CLOSE_GRACE_MS = 3_000;
/**
 * ws itself closes (1009) beyond this. It is above the protocol's limit on purpose, so a frame
 * somewhat over MAX_TRACKER_FRAME_BYTES gets a readable `tooLarge` answer; four times the limit
 * also covers a frame of MAX_TRACKER_FRAME_BYTES characters at up to 3 UTF-8 bytes each.
 */
const WS_MAX_PAYLOAD_BYTES = 4 * MAX_TRACKER_FRAME_BYTES;
/** A peer that lets this much queue up unread is not keeping up with control traffic; drop it. */
const MAX_BUFFERED_BYTES = 1024 * 1024;
/** A socket we close gets this long to answer the closing handshake before it is cut off. */
const CLOSE_HANDSHAKE_MS = 1_000;
/**
 * Refused sockets still being closed (each lives ≤ CLOSE_HANDSHAKE_MS). Beyond this, under a
 * connection flood, refusals are plain HTTP answers to the upgrade, which cost nothing to keep.
 */
const MAX_REFUSING_SOCKETS = 1024;
/** Signals kept for one join in flight; an honest joiner is offered a link or two in that time. */
const MAX_PENDING_SIGNALS = 16;
/**
 * Announcements from other processes awaiting their signature check. A source announces about one
 * a second per stream, so this is only reached by a flood through the store, which is then cut.
 */
const MAX_QUEUED_REMOTE_ANNOUNCEMENTS = 1024;
/**
 * TURN credential renewals are due in the order peers were welcomed (one lifetime for all), so one
 * ordered map and one sweep serve every connection, not a timer each. A sweep every 100 ms sends at
 * most this many: after a tracker restart every peer rejoins within seconds and their renewals fall
 * due together; 250 per sweep (2,500/s, a few ms of the event loop each time) renew 100,000 peers in
 * 40 s, well within the fifth of the lifetime left when they fall due.
 */
const ICE_RENEW_SWEEP_MS = 100;
const MAX_ICE_RENEWALS_PER_SWEEP = 250;
export { CLOSE_REPLACED };
/** "Service restart": clients reconnect (and resume) at once. */
export const CLOSE_SERVICE_RESTART = 1012;

export type ErrorCounts = Record<TrackerErrorCode, number>;
export type { TrackerMetrics } from './metrics.js';

export interface DebugMember {
  readonly peerId: PeerId;
  readonly role: 'viewer' | 'source';
  readonly joinedAtMs: number;
  readonly report: Member['report'];
  /** The member's links by route type, failures and relayed bytes, from its latest report (null: none sent). */
  readonly connectivity: ConnectivityReport | null;
}

export interface DebugSwarm {
  readonly stream: string;
  readonly sourceId: PeerId;
  readonly sourceConnected: boolean;
  readonly members: readonly DebugMember[];
  /** Announcements accepted since the swarm was made. */
  readonly announcements: number;
  readonly lastAnnouncement: SignedAnnouncement | null;
}

export interface Tracker {
  /** http://HOST:PORT */
  readonly url: string;
  /** ws://HOST:PORT/ws */
  readonly wsUrl: string;
  readonly port: number;
  originStats(): OriginStats;
  resetOriginStats(): void;
  metrics(): TrackerMetrics;
  /** The same counters in the Prometheus text format (what GET /metrics answers). */
  prometheus(): string;
  debugSwarm(stream: string): DebugSwarm | null;
  /** The id the true source of `stream` gets (deterministic for a given tracker secret). */
  sourceIdOf(stream: string): PeerId;
  /**
   * Stops accepting, closes every WebSocket with 1012 (clients reconnect and resume at once), lets
   * in-flight HTTP finish within the grace period, then closes the server. Idempotent.
   */
  close(): Promise<void>;
}

/** One WebSocket and what it has joined. */
interface Connection {
  readonly socket: WebSocket;
  /** address:port, for logs. */
  readonly remote: string;
  /** What the per-address limit counts under. */
  readonly addressKey: string;
  /** Counted as a session (and under its address) until it closes; false for a refused socket. */
  admitted: boolean;
  member: Member | null;
  badFrames: number;
  missedPongs: number;
  /** Null when the message rate is unlimited. */
  readonly bucket: TokenBucket | null;
  /** Set when the tracker ends the connection: why (the `disconnects` label); null = the client. */
  closeReason: DisconnectReason | null;
  /** Frames are handled one after another even when one awaits (signature checks), keeping order. */
  queue: Promise<void>;
}

/** What reaches a stream while a join into it awaits the cluster (see `pendingJoins`). */
interface PendingJoin {
  /** Oldest first, at most MAX_RECENT_ANNOUNCEMENTS. */
  readonly announcements: SignedAnnouncement[];
  readonly signals: { readonly to: PeerId; readonly message: ServerMessage }[];
}

/** Announcements are equal if they sign the same segment bytes under the same sequence. */
function announcementKey(a: SignedAnnouncement): string {
  return `${a.sequence}/${a.sha256}`;
}

/** A refusal of one frame: answered with an error frame, the connection stays. */
class Refusal extends Error {
  constructor(
    readonly code: TrackerErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Why a new WebSocket is refused before it is admitted. */
interface Admission {
  readonly code: 'originNotAllowed' | 'tooManyConnections';
  readonly message: string;
  readonly limit: LimitKind | null;
  readonly reason: DisconnectReason;
  readonly httpStatus: 403 | 503;
}

function zeroes<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

export async function createTracker(options: TrackerOptions): Promise<Tracker> {
  const log = options.log ?? silentLogger;
  const now = options.now ?? Date.now;
  const host = options.host ?? '127.0.0.1';
  const heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  const maxBadFrames = options.maxBadFrames ?? DEFAULT_MAX_BAD_FRAMES;
  const ratePerSecond = options.maxMessagesPerSecond ?? DEFAULT_MAX_MESSAGES_PER_SECOND;
  const burst = options.messageBurst ?? Math.max(1, Math.ceil(ratePerSecond * MESSAGE_BURST_SECONDS));
  const maxPerAddress = options.maxConnectionsPerAddress ?? DEFAULT_MAX_CONNECTIONS_PER_ADDRESS;
  const maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  const maxHttpPerAddress = options.maxHttpConnectionsPerAddress ?? DEFAULT_MAX_HTTP_CONNECTIONS_PER_ADDRESS;
  const httpHeadersTimeoutMs = options.httpHeadersTimeoutMs ?? DEFAULT_HTTP_HEADERS_TIMEOUT_MS;
  const joinSecret = options.joinSecret ?? null;
  const allowedOrigins = options.allowedOrigins == null ? null : new Set(options.allowedOrigins);
  const trackerSecret = options.trackerSecret ?? deriveTrackerSecret(options.broadcasterKey);
  const ticketTtlS = options.resumeTicketTtlS ?? DEFAULT_RESUME_TICKET_TTL_S;
  const closeGraceMs = options.closeGraceMs ?? DEFAULT_CLOSE_GRACE_MS;
  const ice: IceSettings = {
    stunUrls: options.stunUrls ?? [],
    turnUrls: options.turnUrls ?? [],
    turnSecret: options.turnSecret ?? null,
    turnTtlS: options.turnTtlS ?? DEFAULT_TURN_TTL_S,
  };
  checkIceSettings(ice);
  /**
   * Renewals are due this long before the credentials expire: the last fifth of their lifetime. From
   * the expiry rather than from sending, because the expiry is whole seconds (the username's).
   */
  const iceRenewBeforeExpiryMs = Math.round(ice.turnTtlS * 1000 * (1 - ICE_RENEW_AT_FRACTION));
  for (const [name, value] of Object.entries({
    maxBadFrames,
    maxMessagesPerSecond: ratePerSecond,
    messageBurst: burst,
    maxConnectionsPerAddress: maxPerAddress,
    maxConnections,
    maxHttpConnectionsPerAddress: maxHttpPerAddress,
    resumeTicketTtlS: ticketTtlS,
  }))
    if (!Number.isFinite(value) || value < 0) throw new RangeError(`${name} must be ≥ 0, got ${value}`);
  if (!Number.isFinite(httpHeadersTimeoutMs) || httpHeadersTimeoutMs <= 0)
    throw new RangeError(`httpHeadersTimeoutMs must be > 0, got ${httpHeadersTimeoutMs}`);
  if (ratePerSecond > 0 && burst < 1) throw new RangeError(`messageBurst must be ≥ 1, got ${burst}`);
  const publicKeyBase64 = options.publicKey ?? null;
  const verifyKey = publicKeyBase64 === null ? null : await importPublicKey(publicKeyBase64);
  // Compared as digests: equal lengths for timingSafeEqual whatever was sent, and no length leak.
  const keyDigest = sha256(options.broadcasterKey);
  const origin = options.originDir != null ? new Origin(options.originDir) : null;
  const staticDir = options.staticDir ?? null;
  const startedAtMs = Date.now();

  const registry = new SwarmRegistry((stream) => sourceIdFor(trackerSecret, stream), now);
  /** Admitted connections (sessions). */
  const connections = new Set<Connection>();
  /** Refused connections whose closing handshake is under way. */
  const refusing = new Set<Connection>();
  const addressCounts = new AddressCounts();
  /** A member's connection, to close it when a resumed session takes its id. */
  const connectionOf = new WeakMap<Member, Connection>();
  /**
   * Expiry (unix s) of the resume ticket in a member's welcome. The cluster holds the same value: a
   * resume presenting an older ticket for the same id does not displace the member (it is a stale
   * copy of the session, not its heir).
   */
  const ticketExpiry = new WeakMap<Member, number>();
  const counters = {
    connectionsTotal: 0,
    framesIn: 0,
    framesOut: 0,
    joins: 0,
    signalsRelayed: 0,
    /** Signals refused because the sender or the target was banned for cut-offs (cut-offs.ts). */
    signalsRefusedCutOff: 0,
    /** Peers banned from new connections after REPORTS_TO_BAN members reported them cut off. */
    peersBannedForCutOffs: 0,
    announcements: 0,
    handlerFaults: 0,
    debugAuthFailures: 0,
    remoteAnnouncementsRejected: 0,
    iceRenewals: 0,
  };
  /** Peers' link counts by route, failures and relayed bytes, from their reports (aggregates only). */
  const connectivity = new ConnectivityCounters();
  /** Each member's last report that carried connectivity: the next one adds only what grew since. */
  const lastConnectivity = new WeakMap<Member, ConnectivityReport>();
  /** Members that resumed a session: their first report is a baseline (see ConnectivityCounters.add). */
  const resumedMembers = new WeakSet<Member>();
  /**
   * When each joined connection's TURN credentials are to be renewed (unix ms), in welcome order, so
   * the due ones are always at the front (see ICE_RENEW_SWEEP_MS). Empty without a TURN secret.
   */
  const iceRenewals = new Map<Connection, number>();
  const errors: ErrorCounts = zeroes(TRACKER_ERROR_CODES);
  const limitHits = zeroes(LIMIT_KINDS);
  const resumes = zeroes(RESUME_OUTCOMES);
  const disconnects = zeroes(DISCONNECT_REASONS);
  /** Origin counters from before each /debug/origin/reset, so /metrics counters never go back. */
  const originCarry = { sourceBytes: 0, viewerBytes: 0, sourceRequests: 0, viewerRequests: 0 };
  let closing = false;
  /**
   * Joins awaiting the cluster, by stream. What is fanned out to the stream meanwhile would miss
   * the joiner (it is not in the swarm yet, and the recent list it gets may predate it), so it is
   * collected here and handed over once the joiner is in.
   */
  const pendingJoins = new Map<string, Set<PendingJoin>>();
  /** Remote announcements are re-verified one after another on this chain, keeping their order. */
  let remoteAnnouncements: Promise<void> = Promise.resolve();
  let remoteAnnouncementsQueued = 0;

  const clusterHandlers: ClusterHandlers = { onRemoteMessage, onRemoteAnnouncement, onMemberLost };
  // Every join, sample and relay goes through a Cluster, the single-process one included: one code path.
  const cluster: Cluster =
    options.redisUrl != null
      ? await connectRedisCluster({
          url: options.redisUrl,
          ...(options.redisKeyPrefix === undefined ? {} : { keyPrefix: options.redisKeyPrefix }),
          ...(options.clusterTiming === undefined ? {} : { timing: options.clusterTiming }),
          log,
          handlers: clusterHandlers,
        })
      : new MemoryCluster({
          handlers: clusterHandlers,
          ...(options.clusterHub === undefined ? {} : { hub: options.clusterHub }),
          ...(options.clusterTiming === undefined ? {} : { timing: options.clusterTiming }),
        });

  // ───────────── WebSocket side ─────────────

  /** Records why a connection ends, once: the first reason given is the one counted. */
  function endedBecause(conn: Connection, why: DisconnectReason): void {
    if (conn.closeReason !== null) return;
    conn.closeReason = why;
    disconnects[why]++;
  }

  /** Ends a connection from our side: records why, and cuts it off if the handshake stalls. */
  function disconnect(conn: Connection, code: number, reason: string, why: DisconnectReason): void {
    endedBecause(conn, why);
    const socket = conn.socket;
    if (socket.readyState === WebSocket.CLOSED) return;
    if (socket.readyState === WebSocket.OPEN) socket.close(code, reason);
    // A peer that never answers the close (a dead link, or on purpose) must not hold the socket.
    const cutOff = setTimeout(() => {
      socket.terminate();
    }, CLOSE_HANDSHAKE_MS);
    cutOff.unref();
    socket.once('close', () => {
      clearTimeout(cutOff);
    });
  }

  function terminate(conn: Connection, why: DisconnectReason): void {
    endedBecause(conn, why);
    conn.socket.terminate();
  }

  function send(conn: Connection, message: ServerMessage): void {
    const socket = conn.socket;
    if (socket.readyState !== WebSocket.OPEN) return;
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
      log('warn', 'dropping a peer that does not read its socket', {
        remote: conn.remote,
        peerId: conn.member?.peerId,
        bufferedBytes: socket.bufferedAmount,
      });
      terminate(conn, 'slowConsumer');
      return;
    }
    counters.framesOut++;
    socket.send(encodeTrackerMessage(message));
  }

  function sendError(conn: Connection, code: TrackerErrorCode, message: string): void {
    errors[code]++;
    send(conn, { type: 'error', code, message });
  }

  function badFrame(conn: Connection, code: TrackerErrorCode, message: string): void {
    if (code === 'tooLarge') limitHits.frameSize++;
    sendError(conn, code, message);
    conn.badFrames++;
    if (maxBadFrames > 0 && conn.badFrames >= maxBadFrames && conn.closeReason === null) {
      limitHits.badFrames++;
      log('warn', 'disconnecting a peer after too many bad frames', {
        remote: conn.remote,
        peerId: conn.member?.peerId,
        badFrames: conn.badFrames,
      });
      disconnect(conn, 1008, 'too many bad frames', 'badFrames');
    }
  }

  function welcome(
    conn: Connection,
    member: Member,
    swarm: Swarm,
    resumed: boolean,
    announcements: readonly SignedAnnouncement[],
  ): void {
    const iceConfig = iceConfigFor(ice, member.peerId, now());
    send(conn, {
      type: 'welcome',
      peerId: member.peerId,
      sourceId: swarm.sourceId,
      stream: swarm.stream,
      publicKey: publicKeyBase64,
      announcements,
      resume: makeResumeTicket(trackerSecret, {
        stream: swarm.stream,
        peerId: member.peerId,
        role: member.role,
        expiresAtSec: ticketExpiry.get(member) ?? 0,
      }),
      resumed,
      ice: iceConfig,
    });
    // A fresh welcome (a rejoin, a resume) restarts the renewal clock of this connection.
    scheduleIceRenewal(conn, iceConfig.expiresAtMs);
  }

  /** Queues `conn`'s next renewal (last: expiries only grow, so the queue stays in due order). */
  function scheduleIceRenewal(conn: Connection, expiresAtMs: number | null): void {
    iceRenewals.delete(conn);
    if (expiresAtMs !== null) iceRenewals.set(conn, expiresAtMs - iceRenewBeforeExpiryMs);
  }

  /** Sends fresh TURN credentials to every member whose renewal is due (at most a sweep's worth). */
  function renewIce(): void {
    const t = now();
    let renewed = 0;
    for (const [conn, dueAtMs] of iceRenewals) {
      if (dueAtMs > t || renewed >= MAX_ICE_RENEWALS_PER_SWEEP) break;
      iceRenewals.delete(conn);
      const member = conn.member;
      // Left, replaced or closed meanwhile: nothing to renew (a rejoin's welcome brings fresh ones).
      if (member === null || conn.closeReason !== null || conn.socket.readyState !== WebSocket.OPEN) continue;
      const iceConfig = iceConfigFor(ice, member.peerId, t);
      send(conn, { type: 'ice', ice: iceConfig });
      counters.iceRenewals++;
      renewed++;
      scheduleIceRenewal(conn, iceConfig.expiresAtMs);
    }
  }

  function makeMember(
    conn: Connection,
    peerId: PeerId,
    role: Member['role'],
    stream: string,
    ticketExpiresAtSec: number,
  ): Member {
    const member: Member = {
      peerId,
      role,
      stream,
      joinedAtMs: now(),
      report: null,
      send: (message) => {
        send(conn, message);
      },
    };
    connectionOf.set(member, conn);
    ticketExpiry.set(member, ticketExpiresAtSec);
    return member;
  }

  /**
   * The claim of a resume ticket presented in `join`, if it is valid for this stream and role. A bad
   * ticket is no error (the peer simply gets a fresh id), only counted.
   */
  function resumeClaim(message: Extract<ClientMessage, { type: 'join' }>): ResumeClaim | null {
    if (message.resume === undefined) return null;
    const check = readResumeTicket(trackerSecret, message.resume, now());
    if (!check.ok) {
      resumes[check.problem === 'expired' ? 'expired' : 'invalid']++;
      return null;
    }
    const claim = check.claim;
    const sourceId = sourceIdFor(trackerSecret, message.stream);
    const idFitsRole = message.role === 'source' ? claim.peerId === sourceId : claim.peerId !== sourceId;
    if (claim.stream !== message.stream || claim.role !== message.role || !idFitsRole) {
      resumes.mismatch++;
      return null;
    }
    return claim;
  }

  /** A resumed session takes `old`'s place: `old`'s connection loses its membership and is closed. */
  function displace(old: Member): void {
    const conn = connectionOf.get(old);
    if (conn === undefined) return;
    conn.member = null;
    log('info', 'a resumed session replaces a connection', {
      stream: old.stream,
      peerId: old.peerId,
      role: old.role,
      remote: conn.remote,
    });
    disconnect(conn, CLOSE_REPLACED, 'replaced by a resumed session', 'replaced');
  }

  function checkBroadcasterKey(conn: Connection, message: Extract<ClientMessage, { type: 'join' }>): void {
    if (message.key === undefined) throw new Refusal('badKey', 'joining as source needs the broadcaster key');
    if (!timingSafeEqual(sha256(message.key), keyDigest)) {
      log('warn', 'source join with a wrong broadcaster key', {
        remote: conn.remote,
        stream: message.stream,
      });
      throw new Refusal('badKey', 'the broadcaster key is wrong');
    }
  }

  function checkJoinToken(message: Extract<ClientMessage, { type: 'join' }>): void {
    if (joinSecret === null) return;
    if (message.token === undefined)
      throw new Refusal(
        'badToken',
        `stream ${message.stream} needs a join token from the broadcaster's site`,
      );
    const check = verifyJoinToken(joinSecret, message.stream, message.token, now());
    if (!check.ok)
      throw new Refusal(
        'badToken',
        check.problem === 'expired'
          ? 'the join token has expired; get a fresh one from the broadcaster\u2019s site'
          : `the join token is not valid for stream ${message.stream}`,
      );
  }

  async function join(conn: Connection, message: Extract<ClientMessage, { type: 'join' }>): Promise<void> {
    if (conn.member !== null) throw new Refusal('alreadyJoined', `already joined ${conn.member.stream}`);
    if (message.role === 'source') checkBroadcasterKey(conn, message);
    else checkJoinToken(message);
    const claim = resumeClaim(message);
    const stream = message.stream;
    const ticketExpiresAtSec = Math.floor(now() / 1000) + ticketTtlS;

    // The cluster decides the id (across every process): the source's fixed one, the ticket's, or a
    // fresh one; a holder is displaced only by a ticket at least as new as its own (cluster.ts).
    const pending: PendingJoin = { announcements: [], signals: [] };
    let waiting = pendingJoins.get(stream);
    if (waiting === undefined) pendingJoins.set(stream, (waiting = new Set()));
    waiting.add(pending);
    let result: Awaited<ReturnType<Cluster['addMember']>>;
    try {
      result = await cluster.addMember({
        stream,
        role: message.role,
        sourceId: sourceIdFor(trackerSecret, stream),
        ticketExpiresAtSec,
        ...(claim === null
          ? {}
          : { resume: { peerId: claim.peerId, ticketExpiresAtSec: claim.expiresAtSec } }),
      });
    } finally {
      waiting.delete(pending);
      if (waiting.size === 0 && pendingJoins.get(stream) === waiting) pendingJoins.delete(stream);
    }
    if (!result.ok) {
      if (claim !== null) resumes.conflict++;
      throw new Refusal('sourcePresent', `stream ${stream} already has a source`);
    }
    if (result.outcome !== 'new') resumes[result.outcome]++;

    const swarm = registry.getOrCreate(stream);
    const member = makeMember(conn, result.peerId, message.role, swarm.stream, ticketExpiresAtSec);
    // A local holder of the id gave way (most likely this peer's own earlier connection); a holder
    // on another process is told by the cluster (onMemberLost).
    const holder = swarm.get(result.peerId);
    if (holder !== undefined) displace(holder);
    swarm.replace(member);
    conn.member = member;
    // The socket may have closed (or the tracker begun closing) while the claim was in flight; its
    // 'close' handler saw no member then, so the claim is released here.
    if (conn.socket.readyState !== WebSocket.OPEN) {
      leave(conn);
      return;
    }
    counters.joins++;
    const resumed = result.outcome === 'resumed' || result.outcome === 'replaced';
    if (resumed) resumedMembers.add(member);
    log(member.role === 'source' ? 'info' : 'debug', `${member.role} joined`, {
      stream: swarm.stream,
      peerId: member.peerId,
      resumed,
      viewers: swarm.viewerCount,
      remote: conn.remote,
    });
    welcome(conn, member, swarm, resumed, result.announcements);
    // What reached the stream while the claim was in flight, in arrival order.
    if (member.role === 'viewer') {
      const known = new Set(result.announcements.map(announcementKey));
      for (const a of pending.announcements)
        if (!known.has(announcementKey(a))) member.send({ type: 'announce', announcement: a });
    }
    for (const signal of pending.signals) if (signal.to === member.peerId) member.send(signal.message);
  }

  function leave(conn: Connection): void {
    const member = conn.member;
    if (member === null) return;
    conn.member = null;
    // A displaced member no longer holds its place: its id is its successor's now, in the cluster too.
    const holdsPlace = registry.get(member.stream)?.get(member.peerId) === member;
    registry.leave(member);
    // On shutdown cluster.close() releases every member of this process at once.
    if (holdsPlace && !closing)
      cluster.removeMember(member.stream, member.peerId).catch((e: unknown) => {
        log('warn', 'releasing a member in the cluster failed', { peerId: member.peerId, error: e });
      });
    log(member.role === 'source' ? 'info' : 'debug', `${member.role} left`, {
      stream: member.stream,
      peerId: member.peerId,
    });
  }

  function joined(conn: Connection): { member: Member; swarm: Swarm } {
    const member = conn.member;
    const swarm = member === null ? undefined : registry.get(member.stream);
    if (member === null || swarm === undefined) throw new Refusal('notJoined', 'join a stream first');
    return { member, swarm };
  }

  async function announce(conn: Connection, a: SignedAnnouncement): Promise<void> {
    const { member, swarm } = joined(conn);
    if (member.role !== 'source') throw new Refusal('forbidden', 'only the true source announces segments');
    if (a.stream !== swarm.stream)
      throw new Refusal('invalidField', `announcement is for stream ${a.stream}, not ${swarm.stream}`);
    if (!(await verifies(a))) throw new Refusal('invalidField', 'announcement signature does not verify');
    // The source may have left (or been replaced) while the signature was being checked.
    if (swarm.source !== member) return;
    counters.announcements++;
    fanOut(swarm, a);
    await cluster.publishAnnouncement(a);
  }

  /** Whether the announcement carries the broadcaster's signature (always true without a key). */
  async function verifies(a: SignedAnnouncement): Promise<boolean> {
    if (verifyKey === null) return true;
    const signature = Buffer.from(a.signature, 'base64');
    return (
      signature.length === 64 &&
      crypto.subtle.verify('Ed25519', verifyKey, signature, new Uint8Array(announcementSigningBytes(a)))
    );
  }

  /** Gives an accepted announcement to this process's viewers of its stream (and to joins in flight). */
  function fanOut(swarm: Swarm | undefined, a: SignedAnnouncement): void {
    for (const pending of pendingJoins.get(a.stream) ?? []) {
      pending.announcements.push(a);
      if (pending.announcements.length > MAX_RECENT_ANNOUNCEMENTS) pending.announcements.shift();
    }
    if (swarm === undefined) return;
    swarm.addAnnouncement(a);
    for (const viewer of swarm.viewerMembers()) viewer.send({ type: 'announce', announcement: a });
  }

  // ───────────── from other tracker processes (through the cluster) ─────────────

  /** A signal another process relayed to one of this process's members. */
  function onRemoteMessage(stream: string, to: PeerId, message: ServerMessage): void {
    // Other processes only relay signals; anything else would let the store speak for the tracker.
    if (message.type !== 'signal') {
      log('warn', 'dropped a relayed message that is not a signal', { stream, type: message.type });
      return;
    }
    const target = registry.get(stream)?.get(to);
    if (target !== undefined) {
      target.send(message);
      return;
    }
    // Its join may still await the cluster (the id is claimed before the member is in the swarm).
    const waiting = pendingJoins.get(stream);
    if (waiting !== undefined) {
      for (const pending of waiting)
        if (pending.signals.length < MAX_PENDING_SIGNALS) pending.signals.push({ to, message });
      return;
    }
    // Left meanwhile; the sender's link attempt times out as with any vanished peer.
    log('debug', 'dropped a relayed signal for a member that is gone', { stream, peerId: to });
  }

  /**
   * An announcement another process accepted. Redis is network input, so the signature is checked
   * again before any viewer here sees it; the checks run one after another to keep the order.
   */
  function onRemoteAnnouncement(a: SignedAnnouncement): void {
    if (remoteAnnouncementsQueued >= MAX_QUEUED_REMOTE_ANNOUNCEMENTS) {
      log('warn', 'dropped an announcement from another process: too many awaiting verification', {
        stream: a.stream,
        sequence: a.sequence,
      });
      return;
    }
    remoteAnnouncementsQueued++;
    remoteAnnouncements = remoteAnnouncements
      .then(async () => {
        if (!(await verifies(a))) {
          counters.remoteAnnouncementsRejected++;
          log('warn', 'dropped an announcement from another process: its signature does not verify', {
            stream: a.stream,
            sequence: a.sequence,
          });
          return;
        }
        fanOut(registry.get(a.stream), a);
      })
      .catch((e: unknown) => {
        counters.handlerFaults++;
        log('error', 'handler fault on a remote announcement', { error: e });
      })
      .finally(() => {
        remoteAnnouncementsQueued--;
      });
  }

  /** Another process now holds this member's id: the member's connection goes (it may resume). */
  function onMemberLost(stream: string, peerId: PeerId, reason: MemberLossReason): void {
    const holder = registry.get(stream)?.get(peerId);
    if (holder === undefined) return;
    // No removeMember: the cluster has already given the id to its new holder.
    registry.leave(holder);
    const conn = connectionOf.get(holder);
    if (conn === undefined || conn.member !== holder) return;
    conn.member = null;
    log('info', 'another tracker process took over a member', {
      stream,
      peerId,
      reason,
      remote: conn.remote,
    });
    disconnect(
      conn,
      CLOSE_REPLACED,
      reason === 'replaced' ? 'replaced by a resumed session' : 'peer id taken by another tracker process',
      'replaced',
    );
  }

  async function handle(conn: Connection, message: ClientMessage): Promise<void> {
    if (closing) throw new Refusal('shuttingDown', 'the tracker is shutting down');
    if (message.type === 'join') {
      await join(conn, message);
      return;
    }
    switch (message.type) {
      case 'bootstrap': {
        const { member, swarm } = joined(conn);
        const exclude = member.role === 'source' ? null : member.peerId;
        // Viewers of every process; the source is never in a sample.
        const sampled = await cluster.sampleViewers(swarm.stream, message.count, exclude);
        // A peer its neighbours cut off is introduced to nobody (cut-offs.ts).
        const peers = sampled.filter((id) => !swarm.cutOffs.isBanned(id));
        send(conn, { type: 'peers', peers });
        return;
      }
      case 'signal': {
        const { member, swarm } = joined(conn);
        if (message.to === member.peerId) throw new Refusal('invalidField', 'cannot signal yourself');
        // No new connection to or from a peer that several members cut off (cut-offs.ts): its open
        // links stay, but it cannot walk on to fresh neighbours that pay for it again.
        const senderBanned = swarm.cutOffs.isBanned(member.peerId);
        if (senderBanned || swarm.cutOffs.isBanned(message.to)) {
          counters.signalsRefusedCutOff++;
          throw new Refusal(
            'forbidden',
            senderBanned
              ? 'members cut you off: no new connections are signalled for you'
              : `peer ${message.to} was cut off by its neighbours: no new connections to it`,
          );
        }
        const relayed = { type: 'signal', from: member.peerId, data: message.data } as const;
        // This process's own members first: the cluster routes only to other processes.
        const target = swarm.get(message.to);
        if (target !== undefined) target.send(relayed);
        // 0 decodes (ids are u32s) but is never assigned: no process holds it.
        else if (message.to < 1)
          throw new Refusal('unknownPeer', `peer ${message.to} is not in stream ${swarm.stream}`);
        else {
          const routed = await cluster.deliver(swarm.stream, message.to, relayed);
          if (routed !== 'delivered')
            throw new Refusal(
              'unknownPeer',
              routed === 'unavailable'
                ? `peer ${message.to} cannot be reached right now`
                : `peer ${message.to} is not in stream ${swarm.stream}`,
            );
        }
        counters.signalsRelayed++;
        return;
      }
      case 'announce':
        await announce(conn, message.announcement);
        return;
      case 'report': {
        const { member, swarm } = joined(conn);
        member.report = message.report;
        for (const peer of message.report.cutOff ?? [])
          if (swarm.cutOffs.report(member.peerId, peer)) {
            counters.peersBannedForCutOffs++;
            log('info', 'peer cut off by several members: no new connections signalled for it', {
              stream: swarm.stream,
              peerId: peer,
            });
          }
        const next = message.report.connectivity;
        if (next !== undefined) {
          connectivity.add(lastConnectivity.get(member), next, resumedMembers.has(member));
          lastConnectivity.set(member, next);
        }
        return;
      }
      case 'leave':
        joined(conn);
        leave(conn);
        return;
    }
  }

  async function onFrame(conn: Connection, data: RawData, isBinary: boolean): Promise<void> {
    if (isBinary) {
      badFrame(conn, 'malformed', 'binary frames are not accepted; send JSON text frames');
      return;
    }
    const bytes = rawLength(data);
    if (bytes > 3 * MAX_TRACKER_FRAME_BYTES) {
      // Cannot be within the limit (≤ 3 UTF-8 bytes per UTF-16 unit); no need to decode it to say so.
      badFrame(conn, 'tooLarge', `frame of ${bytes} bytes exceeds ${MAX_TRACKER_FRAME_BYTES}`);
      return;
    }
    const decoded = decodeClientMessage(rawText(data));
    if (!decoded.ok) {
      badFrame(conn, decoded.error.code, decoded.error.message);
      return;
    }
    try {
      await handle(conn, decoded.message);
    } catch (e) {
      if (e instanceof Refusal) sendError(conn, e.code, e.message);
      else throw e;
    }
  }

  /** Runs `task` after everything queued on this connection before it. */
  function enqueue(conn: Connection, task: () => void | Promise<void>): void {
    conn.queue = conn.queue.then(task).catch((e: unknown) => {
      // A bug here must cost one frame, never the process or the other peers.
      counters.handlerFaults++;
      log('error', 'handler fault', { remote: conn.remote, error: e });
    });
  }

  /**
   * The message rate, checked as a frame arrives (before it is queued or parsed, so a flood costs
   * little). False: the frame is dropped. The true source is exempt: it holds the broadcaster key,
   * and its signalling grows with the swarm's churn.
   */
  function withinRate(conn: Connection): boolean {
    const bucket = conn.bucket;
    if (bucket === null || conn.member?.role === 'source' || bucket.take(now())) return true;
    limitHits.messageRate++;
    if (bucket.overflow > burst) {
      // Kept sending beyond the rate for as long as a whole burst: not a hiccup, abuse or a bug.
      log('warn', 'disconnecting a peer that keeps exceeding the message rate', {
        remote: conn.remote,
        peerId: conn.member?.peerId,
        ratePerSecond,
        burst,
      });
      disconnect(conn, 1008, 'message rate limit exceeded', 'rateLimited');
    } else
      // Answered in turn, after the frames before it.
      enqueue(conn, () => {
        sendError(
          conn,
          'rateLimited',
          `more than ${ratePerSecond} frames per second (bursts of ${burst}); this frame was dropped`,
        );
      });
    return false;
  }

  /** Whether a new WebSocket from `req` may become a session, or why not. Reads, never counts. */
  function admission(req: IncomingMessage, key: string): Admission | null {
    const pageOrigin = req.headers.origin;
    // No Origin header: not a browser page (the true source, a tool), which the list cannot be about.
    if (allowedOrigins !== null && pageOrigin !== undefined && !allowedOrigins.has(pageOrigin))
      return {
        code: 'originNotAllowed',
        message: `pages of ${pageOrigin.slice(0, 200)} may not use this tracker`,
        limit: null,
        reason: 'originNotAllowed',
        httpStatus: 403,
      };
    if (maxConnections > 0 && connections.size >= maxConnections)
      return {
        code: 'tooManyConnections',
        message: `the tracker is full (${maxConnections} connections); try again later`,
        limit: 'connections',
        reason: 'tooManyConnections',
        httpStatus: 503,
      };
    if (maxPerAddress > 0 && addressCounts.count(key) >= maxPerAddress)
      return {
        code: 'tooManyConnections',
        message: `more than ${maxPerAddress} connections from one address`,
        limit: 'connectionsPerAddress',
        reason: 'tooManyConnections',
        httpStatus: 503,
      };
    return null;
  }

  function countRefusal(refusal: Admission): void {
    if (refusal.limit !== null) limitHits[refusal.limit]++;
  }

  function onConnection(socket: WebSocket, req: IncomingMessage): void {
    const key = addressKey(req.socket.remoteAddress);
    const conn: Connection = {
      socket,
      remote: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? 0}`,
      addressKey: key,
      admitted: false,
      member: null,
      badFrames: 0,
      missedPongs: 0,
      bucket: ratePerSecond > 0 ? new TokenBucket(ratePerSecond, burst, now()) : null,
      closeReason: null,
      queue: Promise.resolve(),
    };
    counters.connectionsTotal++;
    socket.on('error', (e: Error & { code?: string }) => {
      // ws closes the socket itself (1009 for an oversized frame, 1002 for a protocol error).
      if (e.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
        limitHits.frameSize++;
        endedBecause(conn, 'frameTooLarge');
      }
      log('debug', 'websocket error', { remote: conn.remote, error: e });
    });
    socket.on('close', () => {
      iceRenewals.delete(conn);
      if (conn.admitted) {
        connections.delete(conn);
        addressCounts.remove(conn.addressKey);
      } else refusing.delete(conn);
      endedBecause(conn, 'client');
      leave(conn);
    });

    const refusal = closing ? null : admission(req, key);
    if (closing || refusal !== null) {
      refusing.add(conn);
      if (closing) {
        sendError(conn, 'shuttingDown', 'the tracker is restarting; reconnect');
        disconnect(conn, CLOSE_SERVICE_RESTART, 'service restart', 'shutdown');
        return;
      }
      if (refusal !== null) {
        countRefusal(refusal);
        // Debug only: a flood of refusals must not become a flood of log lines (the counters show it).
        log('debug', 'refused a connection', {
          remote: conn.remote,
          code: refusal.code,
          limit: refusal.limit,
        });
        // An error frame, then 1008: a page cannot read the HTTP status of a refused upgrade.
        sendError(conn, refusal.code, refusal.message);
        disconnect(conn, 1008, refusal.code, refusal.reason);
      }
      return;
    }
    conn.admitted = true;
    connections.add(conn);
    addressCounts.tryAdd(key, 0);

    socket.on('message', (data, isBinary) => {
      counters.framesIn++;
      // Frames still arriving after we closed (or refused) the connection are not answered.
      if (conn.closeReason !== null || !withinRate(conn)) return;
      enqueue(conn, () => onFrame(conn, data, isBinary));
    });
    socket.on('pong', () => {
      conn.missedPongs = 0;
    });
  }

  /** A connection over the per-address HTTP limit: told so and closed, before any request is read. */
  function refuseConnection(socket: Socket): void {
    socket.on('error', () => undefined);
    socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', () => {
      socket.destroy();
    });
  }

  /** A refused upgrade as plain HTTP (a 404 path, a flood, shutdown): nothing kept, nothing to close. */
  function rejectUpgrade(socket: Duplex, status: number, message: string): void {
    const body = JSON.stringify({ error: message });
    socket.on('error', () => undefined);
    socket.end(
      `HTTP/1.1 ${status} ${status === 404 ? 'Not Found' : status === 403 ? 'Forbidden' : 'Service Unavailable'}\r\n` +
        'Connection: close\r\nContent-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      () => {
        socket.destroy();
      },
    );
  }

  const server: Server = createServer(
    {
      headersTimeout: httpHeadersTimeoutMs,
      requestTimeout: Math.max(HTTP_REQUEST_TIMEOUT_MS, httpHeadersTimeoutMs),
      connectionsCheckingInterval: Math.min(HTTP_TIMEOUT_CHECK_MS, httpHeadersTimeoutMs),
    },
    (req, res) => {
      onRequest(req, res).catch((e: unknown) => {
        log('error', 'http handler fault', { url: req.url, error: e });
        if (!res.headersSent) sendStatus(res, 500, 'internal error');
        else res.destroy();
      });
    },
  );
  /** Open plain HTTP connections per address key (a socket leaves the count when it upgrades). */
  const httpAddressCounts = new AddressCounts();
  const httpAddressKeys = new WeakMap<Duplex, string>();
  server.on('connection', (socket: Socket) => {
    const key = addressKey(socket.remoteAddress);
    if (!httpAddressCounts.tryAdd(key, maxHttpPerAddress)) {
      limitHits.httpConnectionsPerAddress++;
      refuseConnection(socket);
      return;
    }
    httpAddressKeys.set(socket, key);
    socket.once('close', () => {
      releaseHttpConnection(socket);
    });
  });
  /** Takes a socket out of the HTTP count (once: on close, or when it becomes a WebSocket). */
  function releaseHttpConnection(socket: Duplex): void {
    const key = httpAddressKeys.get(socket);
    if (key === undefined) return;
    httpAddressKeys.delete(socket);
    httpAddressCounts.remove(key);
  }
  // Replaces Node's default answer to a client error, to count the header timeouts.
  server.on('clientError', (error: Error & { code?: string }, socket: Duplex) => {
    const timedOut = error.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    if (timedOut) limitHits.httpHeaderTime++;
    if (!socket.writable || error.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    socket.end(
      timedOut
        ? 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n'
        : 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n',
      () => {
        socket.destroy();
      },
    );
  });
  const wss = new WebSocketServer({
    noServer: true,
    clientTracking: false,
    maxPayload: WS_MAX_PAYLOAD_BYTES,
  });
  wss.on('error', (e) => {
    log('error', 'websocket server error', { error: e });
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // From here on the WebSocket limits count it.
    releaseHttpConnection(socket);
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/ws') {
      rejectUpgrade(socket, 404, 'the rendezvous WebSocket is at /ws');
      return;
    }
    if (closing) {
      errors.shuttingDown++;
      rejectUpgrade(socket, 503, 'the tracker is restarting; reconnect');
      return;
    }
    if (refusing.size >= MAX_REFUSING_SOCKETS) {
      // A flood: refuse what we would refuse anyway without accepting it first.
      const refusal = admission(req, addressKey(req.socket.remoteAddress));
      if (refusal !== null) {
        countRefusal(refusal);
        errors[refusal.code]++;
        rejectUpgrade(socket, refusal.httpStatus, refusal.message);
        return;
      }
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      onConnection(ws, req);
    });
  });

  // Each connection is pinged once per heartbeatMs, but not all in one go: pinging 20,000 sockets
  // (and reading their 20,000 pongs) in one loop blocked the event loop for 280–610 ms and made it the
  // p99 of signal relays (npm run bench:tracker, docs/results/tracker-bench). The round is cut into
  // up to HEARTBEAT_SLICES ticks of at least ~100 ms, each pinging its share of the connections.
  // A round starts every heartbeatSlices ticks, however few connections there are: starting one
  // whenever the last had pinged everyone pinged 4 connections every 4 ticks (1.2 s at the default
  // 15 s) and dropped a Node viewer whose event loop was busy for ~2.4 s (seen in scale-out.test.ts).
  const heartbeatSlices = Math.max(1, Math.min(HEARTBEAT_SLICES, Math.floor(heartbeatMs / 100)));
  let heartbeatRound: Connection[] = [];
  let heartbeatNext = 0;
  let heartbeatTick = 0;
  const heartbeat = setInterval(() => {
    if (heartbeatTick++ % heartbeatSlices === 0) {
      heartbeatRound = [...connections];
      heartbeatNext = 0;
    }
    const share = Math.ceil(heartbeatRound.length / heartbeatSlices);
    for (let k = 0; k < share && heartbeatNext < heartbeatRound.length; k++) {
      const conn = heartbeatRound[heartbeatNext++];
      if (conn === undefined || !connections.has(conn)) continue;
      if (conn.missedPongs >= 2) {
        log('info', 'dropping a peer that missed two pongs', {
          remote: conn.remote,
          peerId: conn.member?.peerId,
        });
        terminate(conn, 'heartbeat');
        continue;
      }
      conn.missedPongs++;
      if (conn.socket.readyState === WebSocket.OPEN) conn.socket.ping();
    }
  }, heartbeatMs / heartbeatSlices);
  // The server's sockets keep the process alive; the timer alone need not.
  heartbeat.unref();
  // Only with TURN credentials, which expire; STUN servers are handed out once, in the welcome.
  const iceSweep = iceExpires(ice) ? setInterval(renewIce, ICE_RENEW_SWEEP_MS) : null;
  iceSweep?.unref();

  // ───────────── HTTP side ─────────────

  function json(res: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(text),
      'Cache-Control': 'no-store',
    });
    res.end(text);
  }

  function debugSwarm(stream: string): DebugSwarm | null {
    const swarm = registry.get(stream);
    if (swarm === undefined) return null;
    return {
      stream: swarm.stream,
      sourceId: swarm.sourceId,
      sourceConnected: swarm.source !== null,
      members: [...swarm.members()].map((m) => ({
        peerId: m.peerId,
        role: m.role,
        joinedAtMs: m.joinedAtMs,
        report: m.report,
        connectivity: m.report?.connectivity ?? null,
      })),
      announcements: swarm.totalAnnouncements,
      lastAnnouncement: swarm.lastAnnouncement,
    };
  }

  function metrics(): TrackerMetrics {
    const members = { viewer: 0, source: 0 };
    for (const swarm of registry.all()) {
      members.viewer += swarm.viewerCount;
      if (swarm.source !== null) members.source++;
    }
    const o = originStats();
    return {
      sessions: connections.size,
      members,
      swarms: registry.size,
      ...counters,
      errors: { ...errors },
      limitHits: { ...limitHits },
      resumes: { ...resumes },
      disconnects: { ...disconnects },
      originMediaBytes: {
        source: originCarry.sourceBytes + o.sourceMediaBytes,
        viewers: originCarry.viewerBytes + o.viewerMediaBytes,
      },
      originMediaRequests: {
        source: originCarry.sourceRequests + o.sourceMediaRequests,
        viewers: originCarry.viewerRequests + o.viewerMediaRequests,
      },
      residentMemoryBytes: process.memoryUsage.rss(),
      uptimeS: (Date.now() - startedAtMs) / 1000,
      startTimeS: Math.floor(startedAtMs / 1000),
      cluster: cluster.stats(),
      peerLinks: connectivity.totals(latestConnectivity()),
    };
  }

  /** Every current member's latest connectivity (for the open-links gauge). */
  function* latestConnectivity(): Iterable<ConnectivityReport | undefined> {
    for (const swarm of registry.all()) for (const m of swarm.members()) yield m.report?.connectivity;
  }

  function originStats(): OriginStats {
    return origin?.snapshot() ?? emptyOriginStats();
  }

  function resetOriginStats(): void {
    if (origin === null) return;
    const o = origin.snapshot();
    originCarry.sourceBytes += o.sourceMediaBytes;
    originCarry.viewerBytes += o.viewerMediaBytes;
    originCarry.sourceRequests += o.sourceMediaRequests;
    originCarry.viewerRequests += o.viewerMediaRequests;
    origin.reset();
  }

  /** `Authorization: Bearer <broadcaster key>`, compared as digests in constant time. */
  function authorized(req: IncomingMessage): boolean {
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.headers.authorization ?? '');
    const presented = match?.[1];
    return presented !== undefined && timingSafeEqual(sha256(presented), keyDigest);
  }

  /** The read-only JSON views over HTTP (GET or HEAD), by exact path; /debug/* ones need the key. */
  const JSON_VIEWS: Readonly<Record<string, (() => unknown) | undefined>> = {
    // Still ok while Redis is unreachable: this process goes on serving its own members.
    '/healthz': () => {
      const { backend, connected } = cluster.stats();
      return {
        ok: true,
        uptimeMs: Date.now() - startedAtMs,
        connections: connections.size,
        swarms: registry.size,
        shuttingDown: closing,
        cluster: { backend, connected },
        ice: iceHealth(ice),
      };
    },
    '/debug/origin': originStats,
    '/debug/metrics': metrics,
    // This process's members only (each process shows its own).
    '/debug/swarms': () =>
      [...registry.all()].map((s) => ({
        stream: s.stream,
        sourceId: s.sourceId,
        sourceConnected: s.source !== null,
        viewers: s.viewerCount,
        announcements: s.totalAnnouncements,
      })),
  };

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const rawPath = (req.url ?? '/').split('?')[0] ?? '/';
    const method = req.method ?? 'GET';
    // Pages on other origins (a dev server, the broadcaster page) read the media and debug JSON.
    res.setHeader('Access-Control-Allow-Origin', '*');
    if (method === 'OPTIONS') {
      res.writeHead(204, {
        'Access-Control-Allow-Methods': 'GET, HEAD, POST, OPTIONS',
        'Access-Control-Allow-Headers': 'Range, X-Chunkycast-Role, Authorization',
        'Access-Control-Max-Age': '600',
      });
      res.end();
      return;
    }
    res.setHeader('Access-Control-Expose-Headers', 'Content-Length, Content-Range, Accept-Ranges');
    const readOnly = method === 'GET' || method === 'HEAD';

    if (rawPath === '/debug' || rawPath.startsWith('/debug/')) {
      if (!authorized(req)) {
        counters.debugAuthFailures++;
        log('debug', 'debug request without the broadcaster key', { url: rawPath });
        res.setHeader('WWW-Authenticate', 'Bearer realm="chunkycast-tracker"');
        json(res, 401, {
          error: 'unauthorized',
          message: '/debug/* needs the header "Authorization: Bearer <broadcaster key>"',
        });
        return;
      }
      if (rawPath === '/debug/origin/reset') {
        if (method !== 'POST') {
          methodNotAllowed(res, 'POST');
          return;
        }
        resetOriginStats();
        log('debug', 'origin counters reset');
        json(res, 200, { ok: true });
        return;
      }
    }
    if (rawPath === '/metrics') {
      if (!readOnly) {
        methodNotAllowed(res, 'GET, HEAD');
        return;
      }
      const text = prometheus();
      res.writeHead(200, {
        'Content-Type': PROMETHEUS_CONTENT_TYPE,
        'Content-Length': Buffer.byteLength(text),
        'Cache-Control': 'no-store',
      });
      res.end(text);
      return;
    }
    // Read-only JSON views: one method check, one answer each.
    const view = JSON_VIEWS[rawPath];
    if (view !== undefined) {
      if (!readOnly) {
        methodNotAllowed(res, 'GET, HEAD');
        return;
      }
      json(res, 200, view());
      return;
    }
    if (rawPath.startsWith('/debug/swarm/')) {
      if (!readOnly) {
        methodNotAllowed(res, 'GET, HEAD');
        return;
      }
      const stream = safeDecode(rawPath.slice('/debug/swarm/'.length));
      if (stream === null || !STREAM_ID_PATTERN.test(stream)) {
        json(res, 400, { error: 'bad stream id' });
        return;
      }
      const body = debugSwarm(stream);
      if (body === null) json(res, 404, { error: `no swarm for stream ${stream}` });
      else json(res, 200, body);
      return;
    }
    if (rawPath.startsWith('/live/')) {
      if (!readOnly) {
        methodNotAllowed(res, 'GET, HEAD');
        return;
      }
      if (origin === null) {
        sendStatus(res, 404, 'no origin directory configured');
        return;
      }
      return origin.serve(req, res, rawPath.slice('/live/'.length));
    }
    if (staticDir !== null && !rawPath.startsWith('/debug/')) {
      if (!readOnly) {
        methodNotAllowed(res, 'GET, HEAD');
        return;
      }
      return serveStatic(req, res, staticDir, rawPath);
    }
    sendStatus(res, 404);
  }

  function methodNotAllowed(res: ServerResponse, allow: string): void {
    res.setHeader('Allow', allow);
    sendStatus(res, 405);
  }

  function prometheus(): string {
    return renderPrometheus(metrics());
  }

  // ───────────── lifecycle ─────────────

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (e) {
    clearInterval(heartbeat);
    if (iceSweep !== null) clearInterval(iceSweep);
    await cluster.close();
    throw e;
  }
  server.on('error', (e) => {
    log('error', 'http server error', { error: e });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = urlHostFor(host);
  const url = `http://${urlHost}:${port}`;
  if (ice.stunUrls.length === 0 && ice.turnUrls.length === 0) log('warn', NO_ICE_WARNING, { url });

  let closed: Promise<void> | null = null;
  async function close(): Promise<void> {
    closing = true;
    clearInterval(heartbeat);
    if (iceSweep !== null) clearInterval(iceSweep);
    iceRenewals.clear();
    log('info', 'tracker closing: WebSockets closed with 1012, HTTP finishing', {
      sessions: connections.size,
      graceMs: closeGraceMs,
    });
    // Stops listening; resolves once every connection (in-flight HTTP included) has ended.
    const serverClosed = new Promise<void>((resolve) => {
      server.close(() => {
        resolve();
      });
    });
    const all = [...connections, ...refusing];
    const socketsClosed = Promise.all(
      all.map(
        (conn) =>
          new Promise<void>((resolve) => {
            if (conn.socket.readyState === WebSocket.CLOSED) {
              resolve();
              return;
            }
            conn.socket.once('close', () => {
              resolve();
            });
            disconnect(conn, CLOSE_SERVICE_RESTART, 'service restart', 'shutdown');
          }),
      ),
    );
    // Keep-alive HTTP connections become idle as their in-flight responses finish; close them then.
    server.closeIdleConnections();
    const idleSweep = setInterval(() => {
      server.closeIdleConnections();
    }, 50);
    let grace: NodeJS.Timeout | undefined;
    const timedOut = new Promise<void>((resolve) => {
      grace = setTimeout(resolve, closeGraceMs);
    });
    await Promise.race([Promise.all([socketsClosed, serverClosed]), timedOut]);
    clearTimeout(grace);
    clearInterval(idleSweep);
    // Whatever has not finished within the grace period is cut off.
    for (const conn of all) conn.socket.terminate();
    server.closeAllConnections();
    wss.close();
    await serverClosed;
    // Releases every member this process still holds, in one go.
    await cluster.close();
    log('info', 'tracker closed', { url });
  }

  return {
    url,
    wsUrl: `ws://${urlHost}:${port}/ws`,
    port,
    originStats,
    resetOriginStats,
    metrics,
    prometheus,
    debugSwarm,
    sourceIdOf: (stream) => sourceIdFor(trackerSecret, stream),
    close: () => (closed ??= close()),
  };
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

function rawLength(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((n, b) => n + b.length, 0);
  return data.byteLength;
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}

function safeDecode(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/** A wildcard bind is reached on loopback; an IPv6 literal needs brackets in a URL. */
function urlHostFor(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}
