/**
 * The heartbeat as the README promises it: every socket is pinged once per `heartbeatMs`, however
 * many there are, and dropped after two missed pongs. The heartbeat's interval runs on fake time
 * (the sockets are real), so a full 15 s period takes no wall-clock time.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_HEARTBEAT_MS } from '@chunkycast/tracker';
import { HeartbeatWheel } from '../src/server/heartbeat.js';
import { cleanUpAfterEach, connect, start } from './ws-client.js';

cleanUpAfterEach();

/** Fake time advances in steps this long (finer than the heartbeat's own ticks). */
const STEP_MS = 100;

beforeEach(() => {
  // Only the interval: sockets, handshakes and the close grace keep real time.
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Connects `count` sockets that never answer a ping; returns the fake time each was dropped at. */
async function dropTimesOfSilentSockets(count: number, heartbeatMs: number): Promise<number[]> {
  const tracker = await start({ heartbeatMs });
  for (let i = 0; i < count; i++) await connect(tracker, { autoPong: false });
  expect(tracker.metrics().sessions).toBe(count);
  const dropped: number[] = [];
  for (let elapsedMs = STEP_MS; elapsedMs <= 4 * heartbeatMs; elapsedMs += STEP_MS) {
    vi.advanceTimersByTime(STEP_MS);
    // Counted when the tracker terminates the socket, synchronously within the tick.
    while (dropped.length < tracker.metrics().disconnects.heartbeat) dropped.push(elapsedMs);
  }
  return dropped;
}

describe('heartbeat', () => {
  for (const count of [1, 5, 20])
    it(`drops ${count} silent socket(s) only after two missed pings of ${DEFAULT_HEARTBEAT_MS} ms`, async () => {
      const dropped = await dropTimesOfSilentSockets(count, DEFAULT_HEARTBEAT_MS);
      expect(dropped).toHaveLength(count);
      for (const atMs of dropped) {
        // Pinged once a period: the first ping within one, two missed, dropped at the third.
        expect(atMs).toBeGreaterThanOrEqual(2 * DEFAULT_HEARTBEAT_MS);
        expect(atMs).toBeLessThanOrEqual(3 * DEFAULT_HEARTBEAT_MS + STEP_MS);
      }
    });
});

describe('HeartbeatWheel', () => {
  it('visits each item once per period on a fixed slot, however many come and go', () => {
    const slices = 10;
    const wheel = new HeartbeatWheel<string>(slices);
    wheel.add('watched');
    const visits: number[] = [];
    let churned = 0;
    for (let tick = 0; tick < 10 * slices; tick++) {
      // Others join and leave all the time, in numbers that change from period to period.
      for (let k = 0; k < tick % 7; k++) wheel.add(`other-${churned++}`);
      const due = wheel.tick();
      if (due.includes('watched')) visits.push(tick);
      for (const item of due) if (item !== 'watched' && (tick + item.length) % 3 === 0) wheel.remove(item);
    }
    expect(visits).toHaveLength(10);
    // Exactly one period apart, the first within one period.
    expect(visits[0]).toBeLessThan(slices);
    for (let i = 1; i < visits.length; i++) expect((visits[i] ?? 0) - (visits[i - 1] ?? 0)).toBe(slices);
  });

  it('spreads items evenly over the slots', () => {
    const wheel = new HeartbeatWheel<number>(50);
    for (let i = 0; i < 1000; i++) wheel.add(i);
    const sizes = Array.from({ length: 50 }, () => wheel.tick().length);
    expect(Math.max(...sizes)).toBe(20);
    expect(Math.min(...sizes)).toBe(20);
  });
});
