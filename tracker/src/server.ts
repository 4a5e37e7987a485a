/**
 * The tracker: one HTTP server carrying the rendezvous WebSocket (/ws), the HLS origin (/live/*),
 * health and metrics (/healthz, /metrics), the broadcaster's debug JSON (/debug/*, behind the
 * broadcaster key) and optionally the demo's files. It only introduces peers and relays their
 * signalling; media never passes through it.
 *
 * Peer ids, bootstrap samples, relays to members held elsewhere and announcements go through a
 * Cluster (cluster.ts): in memory for a single process (the default), or Redis (`redisUrl`) so that
 * several tracker processes serve one swarm. This process keeps its own connections and members.
 *
 * `createTracker` only resolves the options and wires the parts in server/ together:
 *   admission.ts      which connections and frames are taken (origins, connection and rate limits)
 *   heartbeat.ts      pings every socket once per period, drops those that stop answering
 *   frames.ts         a session's frames, in order, to the part that handles them
 *   joins.ts          join and resume, leave, a member's id taken over
 *   announcements.ts  the true source's signed announcements, and other processes'
 *   signalling.ts     bootstrap samples, signal relays, members' reports
 *   ice-renewal.ts    fresh TURN credentials before a peer's expire
 *   http-routes.ts    /metrics, /healthz, /debug/*, /live/*, static files
 *   views.ts          the metrics snapshot and the debug views
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, WebSocket } from 'ws';
import {
  CLOSE_REPLACED,
  MAX_TRACKER_FRAME_BYTES,
  type PeerId,
  type TrackerErrorCode,
} from '@chunkycast/wire';
import { silentLogger, type Logger } from './log.js';
import { checkIceSettings, DEFAULT_TURN_TTL_S, NO_ICE_WARNING, type IceSettings } from './ice.js';
import { importPublicKey } from './keys.js';
import {
  processStartTimeS,
  PROMETHEUS_CONTENT_TYPE,
  TrackerPrometheus,
  type TrackerMetrics,
} from './metrics.js';
import { DEFAULT_PART_TARGET_MS } from './ll-hls/playlist.js';
import { Origin, type OriginStats } from './origin.js';
import {
  MemoryCluster,
  type Cluster,
  type ClusterHandlers,
  type ClusterTiming,
  type MemoryHub,
} from './cluster.js';
import { connectRedisCluster } from './redis-cluster.js';
import { SwarmRegistry } from './swarm.js';
import { deriveTrackerSecret, sourceIdFor } from './tickets.js';
import { Admission, CLOSE_SERVICE_RESTART, FrameLimits, HttpConnectionLimits } from './server/admission.js';
import { Announcements } from './server/announcements.js';
import { Connections } from './server/connections.js';
import { TrackerCounters, type TrackerContext } from './server/context.js';
import { sha256 } from './server/digest.js';
import { Frames } from './server/frames.js';
import { Heartbeat } from './server/heartbeat.js';
import { HttpRoutes } from './server/http-routes.js';
import { IceRenewals } from './server/ice-renewal.js';
import { Joins } from './server/joins.js';
import { Signalling } from './server/signalling.js';
import { TrackerViews, type DebugSwarm } from './server/views.js';

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
  /**
   * Publish an LL-HLS view of a plain packager's playlists under /live/ (parts of the segment being
   * written, preload hint, blocking reload) with this part target; null or absent: files as they are.
   */
  readonly llHlsPartTargetMs?: number | null;
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
const S_PER_HOUR = 3600;
/**
 * Resume tickets are only handed out in `welcome`, so one must outlive the session it belongs to:
 * a viewer that has watched for hours must still get its id back when the tracker restarts. 12 h
 * covers a long event; a leaked ticket lets its holder take over only that one viewer's id.
 */
export const DEFAULT_RESUME_TICKET_TTL_S = 12 * S_PER_HOUR;
const DEFAULT_CLOSE_GRACE_MS = 3_000;
/** While closing, idle keep-alive HTTP connections are closed this often. */
const CLOSE_IDLE_SWEEP_MS = 50;
/**
 * ws itself closes (1009) beyond this. It is above the protocol's limit on purpose, so a frame
 * somewhat over MAX_TRACKER_FRAME_BYTES gets a readable `tooLarge` answer; four times the limit
 * also covers a frame of MAX_TRACKER_FRAME_BYTES characters at up to 3 UTF-8 bytes each.
 */
const WS_MAX_PAYLOAD_BYTES = 4 * MAX_TRACKER_FRAME_BYTES;
export { CLOSE_REPLACED, CLOSE_SERVICE_RESTART };

export type ErrorCounts = Record<TrackerErrorCode, number>;
export type { TrackerMetrics } from './metrics.js';
export type { DebugMember, DebugSwarm } from './server/views.js';

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
  prometheus(): Promise<string>;
  debugSwarm(stream: string): DebugSwarm | null;
  /** The id the true source of `stream` gets (deterministic for a given tracker secret). */
  sourceIdOf(stream: string): PeerId;
  /**
   * Stops accepting, closes every WebSocket with 1012 (clients reconnect and resume at once), lets
   * in-flight HTTP finish within the grace period, then closes the server. Idempotent.
   */
  close(): Promise<void>;
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
  const origin =
    options.originDir != null
      ? new Origin(options.originDir, {
          // Always followed, so the segment in progress is streamed to the true source (issue 14);
          // the LL-HLS playlist only with --ll-hls.
          llHls: {
            partTargetMs: options.llHlsPartTargetMs ?? DEFAULT_PART_TARGET_MS,
            publishParts: options.llHlsPartTargetMs != null,
            log: (level, message, fields) => {
              log(level, message, fields);
            },
          },
        })
      : null;

  // Every join, sample and relay goes through a Cluster, the single-process one included: one code
  // path. Its handlers reach the parts below, which need the cluster themselves: until they are
  // wired (the cluster may deliver while it starts), nothing here holds a member a message could be
  // for, so it is dropped as one for a member that left would be.
  let wired: ClusterHandlers | null = null;
  const clusterHandlers: ClusterHandlers = {
    onRemoteMessage: (...args) => wired?.onRemoteMessage(...args),
    onRemoteAnnouncement: (...args) => wired?.onRemoteAnnouncement(...args),
    onMemberLost: (...args) => wired?.onMemberLost(...args),
  };
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

  let closing = false;
  const context: TrackerContext = {
    log,
    now,
    counters: new TrackerCounters(),
    registry: new SwarmRegistry((stream) => sourceIdFor(trackerSecret, stream), now),
    cluster,
    closing: () => closing,
  };
  const connections = new Connections(context);
  const heartbeat = new Heartbeat(context, connections, heartbeatMs);
  const iceRenewals = new IceRenewals(context, connections, ice);
  const joins = new Joins(context, connections, iceRenewals, {
    trackerSecret,
    keyDigest,
    joinSecret: options.joinSecret ?? null,
    ticketTtlS,
    publicKeyBase64,
    ice,
  });
  const announcements = new Announcements(context, joins, verifyKey);
  const signalling = new Signalling(context, connections, joins);
  wired = {
    onRemoteMessage: (stream, to, message) => {
      signalling.onRemoteMessage(stream, to, message);
    },
    onRemoteAnnouncement: (a) => {
      announcements.onRemoteAnnouncement(a);
    },
    onMemberLost: (stream, peerId, reason) => {
      joins.onMemberLost(stream, peerId, reason);
    },
  };
  const frameLimits = new FrameLimits(context, connections, { ratePerSecond, burst, maxBadFrames });
  const frames = new Frames(context, connections, frameLimits, joins, announcements, signalling);
  const httpLimits = new HttpConnectionLimits(context, maxHttpPerAddress);
  const admission = new Admission(
    context,
    connections,
    heartbeat,
    httpLimits,
    {
      allowedOrigins: options.allowedOrigins == null ? null : new Set(options.allowedOrigins),
      maxConnections,
      maxPerAddress,
      ratePerSecond,
      burst,
    },
    {
      onMessage: (conn, data, isBinary) => {
        frames.onMessage(conn, data, isBinary);
      },
      onClosed: (conn) => {
        iceRenewals.forget(conn);
        joins.leave(conn);
      },
    },
  );
  const views = new TrackerViews(context, connections, signalling, origin, ice, await processStartTimeS());
  const exposition = new TrackerPrometheus(() => views.metrics());
  const prometheus = (): Promise<string> => exposition.text();
  const routes = new HttpRoutes(context, views, {
    keyDigest,
    origin,
    staticDir: options.staticDir ?? null,
    prometheus: async () => ({ text: await prometheus(), contentType: PROMETHEUS_CONTENT_TYPE }),
  });

  const server: Server = createServer(
    {
      headersTimeout: httpHeadersTimeoutMs,
      requestTimeout: Math.max(HTTP_REQUEST_TIMEOUT_MS, httpHeadersTimeoutMs),
      connectionsCheckingInterval: Math.min(HTTP_TIMEOUT_CHECK_MS, httpHeadersTimeoutMs),
    },
    (req, res) => {
      routes.handle(req, res);
    },
  );
  httpLimits.attach(server);
  const wss = new WebSocketServer({
    noServer: true,
    clientTracking: false,
    maxPayload: WS_MAX_PAYLOAD_BYTES,
  });
  wss.on('error', (e) => {
    log('error', 'websocket server error', { error: e });
  });
  server.on('upgrade', (req, socket, head) => {
    admission.onUpgrade(wss, req, socket, head);
  });

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
    heartbeat.stop();
    iceRenewals.stop();
    origin?.close();
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
    heartbeat.stop();
    iceRenewals.stop();
    // Held LL-HLS requests answer (or end) now instead of holding the grace period.
    origin?.close();
    log('info', 'tracker closing: WebSockets closed with 1012, HTTP finishing', {
      sessions: connections.sessions.size,
      graceMs: closeGraceMs,
    });
    // Stops listening; resolves once every connection (in-flight HTTP included) has ended.
    const serverClosed = new Promise<void>((resolve) => {
      server.close(() => {
        resolve();
      });
    });
    const all = [...connections.sessions, ...connections.refusing];
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
            connections.disconnect(conn, CLOSE_SERVICE_RESTART, 'service restart', 'shutdown');
          }),
      ),
    );
    // Keep-alive HTTP connections become idle as their in-flight responses finish; close them then.
    server.closeIdleConnections();
    const idleSweep = setInterval(() => {
      server.closeIdleConnections();
    }, CLOSE_IDLE_SWEEP_MS);
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
    originStats: () => views.originStats(),
    resetOriginStats: () => {
      views.resetOriginStats();
    },
    metrics: () => views.metrics(),
    prometheus,
    debugSwarm: (stream) => views.debugSwarm(stream),
    sourceIdOf: (stream) => sourceIdFor(trackerSecret, stream),
    close: () => (closed ??= close()),
  };
}

/** A wildcard bind is reached on loopback; an IPv6 literal needs brackets in a URL. */
function urlHostFor(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}
