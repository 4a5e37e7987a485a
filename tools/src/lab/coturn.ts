/**
 * coturn (Debian `coturn`) for the lab: STUN and TURN on the public segment, TURN REST API
 * credentials (`use-auth-secret`): the tracker hands out `<expiry>:<peer id>` usernames with
 * base64(HMAC-SHA1(secret, username)) passwords, which coturn checks without any user database.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { forEachLine, stopProcess, tieToParent } from '../lib/process.js';

/** coturn's log lines kept for error messages. */
const LOG_LINES_KEPT = 400;

export interface Coturn {
  readonly proc: ChildProcess;
  /** Allocations made (TURN relays opened) and authentication failures, from coturn's log. */
  readonly counters: { allocations: number; authFailures: number };
  log(): string[];
  readonly stunUrl: string;
  readonly turnUrls: readonly string[];
  stop(): Promise<void>;
}

export const TURN_PORT = 3478;

/**
 * Starts turnserver on `ip`:TURN_PORT (UDP and TCP, no TLS) with `secret`. Resolves once it listens.
 * Its relay ports are those of `ip` too: a relayed candidate is on the public segment.
 */
export async function startCoturn({
  ip,
  secret,
  realm = 'lab.chunkycast',
  echo = false,
  startTimeoutMs = 10_000,
}: {
  ip: string;
  secret: string;
  realm?: string;
  echo?: boolean;
  startTimeoutMs?: number;
}): Promise<Coturn> {
  const dir = mkdtempSync(join(tmpdir(), 'chunkycast-coturn-'));
  // prettier-ignore
  const args = [
    '-n', // no configuration file: everything is here
    '--listening-ip', ip, '--relay-ip', ip, '--listening-port', String(TURN_PORT),
    '--min-port', '49152', '--max-port', '65535',
    '--use-auth-secret', '--static-auth-secret', secret, '--realm', realm,
    '--fingerprint', '--no-tls', '--no-dtls', '--no-cli', '--no-multicast-peers',
    '--verbose', '--log-file', 'stdout', '--simple-log', '--pidfile', join(dir, 'turnserver.pid'),
    '--userdb', join(dir, 'turndb'),
  ];
  const proc = spawn('turnserver', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  tieToParent(proc);
  const lines: string[] = [];
  /** Allocations made (TURN relays opened), from coturn's log. */
  const counters = { allocations: 0, authFailures: 0 };
  let onLine: (line: string) => void = () => undefined;
  const take = (line: string): void => {
    lines.push(line);
    if (lines.length > LOG_LINES_KEPT) lines.shift();
    // --verbose logs one line per TURN request processed (not per relayed packet).
    if (/ALLOCATE processed, success/.test(line)) counters.allocations++;
    if (
      /(401|wrong key|cannot find credentials|check_stun_auth)/i.test(line) &&
      /error|fail|wrong/i.test(line)
    )
      counters.authFailures++;
    if (echo) process.stderr.write(`coturn: ${line}\n`);
    onLine(line);
  };
  forEachLine(proc.stdout, take);
  forEachLine(proc.stderr, take);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`coturn did not start within ${startTimeoutMs} ms:\n${lines.slice(-30).join('\n')}`));
    }, startTimeoutMs);
    onLine = (line) => {
      if (
        /IPv4\. (UDP|TCP) listener opened on\s*:?\s*198|listener opened on : ?[0-9.]+:3478/i.test(line) ||
        /Total (UDP|General) servers/i.test(line)
      ) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(
        new Error(`coturn exited (${code ?? signal}) before listening:\n${lines.slice(-30).join('\n')}`),
      );
    });
  });
  onLine = () => undefined;
  return {
    proc,
    counters,
    log: () => lines.slice(),
    stunUrl: `stun:${ip}:${TURN_PORT}`,
    turnUrls: [`turn:${ip}:${TURN_PORT}?transport=udp`, `turn:${ip}:${TURN_PORT}?transport=tcp`],
    async stop() {
      await stopProcess(proc, { signal: 'SIGTERM', graceMs: 3000 });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
