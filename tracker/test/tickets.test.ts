import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  deriveTrackerSecret,
  makeJoinToken,
  makeResumeTicket,
  readResumeTicket,
  sourceIdFor,
  verifyJoinToken,
} from '@chunkycast/tracker';

const SECRET = 'join-secret-0123456789';
const NOW_MS = 1_800_000_000_000;

describe('join tokens', () => {
  it('have the documented format, so any HMAC library can mint them', () => {
    const token = makeJoinToken(SECRET, 'live', NOW_MS + 60_000);
    const expiresAtSec = String((NOW_MS + 60_000) / 1000);
    const mac = createHmac('sha256', SECRET)
      .update(`chunkycast-join-v1\nlive\n${expiresAtSec}`)
      .digest('base64url');
    expect(token).toBe(`${expiresAtSec}.${mac}`);
  });

  it('verify for their stream until they expire', () => {
    const token = makeJoinToken(SECRET, 'live', NOW_MS + 60_000);
    expect(verifyJoinToken(SECRET, 'live', token, NOW_MS)).toEqual({
      ok: true,
      expiresAtMs: NOW_MS + 60_000,
    });
    expect(verifyJoinToken(SECRET, 'live', token, NOW_MS + 59_999).ok).toBe(true);
    expect(verifyJoinToken(SECRET, 'live', token, NOW_MS + 60_000)).toEqual({
      ok: false,
      problem: 'expired',
    });
  });

  it('are refused for another stream, another secret, or when tampered with', () => {
    const token = makeJoinToken(SECRET, 'live', NOW_MS + 60_000);
    expect(verifyJoinToken(SECRET, 'other', token, NOW_MS)).toEqual({ ok: false, problem: 'badSignature' });
    expect(verifyJoinToken('another-secret-0123', 'live', token, NOW_MS)).toEqual({
      ok: false,
      problem: 'badSignature',
    });
    const [expiry, mac] = token.split('.') as [string, string];
    // A later expiry with the old MAC: the expiry is signed.
    expect(verifyJoinToken(SECRET, 'live', `${Number(expiry) + 3600}.${mac}`, NOW_MS).ok).toBe(false);
    const flipped = `${mac.startsWith('A') ? 'B' : 'A'}${mac.slice(1)}`;
    expect(verifyJoinToken(SECRET, 'live', `${expiry}.${flipped}`, NOW_MS)).toEqual({
      ok: false,
      problem: 'badSignature',
    });
    for (const junk of ['', 'abc', expiry, `${expiry}.`, `x${expiry}.${mac}`, `${expiry}.${mac}x`, `.${mac}`])
      expect(verifyJoinToken(SECRET, 'live', junk, NOW_MS)).toEqual({ ok: false, problem: 'malformed' });
  });

  it('refuse to be minted for a bad stream id', () => {
    expect(() => makeJoinToken(SECRET, 'a/b', NOW_MS)).toThrow(RangeError);
  });
});

describe('source ids and the tracker secret', () => {
  it('derive the tracker secret from the broadcaster key as documented', () => {
    expect(deriveTrackerSecret('key')).toEqual(
      createHmac('sha256', 'key').update('chunkycast-tracker-secret-v1').digest(),
    );
  });

  it('are the first 4 bytes of the documented HMAC, per stream and secret, never 0', () => {
    const secret = deriveTrackerSecret('key');
    const expected = createHmac('sha256', secret)
      .update('chunkycast-source-id-v1\nlive')
      .digest()
      .readUInt32BE(0);
    expect(sourceIdFor(secret, 'live')).toBe(expected === 0 ? 1 : expected);
    expect(sourceIdFor(secret, 'live')).toBe(sourceIdFor(deriveTrackerSecret('key'), 'live'));
    const ids = new Set(Array.from({ length: 200 }, (_, i) => sourceIdFor(secret, `s${i}`)));
    expect(ids.size).toBe(200);
    expect(ids.has(0)).toBe(false);
    expect(sourceIdFor(deriveTrackerSecret('other'), 'live')).not.toBe(sourceIdFor(secret, 'live'));
  });
});

describe('resume tickets', () => {
  const secret = deriveTrackerSecret('key');
  const claim = {
    stream: 'live',
    peerId: 0xdead_beef,
    role: 'viewer',
    expiresAtSec: NOW_MS / 1000 + 600,
  } as const;

  it('carry their claim, signed, until they expire', () => {
    const ticket = makeResumeTicket(secret, claim);
    expect(ticket).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(ticket.length).toBeLessThanOrEqual(512);
    expect(readResumeTicket(secret, ticket, NOW_MS)).toEqual({ ok: true, claim });
    expect(readResumeTicket(secret, ticket, NOW_MS + 600_000)).toEqual({ ok: false, problem: 'expired' });
    // The longest stream id still fits the protocol's 512 characters.
    expect(
      makeResumeTicket(secret, { ...claim, stream: 'x'.repeat(64), role: 'source' }).length,
    ).toBeLessThan(512);
  });

  it('are refused when signed with another secret or altered', () => {
    const ticket = makeResumeTicket(secret, claim);
    expect(readResumeTicket(deriveTrackerSecret('other'), ticket, NOW_MS)).toEqual({
      ok: false,
      problem: 'badSignature',
    });
    const [, mac] = ticket.split('.') as [string, string];
    const forged = Buffer.from(
      JSON.stringify({ s: 'live', p: 1, r: 'viewer', e: claim.expiresAtSec }),
    ).toString('base64url');
    expect(readResumeTicket(secret, `${forged}.${mac}`, NOW_MS)).toEqual({
      ok: false,
      problem: 'badSignature',
    });
    for (const junk of ['', 'nodot', '.abc', `${forged}.short`, `a b.${mac}`])
      expect(readResumeTicket(secret, junk, NOW_MS)).toEqual({ ok: false, problem: 'malformed' });
  });

  it('refuse a correctly signed payload of the wrong shape', () => {
    const sign = (payload: unknown): string => {
      const text = Buffer.from(JSON.stringify(payload)).toString('base64url');
      return `${text}.${createHmac('sha256', secret).update(text).digest('base64url')}`;
    };
    const e = claim.expiresAtSec;
    for (const bad of [
      { s: 'live', p: 0, r: 'viewer', e },
      { s: 'live', p: 2 ** 32, r: 'viewer', e },
      { s: 'a/b', p: 5, r: 'viewer', e },
      { s: 'live', p: 5, r: 'admin', e },
      { s: 'live', p: 5, r: 'viewer', e: 'soon' },
      [1, 2],
    ])
      expect(readResumeTicket(secret, sign(bad), NOW_MS)).toEqual({ ok: false, problem: 'malformed' });
    expect(readResumeTicket(secret, sign({ s: 'live', p: 5, r: 'viewer', e }), NOW_MS).ok).toBe(true);
  });
});
