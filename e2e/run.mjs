#!/usr/bin/env node
// `npm run e2e`: the browser end-to-end tests (real ffmpeg, tracker with the true source, Debian
// Chromium, WebRTC between pages). Re-runs itself inside a fresh loopback-only network namespace
// (`unshare -n`), so no test traffic can leave the machine, then runs vitest on e2e/*.test.mjs
// (mesh.test.mjs, restart.test.mjs). Extra arguments go to vitest: a file filter (`restart`) or a
// test name (`-t "late joiner"`).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { demoDist, root, runIsolated, trackerCli } from './src/harness.mjs';

const args = process.argv.slice(2);
await runIsolated(fileURLToPath(import.meta.url), args);

// The standalone true source (tracker/dist/source/cli.js) is what restart.test.mjs runs.
const missing = [
  trackerCli,
  join(root, 'tracker', 'dist', 'source', 'cli.js'),
  join(demoDist, 'index.html'),
].filter((p) => !existsSync(p));
if (missing.length > 0) {
  process.stderr.write(`e2e: not built: ${missing.join(', ')} (run \`npm run setup\`)\n`);
  process.exit(1);
}
const child = spawn(
  join(root, 'node_modules', '.bin', 'vitest'),
  ['run', '--config', join(root, 'e2e', 'vitest.config.mjs'), ...args],
  { cwd: root, stdio: 'inherit' },
);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
