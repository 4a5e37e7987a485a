#!/usr/bin/env node
// `npm run reproduce`: every thesis scenario at 5000 members, written to docs/results/<run>/.
// The thesis's model (no uplink limits, --uplink-headroom 0) unless a run says otherwise.
// Runs two simulations at a time; each prints its own progress. Usage:
//   npm run reproduce [-- --only static-lat2,join-lat2] [--nodes N] [--jobs J]
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const value = (flag, fallback) => {
  const i = args.indexOf(flag);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const nodes = value('--nodes', '5000');
const jobs = Number(value('--jobs', '2'));
const only = value('--only', '')
  .split(',')
  .filter((x) => x !== '');
const thesis = ['--uplink-headroom', '0', '--packet-rate', '1'];
const runs = [
  // 600 s of churn instead of the thesis's 1200 s: the full run takes about four hours here.
  ['churn-lat2', ['--scenario', 'churn', '--lat', '2', '--duration', '600', ...thesis]],
  ['static-lat2', ['--scenario', 'static', '--lat', '2', ...thesis]],
  ['static-lat0', ['--scenario', 'static', '--lat', '0', ...thesis]],
  ['join-lat2', ['--scenario', 'join', '--lat', '2', ...thesis]],
  ['join-lat0', ['--scenario', 'join', '--lat', '0', ...thesis]],
  ['burst10-lat2', ['--scenario', 'burst10', '--lat', '2', ...thesis]],
  ['burst50-lat2', ['--scenario', 'burst50', '--lat', '2', ...thesis]],
  [
    'static-lat2-uplink',
    ['--scenario', 'static', '--lat', '2', '--uplink-headroom', '1.1', '--packet-rate', '1'],
  ],
].filter(([name]) => only.length === 0 || only.includes(name));

let next = 0;
let failed = 0;
function launch() {
  if (next >= runs.length) return null;
  const [name, runArgs] = runs[next++];
  const out = join(root, 'docs', 'results', name);
  const full = [
    join(root, 'scripts', 'run-built.mjs'),
    'packages/sim/dist/cli.js',
    ...runArgs,
    '--nodes',
    nodes,
    '--seed',
    '1',
    '--out',
    out,
  ];
  process.stderr.write(`reproduce: start ${name}\n`);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, full, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('exit', (code) => {
      process.stderr.write(`reproduce: ${name} finished (exit ${code})\n`);
      if (code !== 0) failed++;
      resolve(launch());
    });
  });
}
await Promise.all(Array.from({ length: Math.max(1, jobs) }, () => launch()));
process.exit(failed === 0 ? 0 : 1);
