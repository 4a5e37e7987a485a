/**
 * `npm run e2e`: the browser end-to-end tests (real ffmpeg, tracker with the true source, Debian
 * Chromium, WebRTC between pages). Re-runs itself inside a fresh loopback-only network namespace
 * (`unshare -n`), so no test traffic can leave the machine, then runs vitest on e2e/*.test.ts
 * (mesh, restart, lab). Extra arguments go to vitest: a file filter (`restart`) or a test name
 * (`-t "late joiner"`), so they are not parsed here.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runIsolated } from '../lib/netns.js';
import { fromRoot, root } from '../lib/paths.js';
import { exitOf } from '../lib/process.js';
import { demoDist, trackerCli } from '../stack/tracker.js';

const args = process.argv.slice(2);
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(
    'usage: npm run e2e -- [vitest arguments]\n\n' +
      'Runs the browser end-to-end tests (e2e/*.test.ts) inside a loopback-only network namespace.\n' +
      'Arguments go to vitest: a file filter (`restart`) or a test name (`-t "late joiner"`).\n',
  );
  process.exit(0);
}
await runIsolated(fileURLToPath(import.meta.url), args);

// The standalone true source (tracker/dist/source/cli.js) is what restart.test.ts runs.
const missing = [
  trackerCli,
  fromRoot('tracker', 'dist', 'source', 'cli.js'),
  join(demoDist, 'index.html'),
].filter((p) => !existsSync(p));
if (missing.length > 0) {
  process.stderr.write(`e2e: not built: ${missing.join(', ')} (run \`npm run setup\`)\n`);
  process.exit(1);
}
const child = spawn(
  fromRoot('node_modules', '.bin', 'vitest'),
  ['run', '--config', fromRoot('e2e', 'vitest.config.ts'), ...args],
  { cwd: root, stdio: 'inherit' },
);
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    child.kill(signal);
  });
const exit = await exitOf(child);
process.exit(exit.code ?? (exit.signal === null ? 0 : 1));
