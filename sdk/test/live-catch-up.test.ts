// Catch-up to the live position outside LL mode (live-catch-up.ts): faster while behind the
// target by more than CATCH_UP_START_S, back to 1 within CATCH_UP_STOP_S, never with a thin buffer,
// never far behind (watching back on purpose), and never over a rate someone else set.
import { describe, expect, it } from 'vitest';
import {
  CATCH_UP_MAX_BEHIND_S,
  CATCH_UP_MIN_BUFFER_S,
  CATCH_UP_START_S,
  CATCH_UP_STOP_S,
  SLOW_DOWN_START_S,
  SLOW_DOWN_STOP_S,
  liveCatchUpRate,
  liveSyncWithMarginS,
  type CatchUpInput,
} from '../src/live-catch-up.js';

const TARGET_S = 6;
const at = (behindS: number, over: Partial<CatchUpInput> = {}): number | null =>
  liveCatchUpRate({
    latencyS: TARGET_S + behindS,
    targetLatencyS: TARGET_S,
    bufferAheadS: 5,
    maxRate: 1.1,
    currentRate: 1,
    ...over,
  });

describe('liveCatchUpRate', () => {
  it('starts only past CATCH_UP_START_S behind the target, and stops only within CATCH_UP_STOP_S', () => {
    expect(at(CATCH_UP_START_S - 0.01)).toBeNull();
    expect(at(CATCH_UP_START_S + 0.01)).toBe(1.1);
    // Catching up: keeps on between the two thresholds (hysteresis), stops at the lower one.
    expect(at(CATCH_UP_START_S - 0.01, { currentRate: 1.1 })).toBeNull();
    expect(at(CATCH_UP_STOP_S + 0.01, { currentRate: 1.1 })).toBeNull();
    expect(at(CATCH_UP_STOP_S - 0.01, { currentRate: 1.1 })).toBe(1);
    expect(at(-2, { currentRate: 1.1 })).toBe(1);
  });

  it('does not drain a thin buffer, and leaves a viewer far behind (paused or sought back) there', () => {
    expect(at(3, { bufferAheadS: CATCH_UP_MIN_BUFFER_S })).toBeNull();
    expect(at(3, { bufferAheadS: CATCH_UP_MIN_BUFFER_S, currentRate: 1.1 })).toBe(1);
    expect(at(CATCH_UP_MAX_BEHIND_S + 1)).toBeNull();
    expect(at(CATCH_UP_MAX_BEHIND_S + 1, { currentRate: 1.1 })).toBe(1);
  });

  it('leaves a rate it did not set alone, and does nothing before hls.js knows the edge or when off', () => {
    expect(at(5, { currentRate: 1.5 })).toBeNull();
    expect(at(5, { currentRate: 0.5 })).toBeNull();
    expect(at(5, { targetLatencyS: null })).toBeNull();
    expect(at(5, { latencyS: 0 })).toBeNull();
    expect(at(5, { targetLatencyS: null, currentRate: 1.1 })).toBe(1);
    expect(at(5, { maxRate: 1 })).toBeNull();
  });
});

describe('liveCatchUpRate building a live margin', () => {
  const margin = { minRate: 0.95, buildMargin: true } as const;

  it('slows down past SLOW_DOWN_START_S ahead of the target, and back to 1 within SLOW_DOWN_STOP_S', () => {
    expect(at(-(SLOW_DOWN_START_S - 0.01), margin)).toBeNull();
    expect(at(-(SLOW_DOWN_START_S + 0.01), margin)).toBe(0.95);
    expect(at(-(SLOW_DOWN_STOP_S + 0.01), { ...margin, currentRate: 0.95 })).toBeNull();
    expect(at(-(SLOW_DOWN_STOP_S - 0.01), { ...margin, currentRate: 0.95 })).toBe(1);
    // Fallen behind while slowing (a stall): straight to catching up.
    expect(at(CATCH_UP_START_S + 0.5, { ...margin, currentRate: 0.95 })).toBe(1.1);
  });

  it('slows down whatever the buffer holds, and with catch-up off', () => {
    expect(at(-1, { ...margin, bufferAheadS: 0.1 })).toBe(0.95);
    expect(at(-1, { ...margin, maxRate: 1 })).toBe(0.95);
  });

  it('does not slow down without a margin to build, and ends a slow-down it started', () => {
    expect(at(-2, { minRate: 0.95 })).toBeNull();
    expect(at(-2, { minRate: 0.95, currentRate: 0.95 })).toBe(1);
    expect(at(-2, { ...margin, minRate: 1 })).toBeNull();
    // 0.95 is someone else's rate when this controller does not use it.
    expect(at(-2, { currentRate: 0.95 })).toBeNull();
  });
});

describe('liveSyncWithMarginS', () => {
  it('holds a player one segment behind a target duration plus the margin from the edge', () => {
    expect(liveSyncWithMarginS(1, 2, 500)).toBe(2.5);
    expect(liveSyncWithMarginS(1, 6, 750)).toBe(6.75);
    // A fraction of a segment behind is a position closer than one segment: the floor still holds.
    expect(liveSyncWithMarginS(0.5, 2, 500)).toBe(2.5);
    expect(liveSyncWithMarginS(1.2, 2, 500)).toBe(2.5);
  });

  it("leaves hls.js's own position when it is that far back already, the margin is off, or nothing is known", () => {
    expect(liveSyncWithMarginS(3, 2, 500)).toBeNull();
    expect(liveSyncWithMarginS(1.25, 2, 500)).toBeNull();
    expect(liveSyncWithMarginS(1, 2, 0)).toBeNull();
    expect(liveSyncWithMarginS(1, 0, 500)).toBeNull();
    expect(liveSyncWithMarginS(1, Number.NaN, 500)).toBeNull();
  });
});
