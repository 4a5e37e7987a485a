/**
 * The simulator's event queue: events keyed by integer simulation time in milliseconds, popped in
 * time order, ties strictly in insertion order (FIFO).
 *
 * A simulation pushes and pops tens of millions of events, nearly all due within the next few
 * seconds, so this is a time wheel (calendar queue) rather than a heap:
 *
 * - The wheel is `wheelSizeMs` FIFO buckets; bucket `t mod wheelSizeMs` holds the events due at
 *   time `t`. Only events with `nowMs <= t < nowMs + wheelSizeMs` live in the wheel, so each
 *   bucket holds events of exactly one time and its FIFO order is insertion order.
 * - A bitmap of non-empty buckets lets `pop` skip 32 empty milliseconds per step.
 * - Events due at or beyond the wheel's horizon go to an overflow binary min-heap keyed by
 *   (time, insertion counter). Whenever `nowMs` advances, the heap's events that have come within
 *   the horizon move into the wheel, in heap order. An event of time `t` can only enter the heap
 *   while `nowMs <= t - wheelSizeMs`, and can only be pushed straight into the wheel once
 *   `nowMs > t - wheelSizeMs`; the move happens as soon as `nowMs` crosses that line, so every
 *   heap event of time `t` lands in its bucket before any direct push of time `t`. Order is exact.
 *
 * Buckets are reused arrays with read/write indices (no `shift()`), and the heap is three parallel
 * arrays, so the steady state allocates nothing per event. All state is per instance.
 *
 * With `realTimes`, times may be any finite number (the engine tests' network schedules at
 * fractions of a millisecond): every event then lives in the heap, still ordered by (time,
 * insertion), so equal times stay FIFO.
 */

export interface EventQueueOptions {
  /** Span of the wheel in milliseconds: a power of two in [32, 2^24]. Default 8192. */
  wheelSizeMs?: number;
  /** Accept any finite time, not only whole milliseconds (a heap only, no wheel). Default false. */
  realTimes?: boolean;
}

const DEFAULT_WHEEL_SIZE_MS = 8192;
/** A drained bucket longer than this gives its storage back instead of keeping it for reuse. */
const BUCKET_KEEP_LENGTH = 4096;

/** Index of the lowest set bit of a non-zero 32-bit integer. */
function lowestBit(bits: number): number {
  return 31 - Math.clz32(bits & -bits);
}

export class EventQueue<T> {
  private readonly wheelSize: number;
  private readonly realTimes: boolean;
  private readonly mask: number;
  private readonly buckets: (T | undefined)[][];
  /** Read index per bucket. */
  private readonly heads: Int32Array;
  /** Write index per bucket; 0 exactly when the bucket is empty. */
  private readonly tails: Int32Array;
  /** Bit `i` set when bucket `i` is non-empty. */
  private readonly occupied: Int32Array;
  private wheelCount = 0;
  private now = 0;

  private readonly heapTimes: number[] = [];
  private readonly heapSeqs: number[] = [];
  private readonly heapEvents: (T | undefined)[] = [];
  private heapSize = 0;
  /** Insertion counter for the overflow heap's tie-break. */
  private heapSeq = 0;

  constructor(options: EventQueueOptions = {}) {
    const size = options.wheelSizeMs ?? DEFAULT_WHEEL_SIZE_MS;
    if (!Number.isInteger(size) || size < 32 || size > 2 ** 24 || (size & (size - 1)) !== 0) {
      throw new RangeError(`wheelSizeMs must be a power of two in [32, 2^24], got ${size}`);
    }
    this.wheelSize = size;
    this.realTimes = options.realTimes ?? false;
    this.mask = size - 1;
    this.buckets = [];
    for (let i = 0; i < size; i++) this.buckets.push([]);
    this.heads = new Int32Array(size);
    this.tails = new Int32Array(size);
    this.occupied = new Int32Array(size >>> 5);
  }

  /** Number of pending events. */
  get size(): number {
    return this.wheelCount + this.heapSize;
  }

  /** Time of the most recently popped event (0 before the first pop). */
  get nowMs(): number {
    return this.now;
  }

  /**
   * Schedules `event` at `timeMs`, a safe integer (any finite number with `realTimes`) no earlier
   * than `nowMs`. Events of equal time pop
   * in the order they were pushed.
   */
  push(timeMs: number, event: T): void {
    if (this.realTimes) {
      if (!Number.isFinite(timeMs)) throw new RangeError(`event time must be finite, got ${timeMs}`);
      if (timeMs < this.now) {
        throw new RangeError(`event time ${timeMs} ms is earlier than the current time ${this.now} ms`);
      }
      this.heapPush(timeMs, event);
      return;
    }
    if (!Number.isSafeInteger(timeMs)) {
      throw new RangeError(`event time must be a safe integer number of ms, got ${timeMs}`);
    }
    if (timeMs < this.now) {
      throw new RangeError(`event time ${timeMs} ms is earlier than the current time ${this.now} ms`);
    }
    if (timeMs - this.now < this.wheelSize) this.wheelInsert(timeMs, event);
    else this.heapPush(timeMs, event);
  }

  /**
   * Removes and returns the earliest event (FIFO among equal times), or undefined when empty (use
   * `size` to tell an undefined event apart), and sets `nowMs` to its time.
   */
  pop(): T | undefined {
    if (this.realTimes) {
      if (this.heapSize === 0) return undefined;
      this.now = this.heapTimes[0] as number;
      const top = this.heapEvents[0] as T;
      this.heapRemoveTop();
      return top;
    }
    if (this.wheelCount === 0) {
      if (this.heapSize === 0) return undefined;
      this.now = this.heapTimes[0] as number;
      this.migrate();
    }
    const start = this.now & this.mask;
    const i = this.nextOccupied(start);
    const distance = (i - start) & this.mask;
    if (distance !== 0) {
      this.now += distance;
      this.migrate();
    }
    const bucket = this.buckets[i] as (T | undefined)[];
    const head = this.heads[i] as number;
    const event = bucket[head] as T;
    bucket[head] = undefined;
    if (head + 1 === this.tails[i]) {
      this.heads[i] = 0;
      this.tails[i] = 0;
      this.occupied[i >>> 5] = (this.occupied[i >>> 5] as number) & ~(1 << (i & 31));
      if (bucket.length > BUCKET_KEEP_LENGTH) bucket.length = 0;
    } else {
      this.heads[i] = head + 1;
    }
    this.wheelCount--;
    return event;
  }

  /** Time of the next event to pop, or undefined when empty. Does not change the queue. */
  peekTime(): number | undefined {
    if (this.wheelCount > 0) {
      const start = this.now & this.mask;
      return this.now + ((this.nextOccupied(start) - start) & this.mask);
    }
    return this.heapSize > 0 ? this.heapTimes[0] : undefined;
  }

  private wheelInsert(timeMs: number, event: T): void {
    // `&` takes the time modulo 2^32 first, which is harmless: the wheel size divides 2^32.
    const i = timeMs & this.mask;
    const tail = this.tails[i] as number;
    if (tail === 0) this.occupied[i >>> 5] = (this.occupied[i >>> 5] as number) | (1 << (i & 31));
    (this.buckets[i] as (T | undefined)[])[tail] = event;
    this.tails[i] = tail + 1;
    this.wheelCount++;
  }

  /** First non-empty bucket at or after `start`, wrapping around; the wheel must be non-empty. */
  private nextOccupied(start: number): number {
    const occupied = this.occupied;
    const words = occupied.length;
    let word = start >>> 5;
    let bits = (occupied[word] as number) & (-1 << (start & 31));
    if (bits !== 0) return (word << 5) | lowestBit(bits);
    for (let k = 1; k <= words; k++) {
      word = (word + 1) & (words - 1);
      bits = occupied[word] as number;
      if (bits !== 0) return (word << 5) | lowestBit(bits);
    }
    throw new Error('EventQueue invariant broken: wheel count is positive but no bucket is occupied');
  }

  /** Moves the heap's events that are now within the wheel's horizon into the wheel. */
  private migrate(): void {
    const limit = this.now + this.wheelSize;
    const times = this.heapTimes;
    while (this.heapSize > 0 && (times[0] as number) < limit) {
      const time = times[0] as number;
      const event = this.heapEvents[0] as T;
      this.heapRemoveTop();
      this.wheelInsert(time, event);
    }
  }

  private heapPush(timeMs: number, event: T): void {
    const times = this.heapTimes;
    const seqs = this.heapSeqs;
    const events = this.heapEvents;
    const seq = this.heapSeq++;
    let i = this.heapSize++;
    while (i > 0) {
      const parent = (i - 1) >>> 1;
      const pt = times[parent] as number;
      if (pt < timeMs || (pt === timeMs && (seqs[parent] as number) < seq)) break;
      times[i] = pt;
      seqs[i] = seqs[parent] as number;
      events[i] = events[parent];
      i = parent;
    }
    times[i] = timeMs;
    seqs[i] = seq;
    events[i] = event;
  }

  private heapRemoveTop(): void {
    const times = this.heapTimes;
    const seqs = this.heapSeqs;
    const events = this.heapEvents;
    const n = --this.heapSize;
    const time = times[n] as number;
    const seq = seqs[n] as number;
    const event = events[n];
    events[n] = undefined;
    if (n === 0) return;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      let ct = times[child] as number;
      let cs = seqs[child] as number;
      const right = child + 1;
      if (right < n) {
        const rt = times[right] as number;
        const rs = seqs[right] as number;
        if (rt < ct || (rt === ct && rs < cs)) {
          child = right;
          ct = rt;
          cs = rs;
        }
      }
      if (time < ct || (time === ct && seq < cs)) break;
      times[i] = ct;
      seqs[i] = cs;
      events[i] = events[child];
      i = child;
    }
    times[i] = time;
    seqs[i] = seq;
    events[i] = event;
  }
}
