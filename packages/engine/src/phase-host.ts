import type { ForcedReason, Message, PeerId } from '@chunkycast/wire';
import { LatencyEstimate, type ResolvedConfig } from './config.js';
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
  /** When a peer last became our Swaplinks neighbour (−Infinity: never; latencyWindowFromNeighbours). */
  readonly newestNeighbourAt: number;
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

/**
 * When `slice` would reach us through `q` by the path estimate (LatencyEstimate.Path): q's advertised
 * delay from the slice's root plus half the round trip to q. Infinity while unknown.
 */
export function pathVia(q: PeerState, slice: number): number {
  const value = (q.slicePaths[slice] ?? Number.NaN) + q.rttMs / 2;
  return Number.isNaN(value) ? Infinity : value;
}

/** Arrival through `q` by the configured estimate (ProtocolConfig.latencyEstimate); Infinity while unknown. */
export function estimatedArrivalVia(host: PhaseHost, q: PeerState, slice: number): number {
  return host.config.protocol.latencyEstimate === LatencyEstimate.Path
    ? pathVia(q, slice)
    : arrivalVia(q, slice);
}

/** `estimatedArrivalVia` as parents are compared: plus `relayedLinkPenaltyMs` when q's link is relayed. */
export function expectedArrivalVia(host: PhaseHost, q: PeerState, slice: number): number {
  return estimatedArrivalVia(host, q, slice) + host.linkPenalty(q);
}
