/**
 * A session's frames: counted, rate-checked, queued so they are handled one after another in
 * arrival order (even when one awaits a signature check or the cluster), decoded by the wire
 * package, and handed to joins, announcements or signalling. A refusal is answered with an error
 * frame; a fault in a handler costs that one frame.
 */
import type { RawData } from 'ws';
import { decodeClientMessage, MAX_TRACKER_FRAME_BYTES, type ClientMessage } from '@chunkycast/wire';
import type { FrameLimits } from './admission.js';
import type { Announcements } from './announcements.js';
import { Refusal, type Connection, type TrackerContext } from './context.js';
import type { Connections } from './connections.js';
import type { Joins } from './joins.js';
import type { Signalling } from './signalling.js';

/** UTF-8 takes at most this many bytes per UTF-16 code unit. */
const MAX_UTF8_BYTES_PER_CHAR = 3;

export class Frames {
  constructor(
    private readonly context: TrackerContext,
    private readonly connections: Connections,
    private readonly limits: FrameLimits,
    private readonly joins: Joins,
    private readonly announcements: Announcements,
    private readonly signalling: Signalling,
  ) {}

  /** A frame as it arrives on an admitted socket. */
  onMessage(conn: Connection, data: RawData, isBinary: boolean): void {
    this.context.counters.framesIn++;
    // Frames still arriving after we closed (or refused) the connection are not answered.
    if (conn.closeReason !== null) return;
    const answerInTurn = (task: () => void): void => {
      this.enqueue(conn, task);
    };
    if (!this.limits.withinRate(conn, answerInTurn)) return;
    this.enqueue(conn, () => this.onFrame(conn, data, isBinary));
  }

  /** Runs `task` after everything queued on this connection before it. */
  private enqueue(conn: Connection, task: () => void | Promise<void>): void {
    conn.queue = conn.queue.then(task).catch((e: unknown) => {
      // A bug here must cost one frame, never the process or the other peers.
      this.context.counters.handlerFaults++;
      this.context.log('error', 'handler fault', { remote: conn.remote, error: e });
    });
  }

  private async onFrame(conn: Connection, data: RawData, isBinary: boolean): Promise<void> {
    if (isBinary) {
      this.limits.badFrame(conn, 'malformed', 'binary frames are not accepted; send JSON text frames');
      return;
    }
    const bytes = rawLength(data);
    if (bytes > MAX_UTF8_BYTES_PER_CHAR * MAX_TRACKER_FRAME_BYTES) {
      // Cannot be within the limit (≤ 3 UTF-8 bytes per UTF-16 unit); no need to decode it to say so.
      this.limits.badFrame(conn, 'tooLarge', `frame of ${bytes} bytes exceeds ${MAX_TRACKER_FRAME_BYTES}`);
      return;
    }
    const decoded = decodeClientMessage(rawText(data));
    if (!decoded.ok) {
      this.limits.badFrame(conn, decoded.error.code, decoded.error.message);
      return;
    }
    try {
      await this.handle(conn, decoded.message);
    } catch (e) {
      if (e instanceof Refusal) this.connections.sendError(conn, e.code, e.message);
      else throw e;
    }
  }

  private async handle(conn: Connection, message: ClientMessage): Promise<void> {
    if (this.context.closing()) throw new Refusal('shuttingDown', 'the tracker is shutting down');
    switch (message.type) {
      case 'join':
        return this.joins.join(conn, message);
      case 'bootstrap':
        return this.signalling.bootstrap(conn, message);
      case 'signal':
        return this.signalling.signal(conn, message);
      case 'announce':
        return this.announcements.announce(conn, message.announcement);
      case 'report':
        this.signalling.report(conn, message);
        return;
      case 'leave':
        this.joins.joined(conn);
        this.joins.leave(conn);
        return;
      default: {
        const unhandled: never = message;
        throw new Error(`unhandled frame ${JSON.stringify(unhandled)}`);
      }
    }
  }
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
