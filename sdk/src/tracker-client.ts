import {
  decodeServerMessage,
  encodeTrackerMessage,
  type ClientMessage,
  type PeerRole,
  type ServerMessage,
} from '@chunkycast/wire';
import { MeshError } from './types.js';

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

export interface TrackerClientOptions {
  readonly url: string;
  readonly stream: string;
  readonly role: PeerRole;
  /** The broadcaster key (source role only). */
  readonly key?: string;
  /** Default: the global WebSocket (browsers, Node ≥ 22); pass `ws` in older Node. */
  readonly createSocket?: WebSocketFactory;
  /** A join that gets no welcome within this time fails. */
  readonly joinTimeoutMs?: number;
}

export type Welcome = Extract<ServerMessage, { type: 'welcome' }>;

/**
 * One peer's WebSocket to the rendezvous server: join, then a stream of validated server messages.
 * Every frame from the tracker is decoded by the wire package; a bad one is reported and dropped.
 */
export class TrackerClient {
  private socket: WebSocketLike | null = null;
  private closedByUs = false;
  /** Validated messages after the welcome. */
  onMessage: (message: ServerMessage) => void = () => undefined;
  /** The socket closed (not by `close()`), or a frame was bad. */
  onProblem: (error: MeshError) => void = () => undefined;
  onClose: () => void = () => undefined;

  constructor(private readonly options: TrackerClientOptions) {}

  get connected(): boolean {
    return this.socket?.readyState === OPEN;
  }

  /** Opens the socket and joins; resolves with the welcome, rejects with a MeshError. */
  join(): Promise<Welcome> {
    const { url, stream, role, key } = this.options;
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
    return new Promise<Welcome>((resolve, reject) => {
      let settled = false;
      const fail = (error: MeshError): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(error);
      };
      const timer = setTimeout(() => {
        fail(
          new MeshError(
            'tracker',
            `no welcome from ${url} within ${this.options.joinTimeoutMs ?? 10_000} ms`,
          ),
        );
        this.socket?.close();
      }, this.options.joinTimeoutMs ?? 10_000);
      let socket: WebSocketLike;
      try {
        socket = create(url);
      } catch (e) {
        fail(e instanceof MeshError ? e : new MeshError('tracker', `cannot open ${url}: ${String(e)}`));
        return;
      }
      this.socket = socket;
      socket.onopen = () => {
        const join: ClientMessage =
          key === undefined ? { type: 'join', stream, role } : { type: 'join', stream, role, key };
        socket.send(encodeTrackerMessage(join));
      };
      socket.onerror = () => {
        fail(new MeshError('tracker', `WebSocket error talking to ${url}`));
      };
      socket.onclose = (ev) => {
        if (!settled) {
          fail(new MeshError('tracker', `tracker closed the connection (${ev.code} ${ev.reason})`));
          return;
        }
        if (!this.closedByUs)
          this.onProblem(new MeshError('tracker', `lost the tracker (${ev.code} ${ev.reason})`));
        this.onClose();
      };
      socket.onmessage = (ev) => {
        if (typeof ev.data !== 'string') {
          this.onProblem(new MeshError('tracker', 'binary frame from the tracker dropped'));
          return;
        }
        const decoded = decodeServerMessage(ev.data);
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
        if (!settled) {
          if (message.type === 'welcome') {
            settled = true;
            clearTimeout(timer);
            resolve(message);
          } else if (message.type === 'error') {
            fail(
              new MeshError(
                'trackerRefused',
                `tracker refused the join: ${message.code}: ${message.message}`,
              ),
            );
            socket.close();
          }
          return;
        }
        this.onMessage(message);
      };
    });
  }

  send(message: ClientMessage): void {
    if (this.socket?.readyState === OPEN) this.socket.send(encodeTrackerMessage(message));
  }

  close(): void {
    this.closedByUs = true;
    if (this.socket?.readyState === OPEN) this.send({ type: 'leave' });
    this.socket?.close(1000, 'leaving');
  }
}
