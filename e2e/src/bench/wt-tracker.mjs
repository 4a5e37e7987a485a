// Starts the WebTorrent tracker (bittorrent-tracker) of the p2p-media-loader arm as a child process
// bound to 127.0.0.1, so it is killed with the benchmark and its CPU is its own.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stopProcess, tieToParent } from '../harness.mjs';

const childScript = join(dirname(fileURLToPath(import.meta.url)), 'wt-tracker-child.mjs');

/** @returns {Promise<{ wsUrl: string, proc: import('node:child_process').ChildProcess, stop: () => Promise<void> }>} */
export async function startWebTorrentTracker({ startTimeoutMs = 15_000 } = {}) {
  const proc = spawn(process.execPath, [childScript], { stdio: ['pipe', 'pipe', 'pipe'] });
  tieToParent(proc);
  let stderr = '';
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const port = await new Promise((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`bittorrent-tracker did not start within ${startTimeoutMs} ms: ${stderr}`));
    }, startTimeoutMs);
    proc.stdout.setEncoding('utf8');
    proc.stdout.on('data', (chunk) => {
      buffer += chunk;
      const nl = buffer.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      try {
        resolve(JSON.parse(buffer.slice(0, nl)).port);
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
