import { describe, expect, it } from 'vitest';
import { UsageError, parseCommandLine, type ParsedCommandLine } from '../src/lib/args.js';
import {
  BENCH_TRACKER_FLAGS,
  BENCH_TRACKER_USAGE,
  benchTrackerOptions,
  parseSweep,
} from '../src/bench-tracker/options.js';
import { plan } from '../src/bench-tracker/plan.js';

const CORES = 2;
const parse = (argv: string[]) =>
  parseCommandLine(
    'bench:tracker',
    BENCH_TRACKER_USAGE,
    BENCH_TRACKER_FLAGS,
    (p) => benchTrackerOptions(p, CORES),
    argv,
  );
const build = (values: ParsedCommandLine['values']) => () =>
  benchTrackerOptions({ values, positionals: [] }, CORES);

describe('bench:tracker command line', () => {
  it('has the defaults it always had', () => {
    expect(parse([])).toEqual({
      peers: 1000,
      joinRate: 200,
      duration: 30,
      out: null,
      swarmSize: 500,
      relaysPerSec: 2000,
      bootstrapsPerSec: 100,
      sdpBytes: 1500,
      clientProcs: null,
      sweep: null,
      trackerCore: 0,
      clientCore: 1,
      fdLimit: 65536,
      relayP99GoalMs: 20,
      nice: 0,
      probe: true,
      trackerCli: null,
    });
  });

  it('floors counts, takes every flag and a sweep', () => {
    const o = parse([
      '--peers',
      '500.7',
      '--join-rate',
      '50.5',
      '--no-probe',
      '--nice=-5',
      '--sweep',
      'join-rate=100,200',
    ]);
    expect(o).toMatchObject({ peers: 500, joinRate: 50.5, probe: false, nice: -5 });
    expect(o.sweep).toEqual({ flag: 'join-rate', key: 'joinRate', values: [100, 200] });
  });

  it('refuses what the tracker or the machine cannot take', () => {
    expect(build({ 'sdp-bytes': '16385' })).toThrow(/at most 16384/);
    expect(build({ 'client-core': '2' })).toThrow(/below 2/);
    expect(build({ peers: '1' })).toThrow(/--peers/);
    expect(build({ nice: '20' })).toThrow(UsageError);
    expect(build({ nice: '1.5' })).toThrow(UsageError);
    expect(() => parseSweep('duration=10')).toThrow(
      /NAME one of peers, join-rate, relays-per-sec, swarm-size/,
    );
    expect(() => parseSweep('peers=0')).toThrow(UsageError);
    expect(() => parseSweep('toString=1')).toThrow(UsageError);
  });
});

describe('bench:tracker plan', () => {
  const point = { joinRate: 200, duration: 30, relaysPerSec: 2000, bootstrapsPerSec: 100, sdpBytes: 1500 };

  it('spreads peers evenly over swarms and swarms round-robin over generators', () => {
    const layout = plan({ ...point, peers: 1001, swarmSize: 500 }, 65536, 2);
    expect(layout.swarmCount).toBe(3);
    expect(layout.clients).toEqual([
      { swarms: ['bench-0:334', 'bench-2:333'], peers: 667 },
      { swarms: ['bench-1:334'], peers: 334 },
    ]);
  });

  it('takes enough generators for their open-files limit, never more than swarms', () => {
    // 12,000 sessions each at most: 30,000 peers need three.
    expect(plan({ ...point, peers: 30_000, swarmSize: 500 }, 65536, null).clients).toHaveLength(3);
    // A low limit gives each generator fewer sessions (but at least 1000).
    expect(plan({ ...point, peers: 5000, swarmSize: 500 }, 2264, null).clients).toHaveLength(3);
    expect(plan({ ...point, peers: 5000, swarmSize: 5000 }, 1024, null).clients).toHaveLength(1);
  });
});
