import { describe, expect, it } from 'vitest';
import { createRandom, type Random } from '@chunkycast/engine';
import { EventQueue } from '../src/net/queue.js';

interface RefItem {
  time: number;
  id: number;
}

/** Reference: a list kept in stable-sorted order by time (insert after all equal times). */
class ReferenceQueue {
  private readonly items: RefItem[] = [];

  push(time: number, id: number): void {
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.items[mid]!.time <= time) lo = mid + 1;
      else hi = mid;
    }
    this.items.splice(lo, 0, { time, id });
  }

  pop(): RefItem | undefined {
    return this.items.shift();
  }

  peekTime(): number | undefined {
    return this.items[0]?.time;
  }

  get size(): number {
    return this.items.length;
  }
}

/** Delay from now: many zeros and tiny values (equal times), the usual 0–5000 ms, the wheel's edge, far future. */
function drawDelay(random: Random, wheel: number): number {
  const k = random.int(100);
  if (k < 25) return 0;
  if (k < 45) return random.int(4);
  if (k < 72) return random.int(5001);
  if (k < 82) return wheel - 2 + random.int(5);
  if (k < 88) return Math.max(0, (1 + random.int(4)) * wheel - 1 + random.int(3));
  if (k < 96) return wheel + random.int(200_000);
  return random.int(2_000_000_000);
}

function compareWithReference(seed: number, wheelSizeMs: number | undefined, operations: number) {
  const wheel = wheelSizeMs ?? 8192;
  const random = createRandom(seed);
  const queue = new EventQueue<number>(wheelSizeMs === undefined ? {} : { wheelSizeMs });
  const reference = new ReferenceQueue();
  let nextId = 0;
  let pushProbability = 0.6;
  let lastPushedTime = 0;
  const counts = { pops: 0, beyondHorizon: 0, emptied: 0, equalTimePops: 0 };
  let lastPoppedTime = -1;
  for (let op = 0; op < operations; op++) {
    if (op % 2000 === 0) pushProbability = [0.3, 0.5, 0.55, 0.7][random.int(4)]!;
    if (random.nextFloat() < pushProbability) {
      // Sometimes repeat the previous push's time exactly, to pile up ties in every bucket.
      const time =
        random.int(10) === 0 && lastPushedTime >= queue.nowMs
          ? lastPushedTime
          : queue.nowMs + drawDelay(random, wheel);
      if (time - queue.nowMs >= wheel) counts.beyondHorizon++;
      queue.push(time, nextId);
      reference.push(time, nextId);
      lastPushedTime = time;
      nextId++;
    } else {
      const expected = reference.pop();
      const actual = queue.pop();
      if (expected === undefined) {
        expect(actual).toBeUndefined();
      } else {
        if (actual !== expected.id || queue.nowMs !== expected.time) {
          throw new Error(
            `op ${op}: popped ${actual} at ${queue.nowMs}, expected ${expected.id} at ${expected.time}`,
          );
        }
        if (expected.time === lastPoppedTime) counts.equalTimePops++;
        lastPoppedTime = expected.time;
        counts.pops++;
        if (reference.size === 0) counts.emptied++;
      }
    }
    if (queue.size !== reference.size || queue.peekTime() !== reference.peekTime()) {
      throw new Error(
        `op ${op}: size ${queue.size}/${reference.size}, peek ${queue.peekTime()}/${reference.peekTime()}`,
      );
    }
  }
  // Drain what is left.
  for (;;) {
    const expected = reference.pop();
    const actual = queue.pop();
    if (expected === undefined) break;
    expect([actual, queue.nowMs]).toEqual([expected.id, expected.time]);
  }
  expect(queue.pop()).toBeUndefined();
  expect(queue.size).toBe(0);
  return counts;
}

describe('EventQueue', () => {
  it('matches a stable sort by time over 100k mixed operations (default wheel)', () => {
    for (const seed of [1, 2, 3]) {
      const counts = compareWithReference(seed, undefined, 100_000);
      // The workload really exercised ties, the overflow heap and the empty-queue jump.
      expect(counts.pops).toBeGreaterThan(30_000);
      expect(counts.equalTimePops).toBeGreaterThan(5_000);
      expect(counts.beyondHorizon).toBeGreaterThan(5_000);
      expect(counts.emptied).toBeGreaterThan(5);
    }
  });

  it('matches the reference with a tiny wheel, where nearly everything wraps or overflows', () => {
    for (const seed of [4, 5]) {
      const counts = compareWithReference(seed, 32, 100_000);
      expect(counts.beyondHorizon).toBeGreaterThan(20_000);
    }
  });

  it('with realTimes, orders any finite times like a stable sort (ties FIFO)', () => {
    const random = createRandom(6);
    const queue = new EventQueue<number>({ realTimes: true });
    const reference = new ReferenceQueue();
    let equalTimePops = 0;
    let lastPopped = -1;
    for (let id = 0; id < 50_000; id++) {
      if (random.nextFloat() < 0.55) {
        // Fractions of a millisecond, and many exact repeats of a time (ties).
        const delay = random.int(4) === 0 ? 0 : random.int(5000) / 3;
        queue.push(queue.nowMs + delay, id);
        reference.push(queue.nowMs + delay, id);
      } else {
        const expected = reference.pop();
        const actual = queue.pop();
        expect([actual, expected === undefined ? undefined : queue.nowMs]).toEqual([
          expected?.id,
          expected?.time,
        ]);
        if (expected !== undefined && expected.time === lastPopped) equalTimePops++;
        if (expected !== undefined) lastPopped = expected.time;
      }
      expect(queue.peekTime()).toBe(reference.peekTime());
    }
    expect(equalTimePops).toBeGreaterThan(1000);
    expect(Number.isInteger(lastPopped)).toBe(false);
    expect(() => {
      queue.push(queue.nowMs - 0.5, -1);
    }).toThrow(RangeError);
    expect(() => {
      queue.push(Number.NaN, -1);
    }).toThrow(RangeError);
  });

  it('keeps FIFO between events that waited in the overflow heap and later direct pushes', () => {
    const queue = new EventQueue<string>();
    queue.push(10_000, 'far-1');
    queue.push(10_000, 'far-2');
    queue.push(5_000, 'near');
    expect(queue.peekTime()).toBe(5_000);
    expect(queue.pop()).toBe('near');
    expect(queue.nowMs).toBe(5_000);
    // 10 000 is now inside the wheel's horizon; a direct push of that time must come after.
    queue.push(10_000, 'direct');
    queue.push(5_000, 'now');
    expect([queue.pop(), queue.pop(), queue.pop(), queue.pop()]).toEqual(['now', 'far-1', 'far-2', 'direct']);
    expect(queue.nowMs).toBe(10_000);
    expect(queue.pop()).toBeUndefined();
    expect(queue.nowMs).toBe(10_000);
    expect(queue.peekTime()).toBeUndefined();
  });

  it('jumps over long empty stretches and far-future gaps', () => {
    const queue = new EventQueue<number>();
    const times = [3, 8191, 8192, 8193, 16_384, 1_000_000, 2 ** 31 + 5, 2 ** 40];
    for (const [i, t] of [...times].reverse().entries()) queue.push(t, i);
    const popped: number[] = [];
    while (queue.size > 0) {
      queue.pop();
      popped.push(queue.nowMs);
    }
    expect(popped).toEqual(times);
  });

  it('rejects non-integer, negative, unsafe and past times with RangeError', () => {
    const queue = new EventQueue<number>();
    expect(() => {
      queue.push(1.5, 0);
    }).toThrow(RangeError);
    expect(() => {
      queue.push(Number.NaN, 0);
    }).toThrow(RangeError);
    expect(() => {
      queue.push(Number.POSITIVE_INFINITY, 0);
    }).toThrow(RangeError);
    expect(() => {
      queue.push(2 ** 53, 0);
    }).toThrow(RangeError);
    expect(() => {
      queue.push(-1, 0);
    }).toThrow(RangeError);
    queue.push(100, 1);
    queue.pop();
    expect(() => {
      queue.push(99, 2);
    }).toThrow(RangeError);
    expect(queue.size).toBe(0);
    queue.push(100, 3);
    expect(queue.pop()).toBe(3);
    expect(() => new EventQueue({ wheelSizeMs: 1000 })).toThrow(RangeError);
    expect(() => new EventQueue({ wheelSizeMs: 16 })).toThrow(RangeError);
  });

  it('two queues do not share state', () => {
    const a = new EventQueue<string>();
    const b = new EventQueue<string>();
    a.push(7, 'a');
    b.push(3, 'b');
    expect(b.pop()).toBe('b');
    expect(a.peekTime()).toBe(7);
    expect(a.nowMs).toBe(0);
    expect(a.pop()).toBe('a');
  });

  it('micro-benchmark: push+pop throughput over 5M events', () => {
    const events = 5_000_000;
    const backlog = 100_000;
    const random = createRandom(42);
    const delays = new Int32Array(1 << 16);
    for (let i = 0; i < delays.length; i++) {
      // Mostly within the next 5 s, 1% far future.
      delays[i] = random.int(100) === 0 ? 8192 + random.int(600_000) : random.int(5001);
    }
    const queue = new EventQueue<number>();
    const started = performance.now();
    for (let i = 0; i < backlog; i++) queue.push(delays[i & 0xffff]!, i);
    let previous = 0;
    let outOfOrder = 0;
    for (let i = backlog; i < events; i++) {
      queue.pop();
      const now = queue.nowMs;
      if (now < previous) outOfOrder++;
      previous = now;
      queue.push(now + delays[i & 0xffff]!, i);
    }
    let popped = events - backlog;
    while (queue.pop() !== undefined) {
      if (queue.nowMs < previous) outOfOrder++;
      previous = queue.nowMs;
      popped++;
    }
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `EventQueue: ${events.toLocaleString('en-US')} push+pop pairs (backlog ${backlog.toLocaleString('en-US')}) ` +
        `in ${seconds.toFixed(2)} s = ${(events / seconds / 1e6).toFixed(1)} M pairs/s`,
    );
    expect(popped).toBe(events);
    expect(outOfOrder).toBe(0);
  });
});
