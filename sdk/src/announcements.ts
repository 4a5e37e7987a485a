import type { PeerId, SignedAnnouncement } from '@chunkycast/wire';
import type { SegmentStore } from './segments.js';
import { unreachable } from './unreachable.js';

/**
 * Unknown announcements verified per neighbour: a token bucket of this many per second, up to
 * MAX_PEER_ANNOUNCEMENT_BURST at once. An honest neighbour passes on one per segment (one per 2 s
 * for the test stream) and a few at once after a gap (a source releasing held segments); an Ed25519
 * verification costs ~0.1 ms, so a peer cannot make us compute more than a few checks a second.
 */
export const PEER_ANNOUNCEMENTS_PER_SECOND = 4;
export const MAX_PEER_ANNOUNCEMENT_BURST = 8;
/**
 * Announcements from peers are taken only for sequences at most this far from the newest one
 * known: the store keeps 12 segments, and a live stream moves one sequence per segment, so a
 * genuine announcement is never far from the edge while a replayed or invented one usually is.
 */
export const PEER_ANNOUNCEMENT_MAX_DISTANCE = 64;
/** Sequences remembered as forwarded / heard from (bounded: older ones are forgotten). */
const REMEMBERED_SEQUENCES = 128;
/** Neighbours with a rate budget at most (ids of long-gone peers are forgotten past it). */
const MAX_BUDGETS = 1024;

export interface AnnouncementRelayCounters {
  /** Announcements from neighbours verified and added to the store (new to us). */
  accepted: number;
  /** Announcements passed on to our neighbours (each sequence at most once). */
  forwarded: number;
  /** From neighbours, for a sequence already announced (or being verified): nothing to do. */
  duplicates: number;
  /** From neighbours, with a bad signature: dropped, not passed on, held against the sender. */
  forged: number;
  /** From neighbours, beyond their verification budget: dropped unverified. */
  rateLimited: number;
  /** From neighbours, unusable: another stream, too far from the live edge, or no key to verify with. */
  refused: number;
}

export interface AnnouncementRelayOptions {
  readonly stream: string;
  readonly store: Pick<
    SegmentStore,
    'announcement' | 'offer' | 'newestAnnouncedSequence' | 'verifiesSignatures'
  >;
  /** Monotonic ms (the rate budget's clock). */
  readonly now: () => number;
  /** Passes an announcement on to every neighbour with an open link but those in `except`. */
  readonly forward: (announcement: SignedAnnouncement, except: readonly PeerId[]) => void;
  /** `peer` sent an announcement whose signature fails (the mesh node's cut-off rule applies). */
  readonly reportForged: (peer: PeerId) => void;
  /** An announcement was added to the store: packets held for it can be checked now. */
  readonly added: () => void;
}

/**
 * Announcements over the mesh: a viewer that hears a signed announcement from a neighbour verifies
 * it like one from the tracker and, if it is new and genuine, places it and passes it on to its
 * other neighbours, so packets stay verifiable while the tracker is away (a restart). Each node
 * passes each sequence on once — the first time a neighbour tells it, even if the tracker told it
 * first, so a neighbour still without a tracker hears it — which bounds the flood to one message
 * per link direction per announcement. Work a neighbour can cause is bounded: duplicates cost a
 * lookup; unknown announcements are taken only near the live edge and verified at most
 * PEER_ANNOUNCEMENTS_PER_SECOND per neighbour (bursts of MAX_PEER_ANNOUNCEMENT_BURST); a forged one is
 * dropped, never passed on, and counts against its sender like a forged packet.
 */
export class AnnouncementRelay {
  readonly counters: AnnouncementRelayCounters = {
    accepted: 0,
    forwarded: 0,
    duplicates: 0,
    forged: 0,
    rateLimited: 0,
    refused: 0,
  };
  /** Sequences already passed on. */
  private readonly forwardedSequences = new Set<number>();
  /** Neighbours that told us of a sequence: they are not told again. */
  private readonly heardFrom = new Map<number, Set<PeerId>>();
  /** Announcements being verified (sequence, hash and signature), so copies are not verified twice. */
  private readonly verifying = new Set<string>();
  /** Per neighbour: verification tokens left and when they were counted. */
  private readonly budgets = new Map<PeerId, { tokens: number; at: number }>();

  constructor(private readonly options: AnnouncementRelayOptions) {}

  /** An announcement a neighbour sent. Resolves once it is handled (verification is asynchronous). */
  async fromPeer(from: PeerId, announcement: SignedAnnouncement): Promise<void> {
    const { store } = this.options;
    // Without the broadcaster's key nothing a peer says can be checked: the tracker is trusted, peers are not.
    if (announcement.stream !== this.options.stream || !store.verifiesSignatures) {
      this.counters.refused++;
      return;
    }
    const known = store.announcement(announcement.sequence);
    if (known !== null) {
      this.noteHeard(announcement.sequence, from);
      this.counters.duplicates++;
      // Pass on our verified copy (not theirs: only sequence and hash were compared).
      if (known.sha256 === announcement.sha256) this.forwardOnce(known);
      return;
    }
    const newest = store.newestAnnouncedSequence;
    if (newest >= 0 && Math.abs(announcement.sequence - newest) > PEER_ANNOUNCEMENT_MAX_DISTANCE) {
      this.counters.refused++;
      return;
    }
    // Only near the edge: far-off sequences a peer invents must not push real ones out of memory.
    this.noteHeard(announcement.sequence, from);
    const key = `${announcement.sequence}:${announcement.sha256}:${announcement.signature}`;
    if (this.verifying.has(key)) {
      this.counters.duplicates++;
      return;
    }
    if (!this.admit(from)) {
      this.counters.rateLimited++;
      return;
    }
    this.verifying.add(key);
    let outcome;
    try {
      outcome = await store.offer(announcement, 'peer');
    } finally {
      this.verifying.delete(key);
    }
    switch (outcome) {
      case 'added':
        this.counters.accepted++;
        // Passed on before the held packets are released, so on every link the announcement is
        // written ahead of the packets it covers.
        this.forwardOnce(announcement);
        this.options.added();
        return;
      case 'known': {
        // Another copy (the tracker's, or a neighbour's) was placed while this one was verified.
        this.counters.duplicates++;
        const placed = store.announcement(announcement.sequence);
        if (placed?.sha256 === announcement.sha256) this.forwardOnce(placed);
        return;
      }
      case 'badSignature':
        this.counters.forged++;
        this.options.reportForged(from);
        return;
      case 'refused':
        this.counters.refused++;
        return;
      default:
        unreachable(outcome, 'announcement outcome');
    }
  }

  private forwardOnce(announcement: SignedAnnouncement): void {
    const sequence = announcement.sequence;
    if (this.forwardedSequences.has(sequence)) return;
    this.forwardedSequences.add(sequence);
    this.counters.forwarded++;
    this.options.forward(announcement, [...(this.heardFrom.get(sequence) ?? [])]);
    this.forget(this.forwardedSequences);
  }

  private noteHeard(sequence: number, from: PeerId): void {
    let peers = this.heardFrom.get(sequence);
    if (peers === undefined) {
      peers = new Set();
      this.heardFrom.set(sequence, peers);
      this.forget(this.heardFrom);
    }
    peers.add(from);
  }

  /** Keeps the REMEMBERED_SEQUENCES newest sequences of a set or map. */
  private forget(remembered: Set<number> | Map<number, unknown>): void {
    if (remembered.size <= REMEMBERED_SEQUENCES) return;
    const sequences = [...remembered.keys()].sort((a, b) => a - b);
    for (const s of sequences.slice(0, sequences.length - REMEMBERED_SEQUENCES)) remembered.delete(s);
  }

  /** One verification from `peer` if its token bucket has a token. */
  private admit(peer: PeerId): boolean {
    const now = this.options.now();
    let budget = this.budgets.get(peer);
    if (budget === undefined) {
      if (this.budgets.size >= MAX_BUDGETS) this.budgets.clear();
      budget = { tokens: MAX_PEER_ANNOUNCEMENT_BURST, at: now };
      this.budgets.set(peer, budget);
    }
    const refilled = (Math.max(0, now - budget.at) * PEER_ANNOUNCEMENTS_PER_SECOND) / 1000;
    budget.tokens = Math.min(MAX_PEER_ANNOUNCEMENT_BURST, budget.tokens + refilled);
    budget.at = now;
    if (budget.tokens < 1) return false;
    budget.tokens--;
    return true;
  }
}
