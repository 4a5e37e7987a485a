import type { Engine, EngineCounters, RepairCounters } from '@chunkycast/engine';
import { MessageType, isSwitchMessage, type Message } from '@chunkycast/wire';
import type { Adversary } from './adversaries.js';
import type { LatencyModel } from './net/latency.js';
import type { SimOptions } from './simulation.js';

/** How a packet reached a member, as recorded per packet (0 where it never came). */
export const VIA_TREE = 1;
export const VIA_REPAIR = 2;
export const VIA_ORIGIN = 3;
export const VIA_PARITY = 4;
/** Request and response headers charged per origin range fetch (HTTP/1.1 with a Range header). */
export const ORIGIN_REQUEST_OVERHEAD_BYTES = 400;
/** Delay value meaning "never arrived". */
export const NOT_RECEIVED = 0xffff;
/** The largest delay a Uint16 log holds below NOT_RECEIVED (65.5 s: later is as good as lost). */
const MAX_DELAY = 0xfffe;
/** Pairs of members sampled per member for the median latency, and at most in all. */
const MEDIAN_LATENCY_PAIRS_PER_MEMBER = 40;
const MEDIAN_LATENCY_MAX_PAIRS = 200_000;

/** Everything measured about one member, kept after it leaves. */
export class MemberRecord {
  engine: Engine | null = null;
  alive = false;
  leftAt = Infinity;
  /** When the member is expected to be able to receive (its join, or the stream start). */
  readonly startupFrom: number;
  /** All 16 slices seen at least once. */
  completeAt = Infinity;
  /** Number of slices with at least one packet. */
  slicesSeen = 0;
  /** Its engine's timer: when it is due, and the generation that is live (older ones are stale). */
  timerAt = Infinity;
  timerGen = 0;
  /** Per slice: first sequence number received (−1: none yet). */
  readonly firstSeq: Int32Array;
  /** Sequence number of index 0 in `delays` and `via` (the stream's position when the member came). */
  readonly baseSeq: number;
  /** Per slice, per packet from baseSeq: its delay (ms) or NOT_RECEIVED, and how it came (VIA_*). */
  readonly delays: Uint16Array[];
  readonly via: Uint8Array[];
  /** First-packet delay per slice (ms), for the playout delay. */
  readonly firstDelay: Float64Array;
  /** Fixed playout delay behind the source (ms), once all slices have arrived; NaN before. */
  playoutDelayMs = Number.NaN;
  /** Playback starts here (completeAt + buffer). */
  playFromMs = Infinity;
  /** Per slice: when it last lost its parent and has had none since (NaN while it has one). */
  readonly parentLostAt: Float64Array;
  readonly measureSum: Float64Array;
  readonly measureCount: Uint32Array;
  readonly hops: Uint8Array;
  switchMsgsThisSecond = 0;
  finalCounters: EngineCounters | null = null;
  finalRepair: RepairCounters | null = null;
  /** Packets it had not got by its tree, at the last loss report (see Measurement.lossFraction). */
  lossCountAtSample = 0;
  controlBytesSent = 0;
  finalLoad = 0;
  /** Packets it asked the origin for. */
  originPacketsFetched = 0;
  /** A hostile member's lies (null: an honest member). */
  hostile: Adversary | null = null;

  constructor(
    readonly id: number,
    readonly joinedAt: number,
    readonly targetLoad: number,
    readonly maxLoad: number,
    readonly lowerLatencyThreshold: number,
    readonly upperLatencyThreshold: number,
    readonly uplinkBytesPerMs: number,
    slices: number,
    capacitySeqs: number,
    streamStartMs: number,
    baseSeq: number,
  ) {
    this.startupFrom = Math.max(joinedAt, streamStartMs);
    this.firstSeq = new Int32Array(slices).fill(-1);
    this.baseSeq = baseSeq;
    this.delays = Array.from({ length: slices }, () => new Uint16Array(capacitySeqs).fill(NOT_RECEIVED));
    this.via = Array.from({ length: slices }, () => new Uint8Array(capacitySeqs));
    this.firstDelay = new Float64Array(slices).fill(Number.NaN);
    this.parentLostAt = new Float64Array(slices).fill(Number.NaN);
    this.measureSum = new Float64Array(slices);
    this.measureCount = new Uint32Array(slices);
    this.hops = new Uint8Array(slices);
  }
}

export interface SecondSample {
  readonly t: number;
  readonly alive: number;
  readonly withinRangeFraction: number;
  readonly atTargetFraction: number;
  readonly completeFraction: number;
  readonly switchMsgsMax: number;
  readonly switchMsgsP95: number;
  readonly switchMsgsMedian: number;
  readonly optimisingSwitches: number;
  /** The latency switches among optimisingSwitches (the rest are load switches). */
  readonly latencySwitches: number;
  readonly forcedSwitches: number;
  /** Members rooting a data slice now (the true source's view), and the most slices one of them roots. */
  readonly distinctRoots: number;
  readonly maxSlicesPerRoot: number;
}

/** An honest member cut `peer` off at `at`. */
export interface CutOff {
  readonly by: number;
  readonly peer: number;
  readonly at: number;
}

/** Raw results of one run; `metrics.ts` turns them into the summary. */
export interface SimResult {
  readonly options: SimOptions;
  readonly members: readonly MemberRecord[];
  readonly samples: readonly SecondSample[];
  readonly emitTimes: readonly Float64Array[];
  /**
   * Per data slice, per sequence number: when the packager finished writing the packet's bytes
   * (NaN: not published). Equal to `emitTimes` under progressive production.
   */
  readonly writeTimes: readonly Float64Array[];
  readonly emittedPerSlice: readonly number[];
  readonly events: number;
  /** How many messages crossed the codec (all of them unless the run sampled). */
  readonly codec: { readonly sampleEvery: number; readonly messages: number; readonly encoded: number };
  readonly simMs: number;
  readonly wallMs: number;
  readonly latency: LatencyModel;
  readonly medianLatencyMs: number;
  readonly sourceNeighbours: readonly number[];
  readonly overlayNeighbours: ReadonlyMap<number, readonly number[]>;
  readonly controlBytesByType: ReadonlyMap<number, number>;
  readonly dataPacketsSent: number;
  readonly dataPacketsDroppedUplink: number;
  readonly dataPacketsLost: number;
  readonly decodeErrors: number;
  readonly protocolViolations: number;
  readonly sliceSourceChanges: number;
  /** Slice roots the true source moved to members rooting fewer (rootSpreadIntervalMs). */
  readonly rootsSpread: number;
  readonly packetIntervalMs: number;
  readonly slices: number;
  /** Data packets lost by the link loss model (repair replies included), and all it decided. */
  readonly lossDecisions: number;
  /** Origin fetches: requests, packets and bytes (payload at the nominal packet size + headers). */
  readonly originRequests: number;
  readonly originPackets: number;
  readonly originBytes: number;
  /** Repair replies sent, and the bytes they cost. */
  readonly repairPacketsSent: number;
  /** Time from "missing" to arrival, ms, for every packet delivered by repair / by the origin. */
  readonly repairLatencyMs: readonly number[];
  readonly originLatencyMs: readonly number[];
  /** Honest members cutting a peer off (the peer may be hostile or, collateral, honest). */
  readonly cutOffs: readonly CutOff[];
  /** Peers the rendezvous banned for cut-offs, and from when (ms). */
  readonly bannedAtRendezvous: ReadonlyMap<number, number>;
  /** Messages the ban stopped (no new connection to or from a banned peer). */
  readonly messagesRefusedBan: number;
  /** Violations honest members reported against honest peers, by reason (numbers stripped). */
  readonly honestAccusations: ReadonlyMap<string, number>;
  readonly packetBytes: number;
  readonly playbackBufferMs: number;
  readonly parity: {
    readonly mode: 'off' | 'auto' | 'on';
    /** Parity packets forwarded with a real payload / empty, over all links. */
    readonly activeTransmissions: number;
    readonly idleTransmissions: number;
    /** Stripes the true source sent real parity for, and empty. */
    readonly stripesActive: number;
    readonly stripesIdle: number;
    /** Times the true source switched parity on or off, and the measured loss it saw per second. */
    readonly switches: readonly { readonly t: number; readonly active: boolean }[];
    readonly measuredLoss: readonly number[];
  };
}

export function quantile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] ?? 0;
}

/**
 * What a run measures as it goes: traffic by kind, deliveries and their delays per member, the
 * once-a-second samples, and what the defences did. The Simulation feeds it; it draws nothing.
 */
export class Measurement {
  readonly samples: SecondSample[] = [];
  optimisingSwitchesThisSecond = 0;
  latencySwitchesThisSecond = 0;
  forcedSwitchesThisSecond = 0;
  readonly controlBytesByType = new Map<number, number>();
  dataPacketsSent = 0;
  dataPacketsDroppedUplink = 0;
  dataPacketsLost = 0;
  decodeErrors = 0;
  protocolViolations = 0;
  /** Messages dropped because the rendezvous refused to connect a banned peer. */
  messagesRefusedBan = 0;
  sliceSourceChanges = 0;
  originRequests = 0;
  originPackets = 0;
  originBytes = 0;
  repairPacketsSent = 0;
  readonly repairLatencyMs: number[] = [];
  readonly originLatencyMs: number[] = [];
  parityActiveTransmissions = 0;
  parityIdleTransmissions = 0;
  readonly paritySwitches: { t: number; active: boolean }[] = [];
  readonly measuredLoss: number[] = [];
  readonly cutOffs: CutOff[] = [];
  readonly honestAccusations = new Map<string, number>();
  /** Per data slice, per sequence number: when the true source published it (NaN: not yet). */
  readonly emitTimes: Float64Array[];
  /** Per data slice, per sequence number: when the packager wrote it (NaN: not published). */
  readonly writeTimes: Float64Array[];
  /** The overlay as it stood at the end, for the stretch computation. */
  finalSourceNeighbours: number[] = [];
  readonly finalOverlay = new Map<number, readonly number[]>();

  constructor(
    private readonly slices: number,
    capacitySeqs: number,
    private readonly paritySlice: number,
    private readonly measureFromMs: number,
  ) {
    this.emitTimes = Array.from({ length: slices }, () => new Float64Array(capacitySeqs).fill(Number.NaN));
    this.writeTimes = Array.from({ length: slices }, () => new Float64Array(capacitySeqs).fill(Number.NaN));
  }

  /** A message `m` (null: the true source) hands to the network, counted by kind. */
  countSent(m: MemberRecord | null, message: Message, bytes: number, isData: boolean): void {
    if (message.type === MessageType.PacketRepairData) this.repairPacketsSent++;
    if (!isData) {
      this.controlBytesByType.set(message.type, (this.controlBytesByType.get(message.type) ?? 0) + bytes);
      if (m !== null) {
        m.controlBytesSent += bytes;
        if (isSwitchMessage(message.type)) m.switchMsgsThisSecond++;
      }
    } else {
      this.dataPacketsSent++;
      if (message.type === MessageType.Data && message.slice === this.paritySlice) {
        if (message.payload.byteLength > 0) this.parityActiveTransmissions++;
        else this.parityIdleTransmissions++;
      }
    }
  }

  /** The true source published (slice, seq) at `now`; the packager had written it at `writtenAt`. */
  recordEmission(slice: number, seq: number, now: number, writtenAt: number): void {
    const times = this.emitTimes[slice];
    if (times !== undefined && seq < times.length) times[seq] = now;
    const written = this.writeTimes[slice];
    if (written !== undefined && seq < written.length) written[seq] = writtenAt;
  }

  /** A packet delivered to `m`; true when it was the member's first on its last missing slice. */
  recordDelivery(
    m: MemberRecord,
    slice: number,
    seq: number,
    hops: number,
    now: number,
    via: 'tree' | 'repair' | 'origin' | 'parity',
  ): boolean {
    const emitted = this.emitTimes[slice]?.[seq];
    if (emitted === undefined || Number.isNaN(emitted)) return false;
    const delay = now - emitted;
    let first = false;
    if (m.firstSeq[slice] === -1) {
      m.firstSeq[slice] = seq;
      m.firstDelay[slice] = delay;
      first = true;
    }
    const log = m.delays[slice];
    const idx = seq - m.baseSeq;
    if (log !== undefined && idx >= 0 && idx < log.length) {
      log[idx] = Math.min(MAX_DELAY, Math.max(0, Math.round(delay)));
      const viaLog = m.via[slice];
      if (viaLog !== undefined)
        viaLog[idx] =
          via === 'tree'
            ? VIA_TREE
            : via === 'repair'
              ? VIA_REPAIR
              : via === 'origin'
                ? VIA_ORIGIN
                : VIA_PARITY;
    }
    m.hops[slice] = hops;
    if (now >= this.measureFromMs) {
      m.measureSum[slice] = (m.measureSum[slice] ?? 0) + delay;
      m.measureCount[slice] = (m.measureCount[slice] ?? 0) + 1;
    }
    if (!first) return false;
    m.slicesSeen++;
    if (m.slicesSeen !== this.slices) return false;
    m.completeAt = now;
    return true;
  }

  /** The once-a-second sample over the live members. */
  /** `roots`: each data slice's root as the true source has it (null: none). */
  recordSecond(
    now: number,
    alive: readonly (MemberRecord | undefined)[],
    roots: readonly (number | null)[],
  ): void {
    const perRoot = new Map<number, number>();
    for (const root of roots) if (root !== null) perRoot.set(root, (perRoot.get(root) ?? 0) + 1);
    let maxSlicesPerRoot = 0;
    for (const count of perRoot.values()) maxSlicesPerRoot = Math.max(maxSlicesPerRoot, count);
    const counts: number[] = [];
    let within = 0;
    let atTarget = 0;
    let complete = 0;
    for (const m of alive) {
      const engine = m?.engine;
      if (m === undefined || engine === null || engine === undefined) continue;
      counts.push(m.switchMsgsThisSecond);
      m.switchMsgsThisSecond = 0;
      const load = engine.currentLoad;
      if (load >= m.lowerLatencyThreshold && load <= m.upperLatencyThreshold) within++;
      if (load === m.targetLoad) atTarget++;
      if (m.completeAt <= now) complete++;
    }
    counts.sort((a, b) => a - b);
    const n = Math.max(1, counts.length);
    this.samples.push({
      t: now,
      alive: counts.length,
      withinRangeFraction: within / n,
      atTargetFraction: atTarget / n,
      completeFraction: complete / n,
      switchMsgsMax: counts.length > 0 ? (counts[counts.length - 1] ?? 0) : 0,
      switchMsgsP95: quantile(counts, 95),
      switchMsgsMedian: quantile(counts, 50),
      optimisingSwitches: this.optimisingSwitchesThisSecond,
      latencySwitches: this.latencySwitchesThisSecond,
      forcedSwitches: this.forcedSwitchesThisSecond,
      distinctRoots: perRoot.size,
      maxSlicesPerRoot,
    });
    this.optimisingSwitchesThisSecond = 0;
    this.latencySwitchesThisSecond = 0;
    this.forcedSwitchesThisSecond = 0;
  }

  /**
   * What the true source hears about loss once a second (in the product the viewers' stats reach it
   * through the tracker): packets the playing members did not get by their tree, ÷ packets due.
   */
  lossFraction(
    now: number,
    alive: readonly (MemberRecord | undefined)[],
    packetsPerSlicePerSecond: number,
  ): number {
    let lost = 0;
    let playing = 0;
    for (const m of alive) {
      const engine = m?.engine;
      if (m === undefined || engine === null || engine === undefined || m.playFromMs > now) continue;
      const c = engine.repair.counters;
      const total =
        c.repairPacketsReceived +
        c.originPacketsReceived +
        c.parityRecovered +
        c.packetsExpired -
        c.falseAlarms;
      lost += total - m.lossCountAtSample;
      m.lossCountAtSample = total;
      playing++;
    }
    const due = playing * this.slices * packetsPerSlicePerSecond;
    // A late tree copy is subtracted when it comes, possibly a report later: never below zero.
    const fraction = due === 0 ? 0 : Math.max(0, lost / due);
    this.measuredLoss.push(fraction);
    return fraction;
  }
}

/** Median one-way latency between members, from random pairs drawn with `random`. */
export function estimateMedianLatency(
  latency: LatencyModel,
  ids: readonly number[],
  random: { int(bound: number): number },
): number {
  if (ids.length < 2) return 1;
  const values: number[] = [];
  const samples = Math.min(MEDIAN_LATENCY_MAX_PAIRS, ids.length * MEDIAN_LATENCY_PAIRS_PER_MEMBER);
  for (let i = 0; i < samples; i++) {
    const a = ids[random.int(ids.length)] ?? 1;
    const b = ids[random.int(ids.length)] ?? 1;
    if (a !== b) values.push(latency.latencyMs(a, b));
  }
  values.sort((x, y) => x - y);
  return quantile(values, 50);
}
