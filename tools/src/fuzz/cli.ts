#!/usr/bin/env node
/**
 * `npm run fuzz:tracker`: one bounded fuzz campaign against the built tracker (tracker-fuzz.ts).
 *
 *   npm run fuzz:tracker -- --frames 1000000 --out docs/results/tracker-fuzz
 *   npm run fuzz:tracker -- --frames 50000 --seed 7 --connections 8
 *
 * Exit code 1 if any frame was answered other than the oracle says, the tracker crashed, logged an
 * error (a handler fault: a frame it could not handle), or its RSS grew past the bound; 2 on bad usage.
 */
import { join } from 'node:path';
import { parseCommandLine } from '../lib/args.js';
import { FUZZ_FLAGS, FUZZ_USAGE, fuzzCommandLine } from './options.js';
import { runTrackerFuzz, writeFuzzReport } from './tracker-fuzz.js';

async function main(argv: readonly string[]): Promise<number> {
  const parsed = parseCommandLine('fuzz', FUZZ_USAGE, FUZZ_FLAGS, fuzzCommandLine, argv);
  const result = await runTrackerFuzz(parsed.overrides);
  const command = `npm run fuzz:tracker -- ${argv.join(' ')}`.trim();
  if (parsed.out !== null) {
    await writeFuzzReport(result, parsed.out, command);
    process.stderr.write(`fuzz: wrote ${join(parsed.out, 'result.json')} and report.md\n`);
  }
  const { rssSamples: _samples, trackerMetrics: _metrics, mismatchFrames: _frames, ...summary } = result;
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  process.stderr.write(
    `fuzz: ${result.passed ? 'PASS' : 'FAIL'}: ${result.framesSent} frames, ${result.framesPerSec} frames/s, ` +
      `mismatches ${result.mismatches}, crashed ${result.trackerCrashed}, RSS ${result.rssMBStart} → ${result.rssMBEnd} MB\n`,
  );
  return result.passed ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`fuzz: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = 1;
  },
);
