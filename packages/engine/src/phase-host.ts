import type { ForcedReason, Message, PeerId } from '@chunkycast/wire';
import type { ResolvedConfig } from './config.js';
import { arrivalVia, type ArrivalOffsets } from './offsets.js';
import type { Random } from './random.js';
import type { PeerState, SliceState } from './state.js';

/**
 * What the load and latency phases (load-phase.ts, latency-phase.ts) need from their member engine:
 * the trees as they stand, the neighbours' adverts, and the ways to ask for a new parent.
 */
export interface PhaseHost {
  readonly id: PeerId;
  /** The resolved configuration; its loads (TL, ML, LLT, ULT) change with `setLoad`. */
  readonly config: ResolvedConfig;
  readonly random: Random;
  readonly now: number;
  /** Tree streams this member sends (slices × active children). */
  readonly load: number;
  readonly slices: readonly SliceState[];
  /** What we know of each peer, adverts included. */
  readonly peers: ReadonlyMap<PeerId, PeerState>;
  readonly offsets: ArrivalOffsets;
  neighbours(): readonly PeerId[];
  isNeighbour(peer: PeerId): boolean;
  send(to: PeerId, message: Message): void;
  /** Can `q` be our parent on slice `s` at all (the loop rule, trust, refusals)? */
  eligibleParent(q: PeerState, qId: PeerId, s: number, st: SliceState): boolean;
  /** Whether tree edges should avoid `q`'s link: relayed, and the preference is on. */
  avoidLink(q: PeerState): boolean;
  /** What a relayed link counts as in arrival-time comparisons (0 for a direct one). */
  linkPenalty(q: PeerState): number;
  /** A forced parent request (refused only above ML or on a loop). */
  sendForced(s: number, target: PeerId, reason: ForcedReason): void;
  /** Ask `target` to take over slice `s` from `parent` at a hand-off point one lead ahead. */
  sendSwitchRequest(s: number, target: PeerId, q: PeerState, parent: PeerId, kind: 'load' | 'latency'): void;
}

/** `arrivalVia` as parents are compared: plus `relayedLinkPenaltyMs` when q's link is relayed. */
export function expectedArrivalVia(host: PhaseHost, q: PeerState, slice: number): number {
  return arrivalVia(q, slice) + host.linkPenalty(q);
}
