/**
 * The tracker's per-connection and per-address limits, free of sockets and clocks (time is passed
 * in), so they are tested with virtual time.
 */

const MS_PER_S = 1000;
/** An IPv6 address has eight 16-bit groups; a /64 is the first four. */
const IPV6_GROUPS = 8;
const IPV6_GROUPS_IN_SLASH_64 = 4;

/** Every limit the tracker enforces, as counted in `limitHits` and `limit_hits_total{limit}`. */
export const LIMIT_KINDS = [
  /** A frame over the protocol's 64 KiB (answered `tooLarge`), or over ws's cap (closed 1009). */
  'frameSize',
  /** A frame beyond the connection's message rate (answered `rateLimited`, dropped). */
  'messageRate',
  /** A connection beyond the per-address limit (answered `tooManyConnections`, closed 1008). */
  'connectionsPerAddress',
  /** A connection beyond the process's limit (answered `tooManyConnections`, closed 1008). */
  'connections',
  /** The undecodable-frame budget of one connection ran out (closed 1008). */
  'badFrames',
  /** A plain HTTP connection beyond the per-address limit (answered 503, closed). */
  'httpConnectionsPerAddress',
  /** A client that did not send its request headers in time (answered 408, closed). */
  'httpHeaderTime',
] as const;

export type LimitKind = (typeof LIMIT_KINDS)[number];

/**
 * A token bucket: `ratePerSecond` sustained, bursts up to `burst`. `take` answers whether one
 * message may pass now. `overflow` counts the messages refused since the bucket was last full, so a
 * client that briefly bursts is told off but one that keeps sending too fast can be cut off.
 */
export class TokenBucket {
  private tokens: number;
  private lastMs: number;
  /** Refused takes since the bucket was last full. */
  overflow = 0;

  constructor(
    readonly ratePerSecond: number,
    readonly burst: number,
    nowMs: number,
  ) {
    if (!(ratePerSecond > 0) || !(burst >= 1))
      throw new RangeError(`a token bucket needs rate > 0 and burst ≥ 1 (got ${ratePerSecond}, ${burst})`);
    this.tokens = burst;
    this.lastMs = nowMs;
  }

  take(nowMs: number): boolean {
    // A clock that steps back must not mint tokens or throw: treat it as no time passing.
    const elapsedMs = Math.max(0, nowMs - this.lastMs);
    this.lastMs = Math.max(this.lastMs, nowMs);
    this.tokens = Math.min(this.burst, this.tokens + (elapsedMs * this.ratePerSecond) / MS_PER_S);
    if (this.tokens >= this.burst) this.overflow = 0;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    this.overflow++;
    return false;
  }
}

/**
 * Open connections per address key. `tryAdd` admits one unless `max` are already open (0 = no
 * limit); every admitted key must be removed exactly once.
 */
export class AddressCounts {
  private readonly counts = new Map<string, number>();

  tryAdd(key: string, max: number): boolean {
    const open = this.counts.get(key) ?? 0;
    if (max > 0 && open >= max) return false;
    this.counts.set(key, open + 1);
    return true;
  }

  remove(key: string): void {
    const open = this.counts.get(key) ?? 0;
    if (open <= 1) this.counts.delete(key);
    else this.counts.set(key, open - 1);
  }

  count(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  /** Distinct keys with an open connection. */
  get size(): number {
    return this.counts.size;
  }
}

/**
 * The key a remote address is limited under. IPv4 (also IPv4-mapped IPv6) as the address itself;
 * IPv6 by its /64, because one subscriber usually holds a whole /64 and could otherwise open
 * connections from 2^64 addresses. Unparseable input is its own key.
 */
export function addressKey(remoteAddress: string | undefined): string {
  if (remoteAddress === undefined || remoteAddress === '') return '?';
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(remoteAddress);
  if (mapped?.[1] !== undefined) return mapped[1];
  if (!remoteAddress.includes(':')) return remoteAddress;
  const groups = expandIPv6(remoteAddress.split('%')[0] ?? '');
  if (groups === null) return remoteAddress;
  return `${groups.slice(0, IPV6_GROUPS_IN_SLASH_64).join(':')}::/64`;
}

/** The eight 16-bit groups of an IPv6 address as lower-case hex without leading zeros, or null. */
function expandIPv6(address: string): string[] | null {
  const halves = address.split('::');
  if (halves.length > 2) return null;
  const parse = (part: string | undefined): string[] | null => {
    if (part === undefined || part === '') return [];
    const groups = part.split(':');
    // A trailing dotted IPv4 (::1.2.3.4) occupies the last two groups; they are beyond /64 anyway.
    const last = groups[groups.length - 1] ?? '';
    if (last.includes('.')) groups.splice(groups.length - 1, 1, '0', '0');
    if (!groups.every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return null;
    return groups.map((g) => parseInt(g, 16).toString(16));
  };
  const head = parse(halves[0]);
  const tail = parse(halves[1]);
  if (head === null || tail === null) return null;
  if (halves.length === 1) return head.length === IPV6_GROUPS ? head : null;
  const missing = IPV6_GROUPS - head.length - tail.length;
  if (missing < 1) return null;
  return [...head, ...Array<string>(missing).fill('0'), ...tail];
}
