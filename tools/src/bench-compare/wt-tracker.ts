/**
 * Starts the WebTorrent tracker (bittorrent-tracker) of the p2p-media-loader arm as a child process
 * bound to 127.0.0.1, so it is killed with the benchmark and its CPU is its own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stopProcess, tieToParent } from '../lib/process.js';

const childScript = fileURLToPath(new URL('./wt-tracker-child.js', import.meta.url));
/** Its stderr kept for error messages, characters. */
const STDERR_KEPT = 4000;

export interface WebTorrentTracker {
  readonly wsUrl: string;
  readonly proc: ChildProcess;
  stderr(): string;
  stop(): Promise<void>;
}

export async function startWebTorrentTracker({
  startTimeoutMs = 15_000,
}: { startTimeoutMs?: number } = {}): Promise<WebTorrentTracker> {
  const proc = spawn(process.execPath, [childScript], { stdio: ['pipe', 'pipe', 'pipe'] });
  tieToParent(proc);
  let stderr = '';
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_KEPT);
  });
  const port = await new Promise<number>((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`bittorrent-tracker did not start within ${startTimeoutMs} ms: ${stderr}`));
    }, startTimeoutMs);
    proc.stdout.setEncoding('utf8');
    proc.stdout.on('data', (chunk: string) => {
      buffer += chunk;
      const nl = buffer.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      try {
        resolve((JSON.parse(buffer.slice(0, nl)) as { port: number }).port);
      } catch (error) {
        reject(new Error(`bittorrent-tracker printed ${JSON.stringify(buffer)}: ${String(error)}`));
      }
    });
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`bittorrent-tracker exited (${code ?? signal}) before listening: ${stderr}`));
    });
  });
  return {
    wsUrl: `ws://127.0.0.1:${port}`,
    proc,
    stderr: () => stderr,
    stop: () => stopProcess(proc, { signal: 'SIGTERM', graceMs: 3000 }),
  };
}
