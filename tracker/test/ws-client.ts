/**
 * A test client of the rendezvous protocol over `ws`, and the bookkeeping that closes every tracker
 * and socket a test opened. Every wait is for an event (a frame, a close) bounded by WAIT_MS.
 */
import { afterEach, expect } from 'vitest';
import { WebSocket, type ClientOptions, type RawData } from 'ws';
import { decodeServerMessage, type ServerMessage } from '@chunkycast/wire';
import { createTracker, type Tracker, type TrackerOptions } from '@chunkycast/tracker';

export const KEY = 'broadcaster-secret';
export const AUTH = { Authorization: `Bearer ${KEY}` };
export const WAIT_MS = 3_000;

export type Message<T extends ServerMessage['type']> = Extract<ServerMessage, { type: T }>;

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}

export interface JoinOptions {
  readonly key?: string;
  readonly token?: string;
  readonly resume?: string | null;
}

export class Client {
  private readonly inbox: ServerMessage[] = [];
  private readonly waiters: (() => void)[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      expect(isBinary).toBe(false);
      const decoded = decodeServerMessage(rawText(data));
      if (!decoded.ok) throw new Error(`tracker sent an undecodable frame: ${decoded.error.message}`);
      this.inbox.push(decoded.message);
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        resolve({ code, reason: reason.toString() });
        for (const wake of this.waiters.splice(0)) wake();
      });
    });
  }

  static async open(url: string, options?: ClientOptions): Promise<Client> {
    const ws = new WebSocket(url, options);
    // Listening from the start: a refusal's error frame can arrive with the handshake itself.
    const client = new Client(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => {
        resolve();
      });
      ws.once('error', reject);
    });
    return client;
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' || Buffer.isBuffer(frame) ? frame : JSON.stringify(frame));
  }

  /** The next message of this type, skipping none: anything else first is a failure. */
  async next<T extends ServerMessage['type']>(type: T): Promise<Message<T>> {
    const message = await this.take();
    if (message.type !== type) throw new Error(`expected ${type}, got ${JSON.stringify(message)}`);
    return message as Message<T>;
  }

  /**
   * The next message of this type that `match` accepts, passing over messages whose type is in
   * `skip` (what a live swarm sends any member unasked: announcements, offers); anything else first
   * is a failure.
   */
  async nextSkipping<T extends ServerMessage['type']>(
    type: T,
    skip: readonly ServerMessage['type'][],
    match: (message: Message<T>) => boolean = () => true,
  ): Promise<Message<T>> {
    for (;;) {
      const message = await this.take();
      if (message.type === type && match(message as Message<T>)) return message as Message<T>;
      if (!skip.includes(message.type)) throw new Error(`expected ${type}, got ${JSON.stringify(message)}`);
    }
  }

  async error(code: string): Promise<Message<'error'>> {
    const e = await this.next('error');
    expect(e.code).toBe(code);
    expect(e.message.length).toBeGreaterThan(5);
    return e;
  }

  joinFrame(stream: string, role: 'viewer' | 'source' = 'viewer', options: JoinOptions = {}): unknown {
    return {
      type: 'join',
      stream,
      role,
      ...(options.key === undefined ? {} : { key: options.key }),
      ...(options.token === undefined ? {} : { token: options.token }),
      ...(options.resume == null ? {} : { resume: options.resume }),
    };
  }

  async join(
    stream: string,
    role: 'viewer' | 'source' = 'viewer',
    keyOrOptions?: string | JoinOptions,
  ): Promise<Message<'welcome'>> {
    const options = typeof keyOrOptions === 'string' ? { key: keyOrOptions } : (keyOrOptions ?? {});
    this.send(this.joinFrame(stream, role, options));
    return this.next('welcome');
  }

  async bootstrap(count = 64): Promise<number[]> {
    this.send({ type: 'bootstrap', count });
    return [...(await this.next('peers')).peers];
  }

  /** Messages that arrived and were not taken: after a round trip, proof that nothing else came. */
  pending(): readonly ServerMessage[] {
    return this.inbox;
  }

  private async take(): Promise<ServerMessage> {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      const message = this.inbox.shift();
      if (message !== undefined) return message;
      if (this.ws.readyState === WebSocket.CLOSED) throw new Error('socket closed while waiting');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('timed out waiting for a frame');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.ws.close();
  }
}

export async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(new Error(`timed out: ${what}`));
        }, WAIT_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `check` on every turn of the event loop until it holds (bounded by WAIT_MS). */
export async function eventually(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const open: { trackers: Tracker[]; clients: Client[] } = { trackers: [], clients: [] };

/** Registers the cleanup of everything `start` and `connect` open (call once per test file). */
export function cleanUpAfterEach(): void {
  afterEach(async () => {
    for (const c of open.clients.splice(0)) c.ws.terminate();
    await Promise.all(open.trackers.splice(0).map((t) => t.close()));
  });
}

export async function start(options: Partial<TrackerOptions> = {}): Promise<Tracker> {
  const tracker = await createTracker({
    host: '127.0.0.1',
    port: 0,
    broadcasterKey: KEY,
    publicKey: null,
    closeGraceMs: 500,
    ...options,
  });
  open.trackers.push(tracker);
  return tracker;
}

/** Tracks a tracker started elsewhere, so it is closed after the test. */
export function track(tracker: Tracker): Tracker {
  open.trackers.push(tracker);
  return tracker;
}

export async function connect(tracker: Tracker, options?: ClientOptions): Promise<Client> {
  const client = await Client.open(tracker.wsUrl, options);
  open.clients.push(client);
  return client;
}
