/**
 * What the tracker's parts share: one WebSocket connection's state, the counters every part adds
 * to, and the context object `createTracker` hands each part (log, clock, swarms, cluster).
 */
import type { WebSocket } from 'ws';
import { TRACKER_ERROR_CODES, type TrackerErrorCode } from '@chunkycast/wire';
import type { Cluster } from '../cluster.js';
import { LIMIT_KINDS, type LimitKind, type TokenBucket } from '../limits.js';
import type { Logger } from '../log.js';
import {
  DISCONNECT_REASONS,
  RESUME_OUTCOMES,
  type DisconnectReason,
  type ResumeOutcome,
} from '../metrics.js';
import type { Member, SwarmRegistry } from '../swarm.js';

/** One WebSocket and what it has joined. */
export interface Connection {
  readonly socket: WebSocket;
  /** address:port, for logs. */
  readonly remote: string;
  /** What the per-address limit counts under. */
  readonly addressKey: string;
  /** Counted as a session (and under its address) until it closes; false for a refused socket. */
  admitted: boolean;
  member: Member | null;
  badFrames: number;
  missedPongs: number;
  /** Null when the message rate is unlimited. */
  readonly bucket: TokenBucket | null;
  /** Set when the tracker ends the connection: why (the `disconnects` label); null = the client. */
  closeReason: DisconnectReason | null;
  /** Frames are handled one after another even when one awaits (signature checks), keeping order. */
  queue: Promise<void>;
}

/** A refusal of one frame: answered with an error frame, the connection stays. */
export class Refusal extends Error {
  constructor(
    readonly code: TrackerErrorCode,
    message: string,
  ) {
    super(message);
  }
}

function zeroes<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

/** The tracker's own counters (the snapshot in `TrackerMetrics` adds gauges read at the time). */
export class TrackerCounters {
  connectionsTotal = 0;
  framesIn = 0;
  framesOut = 0;
  joins = 0;
  signalsRelayed = 0;
  /** Signals refused because the sender or the target was banned for cut-offs (cut-offs.ts). */
  signalsRefusedCutOff = 0;
  /** Peers banned from new connections after REPORTS_TO_BAN members reported them cut off. */
  peersBannedForCutOffs = 0;
  announcements = 0;
  handlerFaults = 0;
  debugAuthFailures = 0;
  remoteAnnouncementsRejected = 0;
  iceRenewals = 0;
  /** Error frames sent (and HTTP refusals of an upgrade), by code. */
  readonly errors: Record<TrackerErrorCode, number> = zeroes(TRACKER_ERROR_CODES);
  readonly limitHits: Record<LimitKind, number> = zeroes(LIMIT_KINDS);
  readonly resumes: Record<ResumeOutcome, number> = zeroes(RESUME_OUTCOMES);
  readonly disconnects: Record<DisconnectReason, number> = zeroes(DISCONNECT_REASONS);
}

/** What every part of one tracker reads; built once by `createTracker`. */
export interface TrackerContext {
  readonly log: Logger;
  /** Wall clock (unix ms) for tokens, tickets and rate limits. */
  readonly now: () => number;
  readonly counters: TrackerCounters;
  /** This process's swarms and members. */
  readonly registry: SwarmRegistry;
  readonly cluster: Cluster;
  /** True once close() has begun. */
  readonly closing: () => boolean;
}
