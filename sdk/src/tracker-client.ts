import { createRandom } from '@chunkycast/engine';
import {
  decodeServerMessage,
  encodeTrackerMessage,
  type ClientMessage,
  type IceConfig,
  type PeerId,
  type PeerRole,
  type ServerMessage,
  type TrackerErrorCode,
  CLOSE_REPLACED,
} from '@chunkycast/wire';
import { MeshError, type TrackerConnectionState } from './types.js';
import { unreachable } from './unreachable.js';

/** The part of the WebSocket API we use: the browser's, or `ws` in Node (same shape). */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
}
export type WebSocketFactory = (url: string) => WebSocketLike;

const OPEN = 1;
/** WebSocket close code: normal closure (RFC 6455 §7.4.1). */
const NORMAL_CLOSURE = 1000;
/** Re-exported for hosts that watch close codes; its meaning is in wire. */
export { CLOSE_REPLACED };

/** Time and timers, injectable so tests drive reconnection by hand instead of sleeping. */
export interface TrackerClock {
  /** Monotonic milliseconds. */
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** performance.now() and the runtime's timers. */
export const SYSTEM_CLOCK: TrackerClock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
};

/**
 * How a client that lost its tracker tries again. Delays grow exponentially from `initialDelayMs`
 * up to `maxDelayMs`, each drawn uniformly from the upper half of its step ("equal jitter"), so a
 * whole swarm cut off by one tracker restart does not come back in the same millisecond.
 */
export interface ReconnectPolicy {
  /** False: a lost tracker stays lost (the old behaviour). */
  readonly enabled: boolean;
  /**
   * First retry after a loss, in [initialDelayMs/2, initialDelayMs]. Small: a tracker that closed
   * with 1012 (restart) or a blip of the network is usually back within a second.
   */
  readonly initialDelayMs: number;
  readonly multiplier: number;
  /**
   * Cap while the outage is young. With 200 ms, ×2, 2 s the attempts fall at most 0.2, 0.6, 1.4, 3.0,
   * 5.0 s after the loss: a tracker back within 3 s is reached within 5 s.
   */
  readonly maxDelayMs: number;
  /** After this long without a tracker the cap rises: a tracker down for long is not hammered. */
  readonly longOutageAfterMs: number;
  readonly longOutageMaxDelayMs: number;
  /** One attempt (open + join) that gets no welcome in this time is abandoned. */
  readonly attemptTimeoutMs: number;
  /**
   * A connection that lasted this long resets the backoff. One that dies sooner (a tracker that
   * accepts and drops us again) continues the schedule where it was, never a tight loop.
   */
  readonly stableAfterMs: number;
}

export const DEFAULT_RECONNECT_POLICY: ReconnectPolicy = {
  enabled: true,
  initialDelayMs: 200,
  multiplier: 2,
  maxDelayMs: 2000,
  longOutageAfterMs: 30_000,
  longOutageMaxDelayMs: 15_000,
  attemptTimeoutMs: 5000,
  stableAfterMs: 5000,
};

/**
 * Delay before reconnect attempt `attempt` (1 = the first after the loss) when the tracker has been
 * gone for `outageMs`; `random01` is a draw in [0, 1). Pure, so the schedule is testable.
 */
export function reconnectDelayMs(
  attempt: number,
  outageMs: number,
  policy: ReconnectPolicy,
  random01: number,
): number {
  const cap = outageMs >= policy.longOutageAfterMs ? policy.longOutageMaxDelayMs : policy.maxDelayMs;
  const step = Math.min(
    cap,
    policy.initialDelayMs * policy.multiplier ** Math.min(30, Math.max(0, attempt - 1)),
  );
  return Math.round(step / 2 + (Math.min(Math.max(random01, 0), 1) * step) / 2);
}

/**
 * Signalling queued while the tracker is away, at most: an SDP is 0.5–3 KB, so this bounds the
 * queue near 200 KB; a dialling burst larger than this is stale by the time it could be sent.
 */
export const MAX_QUEUED_SIGNALS = 64;
/**
 * A queued signal older than this is dropped instead of sent: the dialling side gives a link 8 s
 * (MeshNode's CONNECT_TIMEOUT_MS), so an offer or answer this late cannot complete in time.
 */
export const MAX_QUEUED_SIGNAL_AGE_MS = 6000;
/**
 * The first join's wait for a welcome (default of `joinTimeoutMs`). Longer than a reconnection
 * attempt's (`attemptTimeoutMs`): the first join is not retried, and failing it leaves the viewer on
 * the origin only for the rest of the session.
 */
const DEFAULT_JOIN_TIMEOUT_MS = 10_000;
/** Announcements queued while away (the source): the tracker keeps no more than 16 for joiners anyway. */
const MAX_QUEUED_ANNOUNCEMENTS = 16;

/**
 * Refusals of a join that no retry can fix: the credentials or the page's origin are wrong, or our
 * own join is malformed. Others (rateLimited, tooManyConnections, shuttingDown, sourcePresent while
 * the tracker still holds our old connection, …) are worth another attempt.
 */
const PERMANENT_JOIN_REFUSALS: ReadonlySet<TrackerErrorCode> = new Set<TrackerErrorCode>([
  'badToken',
  'badKey',
  'originNotAllowed',
  'forbidden',
  'malformed',
  'tooLarge',
  'unknownType',
  'invalidField',
  'alreadyJoined',
]);
/** Permanent whatever else the join carried: a refusal of the credentials themselves. */
const CREDENTIAL_REFUSALS: ReadonlySet<TrackerErrorCode> = new Set<TrackerErrorCode>([
  'badToken',
  'badKey',
  'originNotAllowed',
]);

export interface TrackerClientOptions {
  readonly url: string;
  readonly stream: string;
  readonly role: PeerRole;
  /** The broadcaster key (source role only). */
  readonly key?: string;
  /** A viewer join token, when the tracker requires one. */
  readonly token?: string;
  /** Default: the global WebSocket (browsers, Node ≥ 22); pass `ws` in older Node. */
  readonly createSocket?: WebSocketFactory;
  /** The first join that gets no welcome within this time fails (default DEFAULT_JOIN_TIMEOUT_MS). */
  readonly joinTimeoutMs?: number;
  /** Reconnection after a lost tracker (default DEFAULT_RECONNECT_POLICY); false: none. */
  readonly reconnect?: Partial<ReconnectPolicy> | false;
  readonly clock?: TrackerClock;
  /** Draws in [0, 1) for the backoff's jitter; default a PRNG seeded from crypto. */
  readonly random?: () => number;
}

export type Welcome = Extract<ServerMessage, { type: 'welcome' }>;

/**
 * `idle` → join() → `connecting` → welcome → `connected` ⇄ `reconnecting` (lost, trying again);
 * `failed` (the first join failed, or a retry was refused for good) and `closed` (by us) are final.
 */
export type TrackerState = TrackerConnectionState;

export interface TrackerDisconnect {
  readonly code: number;
  readonly reason: string;
}

export interface TrackerReconnect {
  /** The tracker gave us our old peer id back: our WebRTC links and tree places stay valid. */
  readonly peerIdKept: boolean;
  /** The tracker honoured our resume ticket. */
  readonly resumed: boolean;
  readonly previousPeerId: PeerId;
  readonly peerId: PeerId;
  /** From the socket's close to the new welcome. */
  readonly outageMs: number;
  /** Attempts this outage took (the successful one included). */
  readonly attempts: number;
}

export interface TrackerClientStats {
  readonly state: TrackerState;
  readonly peerId: PeerId | null;
  /** Welcomes after a loss. */
  readonly reconnects: number;
  /** Of those, welcomes that honoured our resume ticket. */
  readonly resumedReconnects: number;
  /** Of those, welcomes that gave us a different peer id. */
  readonly peerIdChanges: number;
  /** Time without a tracker since the first welcome, the current outage included. */
  readonly disconnectedMs: number;
  /** The last finished outage (close → welcome), null before any. */
  readonly lastOutageMs: number | null;
  /** Attempts made in the current outage (0 when connected). */
  readonly attempts: number;
  readonly queuedMessages: number;
  /** Signals dropped: the oldest beyond MAX_QUEUED_SIGNALS, stale ones, or all of them after an id change. */
  readonly signalsDropped: number;
  readonly announcementsDropped: number;
}

interface QueuedSignal {
  readonly message: Extract<ClientMessage, { type: 'signal' }>;
  readonly queuedAt: number;
}

/**
 * One peer's connection to the rendezvous server: join, then a stream of validated server messages.
 * Every frame from the tracker is decoded by the wire package; a bad one is reported and dropped.
 *
 * When the socket closes for any reason but our own `close()` (1012 tracker restart, 1001 going
 * away, 1006 abnormal, an error), it reconnects by itself with jittered exponential backoff and
 * joins again with the last welcome's resume ticket, asking for the same peer id. Meanwhile
 * `send()` queues what is worth sending late — signalling (bounded, oldest dropped), announcements
 * (bounded), the latest bootstrap request — and drops reports. The queue is sent right after the
 * next welcome; signals are dropped instead if that welcome gives us another peer id (they belong
 * to links of the old identity). A refusal no retry can fix (badToken, badKey, originNotAllowed, …)
 * ends it: state `failed`, `onFatal`.
 */
export class TrackerClient {
  private socket: WebSocketLike | null = null;
  /** A welcome arrived on the current socket. */
  private joinedOnSocket = false;
  private stateValue: TrackerState = 'idle';
  private pendingJoin: { resolve: (w: Welcome) => void; reject: (e: MeshError) => void } | null = null;
  private attemptTimer: unknown = null;
  private retryTimer: unknown = null;
  private peerIdValue: PeerId | null = null;
  private resumeTicket: string | null = null;
  private iceValue: IceConfig | null = null;
  /** When the current outage began (clock ms), null while connected. */
  private lostAt: number | null = null;
  private joinedAt: number | null = null;
  private attempt = 0;
  private disconnectedTotalMs = 0;
  private lastOutage: number | null = null;
  private reconnectCount = 0;
  private resumedCount = 0;
  private idChanges = 0;
  private signalsDroppedCount = 0;
  private announcementsDroppedCount = 0;
  private queuedSignals: QueuedSignal[] = [];
  private queuedAnnouncements: Extract<ClientMessage, { type: 'announce' }>[] = [];
  private queuedBootstrap = 0;
  private readonly policy: ReconnectPolicy;
  private readonly clock: TrackerClock;
  private readonly random: () => number;

  /** Validated messages after the first welcome, later welcomes (after a reconnect) included. */
  onMessage: (message: ServerMessage) => void = () => undefined;
  /** A bad frame from the tracker (dropped). */
  onProblem: (error: MeshError) => void = () => undefined;
  /** The tracker was lost after a welcome; reconnection starts. */
  onDisconnected: (detail: TrackerDisconnect) => void = () => undefined;
  /** A welcome after a loss; called before that welcome goes to onMessage. */
  onReconnected: (detail: TrackerReconnect) => void = () => undefined;
  /** A retry was refused for good (bad credentials, origin not allowed): no more attempts. */
  onFatal: (error: MeshError) => void = () => undefined;
  /** The client is finished: closed by us, or failed for good. */
  onClose: () => void = () => undefined;

  constructor(private readonly options: TrackerClientOptions) {
    this.policy =
      options.reconnect === false
        ? { ...DEFAULT_RECONNECT_POLICY, enabled: false }
        : { ...DEFAULT_RECONNECT_POLICY, ...options.reconnect };
    this.clock = options.clock ?? SYSTEM_CLOCK;
    if (options.random !== undefined) this.random = options.random;
    else {
      const prng = createRandom(crypto.getRandomValues(new Uint32Array(1))[0] ?? 1);
      this.random = () => prng.nextFloat();
    }
  }

  /** Joined: the current socket got its welcome. */
  get connected(): boolean {
    return this.stateValue === 'connected';
  }

  get state(): TrackerState {
    return this.stateValue;
  }

  get peerId(): PeerId | null {
    return this.peerIdValue;
  }

  /**
   * The STUN/TURN servers the tracker gave most recently: the last welcome's, or a later `ice` frame's
   * (TURN credentials renewed before they expire). Null before the first welcome. Kept through an
   * outage: connections made meanwhile use the last ones.
   */
  get ice(): IceConfig | null {
    return this.iceValue;
  }

  stats(): TrackerClientStats {
    const current = this.lostAt === null ? 0 : this.clock.now() - this.lostAt;
    return {
      state: this.stateValue,
      peerId: this.peerIdValue,
      reconnects: this.reconnectCount,
      resumedReconnects: this.resumedCount,
      peerIdChanges: this.idChanges,
      disconnectedMs: Math.round(this.disconnectedTotalMs + current),
      lastOutageMs: this.lastOutage === null ? null : Math.round(this.lastOutage),
      attempts: this.stateValue === 'reconnecting' ? this.attempt : 0,
      queuedMessages:
        this.queuedSignals.length + this.queuedAnnouncements.length + (this.queuedBootstrap > 0 ? 1 : 0),
      signalsDropped: this.signalsDroppedCount,
      announcementsDropped: this.announcementsDroppedCount,
    };
  }

  /** Opens the socket and joins; resolves with the first welcome, rejects with a MeshError. */
  join(): Promise<Welcome> {
    if (this.stateValue !== 'idle')
      return Promise.reject(new MeshError('config', `join() on a tracker client that is ${this.stateValue}`));
    this.stateValue = 'connecting';
    return new Promise<Welcome>((resolve, reject) => {
      this.pendingJoin = { resolve, reject };
      this.openSocket();
    });
  }

  /**
   * Sends now when joined. While (re)connecting: signals, announcements and bootstrap requests are
   * queued for the next welcome (see the class comment); anything else is dropped.
   */
  send(message: ClientMessage): void {
    const socket = this.socket;
    if (this.stateValue === 'connected' && socket?.readyState === OPEN) {
      socket.send(encodeTrackerMessage(message));
      return;
    }
    if (
      this.stateValue !== 'connecting' &&
      this.stateValue !== 'reconnecting' &&
      this.stateValue !== 'connected'
    )
      return;
    switch (message.type) {
      case 'signal':
        this.queuedSignals.push({ message, queuedAt: this.clock.now() });
        if (this.queuedSignals.length > MAX_QUEUED_SIGNALS) {
          this.queuedSignals.shift();
          this.signalsDroppedCount++;
        }
        return;
      case 'announce':
        this.queuedAnnouncements.push(message);
        if (this.queuedAnnouncements.length > MAX_QUEUED_ANNOUNCEMENTS) {
          this.queuedAnnouncements.shift();
          this.announcementsDroppedCount++;
        }
        return;
      case 'bootstrap':
        // Only the latest need matters: the answer is a fresh sample either way.
        this.queuedBootstrap = Math.max(this.queuedBootstrap, message.count);
        return;
      case 'report':
        return; // periodic: the next one is 2 s away
      case 'join':
      case 'leave':
        return; // the client's own, sent by it when the socket opens and on close()
      default:
        unreachable(message, 'client message');
    }
  }

  close(): void {
    if (this.stateValue === 'closed') return;
    const wasFinal = this.stateValue === 'failed';
    this.stateValue = 'closed';
    this.cancelTimers();
    this.endOutage(false);
    this.queuedSignals = [];
    this.queuedAnnouncements = [];
    this.queuedBootstrap = 0;
    const socket = this.socket;
    this.socket = null;
    if (socket !== null) {
      if (socket.readyState === OPEN && this.joinedOnSocket)
        socket.send(encodeTrackerMessage({ type: 'leave' }));
      socket.close(NORMAL_CLOSURE, 'leaving');
    }
    this.failPendingJoin(new MeshError('tracker', 'closed before the tracker welcomed us'));
    if (!wasFinal) this.onClose();
  }

  // ─────────────────────────── connection attempts ───────────────────────────

  private openSocket(): void {
    const { url } = this.options;
    const create =
      this.options.createSocket ??
      ((u: string): WebSocketLike => {
        if (typeof WebSocket === 'undefined')
          throw new MeshError(
            'config',
            'no global WebSocket here: pass createSocket (e.g. from the ws package)',
          );
        return new WebSocket(u) as unknown as WebSocketLike;
      });
    this.joinedOnSocket = false;
    const timeoutMs =
      this.pendingJoin !== null
        ? (this.options.joinTimeoutMs ?? DEFAULT_JOIN_TIMEOUT_MS)
        : this.policy.attemptTimeoutMs;
    let socket: WebSocketLike;
    try {
      socket = create(url);
    } catch (e) {
      this.attemptFailed(
        null,
        e instanceof MeshError ? e : new MeshError('tracker', `cannot open ${url}: ${String(e)}`),
      );
      return;
    }
    this.socket = socket;
    this.attemptTimer = this.clock.setTimeout(() => {
      this.attemptTimer = null;
      if (this.socket !== socket || this.joinedOnSocket) return;
      this.attemptFailed(socket, new MeshError('tracker', `no welcome from ${url} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.onopen = () => {
      if (this.socket !== socket) return;
      socket.send(encodeTrackerMessage(this.joinMessage()));
    };
    socket.onerror = () => {
      // A close event follows in browsers and `ws`; failing here too makes sure an attempt ends.
      if (this.socket !== socket || this.joinedOnSocket) return;
      this.attemptFailed(socket, new MeshError('tracker', `WebSocket error talking to ${url}`));
    };
    socket.onclose = (ev) => {
      if (this.socket !== socket) return;
      if (this.joinedOnSocket) this.lost(ev.code, ev.reason);
      else
        this.attemptFailed(
          socket,
          new MeshError('tracker', `tracker closed the connection (${ev.code} ${ev.reason})`),
        );
    };
    socket.onmessage = (ev) => {
      if (this.socket !== socket) return;
      this.onFrame(socket, ev.data);
    };
  }

  private joinMessage(): ClientMessage {
    const { stream, role, key, token } = this.options;
    return {
      type: 'join',
      stream,
      role,
      ...(key === undefined ? {} : { key }),
      ...(token === undefined ? {} : { token }),
      ...(this.resumeTicket === null ? {} : { resume: this.resumeTicket }),
    };
  }

  private onFrame(socket: WebSocketLike, data: unknown): void {
    if (typeof data !== 'string') {
      this.onProblem(new MeshError('tracker', 'binary frame from the tracker dropped'));
      return;
    }
    const decoded = decodeServerMessage(data);
    if (!decoded.ok) {
      this.onProblem(
        new MeshError(
          'tracker',
          `bad frame from the tracker (${decoded.error.code}): ${decoded.error.message}`,
        ),
      );
      return;
    }
    const message = decoded.message;
    if (this.joinedOnSocket) {
      if (message.type === 'ice') this.iceValue = message.ice;
      this.onMessage(message);
      return;
    }
    if (message.type === 'welcome') this.welcomed(message);
    else if (message.type === 'error') this.refused(socket, message.code, message.message);
    // Nothing else is meaningful before the welcome.
  }

  private welcomed(welcome: Welcome): void {
    this.joinedOnSocket = true;
    if (this.attemptTimer !== null) this.clock.clearTimeout(this.attemptTimer);
    this.attemptTimer = null;
    this.joinedAt = this.clock.now();
    this.resumeTicket = welcome.resume;
    this.iceValue = welcome.ice;
    const previous = this.peerIdValue;
    this.peerIdValue = welcome.peerId;
    this.stateValue = 'connected';
    const pending = this.pendingJoin;
    if (pending !== null) {
      this.pendingJoin = null;
      pending.resolve(welcome);
      this.flushQueue();
      return;
    }
    const outageMs = this.endOutage(true);
    const peerIdKept = previous === welcome.peerId;
    this.reconnectCount++;
    if (welcome.resumed) this.resumedCount++;
    if (!peerIdKept) {
      this.idChanges++;
      // Signalling of the old identity's links would reach peers under the new id: useless.
      this.clearQueue(true);
    }
    this.onReconnected({
      peerIdKept,
      resumed: welcome.resumed,
      previousPeerId: previous ?? welcome.peerId,
      peerId: welcome.peerId,
      outageMs,
      attempts: this.attempt,
    });
    this.onMessage(welcome);
    this.flushQueue();
  }

  private refused(socket: WebSocketLike, code: TrackerErrorCode, text: string): void {
    const error = new MeshError('trackerRefused', `tracker refused the join: ${code}: ${text}`, code);
    const permanent = PERMANENT_JOIN_REFUSALS.has(code);
    if (this.pendingJoin !== null || !this.policy.enabled) {
      this.attemptFailed(socket, error);
      return;
    }
    if (permanent && this.resumeTicket !== null && !CREDENTIAL_REFUSALS.has(code)) {
      // Maybe the ticket itself (from another tracker instance): try once more as a fresh joiner.
      this.resumeTicket = null;
      this.attemptFailed(socket, error);
      return;
    }
    if (permanent) {
      this.fail(error);
      return;
    }
    this.attemptFailed(socket, error);
  }

  /** The current attempt (or the first join) ended without a welcome. */
  private attemptFailed(socket: WebSocketLike | null, error: MeshError): void {
    if (this.attemptTimer !== null) this.clock.clearTimeout(this.attemptTimer);
    this.attemptTimer = null;
    if (socket !== null && this.socket === socket) {
      this.socket = null;
      socket.close();
    }
    if (this.pendingJoin !== null) {
      this.stateValue = 'failed';
      this.clearQueue(false);
      this.failPendingJoin(error);
      return;
    }
    if (this.stateValue !== 'reconnecting') return;
    this.scheduleAttempt();
  }

  /** The joined socket closed under us: start reconnecting (or stop, without a policy). */
  private lost(code: number, reason: string): void {
    this.socket = null;
    this.joinedOnSocket = false;
    const now = this.clock.now();
    if (this.joinedAt !== null && now - this.joinedAt >= this.policy.stableAfterMs) this.attempt = 0;
    if (code === CLOSE_REPLACED) this.resumeTicket = null;
    if (!this.policy.enabled) {
      this.fail(new MeshError('tracker', `lost the tracker (${code} ${reason})`));
      return;
    }
    this.stateValue = 'reconnecting';
    this.lostAt = now;
    this.onDisconnected({ code, reason });
    this.scheduleAttempt();
  }

  private scheduleAttempt(): void {
    if (this.stateValue !== 'reconnecting' || this.retryTimer !== null) return;
    this.attempt++;
    const outageMs = this.lostAt === null ? 0 : this.clock.now() - this.lostAt;
    const delayMs = reconnectDelayMs(this.attempt, outageMs, this.policy, this.random());
    this.retryTimer = this.clock.setTimeout(() => {
      this.retryTimer = null;
      if (this.stateValue === 'reconnecting') this.openSocket();
    }, delayMs);
  }

  /** Final: no more attempts. */
  private fail(error: MeshError): void {
    this.stateValue = 'failed';
    this.cancelTimers();
    this.endOutage(false);
    this.clearQueue(false);
    const socket = this.socket;
    this.socket = null;
    socket?.close(NORMAL_CLOSURE, 'giving up');
    this.onFatal(error);
    this.onClose();
  }

  // ─────────────────────────── helpers ───────────────────────────

  /** Closes the outage's books; returns its length. */
  private endOutage(reconnected: boolean): number {
    if (this.lostAt === null) return 0;
    const outageMs = this.clock.now() - this.lostAt;
    this.disconnectedTotalMs += outageMs;
    if (reconnected) this.lastOutage = outageMs;
    this.lostAt = null;
    return outageMs;
  }

  private flushQueue(): void {
    const socket = this.socket;
    if (socket === null || socket.readyState !== OPEN) return;
    const now = this.clock.now();
    // Announcements first: viewers need them to accept the packets the source sent meanwhile.
    for (const message of this.queuedAnnouncements.splice(0)) socket.send(encodeTrackerMessage(message));
    if (this.queuedBootstrap > 0)
      socket.send(encodeTrackerMessage({ type: 'bootstrap', count: this.queuedBootstrap }));
    this.queuedBootstrap = 0;
    for (const { message, queuedAt } of this.queuedSignals.splice(0)) {
      if (now - queuedAt > MAX_QUEUED_SIGNAL_AGE_MS) this.signalsDroppedCount++;
      else socket.send(encodeTrackerMessage(message));
    }
  }

  /** Drops queued signalling (counted) and the bootstrap request; announcements too unless `identityOnly`. */
  private clearQueue(identityOnly: boolean): void {
    this.signalsDroppedCount += this.queuedSignals.length;
    this.queuedSignals = [];
    this.queuedBootstrap = 0;
    if (!identityOnly) {
      this.announcementsDroppedCount += this.queuedAnnouncements.length;
      this.queuedAnnouncements = [];
    }
  }

  private failPendingJoin(error: MeshError): void {
    const pending = this.pendingJoin;
    this.pendingJoin = null;
    pending?.reject(error);
  }

  private cancelTimers(): void {
    if (this.attemptTimer !== null) this.clock.clearTimeout(this.attemptTimer);
    if (this.retryTimer !== null) this.clock.clearTimeout(this.retryTimer);
    this.attemptTimer = null;
    this.retryTimer = null;
  }
}
