/** The command line of `npm run fuzz:tracker`: its flags, its usage text, and the campaign they ask for. */
import { resolve } from 'node:path';
import { numberOption, stringValue, type ParsedCommandLine } from '../lib/args.js';
import { DEFAULT_FUZZ_OPTIONS, type TrackerFuzzOptions } from './tracker-fuzz.js';

export const FUZZ_USAGE = `Usage: npm run fuzz:tracker -- [options]

Starts the tracker (tracker/dist/cli.js) as a child process on 127.0.0.1 and sends it random and
mutated frames over several connections, checking every answer against an oracle.

Options:
  --frames N              frames to send (default ${DEFAULT_FUZZ_OPTIONS.frames})
  --max-seconds S         stop after this long whatever remains (default ${DEFAULT_FUZZ_OPTIONS.maxSeconds})
  --seed S                generator seed (default ${DEFAULT_FUZZ_OPTIONS.seed})
  --connections N         concurrent connections (default ${DEFAULT_FUZZ_OPTIONS.connections})
  --batch N               frames per batch before waiting for answers (default ${DEFAULT_FUZZ_OPTIONS.batchFrames})
  --rss-growth-limit-mb M allowed RSS growth after warm-up (default ${DEFAULT_FUZZ_OPTIONS.rssGrowthLimitMB})
  --out DIR               write DIR/result.json and DIR/report.md
  --quiet                 no progress lines
  --help                  this text
`;

export const FUZZ_FLAGS = {
  frames: { type: 'string' },
  'max-seconds': { type: 'string' },
  seed: { type: 'string' },
  connections: { type: 'string' },
  batch: { type: 'string' },
  'rss-growth-limit-mb': { type: 'string' },
  out: { type: 'string' },
  quiet: { type: 'boolean' },
} as const;

export interface FuzzCommandLine {
  readonly overrides: Partial<TrackerFuzzOptions>;
  /** Report directory, or null for none. */
  readonly out: string | null;
}

/** The campaign's options from the parsed flags (UsageError naming a bad one). */
export function fuzzCommandLine(parsed: ParsedCommandLine): FuzzCommandLine {
  const integer = (flag: string, fallback: number, min: number): number =>
    numberOption(flag, stringValue(parsed, flag), fallback, { min, integer: true });
  const d = DEFAULT_FUZZ_OPTIONS;
  const out = stringValue(parsed, 'out');
  return {
    overrides: {
      frames: integer('frames', d.frames, 1),
      maxSeconds: integer('max-seconds', d.maxSeconds, 1),
      seed: integer('seed', d.seed, 0),
      connections: integer('connections', d.connections, 1),
      batchFrames: integer('batch', d.batchFrames, 2),
      rssGrowthLimitMB: integer('rss-growth-limit-mb', d.rssGrowthLimitMB, 0),
      ...(parsed.values.quiet === true ? { progressMs: 0 } : {}),
    },
    out: out === undefined ? null : resolve(out),
  };
}
