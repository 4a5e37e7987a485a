#!/usr/bin/env node
/**
 * `npm run reproduce`: every thesis scenario at 5000 members, written to docs/results/<run>/.
 * Two groups: `thesis` (Chunkyspread as published: repair off, for the comparison with the thesis)
 * and `reliability` (issue 4: repair, origin fallback, parity; link loss; 5 s playback buffer).
 * Runs two simulations at a time; each prints its own progress.
 */
import { join, resolve } from 'node:path';
import { choiceOption, numberOption, parseCommandLine, stringValue } from '../lib/args.js';
import { exitCodeOf, run } from '../lib/process.js';
import { fromRoot, root } from '../lib/paths.js';
import {
  GROUPS,
  RELIABILITY_RUNS,
  THESIS_RUNS,
  selectRuns,
  simulatorArgs,
  type ReproductionRun,
} from './runs.js';

const USAGE = `usage: npm run reproduce -- [--group thesis|reliability|all] [--only NAME,NAME] [--nodes N] [--jobs J] [--out DIR]

Runs the thesis's scenarios (and issue 4's reliability scenarios) in the simulator, seed 1, and
writes each to DIR/<run>/ (summary.json, report.md, plots).

options:
  --group G      thesis (default), reliability or all
  --only LIST    only these runs, comma-separated, of:
                 ${THESIS_RUNS.map((r) => r.name).join(', ')},
                 ${RELIABILITY_RUNS.map((r) => r.name).join(', ')}
  --nodes N      members of every run (default 5000)
  --jobs J       simulations at a time (default 2)
  --out DIR      results directory (default docs/results; the committed figures live there)
  --help         this text`;

const options = parseCommandLine(
  'reproduce',
  USAGE,
  {
    group: { type: 'string' },
    only: { type: 'string' },
    nodes: { type: 'string' },
    jobs: { type: 'string' },
    out: { type: 'string' },
  },
  (parsed) => ({
    group: choiceOption('group', stringValue(parsed, 'group'), GROUPS, 'thesis'),
    only: (stringValue(parsed, 'only') ?? '').split(',').filter((name) => name !== ''),
    nodes: numberOption('nodes', stringValue(parsed, 'nodes'), 5000, { min: 2, integer: true }),
    jobs: numberOption('jobs', stringValue(parsed, 'jobs'), 2, { min: 1, integer: true }),
    resultsDir: resolve(
      process.env.INIT_CWD ?? process.cwd(),
      stringValue(parsed, 'out') ?? join(root, 'docs', 'results'),
    ),
  }),
);

const runs = selectRuns(options.group, options.only);
let failed = 0;

/** Runs the queue's runs one after another; `jobs` of these loops share it. */
async function worker(queue: ReproductionRun[]): Promise<void> {
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    process.stderr.write(`reproduce: start ${next.name}\n`);
    // Through run-built, as `npm run sim` is: the simulator's Node flags, the build checked first.
    const exit = await run(
      process.execPath,
      [
        fromRoot('scripts', 'run-built.mjs'),
        'packages/sim/dist/cli.js',
        ...simulatorArgs(next, options.nodes, join(options.resultsDir, next.name)),
      ],
      { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] },
    );
    const code = exitCodeOf(exit);
    process.stderr.write(`reproduce: ${next.name} finished (exit ${code})\n`);
    if (code !== 0) failed++;
  }
}

const queue = [...runs];
await Promise.all(Array.from({ length: options.jobs }, () => worker(queue)));
process.exit(failed === 0 ? 0 : 1);
