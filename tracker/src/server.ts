/**
 * The tracker: one HTTP server carrying the rendezvous WebSocket (/ws), the HLS origin (/live/*),
 * debug JSON (/healthz, /debug/*) and optionally the demo's files. It only introduces peers and
 * relays their signalling; media never passes through it.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, WebSocket, type RawData } from 'ws';
import {
  announcementSigningBytes,
  decodeClientMessage,
  encodeTrackerMessage,
  MAX_TRACKER_FRAME_BYTES,
  STREAM_ID_PATTERN,
  type ClientMessage,
  type PeerId,
  type ServerMessage,
  type SignedAnnouncement,
  TRACKER_ERROR_CODES,
  type TrackerErrorCode,
} from '@chunkycast/wire';
import { silentLogger, type Logger } from './log.js';
import { importPublicKey } from './keys.js';
import { emptyOriginStats, Origin, sendStatus, serveStatic, type OriginStats } from './origin.js';
import { SwarmRegistry, type Member, type Swarm } from './swarm.js';

export interface TrackerOptions {
  /** Address to bind; 127.0.0.1 by default. */
  readonly host?: string;
  /** 0 (the default here) = any free port. */
  readonly port?: number;
  /** The secret a peer must present to join as a stream's true source. */
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
  /** Undecodable frames one socket may send before it is disconnected (1008). */
  readonly maxBadFrames?: number;
  /** How long close() lets clients finish their closing handshake before cutting them off. */
  readonly closeGraceMs?: number;
}

export const DEFAULT_HEARTBEAT_MS = 15_000;
export const DEFAULT_MAX_BAD_FRAMES = 100;
const DEFAULT_CLOSE_GRACE_MS = 2_000;
/**
 * ws itself closes (1009) beyond this. It is above the protocol's limit on purpose, so a frame
 * somewhat over MAX_TRACKER_FRAME_BYTES gets a readable `tooLarge` answer; four times the limit
 * also covers a frame of MAX_TRACKER_FRAME_BYTES characters at up to 3 UTF-8 bytes each.
 */
const WS_MAX_PAYLOAD_BYTES = 4 * MAX_TRACKER_FRAME_BYTES;
/** A peer that lets this much queue up unread is not keeping up with control traffic; drop it. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

export type ErrorCounts = Record<TrackerErrorCode, number>;

export interface TrackerMetrics {
  readonly connections: number;
  readonly connectionsTotal: number;
  readonly swarms: number;
  readonly framesIn: number;
  readonly framesOut: number;
  readonly joins: number;
  readonly signalsRelayed: number;
  readonly announcements: number;
  /** Error frames sent, by code. */
  readonly errors: ErrorCounts;
  readonly badFrameDisconnects: number;
  readonly heartbeatTerminations: number;
  readonly slowConsumerTerminations: number;
  readonly handlerFaults: number;
}

export interface DebugMember {
  readonly peerId: PeerId;
  readonly role: 'viewer' | 'source';
  readonly joinedAtMs: number;
  readonly report: Member['report'];
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
  debugSwarm(stream: string): DebugSwarm | null;
  /** Stops accepting, closes every WebSocket with 1001, then closes the server. Idempotent. */
  close(): Promise<void>;
}

/** One WebSocket and what it has joined. */
interface Connection {
  readonly socket: WebSocket;
  readonly remote: string;
  member: Member | null;
  badFrames: number;
  missedPongs: number;
  /** Frames are handled one after another even when one awaits (signature checks), keeping order. */
  queue: Promise<void>;
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

export async function createTracker(options: TrackerOptions): Promise<Tracker> {
  const log = options.log ?? silentLogger;
  const host = options.host ?? '127.0.0.1';
  const heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  const maxBadFrames = options.maxBadFrames ?? DEFAULT_MAX_BAD_FRAMES;
  const closeGraceMs = options.closeGraceMs ?? DEFAULT_CLOSE_GRACE_MS;
  const publicKeyBase64 = options.publicKey ?? null;
  const verifyKey = publicKeyBase64 === null ? null : await importPublicKey(publicKeyBase64);
  // Compared as digests: equal lengths for timingSafeEqual whatever was sent, and no length leak.
  const keyDigest = sha256(options.broadcasterKey);
  const origin = options.originDir != null ? new Origin(options.originDir) : null;
  const staticDir = options.staticDir ?? null;
  const startedAtMs = Date.now();

  const registry = new SwarmRegistry();
  const connections = new Set<Connection>();
  const counters = {
    connectionsTotal: 0,
    framesIn: 0,
    framesOut: 0,
    joins: 0,
    signalsRelayed: 0,
    announcements: 0,
    badFrameDisconnects: 0,
    heartbeatTerminations: 0,
    slowConsumerTerminations: 0,
    handlerFaults: 0,
  };
  const errors = Object.fromEntries(TRACKER_ERROR_CODES.map((c) => [c, 0])) as ErrorCounts;
  let closing = false;

  // ───────────── WebSocket side ─────────────

  function send(conn: Connection, message: ServerMessage): void {
    const socket = conn.socket;
    if (socket.readyState !== WebSocket.OPEN) return;
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
      counters.slowConsumerTerminations++;
      log('warn', 'dropping a peer that does not read its socket', {
        remote: conn.remote,
        peerId: conn.member?.peerId,
        bufferedBytes: socket.bufferedAmount,
      });
      socket.terminate();
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
    sendError(conn, code, message);
    conn.badFrames++;
    if (conn.badFrames >= maxBadFrames && conn.socket.readyState === WebSocket.OPEN) {
      counters.badFrameDisconnects++;
      log('warn', 'disconnecting a peer after too many bad frames', {
        remote: conn.remote,
        peerId: conn.member?.peerId,
        badFrames: conn.badFrames,
      });
      conn.socket.close(1008, 'too many bad frames');
    }
  }

  function welcome(conn: Connection, member: Member, swarm: Swarm): void {
    send(conn, {
      type: 'welcome',
      peerId: member.peerId,
      sourceId: swarm.sourceId,
      stream: swarm.stream,
      publicKey: publicKeyBase64,
      announcements: swarm.recentAnnouncements(),
      resume: null,
      resumed: false,
    });
  }

  function makeMember(conn: Connection, peerId: PeerId, role: Member['role'], stream: string): Member {
    return {
      peerId,
      role,
      stream,
      joinedAtMs: Date.now(),
      report: null,
      send: (message) => {
        send(conn, message);
      },
    };
  }

  function join(conn: Connection, message: Extract<ClientMessage, { type: 'join' }>): void {
    if (conn.member !== null) throw new Refusal('alreadyJoined', `already joined ${conn.member.stream}`);
    if (message.role === 'source') {
      if (message.key === undefined)
        throw new Refusal('badKey', 'joining as source needs the broadcaster key');
      if (!timingSafeEqual(sha256(message.key), keyDigest)) {
        log('warn', 'source join with a wrong broadcaster key', {
          remote: conn.remote,
          stream: message.stream,
        });
        throw new Refusal('badKey', 'the broadcaster key is wrong');
      }
      const swarm = registry.getOrCreate(message.stream);
      if (swarm.source !== null)
        throw new Refusal('sourcePresent', `stream ${message.stream} already has a source`);
      const member = makeMember(conn, swarm.sourceId, 'source', swarm.stream);
      swarm.source = member;
      conn.member = member;
      counters.joins++;
      log('info', 'source joined', { stream: swarm.stream, peerId: member.peerId, remote: conn.remote });
      welcome(conn, member, swarm);
      return;
    }
    const swarm = registry.getOrCreate(message.stream);
    const member = makeMember(conn, registry.ids.allocate(), 'viewer', swarm.stream);
    swarm.addViewer(member);
    conn.member = member;
    counters.joins++;
    log('debug', 'viewer joined', {
      stream: swarm.stream,
      peerId: member.peerId,
      viewers: swarm.viewerCount,
    });
    welcome(conn, member, swarm);
  }

  function leave(conn: Connection): void {
    const member = conn.member;
    if (member === null) return;
    conn.member = null;
    registry.leave(member);
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
    if (verifyKey !== null) {
      const signature = Buffer.from(a.signature, 'base64');
      const valid =
        signature.length === 64 &&
        (await crypto.subtle.verify(
          'Ed25519',
          verifyKey,
          signature,
          new Uint8Array(announcementSigningBytes(a)),
        ));
      if (!valid) throw new Refusal('invalidField', 'announcement signature does not verify');
    }
    // The source may have left while the signature was being checked.
    if (swarm.source !== member) return;
    swarm.addAnnouncement(a);
    counters.announcements++;
    for (const viewer of swarm.viewerMembers()) viewer.send({ type: 'announce', announcement: a });
  }

  async function handle(conn: Connection, message: ClientMessage): Promise<void> {
    if (closing) throw new Refusal('shuttingDown', 'the tracker is shutting down');
    if (message.type === 'join') {
      join(conn, message);
      return;
    }
    switch (message.type) {
      case 'bootstrap': {
        const { member, swarm } = joined(conn);
        const exclude = member.role === 'source' ? null : member.peerId;
        send(conn, { type: 'peers', peers: swarm.sampleViewers(message.count, exclude) });
        return;
      }
      case 'signal': {
        const { member, swarm } = joined(conn);
        if (message.to === member.peerId) throw new Refusal('invalidField', 'cannot signal yourself');
        const target = swarm.get(message.to);
        if (target === undefined)
          throw new Refusal('unknownPeer', `peer ${message.to} is not in stream ${swarm.stream}`);
        target.send({ type: 'signal', from: member.peerId, data: message.data });
        counters.signalsRelayed++;
        return;
      }
      case 'announce':
        await announce(conn, message.announcement);
        return;
      case 'report': {
        joined(conn).member.report = message.report;
        return;
      }
      case 'leave':
        joined(conn);
        leave(conn);
        return;
    }
  }

  async function onFrame(conn: Connection, data: RawData, isBinary: boolean): Promise<void> {
    counters.framesIn++;
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

  const server: Server = createServer((req, res) => {
    onRequest(req, res).catch((e: unknown) => {
      log('error', 'http handler fault', { url: req.url, error: e });
      if (!res.headersSent) sendStatus(res, 500, 'internal error');
      else res.destroy();
    });
  });
  const wss = new WebSocketServer({ server, path: '/ws', maxPayload: WS_MAX_PAYLOAD_BYTES });
  wss.on('error', (e) => {
    log('error', 'websocket server error', { error: e });
  });

  wss.on('connection', (socket, req) => {
    const conn: Connection = {
      socket,
      remote: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? 0}`,
      member: null,
      badFrames: 0,
      missedPongs: 0,
      queue: Promise.resolve(),
    };
    counters.connectionsTotal++;
    connections.add(conn);
    if (closing) {
      socket.close(1001, 'tracker shutting down');
      return;
    }
    socket.on('message', (data, isBinary) => {
      conn.queue = conn.queue
        .then(() => onFrame(conn, data, isBinary))
        .catch((e: unknown) => {
          // A bug here must cost one frame, never the process or the other peers.
          counters.handlerFaults++;
          log('error', 'handler fault', { remote: conn.remote, error: e });
        });
    });
    socket.on('pong', () => {
      conn.missedPongs = 0;
    });
    socket.on('error', (e) => {
      // ws closes the socket itself (e.g. 1009 for an oversized frame); just record why.
      log('debug', 'websocket error', { remote: conn.remote, error: e });
    });
    socket.on('close', () => {
      connections.delete(conn);
      leave(conn);
    });
  });

  const heartbeat = setInterval(() => {
    for (const conn of connections) {
      if (conn.missedPongs >= 2) {
        counters.heartbeatTerminations++;
        log('info', 'dropping a peer that missed two pongs', {
          remote: conn.remote,
          peerId: conn.member?.peerId,
        });
        conn.socket.terminate();
        continue;
      }
      conn.missedPongs++;
      if (conn.socket.readyState === WebSocket.OPEN) conn.socket.ping();
    }
  }, heartbeatMs);
  // The server's sockets keep the process alive; the timer alone need not.
  heartbeat.unref();

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
      })),
      announcements: swarm.totalAnnouncements,
      lastAnnouncement: swarm.lastAnnouncement,
    };
  }

  function metrics(): TrackerMetrics {
    return { ...counters, connections: connections.size, swarms: registry.size, errors: { ...errors } };
  }

  function originStats(): OriginStats {
    return origin?.snapshot() ?? emptyOriginStats();
  }

  /** The read-only JSON views over HTTP (GET or HEAD), by exact path. */
  const JSON_VIEWS: Readonly<Record<string, (() => unknown) | undefined>> = {
    '/healthz': () => ({
      ok: true,
      uptimeMs: Date.now() - startedAtMs,
      connections: connections.size,
      swarms: registry.size,
      shuttingDown: closing,
    }),
    '/debug/origin': originStats,
    '/debug/metrics': metrics,
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
        'Access-Control-Allow-Headers': 'Range, X-Chunkycast-Role',
        'Access-Control-Max-Age': '600',
      });
      res.end();
      return;
    }
    res.setHeader('Access-Control-Expose-Headers', 'Content-Length, Content-Range, Accept-Ranges');

    if (rawPath === '/debug/origin/reset') {
      if (method !== 'POST') {
        methodNotAllowed(res, 'POST');
        return;
      }
      origin?.reset();
      log('debug', 'origin counters reset');
      json(res, 200, { ok: true });
      return;
    }
    const readOnly = method === 'GET' || method === 'HEAD';
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
    if (staticDir !== null) {
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

  // ───────────── lifecycle ─────────────

  await new Promise<void>((resolve, reject) => {
    const onError = (e: Error): void => {
      clearInterval(heartbeat);
      reject(e);
    };
    server.once('error', onError);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  server.on('error', (e) => {
    log('error', 'http server error', { error: e });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = urlHostFor(host);
  const url = `http://${urlHost}:${port}`;

  let closed: Promise<void> | null = null;
  async function close(): Promise<void> {
    closing = true;
    clearInterval(heartbeat);
    const serverClosed = new Promise<void>((resolve) => {
      server.close(() => {
        resolve();
      });
    });
    server.closeIdleConnections();
    const sockets = [...connections].map((c) => c.socket);
    const allClosed = Promise.all(
      sockets.map(
        (socket) =>
          new Promise<void>((resolve) => {
            if (socket.readyState === WebSocket.CLOSED) {
              resolve();
              return;
            }
            socket.once('close', () => {
              resolve();
            });
            socket.close(1001, 'tracker shutting down');
          }),
      ),
    );
    let grace: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      grace = setTimeout(() => {
        resolve(true);
      }, closeGraceMs);
    });
    const late = await Promise.race([allClosed.then(() => false), timedOut]);
    clearTimeout(grace);
    if (late)
      for (const socket of sockets) {
        // A client that never answers the close handshake must not hold the shutdown.
        socket.terminate();
      }
    wss.close();
    server.closeAllConnections();
    await serverClosed;
    log('info', 'tracker closed', { url });
  }

  return {
    url,
    wsUrl: `ws://${urlHost}:${port}/ws`,
    port,
    originStats,
    resetOriginStats: () => origin?.reset(),
    metrics,
    debugSwarm,
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
