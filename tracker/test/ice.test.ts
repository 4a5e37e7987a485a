/**
 * ICE servers from the tracker: TURN REST API credentials (checked against a vector computed
 * independently with `openssl dgst -sha1 -hmac`), the welcome's servers, renewals before expiry
 * (with a 2 s lifetime), and /healthz with and without servers.
 */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  checkIceSettings,
  createTracker,
  iceConfigFor,
  iceUrlProblem,
  NO_ICE,
  NO_ICE_WARNING,
  turnCredentials,
  type Logger,
} from '@chunkycast/tracker';
import { cleanUpAfterEach, connect, KEY, start, track, within } from './ws-client.js';

cleanUpAfterEach();

const SECRET = 'coturn-shared-secret-0123';
const TURN = { turnUrls: ['turn:127.0.0.1:3478'], turnSecret: SECRET };

describe('TURN REST API credentials', () => {
  it('match coturn’s check: username <expiry>:<peer id>, password base64(HMAC-SHA1(secret, username))', () => {
    // printf '%s' '1700003600:42' | openssl dgst -sha1 -hmac 'coturn-shared-secret-0123' -binary | base64
    expect(turnCredentials(SECRET, 42, 1_700_003_600)).toEqual({
      username: '1700003600:42',
      credential: 'vEPNPSlFedzSDYuBLxP0Wv5kb5Y=',
    });
    expect(turnCredentials(SECRET, 43, 1_700_003_600).credential).not.toBe('vEPNPSlFedzSDYuBLxP0Wv5kb5Y=');
    expect(turnCredentials('another-secret-0123', 42, 1_700_003_600).credential).not.toBe(
      'vEPNPSlFedzSDYuBLxP0Wv5kb5Y=',
    );
  });

  it('come with STUN first and the expiry in ms; STUN alone expires never', () => {
    const settings = { stunUrls: ['stun:127.0.0.1:3478'], ...TURN, turnTtlS: 600 };
    const ice = iceConfigFor(settings, 42, 1_700_003_000_999);
    expect(ice).toEqual({
      servers: [
        { urls: ['stun:127.0.0.1:3478'] },
        { urls: ['turn:127.0.0.1:3478'], ...turnCredentials(SECRET, 42, 1_700_003_600) },
      ],
      expiresAtMs: 1_700_003_600_000,
    });
    expect(iceConfigFor({ ...NO_ICE, stunUrls: ['stun:a.example'] }, 42, 0)).toEqual({
      servers: [{ urls: ['stun:a.example'] }],
      expiresAtMs: null,
    });
    expect(iceConfigFor(NO_ICE, 42, 0)).toEqual({ servers: [], expiresAtMs: null });
  });

  it('URLs are checked for what browsers and libdatachannel accept', () => {
    expect(iceUrlProblem('stun:stun.example.com:19302', 'stun')).toBeNull();
    expect(iceUrlProblem('stun:[::1]:3478', 'stun')).toBeNull();
    expect(iceUrlProblem('turn:10.0.0.1?transport=tcp', 'turn')).toBeNull();
    expect(iceUrlProblem('turns:turn.example.com:443?transport=tcp', 'turn')).toBeNull();
    expect(iceUrlProblem('turn:a.example', 'stun')).toMatch(/^not stun:HOST/);
    expect(iceUrlProblem('stun:a.example', 'turn')).toMatch(/^not turn:HOST/);
    expect(iceUrlProblem('turn:user:pass@a.example', 'turn')).toMatch(/^not turn:HOST/);
    expect(iceUrlProblem('stun:a.example:70000', 'stun')).toBe('port must be 1‥65535');
    expect(iceUrlProblem(`stun:${'a'.repeat(600)}`, 'stun')).toMatch(/^longer than 512/);
  });

  it('createTracker refuses settings that cannot work', async () => {
    const bad = [
      { turnUrls: ['turn:a.example'] },
      { turnSecret: SECRET },
      { stunUrls: ['http://a.example'] },
      { stunUrls: ['stun:a', 'stun:b', 'stun:c', 'stun:d', 'stun:e'] },
      { ...TURN, turnTtlS: 0 },
      { ...TURN, turnTtlS: 1 },
      { ...TURN, turnTtlS: 1.5 },
    ];
    for (const options of bad) {
      expect(() => {
        checkIceSettings({ ...NO_ICE, ...options });
      }, JSON.stringify(options)).toThrow(RangeError);
      await expect(
        createTracker({ port: 0, broadcasterKey: KEY, publicKey: null, ...options }),
        JSON.stringify(options),
      ).rejects.toThrow(RangeError);
    }
  });
});

describe('the welcome and renewals', () => {
  it('gives each peer its own credentials, which coturn would accept until they expire', async () => {
    const nowMs = 1_800_000_000_500;
    const tracker = await start({ stunUrls: ['stun:127.0.0.1:3478'], ...TURN, now: () => nowMs });
    const a = await (await connect(tracker)).join('live');
    const b = await (await connect(tracker)).join('live');
    for (const w of [a, b]) {
      expect(w.ice.expiresAtMs).toBe(1_800_003_600_000);
      const [stun, turn] = w.ice.servers;
      expect(stun).toEqual({ urls: ['stun:127.0.0.1:3478'] });
      expect(turn?.urls).toEqual(['turn:127.0.0.1:3478']);
      expect(turn?.username).toBe(`1800003600:${w.peerId}`);
      // What coturn computes from the username it is given and its static-auth-secret.
      expect(turn?.credential).toBe(
        createHmac('sha1', SECRET)
          .update(turn?.username ?? '')
          .digest('base64'),
      );
    }
    expect(a.ice.servers[1]?.credential).not.toBe(b.ice.servers[1]?.credential);
  });

  it('renews a connected peer’s credentials before they expire, again and again, and no one else’s', async () => {
    const tracker = await start({ ...TURN, turnTtlS: 2 });
    const stays = await connect(tracker);
    const first = await stays.join('live');
    const leaves = await connect(tracker);
    await leaves.join('live');
    leaves.send({ type: 'leave' });
    // At 80% of 2 s: well before the first expiry.
    const renewal = await within(stays.next('ice'), 'the first renewal');
    const firstExpiry = first.ice.expiresAtMs ?? 0;
    expect(renewal.ice.expiresAtMs).toBeGreaterThan(firstExpiry);
    expect(Date.now()).toBeLessThan(firstExpiry);
    const username = renewal.ice.servers[0]?.username ?? '';
    expect(username).toBe(`${(renewal.ice.expiresAtMs ?? 0) / 1000}:${first.peerId}`);
    expect(renewal.ice.servers[0]?.credential).toBe(
      turnCredentials(SECRET, first.peerId, Number(username.split(':')[0])).credential,
    );
    const second = await within(stays.next('ice'), 'the second renewal');
    expect(second.ice.expiresAtMs).toBeGreaterThan(renewal.ice.expiresAtMs ?? 0);
    // The peer that left got nothing (a round trip shows nothing else came).
    expect(await leaves.bootstrap().catch((e: unknown) => String(e))).toMatch(/notJoined|expected peers/);
    expect(leaves.pending().filter((m) => m.type === 'ice')).toEqual([]);
    expect(tracker.metrics().iceRenewals).toBeGreaterThanOrEqual(2);
    expect(await tracker.prometheus()).toMatch(/^chunkycast_tracker_ice_renewals_total [1-9]/m);
  }, 15_000);

  it('sends no renewals without a TURN secret (STUN never expires)', async () => {
    const tracker = await start({ stunUrls: ['stun:127.0.0.1:3478'] });
    const viewer = await connect(tracker);
    const welcome = await viewer.join('live');
    expect(welcome.ice).toEqual({ servers: [{ urls: ['stun:127.0.0.1:3478'] }], expiresAtMs: null });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await viewer.bootstrap();
    expect(viewer.pending()).toEqual([]);
    expect(tracker.metrics().iceRenewals).toBe(0);
  });
});

describe('/healthz and the start-up warning', () => {
  it('warns when viewers on different networks cannot reach each other', async () => {
    const lines: { level: string; msg: string }[] = [];
    const log: Logger = (level, msg) => {
      lines.push({ level, msg });
    };
    const bare = track(await createTracker({ port: 0, broadcasterKey: KEY, publicKey: null, log }));
    expect(lines).toContainEqual({ level: 'warn', msg: NO_ICE_WARNING });
    expect(NO_ICE_WARNING).toContain('viewers on different networks will not reach each other');
    const health = (await (await fetch(`${bare.url}/healthz`)).json()) as { ice: unknown };
    expect(health.ice).toEqual({ stun: 0, turn: 0, turnTtlS: null, warning: NO_ICE_WARNING });

    lines.length = 0;
    const served = track(
      await createTracker({
        port: 0,
        broadcasterKey: KEY,
        publicKey: null,
        log,
        stunUrls: ['stun:127.0.0.1:3478', 'stun:127.0.0.2:3478'],
        ...TURN,
      }),
    );
    expect(lines.filter((l) => l.level === 'warn')).toEqual([]);
    const text = await (await fetch(`${served.url}/healthz`)).text();
    expect(JSON.parse(text)).toMatchObject({
      ok: true,
      ice: { stun: 2, turn: 1, turnTtlS: 3600, warning: null },
    });
    // Counts only: neither the secret nor the servers' addresses.
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain('127.0.0.1:3478');
  });
});
