// The uplink estimator and the load controller (sdk/src/capacity.ts) on synthetic links: a fluid
// model of data channels draining into an uplink of known capacity, sampled every 100 ms.
import { describe, expect, it } from 'vitest';
import {
  LINK_BACKLOG_BYTES,
  RAISE_AFTER_MS,
  SAMPLE_INTERVAL_MS,
  UPLOAD_BURST_MS,
  UplinkEstimator,
  UploadBucket,
  UploadCapacity,
  WIRE_OVERHEAD,
  loadsForCapacity,
  streamKbps,
  type LoadChange,
  type Loads,
  type UplinkSample,
  type UploadCapacityOptions,
} from '../src/capacity.js';

/** A 1000 kbps stream: one slice is 62.5 kbps. */
const STREAM_KBPS = 1000;
const SLICE_KBPS = STREAM_KBPS / 16;
const DECLARED: Loads = { targetLoad: 16, maxLoad: 24 };

/**
 * `links` channels sharing an uplink of `capacityKbps`: each step every link is handed its share of
 * `demandKbps`, and the uplink drains the buffers in proportion to what they hold.
 */
class FluidUplink {
  written = 0;
  readonly buffered: number[];
  capacityKbps: number;
  constructor(
    capacityKbps: number,
    readonly links = 4,
  ) {
    this.capacityKbps = capacityKbps;
    this.buffered = Array.from({ length: links }, () => 0);
  }

  /** Advance `dtMs` with `demandKbps` offered; the last link alone can be made slow (`slowKbps`). */
  step(dtMs: number, demandKbps: number, slowKbps?: number): UplinkSample {
    const offered = (demandKbps * dtMs) / 8 / this.links;
    for (let i = 0; i < this.links; i++) this.buffered[i] = (this.buffered[i] ?? 0) + offered;
    this.written += offered * this.links;
    let budget = (this.capacityKbps * dtMs) / 8;
    if (slowKbps !== undefined) {
      const last = this.links - 1;
      const take = Math.min(this.buffered[last] ?? 0, (slowKbps * dtMs) / 8);
      this.buffered[last] = (this.buffered[last] ?? 0) - take;
      budget -= take;
    }
    const fair = this.links - (slowKbps === undefined ? 0 : 1);
    // Water-filling: repeatedly give every non-empty buffer an equal share of what is left.
    for (let round = 0; round < fair && budget > 1e-9; round++) {
      const open = this.buffered.slice(0, fair).filter((b) => b > 1e-9).length;
      if (open === 0) break;
      const share = budget / open;
      for (let i = 0; i < fair; i++) {
        const take = Math.min(this.buffered[i] ?? 0, share);
        this.buffered[i] = (this.buffered[i] ?? 0) - take;
        budget -= take;
      }
    }
    const total = this.buffered.reduce((a, b) => a + b, 0);
    return {
      writtenBytes: Math.round(this.written),
      channelBufferedBytes: Math.round(total),
      queuedBytes: 0,
      busyLinks: demandKbps > 0 || total > 0 ? this.links : 0,
      backloggedLinks: this.buffered.filter((b) => b >= LINK_BACKLOG_BYTES).length,
    };
  }
}

/** Drive an estimator for `ms` and return every measurement. */
function run(est: UplinkEstimator, up: FluidUplink, t0: number, ms: number, demandKbps: number): number[] {
  const out: number[] = [];
  for (let t = t0; t < t0 + ms; t += SAMPLE_INTERVAL_MS) {
    const m = est.sample(t, up.step(SAMPLE_INTERVAL_MS, demandKbps));
    if (m !== null) out.push(m);
  }
  return out;
}

describe('UplinkEstimator', () => {
  it('a backlogged uplink of 1000 kbps measures ≈ 1000 kbps within 2.5 s', () => {
    const est = new UplinkEstimator();
    const up = new FluidUplink(1000);
    // 2000 kbps offered: each of the 4 links is 16 KiB behind after ½ s, then the warm-up and a window.
    const measurements = run(est, up, 0, 2500, 2000);
    expect(measurements.length).toBeGreaterThanOrEqual(1);
    for (const m of measurements) expect(m).toBeCloseTo(1000, -1);
    expect(est.capacityKbps).toBeCloseTo(1000, -1);
    expect(est.behindAt(2500)).toBe(true);
  });

  it('never backlogged: no measurement, no estimate (the uplink carried everything)', () => {
    const est = new UplinkEstimator();
    const up = new FluidUplink(10_000);
    expect(run(est, up, 0, 20_000, 1500)).toEqual([]);
    expect(est.capacityKbps).toBeNull();
    expect(est.behindAt(20_000)).toBe(false);
  });

  it('a short burst that drains within the warm-up is not measured', () => {
    const est = new UplinkEstimator();
    const up = new FluidUplink(4000);
    // 400 ms of 8 Mbit/s offered, then nothing: the backlog clears in well under a second.
    const measurements = [...run(est, up, 0, 400, 8000), ...run(est, up, 400, 3000, 0)];
    expect(measurements).toEqual([]);
  });

  it('one slow child among eight busy links is not our uplink falling behind', () => {
    const est = new UplinkEstimator();
    const up = new FluidUplink(10_000, 8);
    for (let t = 0; t < 10_000; t += SAMPLE_INTERVAL_MS)
      expect(est.sample(t, up.step(SAMPLE_INTERVAL_MS, 2000, 50))).toBeNull();
    expect(est.capacityKbps).toBeNull();
  });

  it('counters that restart (a new mesh node) are a new baseline, not a negative drain', () => {
    const est = new UplinkEstimator();
    run(est, new FluidUplink(1000), 0, 3000, 2000);
    const before = est.capacityKbps;
    const fresh = new FluidUplink(1000);
    expect(run(est, fresh, 3000, 1000, 2000)).toEqual([]);
    expect(est.capacityKbps).toBe(before);
  });
});

describe('loadsForCapacity and streamKbps', () => {
  it('TL = ⌊0.65·C/S⌋, ML = ⌊0.8·C/S⌋, within the declared bounds; below one slice, receive-only', () => {
    expect(loadsForCapacity(1000, SLICE_KBPS, DECLARED)).toEqual({ targetLoad: 10, maxLoad: 12 });
    expect(loadsForCapacity(100_000, SLICE_KBPS, DECLARED)).toEqual(DECLARED);
    expect(loadsForCapacity(100_000, SLICE_KBPS, { targetLoad: 4, maxLoad: 4 })).toEqual({
      targetLoad: 4,
      maxLoad: 4,
    });
    // 1.2 slices: 0.78 slices of TL — receive-only, not TL 0 with ML 0.
    expect(loadsForCapacity(75, SLICE_KBPS, DECLARED)).toEqual({ targetLoad: 0, maxLoad: 0 });
    expect(loadsForCapacity(0, SLICE_KBPS, DECLARED)).toEqual({ targetLoad: 0, maxLoad: 0 });
    expect(() => loadsForCapacity(1000, 0, DECLARED)).toThrow(RangeError);
    expect(() => loadsForCapacity(Number.NaN, SLICE_KBPS, DECLARED)).toThrow(RangeError);
  });

  it('the stream bitrate is the mean over segments with a duration', () => {
    expect(
      streamKbps([
        { bytes: 250_000, durationMs: 2000 },
        { bytes: 500_000, durationMs: 2000 },
        { bytes: 1, durationMs: 0 },
      ]),
    ).toBe(1500);
    expect(streamKbps([])).toBeNull();
    expect(streamKbps([{ bytes: 10, durationMs: 0 }])).toBeNull();
  });
});

/** A viewer: the controller, an uplink, and an engine whose load follows TL at once (for the test). */
class Viewer {
  readonly capacity: UploadCapacity;
  readonly up: FluidUplink;
  readonly changes: (LoadChange & { atMs: number })[] = [];
  load: number;
  now = 0;

  constructor(uplinkKbps: number, options: Partial<UploadCapacityOptions> = {}, load = 16) {
    this.capacity = new UploadCapacity({
      mode: 'measured',
      maxUploadKbps: null,
      declared: DECLARED,
      ...options,
    });
    this.up = new FluidUplink(uplinkKbps);
    this.load = load;
  }

  /** Run `ms`: we forward `load` slices (the engine sheds to the new TL `shedAfterMs` after a change). */
  run(ms: number, shedAfterMs = 3000): void {
    const end = this.now + ms;
    for (; this.now < end; this.now += SAMPLE_INTERVAL_MS) {
      const sample = this.up.step(SAMPLE_INTERVAL_MS, this.load * SLICE_KBPS);
      const change = this.capacity.update(this.now, sample, { sliceKbps: SLICE_KBPS, load: this.load });
      if (change !== null) this.changes.push({ ...change, atMs: this.now });
      const last = this.changes.at(-1);
      // The load phase moves children towards TL over a few rounds; new children come as TL allows.
      if (last !== undefined && this.now - last.atMs >= shedAfterMs)
        this.load = this.capacity.loads.targetLoad;
    }
  }
}

describe('UploadCapacity', () => {
  it('starts at the declared loads and leaves them on an uplink that keeps up', () => {
    const v = new Viewer(50_000);
    v.run(60_000);
    expect(v.changes).toEqual([]);
    expect(v.capacity.loads).toEqual(DECLARED);
    expect(v.capacity.capacityKbps).toBeNull();
    expect(v.capacity.source).toBe('measured');
  });

  it('an uplink that cannot carry the declared load sheds to 65% of it at once', () => {
    // 16 slices = 1000 kbps offered into 600 kbps.
    const v = new Viewer(600);
    v.run(3000);
    expect(v.changes.length).toBe(1);
    const change = v.changes[0]!;
    console.info(`600 kbps uplink: ${JSON.stringify(change)}`);
    // 400 kbps too much: each link is a packet behind after 1.3 s, then the warm-up and one window.
    expect(change.atMs).toBeLessThanOrEqual(3000);
    expect(change.capacityKbps).toBeCloseTo(600, -1);
    // A slice costs 62.5 kbps plus 7% of headers on the wire (66.9): 600 kbps = 8.97 of them,
    // TL ⌊5.83⌋ = 5, ML ⌊7.17⌋ = 7.
    expect([change.targetLoad, change.maxLoad]).toEqual([5, 7]);
    expect(change.reason).toBe('measured');
    expect(v.capacity.source).toBe('measured');
  });

  it('a sudden drop of the uplink is shed within a few seconds', () => {
    const v = new Viewer(50_000);
    v.run(20_000);
    expect(v.changes).toEqual([]);
    v.up.capacityKbps = 400;
    const dropAt = v.now;
    v.run(5000);
    const first = v.changes[0];
    expect(first).toBeDefined();
    expect(first!.atMs - dropAt).toBeLessThanOrEqual(2500);
    // 400 kbps = 5.98 slices with the headers: TL 3, ML 4, and the load (16) is above that ML:
    // applied at once.
    expect([first!.targetLoad, first!.maxLoad]).toEqual([3, 4]);
  });

  it('grows back slowly once the uplink recovers: one step per RAISE_AFTER_MS at most', () => {
    const v = new Viewer(600);
    v.run(20_000); // the backlog of the first seconds drains at TL 5
    expect(v.capacity.loads.targetLoad).toBe(5);
    // Its backlog came from a load above ML (16): no discount of the estimate.
    expect(v.capacity.estimator.lossDiscount).toBe(1);
    v.up.capacityKbps = 50_000;
    const recoveredAt = v.now;
    v.run(300_000);
    const raises = v.changes.filter((c) => c.atMs > recoveredAt);
    console.info(
      `recovery: ${raises.map((c) => `${Math.round((c.atMs - recoveredAt) / 1000)} s TL ${c.targetLoad}`).join(', ')}`,
    );
    expect(raises.length).toBeGreaterThanOrEqual(2);
    for (const r of raises) expect(r.reason).toBe('raised');
    // Never sooner than RAISE_AFTER_MS after the previous change, and never past the declared loads.
    for (let i = 1; i < raises.length; i++)
      expect(raises[i]!.atMs - raises[i - 1]!.atMs).toBeGreaterThanOrEqual(RAISE_AFTER_MS);
    const lastDecrease = v.changes.filter((c) => c.atMs <= recoveredAt).at(-1)!;
    expect(raises[0]!.atMs - lastDecrease.atMs).toBeGreaterThanOrEqual(RAISE_AFTER_MS);
    // Back at the declared TL; ML stays at 90% of what the probes showed (no probe past TL).
    expect(v.capacity.loads.targetLoad).toBe(DECLARED.targetLoad);
    expect(v.capacity.loads.maxLoad).toBeGreaterThan(DECLARED.targetLoad);
  });

  it('does not raise while the load stays below TL (no evidence the uplink carries more)', () => {
    const v = new Viewer(600);
    v.run(20_000);
    v.up.capacityKbps = 50_000;
    v.load = 3; // the swarm does not need us at TL 5
    const before = v.changes.length;
    for (let t = 0; t < 4 * RAISE_AFTER_MS; t += SAMPLE_INTERVAL_MS) {
      const sample = v.up.step(SAMPLE_INTERVAL_MS, v.load * SLICE_KBPS);
      expect(v.capacity.update(v.now, sample, { sliceKbps: SLICE_KBPS, load: v.load })).toBeNull();
      v.now += SAMPLE_INTERVAL_MS;
    }
    expect(v.changes.length).toBe(before);
  });

  it('max-upload-kbps caps the loads from the start, measured or fixed, and the estimate', () => {
    for (const mode of ['measured', 'fixed'] as const) {
      const v = new Viewer(50_000, { mode, maxUploadKbps: 600 });
      v.run(30_000);
      // The first sample with a known stream bitrate applies the cap's loads.
      expect(v.changes[0]?.atMs).toBe(0);
      expect(v.capacity.loads).toEqual({ targetLoad: 5, maxLoad: 7 });
      expect(v.capacity.capacityKbps).toBe(600);
      expect(v.capacity.source).toBe('capped');
      expect(v.changes.every((c) => c.reason === 'capped')).toBe(true);
    }
    // A measured uplink below the cap wins over it.
    const low = new Viewer(300, { maxUploadKbps: 600 });
    low.run(5000);
    expect(low.capacity.source).toBe('measured');
    expect(low.capacity.capacityKbps).toBeCloseTo(300, -1);
    expect(low.capacity.loads.targetLoad).toBe(2);
  });

  it('fixed without a cap never changes the loads, whatever the uplink does', () => {
    const v = new Viewer(300, { mode: 'fixed' });
    v.run(30_000);
    expect(v.changes).toEqual([]);
    expect(v.capacity.capacityKbps).toBeNull();
    expect(v.capacity.source).toBe('fixed');
    expect(v.capacity.behindAt(v.now)).toBe(false);
  });

  it('below one slice becomes receive-only, retries one slice after 30 s, and backs off', () => {
    const v = new Viewer(50);
    v.run(RAISE_AFTER_MS - 5000);
    expect(v.capacity.loads).toEqual({ targetLoad: 0, maxLoad: 0 });
    const enteredAt = v.changes[0]!.atMs;
    v.run(8 * RAISE_AFTER_MS);
    const retries = v.changes.filter((c) => c.reason === 'receive-only retry');
    console.info(
      `50 kbps uplink: ${v.changes.map((c) => `${(c.atMs / 1000).toFixed(1)} s ${c.targetLoad}/${c.maxLoad} ${c.reason}`).join(', ')}`,
    );
    expect(retries.length).toBeGreaterThanOrEqual(1);
    const first = retries[0]!;
    expect([first.targetLoad, first.maxLoad]).toEqual([1, 1]);
    expect(first.atMs - enteredAt).toBeGreaterThanOrEqual(RAISE_AFTER_MS);
    // One slice (62.5 kbps) into 50 kbps: behind again, receive-only again, the next retry later.
    const backToZero = v.changes.find((c) => c.atMs > first.atMs && c.maxLoad === 0);
    expect(backToZero).toBeDefined();
    const second = retries[1];
    expect(second).toBeDefined();
    expect(second!.atMs - backToZero!.atMs).toBeGreaterThanOrEqual(2 * RAISE_AFTER_MS);
  });

  it('wire counts above what the uplink delivers (retransmissions) are discounted until the backlog clears', () => {
    // 500 kbps delivered; the transports count 40% more, as at a bottleneck that drops and SCTP
    // resends. The engine sits at ML (no neighbour has room below its TL), 3 s after each change.
    const capacity = new UploadCapacity({ mode: 'measured', maxUploadKbps: null, declared: DECLARED });
    const up = new FluidUplink(500);
    const INFLATION = 1.4;
    let load = 16;
    let lastChangeAt = -Infinity;
    let reading: { bytes: number; atMs: number } | null = null;
    const changes: string[] = [];
    for (let now = 0; now < 90_000; now += SAMPLE_INTERVAL_MS) {
      const fluid = up.step(SAMPLE_INTERVAL_MS, load * SLICE_KBPS);
      if (now % 1000 === 0)
        reading = { bytes: (fluid.writtenBytes - fluid.channelBufferedBytes) * INFLATION, atMs: now };
      const sample: UplinkSample =
        reading === null
          ? fluid
          : { ...fluid, transportSentBytes: reading.bytes, transportReadAtMs: reading.atMs };
      const change = capacity.update(now, sample, { sliceKbps: SLICE_KBPS, load });
      if (change !== null) {
        lastChangeAt = now;
        changes.push(
          `${(now / 1000).toFixed(1)} s ${change.targetLoad}/${change.maxLoad} (${Math.round(change.capacityKbps)} kbps)`,
        );
      }
      if (now - lastChangeAt >= 3000) load = capacity.loads.maxLoad;
    }
    console.info(
      `500 kbps uplink counted 40% high: ${changes.join(', ')}; discount ${capacity.estimator.lossDiscount}`,
    );
    expect(capacity.estimator.lossDiscount).toBeLessThan(1);
    // It ends at a load the uplink carries, and is not behind.
    expect(load * SLICE_KBPS).toBeLessThanOrEqual(500);
    expect(capacity.behindAt(90_000)).toBe(false);
    // Without the inflation the same uplink is never discounted (its backlog was the declared load's).
    const honest = new Viewer(500);
    honest.run(90_000);
    expect(honest.capacity.estimator.lossDiscount).toBe(1);
  });

  it('noise around a slice boundary does not move TL up and down', () => {
    const v = new Viewer(668);
    v.run(4000);
    const settled = v.capacity.loads;
    // ±4% around 668 kbps (TL 6 needs 617, TL 7 needs 720 with the headers), changing every few seconds.
    for (let k = 0; k < 20; k++) {
      v.up.capacityKbps = k % 2 === 0 ? 695 : 641;
      v.run(3000);
    }
    const moves = v.changes.slice(1);
    console.info(
      `noisy 668 kbps: settled ${JSON.stringify(settled)}, then ${moves.map((c) => `${(c.atMs / 1000).toFixed(1)} s ${c.targetLoad}/${c.maxLoad} ${c.reason}`).join(', ')}`,
    );
    // At most one probe upward and its return in a minute.
    expect(moves.length).toBeLessThanOrEqual(2);
    expect(moves.filter((c) => c.reason === 'measured').length).toBeLessThanOrEqual(1);
  });
});

describe('UploadBucket (max-upload-kbps)', () => {
  it('lets data out at the cap (headers counted), control always, one message of debt at most', () => {
    const CAP_KBPS = 800;
    const bucket = new UploadBucket(CAP_KBPS, 0);
    const MESSAGE = 16_400;
    const perSecond = new Map<number, number>();
    let total = 0;
    // Data offered every 5 ms (26 Mbit/s) and a small control message every 100 ms, for 20 s.
    for (let t = 0; t < 20_000; t += 5) {
      if (t % 100 === 0) {
        bucket.spend(t, 200);
        perSecond.set(Math.floor(t / 1000), (perSecond.get(Math.floor(t / 1000)) ?? 0) + 200);
        total += 200;
      }
      if (bucket.allowsData(t)) {
        bucket.spend(t, MESSAGE);
        perSecond.set(Math.floor(t / 1000), (perSecond.get(Math.floor(t / 1000)) ?? 0) + MESSAGE);
        total += MESSAGE;
      }
    }
    const capBytesPerSecond = (CAP_KBPS * 1000) / 8 / WIRE_OVERHEAD;
    const slack = (CAP_KBPS / 8) * UPLOAD_BURST_MS + MESSAGE;
    for (const [second, bytes] of perSecond)
      expect(bytes, `second ${second}`).toBeLessThanOrEqual(capBytesPerSecond + slack);
    expect(total / 20).toBeGreaterThan(capBytesPerSecond * 0.95);
    expect(total / 20).toBeLessThanOrEqual(capBytesPerSecond + slack / 20);
  });

  it('a cap of 0 lets no data out; a bad cap is refused', () => {
    const bucket = new UploadBucket(0, 0);
    expect(bucket.allowsData(0)).toBe(false);
    expect(bucket.allowsData(60_000)).toBe(false);
    expect(() => new UploadBucket(-1, 0)).toThrow(RangeError);
    expect(() => new UploadBucket(Number.POSITIVE_INFINITY, 0)).toThrow(RangeError);
  });
});

describe('UplinkEstimator with the transports’ wire counts', () => {
  /**
   * A channel drained into a large SCTP send buffer: `bufferedAmount` empties at `drainKbps` while
   * the wire carries `wireKbps`, read once a second as the stats poll does.
   */
  function run(est: UplinkEstimator, seconds: number, wireKbps: number, drainKbps: number): void {
    let written = 0;
    let buffered = 0;
    let sent = 0;
    let readAt: number | undefined;
    let readSent: number | undefined;
    for (let t = 0; t <= seconds * 1000; t += SAMPLE_INTERVAL_MS) {
      // Demand far above both rates: every link stays behind the whole time.
      written += (3000 * SAMPLE_INTERVAL_MS) / 8;
      buffered += (3000 * SAMPLE_INTERVAL_MS) / 8 - (drainKbps * SAMPLE_INTERVAL_MS) / 8;
      sent += (wireKbps * SAMPLE_INTERVAL_MS) / 8;
      if (t % 1000 === 0) {
        readAt = t;
        readSent = sent;
      }
      est.sample(t, {
        writtenBytes: written,
        channelBufferedBytes: buffered,
        queuedBytes: 0,
        busyLinks: 4,
        backloggedLinks: 4,
        ...(readAt === undefined || readSent === undefined
          ? {}
          : { transportSentBytes: readSent, transportReadAtMs: readAt }),
      });
    }
  }

  it('measures what the wire carried, not what moved into the send buffer', () => {
    const est = new UplinkEstimator();
    run(est, 6, 500, 1600);
    expect(est.measurements).toBeGreaterThan(0);
    expect(est.capacityKbps).toBeCloseTo(500, 0);
  });

  it('outside a backlog, raises the estimate by what 3 s of the wire show, not by one jittery second', () => {
    const est = new UplinkEstimator();
    run(est, 6, 500, 500);
    expect(est.capacityKbps).toBeCloseTo(500, 0);
    // Then no backlog: readings once a second whose rates swing 700, 300, 500 kbit/s (a shaper's
    // queue filling, stats read late), 500 on average.
    let sent = (500 * 6100) / 8; // where run() left the wire count (its last reading, at 6 s)
    const rates = [700, 300, 500, 700, 300, 500, 700, 300, 500];
    for (let k = 0; k < rates.length; k++) {
      sent += ((rates[k] ?? 0) * 1000) / 8;
      const t = 7000 + k * 1000;
      est.sample(t, {
        writtenBytes: 1e7 + t,
        channelBufferedBytes: 0,
        queuedBytes: 0,
        busyLinks: 4,
        backloggedLinks: 0,
        transportSentBytes: sent,
        transportReadAtMs: t,
      });
    }
    // A 1 s window would have read 700; over 3 s a one-second spike counts a third (≤ 567).
    expect(est.capacityKbps).toBeLessThanOrEqual(570);
  });

  it('takes no lower bound from a window with backlogs in it (the wire then counts what was dropped and resent)', () => {
    const est = new UplinkEstimator();
    run(est, 6, 500, 500);
    // Bursts: behind for 400 ms of every second (too short to measure), the wire reading 700.
    let sent = (500 * 6100) / 8;
    for (let t = 6100; t <= 15_000; t += SAMPLE_INTERVAL_MS) {
      if (t % 1000 === 0) sent += (700 * 1000) / 8;
      const behindNow = t % 1000 < 400;
      est.sample(t, {
        writtenBytes: 1e7 + t,
        channelBufferedBytes: behindNow ? 80_000 : 0,
        queuedBytes: 0,
        busyLinks: 4,
        backloggedLinks: behindNow ? 4 : 0,
        transportSentBytes: sent,
        transportReadAtMs: Math.floor(t / 1000) * 1000,
      });
    }
    expect(est.capacityKbps).toBeCloseTo(500, 0);
  });

  it('needs a reading that began after the warm-up of the backlog', () => {
    const est = new UplinkEstimator();
    // Readings at 0 s and 1 s: the run began at 0 s, so 0 → 1 s still holds its warm-up.
    run(est, 1, 500, 500);
    expect(est.measurements).toBe(0);
    const later = new UplinkEstimator();
    run(later, 3, 500, 500);
    expect(later.measurements).toBeGreaterThan(0);
  });
});
