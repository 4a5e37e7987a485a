import { describe, expect, it } from 'vitest';
import { RELIABILITY_RUNS, THESIS_RUNS, selectRuns, simulatorArgs } from '../src/reproduce/runs.js';

describe('reproduce runs', () => {
  it('selects a group, and --only narrows within it', () => {
    expect(selectRuns('thesis', []).map((r) => r.name)).toEqual(THESIS_RUNS.map((r) => r.name));
    expect(selectRuns('reliability', [])).toHaveLength(RELIABILITY_RUNS.length);
    expect(selectRuns('all', [])).toHaveLength(THESIS_RUNS.length + RELIABILITY_RUNS.length);
    expect(selectRuns('all', ['join-lat0', 'reliability/loss2']).map((r) => r.name)).toEqual([
      'join-lat0',
      'reliability/loss2',
    ]);
    // A run of the other group is not run: --only picks within --group.
    expect(selectRuns('thesis', ['reliability/loss2'])).toEqual([]);
  });

  it('keeps the thesis runs as published (no repair) and names their output', () => {
    for (const run of THESIS_RUNS.filter((r) => r.name !== 'static-lat2-uplink'))
      expect(run.args.join(' ')).toContain('--uplink-headroom 0 --packet-rate 1 --set repairHelpers=0');
    const staticLat2 = THESIS_RUNS.find((r) => r.name === 'static-lat2');
    expect(staticLat2 && simulatorArgs(staticLat2, 5000, '/r/static-lat2')).toEqual([
      '--scenario',
      'static',
      '--lat',
      '2',
      '--uplink-headroom',
      '0',
      '--packet-rate',
      '1',
      '--set',
      'repairHelpers=0',
      '--nodes',
      '5000',
      '--seed',
      '1',
      '--out',
      '/r/static-lat2',
    ]);
  });
});
