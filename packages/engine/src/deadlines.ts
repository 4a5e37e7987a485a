/**
 * Why an engine wants a `timer` input. The engine keeps one deadline per reason; the host only
 * needs the soonest (`Engine.nextDeadline`), a debugger or a trace also wants to know which it is
 * (`Engine.nextDeadlineWithReason`).
 */
export type DeadlineReason =
  /** The periodic round: heartbeats and adverts, failure detection, the load and latency phases (thesis §4.4, experimental setup: every second). */
  | 'decisionRound'
  /**
   * A peer's failure timeout runs out (the soonest last-heard time plus failureTimeoutMs): failures
   * are detected when due, not at the next round (thesis §4.4: heartbeat 1 s, timeout 4 s; checking
   * only once a round detected a failure up to a round late, half a round on average).
   */
  | 'failureCheck'
  /** A graceful leaver's linger ends: it releases its tree edges and stops (config quitLingerMs). */
  | 'quitLingerEnd'
  /** A slice waiting out a flood picks its parent among the senders heard so far (thesis §4.2, initial tree construction). */
  | 'floodDecision'
  /** Packet repair: a missing packet's request, retry or origin fetch is due (repair.ts). */
  | 'repair'
  /** A slice source's heartbeat to the true source is due (config rootHeartbeatMs; not in the thesis). */
  | 'rootHeartbeat';

/**
 * A strict timeout ("silent for longer than failureTimeoutMs") is checked this long after it runs
 * out: hosts keep time in whole milliseconds.
 */
export const TIMEOUT_PAST_MS = 1;

/** The soonest deadline and its reason; `reason` is null when there is none (`atMs` = Infinity). */
export interface Deadline {
  readonly atMs: number;
  readonly reason: DeadlineReason | null;
}

/** Reasons in the order ties are reported (the order the engine runs them in). */
const REASONS: readonly DeadlineReason[] = [
  'decisionRound',
  'failureCheck',
  'quitLingerEnd',
  'floodDecision',
  'repair',
  'rootHeartbeat',
];

/** The named deadline table (str0m's `soonest(…, Reason)`): one time per reason, Infinity when unset. */
export class DeadlineTable {
  readonly at: Record<DeadlineReason, number> = {
    decisionRound: Infinity,
    failureCheck: Infinity,
    quitLingerEnd: Infinity,
    floodDecision: Infinity,
    repair: Infinity,
    rootHeartbeat: Infinity,
  };

  /** The soonest time of any reason, without allocating (the host asks after every input). */
  soonestMs(): number {
    const at = this.at;
    return Math.min(
      at.decisionRound,
      at.failureCheck,
      at.quitLingerEnd,
      at.floodDecision,
      at.repair,
      at.rootHeartbeat,
    );
  }

  /** The soonest deadline and why; the first reason in REASONS wins a tie. */
  soonest(): Deadline {
    let best: Deadline = { atMs: Infinity, reason: null };
    for (const reason of REASONS) {
      const atMs = this.at[reason];
      if (atMs < best.atMs) best = { atMs, reason };
    }
    return best;
  }
}
