#!/usr/bin/env node
// `npm start`. Until the browser mesh exists (issue 3), the main job is the simulator's default
// scenario: a static swarm, Lat2, written to sim-out/start/. Extra arguments go to the simulator.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const extra = process.argv.slice(2);
const args = [
  '--scenario',
  'static',
  '--nodes',
  '1000',
  '--duration',
  '60',
  '--out',
  join(root, 'sim-out', 'start'),
  ...extra,
];
process.stderr.write(`start: simulating ${args.join(' ')}\n`);
const r = spawnSync(
  process.execPath,
  [join(root, 'scripts', 'run-built.mjs'), 'packages/sim/dist/cli.js', ...args],
  { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
);
const out = r.stdout.toString().trim();
if (r.status !== 0) process.exit(r.status ?? 1);
process.stdout.write(
  `\nReport: ${out}\n(open it in a Markdown viewer; summary.json and the SVG plots are beside it)\n`,
);
