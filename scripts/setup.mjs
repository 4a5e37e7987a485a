#!/usr/bin/env node
// Makes a fresh clone ready: installs npm packages when missing or stale, then builds.
// Runs before `npm start` and `npm test` (npm's pre-scripts), so nothing else has to be done first.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const stampFile = join(root, 'node_modules', '.setup-stamp');

function run(command, args) {
  process.stderr.write(`setup: ${command} ${args.join(' ')}\n`);
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) {
    process.stderr.write(
      `setup: "${command} ${args.join(' ')}" failed (exit ${result.status ?? result.signal})\n`,
    );
    process.exit(result.status ?? 1);
  }
}

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 20 || (major === 20 && minor < 19)) {
  process.stderr.write(
    `setup: Node ${process.versions.node} is too old; Chunkycast needs Node 20.19 or newer.\n`,
  );
  process.exit(1);
}

// npm packages: reinstall when the lockfile changed since the last install.
const lock = readFileSync(join(root, 'package-lock.json'));
const digest = createHash('sha256').update(lock).digest('hex');
const stamp = existsSync(stampFile) ? readFileSync(stampFile, 'utf8').trim() : '';
if (stamp !== digest || !existsSync(join(root, 'node_modules', '.bin', 'tsc'))) {
  // `npm install`, not `npm ci`: npm 11 on this machine kind writes lockfiles without the other
  // platforms' optional packages (rollup, esbuild), and `npm ci` then refuses them as out of sync.
  // With an unchanged package.json, install follows the lockfile's versions all the same.
  run('npm', ['install', '--no-audit', '--no-fund']);
  writeFileSync(stampFile, `${digest}\n`);
}

// Build every package (incremental: a no-op when nothing changed).
run(join(root, 'node_modules', '.bin', 'tsc'), ['-b']);
