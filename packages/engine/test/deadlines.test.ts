import { describe, expect, it } from 'vitest';
import { DeadlineTable } from '../src/index.js';
import { Solo } from './solo.js';

describe('deadline table', () => {
  it('reports the soonest deadline with its reason, the first reason winning a tie', () => {
    const table = new DeadlineTable();
    expect(table.soonest()).toEqual({ atMs: Infinity, reason: null });
    table.at.repair = 300;
    table.at.floodDecision = 200;
    expect(table.soonest()).toEqual({ atMs: 200, reason: 'floodDecision' });
    table.at.decisionRound = 200;
    expect(table.soonest()).toEqual({ atMs: 200, reason: 'decisionRound' });
    expect(table.soonestMs()).toBe(200);
  });

  it("an engine's next deadline says why: its round, then a graceful quit's end, then none once stopped", () => {
    const solo = new Solo({ id: 5, role: 'member', targetLoadSlices: 8, protocol: { quitLingerMs: 500 } });
    expect(solo.engine.nextDeadlineWithReason().reason).toBeNull();
    solo.startWith([1, 2, 3]);
    const round = solo.engine.nextDeadlineWithReason();
    expect(round.reason).toBe('decisionRound');
    expect(round.atMs).toBe(solo.engine.nextDeadline());
    expect(round.atMs).toBeLessThan(solo.engine.config.protocol.decisionIntervalMs);
    solo.advance(round.atMs);
    const nextRound = round.atMs + solo.engine.config.protocol.decisionIntervalMs;
    solo.input({ kind: 'quit', graceful: true });
    // A linger shorter than a round: the quit's end is the soonest deadline (repair has none here).
    const quitEnd = solo.now + 500;
    expect(quitEnd).toBeLessThan(nextRound);
    expect(solo.engine.nextDeadlineWithReason()).toEqual({ atMs: quitEnd, reason: 'quitLingerEnd' });
    solo.advance(quitEnd);
    expect(solo.engine.isStopped).toBe(true);
    expect(solo.engine.nextDeadlineWithReason()).toEqual({ atMs: Infinity, reason: null });
  });
});
