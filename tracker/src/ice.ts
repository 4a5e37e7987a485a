/**
 * The STUN and TURN servers a tracker hands its peers. TURN credentials follow the TURN REST API
 * convention that coturn checks with `use-auth-secret` / `static-auth-secret`: username
 * `<expiry unix s>:<peer id>`, password base64(HMAC-SHA1(secret, username)). coturn recomputes the
 * HMAC with the same secret and refuses a username whose expiry has passed, so the tracker and the
 * TURN server share one secret and nothing per user.
 */
import { createHmac } from 'node:crypto';
import {
  ICE_URL_PATTERN,
  MAX_ICE_FIELD_LENGTH,
  MAX_ICE_URLS,
  type IceConfig,
  type IceServer,
  type PeerId,
} from '@chunkycast/wire';

/**
 * Lifetime of TURN credentials: 1 h. Short-lived is the point — every viewer can read its
 * credentials in the page, so a copied pair must stop working soon — and the tracker renews them
 * before they expire anyway (ICE_RENEW_AT_FRACTION), so the lifetime only needs to cover a peer
 * that misses its renewal (a tracker outage: its rejoin's welcome brings fresh ones). An hour is far
 * beyond any clock skew between the tracker and the TURN server, and costs one small frame per peer
 * every 48 min. Credentials only matter when a connection allocates its relay: coturn keeps an
 * allocation that was authenticated while its credentials were valid (refreshes reuse the session's
 * key), so a relayed link outlives them.
 */
export const DEFAULT_TURN_TTL_S = 3600;
/** Shorter would make renewals chase clock skew between the tracker and the TURN server. */
export const MIN_TURN_TTL_S = 60;
/** A week: longer is no longer "short-lived". */
export const MAX_TURN_TTL_S = 7 * 24 * 3600;
/**
 * Fresh credentials go out when this share of the lifetime has passed: the remaining fifth (12 min
 * at the default hour) is the margin for the renewal to reach a peer, or for a peer that is
 * reconnecting to get fresh ones in its welcome.
 */
export const ICE_RENEW_AT_FRACTION = 0.8;

/** What the operator configured (see config.ts: --stun-urls, --turn-urls, --turn-secret, --turn-ttl-s). */
export interface IceSettings {
  /** `stun:` URLs, handed out as one server without credentials. */
  readonly stunUrls: readonly string[];
  /** `turn:` / `turns:` URLs, handed out as one server with per-peer credentials. */
  readonly turnUrls: readonly string[];
  /** The shared secret of the TURN REST API (coturn `static-auth-secret`); required with turnUrls. */
  readonly turnSecret: string | null;
  /** Lifetime of each peer's TURN credentials, seconds. */
  readonly turnTtlS: number;
}

export const NO_ICE: IceSettings = {
  stunUrls: [],
  turnUrls: [],
  turnSecret: null,
  turnTtlS: DEFAULT_TURN_TTL_S,
};

/** Said at start and in /healthz when no server is configured. */
export const NO_ICE_WARNING =
  'no STUN or TURN servers configured (--stun-urls, --turn-urls): viewers on different networks will not reach each other';

/**
 * host, IPv4 or a bracketed IPv6 literal; optional port; for TURN an optional transport (RFC 7064,
 * RFC 7065). Stricter than wire's ICE_URL_PATTERN on purpose: a URL without a host passes a browser
 * but makes libdatachannel (the true source's WebRTC) throw when a connection is made.
 */
const STUN_URL = /^stun:(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/;
const TURN_URL = /^turns?:(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?(\?transport=(udp|tcp))?$/;

/**
 * Why `url` is not a usable STUN (`kind` 'stun') or TURN URL, or null if it is. `stuns:` is refused:
 * libdatachannel does not know it and browsers differ.
 */
export function iceUrlProblem(url: string, kind: 'stun' | 'turn'): string | null {
  const expected = kind === 'stun' ? 'stun:HOST[:PORT]' : 'turn:HOST[:PORT][?transport=udp|tcp] or turns:…';
  if (url.length > MAX_ICE_FIELD_LENGTH) return `longer than ${MAX_ICE_FIELD_LENGTH} characters`;
  const match = (kind === 'stun' ? STUN_URL : TURN_URL).exec(url);
  if (match === null || !ICE_URL_PATTERN.test(url)) return `not ${expected}`;
  const port = match[2] === undefined ? null : Number(match[2].slice(1));
  if (port !== null && (port < 1 || port > 65535)) return 'port must be 1‥65535';
  return null;
}

/** Checks settings from code (createTracker's options); the CLI's own messages come from config.ts. */
export function checkIceSettings(settings: IceSettings): void {
  for (const [kind, urls] of [
    ['stun', settings.stunUrls],
    ['turn', settings.turnUrls],
  ] as const) {
    if (urls.length > MAX_ICE_URLS)
      throw new RangeError(`at most ${MAX_ICE_URLS} ${kind} URLs (the protocol's limit per server)`);
    for (const url of urls) {
      const problem = iceUrlProblem(url, kind);
      if (problem !== null) throw new RangeError(`${kind} URL ${JSON.stringify(url)}: ${problem}`);
    }
  }
  if (settings.turnUrls.length > 0 && settings.turnSecret === null)
    throw new RangeError('TURN URLs need the TURN secret (coturn static-auth-secret)');
  if (settings.turnSecret !== null && settings.turnUrls.length === 0)
    throw new RangeError('a TURN secret without TURN URLs is of no use');
  // 2 s at least (tests use it): expiries are whole seconds, so a 1 s lifetime can be almost none.
  if (!Number.isInteger(settings.turnTtlS) || settings.turnTtlS < 2 || settings.turnTtlS > MAX_TURN_TTL_S)
    throw new RangeError(`turnTtlS must be an integer in 2‥${MAX_TURN_TTL_S}, got ${settings.turnTtlS}`);
}

/**
 * TURN REST API credentials for one peer until `expiresAtSec` (unix seconds): what coturn with
 * `use-auth-secret` accepts until then.
 */
export function turnCredentials(
  secret: string,
  peerId: PeerId,
  expiresAtSec: number,
): { readonly username: string; readonly credential: string } {
  const username = `${expiresAtSec}:${peerId}`;
  return { username, credential: createHmac('sha1', secret).update(username, 'utf8').digest('base64') };
}

/** The ICE servers for `peerId` at `nowMs` (unix ms): STUN as configured, TURN with fresh credentials. */
export function iceConfigFor(settings: IceSettings, peerId: PeerId, nowMs: number): IceConfig {
  const servers: IceServer[] = [];
  if (settings.stunUrls.length > 0) servers.push({ urls: [...settings.stunUrls] });
  if (settings.turnUrls.length === 0 || settings.turnSecret === null) return { servers, expiresAtMs: null };
  const expiresAtSec = Math.floor(nowMs / 1000) + settings.turnTtlS;
  servers.push({
    urls: [...settings.turnUrls],
    ...turnCredentials(settings.turnSecret, peerId, expiresAtSec),
  });
  return { servers, expiresAtMs: expiresAtSec * 1000 };
}

/** Whether peers get credentials that must be renewed. */
export function iceExpires(settings: IceSettings): boolean {
  return settings.turnUrls.length > 0 && settings.turnSecret !== null;
}

/** What /healthz shows: counts only (URLs may name internal hosts), and the warning if none. */
export function iceHealth(settings: IceSettings): {
  readonly stun: number;
  readonly turn: number;
  readonly turnTtlS: number | null;
  readonly warning: string | null;
} {
  const none = settings.stunUrls.length === 0 && settings.turnUrls.length === 0;
  return {
    stun: settings.stunUrls.length,
    turn: settings.turnUrls.length,
    turnTtlS: iceExpires(settings) ? settings.turnTtlS : null,
    warning: none ? NO_ICE_WARNING : null,
  };
}
