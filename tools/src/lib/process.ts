/**
 * The one child-process helper for the tools: start a child tied to this process's life, read its
 * output line by line, wait for it, and stop it (politely, then by force).
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import type { Readable } from 'node:stream';
import { setPriority } from 'node:os';

/** Calls `onLine` with each non-blank line `readable` writes (children log JSON lines, mostly). */
export function forEachLine(readable: Readable, onLine: (line: string) => void): void {
  let buffer = '';
  readable.setEncoding('utf8');
  readable.on('data', (chunk: string) => {
    buffer += chunk;
    let newline: number;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      if (line.trim() !== '') onLine(line);
    }
  });
}

/**
 * Kills `child` if this process dies without stopping it, even by SIGKILL: a shell waits on a pipe
 * from us and, when the pipe closes, kills the child. Returns a function that disarms the guard.
 */
export function tieToParent(child: ChildProcess): () => void {
  const pid = child.pid;
  if (pid === undefined) return () => undefined;
  const guard = spawn('sh', ['-c', `read _; kill -KILL ${pid} 2>/dev/null`], {
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  guard.unref();
  (guard.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  const disarm = (): void => {
    guard.kill('SIGKILL');
  };
  child.once('exit', disarm);
  return disarm;
}

/**
 * The niceness of the broadcaster's side (ffmpeg, the tracker, the true source) in the tools' stacks.
 * In production they run on the broadcaster's servers; here they share the machine with every
 * viewer, and when viewers saturated the 2 cores, ffmpeg produced segments slower than real time
 * (measured: 80 segments in a 180 s run) and the live edge itself fell behind. Priority keeps the
 * stream on time so that a run measures the viewers, not a starved packager.
 */
export const BROADCASTER_NICENESS = -5;

/**
 * Gives a broadcaster-side child BROADCASTER_NICENESS. Raising priority needs root (or
 * CAP_SYS_NICE); elsewhere the child keeps the default and this returns false.
 */
export function prioritiseBroadcaster(child: ChildProcess): boolean {
  if (child.pid === undefined) return false;
  try {
    setPriority(child.pid, BROADCASTER_NICENESS);
    return true;
  } catch {
    return false;
  }
}

/** Whether the child has exited (or was killed). */
export function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Stops a child: `signal`, then SIGKILL after `graceMs`. Resolves once it has exited. */
export async function stopProcess(
  child: ChildProcess,
  { signal = 'SIGTERM', graceMs = 5000 }: { signal?: NodeJS.Signals; graceMs?: number } = {},
): Promise<void> {
  if (hasExited(child)) return;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      resolve();
    }),
  );
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export interface ChildExit {
  /** Exit code, or null when a signal ended it. */
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** Resolves when `child` exits (at once if it already has); rejects if it could not start. */
export function exitOf(child: ChildProcess): Promise<ChildExit> {
  if (hasExited(child)) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      resolve({ code, signal });
    });
  });
}

/**
 * Runs a command to completion, its output going where `options.stdio` says (this process's own by
 * default), tied to this process's life. Resolves with how it ended.
 */
export async function run(
  command: string,
  args: readonly string[],
  options: SpawnOptions = {},
): Promise<ChildExit> {
  const child = spawn(command, args, { stdio: 'inherit', ...options });
  tieToParent(child);
  return exitOf(child);
}

/** The exit code to pass on for a child's end: its code, or 128 + signal number as shells do. */
export function exitCodeOf(exit: ChildExit): number {
  if (exit.code !== null) return exit.code;
  const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = { SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };
  return 128 + (exit.signal === null ? 0 : (SIGNAL_NUMBERS[exit.signal] ?? 0));
}
