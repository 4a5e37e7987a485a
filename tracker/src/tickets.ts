/**
 * The tracker's HMAC credentials: viewer join tokens (minted by the broadcaster's site, checked
 * here), resume tickets (minted and checked here, so a reconnecting peer gets its old id back, even
 * from a restarted tracker) and the deterministic source id of a stream. All of them are stateless:
 * a tracker with the same secrets honours what another (or an earlier) one issued.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { MAX_TICKET_LENGTH, STREAM_ID_PATTERN, type PeerId, type PeerRole } from '@chunkycast/wire';

/** Domain-separation labels: one key never signs two kinds of message that could be confused. */
const JOIN_LABEL = 'chunkycast-join-v1';
const TRACKER_SECRET_LABEL = 'chunkycast-tracker-secret-v1';
const SOURCE_ID_LABEL = 'chunkycast-source-id-v1';

/** Unix seconds, as tokens and tickets carry them (10 digits until the year 2286). */
const SECONDS_PATTERN = /^\d{1,12}$/;
/** base64url of a 32-byte HMAC-SHA256, unpadded. */
const MAC_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export type CredentialProblem = 'malformed' | 'badSignature' | 'expired';

export type JoinTokenCheck =
  | { readonly ok: true; readonly expiresAtMs: number }
  | { readonly ok: false; readonly problem: CredentialProblem };

function hmac(secret: string | Buffer, text: string): Buffer {
  return createHmac('sha256', secret).update(text, 'utf8').digest();
}

/** Constant time for equal lengths; a wrong length (only from a malformed input) is just false. */
function macEquals(expected: Buffer, presentedBase64url: string): boolean {
  const presented = Buffer.from(presentedBase64url, 'base64url');
  return presented.length === expected.length && timingSafeEqual(presented, expected);
}

/**
 * A viewer join token: `<expiresAtSec>.<base64url HMAC-SHA256(joinSecret, "chunkycast-join-v1\n" +
 * stream + "\n" + expiresAtSec)>`. The broadcaster's site mints one per page view (this function,
 * the `token` command, or any HMAC library) and passes it to the player.
 */
export function makeJoinToken(secret: string, stream: string, expiresAtMs: number): string {
  if (!STREAM_ID_PATTERN.test(stream)) throw new RangeError(`not a stream id: ${JSON.stringify(stream)}`);
  if (!Number.isSafeInteger(Math.floor(expiresAtMs)) || expiresAtMs < 0)
    throw new RangeError(`expiresAtMs must be a non-negative time, got ${expiresAtMs}`);
  const expiresAtSec = String(Math.floor(expiresAtMs / 1000));
  const mac = hmac(secret, `${JOIN_LABEL}\n${stream}\n${expiresAtSec}`).toString('base64url');
  return `${expiresAtSec}.${mac}`;
}

/** Checks a join token for `stream` at `nowMs`: signature first (constant time), then expiry. */
export function verifyJoinToken(
  secret: string,
  stream: string,
  token: string,
  nowMs: number,
): JoinTokenCheck {
  const dot = token.indexOf('.');
  const expiresAtSec = token.slice(0, dot);
  const mac = token.slice(dot + 1);
  if (dot < 0 || !SECONDS_PATTERN.test(expiresAtSec) || !MAC_PATTERN.test(mac))
    return { ok: false, problem: 'malformed' };
  if (!macEquals(hmac(secret, `${JOIN_LABEL}\n${stream}\n${expiresAtSec}`), mac))
    return { ok: false, problem: 'badSignature' };
  const expiresAtMs = Number(expiresAtSec) * 1000;
  if (expiresAtMs <= nowMs) return { ok: false, problem: 'expired' };
  return { ok: true, expiresAtMs };
}

/**
 * The key of resume tickets and source ids when none is configured: derived from the broadcaster
 * key, so a restarted tracker with the same configuration honours the tickets it issued before.
 */
export function deriveTrackerSecret(broadcasterKey: string): Buffer {
  return hmac(broadcasterKey, TRACKER_SECRET_LABEL);
}

/**
 * A stream's source id: the first 4 bytes (big-endian u32) of HMAC(trackerSecret,
 * "chunkycast-source-id-v1\n" + stream), 0 mapped to 1. Deterministic, so viewers that resume on a
 * restarted tracker still name the true source by the id their trees were built with.
 */
export function sourceIdFor(trackerSecret: string | Buffer, stream: string): PeerId {
  const id = hmac(trackerSecret, `${SOURCE_ID_LABEL}\n${stream}`).readUInt32BE(0);
  return id === 0 ? 1 : id;
}

/** What a resume ticket vouches for: this peer id, in this stream, with this role, until then. */
export interface ResumeClaim {
  readonly stream: string;
  readonly peerId: PeerId;
  readonly role: PeerRole;
  readonly expiresAtSec: number;
}

export type ResumeTicketCheck =
  | { readonly ok: true; readonly claim: ResumeClaim }
  | { readonly ok: false; readonly problem: CredentialProblem };

/** `base64url(JSON {s, p, r, e})` + "." + `base64url(HMAC(trackerSecret, that payload text))`. */
export function makeResumeTicket(trackerSecret: string | Buffer, claim: ResumeClaim): string {
  const payload = Buffer.from(
    JSON.stringify({ s: claim.stream, p: claim.peerId, r: claim.role, e: claim.expiresAtSec }),
    'utf8',
  ).toString('base64url');
  return `${payload}.${hmac(trackerSecret, payload).toString('base64url')}`;
}

/** Checks a ticket's signature (constant time), shape and expiry at `nowMs`. */
export function readResumeTicket(
  trackerSecret: string | Buffer,
  ticket: string,
  nowMs: number,
): ResumeTicketCheck {
  const dot = ticket.indexOf('.');
  const payload = ticket.slice(0, dot);
  const mac = ticket.slice(dot + 1);
  if (
    dot <= 0 ||
    ticket.length > MAX_TICKET_LENGTH ||
    !/^[A-Za-z0-9_-]+$/.test(payload) ||
    !MAC_PATTERN.test(mac)
  )
    return { ok: false, problem: 'malformed' };
  if (!macEquals(hmac(trackerSecret, payload), mac)) return { ok: false, problem: 'badSignature' };
  // Signed by us, so the shape should hold; checked anyway, as a secret shared with an older
  // version could have signed another layout.
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return { ok: false, problem: 'malformed' };
  }
  if (typeof value !== 'object' || value === null) return { ok: false, problem: 'malformed' };
  const { s, p, r, e } = value as Record<string, unknown>;
  if (
    typeof s !== 'string' ||
    !STREAM_ID_PATTERN.test(s) ||
    typeof p !== 'number' ||
    !Number.isInteger(p) ||
    p < 1 ||
    p > 0xffff_ffff ||
    (r !== 'viewer' && r !== 'source') ||
    typeof e !== 'number' ||
    !Number.isSafeInteger(e)
  )
    return { ok: false, problem: 'malformed' };
  if (e * 1000 <= nowMs) return { ok: false, problem: 'expired' };
  return { ok: true, claim: { stream: s, peerId: p, role: r, expiresAtSec: e } };
}
