import { REPORTS_TO_BAN, type PeerId } from '@chunkycast/wire';

/** A ban, and reports short of one, last this long: a peer that misbehaved is unlikely to reform. */
export const BAN_MS = 10 * 60_000;
/** Peers with reports or a ban remembered per stream; beyond, the oldest are forgotten. */
const MAX_TRACKED_PEERS = 4096;

interface Entry {
  readonly reporters: Set<PeerId>;
  /** Unix ms of the first report (the entry expires BAN_MS after it, or after the ban). */
  since: number;
  bannedAt: number | null;
}

/**
 * One stream's reports of cut-off peers (`PeerReport.cutOff`), and the peers banned from new
 * connections once REPORTS_TO_BAN distinct members reported them. Per tracker process: in a cluster
 * each process counts the reports of its own members and refuses the signals it relays itself.
 */
export class CutOffBook {
  private readonly entries = new Map<PeerId, Entry>();

  constructor(
    private readonly now: () => number = Date.now,
    /** Never banned: the stream's true source (three colluding viewers must not cut the stream off). */
    private readonly protectedPeer: PeerId | null = null,
  ) {}

  /**
   * `reporter` cut `peer` off. Returns true when this report bans it. A member reporting itself or
   * reporting the same peer again counts once; reports against the protected peer count nothing.
   */
  report(reporter: PeerId, peer: PeerId): boolean {
    if (reporter === peer || peer === this.protectedPeer) return false;
    const now = this.now();
    let entry = this.live(peer, now);
    if (entry === undefined) {
      entry = { reporters: new Set(), since: now, bannedAt: null };
      this.entries.set(peer, entry);
      const oldest = this.entries.keys().next();
      if (this.entries.size > MAX_TRACKED_PEERS && oldest.done !== true) this.entries.delete(oldest.value);
    }
    if (entry.bannedAt !== null) return false;
    entry.reporters.add(reporter);
    if (entry.reporters.size < REPORTS_TO_BAN) return false;
    entry.bannedAt = now;
    return true;
  }

  /** Whether new connections to or from `peer` are refused. */
  isBanned(peer: PeerId): boolean {
    return (this.live(peer, this.now())?.bannedAt ?? null) !== null;
  }

  /** Peers banned now. */
  get bannedCount(): number {
    const now = this.now();
    let n = 0;
    // A copy of the keys: live() deletes expired entries as it goes.
    for (const peer of [...this.entries.keys()]) if ((this.live(peer, now)?.bannedAt ?? null) !== null) n++;
    return n;
  }

  private live(peer: PeerId, now: number): Entry | undefined {
    const entry = this.entries.get(peer);
    if (entry === undefined) return undefined;
    if (now - (entry.bannedAt ?? entry.since) < BAN_MS) return entry;
    this.entries.delete(peer);
    return undefined;
  }
}
