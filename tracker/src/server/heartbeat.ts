/**
 * WebSocket keep-alive: each connection is pinged once per `heartbeatMs` on a period of its own and
 * dropped once two pings in a row went unanswered, whatever the number of connections.
 *
 * Not all in one go: pinging 20,000 sockets (and reading their 20,000 pongs) in one loop blocked the
 * event loop for hundreds of milliseconds and became the p99 of signal relays (npm run
 * bench:tracker, docs/results/tracker-bench). So the period is cut into up to HEARTBEAT_SLICES
 * ticks, and each connection lives in one slot of that wheel for its whole life: the least filled
 * slot when it was admitted. Each tick visits one slot, so every connection is visited exactly once
 * per period (its first visit within one period of its admission), and the work is spread evenly.
 */
import { WebSocket } from 'ws';
import type { Connection, TrackerContext } from './context.js';
import type { Connections } from './connections.js';

/** At most this many ticks per heartbeat period. */
export const HEARTBEAT_SLICES = 50;
/** Ticks are at least this long (a short period has fewer slices). */
const MIN_HEARTBEAT_TICK_MS = 100;
/** Pings in a row a connection may leave unanswered; at the next visit it is dropped. */
export const MAX_MISSED_PONGS = 2;

/**
 * Items in `slices` slots visited round-robin, one per tick. Free of sockets and timers (the caller
 * ticks it), so its schedule is tested directly.
 */
export class HeartbeatWheel<T> {
  private readonly slots: Set<T>[];
  private readonly slotOf = new Map<T, number>();
  /** The slot the next tick visits. */
  private next = 0;

  constructor(readonly slices: number) {
    if (!Number.isInteger(slices) || slices < 1) throw new RangeError(`slices must be ≥ 1, got ${slices}`);
    this.slots = Array.from({ length: slices }, () => new Set<T>());
  }

  /** Puts `item` in the least filled slot; among equals, the one visited last (a full period away). */
  add(item: T): void {
    if (this.slotOf.has(item)) return;
    let best = this.next;
    let bestSize = Infinity;
    for (let offset = 0; offset < this.slices; offset++) {
      const slot = (this.next + offset) % this.slices;
      const size = this.slots[slot]?.size ?? 0;
      if (size <= bestSize) {
        best = slot;
        bestSize = size;
      }
    }
    this.slots[best]?.add(item);
    this.slotOf.set(item, best);
  }

  remove(item: T): void {
    const slot = this.slotOf.get(item);
    if (slot === undefined) return;
    this.slots[slot]?.delete(item);
    this.slotOf.delete(item);
  }

  get size(): number {
    return this.slotOf.size;
  }

  /** The items whose turn it is (a copy: the caller may remove them), and on to the next slot. */
  tick(): T[] {
    const due = [...(this.slots[this.next] ?? [])];
    this.next = (this.next + 1) % this.slices;
    return due;
  }
}

export class Heartbeat {
  private readonly wheel: HeartbeatWheel<Connection>;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly context: TrackerContext,
    private readonly connections: Connections,
    heartbeatMs: number,
  ) {
    const slices = Math.max(1, Math.min(HEARTBEAT_SLICES, Math.floor(heartbeatMs / MIN_HEARTBEAT_TICK_MS)));
    this.wheel = new HeartbeatWheel(slices);
    this.timer = setInterval(() => {
      this.tick();
    }, heartbeatMs / slices);
    // The server's sockets keep the process alive; the timer alone need not.
    this.timer.unref();
  }

  /** Starts pinging an admitted connection. */
  add(conn: Connection): void {
    this.wheel.add(conn);
  }

  remove(conn: Connection): void {
    this.wheel.remove(conn);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private tick(): void {
    for (const conn of this.wheel.tick()) {
      if (!this.connections.sessions.has(conn)) {
        this.wheel.remove(conn);
        continue;
      }
      if (conn.missedPongs >= MAX_MISSED_PONGS) {
        this.context.log('info', 'dropping a peer that missed two pongs', {
          remote: conn.remote,
          peerId: conn.member?.peerId,
        });
        this.wheel.remove(conn);
        this.connections.terminate(conn, 'heartbeat');
        continue;
      }
      conn.missedPongs++;
      if (conn.socket.readyState === WebSocket.OPEN) conn.socket.ping();
    }
  }
}
