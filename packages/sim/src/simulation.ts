import {
  Engine,
  createRandom,
  linksPerDirection,
  nodeDegree,
  resolveConfig,
  shuffleInPlace,
  DEFAULT_PROTOCOL,
  type Action,
  type EngineCounters,
  type EngineEvent,
  type ProtocolConfig,
  type Random,
  type RepairCounters,
} from '@chunkycast/engine';
import {
  MessageType,
  REPORTS_TO_BAN,
  SlabAllocator,
  decode,
  encode,
  isSwitchMessage,
  type Message,
} from '@chunkycast/wire';
import { Adversary, type AdversaryKind, type AdversarySpec } from './adversaries.js';
import { createLatencyModel, type LatencyModel } from './latency.js';
import { BernoulliLinks, GilbertElliottLinks, type LinkLossModel } from './loss.js';
import { EventQueue } from './queue.js';
import type { ScenarioPlan } from './scenarios.js';

/** How the simulated network and stream behave; everything random derives from `seed`. */
export interface SimOptions {
  readonly plan: ScenarioPlan;
  readonly seed: number;
  /** 0 (Lat0) or 2 (Lat2): half-width of LLT–ULT in sixteenths of TL (L3641–3647). */
  readonly lat: number;
  /** Data packets per slice per second. */
  readonly packetsPerSlicePerSecond: number;
  /** Stream rate; sets the size charged for each data packet on the uplinks. */
  readonly streamKbps: number;
  /**
   * Uplink capacity as a multiple of ML's data rate (headroom for control traffic); 0 = unlimited,
   * the thesis's model, which computed travel times from latency alone (L3596–3602).
   */
  readonly uplinkHeadroom: number;
  /** Long-run fraction of data packets lost on a link (control is reliable, as the thesis's TCP, L3581–3583). */
  readonly dataLoss: number;
  /** Independent loss per packet, or Gilbert–Elliott bursts of mean `lossBurstPackets` (default). */
  readonly lossModel?: 'bernoulli' | 'gilbert';
  readonly lossBurstPackets?: number;
  /**
   * Which links lose: every member-to-member link, or only the first hops of the trees (the true
   * source's links and the links out of each slice source), where a loss hits a whole tree.
   */
  readonly lossAt?: 'all' | 'sources';
  /**
   * Playback buffer: a member starts playing this long after all its slices have arrived, at a
   * fixed delay (its slowest first packet's delay plus this); a packet later than that is missed.
   */
  readonly playbackBufferMs?: number;
  /**
   * The parity slice: off; auto (a 17th slice whose parity the true source switches on and off by
   * the audience's measured loss, reported each second); on (always real parity).
   */
  readonly parity?: 'off' | 'auto' | 'on';
  /** Fraction of churn departures that are graceful quits (the rest fail abruptly). */
  readonly gracefulLeaveFraction: number;
  /** TL range in slices, uniform (L3618–3630: 4–28). */
  readonly targetLoadMin: number;
  readonly targetLoadMax: number;
  readonly protocol: Partial<ProtocolConfig>;
  /** Hostile members planted among the rest (issue 18's red team); none by default. */
  readonly adversaries?: readonly AdversarySpec[];
  /**
   * The rendezvous stops introducing and signalling for a peer that REPORTS_TO_BAN members cut off,
   * as the tracker does (default on; off to measure the members' own defences alone).
   */
  readonly rendezvousBan?: boolean;
  /** Called about every 2 s of wall time. */
  readonly onProgress?: (progress: SimProgress) => void;
  /** Wall clock for progress and timing: the only clock the simulator reads, never the engine. */
  readonly wallClockMs?: () => number;
}

export interface SimProgress {
  readonly simMs: number;
  readonly durationMs: number;
  readonly events: number;
  readonly alive: number;
  readonly wallMs: number;
}

const EV_DELIVER = 0;
const EV_TIMER = 1;
const EV_PUBLISH = 2;
const EV_JOIN = 3;
const EV_LEAVE = 4;
const EV_BOOTSTRAP = 5;
const EV_SAMPLE = 6;
const EV_BURST = 7;
const EV_ORIGIN = 8;
/** A peer closed its transport to this node (it cut the node off). */
const EV_UNREACHABLE = 9;

/** How a packet reached a member, as recorded per packet (0 = never). */
export const VIA_NONE = 0;
export const VIA_TREE = 1;
export const VIA_REPAIR = 2;
export const VIA_ORIGIN = 3;
export const VIA_PARITY = 4;
/** Request and response headers charged per origin range fetch (HTTP/1.1 with a Range header). */
export const ORIGIN_REQUEST_OVERHEAD_BYTES = 400;

interface SimEvent {
  readonly kind: number;
  readonly node: number;
  readonly from: number;
  readonly bytes: Uint8Array | null;
  readonly peers: number[] | null;
  readonly gen: number;
}

const SOURCE_ID = 0;
/** Packets logged before a member's first one (see newMember). */
const REPAIR_LOOKBACK_PACKETS = 4;
const RENDEZVOUS_ID = 0xffff_fff0;
/** How often a viewer reports to the tracker (the SDK's REPORT_INTERVAL_MS): cut-offs ride on it. */
const REPORT_INTERVAL_MS = 2000;
/** A packet stuck this long in a sender's uplink queue is dropped (tail drop). */
const MAX_UPLINK_QUEUE_MS = 2000;
/** Delay value meaning "never arrived". */
export const NOT_RECEIVED = 0xffff;
const MAX_DELAY = 0xfffe;

/** Everything measured about one member, kept after it leaves. */
export class MemberRecord {
  engine: Engine | null = null;
  alive = false;
  leftAt = Infinity;
  /** When the member is expected to be able to receive (its join, or the stream start). */
  readonly startupFrom: number;
  /** All 16 slices seen at least once. */
  completeAt = Infinity;
  slicesSeen = 0;
  /** Number of slices with at least one packet. */
  timerAt = Infinity;
  timerGen = 0;
  uplinkFreeAt = 0;
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
  /** Packets it had not got by its tree, at the last loss report (see reportLoss). */
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
  readonly forcedSwitches: number;
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
  readonly emittedPerSlice: readonly number[];
  readonly events: number;
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

/** One number for an ordered pair of member ids (ids stay far below 2²⁶ here). */
function pairKey(a: number, b: number): number {
  return a * 0x400_0000 + b;
}

function quantile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] ?? 0;
}

/**
 * A discrete-event host for thousands of engines: one event queue ordered by (time, insertion), a
 * transit-stub latency model, per-node uplinks, and every message encoded and decoded with
 * `@chunkycast/wire`. No module-level state: two simulations in one process do not interact.
 */
export class Simulation {
  private readonly queue = new EventQueue<SimEvent>();
  private readonly slab = new SlabAllocator();
  private readonly random: Random;
  private readonly latency: LatencyModel;
  private readonly members: MemberRecord[] = [];
  private readonly byId: (MemberRecord | undefined)[] = [];
  private readonly alive: number[] = [];
  private readonly aliveIndex = new Map<number, number>();
  private source: Engine | null = null;
  private sourceTimerAt = Infinity;
  private sourceTimerGen = 0;
  private sourceUplinkFreeAt = 0;
  private readonly slices: number;
  private readonly packetIntervalMs: number;
  private readonly publishIntervalMs: number;
  private readonly packetBytes: number;
  private readonly sliceBytesPerMs: number;
  private readonly emitTimes: Float64Array[];
  private readonly capacitySeqs: number;
  private publishCount = 0;
  private events = 0;
  private nextMemberId = 1;
  private readonly samples: SecondSample[] = [];
  private optimisingSwitchesThisSecond = 0;
  private forcedSwitchesThisSecond = 0;
  private readonly controlBytesByType = new Map<number, number>();
  private dataPacketsSent = 0;
  private dataPacketsDroppedUplink = 0;
  private dataPacketsLost = 0;
  private decodeErrors = 0;
  private protocolViolations = 0;
  /** Messages dropped because the rendezvous refused to connect a banned peer. */
  private messagesRefusedBan = 0;
  private sliceSourceChanges = 0;
  private readonly loss: LinkLossModel | null;
  /** Current slice source of each slice (for losses placed at the trees' first hops). */
  private readonly sliceSourceIds: number[];
  private originRequests = 0;
  private originPackets = 0;
  private originBytes = 0;
  private repairPacketsSent = 0;
  private readonly repairLatencyMs: number[] = [];
  private readonly originLatencyMs: number[] = [];
  private readonly playbackBufferMs: number;
  /** Slices of the engines (data + parity) and the index of the parity slice (−1: none). */
  private readonly engineSlices: number;
  private readonly paritySlice: number;
  private parityActiveTransmissions = 0;
  private parityIdleTransmissions = 0;
  private readonly paritySwitches: { t: number; active: boolean }[] = [];
  private readonly measuredLoss: number[] = [];
  private readonly protocol: Partial<ProtocolConfig>;
  private joinsScheduled = 0;
  /** Kinds of the planned population, shuffled (null: honest); joiners beyond it draw. */
  private readonly plannedKinds: (AdversaryKind | null)[] = [];
  private readonly cutOffs: CutOff[] = [];
  /** (honest member, peer it cut off): what that peer sends it no longer harms it. */
  private readonly cutPairs = new Set<number>();
  /** Distinct members that reported each peer cut off, until it is banned. */
  private readonly cutOffReporters = new Map<number, Set<number>>();
  /** Peers the rendezvous refuses new connections for, and from when (its reports' arrival). */
  private readonly bannedAtRendezvous = new Map<number, number>();
  private readonly honestAccusations = new Map<string, number>();

  constructor(private readonly options: SimOptions) {
    const plan = options.plan;
    this.random = createRandom(options.seed);
    this.latency = createLatencyModel({ seed: this.random.fork(1).nextU32() });
    const dataSlices = options.protocol.slices ?? DEFAULT_PROTOCOL.slices;
    const parity = options.parity ?? 'off';
    this.protocol = {
      ...options.protocol,
      latencyRangeFraction: options.lat / 16,
      ...(parity === 'off'
        ? {}
        : {
            slices: dataSlices + 1,
            paritySlices: 1,
            ...(parity === 'on' ? { parityOnLossFraction: 0, parityOffLossFraction: 0 } : {}),
          }),
    };
    // The simulator's own bookkeeping (publishing, logs, metrics) is over the data slices.
    this.slices = dataSlices;
    this.engineSlices = this.protocol.slices ?? DEFAULT_PROTOCOL.slices;
    this.paritySlice = parity === 'off' ? -1 : dataSlices;
    this.packetIntervalMs = 1000 / options.packetsPerSlicePerSecond;
    this.publishIntervalMs = this.packetIntervalMs / this.slices;
    const streamBytesPerSecond = (options.streamKbps * 1000) / 8;
    this.sliceBytesPerMs = streamBytesPerSecond / this.slices / 1000;
    this.packetBytes = Math.max(
      64,
      Math.round(streamBytesPerSecond / this.slices / options.packetsPerSlicePerSecond),
    );
    const seqs = Math.ceil((plan.durationMs / 1000) * options.packetsPerSlicePerSecond) + 4;
    this.capacitySeqs = seqs;
    this.emitTimes = Array.from({ length: this.slices }, () => new Float64Array(seqs).fill(Number.NaN));
    this.sliceSourceIds = new Array<number>(this.engineSlices).fill(-1);
    this.playbackBufferMs = options.playbackBufferMs ?? 5000;
    const lossRandom = this.random.fork(0x1055);
    this.loss =
      options.dataLoss <= 0
        ? null
        : (options.lossModel ?? 'gilbert') === 'bernoulli'
          ? new BernoulliLinks(options.dataLoss, lossRandom)
          : new GilbertElliottLinks(
              { meanLoss: options.dataLoss, meanBurstPackets: options.lossBurstPackets ?? 4 },
              lossRandom,
            );
  }

  run(): SimResult {
    const plan = this.options.plan;
    const wall = this.options.wallClockMs ?? (() => 0);
    const wallStart = wall();
    let lastProgressWall = wallStart;
    this.latency.attach(SOURCE_ID);
    this.latency.attach(RENDEZVOUS_ID);
    this.planTargetLoads(plan.initialMembers + plan.joiners);
    this.planAdversaries(plan.initialMembers + plan.joiners);
    this.createInitialMembers(plan.initialMembers);
    // The source last, so the rendezvous server can already name members when it asks.
    this.createSource();
    this.queue.push(plan.streamStartMs, this.ev(EV_PUBLISH, SOURCE_ID));
    for (let t = 1000; t <= plan.durationMs; t += 1000) this.queue.push(t, this.ev(EV_SAMPLE, 0));
    if (plan.joiners > 0) this.queue.push(plan.joinStartMs, this.ev(EV_JOIN, 0));
    if (plan.poissonJoinsPerSecond > 0) this.queue.push(this.nextPoissonDelay(0), this.ev(EV_JOIN, 0));
    if (plan.burstFraction > 0) this.queue.push(plan.burstAtMs, this.ev(EV_BURST, 0));

    for (;;) {
      const next = this.queue.peekTime();
      if (next === undefined || next > plan.durationMs) break;
      const ev = this.queue.pop();
      if (ev === undefined) break;
      this.events++;
      this.dispatch(ev);
      if ((this.events & 0xffff) === 0 && this.options.onProgress !== undefined) {
        const w = wall();
        if (w - lastProgressWall >= 2000) {
          lastProgressWall = w;
          this.options.onProgress({
            simMs: this.queue.nowMs,
            durationMs: plan.durationMs,
            events: this.events,
            alive: this.alive.length,
            wallMs: w - wallStart,
          });
        }
      }
    }
    for (const m of this.members) if (m.alive) this.retire(m, plan.durationMs, false);
    return {
      options: this.options,
      members: this.members,
      samples: this.samples,
      emitTimes: this.emitTimes,
      emittedPerSlice: this.emitTimes.map((_, s) => this.sourceEngine().nextSequence(s)),
      events: this.events,
      simMs: plan.durationMs,
      wallMs: wall() - wallStart,
      latency: this.latency,
      medianLatencyMs: this.estimateMedianLatency(),
      sourceNeighbours: this.finalSourceNeighbours,
      overlayNeighbours: this.finalOverlay,
      controlBytesByType: this.controlBytesByType,
      dataPacketsSent: this.dataPacketsSent,
      dataPacketsDroppedUplink: this.dataPacketsDroppedUplink,
      dataPacketsLost: this.dataPacketsLost,
      decodeErrors: this.decodeErrors,
      protocolViolations: this.protocolViolations,
      sliceSourceChanges: this.sliceSourceChanges,
      packetIntervalMs: this.packetIntervalMs,
      slices: this.slices,
      lossDecisions: this.loss?.packets ?? 0,
      originRequests: this.originRequests,
      originPackets: this.originPackets,
      originBytes: this.originBytes,
      repairPacketsSent: this.repairPacketsSent,
      repairLatencyMs: this.repairLatencyMs,
      originLatencyMs: this.originLatencyMs,
      cutOffs: this.cutOffs,
      bannedAtRendezvous: this.bannedAtRendezvous,
      messagesRefusedBan: this.messagesRefusedBan,
      honestAccusations: this.honestAccusations,
      packetBytes: this.packetBytes,
      playbackBufferMs: this.playbackBufferMs,
      parity: {
        mode: this.options.parity ?? 'off',
        activeTransmissions: this.parityActiveTransmissions,
        idleTransmissions: this.parityIdleTransmissions,
        stripesActive: this.sourceEngine().parityCounters.active,
        stripesIdle: this.sourceEngine().parityCounters.idle,
        switches: this.paritySwitches,
        measuredLoss: this.measuredLoss,
      },
    };
  }

  private finalSourceNeighbours: number[] = [];
  private finalOverlay = new Map<number, readonly number[]>();

  private ev(
    kind: number,
    node: number,
    from = 0,
    bytes: Uint8Array | null = null,
    peers: number[] | null = null,
    gen = 0,
  ): SimEvent {
    return { kind, node, from, bytes, peers, gen };
  }

  private sourceEngine(): Engine {
    if (this.source === null) throw new Error('no source');
    return this.source;
  }

  private estimateMedianLatency(): number {
    const ids = this.members.map((m) => m.id);
    if (ids.length < 2) return 1;
    const r = this.random.fork(7);
    const values: number[] = [];
    const samples = Math.min(200_000, ids.length * 40);
    for (let i = 0; i < samples; i++) {
      const a = ids[r.int(ids.length)] ?? 1;
      const b = ids[r.int(ids.length)] ?? 1;
      if (a !== b) values.push(this.latency.latencyMs(a, b));
    }
    values.sort((x, y) => x - y);
    return quantile(values, 50);
  }

  // ───────────────────────────── population ─────────────────────────────

  private createSource(): void {
    this.source = new Engine(
      {
        id: SOURCE_ID,
        role: 'source',
        sourceId: SOURCE_ID,
        targetLoadSlices: this.engineSlices,
        protocol: this.protocol,
      },
      this.random.fork(0x5eed),
    );
    this.apply(null, this.source.handle(0, { kind: 'start' }), 0);
  }

  /**
   * TL for the next member. The thesis derives TL from degree "in such a way that the sum of target
   * loads across all nodes is approximately equal to the total volume needed" (L3622–3628): the
   * planned population (initial members and scheduled joiners) therefore draws its TLs stratified
   * over 4–28 (every value equally often, shuffled), so Σ TL = 16·N up to rounding; independent
   * draws would leave a random shortfall of ~7·√N slices. Churn arrivals draw independently.
   */
  private drawTargetLoad(r: Random): number {
    const next = this.plannedTargetLoads.pop();
    if (next !== undefined) return next;
    return this.options.targetLoadMin + r.int(this.options.targetLoadMax - this.options.targetLoadMin + 1);
  }

  private readonly plannedTargetLoads: number[] = [];

  private planTargetLoads(count: number): void {
    const span = this.options.targetLoadMax - this.options.targetLoadMin + 1;
    const values: number[] = [];
    for (let i = 0; i < count; i++) values.push(this.options.targetLoadMin + (i % span));
    shuffleInPlace(values, this.random.fork(4));
    this.plannedTargetLoads.push(...values);
  }

  /**
   * Exactly round(fraction · planned) members of each kind among the planned population, placed
   * at random; churn arrivals beyond it are hostile with the same probabilities.
   */
  private planAdversaries(count: number): void {
    const specs = this.options.adversaries ?? [];
    if (specs.length === 0) return;
    const kinds: (AdversaryKind | null)[] = [];
    for (const spec of specs)
      for (let i = 0; i < Math.round(spec.fraction * count); i++) kinds.push(spec.kind);
    while (kinds.length < count) kinds.push(null);
    shuffleInPlace(kinds, this.random.fork(0xad));
    this.plannedKinds.push(...kinds);
  }

  private drawKind(r: Random): AdversaryKind | null {
    if (this.plannedKinds.length > 0) return this.plannedKinds.pop() ?? null;
    let u = r.nextFloat();
    for (const spec of this.options.adversaries ?? []) {
      if (u < spec.fraction) return spec.kind;
      u -= spec.fraction;
    }
    return null;
  }

  private isHonest(id: number): boolean {
    return id === SOURCE_ID || this.byId[id]?.hostile === null;
  }

  private newMember(now: number): MemberRecord {
    const id = this.nextMemberId++;
    const r = this.random.fork(id);
    const tl = this.drawTargetLoad(r);
    const kind = this.drawKind(r.fork(0xad));
    const engine = new Engine(
      { id, role: 'member', sourceId: SOURCE_ID, targetLoadSlices: tl, protocol: this.protocol },
      r.fork(1),
    );
    const cfg = engine.config;
    const uplinkBytesPerMs = Math.max(cfg.maxLoad, 1) * this.sliceBytesPerMs * this.options.uplinkHeadroom;
    // Logged from a little before the stream's position at the join: repair may bring packets
    // older than the first one the tree delivers.
    const baseSeq = Math.max(
      0,
      Math.floor((now - this.options.plan.streamStartMs) / this.packetIntervalMs) - REPAIR_LOOKBACK_PACKETS,
    );
    const remainingSeqs = Math.min(
      this.capacitySeqs,
      Math.ceil(((this.options.plan.durationMs - now) / 1000) * this.options.packetsPerSlicePerSecond) +
        8 +
        REPAIR_LOOKBACK_PACKETS,
    );
    const m = new MemberRecord(
      id,
      now,
      cfg.targetLoad,
      cfg.maxLoad,
      cfg.lowerLatencyThreshold,
      cfg.upperLatencyThreshold,
      uplinkBytesPerMs,
      this.slices,
      remainingSeqs,
      this.options.plan.streamStartMs,
      baseSeq,
    );
    m.engine = engine;
    m.alive = true;
    if (kind !== null) m.hostile = new Adversary(id, kind, r.fork(0xbad));
    this.members.push(m);
    this.byId[id] = m;
    this.aliveIndex.set(id, this.alive.length);
    this.alive.push(id);
    this.latency.attach(id);
    // Where the stream is, as the rendezvous server tells a joiner (the product's tracker relays
    // the broadcaster's announcements): the sequence window's basis until its slices flow.
    this.apply(m, engine.handle(now, { kind: 'liveSequence', seq: this.source?.nextSequence(0) ?? 0 }), now);
    return m;
  }

  /** The thesis's static population: a Swaplinks graph built before the source starts (L3587–3596). */
  private createInitialMembers(count: number): void {
    const created: MemberRecord[] = [];
    for (let i = 0; i < count; i++) created.push(this.newMember(0));
    // Configuration model: every member gets out = in = L stubs; pair out-stubs with in-stubs at random.
    const outStubs: number[] = [];
    const inStubs: number[] = [];
    for (const m of created) {
      const l = linksPerDirection(
        nodeDegree(
          m.targetLoad,
          this.protocol.minLoadSlices ?? DEFAULT_PROTOCOL.minLoadSlices,
          this.protocol.minNodeDegree ?? DEFAULT_PROTOCOL.minNodeDegree,
        ),
      );
      for (let k = 0; k < l; k++) {
        outStubs.push(m.id);
        inStubs.push(m.id);
      }
    }
    const r = this.random.fork(2);
    shuffleInPlace(inStubs, r);
    // Remove self-links by swapping with a random partner (a handful of retries suffices).
    for (let i = 0; i < inStubs.length; i++) {
      for (let attempt = 0; attempt < 20 && inStubs[i] === outStubs[i]; attempt++) {
        const j = r.int(inStubs.length);
        if (inStubs[j] !== outStubs[i] && inStubs[i] !== outStubs[j]) {
          const tmp = inStubs[i] ?? 0;
          inStubs[i] = inStubs[j] ?? 0;
          inStubs[j] = tmp;
        }
      }
    }
    const outs = new Map<number, number[]>();
    const ins = new Map<number, number[]>();
    for (let i = 0; i < outStubs.length; i++) {
      const a = outStubs[i] ?? 0;
      const b = inStubs[i] ?? 0;
      if (a === b) continue;
      let oa = outs.get(a);
      if (oa === undefined) outs.set(a, (oa = []));
      oa.push(b);
      let ib = ins.get(b);
      if (ib === undefined) ins.set(b, (ib = []));
      ib.push(a);
    }
    for (const m of created) {
      const engine = m.engine;
      if (engine === null) continue;
      this.apply(
        m,
        engine.handle(0, { kind: 'installLinks', out: outs.get(m.id) ?? [], in: ins.get(m.id) ?? [] }),
        0,
      );
      this.apply(m, engine.handle(0, { kind: 'start' }), 0);
    }
  }

  private nextPoissonDelay(now: number): number {
    const rate = this.options.plan.poissonJoinsPerSecond;
    const u = this.random.nextFloat();
    return now + Math.max(1, Math.round((-Math.log(1 - u) / rate) * 1000));
  }

  private paretoStayMs(): number {
    const stay = this.options.plan.stay;
    if (stay === null) return Infinity;
    // Pareto with minimum x_m and mean μ has α = μ / (μ − x_m) (= 10/7 for 90 s and 300 s, L3782–3785).
    const alpha = stay.meanMs / (stay.meanMs - stay.minMs);
    const u = 1 - this.random.nextFloat();
    return stay.minMs / Math.pow(u, 1 / alpha);
  }

  private join(now: number): void {
    const plan = this.options.plan;
    const m = this.newMember(now);
    const engine = m.engine;
    if (engine !== null) this.apply(m, engine.handle(now, { kind: 'start' }), now);
    this.scheduleLeave(m, now);
    this.joinsScheduled++;
    if (plan.joiners > 0 && this.joinsScheduled < plan.joiners) {
      this.queue.push(
        plan.joinStartMs + Math.round((this.joinsScheduled * 1000) / plan.joinsPerSecond),
        this.ev(EV_JOIN, 0),
      );
    }
    if (plan.poissonJoinsPerSecond > 0) {
      const next = this.nextPoissonDelay(now);
      if (next < plan.churnEndMs) this.queue.push(next, this.ev(EV_JOIN, 0));
    }
  }

  private scheduleLeave(m: MemberRecord, now: number): void {
    const plan = this.options.plan;
    if (plan.stay === null) return;
    const at = now + Math.round(this.paretoStayMs());
    if (at < plan.churnEndMs) this.queue.push(at, this.ev(EV_LEAVE, m.id));
  }

  /** Take a member out: record what it measured, drop its engine. */
  private retire(m: MemberRecord, now: number, removeFromSwarm: boolean): void {
    const engine = m.engine;
    if (engine !== null) {
      m.finalCounters = { ...engine.counters };
      m.finalRepair = { ...engine.repair.counters };
      m.finalLoad = engine.currentLoad;
    }
    if (!removeFromSwarm) {
      // End of the run: keep the overlay for the stretch computation.
      if (engine !== null) this.finalOverlay.set(m.id, engine.neighbours());
      return;
    }
    m.engine = null;
    m.alive = false;
    m.leftAt = now;
    const idx = this.aliveIndex.get(m.id);
    if (idx !== undefined) {
      const last = this.alive.pop();
      if (last !== undefined && idx < this.alive.length) {
        this.alive[idx] = last;
        this.aliveIndex.set(last, idx);
      }
      this.aliveIndex.delete(m.id);
    }
  }

  private leave(m: MemberRecord, now: number, graceful: boolean): void {
    const engine = m.engine;
    if (!m.alive || engine === null) return;
    if (graceful) {
      this.apply(m, engine.handle(now, { kind: 'quit', graceful: true }), now);
      // The engine lingers and stops by itself; it is retired when it reports 'stopped'.
      return;
    }
    this.retire(m, now, true);
  }

  // ───────────────────────────── event loop ─────────────────────────────

  private dispatch(ev: SimEvent): void {
    const now = this.queue.nowMs;
    switch (ev.kind) {
      case EV_DELIVER:
        this.deliver(ev, now);
        return;
      case EV_TIMER:
        this.timer(ev, now);
        return;
      case EV_PUBLISH:
        this.publish(now);
        return;
      case EV_JOIN:
        this.join(now);
        return;
      case EV_LEAVE: {
        const m = this.byId[ev.node];
        if (m !== undefined) this.leave(m, now, this.random.nextFloat() < this.options.gracefulLeaveFraction);
        return;
      }
      case EV_BOOTSTRAP:
        this.bootstrap(ev, now);
        return;
      case EV_SAMPLE:
        this.sample(now);
        return;
      case EV_BURST:
        this.burst(now);
        return;
      case EV_ORIGIN:
        this.originArrived(ev, now);
        return;
      case EV_UNREACHABLE: {
        const target = ev.node === SOURCE_ID ? null : this.byId[ev.node];
        const engine = ev.node === SOURCE_ID ? this.source : (target?.engine ?? null);
        if (engine === null || (target !== undefined && target !== null && !target.alive)) return;
        this.apply(target ?? null, engine.handle(now, { kind: 'peerUnreachable', peer: ev.from }), now);
        return;
      }
    }
  }

  private deliver(ev: SimEvent, now: number): void {
    const bytes = ev.bytes;
    if (bytes === null) return;
    const decoded = decode(bytes);
    if (!decoded.ok) {
      this.decodeErrors++;
      return;
    }
    if (ev.node === SOURCE_ID) {
      const source = this.source;
      if (source !== null)
        this.apply(
          null,
          source.handle(now, { kind: 'message', from: ev.from, message: decoded.message }),
          now,
        );
      return;
    }
    const m = this.byId[ev.node];
    const engine = m?.engine;
    if (m === undefined || engine === null || engine === undefined || !m.alive) return;
    if (decoded.message.type === MessageType.PacketRepairRequest && this.options.uplinkHeadroom > 0) {
      // The helper's transport backlog, as a browser reads a data channel's bufferedAmount.
      const bytes = Math.max(0, m.uplinkFreeAt - now) * m.uplinkBytesPerMs;
      this.apply(m, engine.handle(now, { kind: 'transportBacklog', peer: ev.from, bytes }), now);
    }
    this.apply(m, engine.handle(now, { kind: 'message', from: ev.from, message: decoded.message }), now);
  }

  private timer(ev: SimEvent, now: number): void {
    if (ev.node === SOURCE_ID) {
      if (ev.gen !== this.sourceTimerGen || this.source === null) return;
      this.sourceTimerAt = Infinity;
      this.apply(null, this.source.handle(now, { kind: 'timer' }), now);
      return;
    }
    const m = this.byId[ev.node];
    if (m?.engine === null || m === undefined || ev.gen !== m.timerGen) return;
    m.timerAt = Infinity;
    this.apply(m, m.engine.handle(now, { kind: 'timer' }), now);
  }

  private readonly emptyPayload = new Uint8Array(0);

  private publish(now: number): void {
    const source = this.sourceEngine();
    const s = this.publishCount % this.slices;
    const seq = source.nextSequence(s);
    const times = this.emitTimes[s];
    if (times !== undefined && seq < times.length) times[seq] = now;
    this.publishCount++;
    this.apply(null, source.handle(now, { kind: 'publish', payload: this.emptyPayload }), now);
    const next = this.options.plan.streamStartMs + Math.round(this.publishCount * this.publishIntervalMs);
    if (next <= this.options.plan.durationMs) this.queue.push(next, this.ev(EV_PUBLISH, SOURCE_ID));
  }

  private bootstrap(ev: SimEvent, now: number): void {
    const peers = ev.peers ?? [];
    if (ev.node === SOURCE_ID) {
      if (this.source !== null) this.apply(null, this.source.handle(now, { kind: 'bootstrap', peers }), now);
      return;
    }
    const m = this.byId[ev.node];
    if (m?.engine === null || m === undefined) return;
    this.apply(m, m.engine.handle(now, { kind: 'bootstrap', peers }), now);
  }

  private burst(now: number): void {
    const count = Math.round(this.alive.length * this.options.plan.burstFraction);
    const victims = shuffleInPlace([...this.alive], this.random.fork(3)).slice(0, count);
    for (const id of victims) {
      const m = this.byId[id];
      if (m !== undefined) this.retire(m, now, true);
    }
  }

  private sample(now: number): void {
    if (this.paritySlice >= 0) this.reportLoss(now);
    this.spam(now);
    const counts: number[] = [];
    let within = 0;
    let atTarget = 0;
    let complete = 0;
    for (const id of this.alive) {
      const m = this.byId[id];
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
      forcedSwitches: this.forcedSwitchesThisSecond,
    });
    this.optimisingSwitchesThisSecond = 0;
    this.forcedSwitchesThisSecond = 0;
    if (now + 1000 > this.options.plan.durationMs) {
      // Last sample: freeze the overlay as it stands for the stretch computation.
      this.finalSourceNeighbours = this.sourceEngine()
        .currentSliceSources()
        .filter((p): p is number => p !== null);
    }
  }

  /** Once a second, each switch-spammer floods its neighbours with requests. */
  private spam(now: number): void {
    for (const id of this.alive) {
      const m = this.byId[id];
      const hostile = m?.hostile ?? null;
      const engine = m?.engine ?? null;
      if (m === undefined || hostile?.kind !== 'switch-spammer' || engine === null) continue;
      for (const to of engine.neighbours()) {
        const flood = hostile.spam(this.engineSlices);
        if (this.isHonest(to) && !this.cutPairs.has(pairKey(to, m.id)))
          for (let i = 0; i < flood.length; i++) hostile.recordHarm(to, now);
        for (const message of flood) this.transmit(m, m.id, to, message, now);
      }
    }
  }

  /**
   * What the true source hears about loss once a second (in the product the viewers' stats reach it
   * through the tracker): packets the playing members did not get by their tree, ÷ packets due.
   */
  private reportLoss(now: number): void {
    let lost = 0;
    let playing = 0;
    for (const id of this.alive) {
      const m = this.byId[id];
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
    const due = playing * this.slices * this.options.packetsPerSlicePerSecond;
    // A late tree copy is subtracted when it comes, possibly a report later: never below zero.
    const fraction = due === 0 ? 0 : Math.max(0, lost / due);
    this.measuredLoss.push(fraction);
    const source = this.source;
    if (source !== null) this.apply(null, source.handle(now, { kind: 'measuredLoss', fraction }), now);
  }

  // ───────────────────────────── actions ─────────────────────────────

  private apply(m: MemberRecord | null, actions: readonly Action[], now: number): void {
    const fromId = m === null ? SOURCE_ID : m.id;
    for (const action of actions) {
      switch (action.kind) {
        case 'send': {
          const hostile = m?.hostile ?? null;
          if (hostile === null) {
            this.transmit(m, fromId, action.to, action.message, now);
            break;
          }
          const to = action.to;
          const message = action.message;
          const harm = (): void => {
            if (!this.isHonest(to) || this.cutPairs.has(pairKey(to, fromId))) return;
            // A tree packet harms only a member that takes that slice from us: to the others it is
            // a stray they drop (the attacker's engine may still count a child that left it).
            if (message.type === MessageType.Data) {
              const victim = to === SOURCE_ID ? null : this.byId[to]?.engine;
              if (victim?.takesSliceFrom(message.slice, fromId) !== true) return;
            }
            hostile.recordHarm(to, now);
          };
          for (const sent of hostile.rewrite(to, message, harm)) this.transmit(m, fromId, to, sent, now);
          break;
        }
        case 'deliver':
          if (m !== null) {
            this.recordDelivery(m, action.slice, action.seq, action.hops, now, action.via);
            if (action.missingSinceMs !== null && action.via !== 'tree') {
              (action.via === 'repair' ? this.repairLatencyMs : this.originLatencyMs).push(
                now - action.missingSinceMs,
              );
            }
          }
          break;
        case 'fetchOrigin':
          if (m !== null) this.fetchOrigin(m, action.slice, action.seqs, now);
          break;
        case 'requestBootstrap':
          this.answerBootstrap(fromId, action.count, now);
          break;
        case 'event':
          this.onEngineEvent(m, action.event, now);
          break;
        case 'disconnect':
          // The transport closes: the other end learns it after a one-way delay.
          this.queue.push(
            Math.ceil(now + this.latency.latencyMs(fromId, action.peer)),
            this.ev(EV_UNREACHABLE, action.peer, fromId),
          );
          break;
      }
    }
    // Reschedule this engine's timer if its deadline moved earlier.
    if (m === null) {
      const source = this.source;
      if (source === null) return;
      const d = source.nextDeadline();
      if (d < this.sourceTimerAt) {
        const t = Math.max(now, Math.ceil(d));
        this.sourceTimerAt = t;
        this.sourceTimerGen++;
        this.queue.push(t, this.ev(EV_TIMER, SOURCE_ID, 0, null, null, this.sourceTimerGen));
      }
      return;
    }
    const engine = m.engine;
    if (engine === null || !m.alive) return;
    const d = engine.nextDeadline();
    if (d < m.timerAt) {
      const t = Math.max(now, Math.ceil(d));
      m.timerAt = t;
      m.timerGen++;
      this.queue.push(t, this.ev(EV_TIMER, m.id, 0, null, null, m.timerGen));
    }
  }

  private onEngineEvent(m: MemberRecord | null, event: EngineEvent, now: number): void {
    switch (event.type) {
      case 'parentChanged':
        if (m !== null && event.slice < this.slices)
          m.parentLostAt[event.slice] = event.parent === null ? now : Number.NaN;
        if (event.switchKind === 'load' || event.switchKind === 'latency')
          this.optimisingSwitchesThisSecond++;
        else if (event.switchKind === 'forced') this.forcedSwitchesThisSecond++;
        return;
      case 'protocolViolation':
        this.protocolViolations++;
        if (m !== null && m.hostile === null && this.isHonest(event.peer)) {
          // Why an honest member accused another: the reason without its numbers.
          const reason = event.reason.replace(/[0-9]+/g, 'N');
          this.honestAccusations.set(reason, (this.honestAccusations.get(reason) ?? 0) + 1);
        }
        return;
      case 'neighbourDown':
        if (event.reason === 'cutOff' && m !== null && m.hostile === null) {
          this.cutOffs.push({ by: m.id, peer: event.peer, at: now });
          this.cutPairs.add(pairKey(m.id, event.peer));
        }
        if (event.reason === 'cutOff' && m !== null) this.reportCutOff(m.id, event.peer, now);
        return;
      case 'parity':
        this.paritySwitches.push({ t: now, active: event.active });
        return;
      case 'sliceSource':
        if (m === null && event.assigned) this.sliceSourceChanges++;
        if (m !== null) {
          if (event.assigned) this.sliceSourceIds[event.slice] = m.id;
          else if (this.sliceSourceIds[event.slice] === m.id) this.sliceSourceIds[event.slice] = -1;
        }
        return;
      case 'stopped':
        if (m !== null) this.retire(m, now, true);
        return;
      default:
        return;
    }
  }

  /**
   * A member's report that it cut `peer` off reaches the rendezvous with its next periodic report
   * (the SDK reports every REPORT_INTERVAL_MS, so at worst that much later, plus the one-way
   * delay); REPORTS_TO_BAN distinct reporters ban the peer from new connections.
   */
  private reportCutOff(reporter: number, peer: number, now: number): void {
    // The true source is never banned (as at the tracker): colluding liars must not cut the stream off.
    if (this.options.rendezvousBan === false || peer === SOURCE_ID || this.bannedAtRendezvous.has(peer))
      return;
    const reporters = this.cutOffReporters.get(peer) ?? new Set<number>();
    reporters.add(reporter);
    this.cutOffReporters.set(peer, reporters);
    if (reporters.size < REPORTS_TO_BAN) return;
    this.cutOffReporters.delete(peer);
    this.bannedAtRendezvous.set(
      peer,
      now + REPORT_INTERVAL_MS + this.latency.latencyMs(reporter, RENDEZVOUS_ID),
    );
  }

  private bannedNow(peer: number, now: number): boolean {
    const at = this.bannedAtRendezvous.get(peer);
    return at !== undefined && at <= now;
  }

  private answerBootstrap(requester: number, count: number, now: number): void {
    const peers: number[] = [];
    const pool = this.alive;
    const r = this.random;
    for (let i = 0; i < count * 3 && peers.length < count && pool.length > 0; i++) {
      const id = pool[r.int(pool.length)] ?? 0;
      if (id !== requester && !peers.includes(id) && !this.bannedNow(id, now)) peers.push(id);
    }
    // The rendezvous server answers after a round trip.
    const rtt = 2 * this.latency.latencyMs(requester, RENDEZVOUS_ID);
    this.queue.push(now + rtt, this.ev(EV_BOOTSTRAP, requester, 0, null, peers));
  }

  private transmit(m: MemberRecord | null, from: number, to: number, message: Message, now: number): void {
    const bytes = encode(message, this.slab.allocate);
    const isRepairData = message.type === MessageType.PacketRepairData;
    const isData = message.type === MessageType.Data || isRepairData;
    if (isRepairData) this.repairPacketsSent++;
    if (!isData) {
      this.controlBytesByType.set(
        message.type,
        (this.controlBytesByType.get(message.type) ?? 0) + bytes.byteLength,
      );
      if (m !== null) {
        m.controlBytesSent += bytes.byteLength;
        if (isSwitchMessage(message.type)) m.switchMsgsThisSecond++;
      }
    } else {
      this.dataPacketsSent++;
      if (message.type === MessageType.Data && message.slice === this.paritySlice) {
        if (message.payload.byteLength > 0) this.parityActiveTransmissions++;
        else this.parityIdleTransmissions++;
      }
    }
    const target = to === SOURCE_ID ? this.source : this.byId[to]?.engine;
    if (target === null || target === undefined) return;
    if (this.bannedAtRendezvous.size > 0) {
      // Every new connection is signalled through the rendezvous, which refuses a banned peer's:
      // only links already open (the two are neighbours) still carry messages.
      const banned = this.bannedNow(from, now) ? from : this.bannedNow(to, now) ? to : null;
      if (banned !== null) {
        const other = banned === from ? to : from;
        const otherEngine = other === SOURCE_ID ? this.source : this.byId[other]?.engine;
        if (otherEngine === null || otherEngine === undefined || !otherEngine.isNeighbour(banned)) {
          this.messagesRefusedBan++;
          return;
        }
      }
    }
    // Uplink: messages leave one after another at the sender's capacity (unless unlimited).
    let departure = now;
    if (this.options.uplinkHeadroom > 0) {
      // An empty parity packet (parity off) costs its header only.
      const idleParity =
        message.type === MessageType.Data &&
        message.slice === this.paritySlice &&
        message.payload.byteLength === 0;
      const size = isData && !idleParity ? this.packetBytes : bytes.byteLength;
      const rate =
        m === null
          ? this.slices * this.sliceBytesPerMs * this.options.uplinkHeadroom * 4
          : m.uplinkBytesPerMs;
      const freeAt = m === null ? this.sourceUplinkFreeAt : m.uplinkFreeAt;
      const start = freeAt > now ? freeAt : now;
      if (isData && start - now > MAX_UPLINK_QUEUE_MS) {
        this.dataPacketsDroppedUplink++;
        return;
      }
      departure = start + size / rate;
      if (m === null) this.sourceUplinkFreeAt = departure;
      else m.uplinkFreeAt = departure;
    }
    if (isData && this.loss !== null && this.linkLoses(from, to, message)) {
      this.dataPacketsLost++;
      return;
    }
    const arrival = Math.ceil(departure + this.latency.latencyMs(from, to));
    this.queue.push(arrival, this.ev(EV_DELIVER, to, from, bytes));
  }

  /** Loss on this link for this packet, where the run places it. */
  private linkLoses(from: number, to: number, message: Message): boolean {
    const loss = this.loss;
    if (loss === null) return false;
    if ((this.options.lossAt ?? 'all') === 'sources') {
      const slice = (message as { readonly slice: number }).slice;
      if (from !== SOURCE_ID && this.sliceSourceIds[slice] !== from) return false;
    }
    return loss.lost(from, to);
  }

  /**
   * The origin (an HTTP server beside the true source) answers a byte-range request after a round
   * trip between the member and the source's location; its bytes are what the mesh failed to save.
   */
  private fetchOrigin(m: MemberRecord, slice: number, seqs: readonly number[], now: number): void {
    if (seqs.length === 0) return;
    this.originRequests++;
    this.originPackets += seqs.length;
    m.originPacketsFetched += seqs.length;
    this.originBytes += seqs.length * this.packetBytes + ORIGIN_REQUEST_OVERHEAD_BYTES;
    const rtt = 2 * this.latency.latencyMs(m.id, SOURCE_ID);
    this.queue.push(Math.ceil(now + rtt), this.ev(EV_ORIGIN, m.id, slice, null, [...seqs]));
  }

  private originArrived(ev: SimEvent, now: number): void {
    const m = this.byId[ev.node];
    const engine = m?.engine;
    if (m === undefined || engine === null || engine === undefined || !m.alive) return;
    for (const seq of ev.peers ?? [])
      this.apply(
        m,
        engine.handle(now, { kind: 'originPacket', slice: ev.from, seq, payload: this.emptyPayload }),
        now,
      );
  }

  private recordDelivery(
    m: MemberRecord,
    slice: number,
    seq: number,
    hops: number,
    now: number,
    via: 'tree' | 'repair' | 'origin' | 'parity',
  ): void {
    const emitted = this.emitTimes[slice]?.[seq];
    if (emitted === undefined || Number.isNaN(emitted)) return;
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
    if (now >= this.options.plan.measureFromMs) {
      m.measureSum[slice] = (m.measureSum[slice] ?? 0) + delay;
      m.measureCount[slice] = (m.measureCount[slice] ?? 0) + 1;
    }
    if (first) {
      // First packet on this slice.
      m.slicesSeen++;
      if (m.slicesSeen === this.slices) {
        m.completeAt = now;
        this.startPlayback(m, now);
      }
    }
  }

  /**
   * All slices flow: the member's player starts `playbackBufferMs` from now at a fixed delay behind
   * the source (its slowest first packet's plus the buffer), and its engine learns the deadlines.
   */
  private startPlayback(m: MemberRecord, now: number): void {
    let slowest = 0;
    for (const d of m.firstDelay) if (d > slowest) slowest = d;
    m.playoutDelayMs = slowest + this.playbackBufferMs;
    m.playFromMs = now + this.playbackBufferMs;
    const engine = m.engine;
    if (engine === null) return;
    this.apply(
      m,
      engine.handle(now, {
        kind: 'playout',
        zeroAtMs: this.options.plan.streamStartMs + m.playoutDelayMs,
        packetIntervalMs: this.packetIntervalMs,
        // 1 ms early: emission times are whole ms, so the engine's clock can put the first packet
        // half a millisecond before the start this simulator counts from.
        fromMs: m.playFromMs - 1,
        // A browser measures its origin fetches; here the model's round trip to the source's site.
        originRttMs: 2 * this.latency.latencyMs(m.id, SOURCE_ID),
      }),
      now,
    );
  }
}

/** Validate protocol overrides through the engine's own validation (a clear error naming the field). */
export function checkProtocolOverrides(protocol: Partial<ProtocolConfig>): void {
  resolveConfig({ id: 1, role: 'member', sourceId: 0, targetLoadSlices: 16, protocol });
}
