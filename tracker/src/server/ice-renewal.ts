/**
 * TURN credential renewals. They are due in the order peers were welcomed (one lifetime for all),
 * so one ordered map and one sweep serve every connection, not a timer each.
 */
import { WebSocket } from 'ws';
import { ICE_RENEW_AT_FRACTION, iceConfigFor, iceExpires, type IceSettings } from '../ice.js';
import type { Connection, TrackerContext } from './context.js';
import type { Connections } from './connections.js';

/**
 * A sweep every 100 ms sends at most this many: after a tracker restart every peer rejoins within
 * seconds and their renewals fall due together; 250 per sweep (2,500/s, a few ms of the event loop
 * each time) renew 100,000 peers in 40 s, well within the fifth of the lifetime left when they fall
 * due.
 */
const ICE_RENEW_SWEEP_MS = 100;
const MAX_ICE_RENEWALS_PER_SWEEP = 250;
const MS_PER_S = 1000;

export class IceRenewals {
  /**
   * When each joined connection's TURN credentials are to be renewed (unix ms), in welcome order, so
   * the due ones are always at the front. Empty without a TURN secret.
   */
  private readonly due = new Map<Connection, number>();
  /**
   * Renewals are due this long before the credentials expire: the last fifth of their lifetime. From
   * the expiry rather than from sending, because the expiry is whole seconds (the username's).
   */
  private readonly renewBeforeExpiryMs: number;
  /** Only with TURN credentials, which expire; STUN servers are handed out once, in the welcome. */
  private readonly sweep: NodeJS.Timeout | null;

  constructor(
    private readonly context: TrackerContext,
    private readonly connections: Connections,
    private readonly ice: IceSettings,
  ) {
    this.renewBeforeExpiryMs = Math.round(ice.turnTtlS * MS_PER_S * (1 - ICE_RENEW_AT_FRACTION));
    this.sweep = iceExpires(ice)
      ? setInterval(() => {
          this.renew();
        }, ICE_RENEW_SWEEP_MS)
      : null;
    this.sweep?.unref();
  }

  /** Queues `conn`'s next renewal (last: expiries only grow, so the queue stays in due order). */
  schedule(conn: Connection, expiresAtMs: number | null): void {
    this.due.delete(conn);
    if (expiresAtMs !== null) this.due.set(conn, expiresAtMs - this.renewBeforeExpiryMs);
  }

  forget(conn: Connection): void {
    this.due.delete(conn);
  }

  stop(): void {
    if (this.sweep !== null) clearInterval(this.sweep);
    this.due.clear();
  }

  /** Sends fresh TURN credentials to every member whose renewal is due (at most a sweep's worth). */
  private renew(): void {
    const t = this.context.now();
    let renewed = 0;
    for (const [conn, dueAtMs] of this.due) {
      if (dueAtMs > t || renewed >= MAX_ICE_RENEWALS_PER_SWEEP) break;
      this.due.delete(conn);
      const member = conn.member;
      // Left, replaced or closed meanwhile: nothing to renew (a rejoin's welcome brings fresh ones).
      if (member === null || conn.closeReason !== null || conn.socket.readyState !== WebSocket.OPEN) continue;
      const iceConfig = iceConfigFor(this.ice, member.peerId, t);
      this.connections.send(conn, { type: 'ice', ice: iceConfig });
      this.context.counters.iceRenewals++;
      renewed++;
      this.schedule(conn, iceConfig.expiresAtMs);
    }
  }
}
