import type { PeerId } from '@chunkycast/wire';

/*
 * Hostile members (issue 18). The thesis assumes every member follows the protocol; none of what
 * follows is in it. A member judges its neighbours by what it can see itself and never takes
 * another member's word about a third: a parent is audited on the packets it owed us, a sender
 * on the sequences and copies it sends, a requester on how often it asks.
 */

/*
 * How much each distrust counts (a share of maxViolationsPerPeer): a parent silent while saying it
 * receives is a half (two such cut it off); a failed audit a quarter, because an honest parent can
 * fail one when it could not repair (it joined late), while a withholder fails every window. A
 * loop counts nothing: the parent is only suspected (honest switches close a few loops too).
 */
export const SILENT_PARENT_SHARE = 0.5;
export const FAILED_AUDIT_SHARE = 0.25;
/**
 * A replayed packet: a fifth (five cut the sender off). An honest sender never sends a packet twice
 * outside REPLAY_GRACE_MS (a link does not duplicate), so a few suffice; one alone could be a
 * hand-off we misread.
 */
export const REPLAY_SHARE = 0.2;

/**
 * Packets in the sliding window by which a parent is judged. At the simulator's 2 packets per slice
 * per second that is 8 s of one slice; fewer packets cannot tell a parent that forwards half (a
 * `selective` attacker) from an honest one behind a lossy link.
 */
export const AUDIT_WINDOW_PACKETS = 16;
/** The bits of a window's judgements (AUDIT_WINDOW_PACKETS ≤ 31). */
export const AUDIT_WINDOW_MASK = 2 ** AUDIT_WINDOW_PACKETS - 1;
/**
 * A parent that failed to deliver more than this many of the last AUDIT_WINDOW_PACKETS packets
 * judged (nearly a third) is distrusted. An honest parent forwards every packet it gets, repaired
 * ones too (they reach us late, not never), so what it misses is only what its link to us loses:
 * more than 5 of 16 on a link that loses 5% in bursts of 4 takes two bursts in a window (about 1
 * window in 60), while a parent forwarding half misses more than 5 in 90% of windows.
 */
export const AUDIT_MAX_MISSES = 5;
/**
 * A packet is judged only once a later one arrived this long ago: by then an honest parent has
 * repaired its own losses (its deadline falls within the 5 s buffer) and forwarded them.
 */
export const AUDIT_LAG_MS = 6000;
/**
 * A packet this close to leaving the ring is judged even before AUDIT_LAG_MS: in a fast stream the
 * ring holds less time than the lag (64 packets at 16 per second per slice are 4 s), and a packet
 * that has left it cannot be judged at all. The audit runs once per decision interval, so the
 * margin is a second's packets at up to 8 per second per slice.
 */
export const AUDIT_RING_MARGIN_PACKETS = 8;
/**
 * Packets are judged only from this long after our own playback began (never before it: members
 * repair nothing before they play, so an honest parent whose own parent withheld packets could not
 * make up for them). 5 and 10 s were tried: they only delayed catching a half-forwarder by as
 * much, and honest parents were accused no more often at 0 in 300-member runs.
 */
export const AUDIT_SETTLE_MS = 0;
/**
 * A distrusted peer is not taken as a parent on any slice for this long: it harms us once, not
 * again with the next slice it is offered. Distrusts fill the violation budget by their shares.
 */
export const SUSPECT_MS = 60_000;
/**
 * A tree sender may send a copy of a packet it already sent us only within this long of our
 * taking it as parent (a parent taking us back resends what it holds); later it is a replay.
 */
export const REPLAY_GRACE_MS = 3000;
/**
 * Requests a peer may make of us, in a burst and per second after; beyond, each request is
 * dropped and is a violation. Parent requests (switch, forced, latency permission): a joiner may
 * ask one neighbour for all 16 slices at once, and a refused request waits rejectBackoffMs (5 s)
 * before the same neighbour is asked again, so 16 and 4 a second leave room; each one accepted
 * costs us a resend of what we hold, which 50 a second from a flooder made the upload of every
 * honest neighbour (its audience went to the origin, docs/hostile.md). A packet repair request
 * costs the packets it asks for (up to 32): 64 at once and 32 a second from one requester, a whole
 * 16-slice stream at 2 packets per slice per second; 25 requests a second of 16 packets each from
 * a flooder were served in full and took much of the audience to the origin. The honest
 * loss scenarios (5% bursty loss, repair on) stay under both buckets; parent requests at 8 and 2
 * a second did not (violations in an honest 300-member run, slower joins).
 */
export type RequestKind = 'parent' | 'repair';
export const REQUEST_LIMITS: Readonly<Record<RequestKind, { burst: number; perSecond: number }>> = {
  parent: { burst: 16, perSecond: 4 },
  repair: { burst: 64, perSecond: 32 },
};
/**
 * A slice that has brought a member nothing for this long, while at least half its slices flow and
 * no neighbour receives it, is starved (a withholding slice source starves its whole tree, and the
 * members below it have no one else to ask). The member tells the true source, at most once per
 * this interval per slice.
 */
export const STARVED_SLICE_MS = 12_000;
/**
 * The true source replaces a slice's root once this many distinct members said within
 * ROOT_COMPLAINT_WINDOW_MS that the slice starves, unless the root was assigned less than
 * ROOT_COMPLAINT_GRACE_MS ago (a new tree needs a few seconds to stand). A replaced root is not
 * made a root again for SUSPECT_MS. Three, so one liar cannot unseat an honest root alone.
 */
export const ROOT_COMPLAINTS = 3;
export const ROOT_COMPLAINT_WINDOW_MS = 10_000;
export const ROOT_COMPLAINT_GRACE_MS = 10_000;

/** Peers remembered for suspicion and request rates, beyond which the oldest are forgotten. */
const MAX_TRACKED_PEERS = 1024;

/** Per-peer suspicion and request rates: bounded, oldest first. */
export class Trust {
  private readonly suspectUntil = new Map<PeerId, number>();
  private readonly buckets: Record<RequestKind, Map<PeerId, { tokens: number; at: number }>> = {
    parent: new Map(),
    repair: new Map(),
  };

  suspect(peer: PeerId, now: number): void {
    this.suspectUntil.delete(peer);
    this.suspectUntil.set(peer, now + SUSPECT_MS);
    evictOldest(this.suspectUntil);
  }

  isSuspect(peer: PeerId, now: number): boolean {
    const until = this.suspectUntil.get(peer);
    if (until === undefined) return false;
    if (until > now) return true;
    this.suspectUntil.delete(peer);
    return false;
  }

  /** One request from `peer`: false when it has asked more than the bucket allows. */
  takeRequestToken(peer: PeerId, kind: RequestKind, now: number, cost = 1): boolean {
    const { burst, perSecond } = REQUEST_LIMITS[kind];
    const buckets = this.buckets[kind];
    let b = buckets.get(peer);
    if (b === undefined) {
      b = { tokens: burst, at: now };
      buckets.set(peer, b);
      evictOldest(buckets);
    }
    b.tokens = Math.min(burst, b.tokens + ((now - b.at) * perSecond) / 1000);
    b.at = now;
    if (b.tokens < cost) return false;
    b.tokens -= cost;
    return true;
  }
}

function evictOldest<V>(map: Map<PeerId, V>): void {
  if (map.size <= MAX_TRACKED_PEERS) return;
  const oldest = map.keys().next();
  if (oldest.done !== true) map.delete(oldest.value);
}
