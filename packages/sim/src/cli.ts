#!/usr/bin/env node
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { writeReport } from './report.js';
import { HELP, parseArgs } from './args.js';
import { UsageError, runScenario } from './run.js';

function main(): number {
  let parsed;
  try {
    parsed = parseArgs(process.argv.slice(2));
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`sim: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  if (parsed === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  const { options, quiet } = parsed;
  const out = resolve(
    parsed.out ?? `sim-out/${options.scenario}-${options.nodes}-lat${options.lat}-s${options.seed}`,
  );
  const t0 = performance.now();
  if (!quiet)
    process.stderr.write(
      `sim: ${options.scenario}, ${options.nodes} nodes, Lat${options.lat}, seed ${options.seed} → ${out}\n`,
    );
  try {
    const run = runScenario({
      ...options,
      wallClockMs: () => performance.now(),
      ...(quiet
        ? {}
        : {
            onProgress: (p) => {
              const pctDone = ((100 * p.simMs) / p.durationMs).toFixed(0);
              const rate = p.wallMs > 0 ? (p.events / (p.wallMs / 1000) / 1e6).toFixed(2) : '?';
              process.stderr.write(
                `sim: t=${(p.simMs / 1000).toFixed(0)}/${(p.durationMs / 1000).toFixed(0)} s (${pctDone}%), ${p.alive} members, ${(p.events / 1e6).toFixed(1)}M events (${rate}M/s), ${(p.wallMs / 1000).toFixed(0)} s wall, rss ${(process.memoryUsage().rss / 1048576).toFixed(0)} MB\n`,
              );
            },
          }),
    });
    const summary = { ...run.summary, peakRssMB: Math.round(process.resourceUsage().maxRSS / 1024) };
    const command = `npm run sim -- ${process.argv.slice(2).join(' ')}`;
    const files = writeReport(out, summary, run.distributions, run.result.samples, command);
    if (!quiet) process.stderr.write(`sim: done in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
    process.stdout.write(`${files.report}\n`);
    return 0;
  } catch (error) {
    if (error instanceof UsageError || (error instanceof Error && error.name === 'ConfigError')) {
      process.stderr.write(`sim: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
}

process.exitCode = main();
