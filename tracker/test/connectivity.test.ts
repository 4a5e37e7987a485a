/** Peers' connectivity reports, aggregated per process: deltas of cumulative counts, resets, caps. */
import { describe, expect, it } from 'vitest';
import type { ConnectivityReport } from '@chunkycast/wire';
import {
  ConnectivityCounters,
  growth,
  MAX_LINKS_PER_REPORT,
  MAX_RELAYED_BYTES_PER_REPORT,
} from '@chunkycast/tracker';

function report(
  connected: Partial<ConnectivityReport['connected']>,
  failed = 0,
  relayedBytes = 0,
  open: Partial<ConnectivityReport['open']> = {},
): ConnectivityReport {
  const zero = { host: 0, srflx: 0, prflx: 0, relay: 0 };
  return { open: { ...zero, ...open }, connected: { ...zero, ...connected }, failed, relayedBytes };
}

describe('growth', () => {
  it('is the increase, capped; a decrease (a reset) is a new baseline, never negative', () => {
    expect(growth(3, 10, 100)).toBe(7);
    expect(growth(3, 3, 100)).toBe(0);
    expect(growth(10, 3, 100)).toBe(0);
    expect(growth(0, 500, 100)).toBe(100);
  });
});

describe('ConnectivityCounters', () => {
  it('adds what each report adds to the member’s previous one', () => {
    const c = new ConnectivityCounters();
    const a1 = report({ host: 2, relay: 1 }, 1, 1000);
    c.add(undefined, a1, false);
    const a2 = report({ host: 3, relay: 2 }, 1, 5000);
    c.add(a1, a2, false);
    const b1 = report({ srflx: 4 }, 2, 0);
    c.add(undefined, b1, false);
    expect(c.totals([])).toEqual({
      connected: { host: 3, srflx: 4, prflx: 0, relay: 2 },
      failures: 3,
      relayedBytes: 5000,
      open: { host: 0, srflx: 0, prflx: 0, relay: 0 },
    });
  });

  it('takes a decrease as a reset: nothing subtracted, the next growth counts from it', () => {
    const c = new ConnectivityCounters();
    const before = report({ host: 10 }, 4, 9000);
    c.add(undefined, before, false);
    const reset = report({ host: 1 }, 0, 100);
    c.add(before, reset, false);
    expect(c.totals([])).toMatchObject({ connected: { host: 10 }, failures: 4, relayedBytes: 9000 });
    c.add(reset, report({ host: 3 }, 2, 600), false);
    expect(c.totals([])).toMatchObject({ connected: { host: 12 }, failures: 6, relayedBytes: 9500 });
  });

  it('counts nothing from a resumed member’s first report (its old connection’s), then its growth', () => {
    const c = new ConnectivityCounters();
    const first = report({ relay: 5 }, 3, 70_000);
    c.add(undefined, first, true);
    expect(c.totals([])).toMatchObject({ connected: { relay: 0 }, failures: 0, relayedBytes: 0 });
    c.add(first, report({ relay: 6 }, 3, 80_000), true);
    expect(c.totals([])).toMatchObject({ connected: { relay: 1 }, failures: 0, relayedBytes: 10_000 });
  });

  it('caps what one report may add, so a lying member cannot swamp the counters', () => {
    const c = new ConnectivityCounters();
    const big = Number.MAX_SAFE_INTEGER;
    c.add(undefined, report({ host: big }, big, big, { relay: big }), false);
    expect(c.totals([report({}, 0, 0, { relay: big })])).toEqual({
      connected: { host: MAX_LINKS_PER_REPORT, srflx: 0, prflx: 0, relay: 0 },
      failures: MAX_LINKS_PER_REPORT,
      relayedBytes: MAX_RELAYED_BYTES_PER_REPORT,
      open: { host: 0, srflx: 0, prflx: 0, relay: MAX_LINKS_PER_REPORT },
    });
  });

  it('sums open links over the members’ latest reports (a gauge), skipping members without one', () => {
    const c = new ConnectivityCounters();
    expect(
      c.totals([report({}, 0, 0, { host: 2, relay: 1 }), undefined, report({}, 0, 0, { srflx: 3, relay: 1 })])
        .open,
    ).toEqual({ host: 2, srflx: 3, prflx: 0, relay: 2 });
  });
});
