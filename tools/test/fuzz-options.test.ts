import { describe, expect, it } from 'vitest';
import { UsageError, parseCommandLine } from '../src/lib/args.js';
import { FUZZ_FLAGS, FUZZ_USAGE, fuzzCommandLine } from '../src/fuzz/options.js';
import { DEFAULT_FUZZ_OPTIONS } from '../src/fuzz/tracker-fuzz.js';

const parse = (argv: string[]) => parseCommandLine('fuzz', FUZZ_USAGE, FUZZ_FLAGS, fuzzCommandLine, argv);

describe('fuzz:tracker command line', () => {
  it('keeps the defaults and takes each flag', () => {
    expect(parse([])).toEqual({
      overrides: {
        frames: DEFAULT_FUZZ_OPTIONS.frames,
        maxSeconds: DEFAULT_FUZZ_OPTIONS.maxSeconds,
        seed: DEFAULT_FUZZ_OPTIONS.seed,
        connections: DEFAULT_FUZZ_OPTIONS.connections,
        batchFrames: DEFAULT_FUZZ_OPTIONS.batchFrames,
        rssGrowthLimitMB: DEFAULT_FUZZ_OPTIONS.rssGrowthLimitMB,
      },
      out: null,
    });
    const parsed = parse(['--frames', '5000', '--seed', '0', '--batch', '2', '--quiet', '--out', '/tmp/f']);
    expect(parsed.overrides).toMatchObject({ frames: 5000, seed: 0, batchFrames: 2, progressMs: 0 });
    expect(parsed.out).toBe('/tmp/f');
  });

  it('refuses values out of range, naming the flag', () => {
    const build = (values: Record<string, string>) => () => fuzzCommandLine({ values, positionals: [] });
    expect(build({ frames: '0' })).toThrow(/--frames/);
    expect(build({ batch: '1' })).toThrow(UsageError);
    expect(build({ seed: '1.5' })).toThrow(/--seed needs an integer/);
  });
});
