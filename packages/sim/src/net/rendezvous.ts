import { shuffleInPlace, type Random } from '@chunkycast/engine';
import { REPORTS_TO_BAN } from '@chunkycast/wire';

/**
 * How the rendezvous server picks the peers it names to a member asking to bootstrap:
 * - `draw`: up to 3·count draws with replacement from the pool, skipping the requester, repeats
 *   and banned peers (cheap with thousands of members; may name fewer than asked);
 * - `shuffle`: a uniformly random subset of the pool without the requester (exactly `count`
 *   when there are enough; the engine tests' small swarms).
 */
export type PeerSampling = 'draw' | 'shuffle';

export interface RendezvousOptions {
  readonly sampling: PeerSampling;
  /** Every choice the rendezvous makes draws from this stream. */
  readonly random: Random;
  /** The members it can name, in a stable order (the order is part of the seeded outcome). */
  readonly pool: () => readonly number[];
  /** How long its answer takes to reach the requester (ms). */
  readonly answerDelayMs: (requester: number) => number;
  /** When a cut-off report from `reporter` reaches it (ms after the cut-off). */
  readonly reportDelayMs?: (reporter: number) => number;
  /** Peers that are never banned (the true source: colluding liars must not cut the stream off). */
  readonly neverBanned?: ReadonlySet<number>;
}

/**
 * The rendezvous server: answers bootstrap requests and, like the tracker, stops introducing and
 * signalling for a peer that REPORTS_TO_BAN distinct members reported cut off.
 */
export class Rendezvous {
  /** Peers refused new connections, and from when (their reports' arrival). */
  readonly bannedAt = new Map<number, number>();
  /** Distinct members that reported each peer cut off, until it is banned. */
  private readonly cutOffReporters = new Map<number, Set<number>>();

  constructor(private readonly options: RendezvousOptions) {}

  /** The peers named to `requester`, and when the answer arrives. */
  answer(requester: number, count: number, now: number): { readonly peers: number[]; readonly atMs: number } {
    const pool = this.options.pool();
    const r = this.options.random;
    let peers: number[];
    if (this.options.sampling === 'shuffle') {
      const candidates = pool.filter((id) => id !== requester && !this.bannedNow(id, now));
      shuffleInPlace(candidates, r);
      peers = candidates.slice(0, count);
    } else {
      peers = [];
      for (let i = 0; i < count * 3 && peers.length < count && pool.length > 0; i++) {
        const id = pool[r.int(pool.length)] ?? 0;
        if (id !== requester && !peers.includes(id) && !this.bannedNow(id, now)) peers.push(id);
      }
    }
    return { peers, atMs: now + this.options.answerDelayMs(requester) };
  }

  /**
   * `reporter` cut `peer` off at `now`; the report reaches the rendezvous after `reportDelayMs`
   * and REPORTS_TO_BAN distinct reporters ban the peer from new connections.
   */
  reportCutOff(reporter: number, peer: number, now: number): void {
    if (this.options.neverBanned?.has(peer) === true || this.bannedAt.has(peer)) return;
    const reporters = this.cutOffReporters.get(peer) ?? new Set<number>();
    reporters.add(reporter);
    this.cutOffReporters.set(peer, reporters);
    if (reporters.size < REPORTS_TO_BAN) return;
    this.cutOffReporters.delete(peer);
    this.bannedAt.set(peer, now + (this.options.reportDelayMs?.(reporter) ?? 0));
  }

  bannedNow(peer: number, now: number): boolean {
    if (this.bannedAt.size === 0) return false;
    const at = this.bannedAt.get(peer);
    return at !== undefined && at <= now;
  }
}
