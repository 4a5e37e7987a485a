/**
 * What the load generators (client.ts) and the orchestrator (cli.ts) of `npm run bench:tracker`
 * say to each other, one JSON object a line: commands on the generator's stdin, reports on its
 * stdout.
 */

/** Commands on a generator's stdin: all sessions are in, measure the steady phase; or stop and report. */
export type GeneratorCommand = 'hold' | 'stop';

export type GeneratorPhase = 'join' | 'hold';

/** Counts by key (tracker error codes, socket error codes). */
export type Tally = Record<string, number>;

/** A generator's running totals, in every report. */
export interface GeneratorSummary {
  readonly peers: number;
  readonly held: number;
  readonly pendingJoins: number;
  readonly notAttempted: number;
  /** First attempt to last welcome, ms; null before the first welcome. */
  readonly joinSpanMs: number | null;
  readonly inFlightRelays: number;
  readonly attempted: number;
  readonly welcomed: number;
  readonly joinTimeouts: number;
  readonly connectFailures: number;
  readonly closedBeforeWelcome: number;
  readonly closedAfterWelcome: number;
  readonly relaysSent: number;
  readonly relaysReceived: number;
  readonly relaysLost: number;
  readonly relayMismatches: number;
  readonly relaysSkipped: number;
  readonly bootstrapsSent: number;
  readonly bootstrapsAnswered: number;
  readonly bootstrapPeersReturned: number;
  readonly bootstrapForeignPeers: number;
  readonly bootstrapUnknownPeers: number;
  readonly unexpectedMessages: number;
  /** The tracker's `error` replies by code. */
  readonly trackerErrors: Tally;
  /** Socket-level errors (ECONNRESET, EMFILE, …) by code or message. */
  readonly socketErrors: Tally;
}

/** Each second: the totals, and the samples taken since the last tick. */
export interface TickReport extends GeneratorSummary {
  readonly type: 'tick';
  readonly atMs: number;
  readonly phase: GeneratorPhase;
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
  /** [latency ms, 1 if sent in the hold phase else 0] of each relay delivered since the last tick. */
  readonly relayMs: readonly (readonly [number, 0 | 1])[];
  /** Connect → welcome, ms, of each join since the last tick. */
  readonly joinMs: readonly number[];
  /** Request → answer, ms, of each bootstrap since the last tick. */
  readonly bootstrapMs: readonly number[];
}

/** Once: every session was tried and has its answer (or the join time limit ran out). */
export interface JoinedReport extends GeneratorSummary {
  readonly type: 'joined';
  readonly atMs: number;
}

/** At the end, after the stop and the drain of relays in flight. */
export interface ResultReport extends GeneratorSummary {
  readonly type: 'result';
  readonly atMs: number;
  readonly reason: string;
  readonly heldAtStop: number;
}

export type GeneratorReport = TickReport | JoinedReport | ResultReport;
