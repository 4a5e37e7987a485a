/**
 * The built CLI (tracker/dist/cli.js, built by `npx tsc -b` / `npm run setup`): the token command,
 * a configuration error, an unreachable Redis, and a graceful shutdown on SIGTERM and SIGINT.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { verifyJoinToken } from '@chunkycast/tracker';
import { freePort } from './redis-server.js';
import { Client, within } from './ws-client.js';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli.js');
const SECRET = 'cli-test-join-secret';
const START_TIMEOUT_MS = 10_000;

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build it first (npx tsc -b)`);
});

/** Runs the CLI with a clean CHUNKYCAST_* environment plus `env`. */
function environment(env: Record<string, string>): NodeJS.ProcessEnv {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('CHUNKYCAST_') && k !== 'REDIS_URL'),
  );
  return { ...clean, ...env };
}

describe('chunkycast-tracker token', () => {
  it('prints a join token for the stream that the tracker accepts', () => {
    const before = Date.now();
    const r = spawnSync(process.execPath, [CLI, 'token', '--stream', 'live', '--ttl-s', '120'], {
      env: environment({ CHUNKYCAST_JOIN_SECRET: SECRET }),
      encoding: 'utf8',
      timeout: START_TIMEOUT_MS,
    });
    expect(r.status).toBe(0);
    const token = r.stdout.trim();
    const check = verifyJoinToken(SECRET, 'live', token, before);
    expect(check.ok).toBe(true);
    if (check.ok) expect(Math.abs(check.expiresAtMs - (before + 120_000))).toBeLessThan(5_000);
    expect(verifyJoinToken(SECRET, 'other', token, before).ok).toBe(false);
  });

  it('exits 2 with a clear message without a join secret, or with a bad setting', () => {
    const noSecret = spawnSync(process.execPath, [CLI, 'token', '--stream', 'live'], {
      env: environment({}),
      encoding: 'utf8',
      timeout: START_TIMEOUT_MS,
    });
    expect(noSecret.status).toBe(2);
    expect(noSecret.stderr).toContain('token needs the join secret');
    const bad = spawnSync(process.execPath, [CLI, '--max-connections-per-address', 'many'], {
      env: environment({}),
      encoding: 'utf8',
      timeout: START_TIMEOUT_MS,
    });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('--max-connections-per-address must be an integer');
  });
});

describe('scale-out settings', () => {
  it('exits 2 naming the Redis and the socket error when REDIS_URL cannot be reached', async () => {
    // A port nothing listens on: taken, then released.
    const port = await freePort();
    const r = spawnSync(
      process.execPath,
      [CLI, '--port', '0', '--broadcaster-key', 'cli-test-broadcaster-key', '--tracker-secret', SECRET],
      {
        env: environment({
          REDIS_URL: `redis://user:cli-test-password@127.0.0.1:${port}`,
          CHUNKYCAST_PUBLIC_KEY: Buffer.alloc(32, 1).toString('base64'),
        }),
        encoding: 'utf8',
        timeout: START_TIMEOUT_MS,
      },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`cannot use Redis at redis://user:***@127.0.0.1:${port}`);
    expect(r.stderr).toContain('ECONNREFUSED');
    expect(r.stderr).not.toContain('cli-test-password');
  });
});

describe('shutdown', () => {
  let child: ChildProcess | null = null;
  afterEach(() => {
    child?.kill('SIGKILL');
    child = null;
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const)
    it(`on ${signal} closes WebSockets with 1012 and exits 0`, async () => {
      const proc = spawn(
        process.execPath,
        [CLI, '--port', '0', '--broadcaster-key', 'cli-test-broadcaster-key'],
        {
          env: environment({}),
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      child = proc;
      const lines: Record<string, unknown>[] = [];
      const listening = new Promise<{ wsUrl: string }>((resolve, reject) => {
        let buffer = '';
        proc.stdout.setEncoding('utf8');
        proc.stdout.on('data', (chunk: string) => {
          buffer += chunk;
          for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
            const record = JSON.parse(buffer.slice(0, nl)) as Record<string, unknown>;
            buffer = buffer.slice(nl + 1);
            lines.push(record);
            if (record.msg === 'listening') resolve(record as unknown as { wsUrl: string });
          }
        });
        proc.once('exit', (code) => {
          reject(new Error(`the tracker exited (${code}) before listening`));
        });
      });
      const { wsUrl } = await within(listening, 'the tracker listening');
      const client = await Client.open(wsUrl);
      expect((await client.join('live')).peerId).toBeGreaterThan(0);
      const exited = new Promise<number | null>((resolve) => proc.once('exit', resolve));
      proc.kill(signal);
      expect(await within(client.closed, 'client closed')).toEqual({ code: 1012, reason: 'service restart' });
      expect(await within(exited, 'the tracker exited')).toBe(0);
      expect(lines.some((l) => l.msg === 'shutting down' && l.signal === signal)).toBe(true);
      expect(lines.some((l) => l.msg === 'tracker closed')).toBe(true);
    });
});
