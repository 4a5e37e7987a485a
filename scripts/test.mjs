#!/usr/bin/env node
// `npm test`: every check CI runs, in order, with a summary. Setup (npm packages, build) already ran
// as `pretest`. Exits non-zero if any step fails; later steps still run so one report shows all.
// Plain JavaScript on purpose, like setup.mjs and run-built.mjs: it is the entry point that checks
// the TypeScript (lint, tsc), so it must run even when that TypeScript does not compile.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name) => join(root, 'node_modules', '.bin', name);
const steps = [
  ['lint (eslint, zero warnings)', bin('eslint'), ['.', '--max-warnings', '0']],
  ['format (prettier)', bin('prettier'), ['--check', '.']],
  ['types (tsc, packages and tests)', bin('tsc'), ['-p', 'tsconfig.tests.json']],
  // Built by setup (pretest) like every tool.
  ['dependency direction', process.execPath, [join(root, 'tools', 'dist', 'check-deps.js')]],
  ['unit, property, fuzz and simulation scenario tests (vitest)', bin('vitest'), ['run']],
  // Last: real ffmpeg, tracker and Chromium with WebRTC between pages, in a loopback-only netns.
  [
    'browser end-to-end (Chromium, WebRTC, ffmpeg)',
    process.execPath,
    [join(root, 'tools', 'dist', 'e2e', 'run.js')],
  ],
];
const results = [];
for (const [name, command, args] of steps) {
  process.stdout.write(`\n── ${name} ──\n`);
  const t0 = Date.now();
  const r = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  results.push({ name, ok: r.status === 0, seconds: (Date.now() - t0) / 1000 });
}
process.stdout.write('\n── summary ──\n');
for (const r of results)
  process.stdout.write(`${r.ok ? 'pass' : 'FAIL'}  ${r.seconds.toFixed(1).padStart(6)} s  ${r.name}\n`);
process.exit(results.every((r) => r.ok) ? 0 : 1);
