// Upload capacity, measured (issue 12): what a viewer's uplink actually carries, and the target and
// maximum load (slices) that follow from it. Pure logic — the caller passes the time and samples of
// its data channels — so it runs in Node tests with synthetic samples.
//
// The measurement: a WebRTC data channel's send rate is bounded by SCTP's congestion control, so
// while our channels are backlogged (demand above what the uplink takes) the rate at which they
// drain — bytes written minus the growth of bufferedAmount, per second — is the uplink's capacity.
// While they are never backlogged the uplink carried everything asked of it: capacity is at least
// that rate (a lower bound). Forwarding itself is the probe; there is no separate one at join (it
// would need a peer to send to, and megabytes to get SCTP past slow start: data a viewer who pays for
// it should not spend to learn what its first children show anyway).

/** Open links the uplink's state is judged from, summed by the host (MeshNode.uplinkSample). */
export interface UplinkSample {
  /** Bytes written to data channels so far (all links, control included); only grows. */
  readonly writtenBytes: number;
  /** Σ bufferedAmount of the open channels: written, not yet sent. */
  readonly channelBufferedBytes: number;
  /** Bytes in the host's own queues, not yet written (backpressure or the upload cap). */
  readonly queuedBytes: number;
  /** Open links that had data to send since the previous sample (BUSY_LINK_BYTES written or unsent). */
  readonly busyLinks: number;
  /** Of those, links holding at least LINK_BACKLOG_BYTES unsent (channel buffer plus host queue). */
  readonly backloggedLinks: number;
  /**
   * Bytes the ICE transports have sent so far (Σ of the selected candidate pairs' `bytesSent`,
   * links gone included), as of `transportReadAtMs`; absent where the host cannot read them. What
   * actually left on the wire: unlike the drain of `bufferedAmount`, it does not count bytes that
   * only moved into SCTP's own send buffer, which in Chromium holds hundreds of kilobytes and
   * swallows the first second of a burst whatever the uplink (in the lab, a thin uplink seemed by
   * that count to drain several times faster than it could).
   */
  readonly transportSentBytes?: number;
  /** When `transportSentBytes` was read (the same clock as the samples). */
  readonly transportReadAtMs?: number;
}

/**
 * A link holding this much unsent is behind: a full media packet (wire's limit, 16 KiB) still
 * waiting when we look. Any send leaves one in the buffer for a moment, so one look proves nothing;
 * a run of looks every SAMPLE_INTERVAL_MS for RUN_WARMUP_MS and more does (the channel was busy the
 * whole time). Larger thresholds only delay the verdict: at 40% overload a link gains 16 KiB in about
 * a second.
 */
export const LINK_BACKLOG_BYTES = 16 * 1024;
/**
 * A link counts as busy (it had data to send) when it wrote or holds at least this much since the
 * previous sample: more than a control message (an advert, an announcement: well under 4 KiB), so
 * neighbours we only exchange adverts with do not outvote the links that carry media.
 */
export const BUSY_LINK_BYTES = 4 * 1024;
/**
 * The first part of a backlogged run is not measured: after idle, SCTP's window is still opening,
 * and buffers below the channel (the socket, a shaper's queue) swallow the start of a burst faster
 * than the wire carries it, which would inflate the drain rate.
 */
const RUN_WARMUP_MS = 500;
/** Outside backlogs the wire's rate is a lower bound on the capacity, taken over this long a window. */
const LOWER_BOUND_WINDOW_MS = 3000;
/** A measurement is the drain over this much backlogged time: a few SCTP round trips and packets. */
const MEASURE_WINDOW_MS = 1000;
/** How often the session samples its links: short enough that a 1 s window holds ten samples. */
export const SAMPLE_INTERVAL_MS = 100;
/**
 * TL is this share of the capacity. Our upload comes in bursts (a segment's packets are forwarded
 * as they arrive, in a fraction of the segment's duration), control, repair and retransmissions
 * come on top, and the bound we keep is "never above 90% of the uplink for more than 2 s". Loads
 * settle between TL and ULT (TL + 12.5%), and the estimate itself is off by ±10%: at 75% and 90%
 * the lab's 1 Mbit/s viewer sat at 96% of its cap for 20 s at a time; at 65% and 80% the load at
 * ULT is about 75% of the uplink.
 */
const TARGET_UTILISATION = 0.65;
/**
 * ML is this share, under the 90% bound by the estimate's error. Admission never goes past ML, so
 * even a node the load phase cannot relieve (no underloaded neighbour) stays within it. (The
 * thesis's ML = 1.5·TL assumes TL is a declared share of a larger uplink; here TL is already
 * measured against the uplink.)
 */
const MAX_UTILISATION = 0.8;
/**
 * Loads rise only when 10% less capacity would still give them: measurement noise around a slice
 * boundary must not move TL up and down every second (each change is an advert round and switches).
 */
const RAISE_HYSTERESIS = 0.1;
/** Decreases at most this often, unless the load is above the new ML (then at once). */
const MIN_DECREASE_INTERVAL_MS = 2000;
/** Increases at most this often: each one draws children, and their effect shows within seconds. */
const MIN_INCREASE_INTERVAL_MS = 5000;
/**
 * The way up. Below its declared TL a viewer forwards at most 80% of its estimate, so forwarding
 * alone never proves more (bursts that drain faster than the estimate do: every second's drain is a
 * lower bound). After this long without backlog while forwarding at least TL, the estimate is
 * raised by RAISE_FACTOR (at least one slice more) as a probe: the uplink may have recovered (cross
 * traffic ended). A probe that fails — a measured decrease within the wait — costs a backlog of a
 * few seconds, so the wait doubles after each failure, up to PROBE_WAIT_MAX_MS, and returns to this
 * after a probe that held. A receive-only viewer forwards nothing and measures nothing: it probes one
 * slice on the same schedule.
 */
export const RAISE_AFTER_MS = 30_000;
const PROBE_WAIT_MAX_MS = 480_000;
/** A raise: 25% more, at least one slice. */
const RAISE_FACTOR = 1.25;
/**
 * Payload bytes are counted this much larger on the wire: each SCTP packet of ~1.2 kB carries about
 * 85 bytes of SCTP, DTLS, UDP and IP headers (7%). The upload cap counts them (the payer's meter
 * does), and so does a slice's cost against the measured capacity (the transports' byte counts
 * include them).
 */
export const WIRE_OVERHEAD = 1.07;
/**
 * A backlog that lasts this long while the load is within the ML set from the estimate means the
 * estimate is too high. The transports' byte counts include retransmissions: at a bottleneck that
 * drops (a modem's queue, the lab's tbf) they run above what the uplink delivers — a 0.5 Mbit/s lab
 * uplink read 0.57 Mbit/s and stayed saturated at the loads that followed. Long enough for a
 * segment's burst (2 s of media forwarded as it arrives) to drain at ML.
 */
const BACKLOG_PERSIST_MS = 3000;
/** Each such persistent backlog discounts the estimate, and every later measurement, by this factor. */
const BACKLOG_DISCOUNT = 0.85;
/** The discount never goes below this: loss alone does not halve what an uplink carries. */
const MIN_LOSS_DISCOUNT = 0.5;
/** The stream's bitrate is the mean of its last this many announced segments. */
export const BITRATE_SEGMENTS = 8;

export type UploadCapacityMode = 'measured' | 'fixed';
export type UploadCapacitySource = 'measured' | 'fixed' | 'capped';

export interface Loads {
  readonly targetLoad: number;
  readonly maxLoad: number;
}

/**
 * Loads for an uplink of `capacityKbps` when one slice is `sliceKbps`: TL = ⌊0.65·C/S⌋,
 * ML = ⌊0.8·C/S⌋ (at least TL), each at most its bound. Below one slice of TL: receive-only (0, 0).
 */
export function loadsForCapacity(capacityKbps: number, sliceKbps: number, bounds: Loads): Loads {
  if (!(capacityKbps >= 0) || !(sliceKbps > 0))
    throw new RangeError('capacity ≥ 0 and slice rate > 0 needed');
  const slices = capacityKbps / sliceKbps;
  // The epsilon keeps exact products (0.8 · 15 = 12) from rounding down through float error.
  const target = Math.floor(slices * TARGET_UTILISATION + 1e-9);
  if (target < 1) return { targetLoad: 0, maxLoad: 0 };
  const max = Math.max(target, Math.floor(slices * MAX_UTILISATION + 1e-9));
  const maxLoad = Math.min(max, bounds.maxLoad);
  return { targetLoad: Math.min(target, bounds.targetLoad, maxLoad), maxLoad };
}

/**
 * The stream's bitrate (kbps) from announced segments (`bytes` over `durationMs`), or null without a
 * usable one. A mean over several segments, not the largest: TARGET_UTILISATION leaves the room for
 * a bigger segment.
 */
export function streamKbps(
  segments: readonly { readonly bytes: number; readonly durationMs: number }[],
): number | null {
  let bytes = 0;
  let ms = 0;
  for (const s of segments) {
    if (!(s.durationMs > 0) || !(s.bytes >= 0)) continue;
    bytes += s.bytes;
    ms += s.durationMs;
  }
  return ms > 0 && bytes > 0 ? (bytes * 8) / ms : null;
}

/** Whether a sample's links are behind: at least half of those with something to send. */
function behind(s: UplinkSample): boolean {
  // One child with a slow downlink backs up only its own link; our uplink falling behind backs up
  // every link that carries data. With one or two busy links the two cannot be told apart.
  return s.backloggedLinks > 0 && s.backloggedLinks * 2 >= s.busyLinks;
}

/**
 * The uplink's capacity from samples of the data channels. A backlogged run (every sample behind)
 * measures the capacity once per MEASURE_WINDOW_MS after RUN_WARMUP_MS: the estimate becomes that
 * measurement, up or down. Outside runs, a window that drained more than the estimate raises it to
 * that (a lower bound). `raise` is the controller's slow probe upward.
 */
export class UplinkEstimator {
  /** The estimate, kbps; null until the first backlogged measurement. */
  capacityKbps: number | null = null;
  /** Backlogged measurements taken. */
  measurements = 0;
  private prev: { atMs: number; sample: UplinkSample } | null = null;
  /** Start of the current backlogged run (time of its first behind sample), or null. */
  private runStartMs: number | null = null;
  private windowBytes = 0;
  private windowMs = 0;
  /** Drain over the current 1 s window, whatever the backlog: a lower bound on the capacity. */
  private recentBytes = 0;
  private recentMs = 0;
  /** When a sample last found the links behind (the wire's rate is then no lower bound). */
  private lastBehindAtMs = -Infinity;
  /**
   * Recent transport readings, oldest first: the last is the previous reading (measurements over
   * one interval), the first the one LOWER_BOUND_WINDOW_MS back (the lower bound).
   */
  private transportHistory: { atMs: number; sentBytes: number }[] = [];
  /**
   * What measurements are multiplied by: 1 until a backlog persists at loads set from the estimate
   * (UploadCapacity, BACKLOG_PERSIST_MS); then the share of the wire's bytes the uplink delivers.
   * Kept for the estimator's life: it describes the bottleneck, not a moment of it.
   */
  lossDiscount = 1;

  /** In a backlogged run past its warm-up: the uplink is behind now. */
  behindAt(nowMs: number): boolean {
    return this.runStartMs !== null && nowMs - this.runStartMs >= RUN_WARMUP_MS;
  }

  /** Forget the previous sample (the host's counters restarted: a new mesh node). */
  resetBaseline(): void {
    this.prev = null;
    this.transportHistory = [];
    this.endRun();
    this.recentBytes = 0;
    this.recentMs = 0;
  }

  /**
   * A transport reading (wire bytes sent, at `atMs`): the rate since the previous one is the
   * capacity if every sample between them was behind (the backlogged run began, warm-up included,
   * before the previous reading), else a lower bound. Returns a new measurement (kbps) or null.
   */
  private transportReading(nowMs: number, atMs: number, sentBytes: number): number | null {
    const history = this.transportHistory;
    const prev = history.at(-1);
    if (prev !== undefined && atMs <= prev.atMs) return null; // no new reading
    if (prev === undefined || sentBytes < prev.sentBytes) {
      this.transportHistory = [{ atMs, sentBytes }];
      return null; // first, or a new host's counters
    }
    history.push({ atMs, sentBytes });
    while (history.length > 1 && atMs - (history[1]?.atMs ?? atMs) >= LOWER_BOUND_WINDOW_MS) history.shift();
    const kbps = (((sentBytes - prev.sentBytes) * 8) / (atMs - prev.atMs)) * this.lossDiscount;
    const run = this.runStartMs;
    if (run !== null && run + RUN_WARMUP_MS <= prev.atMs && this.behindAt(nowMs)) {
      this.capacityKbps = kbps;
      this.measurements++;
      return kbps;
    }
    // Outside a backlog the rate is a lower bound, over a longer window: a 1 s reading catches the
    // fill of queues below us (a shaper's 200 ms) and the jitter of when the stats were read, and
    // raised a 2 Mbit/s lab uplink's estimate to 2.8. Only over a window the links kept up through:
    // behind a dropping bottleneck the wire's count includes what was dropped and resent (a 0.5
    // Mbit/s lab uplink read 0.61 over 3 s of bursts).
    const oldest = history[0];
    if (
      oldest !== undefined &&
      oldest.atMs > this.lastBehindAtMs &&
      atMs - oldest.atMs >= LOWER_BOUND_WINDOW_MS
    ) {
      const floorKbps = (((sentBytes - oldest.sentBytes) * 8) / (atMs - oldest.atMs)) * this.lossDiscount;
      if (this.capacityKbps !== null && floorKbps > this.capacityKbps) this.capacityKbps = floorKbps;
    }
    return null;
  }

  /** One sample; returns a new backlogged measurement (kbps) when one completes, else null. */
  sample(nowMs: number, sample: UplinkSample): number | null {
    const prev = this.prev;
    if (prev !== null && nowMs <= prev.atMs) return null; // the same instant twice: nothing to measure
    // Counters that went backwards belong to a new host: this sample is the new baseline.
    const restarted = prev !== null && sample.writtenBytes < prev.sample.writtenBytes;
    if (restarted) this.resetBaseline();
    this.prev = { atMs: nowMs, sample };
    if (prev === null || restarted) return null;
    if (sample.transportSentBytes !== undefined && sample.transportReadAtMs !== undefined) {
      // The wire's own count: the backlog decides only whether a reading is a measurement.
      if (behind(sample)) this.lastBehindAtMs = nowMs;
      if (behind(sample) && behind(prev.sample)) this.runStartMs ??= prev.atMs;
      else this.endRun();
      return this.transportReading(nowMs, sample.transportReadAtMs, sample.transportSentBytes);
    }
    const dtMs = nowMs - prev.atMs;
    const drained = Math.max(
      0,
      sample.writtenBytes -
        prev.sample.writtenBytes -
        (sample.channelBufferedBytes - prev.sample.channelBufferedBytes),
    );
    // What left in the last second left: the uplink carries at least that.
    this.recentBytes += drained;
    this.recentMs += dtMs;
    if (this.recentMs >= MEASURE_WINDOW_MS) {
      const kbps = (this.recentBytes * 8) / this.recentMs;
      if (this.capacityKbps !== null && kbps > this.capacityKbps) this.capacityKbps = kbps;
      this.recentBytes = 0;
      this.recentMs = 0;
    }
    if (behind(sample) && behind(prev.sample)) {
      this.runStartMs ??= prev.atMs;
      // Only intervals that start after the warm-up count.
      if (prev.atMs - this.runStartMs < RUN_WARMUP_MS) return null;
      this.windowBytes += drained;
      this.windowMs += dtMs;
      if (this.windowMs < MEASURE_WINDOW_MS) return null;
      const kbps = ((this.windowBytes * 8) / this.windowMs) * this.lossDiscount;
      this.windowBytes = 0;
      this.windowMs = 0;
      this.capacityKbps = kbps;
      this.measurements++;
      return kbps;
    }
    this.endRun();
    return null;
  }

  /**
   * The uplink stayed behind at loads set from the estimate: it delivers less than the wire counts
   * say. Lowers the estimate and every later measurement by `factor` (not below MIN_LOSS_DISCOUNT).
   */
  discount(factor: number): void {
    const next = Math.max(MIN_LOSS_DISCOUNT, this.lossDiscount * factor);
    if (this.capacityKbps !== null) this.capacityKbps *= next / this.lossDiscount;
    this.lossDiscount = next;
  }

  /** Raise the estimate to at least `kbps` (the controller's probe upward). */
  raise(kbps: number): void {
    if (this.capacityKbps !== null && kbps > this.capacityKbps) this.capacityKbps = kbps;
  }

  private endRun(): void {
    this.runStartMs = null;
    this.windowBytes = 0;
    this.windowMs = 0;
  }
}

export interface UploadCapacityOptions {
  /** 'measured' (default): loads follow the measured uplink within the bounds; 'fixed': the bounds. */
  readonly mode: UploadCapacityMode;
  /** Upload cap in kbps (the `max-upload-kbps` attribute), or null. */
  readonly maxUploadKbps: number | null;
  /** The declared loads (`target-load`, `max-load`): the starting loads and upper bounds. */
  readonly declared: Loads;
}

/** What the controller saw this sample, besides the links. */
export interface UploadContext {
  /** One slice's rate, kbps (the stream's bitrate / 16), null while no segment is announced. */
  readonly sliceKbps: number | null;
  /** The engine's current load, slices. */
  readonly load: number;
}

export interface LoadChange extends Loads {
  readonly previous: Loads;
  readonly capacityKbps: number;
  readonly reason: 'measured' | 'raised' | 'capped' | 'receive-only retry';
}

/**
 * Turns the uplink estimate (or the cap) into TL and ML for the engine: the declared loads at
 * first — a viewer must forward to measure anything, and a swarm whose viewers all started low
 * would have too little capacity while they proved themselves — then lower as soon as the uplink
 * falls behind, and higher again only slowly. A change is returned at most every
 * MIN_DECREASE_INTERVAL_MS down (at once when the load is above the new ML) and
 * MIN_INCREASE_INTERVAL_MS up; the caller applies it with the engine's setLoad.
 */
export class UploadCapacity {
  readonly estimator = new UplinkEstimator();
  private current: Loads;
  private lastChangeAtMs = -Infinity;
  /** Since when the uplink has been clean (no backlog) while forwarding at least TL. */
  private cleanSinceMs: number | null = null;
  private raisePending = false;
  /** The current wait before a probe upward (RAISE_AFTER_MS, doubled per failed probe). */
  private probeWaitMs = RAISE_AFTER_MS;
  private lastProbeAtMs = -Infinity;
  private lastProbeFailed = false;
  /** Since when the uplink has been behind without a break, and its unsent bytes then; or null. */
  private behindSince: { atMs: number; unsentBytes: number } | null = null;

  constructor(private readonly options: UploadCapacityOptions) {
    this.current = options.declared;
  }

  /** The loads in force (what the engine was last told). */
  get loads(): Loads {
    return this.current;
  }

  /** The capacity the loads come from, kbps: the estimate within the cap; null when neither is known. */
  get capacityKbps(): number | null {
    const cap = this.options.maxUploadKbps;
    const measured = this.options.mode === 'measured' ? this.estimator.capacityKbps : null;
    if (measured === null) return cap;
    return cap === null ? measured : Math.min(measured, cap);
  }

  get source(): UploadCapacitySource {
    const cap = this.options.maxUploadKbps;
    const measured = this.options.mode === 'measured' ? this.estimator.capacityKbps : null;
    if (cap !== null && (measured === null || cap <= measured)) return 'capped';
    return this.options.mode;
  }

  /** Whether the uplink is behind now (a backlogged run past its warm-up). */
  behindAt(nowMs: number): boolean {
    return this.options.mode === 'measured' && this.estimator.behindAt(nowMs);
  }

  /** The host's counters restarted (a new mesh node): measure from the next sample. */
  resetBaseline(): void {
    this.estimator.resetBaseline();
    this.cleanSinceMs = null;
  }

  /** One sample of the links; returns new loads to give the engine, or null. */
  update(nowMs: number, sample: UplinkSample, context: UploadContext): LoadChange | null {
    const measured = this.options.mode === 'measured';
    if (measured) {
      this.estimator.sample(nowMs, sample);
      this.discountPersistentBacklog(nowMs, context.load, sample);
    }
    // A slice costs its payload plus the headers on the wire, where the capacity is measured.
    const slice = context.sliceKbps === null ? null : context.sliceKbps * WIRE_OVERHEAD;
    if (slice === null || !(slice > 0)) return null;
    if (measured) this.probeUpward(nowMs, slice, context.load);
    const capacity = this.capacityKbps;
    if (capacity === null) return null;
    const cur = this.current;
    const raw = loadsForCapacity(capacity, slice, this.options.declared);
    const damped = loadsForCapacity(capacity * (1 - RAISE_HYSTERESIS), slice, this.options.declared);
    let targetLoad =
      raw.targetLoad < cur.targetLoad ? raw.targetLoad : Math.max(cur.targetLoad, damped.targetLoad);
    let maxLoad = raw.maxLoad < cur.maxLoad ? raw.maxLoad : Math.max(cur.maxLoad, damped.maxLoad);
    if (raw.targetLoad === 0 && raw.maxLoad === 0) targetLoad = maxLoad = 0;
    if (maxLoad < targetLoad) targetLoad = maxLoad;
    if (targetLoad === cur.targetLoad && maxLoad === cur.maxLoad) {
      this.raisePending = false;
      return null;
    }
    const lower = targetLoad < cur.targetLoad || maxLoad < cur.maxLoad;
    const sinceChange = nowMs - this.lastChangeAtMs;
    const urgent = context.load > maxLoad;
    if (lower ? !urgent && sinceChange < MIN_DECREASE_INTERVAL_MS : sinceChange < MIN_INCREASE_INTERVAL_MS)
      return null;
    const previous = cur;
    this.current = { targetLoad, maxLoad };
    this.lastChangeAtMs = nowMs;
    this.cleanSinceMs = null;
    if (lower && !this.raisePending && nowMs - this.lastProbeAtMs < this.probeWaitMs) {
      // The last probe found the uplink lacking: wait longer before the next.
      this.lastProbeFailed = true;
      this.probeWaitMs = Math.min(PROBE_WAIT_MAX_MS, 2 * this.probeWaitMs);
    }
    let reason: LoadChange['reason'] = 'measured';
    if (this.source === 'capped') reason = 'capped';
    else if (this.raisePending) reason = previous.maxLoad === 0 ? 'receive-only retry' : 'raised';
    this.raisePending = false;
    return { targetLoad, maxLoad, previous, capacityKbps: capacity, reason };
  }

  /**
   * A backlog that outlasts BACKLOG_PERSIST_MS without shrinking, with the loads in force that long
   * and the load within their ML, discounts the estimate (BACKLOG_DISCOUNT): the uplink delivers
   * less than was measured. A backlog that shrinks is the one from before a decrease draining (the
   * loads fit), and is given another BACKLOG_PERSIST_MS. After a discount it waits as long again,
   * so the loads that follow have their chance.
   */
  private discountPersistentBacklog(nowMs: number, load: number, sample: UplinkSample): void {
    // Only time behind at the loads in force, with the load within their ML, counts.
    if (
      !this.estimator.behindAt(nowMs) ||
      load > this.current.maxLoad ||
      this.estimator.capacityKbps === null
    ) {
      this.behindSince = null;
      return;
    }
    const unsentBytes = sample.channelBufferedBytes + sample.queuedBytes;
    const since = this.behindSince;
    if (since === null || since.atMs < this.lastChangeAtMs) {
      this.behindSince = { atMs: nowMs, unsentBytes };
      return;
    }
    if (nowMs - since.atMs < BACKLOG_PERSIST_MS) return;
    this.behindSince = { atMs: nowMs, unsentBytes };
    // Any shrinking is the backlog of before a decrease draining at a load that fits (at ML, by only
    // a tenth of the uplink): only one that held or grew is evidence.
    if (unsentBytes >= since.unsentBytes) this.estimator.discount(BACKLOG_DISCOUNT);
  }

  /**
   * The slow way up (RAISE_AFTER_MS): no backlog for the probe wait while forwarding at least TL (we
   * used what we had and the uplink kept up) raises the estimate by RAISE_FACTOR, at least a slice.
   * A receive-only viewer has nothing to forward: it probes one slice on the same schedule.
   */
  private probeUpward(nowMs: number, sliceKbps: number, load: number): void {
    const estimate = this.estimator.capacityKbps;
    const cur = this.current;
    const declared = this.options.declared;
    if (estimate === null || declared.maxLoad === 0) return;
    const receiveOnly = cur.maxLoad === 0;
    const atCeiling = !receiveOnly && cur.targetLoad >= declared.targetLoad;
    if (this.estimator.behindAt(nowMs) || atCeiling || (!receiveOnly && load < cur.targetLoad)) {
      this.cleanSinceMs = null;
      return;
    }
    this.cleanSinceMs ??= nowMs;
    if (nowMs - this.cleanSinceMs < this.probeWaitMs) return;
    if (!this.lastProbeFailed) this.probeWaitMs = RAISE_AFTER_MS;
    this.lastProbeFailed = false;
    this.lastProbeAtMs = nowMs;
    this.cleanSinceMs = nowMs;
    this.raisePending = true;
    // Enough for one slice more than now, through the raise hysteresis (2% over, against rounding).
    const oneMore = ((cur.targetLoad + 1) * sliceKbps * 1.02) / TARGET_UTILISATION / (1 - RAISE_HYSTERESIS);
    this.estimator.raise(Math.max(estimate * RAISE_FACTOR, oneMore));
  }
}

/** The bucket holds at most this much time of the cap: a short burst, not a second's worth. */
export const UPLOAD_BURST_MS = 100;

/**
 * The `max-upload-kbps` cap as a token bucket on everything the host writes to its data channels.
 * Loads are already set from the cap (TL = 65% of it), so in steady state the bucket never binds: it
 * is the safety net for bursts, repair and control on top. Control messages are always written (they
 * keep the trees and links alive; they only put the bucket in debt); data waits while the bucket is
 * empty — queued, not dropped, since the next packets of a burst usually fit a moment later and a
 * dropped one costs a repair, more upload. So over any interval T the bytes written are at most
 * cap·T plus the burst and one message.
 */
export class UploadBucket {
  private tokens: number;
  private atMs: number;
  private readonly bytesPerMs: number;
  private readonly burstBytes: number;

  constructor(maxUploadKbps: number, nowMs: number) {
    if (!(maxUploadKbps >= 0) || !Number.isFinite(maxUploadKbps))
      throw new RangeError(`maxUploadKbps must be a finite number ≥ 0, got ${maxUploadKbps}`);
    this.bytesPerMs = maxUploadKbps / 8;
    this.burstBytes = this.bytesPerMs * UPLOAD_BURST_MS;
    this.tokens = this.burstBytes;
    this.atMs = nowMs;
  }

  /** Whether data may be written now (the bucket is not in debt). */
  allowsData(nowMs: number): boolean {
    this.refill(nowMs);
    return this.tokens > 0;
  }

  /** Count `bytes` written (payload; the wire overhead is added here). */
  spend(nowMs: number, bytes: number): void {
    this.refill(nowMs);
    this.tokens -= bytes * WIRE_OVERHEAD;
  }

  private refill(nowMs: number): void {
    if (nowMs > this.atMs) {
      this.tokens = Math.min(this.burstBytes, this.tokens + (nowMs - this.atMs) * this.bytesPerMs);
      this.atMs = nowMs;
    }
  }
}
