/**
 * Network isolation for the drivers that open sockets (the e2e tests, the swarm, the comparison
 * benchmark, the lab): each re-runs itself inside a fresh loopback-only network namespace, so no
 * test traffic can reach another address.
 */
import { spawn, spawnSync } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import { exitOf } from './process.js';

/** Whether this process sees only loopback interfaces (a test network namespace). */
export function isIsolated(): boolean {
  return Object.keys(networkInterfaces()).every((name) => name === 'lo');
}

function logLine(text: string): void {
  process.stderr.write(`netns: ${text}\n`);
}

const namespaceFlags = (): string[] => (process.getuid?.() === 0 ? ['-n'] : ['-r', '-n']);

/**
 * Re-runs `scriptPath` with `args` inside a fresh loopback-only network namespace unless this
 * process already is in one. Returns only in the isolated process; the parent waits for the child
 * and exits with its code.
 */
export async function runIsolated(scriptPath: string, args: readonly string[]): Promise<void> {
  if (isIsolated()) return;
  if (process.env.CHUNKYCAST_NETNS === '1') {
    logLine('expected a loopback-only network namespace, but other interfaces are visible');
    process.exit(1);
  }
  if (spawnSync('which', ['unshare'], { stdio: 'ignore' }).status !== 0) {
    logLine('`unshare` (util-linux) is missing; cannot isolate the test network');
    process.exit(1);
  }
  // Root: a new network namespace. Otherwise a user namespace maps us to root inside it.
  const child = spawn(
    'unshare',
    [
      ...namespaceFlags(),
      'sh',
      '-c',
      'ip link set lo up && exec "$0" "$@"',
      process.execPath,
      scriptPath,
      ...args,
    ],
    { stdio: 'inherit', env: { ...process.env, CHUNKYCAST_NETNS: '1' } },
  );
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => {
      child.kill(signal);
    });
  const exit = await exitOf(child);
  const code = exit.code ?? (exit.signal === null ? 0 : 1);
  if (code !== 0 && spawnSync('unshare', [...namespaceFlags(), 'true'], { stdio: 'ignore' }).status !== 0)
    logLine('could not create a network namespace (needs root or unprivileged user namespaces)');
  process.exit(code);
}
