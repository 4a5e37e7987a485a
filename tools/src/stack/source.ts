/**
 * The true source as its own process (tracker/dist/source/cli.js, `chunkycast-source`), against a
 * tracker started with the same signing key and no in-process source: so that its CPU can be read
 * apart from the tracker's (the cost benchmark). Resolves once it logs "true source running".
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fromRoot, root } from '../lib/paths.js';
import { forEachLine, stopProcess, prioritiseBroadcaster, tieToParent } from '../lib/process.js';
import { Ring } from '../lib/wait.js';

export const sourceCli: string = fromRoot('tracker', 'dist', 'source', 'cli.js');

/** A broadcaster's Ed25519 signing key in a private temporary file (PKCS#8 PEM), removed by `remove`. */
export interface SigningKeyFile {
  readonly path: string;
  remove(): void;
}

export function temporarySigningKey(): SigningKeyFile {
  const dir = mkdtempSync(join(tmpdir(), 'chunkycast-key-'));
  const path = join(dir, 'signing-key.pem');
  const { privateKey } = generateKeyPairSync('ed25519');
  writeFileSync(path, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  return {
    path,
    remove: () => {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface SourceProcess {
  readonly proc: ChildProcess;
  readonly logs: Ring;
  stop(): Promise<void>;
}

export interface SourceOptions {
  readonly trackerWsUrl: string;
  readonly playlistUrl: string;
  readonly stream?: string;
  readonly signingKeyFile: string;
  readonly broadcasterKey: string;
  readonly startTimeoutMs?: number;
}

export async function startSource({
  trackerWsUrl,
  playlistUrl,
  stream = 'live',
  signingKeyFile,
  broadcasterKey,
  startTimeoutMs = 20_000,
}: SourceOptions): Promise<SourceProcess> {
  if (!existsSync(sourceCli))
    throw new Error(`${sourceCli} is missing: build the tracker first (npx tsc -b, or npm run setup)`);
  const args = [sourceCli, '--tracker', trackerWsUrl, '--playlist', playlistUrl, '--stream', stream];
  args.push('--signing-key', signingKeyFile);
  // The broadcaster key through the environment: flags are visible in ps.
  const env = { ...process.env, CHUNKYCAST_BROADCASTER_KEY: broadcasterKey };
  const proc = spawn(process.execPath, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  tieToParent(proc);
  prioritiseBroadcaster(proc);
  const logs = new Ring(200);
  let running = (): void => undefined;
  forEachLine(proc.stdout, (line) => {
    logs.push(line);
    if (line.includes('"true source running"')) running();
  });
  forEachLine(proc.stderr, (line) => {
    logs.push(`[stderr] ${line}`);
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`the true source did not start within ${startTimeoutMs} ms:\n${logs.text()}`));
    }, startTimeoutMs);
    running = () => {
      clearTimeout(timer);
      resolve();
    };
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the true source exited (${code ?? signal}) before running:\n${logs.text()}`));
    });
  });
  running = () => undefined;
  return { proc, logs, stop: () => stopProcess(proc, { signal: 'SIGTERM', graceMs: 5000 }) };
}
