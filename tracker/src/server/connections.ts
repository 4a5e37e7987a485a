/**
 * The open WebSockets of one tracker and the ways to write to and end them: every frame the tracker
 * sends goes through `send`, every connection it ends through `disconnect` or `terminate`, so the
 * slow-consumer check, the frame counter and the `disconnects` reasons live in one place.
 */
import { WebSocket } from 'ws';
import { encodeTrackerMessage, type ServerMessage, type TrackerErrorCode } from '@chunkycast/wire';
import { AddressCounts } from '../limits.js';
import type { DisconnectReason } from '../metrics.js';
import type { Connection, TrackerContext } from './context.js';

/** A peer that lets this much queue up unread is not keeping up with control traffic; drop it. */
const MAX_BUFFERED_BYTES = 1024 * 1024;
/** A socket we close gets this long to answer the closing handshake before it is cut off. */
const CLOSE_HANDSHAKE_MS = 1_000;

export class Connections {
  /** Admitted connections (sessions). */
  readonly sessions = new Set<Connection>();
  /** Refused connections whose closing handshake is under way. */
  readonly refusing = new Set<Connection>();
  /** Admitted WebSockets per address key. */
  readonly perAddress = new AddressCounts();

  constructor(private readonly context: TrackerContext) {}

  /** Counts `conn` as a session (and under its address) until it closes. */
  admit(conn: Connection): void {
    conn.admitted = true;
    this.sessions.add(conn);
    this.perAddress.tryAdd(conn.addressKey, 0);
  }

  /** Forgets a closed connection. */
  closed(conn: Connection): void {
    if (conn.admitted) {
      this.sessions.delete(conn);
      this.perAddress.remove(conn.addressKey);
    } else this.refusing.delete(conn);
  }

  /** Records why a connection ends, once: the first reason given is the one counted. */
  endedBecause(conn: Connection, why: DisconnectReason): void {
    if (conn.closeReason !== null) return;
    conn.closeReason = why;
    this.context.counters.disconnects[why]++;
  }

  /** Ends a connection from our side: records why, and cuts it off if the handshake stalls. */
  disconnect(conn: Connection, code: number, reason: string, why: DisconnectReason): void {
    this.endedBecause(conn, why);
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

  terminate(conn: Connection, why: DisconnectReason): void {
    this.endedBecause(conn, why);
    conn.socket.terminate();
  }

  send(conn: Connection, message: ServerMessage): void {
    const socket = conn.socket;
    if (socket.readyState !== WebSocket.OPEN) return;
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
      this.context.log('warn', 'dropping a peer that does not read its socket', {
        remote: conn.remote,
        peerId: conn.member?.peerId,
        bufferedBytes: socket.bufferedAmount,
      });
      this.terminate(conn, 'slowConsumer');
      return;
    }
    this.context.counters.framesOut++;
    socket.send(encodeTrackerMessage(message));
  }

  sendError(conn: Connection, code: TrackerErrorCode, message: string): void {
    this.context.counters.errors[code]++;
    this.send(conn, { type: 'error', code, message });
  }
}
