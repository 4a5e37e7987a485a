/**
 * Connection admission and limits: which WebSockets become sessions (page origin, connections per
 * address and per process), which frames a session may send (message rate, bad frames), and how
 * many plain HTTP connections one address may hold and how long their headers may take. Every
 * refusal is counted in `limitHits` (or `errors`) and touches no other connection.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { RawData, WebSocket, WebSocketServer } from 'ws';
import type { TrackerErrorCode } from '@chunkycast/wire';
import { addressKey, AddressCounts, TokenBucket, type LimitKind } from '../limits.js';
import type { DisconnectReason } from '../metrics.js';
import type { Connection, TrackerContext } from './context.js';
import type { Connections } from './connections.js';
import type { Heartbeat } from './heartbeat.js';

/** "Service restart": clients reconnect (and resume) at once. */
export const CLOSE_SERVICE_RESTART = 1012;
/** "Policy violation": what a refused or misbehaving connection is closed with. */
const CLOSE_POLICY_VIOLATION = 1008;
/**
 * Refused sockets still being closed (each lives ≤ the close handshake). Beyond this, under a
 * connection flood, refusals are plain HTTP answers to the upgrade, which cost nothing to keep.
 */
const MAX_REFUSING_SOCKETS = 1024;
/** A page origin quoted in a refusal is cut to this length. */
const MAX_QUOTED_ORIGIN_CHARS = 200;
const HTTP_STATUS_TEXT: Readonly<Record<number, string>> = {
  403: 'Forbidden',
  404: 'Not Found',
  503: 'Service Unavailable',
};

/** Why a new WebSocket is refused before it is admitted. */
interface Refused {
  readonly code: 'originNotAllowed' | 'tooManyConnections';
  readonly message: string;
  readonly limit: LimitKind | null;
  readonly reason: DisconnectReason;
  readonly httpStatus: 403 | 503;
}

export interface AdmissionSettings {
  /** Page origins allowed to open /ws; null: any. */
  readonly allowedOrigins: ReadonlySet<string> | null;
  /** Open WebSockets in this tracker; 0 = no limit. */
  readonly maxConnections: number;
  /** Open WebSockets per address key; 0 = no limit. */
  readonly maxPerAddress: number;
  /** Frames per second per connection, sustained; 0 = no limit. */
  readonly ratePerSecond: number;
  readonly burst: number;
}

/** What the rest of the tracker does with an admitted connection. */
export interface ConnectionHooks {
  onMessage(conn: Connection, data: RawData, isBinary: boolean): void;
  /** The socket closed (either side): release what the connection held. */
  onClosed(conn: Connection): void;
}

/** The WebSocket side of admission: the upgrade, then the decision. */
export class Admission {
  constructor(
    private readonly context: TrackerContext,
    private readonly connections: Connections,
    private readonly heartbeat: Heartbeat,
    private readonly httpLimits: HttpConnectionLimits,
    private readonly settings: AdmissionSettings,
    private readonly hooks: ConnectionHooks,
  ) {}

  /** The server's 'upgrade': /ws only, refused cheaply during shutdown or a flood. */
  onUpgrade(wss: WebSocketServer, req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // From here on the WebSocket limits count it.
    this.httpLimits.release(socket);
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/ws') {
      rejectUpgrade(socket, 404, 'the rendezvous WebSocket is at /ws');
      return;
    }
    if (this.context.closing()) {
      this.context.counters.errors.shuttingDown++;
      rejectUpgrade(socket, 503, 'the tracker is restarting; reconnect');
      return;
    }
    if (this.connections.refusing.size >= MAX_REFUSING_SOCKETS) {
      // A flood: refuse what we would refuse anyway without accepting it first.
      const refusal = this.check(req, addressKey(req.socket.remoteAddress));
      if (refusal !== null) {
        this.countRefusal(refusal);
        this.context.counters.errors[refusal.code]++;
        rejectUpgrade(socket, refusal.httpStatus, refusal.message);
        return;
      }
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      this.onConnection(ws, req);
    });
  }

  private onConnection(socket: WebSocket, req: IncomingMessage): void {
    const { counters, log, now } = this.context;
    const { ratePerSecond, burst } = this.settings;
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
        counters.limitHits.frameSize++;
        this.connections.endedBecause(conn, 'frameTooLarge');
      }
      log('debug', 'websocket error', { remote: conn.remote, error: e });
    });
    socket.on('close', () => {
      this.heartbeat.remove(conn);
      this.connections.closed(conn);
      this.connections.endedBecause(conn, 'client');
      this.hooks.onClosed(conn);
    });

    const closing = this.context.closing();
    const refusal = closing ? null : this.check(req, key);
    if (closing || refusal !== null) {
      this.connections.refusing.add(conn);
      if (closing) {
        this.connections.sendError(conn, 'shuttingDown', 'the tracker is restarting; reconnect');
        this.connections.disconnect(conn, CLOSE_SERVICE_RESTART, 'service restart', 'shutdown');
        return;
      }
      if (refusal !== null) {
        this.countRefusal(refusal);
        // Debug only: a flood of refusals must not become a flood of log lines (the counters show it).
        log('debug', 'refused a connection', {
          remote: conn.remote,
          code: refusal.code,
          limit: refusal.limit,
        });
        // An error frame, then 1008: a page cannot read the HTTP status of a refused upgrade.
        this.connections.sendError(conn, refusal.code, refusal.message);
        this.connections.disconnect(conn, CLOSE_POLICY_VIOLATION, refusal.code, refusal.reason);
      }
      return;
    }
    this.connections.admit(conn);
    this.heartbeat.add(conn);

    socket.on('message', (data, isBinary) => {
      this.hooks.onMessage(conn, data, isBinary);
    });
    socket.on('pong', () => {
      conn.missedPongs = 0;
    });
  }

  /** Whether a new WebSocket from `req` may become a session, or why not. Reads, never counts. */
  private check(req: IncomingMessage, key: string): Refused | null {
    const { allowedOrigins, maxConnections, maxPerAddress } = this.settings;
    const pageOrigin = req.headers.origin;
    // No Origin header: not a browser page (the true source, a tool), which the list cannot be about.
    if (allowedOrigins !== null && pageOrigin !== undefined && !allowedOrigins.has(pageOrigin))
      return {
        code: 'originNotAllowed',
        message: `pages of ${pageOrigin.slice(0, MAX_QUOTED_ORIGIN_CHARS)} may not use this tracker`,
        limit: null,
        reason: 'originNotAllowed',
        httpStatus: 403,
      };
    if (maxConnections > 0 && this.connections.sessions.size >= maxConnections)
      return {
        code: 'tooManyConnections',
        message: `the tracker is full (${maxConnections} connections); try again later`,
        limit: 'connections',
        reason: 'tooManyConnections',
        httpStatus: 503,
      };
    if (maxPerAddress > 0 && this.connections.perAddress.count(key) >= maxPerAddress)
      return {
        code: 'tooManyConnections',
        message: `more than ${maxPerAddress} connections from one address`,
        limit: 'connectionsPerAddress',
        reason: 'tooManyConnections',
        httpStatus: 503,
      };
    return null;
  }

  private countRefusal(refusal: Refused): void {
    if (refusal.limit !== null) this.context.counters.limitHits[refusal.limit]++;
  }
}

export interface FrameLimitSettings {
  /** Frames per second per connection, sustained; 0 = no limit. */
  readonly ratePerSecond: number;
  readonly burst: number;
  /** Undecodable frames one socket may send before it is disconnected; 0 = no limit. */
  readonly maxBadFrames: number;
}

/** What one session may send: its message rate and its budget of bad frames. */
export class FrameLimits {
  constructor(
    private readonly context: TrackerContext,
    private readonly connections: Connections,
    private readonly settings: FrameLimitSettings,
  ) {}

  /**
   * The message rate, checked as a frame arrives (before it is queued or parsed, so a flood costs
   * little). False: the frame is dropped, and `answerInTurn` queues its `rateLimited` answer. The
   * true source is exempt: it holds the broadcaster key, and its signalling grows with the swarm's
   * churn.
   */
  withinRate(conn: Connection, answerInTurn: (task: () => void) => void): boolean {
    const { ratePerSecond, burst } = this.settings;
    const bucket = conn.bucket;
    if (bucket === null || conn.member?.role === 'source' || bucket.take(this.context.now())) return true;
    this.context.counters.limitHits.messageRate++;
    if (bucket.overflow > burst) {
      // Kept sending beyond the rate for as long as a whole burst: not a hiccup, abuse or a bug.
      this.context.log('warn', 'disconnecting a peer that keeps exceeding the message rate', {
        remote: conn.remote,
        peerId: conn.member?.peerId,
        ratePerSecond,
        burst,
      });
      this.connections.disconnect(conn, CLOSE_POLICY_VIOLATION, 'message rate limit exceeded', 'rateLimited');
    } else
      answerInTurn(() => {
        this.connections.sendError(
          conn,
          'rateLimited',
          `more than ${ratePerSecond} frames per second (bursts of ${burst}); this frame was dropped`,
        );
      });
    return false;
  }

  /** A frame that could not be taken: answered, and counted against the connection's budget. */
  badFrame(conn: Connection, code: TrackerErrorCode, message: string): void {
    const { limitHits } = this.context.counters;
    if (code === 'tooLarge') limitHits.frameSize++;
    this.connections.sendError(conn, code, message);
    conn.badFrames++;
    const max = this.settings.maxBadFrames;
    if (max > 0 && conn.badFrames >= max && conn.closeReason === null) {
      limitHits.badFrames++;
      this.context.log('warn', 'disconnecting a peer after too many bad frames', {
        remote: conn.remote,
        peerId: conn.member?.peerId,
        badFrames: conn.badFrames,
      });
      this.connections.disconnect(conn, CLOSE_POLICY_VIOLATION, 'too many bad frames', 'badFrames');
    }
  }
}

/**
 * Plain HTTP connections per address key (a socket leaves the count when it becomes a WebSocket),
 * and the answer to clients too slow with their headers (Node's headersTimeout sets the time).
 */
export class HttpConnectionLimits {
  private readonly perAddress = new AddressCounts();
  private readonly keyOf = new WeakMap<Duplex, string>();

  constructor(
    private readonly context: TrackerContext,
    /** 0 = no limit. */
    private readonly maxPerAddress: number,
  ) {}

  attach(server: Server): void {
    server.on('connection', (socket: Socket) => {
      const key = addressKey(socket.remoteAddress);
      if (!this.perAddress.tryAdd(key, this.maxPerAddress)) {
        this.context.counters.limitHits.httpConnectionsPerAddress++;
        refuseConnection(socket);
        return;
      }
      this.keyOf.set(socket, key);
      socket.once('close', () => {
        this.release(socket);
      });
    });
    // Replaces Node's default answer to a client error, to count the header timeouts.
    server.on('clientError', (error: Error & { code?: string }, socket: Duplex) => {
      const timedOut = error.code === 'ERR_HTTP_REQUEST_TIMEOUT';
      if (timedOut) this.context.counters.limitHits.httpHeaderTime++;
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
  }

  /** Takes a socket out of the count (once: on close, or when it becomes a WebSocket). */
  release(socket: Duplex): void {
    const key = this.keyOf.get(socket);
    if (key === undefined) return;
    this.keyOf.delete(socket);
    this.perAddress.remove(key);
  }
}

/** A connection over the per-address HTTP limit: told so and closed, before any request is read. */
function refuseConnection(socket: Socket): void {
  socket.on('error', () => undefined);
  socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', () => {
    socket.destroy();
  });
}

/** A refused upgrade as plain HTTP (a 404 path, a flood, shutdown): nothing kept, nothing to close. */
export function rejectUpgrade(socket: Duplex, status: 403 | 404 | 503, message: string): void {
  const body = JSON.stringify({ error: message });
  socket.on('error', () => undefined);
  socket.end(
    `HTTP/1.1 ${status} ${HTTP_STATUS_TEXT[status] ?? ''}\r\n` +
      'Connection: close\r\nContent-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    () => {
      socket.destroy();
    },
  );
}
