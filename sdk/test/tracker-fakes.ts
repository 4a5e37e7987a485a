// Hand-driven stand-ins for the tracker connection's world: a clock whose timers run only when a
// test advances it, and WebSockets whose server side the test plays. Nothing here sleeps.
import type { TrackerClock, WebSocketLike } from '@chunkycast/sdk/core';
import type { ClientMessage, ServerMessage } from '@chunkycast/wire';

export class FakeClock implements TrackerClock {
  private t = 0;
  private nextId = 1;
  private readonly timers = new Map<number, { at: number; callback: () => void }>();

  now(): number {
    return this.t;
  }

  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.timers.set(id, { at: this.t + Math.max(0, ms), callback });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Moves time forward by `ms`, running each timer due on the way at its own time, in order. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (let guard = 0; guard < 10_000; guard++) {
      let next: [number, { at: number; callback: () => void }] | null = null;
      for (const entry of this.timers)
        if (entry[1].at <= end && (next === null || entry[1].at < next[1].at)) next = entry;
      if (next === null) break;
      this.timers.delete(next[0]);
      this.t = next[1].at;
      next[1].callback();
    }
    this.t = end;
  }

  get pendingTimers(): number {
    return this.timers.size;
  }
}

const CONNECTING = 0;
const OPEN = 1;
const CLOSED = 3;

export class FakeSocket implements WebSocketLike {
  readyState = CONNECTING;
  readonly sent: ClientMessage[] = [];
  closedByClient: { code?: number; reason?: string } | null = null;
  onopen: ((ev: unknown) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;

  constructor(
    readonly url: string,
    readonly createdAt: number,
  ) {}

  send(data: string): void {
    if (this.readyState !== OPEN) throw new Error('send on a socket that is not open');
    this.sent.push(JSON.parse(data) as ClientMessage);
  }

  close(code?: number, reason?: string): void {
    if (this.readyState === CLOSED) return;
    this.readyState = CLOSED;
    this.closedByClient = {
      ...(code === undefined ? {} : { code }),
      ...(reason === undefined ? {} : { reason }),
    };
    this.onclose?.({ code: code ?? 1005, reason: reason ?? '' });
  }

  // ── the server's side ──

  accept(): void {
    this.readyState = OPEN;
    this.onopen?.({});
  }

  receive(message: ServerMessage): void {
    this.onmessage?.({ data: JSON.stringify(message) });
  }

  /** The server closes the connection (1012 restart, 1001 going away, 1006 abnormal, …). */
  drop(code: number, reason = ''): void {
    if (this.readyState === CLOSED) return;
    this.readyState = CLOSED;
    this.onclose?.({ code, reason });
  }

  /** Nobody listens on the port. */
  refuse(): void {
    this.readyState = CLOSED;
    this.onerror?.({});
    this.onclose?.({ code: 1006, reason: '' });
  }

  messages<T extends ClientMessage['type']>(type: T): Extract<ClientMessage, { type: T }>[] {
    return this.sent.filter((m): m is Extract<ClientMessage, { type: T }> => m.type === type);
  }
}

/** A socket factory that records every socket it made. */
export function socketFactory(clock: FakeClock): {
  sockets: FakeSocket[];
  create: (url: string) => FakeSocket;
} {
  const sockets: FakeSocket[] = [];
  return {
    sockets,
    create: (url) => {
      const socket = new FakeSocket(url, clock.now());
      sockets.push(socket);
      return socket;
    },
  };
}

export function welcome(
  peerId: number,
  resume: string | null,
  resumed: boolean,
  extra: Partial<Extract<ServerMessage, { type: 'welcome' }>> = {},
): ServerMessage {
  return {
    type: 'welcome',
    peerId,
    sourceId: 1,
    stream: 'live',
    publicKey: null,
    announcements: [],
    resume,
    resumed,
    ice: { servers: [], expiresAtMs: null },
    ...extra,
  };
}
