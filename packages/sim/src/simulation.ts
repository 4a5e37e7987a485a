import {
  Engine,
  createRandom,
  linksPerDirection,
  nodeDegree,
  resolveConfig,
  shuffleInPlace,
  DEFAULT_PROTOCOL,
  type Action,
  type EngineEvent,
  type ProtocolConfig,
  type Random,
} from '@chunkycast/engine';
import { MessageType, type Message } from '@chunkycast/wire';
import { Adversary, type AdversarySpec } from './adversaries.js';
import { createLatencyModel, type LatencyModel } from './net/latency.js';
import { BernoulliLinks, GilbertElliottLinks, type LinkLossModel } from './net/loss.js';
import {
  MemberRecord,
  Measurement,
  ORIGIN_REQUEST_OVERHEAD_BYTES,
  estimateMedianLatency,
  type SimResult,
} from './measurement.js';
import {
  NET_BOOTSTRAP,
  NET_DELIVER,
  NET_HOST_KINDS,
  Network,
  configurationModel,
  netEvent,
  type NetEvent,
} from './net/index.js';
import { Population, SOURCE_ID } from './population.js';
import type { ScenarioPlan } from './scenarios.js';

/** How the simulated network and stream behave; everything random derives from `seed`. */
export interface SimOptions {
  readonly plan: ScenarioPlan;
  readonly seed: number;
  /** 0 (Lat0) or 2 (Lat2): half-width of LLT–ULT in sixteenths of TL (thesis §4.4, experimental setup). */
  readonly lat: number;
  /** Data packets per slice per second. */
  readonly packetsPerSlicePerSecond: number;
  /** Stream rate; sets the size charged for each data packet on the uplinks. */
  readonly streamKbps: number;
  /**
   * Uplink capacity as a multiple of ML's data rate (headroom for control traffic); 0 = unlimited,
   * the thesis's model, which computed travel times from latency alone (thesis §4.4, experimental setup).
   */
  readonly uplinkHeadroom: number;
  /** Long-run fraction of data packets lost on a link (control is reliable, as the thesis's TCP, §4.4, experimental setup). */
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
  /**
   * When the true source publishes what the packager writes. The packager writes the stream at its
   * rate: packet k's bytes are complete at w_k = streamStartMs + round(k × packet interval ÷ slices).
   * `progressive` (default): each packet is published at w_k, as soon as it is written.
   * `segment`: the packets are cut into segments of `segmentMs` (segment j holds the packets with
   * w_k in [streamStartMs + j·segmentMs, streamStartMs + (j+1)·segmentMs)) and all of a segment's
   * packets are published, in order, at its end, when a playlist would list it.
   */
  readonly production?: 'progressive' | 'segment';
  /** Segment duration for `production: 'segment'` (default DEFAULT_SEGMENT_MS). */
  readonly segmentMs?: number;
  /** TL range in slices, uniform (thesis §4.4, experimental setup: 4–28). */
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
  /**
   * One message in this many crosses the codec (encoded to bytes and decoded); the others are
   * handed over as sent (default 1: every message). For the largest runs only; see net/transit.ts.
   */
  readonly codecSampleEvery?: number;
  /** Called about every PROGRESS_INTERVAL_MS of wall time. */
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

// The simulator's own event kinds (messages and bootstrap answers are the network core's).
const EV_TIMER = NET_HOST_KINDS;
const EV_PUBLISH = NET_HOST_KINDS + 1;
const EV_JOIN = NET_HOST_KINDS + 2;
const EV_LEAVE = NET_HOST_KINDS + 3;
const EV_SAMPLE = NET_HOST_KINDS + 4;
const EV_BURST = NET_HOST_KINDS + 5;
const EV_ORIGIN = NET_HOST_KINDS + 6;
/** A peer closed its transport to this node (it cut the node off). */
const EV_UNREACHABLE = NET_HOST_KINDS + 7;

/** Packets logged before a member's first one (see newMember). */
const REPAIR_LOOKBACK_PACKETS = 4;
/** Sequence numbers logged beyond the run's duration: the publish clock rounds to whole ms. */
const SEQ_CAPACITY_SLACK = 4;
/** Slack on a joiner's log: its first tree packet may be a few behind the stream's position. */
const JOINER_SEQ_SLACK = 8;
/** The rendezvous server's id in the latency model (far above any member id). */
const RENDEZVOUS_ID = 0xffff_fff0;
/** How often a viewer reports to the tracker (the SDK's REPORT_INTERVAL_MS): cut-offs ride on it. */
const REPORT_INTERVAL_MS = 2000;
/** A packet stuck this long in a sender's uplink queue is dropped (tail drop). */
const MAX_UPLINK_QUEUE_MS = 2000;
/** A data packet is charged at least this many bytes on an uplink (headers at a low stream rate). */
const MIN_PACKET_BYTES = 64;
/** Default playback buffer: a few seconds, as a live player keeps. */
const DEFAULT_PLAYBACK_BUFFER_MS = 5000;
/** Default segment duration: the packager's (HLS) 2 s segments. */
export const DEFAULT_SEGMENT_MS = 2000;
/** Default mean Gilbert–Elliott burst length (packets): short bursts, as on a congested Wi-Fi link. */
const DEFAULT_LOSS_BURST_PACKETS = 4;
/**
 * The true source's uplink as a multiple of one member's full-stream share: a broadcaster's
 * upload serves only the slice sources, so it is never the bottleneck the members' uplinks are.
 */
const SOURCE_UPLINK_FACTOR = 4;
/** Lat0 / Lat2 give the LLT–ULT half-width in sixteenths of TL (the thesis's ±2·TL/16). */
const LAT_STEPS_PER_TARGET_LOAD = 16;
/** Samples (load, completeness, switch messages, the loss report) are taken this often. */
const SAMPLE_INTERVAL_MS = 1000;
/** Progress is reported at most this often, in wall time. */
const PROGRESS_INTERVAL_MS = 2000;
/** Events between wall-clock reads for progress (a power of two minus one: a mask). */
const PROGRESS_CHECK_MASK = 0xffff;
/**
 * Fork labels of the run's random streams: each use draws from its own, so adding draws in one
 * place does not shift another. The members' streams are forked by their ids.
 */
const LATENCY_STREAM = 1;
const INITIAL_GRAPH_STREAM = 2;
const BURST_STREAM = 3;
const MEDIAN_LATENCY_STREAM = 7;
const LOSS_STREAM = 0x1055;
const SOURCE_STREAM = 0x5eed;
/** Labels within a member's stream. */
const MEMBER_ENGINE_STREAM = 1;
const MEMBER_KIND_STREAM = 0xad;
const MEMBER_ADVERSARY_STREAM = 0xbad;

/** One number for an ordered pair of member ids (ids stay far below 2²⁶ here). */
function pairKey(a: number, b: number): number {
  return a * 0x400_0000 + b;
}

/**
 * A discrete-event host for thousands of engines, wiring the parts together: the network core
 * (`net/`: event queue, codec transit, latency, uplinks, loss, rendezvous), the population and its
 * churn (`population.ts`) and what is measured (`measurement.ts`). No module-level state: two
 * simulations in one process do not interact.
 */
export class Simulation {
  private readonly random: Random;
  private readonly latency: LatencyModel;
  private readonly net: Network;
  private readonly population: Population;
  private readonly measure: Measurement;
  private source: Engine | null = null;
  private sourceTimerAt = Infinity;
  private sourceTimerGen = 0;
  private readonly slices: number;
  private readonly packetIntervalMs: number;
  private readonly publishIntervalMs: number;
  private readonly packetBytes: number;
  private readonly sliceBytesPerMs: number;
  private readonly capacitySeqs: number;
  private publishCount = 0;
  /** Segment production: the segment whose end the next publish event is (0-based). */
  private segmentIndex = 0;
  private readonly production: 'progressive' | 'segment';
  private readonly segmentMs: number;
  /**
   * Packets a joiner's log starts further back under segment production: the trees carry the
   * stream up to a segment behind the packager's position.
   */
  private readonly segmentLagSeqs: number;
  private events = 0;
  private readonly loss: LinkLossModel | null;
  /** Current slice source of each slice (for losses placed at the trees' first hops). */
  private readonly sliceSourceIds: number[];
  private readonly playbackBufferMs: number;
  /** Slices of the engines (data + parity) and the index of the parity slice (−1: none). */
  private readonly engineSlices: number;
  private readonly paritySlice: number;
  private readonly protocol: Partial<ProtocolConfig>;
  private joinsScheduled = 0;
  /** (honest member, peer it cut off): what that peer sends it no longer harms it. */
  private readonly cutPairs = new Set<number>();
  private readonly emptyPayload = new Uint8Array(0);

  constructor(private readonly options: SimOptions) {
    const plan = options.plan;
    this.random = createRandom(options.seed);
    this.latency = createLatencyModel({ seed: this.random.fork(LATENCY_STREAM).nextU32() });
    const dataSlices = options.protocol.slices ?? DEFAULT_PROTOCOL.slices;
    const parity = options.parity ?? 'off';
    this.protocol = {
      ...options.protocol,
      latencyRangeFraction: options.lat / LAT_STEPS_PER_TARGET_LOAD,
      ...(parity === 'off'
        ? {}
        : {
            slices: dataSlices + 1,
            paritySlices: 1,
            // 'on': thresholds of zero loss keep the true source's parity switched on throughout.
            ...(parity === 'on' ? { parityOnLossFraction: 0, parityOffLossFraction: 0 } : {}),
          }),
    };
    // The simulator's own bookkeeping (publishing, logs, metrics) is over the data slices.
    this.slices = dataSlices;
    this.engineSlices = this.protocol.slices ?? DEFAULT_PROTOCOL.slices;
    this.paritySlice = parity === 'off' ? -1 : dataSlices;
    this.packetIntervalMs = 1000 / options.packetsPerSlicePerSecond;
    this.publishIntervalMs = this.packetIntervalMs / this.slices;
    this.production = options.production ?? 'progressive';
    this.segmentMs = options.segmentMs ?? DEFAULT_SEGMENT_MS;
    if (!(this.segmentMs > 0)) throw new RangeError(`segmentMs must be positive, got ${this.segmentMs}`);
    this.segmentLagSeqs =
      this.production === 'segment' ? Math.ceil(this.segmentMs / this.packetIntervalMs) : 0;
    const streamBytesPerSecond = (options.streamKbps * 1000) / 8;
    this.sliceBytesPerMs = streamBytesPerSecond / this.slices / 1000;
    this.packetBytes = Math.max(
      MIN_PACKET_BYTES,
      Math.round(streamBytesPerSecond / this.slices / options.packetsPerSlicePerSecond),
    );
    const seqs = Math.ceil((plan.durationMs / 1000) * options.packetsPerSlicePerSecond) + SEQ_CAPACITY_SLACK;
    this.capacitySeqs = seqs;
    this.measure = new Measurement(this.slices, seqs, this.paritySlice, plan.measureFromMs);
    this.sliceSourceIds = new Array<number>(this.engineSlices).fill(-1);
    this.playbackBufferMs = options.playbackBufferMs ?? DEFAULT_PLAYBACK_BUFFER_MS;
    const lossRandom = this.random.fork(LOSS_STREAM);
    this.loss =
      options.dataLoss <= 0
        ? null
        : (options.lossModel ?? 'gilbert') === 'bernoulli'
          ? new BernoulliLinks(options.dataLoss, lossRandom)
          : new GilbertElliottLinks(
              {
                meanLoss: options.dataLoss,
                meanBurstPackets: options.lossBurstPackets ?? DEFAULT_LOSS_BURST_PACKETS,
              },
              lossRandom,
            );
    this.population = new Population(options, this.random);
    const latency = this.latency;
    this.net = new Network({
      latencyMs: (from, to) => latency.latencyMs(from, to),
      time: 'whole',
      fifoPerLink: false,
      slab: true,
      ...(options.codecSampleEvery === undefined ? {} : { codecSampleEvery: options.codecSampleEvery }),
      ...(options.uplinkHeadroom > 0 ? { uplinkMaxQueueMs: MAX_UPLINK_QUEUE_MS } : {}),
      loses: (from, to, message) => this.linkLoses(from, to, message),
      rendezvous: {
        sampling: 'draw',
        random: this.random,
        pool: () => this.population.alive,
        // The rendezvous server answers after a round trip.
        answerDelayMs: (requester) => 2 * latency.latencyMs(requester, RENDEZVOUS_ID),
        // A cut-off rides on the reporter's next periodic report (at worst REPORT_INTERVAL_MS
        // later), plus the one-way delay.
        reportDelayMs: (reporter) => REPORT_INTERVAL_MS + latency.latencyMs(reporter, RENDEZVOUS_ID),
        neverBanned: new Set([SOURCE_ID]),
      },
    });
    this.net.uplinks?.setRate(
      SOURCE_ID,
      this.slices * this.sliceBytesPerMs * options.uplinkHeadroom * SOURCE_UPLINK_FACTOR,
    );
  }

  run(): SimResult {
    const plan = this.options.plan;
    const wall = this.options.wallClockMs ?? (() => 0);
    const wallStart = wall();
    let lastProgressWall = wallStart;
    const queue = this.net.queue;
    this.latency.attach(SOURCE_ID);
    this.latency.attach(RENDEZVOUS_ID);
    this.population.planTargetLoads(plan.initialMembers + plan.joiners);
    this.population.planAdversaries(plan.initialMembers + plan.joiners);
    this.createInitialMembers(plan.initialMembers);
    // The source last, so the rendezvous server can already name members when it asks.
    this.createSource();
    queue.push(this.nextPublishAt(), netEvent(EV_PUBLISH, SOURCE_ID));
    for (let t = SAMPLE_INTERVAL_MS; t <= plan.durationMs; t += SAMPLE_INTERVAL_MS)
      queue.push(t, netEvent(EV_SAMPLE, 0));
    if (plan.joiners > 0) queue.push(plan.joinStartMs, netEvent(EV_JOIN, 0));
    if (plan.poissonJoinsPerSecond > 0)
      queue.push(this.population.nextPoissonArrival(0), netEvent(EV_JOIN, 0));
    if (plan.burstFraction > 0) queue.push(plan.burstAtMs, netEvent(EV_BURST, 0));

    for (;;) {
      const next = queue.peekTime();
      if (next === undefined || next > plan.durationMs) break;
      const ev = queue.pop();
      if (ev === undefined) break;
      this.events++;
      this.dispatch(ev);
      if ((this.events & PROGRESS_CHECK_MASK) === 0 && this.options.onProgress !== undefined) {
        const w = wall();
        if (w - lastProgressWall >= PROGRESS_INTERVAL_MS) {
          lastProgressWall = w;
          this.options.onProgress({
            simMs: queue.nowMs,
            durationMs: plan.durationMs,
            events: this.events,
            alive: this.population.alive.length,
            wallMs: w - wallStart,
          });
        }
      }
    }
    for (const m of this.population.members) if (m.alive) this.retire(m, plan.durationMs, false);
    const measure = this.measure;
    return {
      options: this.options,
      members: this.population.members,
      samples: measure.samples,
      emitTimes: measure.emitTimes,
      writeTimes: measure.writeTimes,
      emittedPerSlice: measure.emitTimes.map((_, s) => this.sourceEngine().nextSequence(s)),
      events: this.events,
      codec: {
        sampleEvery: this.net.transit.sampleEvery,
        messages: this.net.transit.messages,
        encoded: this.net.transit.encodedMessages,
      },
      simMs: plan.durationMs,
      wallMs: wall() - wallStart,
      latency: this.latency,
      medianLatencyMs: estimateMedianLatency(
        this.latency,
        this.population.members.map((m) => m.id),
        this.random.fork(MEDIAN_LATENCY_STREAM),
      ),
      sourceNeighbours: measure.finalSourceNeighbours,
      overlayNeighbours: measure.finalOverlay,
      controlBytesByType: measure.controlBytesByType,
      dataPacketsSent: measure.dataPacketsSent,
      dataPacketsDroppedUplink: measure.dataPacketsDroppedUplink,
      dataPacketsLost: measure.dataPacketsLost,
      decodeErrors: measure.decodeErrors,
      protocolViolations: measure.protocolViolations,
      sliceSourceChanges: measure.sliceSourceChanges,
      rootsSpread: this.sourceEngine().counters.rootsSpread,
      packetIntervalMs: this.packetIntervalMs,
      slices: this.slices,
      lossDecisions: this.loss?.packets ?? 0,
      originRequests: measure.originRequests,
      originPackets: measure.originPackets,
      originBytes: measure.originBytes,
      repairPacketsSent: measure.repairPacketsSent,
      repairLatencyMs: measure.repairLatencyMs,
      originLatencyMs: measure.originLatencyMs,
      cutOffs: measure.cutOffs,
      bannedAtRendezvous: this.net.rendezvous.bannedAt,
      messagesRefusedBan: measure.messagesRefusedBan,
      honestAccusations: measure.honestAccusations,
      packetBytes: this.packetBytes,
      playbackBufferMs: this.playbackBufferMs,
      parity: {
        mode: this.options.parity ?? 'off',
        activeTransmissions: measure.parityActiveTransmissions,
        idleTransmissions: measure.parityIdleTransmissions,
        stripesActive: this.sourceEngine().parityCounters.active,
        stripesIdle: this.sourceEngine().parityCounters.idle,
        switches: measure.paritySwitches,
        measuredLoss: measure.measuredLoss,
      },
    };
  }

  private sourceEngine(): Engine {
    if (this.source === null) throw new Error('no source');
    return this.source;
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
      this.random.fork(SOURCE_STREAM),
    );
    this.apply(null, this.source.handle(0, { kind: 'start' }), 0);
  }

  private newMember(now: number): MemberRecord {
    const population = this.population;
    const id = population.nextId();
    const r = this.random.fork(id);
    const tl = population.drawTargetLoad(r);
    const kind = population.drawKind(r.fork(MEMBER_KIND_STREAM));
    const engine = new Engine(
      { id, role: 'member', sourceId: SOURCE_ID, targetLoadSlices: tl, protocol: this.protocol },
      r.fork(MEMBER_ENGINE_STREAM),
    );
    const cfg = engine.config;
    // A receive-only member (ML 0) still sends control traffic: it gets one slice's uplink.
    const uplinkBytesPerMs = Math.max(cfg.maxLoad, 1) * this.sliceBytesPerMs * this.options.uplinkHeadroom;
    // Logged from a little before the stream's position at the join: repair may bring packets
    // older than the first one the tree delivers.
    const baseSeq = Math.max(
      0,
      Math.floor((now - this.options.plan.streamStartMs) / this.packetIntervalMs) -
        REPAIR_LOOKBACK_PACKETS -
        this.segmentLagSeqs,
    );
    const remainingSeqs = Math.min(
      this.capacitySeqs,
      Math.ceil(((this.options.plan.durationMs - now) / 1000) * this.options.packetsPerSlicePerSecond) +
        JOINER_SEQ_SLACK +
        REPAIR_LOOKBACK_PACKETS +
        this.segmentLagSeqs,
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
    if (kind !== null) m.hostile = new Adversary(id, kind, r.fork(MEMBER_ADVERSARY_STREAM));
    population.add(m);
    this.net.uplinks?.setRate(id, uplinkBytesPerMs);
    this.latency.attach(id);
    // Where the stream is, as the rendezvous server tells a joiner (the product's tracker relays
    // the broadcaster's announcements): the sequence window's basis until its slices flow.
    this.apply(m, engine.handle(now, { kind: 'liveSequence', seq: this.source?.nextSequence(0) ?? 0 }), now);
    return m;
  }

  /** The thesis's static population: a Swaplinks graph built before the source starts (thesis §4.4, experimental setup). */
  private createInitialMembers(count: number): void {
    const created: MemberRecord[] = [];
    for (let i = 0; i < count; i++) created.push(this.newMember(0));
    // Configuration model: every member gets out = in = L stubs, paired at random.
    const degrees = new Map<number, number>();
    for (const m of created) {
      degrees.set(
        m.id,
        linksPerDirection(
          nodeDegree(
            m.targetLoad,
            this.protocol.minLoadSlices ?? DEFAULT_PROTOCOL.minLoadSlices,
            this.protocol.minNodeDegree ?? DEFAULT_PROTOCOL.minNodeDegree,
          ),
        ),
      );
    }
    const graph = configurationModel(degrees, this.random.fork(INITIAL_GRAPH_STREAM), 'retry');
    for (const m of created) {
      const engine = m.engine;
      if (engine === null) continue;
      const links = graph.get(m.id);
      this.apply(
        m,
        engine.handle(0, { kind: 'installLinks', out: links?.out ?? [], in: links?.in ?? [] }),
        0,
      );
      this.apply(m, engine.handle(0, { kind: 'start' }), 0);
    }
  }

  private join(now: number): void {
    const plan = this.options.plan;
    const m = this.newMember(now);
    const engine = m.engine;
    if (engine !== null) this.apply(m, engine.handle(now, { kind: 'start' }), now);
    this.scheduleLeave(m, now);
    this.joinsScheduled++;
    if (plan.joiners > 0 && this.joinsScheduled < plan.joiners) {
      this.net.push(
        plan.joinStartMs + Math.round((this.joinsScheduled * 1000) / plan.joinsPerSecond),
        netEvent(EV_JOIN, 0),
      );
    }
    if (plan.poissonJoinsPerSecond > 0) {
      const next = this.population.nextPoissonArrival(now);
      if (next < plan.churnEndMs) this.net.push(next, netEvent(EV_JOIN, 0));
    }
  }

  private scheduleLeave(m: MemberRecord, now: number): void {
    const plan = this.options.plan;
    if (plan.stay === null) return;
    const at = now + Math.round(this.population.paretoStayMs());
    if (at < plan.churnEndMs) this.net.push(at, netEvent(EV_LEAVE, m.id));
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
      if (engine !== null) this.measure.finalOverlay.set(m.id, engine.neighbours());
      return;
    }
    this.population.remove(m, now);
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

  private burst(now: number): void {
    const alive = this.population.alive;
    const count = Math.round(alive.length * this.options.plan.burstFraction);
    const victims = shuffleInPlace([...alive], this.random.fork(BURST_STREAM)).slice(0, count);
    for (const id of victims) {
      const m = this.population.byId[id];
      if (m !== undefined) this.retire(m, now, true);
    }
  }

  // ───────────────────────────── event loop ─────────────────────────────

  private dispatch(ev: NetEvent): void {
    const now = this.net.queue.nowMs;
    switch (ev.kind) {
      case NET_DELIVER:
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
        const m = this.population.byId[ev.node];
        if (m !== undefined) this.leave(m, now, this.population.drawGraceful());
        return;
      }
      case NET_BOOTSTRAP:
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
        const target = ev.node === SOURCE_ID ? null : this.population.byId[ev.node];
        const engine = ev.node === SOURCE_ID ? this.source : (target?.engine ?? null);
        if (engine === null || (target !== undefined && target !== null && !target.alive)) return;
        this.apply(target ?? null, engine.handle(now, { kind: 'peerUnreachable', peer: ev.from }), now);
        return;
      }
    }
  }

  private deliver(ev: NetEvent, now: number): void {
    const decoded = this.net.delivered(ev);
    if (decoded === null) return;
    if (!decoded.ok) {
      this.measure.decodeErrors++;
      return;
    }
    const message = decoded.message;
    if (ev.node === SOURCE_ID) {
      const source = this.source;
      if (source !== null)
        this.apply(null, source.handle(now, { kind: 'message', from: ev.from, message }), now);
      return;
    }
    const m = this.population.byId[ev.node];
    const engine = m?.engine;
    if (m === undefined || engine === null || engine === undefined || !m.alive) return;
    const uplinks = this.net.uplinks;
    if (message.type === MessageType.PacketRepairRequest && uplinks !== null) {
      // The helper's transport backlog, as a browser reads a data channel's bufferedAmount.
      const backlog = uplinks.backlogBytes(m.id, now);
      this.apply(m, engine.handle(now, { kind: 'transportBacklog', peer: ev.from, bytes: backlog }), now);
    }
    this.apply(m, engine.handle(now, { kind: 'message', from: ev.from, message }), now);
  }

  private timer(ev: NetEvent, now: number): void {
    if (ev.node === SOURCE_ID) {
      if (ev.gen !== this.sourceTimerGen || this.source === null) return;
      this.sourceTimerAt = Infinity;
      this.apply(null, this.source.handle(now, { kind: 'timer' }), now);
      return;
    }
    const m = this.population.byId[ev.node];
    if (m?.engine === null || m === undefined || ev.gen !== m.timerGen) return;
    m.timerAt = Infinity;
    this.apply(m, m.engine.handle(now, { kind: 'timer' }), now);
  }

  /** When the packager has finished writing packet k (stream-wide count, slices interleaved). */
  private writtenAtMs(k: number): number {
    return this.options.plan.streamStartMs + Math.round(k * this.publishIntervalMs);
  }

  /** The next publish event: the next packet's write time, or the current segment's end. */
  private nextPublishAt(): number {
    return this.production === 'progressive'
      ? this.writtenAtMs(this.publishCount)
      : this.options.plan.streamStartMs + Math.round((this.segmentIndex + 1) * this.segmentMs);
  }

  private publish(now: number): void {
    const source = this.sourceEngine();
    if (this.production === 'progressive') {
      this.publishOne(source, now);
    } else {
      // The segment ends now: every packet written before its end goes out, in order, at once.
      while (this.writtenAtMs(this.publishCount) < now) this.publishOne(source, now);
      this.segmentIndex++;
    }
    const next = this.nextPublishAt();
    if (next <= this.options.plan.durationMs) this.net.push(next, netEvent(EV_PUBLISH, SOURCE_ID));
  }

  private publishOne(source: Engine, now: number): void {
    const s = this.publishCount % this.slices;
    this.measure.recordEmission(s, source.nextSequence(s), now, this.writtenAtMs(this.publishCount));
    this.publishCount++;
    this.apply(null, source.handle(now, { kind: 'publish', payload: this.emptyPayload }), now);
  }

  private bootstrap(ev: NetEvent, now: number): void {
    const peers = ev.peers ?? [];
    if (ev.node === SOURCE_ID) {
      if (this.source !== null) this.apply(null, this.source.handle(now, { kind: 'bootstrap', peers }), now);
      return;
    }
    const m = this.population.byId[ev.node];
    if (m?.engine === null || m === undefined) return;
    this.apply(m, m.engine.handle(now, { kind: 'bootstrap', peers }), now);
  }

  private sample(now: number): void {
    if (this.paritySlice >= 0) {
      const fraction = this.measure.lossFraction(
        now,
        this.population.aliveMembers(),
        this.options.packetsPerSlicePerSecond,
      );
      const source = this.source;
      if (source !== null) this.apply(null, source.handle(now, { kind: 'measuredLoss', fraction }), now);
    }
    this.spam(now);
    this.measure.recordSecond(
      now,
      this.population.aliveMembers(),
      this.sourceEngine().currentSliceSources().slice(0, this.slices),
    );
    if (now + SAMPLE_INTERVAL_MS > this.options.plan.durationMs) {
      // Last sample: freeze the overlay as it stands for the stretch computation.
      this.measure.finalSourceNeighbours = this.sourceEngine()
        .currentSliceSources()
        .filter((p): p is number => p !== null);
    }
  }

  /** Once a second, each switch-spammer floods its neighbours with requests. */
  private spam(now: number): void {
    for (const id of this.population.alive) {
      const m = this.population.byId[id];
      const hostile = m?.hostile ?? null;
      const engine = m?.engine ?? null;
      if (m === undefined || hostile?.kind !== 'switch-spammer' || engine === null) continue;
      for (const to of engine.neighbours()) {
        const flood = hostile.spam(this.engineSlices);
        if (this.population.isHonest(to) && !this.cutPairs.has(pairKey(to, m.id)))
          for (let i = 0; i < flood.length; i++) hostile.recordHarm(to, now);
        for (const message of flood) this.transmit(m, m.id, to, message, now);
      }
    }
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
            if (!this.population.isHonest(to) || this.cutPairs.has(pairKey(to, fromId))) return;
            // A tree packet harms only a member that takes that slice from us: to the others it is
            // a stray they drop (the attacker's engine may still count a child that left it).
            if (message.type === MessageType.Data) {
              const victim = to === SOURCE_ID ? null : this.population.byId[to]?.engine;
              if (victim?.takesSliceFrom(message.slice, fromId) !== true) return;
            }
            hostile.recordHarm(to, now);
          };
          for (const sent of hostile.rewrite(to, message, harm)) this.transmit(m, fromId, to, sent, now);
          break;
        }
        case 'deliver':
          if (m !== null) {
            if (this.measure.recordDelivery(m, action.slice, action.seq, action.hops, now, action.via))
              this.startPlayback(m, now);
            if (action.missingSinceMs !== null && action.via !== 'tree') {
              (action.via === 'repair' ? this.measure.repairLatencyMs : this.measure.originLatencyMs).push(
                now - action.missingSinceMs,
              );
            }
          }
          break;
        case 'fetchOrigin':
          if (m !== null) this.fetchOrigin(m, action.slice, action.seqs, now);
          break;
        case 'requestBootstrap':
          this.net.requestBootstrap(fromId, action.count, now);
          break;
        case 'event':
          this.onEngineEvent(m, action.event, now);
          break;
        case 'disconnect':
          // The transport closes: the other end learns it after a one-way delay.
          this.net.push(
            this.net.arrivalMs(fromId, action.peer, now),
            netEvent(EV_UNREACHABLE, action.peer, fromId),
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
        this.net.push(t, netEvent(EV_TIMER, SOURCE_ID, 0, null, null, this.sourceTimerGen));
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
      this.net.push(t, netEvent(EV_TIMER, m.id, 0, null, null, m.timerGen));
    }
  }

  private onEngineEvent(m: MemberRecord | null, event: EngineEvent, now: number): void {
    const measure = this.measure;
    switch (event.type) {
      case 'parentChanged':
        if (m !== null && event.slice < this.slices)
          m.parentLostAt[event.slice] = event.parent === null ? now : Number.NaN;
        if (event.switchKind === 'load' || event.switchKind === 'latency') {
          measure.optimisingSwitchesThisSecond++;
          if (event.switchKind === 'latency') measure.latencySwitchesThisSecond++;
        } else if (event.switchKind === 'forced') measure.forcedSwitchesThisSecond++;
        return;
      case 'protocolViolation':
        measure.protocolViolations++;
        if (m !== null && m.hostile === null && this.population.isHonest(event.peer)) {
          // Why an honest member accused another: the reason without its numbers.
          const reason = event.reason.replace(/[0-9]+/g, 'N');
          measure.honestAccusations.set(reason, (measure.honestAccusations.get(reason) ?? 0) + 1);
        }
        return;
      case 'neighbourDown':
        if (event.reason === 'cutOff' && m !== null && m.hostile === null) {
          measure.cutOffs.push({ by: m.id, peer: event.peer, at: now });
          this.cutPairs.add(pairKey(m.id, event.peer));
        }
        if (event.reason === 'cutOff' && m !== null && this.options.rendezvousBan !== false)
          this.net.rendezvous.reportCutOff(m.id, event.peer, now);
        return;
      case 'parity':
        measure.paritySwitches.push({ t: now, active: event.active });
        return;
      case 'sliceSource':
        if (m === null && event.assigned) measure.sliceSourceChanges++;
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

  private transmit(m: MemberRecord | null, from: number, to: number, message: Message, now: number): void {
    const transit = this.net.transit;
    const bytes = transit.encode(message);
    const byteLength = transit.lastByteLength;
    const isData = message.type === MessageType.Data || message.type === MessageType.PacketRepairData;
    this.measure.countSent(m, message, byteLength, isData);
    const target = to === SOURCE_ID ? this.source : this.population.byId[to]?.engine;
    if (target === null || target === undefined) return;
    const rendezvous = this.net.rendezvous;
    if (rendezvous.bannedAt.size > 0) {
      // Every new connection is signalled through the rendezvous, which refuses a banned peer's:
      // only links already open (the two are neighbours) still carry messages.
      const banned = rendezvous.bannedNow(from, now) ? from : rendezvous.bannedNow(to, now) ? to : null;
      if (banned !== null) {
        const other = banned === from ? to : from;
        const otherEngine = other === SOURCE_ID ? this.source : this.population.byId[other]?.engine;
        if (otherEngine === null || otherEngine === undefined || !otherEngine.isNeighbour(banned)) {
          this.measure.messagesRefusedBan++;
          return;
        }
      }
    }
    // An empty parity packet (parity off) costs its header only; other data the nominal size.
    const idleParity =
      message.type === MessageType.Data &&
      message.slice === this.paritySlice &&
      message.payload.byteLength === 0;
    const outcome = this.net.carry(from, to, message, bytes, now, {
      sizeBytes: isData && !idleParity ? this.packetBytes : byteLength,
      droppable: isData,
      lossy: isData && this.loss !== null,
    });
    if (outcome === 'droppedUplink') this.measure.dataPacketsDroppedUplink++;
    else if (outcome === 'lost') this.measure.dataPacketsLost++;
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
    const measure = this.measure;
    measure.originRequests++;
    measure.originPackets += seqs.length;
    m.originPacketsFetched += seqs.length;
    measure.originBytes += seqs.length * this.packetBytes + ORIGIN_REQUEST_OVERHEAD_BYTES;
    const rtt = 2 * this.latency.latencyMs(m.id, SOURCE_ID);
    this.net.push(Math.ceil(now + rtt), netEvent(EV_ORIGIN, m.id, slice, null, [...seqs]));
  }

  private originArrived(ev: NetEvent, now: number): void {
    const m = this.population.byId[ev.node];
    const engine = m?.engine;
    if (m === undefined || engine === null || engine === undefined || !m.alive) return;
    for (const seq of ev.peers ?? [])
      this.apply(
        m,
        engine.handle(now, { kind: 'originPacket', slice: ev.from, seq, payload: this.emptyPayload }),
        now,
      );
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
    // The engine's deadlines count from write times (zero + seq × interval). Under segment
    // production a packet is published up to a segment after it was written, and a player plays
    // a segment once it is listed: a segment later than the write-time clock.
    const segmentWaitMs = this.production === 'segment' ? this.segmentMs : 0;
    this.apply(
      m,
      engine.handle(now, {
        kind: 'playout',
        zeroAtMs: this.options.plan.streamStartMs + segmentWaitMs + m.playoutDelayMs,
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
  // Any valid member will do: only the overrides are under test.
  resolveConfig({ id: 1, role: 'member', sourceId: 0, targetLoadSlices: 16, protocol });
}
