#!/usr/bin/env node
// `npm test`: every check CI runs, in order, with a summary. Setup (npm packages, build) already ran
// as `pretest`. Exits non-zero if any step fails; later steps still run so one report shows all.
// Plain JavaScript on purpose, like setup.mjs and run-built.mjs: it is the entry point that checks
// the TypeScript (lint, tsc), so it must run even when that TypeScript does not compile.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name) => join(root, 'node_modules', '.bin', name);
// vitest (unit and e2e) also writes a JSON report, so the summary at the very end names the tests that failed:
// CI keeps only the tail of the output, and the failures scroll far above it.
const reportDir = mkdtempSync(join(tmpdir(), 'chunkycast-test-'));
const vitestReport = join(reportDir, 'vitest.json');
const e2eReport = join(reportDir, 'e2e.json');
const jsonReport = (path) => ['--reporter=default', '--reporter=json', `--outputFile.json=${path}`];
const steps = [
  ['lint (eslint, zero warnings)', bin('eslint'), ['.', '--max-warnings', '0']],
  ['format (prettier)', bin('prettier'), ['--check', '.']],
  ['types (tsc, packages and tests)', bin('tsc'), ['-p', 'tsconfig.tests.json']],
  // Built by setup (pretest) like every tool.
  ['dependency direction', process.execPath, [join(root, 'tools', 'dist', 'check-deps.js')]],
  [
    'unit, property, fuzz and simulation scenario tests (vitest)',
    bin('vitest'),
    ['run', ...jsonReport(vitestReport)],
  ],
  // Last: real ffmpeg, tracker, Chromium and Firefox with WebRTC between pages, in a loopback-only netns.
  [
    'browser end-to-end (Chromium, Firefox, WebRTC, ffmpeg)',
    process.execPath,
    [join(root, 'tools', 'dist', 'e2e', 'run.js'), ...jsonReport(e2eReport)],
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
for (const path of [vitestReport, e2eReport])
  for (const line of vitestFailures(path)) process.stdout.write(`  ${line}\n`);
rmSync(reportDir, { recursive: true, force: true });
process.exit(results.every((r) => r.ok) ? 0 : 1);

/** One line per failed vitest test (file, name, the first line of its error), from the JSON report. */
function vitestFailures(path) {
  if (!existsSync(path)) return [];
  let report;
  try {
    report = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    return [`(vitest's JSON report could not be read: ${error.message})`];
  }
  const lines = [];
  for (const file of report.testResults ?? []) {
    const name = file.name.startsWith(root) ? file.name.slice(root.length + 1) : file.name;
    const failed = (file.assertionResults ?? []).filter((t) => t.status === 'failed');
    // A file can fail with no failed test (an error in a hook or at import): its message says why.
    if (failed.length === 0 && file.status === 'failed')
      lines.push(`failed: ${name}: ${firstLine(file.message)}`);
    for (const t of failed)
      lines.push(`failed: ${name} > ${t.fullName}: ${firstLine(t.failureMessages?.[0])}`);
  }
  return lines;
}

function firstLine(text) {
  // eslint-disable-next-line no-control-regex -- strip terminal colours from assertion messages
  const plain = String(text ?? '').replace(/\u001b\[[0-9;]*m/g, '');
  const line = plain.split('\n').find((l) => l.trim() !== '') ?? '';
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}
