// Catch-up to the live position outside LL mode (live-catch-up.ts): faster while behind the
// target by more than CATCH_UP_START_S, back to 1 within CATCH_UP_STOP_S, never with a thin buffer,
// never far behind (watching back on purpose), and never over a rate someone else set.
import { describe, expect, it } from 'vitest';
import {
  CATCH_UP_MAX_BEHIND_S,
  CATCH_UP_MIN_BUFFER_S,
  CATCH_UP_START_S,
  CATCH_UP_STOP_S,
  liveCatchUpRate,
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
