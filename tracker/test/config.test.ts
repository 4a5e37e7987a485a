import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConfigError,
  createLogger,
  importPublicKey,
  KeyError,
  loadSigningKeys,
  parseConfig,
  USAGE,
} from '@chunkycast/tracker';

function error(argv: string[], env: Record<string, string> = {}): string {
  try {
    parseConfig(argv, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error(`no error for ${argv.join(' ')}`);
}

describe('parseConfig', () => {
  it('has safe defaults and generates a broadcaster key when none is given', () => {
    const a = parseConfig([], {});
    expect(a).toMatchObject({
      help: false,
      host: '127.0.0.1',
      port: 8080,
      originDir: null,
      staticDir: null,
      signingKeyFile: null,
      sourceStream: null,
      sourcePlaylist: null,
      logLevel: 'info',
      broadcasterKeyGenerated: true,
      maxMessagesPerSecond: 20,
      maxConnectionsPerAddress: 256,
      maxConnections: 100_000,
      maxBadFrames: 100,
      maxHttpConnectionsPerAddress: 256,
      httpHeadersTimeoutMs: 10_000,
      joinSecret: null,
      allowedOrigins: null,
      trackerSecret: null,
      token: null,
    });
    expect(a.broadcasterKey.length).toBeGreaterThanOrEqual(32);
    expect(parseConfig([], {}).broadcasterKey).not.toBe(a.broadcasterKey);
  });

  it('reads flags (both spellings) and CHUNKYCAST_ variables, flags winning', () => {
    const c = parseConfig(
      [
        '--port',
        '0',
        '--origin-dir=/o',
        '--source-stream',
        'demo',
        '--broadcaster-key',
        'flagkey',
        '--log-level=debug',
      ],
      {
        CHUNKYCAST_PORT: '9000',
        CHUNKYCAST_HOST: '127.0.0.2',
        CHUNKYCAST_STATIC_DIR: '/s',
        CHUNKYCAST_BROADCASTER_KEY: 'envkey',
        CHUNKYCAST_SIGNING_KEY: '/k.pem',
        CHUNKYCAST_LOG_LEVEL: '',
      },
    );
    expect(c).toMatchObject({
      host: '127.0.0.2',
      port: 0,
      originDir: '/o',
      staticDir: '/s',
      broadcasterKey: 'flagkey',
      broadcasterKeyGenerated: false,
      signingKeyFile: '/k.pem',
      sourceStream: 'demo',
      sourcePlaylist: null,
      logLevel: 'debug',
    });
    expect(
      parseConfig(['--source-stream', 'x', '--source-playlist', 'http://127.0.0.1:1/p.m3u8'], {})
        .sourcePlaylist,
    ).toBe('http://127.0.0.1:1/p.m3u8');
    expect(parseConfig(['--help'], {}).help).toBe(true);
  });

  it('names the flag or variable at fault', () => {
    expect(error(['--port', '70000'])).toMatch(/^--port must be an integer in 0‥65535, got "70000"/);
    expect(error([], { CHUNKYCAST_PORT: 'http' })).toMatch(/^CHUNKYCAST_PORT must be an integer/);
    expect(error(['--log-level', 'loud'])).toMatch(/^--log-level must be one of debug, info, warn, error/);
    expect(error(['--bogus'])).toBe('unknown option --bogus');
    expect(error(['stray'])).toBe('unexpected argument "stray"');
    expect(error(['--port'])).toBe('--port needs a value (N)');
    expect(error(['--port', '--host', 'x'])).toBe('--port needs a value (N)');
    expect(error(['--source-stream', 'bad/id', '--origin-dir', '/o'])).toMatch(
      /^--source-stream must be 1–64/,
    );
    expect(error(['--source-stream', 'ok'])).toMatch(
      /^--source-stream needs --source-playlist, or --origin-dir/,
    );
    expect(error(['--source-stream', 'ok', '--source-playlist', 'ftp://x/p'])).toMatch(
      /^--source-playlist must be an http\(s\) URL/,
    );
    expect(error(['--source-playlist', 'http://127.0.0.1/p.m3u8'])).toMatch(
      /^--source-playlist is only used with --source-stream/,
    );
    expect(error(['--broadcaster-key='])).toBe('--broadcaster-key must not be empty');
    expect(error(['--broadcaster-key', 'k'.repeat(257)])).toMatch(/^--broadcaster-key must be at most 256/);
    expect(error(['--host', ' '])).toBe('--host must not be empty');
  });

  it('reads the limits, secrets and allowed origins from flags and variables', () => {
    const c = parseConfig(
      [
        '--max-messages-per-second',
        '0',
        '--max-connections=5000',
        '--allowed-origins',
        'https://Example.com, http://127.0.0.1:8080/,https://example.com',
        '--join-secret',
        'j'.repeat(16),
      ],
      {
        CHUNKYCAST_MAX_CONNECTIONS_PER_ADDRESS: '8',
        CHUNKYCAST_MAX_CONNECTIONS: '9',
        CHUNKYCAST_MAX_BAD_FRAMES: '3',
        CHUNKYCAST_TRACKER_SECRET: 't'.repeat(20),
      },
    );
    expect(c).toMatchObject({
      maxMessagesPerSecond: 0,
      maxConnectionsPerAddress: 8,
      maxConnections: 5000,
      maxBadFrames: 3,
      joinSecret: 'j'.repeat(16),
      trackerSecret: 't'.repeat(20),
      allowedOrigins: ['https://example.com', 'http://127.0.0.1:8080'],
    });
  });

  it('names the limit, secret or origin at fault', () => {
    expect(error(['--max-connections', '-1'])).toMatch(
      /^--max-connections must be an integer in 0‥10000000, got "-1"/,
    );
    expect(error([], { CHUNKYCAST_MAX_MESSAGES_PER_SECOND: '2.5' })).toMatch(
      /^CHUNKYCAST_MAX_MESSAGES_PER_SECOND must be an integer in 0‥100000/,
    );
    expect(error(['--max-bad-frames', 'lots'])).toMatch(/^--max-bad-frames must be an integer/);
    expect(error(['--max-connections-per-address', '99999999'])).toMatch(
      /^--max-connections-per-address must be/,
    );
    expect(error(['--join-secret', 'short'])).toMatch(/^--join-secret must be 16–1024 characters \(got 5\)/);
    expect(error([], { CHUNKYCAST_TRACKER_SECRET: 'x' })).toMatch(
      /^CHUNKYCAST_TRACKER_SECRET must be 16–1024/,
    );
    expect(error(['--allowed-origins', 'https://a.example/page'])).toBe(
      '--allowed-origins: "https://a.example/page" is not a page origin (http(s)://host[:port], no path)',
    );
    expect(error(['--allowed-origins', 'a.example'])).toMatch(/"a.example" is not a page origin/);
    expect(error(['--allowed-origins', 'ftp://a.example'])).toMatch(/is not a page origin/);
    expect(error(['--allowed-origins', ' , '])).toBe('--allowed-origins must list at least one origin');
  });

  it('reads STUN and TURN servers: none by default, flags winning over variables', () => {
    expect(parseConfig([], {})).toMatchObject({
      stunUrls: [],
      turnUrls: [],
      turnSecret: null,
      turnTtlS: 3600,
    });
    const c = parseConfig(
      [
        '--stun-urls',
        'stun:stun.example.com:3478, stun:[2001:db8::1],stun:stun.example.com:3478',
        '--turn-urls=turn:turn.example.com:3478?transport=udp,turns:turn.example.com:5349?transport=tcp',
        '--turn-ttl-s',
        '21600',
      ],
      {
        CHUNKYCAST_STUN_URLS: 'stun:ignored.example.com',
        CHUNKYCAST_TURN_SECRET: 's'.repeat(32),
        CHUNKYCAST_TURN_TTL_S: '60',
      },
    );
    expect(c).toMatchObject({
      stunUrls: ['stun:stun.example.com:3478', 'stun:[2001:db8::1]'],
      turnUrls: ['turn:turn.example.com:3478?transport=udp', 'turns:turn.example.com:5349?transport=tcp'],
      turnSecret: 's'.repeat(32),
      turnTtlS: 21600,
    });
    expect(
      parseConfig([], {
        CHUNKYCAST_TURN_URLS: 'turn:10.0.0.1',
        CHUNKYCAST_TURN_SECRET: 'x'.repeat(16),
        CHUNKYCAST_TURN_TTL_S: '60',
      }),
    ).toMatchObject({ turnUrls: ['turn:10.0.0.1'], turnTtlS: 60 });
  });

  it('refuses ICE settings that cannot work, naming the flag or variable', () => {
    const secret = ['--turn-secret', 's'.repeat(16)];
    expect(error(['--stun-urls', 'turn:a.example'])).toBe(
      '--stun-urls: "turn:a.example" is not stun:HOST[:PORT]',
    );
    expect(error(['--stun-urls', 'stuns:a.example'])).toMatch(/is not stun:HOST/);
    expect(error(['--stun-urls', 'http://a.example'])).toMatch(/is not stun:HOST/);
    expect(error(['--stun-urls', 'stun:'])).toMatch(/is not stun:HOST/);
    expect(error(['--stun-urls', 'stun:a.example:0'])).toMatch(/port must be 1‥65535/);
    expect(error([], { CHUNKYCAST_STUN_URLS: ' , ' })).toBe(
      'CHUNKYCAST_STUN_URLS must list at least one stun: URL',
    );
    expect(error(['--stun-urls', 'stun:a,stun:b,stun:c,stun:d,stun:e'])).toBe(
      '--stun-urls lists 5 URLs; at most 4',
    );
    expect(error(['--turn-urls', 'stun:a.example', ...secret])).toMatch(
      /^--turn-urls: "stun:a.example" is not turn:HOST/,
    );
    expect(error(['--turn-urls', 'turn:a.example?transport=sctp', ...secret])).toMatch(/is not turn:HOST/);
    expect(error(['--turn-urls', `turn:${'a'.repeat(600)}`, ...secret])).toMatch(/longer than 512/);
    expect(error(['--turn-urls', 'turn:a.example'])).toMatch(
      /^--turn-urls needs --turn-secret: peers get TURN credentials/,
    );
    expect(error([], { CHUNKYCAST_TURN_URLS: 'turn:a.example' })).toMatch(
      /^CHUNKYCAST_TURN_URLS needs --turn-secret/,
    );
    expect(error([...secret])).toBe('--turn-secret is only used with --turn-urls');
    expect(error(['--turn-urls', 'turn:a.example', '--turn-secret', 'short'])).toMatch(
      /^--turn-secret must be 16–1024 characters \(got 5\)/,
    );
    expect(error(['--turn-ttl-s', '600'])).toBe('--turn-ttl-s is only used with --turn-urls');
    expect(error(['--turn-urls', 'turn:a.example', ...secret, '--turn-ttl-s', '59'])).toMatch(
      /^--turn-ttl-s must be at least 60/,
    );
    expect(error(['--turn-urls', 'turn:a.example', ...secret], { CHUNKYCAST_TURN_TTL_S: '1e3' })).toMatch(
      /^CHUNKYCAST_TURN_TTL_S must be an integer in 0‥604800/,
    );
    expect(error(['--turn-urls', 'turn:a.example', ...secret, '--turn-ttl-s', '604801'])).toMatch(
      /^--turn-ttl-s must be an integer in 0‥604800/,
    );
  });

  it('reads the Redis settings: REDIS_URL, CHUNKYCAST_REDIS_URL (preferred) or --redis-url', () => {
    const shared = ['--broadcaster-key', 'shared-key', '--signing-key', '/k.pem'];
    expect(parseConfig(shared, {})).toMatchObject({
      redisUrl: null,
      redisKeyPrefix: 'chunkycast:',
      clusterHeartbeatMs: 5000,
      clusterNodeTtlMs: 15000,
      publicKey: null,
    });
    expect(parseConfig(shared, { REDIS_URL: 'redis://r1:6379' }).redisUrl).toBe('redis://r1:6379');
    expect(
      parseConfig(shared, { REDIS_URL: 'redis://r1', CHUNKYCAST_REDIS_URL: 'rediss://u:p@r2:6380/1' })
        .redisUrl,
    ).toBe('rediss://u:p@r2:6380/1');
    const c = parseConfig(
      [
        ...shared,
        '--redis-url',
        'redis://r3',
        '--redis-key-prefix',
        'eu-1:',
        '--cluster-heartbeat-ms',
        '1000',
      ],
      { REDIS_URL: 'redis://r1', CHUNKYCAST_CLUSTER_NODE_TTL_MS: '4000' },
    );
    expect(c).toMatchObject({
      redisUrl: 'redis://r3',
      redisKeyPrefix: 'eu-1:',
      clusterHeartbeatMs: 1000,
      clusterNodeTtlMs: 4000,
    });
    // A process without the source needs only the public key (and a tracker secret will do for ids).
    const publicKey = Buffer.alloc(32, 7).toString('base64');
    expect(
      parseConfig(['--public-key', publicKey, '--tracker-secret', 't'.repeat(16)], {
        REDIS_URL: 'redis://r',
      }),
    ).toMatchObject({ publicKey, broadcasterKeyGenerated: true, redisUrl: 'redis://r' });
    // A longer heartbeat stretches the default TTL to three beats.
    expect(
      parseConfig([...shared, '--redis-url', 'redis://r', '--cluster-heartbeat-ms', '10000'], {}),
    ).toMatchObject({ clusterNodeTtlMs: 30000 });
  });

  it('refuses Redis settings that cannot work across processes, naming the flag or variable', () => {
    const shared = ['--broadcaster-key', 'shared-key', '--signing-key', '/k.pem'];
    expect(error(['--signing-key', '/k.pem'], { REDIS_URL: 'redis://r' })).toMatch(
      /^REDIS_URL needs the same --broadcaster-key \(or --tracker-secret\) on every tracker process/,
    );
    expect(error(['--broadcaster-key', 'k'], { CHUNKYCAST_REDIS_URL: 'redis://r' })).toMatch(
      /^CHUNKYCAST_REDIS_URL needs the broadcaster's public key on every tracker process/,
    );
    // The URL may hold a password: it is not repeated.
    const bad = error([...shared, '--redis-url', 'http://user:hunter2@r']);
    expect(bad).toMatch(/^--redis-url must be a redis:\/\//);
    expect(bad).not.toContain('hunter2');
    expect(error([...shared, '--redis-url', 'not a url'])).toMatch(/^--redis-url must be/);
    expect(error([...shared, '--redis-key-prefix', 'x:'])).toBe(
      '--redis-key-prefix is only used with --redis-url (or REDIS_URL)',
    );
    expect(error(shared, { CHUNKYCAST_CLUSTER_HEARTBEAT_MS: '100' })).toMatch(
      /^CHUNKYCAST_CLUSTER_HEARTBEAT_MS is only used with --redis-url/,
    );
    const withRedis = [...shared, '--redis-url', 'redis://r'];
    expect(error([...withRedis, '--redis-key-prefix', 'bad prefix'])).toMatch(
      /^--redis-key-prefix must be at most 64 characters/,
    );
    expect(error([...withRedis, '--cluster-heartbeat-ms', '10'])).toBe(
      '--cluster-heartbeat-ms must be at least 50',
    );
    expect(error([...withRedis, '--cluster-heartbeat-ms', '1000', '--cluster-node-ttl-ms', '1500'])).toMatch(
      /^--cluster-node-ttl-ms must be at least twice the heartbeat \(2000 ms\)/,
    );
    expect(error(['--public-key', 'AAAA'])).toBe(
      '--public-key must be a raw Ed25519 public key: 32 bytes in base64',
    );
    expect(
      error([
        '--public-key',
        Buffer.alloc(32).toString('base64'),
        '--source-stream',
        's',
        '--origin-dir',
        '/o',
      ]),
    ).toMatch(/^--source-stream signs announcements, which needs the private key: --signing-key FILE/);
  });

  it('parses the token subcommand, which needs a stream and the join secret', () => {
    const c = parseConfig(['token', '--stream', 'live', '--ttl-s', '60'], {
      CHUNKYCAST_JOIN_SECRET: 's'.repeat(16),
    });
    expect(c.token).toEqual({ stream: 'live', ttlS: 60 });
    expect(parseConfig(['token', '--stream=live', '--join-secret', 's'.repeat(16)], {}).token).toEqual({
      stream: 'live',
      ttlS: 3600,
    });
    expect(error(['token', '--stream', 'live'])).toBe(
      'token needs the join secret: --join-secret SECRET or CHUNKYCAST_JOIN_SECRET',
    );
    expect(error(['token'], { CHUNKYCAST_JOIN_SECRET: 's'.repeat(16) })).toBe('token needs --stream ID');
    expect(error(['token', '--stream', 'a/b'], { CHUNKYCAST_JOIN_SECRET: 's'.repeat(16) })).toMatch(
      /^--stream must be 1–64/,
    );
    expect(
      error(['token', '--stream', 'a', '--ttl-s', '0'], { CHUNKYCAST_JOIN_SECRET: 's'.repeat(16) }),
    ).toBe('--ttl-s must be at least 1');
    // The token flags belong to the subcommand only.
    expect(error(['--stream', 'live'])).toBe('unknown option --stream');
  });

  it('documents every flag and its variable', () => {
    for (const word of [
      '--host',
      '--port',
      '--origin-dir',
      '--static-dir',
      '--broadcaster-key',
      '--signing-key',
      '--source-stream',
      '--source-playlist',
      '--log-level',
      '--max-messages-per-second',
      'CHUNKYCAST_MAX_MESSAGES_PER_SECOND',
      '--max-connections-per-address',
      'CHUNKYCAST_MAX_CONNECTIONS_PER_ADDRESS',
      '--max-connections',
      'CHUNKYCAST_MAX_CONNECTIONS',
      '--max-bad-frames',
      'CHUNKYCAST_MAX_BAD_FRAMES',
      '--max-http-connections-per-address',
      'CHUNKYCAST_MAX_HTTP_CONNECTIONS_PER_ADDRESS',
      '--http-headers-timeout-ms',
      'CHUNKYCAST_HTTP_HEADERS_TIMEOUT_MS',
      '--join-secret',
      'CHUNKYCAST_JOIN_SECRET',
      '--allowed-origins',
      'CHUNKYCAST_ALLOWED_ORIGINS',
      '--tracker-secret',
      'CHUNKYCAST_TRACKER_SECRET',
      '--public-key',
      'CHUNKYCAST_PUBLIC_KEY',
      '--redis-url',
      'CHUNKYCAST_REDIS_URL or REDIS_URL',
      '--redis-key-prefix',
      'CHUNKYCAST_REDIS_KEY_PREFIX',
      '--cluster-heartbeat-ms',
      'CHUNKYCAST_CLUSTER_HEARTBEAT_MS',
      '--cluster-node-ttl-ms',
      'CHUNKYCAST_CLUSTER_NODE_TTL_MS',
      '--stun-urls',
      'CHUNKYCAST_STUN_URLS',
      '--turn-urls',
      'CHUNKYCAST_TURN_URLS',
      '--turn-secret',
      'CHUNKYCAST_TURN_SECRET',
      '--turn-ttl-s',
      'CHUNKYCAST_TURN_TTL_S',
      'chunkycast-tracker token --stream',
      '--ttl-s',
      'CHUNKYCAST_PORT',
    ])
      expect(USAGE).toContain(word);
  });
});

describe('signing keys', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'chunkycast-keys-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads a PKCS8 PEM Ed25519 key whose public half verifies its signatures', async () => {
    const pair = generateKeyPairSync('ed25519');
    const file = join(dir, 'ok.pem');
    await writeFile(file, pair.privateKey.export({ format: 'pem', type: 'pkcs8' }));
    const keys = await loadSigningKeys(file);
    expect(keys.ephemeral).toBe(false);
    const raw = pair.publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
    expect(keys.publicKeyBase64).toBe(raw.toString('base64'));
    const data = new TextEncoder().encode('segment');
    const signature = await crypto.subtle.sign('Ed25519', keys.privateKey, data);
    const verifier = await importPublicKey(keys.publicKeyBase64);
    expect(await crypto.subtle.verify('Ed25519', verifier, signature, data)).toBe(true);
  });

  it('refuses a missing file, a non-key and a key of another type with KeyError', async () => {
    await expect(loadSigningKeys(join(dir, 'none.pem'))).rejects.toThrow(KeyError);
    const junk = join(dir, 'junk.pem');
    await writeFile(junk, 'not a key');
    await expect(loadSigningKeys(junk)).rejects.toThrow(/is not a PEM private key/);
    const x = join(dir, 'x25519.pem');
    await writeFile(x, generateKeyPairSync('x25519').privateKey.export({ format: 'pem', type: 'pkcs8' }));
    await expect(loadSigningKeys(x)).rejects.toThrow(/holds a x25519 key; an Ed25519 key is needed/);
    await expect(importPublicKey('AAAA')).rejects.toThrow(KeyError);
  });
});

describe('logger', () => {
  it('writes JSON lines at or above its level, never letting fields replace t, level or msg', () => {
    const lines: string[] = [];
    const log = createLogger({ level: 'info', write: (l) => lines.push(l), now: () => new Date(0) });
    log('debug', 'hidden');
    log('info', 'shown', { port: 1, msg: 'spoof', level: 'error', big: 2n, error: new Error('boom') });
    log('error', 'bad');
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual([
      {
        t: '1970-01-01T00:00:00.000Z',
        level: 'info',
        msg: 'shown',
        port: 1,
        big: '2',
        error: { name: 'Error', message: 'boom' },
      },
      { t: '1970-01-01T00:00:00.000Z', level: 'error', msg: 'bad' },
    ]);
  });

  it('never throws on a field: cycles are marked, dates and nested bigints kept readable', () => {
    const lines: string[] = [];
    const log = createLogger({ level: 'debug', write: (l) => lines.push(l), now: () => new Date(0) });
    const loop: Record<string, unknown> = { n: 1n };
    loop.self = loop;
    log('debug', 'odd', { loop, at: new Date(1000), list: [2n, new Error('x')] });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? '')).toEqual({
      t: '1970-01-01T00:00:00.000Z',
      level: 'debug',
      msg: 'odd',
      loop: { n: '1', self: '[Circular]' },
      at: '1970-01-01T00:00:01.000Z',
      list: ['2', { name: 'Error', message: 'x' }],
    });
  });
});
