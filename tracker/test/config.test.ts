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
});
