import { describe, expect, it } from 'vitest';
import { DEFAULT_RUN, UsageError } from '../src/index.js';
import { ADVERSARY_KINDS } from '../src/adversaries.js';
import { parseArgs } from '../src/args.js';

function usageError(argv: string[]): string {
  try {
    parseArgs(argv);
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error(`expected a UsageError for ${argv.join(' ')}`);
}

describe('npm run sim arguments', () => {
  it('parses the documented command line', () => {
    const parsed = parseArgs([
      '--scenario',
      'join',
      '--nodes',
      '300',
      '--seed',
      '7',
      '--lat',
      '0',
      '--out',
      'x',
      '--set',
      'latencySwitchMarginMs=80',
    ]);
    expect(parsed).not.toBe('help');
    if (parsed === 'help') return;
    expect(parsed.options).toMatchObject({
      scenario: 'join',
      nodes: 300,
      seed: 7,
      lat: 0,
      protocol: { latencySwitchMarginMs: 80 },
    });
    expect(parsed.out).toBe('x');
    expect(parsed.options.packetsPerSlicePerSecond).toBe(DEFAULT_RUN.packetsPerSlicePerSecond);
  });

  it('parses --production and --segment-ms (progressive and 2000 ms by default)', () => {
    const plain = parseArgs(['--scenario', 'static']);
    const segment = parseArgs(['--scenario', 'static', '--production', 'segment', '--segment-ms', '4000']);
    if (plain === 'help' || segment === 'help') throw new Error('not help');
    expect(plain.options).toMatchObject({ production: 'progressive', segmentMs: 2000 });
    expect(segment.options).toMatchObject({ production: 'segment', segmentMs: 4000 });
    expect(usageError(['--scenario', 'static', '--production', 'batch'])).toMatch(
      /--production must be progressive or segment/,
    );
    expect(usageError(['--scenario', 'static', '--segment-ms', '0'])).toMatch(/--segment-ms/);
  });

  it('parses --codec-sample (absent: every message crosses the codec)', () => {
    const sampled = parseArgs(['--scenario', 'static', '--codec-sample', '8']);
    expect(sampled !== 'help' && sampled.options.codecSampleEvery).toBe(8);
    const plain = parseArgs(['--scenario', 'static']);
    expect(plain !== 'help' && plain.options.codecSampleEvery).toBeUndefined();
    for (const bad of [['--codec-sample', '0'], ['--codec-sample', '2.5'], ['--codec-sample=-1']])
      expect(usageError(['--scenario', 'static', ...bad])).toMatch(
        /--codec-sample must be a whole number ≥ 1/,
      );
  });

  it('answers --help', () => {
    expect(parseArgs(['--help'])).toBe('help');
  });

  it('refuses bad input with a message that names the problem', () => {
    expect(usageError([])).toMatch(/--scenario is required/);
    expect(usageError(['--scenario', 'bogus'])).toMatch(/unknown scenario "bogus"/);
    expect(usageError(['--scenario', 'static', '--lat', '3'])).toMatch(/--lat must be 0 or 2/);
    expect(usageError(['--scenario', 'static', '--nodes'])).toMatch(/--nodes needs a value/);
    expect(usageError(['--scenario', 'static', '--nodes', 'many'])).toMatch(/--nodes must be a number/);
    expect(usageError(['--scenario', 'static', '--set', 'noSuchThing=1'])).toMatch(/protocol constant/);
    expect(usageError(['--scenario', 'static', '--data-loss', '1.5'])).toMatch(/--data-loss/);
    expect(usageError(['--scenario', 'static', '--frobnicate'])).toMatch(/unknown option "--frobnicate"/);
  });

  it('parses --adversaries: kinds with fractions, or all of them at one fraction', () => {
    const parsed = parseArgs(['--scenario', 'static', '--adversaries', 'seq-forger:0.05,withholder:0.1']);
    if (parsed === 'help') throw new Error('help');
    expect(parsed.options.adversaries).toEqual([
      { kind: 'seq-forger', fraction: 0.05 },
      { kind: 'withholder', fraction: 0.1 },
    ]);
    const all = parseArgs(['--scenario', 'static', '--adversaries', 'all:0.05']);
    if (all === 'help') throw new Error('help');
    expect(all.options.adversaries?.map((a) => a.kind)).toEqual([...ADVERSARY_KINDS]);
  });

  it('keeps the rendezvous ban on unless --no-rendezvous-ban', () => {
    const plain = parseArgs(['--scenario', 'static']);
    const off = parseArgs(['--scenario', 'static', '--no-rendezvous-ban']);
    if (plain === 'help' || off === 'help') throw new Error('help');
    expect(plain.options.rendezvousBan).toBeUndefined();
    expect(off.options.rendezvousBan).toBe(false);
  });

  it('refuses a bad --adversaries with a message that says why', () => {
    expect(usageError(['--scenario', 'static', '--adversaries', 'sneaky:0.1'])).toMatch(
      /unknown kind "sneaky"/,
    );
    expect(usageError(['--scenario', 'static', '--adversaries', 'replayer:1.5'])).toMatch(
      /must be in \(0, 1\)/,
    );
    expect(usageError(['--scenario', 'static', '--adversaries', 'replayer'])).toMatch(/not KIND:FRACTION/);
    expect(usageError(['--scenario', 'static', '--adversaries', 'replayer:0.1,replayer:0.1'])).toMatch(
      /given twice/,
    );
    expect(usageError(['--scenario', 'static', '--adversaries', 'all:0.08'])).toMatch(/keep them under 0.5/);
  });
});
