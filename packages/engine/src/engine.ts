import {
  MAX_HOPS,
  MAX_LOAD_FIELD,
  ForcedReason,
  MessageType,
  RejectReason,
  TreeRole,
  bloomContains,
  bloomEquals,
  bitCount32,
  bloomOr,
  type AdvertMessage,
  type AdvertSliceEntry,
  type Bloom128,
  type DataMessage,
  type FloodMessage,
  type Message,
  type PeerId,
  type SliceSourceAssignMessage,
  type TreeLeaveMessage,
} from '@chunkycast/wire';
import {
  ConfigError,
  resolveConfig,
  resolveLoadConfig,
  type EngineInit,
  type ResolvedConfig,
} from './config.js';
import { bloomMaskFor } from './mask.js';
import type { Random } from './random.js';
import { ParityError, recoverFromParity } from './parity.js';
import { Repairer, type FilledPacket } from './repair.js';
import { DeadlineTable, TIMEOUT_PAST_MS, type Deadline } from './deadlines.js';
import { ArrivalOffsets } from './offsets.js';
import { LatencyPhase, latencyRoom } from './latency-phase.js';
import { LoadPhase } from './load-phase.js';
import { pathVia, type PhaseHost } from './phase-host.js';
import { TrueSource } from './source.js';
import { Switching, type SwitchHost } from './switching.js';
import { Flooding, ROOT_FLOOD_HOPS, type FloodHost } from './flood.js';
import { LoopProbes, type LoopHost } from './loops.js';
import { PeerState, SLICE_FLAG_RECEIVING, SLICE_FLAG_ROOT, SliceState } from './state.js';
import { Swaplinks } from './swaplinks.js';
import {
  AUDIT_LAG_MS,
  AUDIT_RING_MARGIN_PACKETS,
  AUDIT_SETTLE_MS,
  AUDIT_MAX_MISSES,
  AUDIT_WINDOW_MASK,
  AUDIT_WINDOW_PACKETS,
  FAILED_AUDIT_SHARE,
  REPLAY_GRACE_MS,
  REPLAY_SHARE,
  STARVED_SLICE_MS,
  Trust,
  type RequestKind,
} from './trust.js';
import type { Action, EngineCounters, EngineEvent, Input } from './types.js';

const U32 = 4294967296;

/** Whether an advertised estimate (offset or path, ms or null) moved enough to be advertised again. */
function movedBy(previous: number | null, next: number | null, stepMs: number): boolean {
  if (previous === null || next === null) return previous !== next;
  return Math.abs(previous - next) >= stepMs;
}

/** Puts `value` into `sorted[0..count]` (ascending, `count` values held): at most M values, mostly in order already. */
function insertSorted(sorted: Float64Array, count: number, value: number): void {
  let i = count;
  while (i > 0 && (sorted[i - 1] ?? 0) > value) {
    sorted[i] = sorted[i - 1] ?? 0;
    i--;
  }
  sorted[i] = value;
}

/**
 * The sequence window (not in the thesis, whose members are honest). The true source deals packets
 * to the slices in turn (thesis §4.2, slice sources), so every slice's sequence advances in step; a data packet's
 * sequence may run ahead of the most advanced slice we hold by what the time since that slice last
 * advanced allows, at twice its measured rate, plus this slack (packets in flight on faster trees).
 * Beyond it the packet is forged (a parent replaying a genuine packet under sequence 10⁶ or 2³²−1
 * silenced its whole subtree for good: every honest packet then looked late): a violation, never
 * delivered or forwarded.
 */
const SEQ_WINDOW_SLACK = 4;
/**
 * The fastest packet rate the window assumes on a slice whose rate it has not measured yet: one
 * packet every 10 ms per slice is 1,600 packets/s for the stream, far above any live stream here
 * (a 0.9 Mbit/s stream of 16 KiB packets is 7 per second).
 */
const MIN_SEQ_INTERVAL_MS = 10;
/** Violations remembered for peers we hold no state for, beyond which the oldest are forgotten. */
const MAX_STRANGER_VIOLATION_ENTRIES = 256;
/** Peers' Bloom masks kept at most (children come and go; recomputing one is cheap). */
const MASK_CACHE_SIZE = 1024;
/**
 * How long a peer we found failed marks the paths through it as dead (failedPaths). A neighbour
 * below it rejoins within a few seconds and its advertised filter then shows its new path (filters
 * are taken from packets); until then its advert may still say it receives. Not in the thesis.
 */
const FAILED_PATH_MEMORY_MS = 10_000;
/** Failed peers remembered at most (a burst takes some of our ~30 neighbours and tree relations). */
const MAX_FAILED_PATHS = 64;
/**
 * A neighbour silent for this many heartbeats is taken for no slice, though it is declared failed
 * only after failureTimeoutMs (four, thesis §4.4): a switch or forced request sent to a node that
 * died waits out requestTimeoutMs (3 s), and after a failure burst the neighbours that died with a
 * parent are still undetected when the parent is. Three tolerate adverts queued for up to two
 * seconds behind data on a congested uplink (switching.ts prefers, for a forced request, neighbours
 * heard within two).
 */
const PARENT_SILENCE_HEARTBEATS = 3;

/** No peers (sendAdverts' default: neighbours only). */
const NO_PEERS: ReadonlySet<PeerId> = new Set();
/** What a member reports as the parity it sent: nothing. */
const NO_PARITY_SENT: Readonly<{ active: number; idle: number }> = Object.freeze({ active: 0, idle: 0 });
/**
 * A longer packet gap than the slice's interval estimate is taken at once, a shorter one with this
 * weight: short gaps are bursts (see onData), and an estimate too short puts hand-offs too far ahead.
 */
const SEQ_INTERVAL_SHRINK_WEIGHT = 0.1;
/**
 * The sequence window's reference is the third most advanced slice (the most advanced while fewer
 * hold packets): one or two slices pushed ahead by forged packets cannot drag the window with them.
 */
const WINDOW_REFERENCE_RANK = 3;
/** An RTT sample beyond this is a clock or echo error (a minute), not a round trip. */
const MAX_PLAUSIBLE_RTT_MS = 60_000;
/** Weight of a new RTT sample in the smoothed RTT (TCP's SRTT uses 1/8; adverts come once a second, so faster). */
const RTT_SMOOTHING = 0.25;
/**
 * latencyTriggers: a member adverts new room at most this often between rounds. Several children
 * leaving within a few hundred ms need one advert, not one each; a drop inside the gap waits for
 * the next round's advert, as without the option.
 */
const ROOM_ADVERT_MIN_GAP_MS = 200;
/** A sender of packets we do not take (not our parent) is told to stop at most this often per slice. */
const STRAY_NOTICE_INTERVAL_MS = 1000;

/** Requests that cost us work or upload, by kind: rate-limited per peer (trust.ts). */
const REQUEST_KIND: readonly (RequestKind | undefined)[] = (() => {
  const table: (RequestKind | undefined)[] = [];
  table[MessageType.SwitchRequest] = 'parent';
  table[MessageType.ForcedParentRequest] = 'parent';
  table[MessageType.LatencyPermissionRequest] = 'parent';
  table[MessageType.PacketRepairRequest] = 'repair';
  table[MessageType.RepairRequest] = 'repair';
  return table;
})();

/** Message types with a `slice` field, which must be below this stream's M. */
const CARRIES_SLICE: readonly boolean[] = (() => {
  const table: boolean[] = [];
  for (const type of [
    MessageType.Data,
    MessageType.Probe,
    MessageType.LoadReport,
    MessageType.Instruction,
    MessageType.SwitchRequest,
    MessageType.SwitchReply,
    MessageType.SwitchComplete,
    MessageType.LatencyPermissionRequest,
    MessageType.LatencyPermissionReply,
    MessageType.Flood,
    MessageType.ForcedParentRequest,
    MessageType.TreeLeave,
    MessageType.SliceSourceAssign,
    MessageType.PacketRepairRequest,
    MessageType.PacketRepairData,
    MessageType.PacketRepairNak,
  ])
    table[type] = true;
  return table;
})();

/**
 * One Chunkyspread node (member or true source) as a sans-IO state machine: the host calls
 * `handle(now, input)` and carries out the returned actions, and calls `handle(now, {kind:'timer'})`
 * when `nextDeadline()` is reached. Time and randomness come only from the host.
 */
export class Engine {
  /** Resolved configuration; its loads (TL, ML, LLT, ULT) change with `setLoad`. */
  private resolved: ResolvedConfig;
  readonly mask: Bloom128;
  readonly counters: EngineCounters = {
    packetsDelivered: 0,
    duplicatePackets: 0,
    latePackets: 0,
    strayPackets: 0,
    forgedSequences: 0,
    poisonedSlices: 0,
    replayedPackets: 0,
    requestsThrottled: 0,
    parentsDistrusted: 0,
    starvedSliceNotices: 0,
    rootsReplacedForStarving: 0,
    rootsSpread: 0,
    loopsDetected: 0,
    switchesLoad: 0,
    switchesLatency: 0,
    switchesForced: 0,
    switchRejections: 0,
    lastOptimisingSwitchAt: -Infinity,
  };
  private readonly random: Random;
  private readonly swaplinks: Swaplinks;
  private readonly peers = new Map<PeerId, PeerState>();
  private readonly sliceStates: SliceState[];
  private readonly banned = new Set<PeerId>();
  /** Suspicion and request rates of peers (trust.ts). */
  private readonly trust = new Trust();
  /** A trusted word on where the stream is (`liveSequence`), and when it came. */
  private liveSeqHint: { readonly seq: number; readonly at: number } | null = null;
  /** Scratch for the sequence window's per-slice estimates. */
  private readonly windowScratch: Float64Array;
  /** Scratch for the slices' highest sequences, sorted (seqWindowFloor's rank). */
  private readonly seqScratch: Float64Array;
  /**
   * A lower bound of `seqWindowEnd()` (or −Infinity): the WINDOW_REFERENCE_RANK-th highest slice
   * sequence at its last computation, plus SEQ_WINDOW_SLACK. Sequences only rise but for
   * `forgetPoisonedSlice`, which resets it, and the window never ends below that rank's sequence
   * however time passes, so a packet within the bound needs no computation: it was 3% of a
   * simulation's time, once per tree packet (issue 16).
   */
  private seqWindowFloor = -Infinity;
  /** When a peer last became our Swaplinks neighbour (latencyWindowFromNeighbours). */
  private newestNeighbourAt = -Infinity;
  /** Violations of peers without a PeerState (a parent that is not a Swaplinks neighbour, say). */
  private readonly strangerViolations = new Map<PeerId, number>();
  private readonly masks = new Map<PeerId, Bloom128>();
  /**
   * Peers we found silent for the failure timeout (not quitting; rememberFailedPath) in the last
   * FAILED_PATH_MEMORY_MS and not heard from since, oldest first, with their masks. A neighbour
   * whose advertised path runs through one gets no data by it, whatever its advert's receiving
   * flag says (it was sent before its own timeout ran out): after a burst, a member that lost its
   * parent asked a sibling below the same dead parent, or two orphaned subtrees each took the
   * other as their way back, and waited for seconds.
   */
  private readonly failedPaths = new Map<PeerId, { readonly mask: Bloom128; readonly at: number }>();
  /**
   * Peers whose link the host reported relayed (`linkRoute`), kept while the host's link lasts: a
   * PeerState comes and goes with neighbourship, the link (and its route) does not. Cleared by
   * `peerUnreachable` and when we cut a peer off.
   */
  private readonly relayedLinks = new Set<PeerId>();
  private actions: Action[] = [];
  private now = 0;
  private started = false;
  private startedAt = -Infinity;
  private stopped = false;
  /** When each kind of timer is next due (deadlines.ts). */
  private readonly deadlines = new DeadlineTable();
  private load = 0;
  private linksInstalled = false;
  private failingPeer: PeerId | null = null;
  /** latencyTriggers: our load fell to where a latency switch could fill it; advert before the round. */
  private roomAdvertDue = false;
  private lastRoomAdvertAt = -Infinity;
  /** latencyTriggers: a neighbour's advert showed new room; run the latency phase before the round. */
  private latencyRunDue = false;
  /** Relative arrival offsets of the slices (offsets.ts), the latency phase's measure. */
  private readonly offsets: ArrivalOffsets;
  /** Tree construction by controlled flooding (flood.ts) and loop probes (loops.ts), members only. */
  private readonly flooding: Flooding;
  private readonly loops: LoopProbes;
  /** Parent switching, both sides of the handshake (switching.ts), members only. */
  private readonly switching: Switching;
  /** The load phase (load-phase.ts) and the latency phase (latency-phase.ts), members only. */
  private readonly loadPhase: LoadPhase;
  private readonly latencyPhase: LatencyPhase;
  /** Deadline-aware repair from neighbours and the origin (members only, once a playout clock is set). */
  readonly repair: Repairer;
  /** The true source's part (source.ts); null for members, which never deal packets or pick roots. */
  private readonly source: TrueSource | null = null;

  constructor(init: EngineInit, random: Random) {
    this.resolved = resolveConfig(init);
    this.random = random;
    this.mask = bloomMaskFor(this.config.id);
    const slices = this.config.protocol.slices;
    const ringSize = Math.max(this.config.protocol.minRingPackets, this.config.protocol.resendWindowPackets);
    this.sliceStates = Array.from(
      { length: slices },
      () => new SliceState(ringSize, this.config.protocol.ringPayloadMaxAgeMs),
    );
    this.offsets = new ArrivalOffsets(this.sliceStates, this.config.protocol.offsetSmoothing);
    this.windowScratch = new Float64Array(slices);
    this.seqScratch = new Float64Array(slices);
    const links = this.config.role === 'source' ? 0 : this.config.linksPerDirection;
    this.swaplinks = new Swaplinks(
      {
        id: this.config.id,
        random: this.random,
        send: (to, message) => {
          this.send(to, message);
        },
        neighbourAdded: (peer) => {
          this.onNeighbourAdded(peer);
        },
        neighbourRemoved: (peer) => {
          this.onNeighbourRemoved(peer);
        },
        sampled: (_walkId, peer) => {
          this.source?.onSampled(peer);
        },
        needBootstrap: () => {
          this.actions.push({ kind: 'requestBootstrap', count: this.config.protocol.bootstrapPeers });
        },
      },
      links,
      this.config.protocol.walkLength,
      this.config.protocol.walkTimeoutMs,
    );
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the phases read live engine state through getters
    const engine = this;
    // One host object for the member's sub-protocols: getters, so they read the engine's live state.
    const memberHost: PhaseHost & SwitchHost & FloodHost & LoopHost = {
      get id() {
        return engine.id;
      },
      get config() {
        return engine.resolved;
      },
      random: this.random,
      get now() {
        return engine.now;
      },
      get load() {
        return engine.load;
      },
      slices: this.sliceStates,
      get newestNeighbourAt() {
        return engine.newestNeighbourAt;
      },
      peers: this.peers,
      offsets: this.offsets,
      neighbours: () => this.swaplinks.neighbours(),
      isNeighbour: (peer) => this.swaplinks.isNeighbour(peer),
      send: (to, message) => {
        this.send(to, message);
      },
      eligibleParent: (q, qId, s, st) => this.eligibleParent(q, qId, s, st),
      avoidLink: (q) => this.avoidLink(q),
      linkPenalty: (q) => this.linkPenalty(q),
      sendForced: (s, target, reason) => {
        this.switching.sendForced(s, target, reason);
      },
      sendSwitchRequest: (s, target, q, parent, kind) => {
        this.switching.sendSwitchRequest(s, target, q, parent, kind);
      },
      counters: this.counters,
      mask: this.mask,
      get effectiveLoad() {
        return engine.effectiveLoad;
      },
      silentChildren: () => this.silentChildren(),
      addLoad: (delta) => {
        this.load += delta;
        if (
          delta < 0 &&
          this.config.protocol.latencyTriggers === 1 &&
          this.load + 1 <= this.latencyRoomLimit()
        )
          this.roomAdvertDue = true;
      },
      emit: (event) => {
        this.emit(event);
      },
      maskOf: (peer) => this.maskOf(peer),
      sliceReceiving: (st) => this.sliceReceiving(st),
      resend: (st, s, child, fromSeq, maxAgeMs) => {
        this.resend(st, s, child, fromSeq, maxAgeMs);
      },
      liveEdgeSeq: () => this.liveEdgeSeq(),
      touchPeer: (peer) => this.peer(peer),
      sendProbe: (s) => {
        this.loops.sendProbe(s);
      },
      isBelow: (peer, s, st) => this.flooding.isBelow(peer, s, st),
      floodSenderBelow: (peer, hops, s, st) => this.flooding.senderBelow(peer, hops, s, st),
      relayedRank: (peer) => this.flooding.relayedRank(peer),
      requestParent: (s, reason, exclude) => {
        this.switching.requestParent(s, reason, exclude);
      },
      floodDecisionAt: (at) => {
        if (at < this.deadlines.at.floodDecision) this.deadlines.at.floodDecision = at;
      },
      leaveLoop: (s) => {
        this.leaveLoop(s);
      },
      distrust: (peer, reason, share) => {
        this.distrust(peer, reason, share);
      },
      isSuspect: (peer) => this.trust.isSuspect(peer, this.now),
    };
    this.switching = new Switching(memberHost);
    this.flooding = new Flooding(memberHost);
    this.loops = new LoopProbes(memberHost);
    this.loadPhase = new LoadPhase(memberHost);
    this.latencyPhase = new LatencyPhase(memberHost);
    if (this.config.role === 'source')
      this.source = new TrueSource({
        id: this.config.id,
        protocol: this.config.protocol,
        dataSlices: this.config.dataSlices,
        random: this.random,
        counters: this.counters,
        now: () => this.now,
        send: (to, message) => {
          this.send(to, message);
        },
        emit: (event) => {
          this.emit(event);
        },
        requestBootstrap: (count) => {
          this.actions.push({ kind: 'requestBootstrap', count });
        },
        swaplinks: this.swaplinks,
      });
    const loads = (): ResolvedConfig => this.resolved;
    this.repair = new Repairer({
      protocol: this.config.protocol,
      id: this.config.id,
      sourceId: this.config.sourceId,
      // Getters: `setLoad` changes both while the engine runs.
      get targetLoad() {
        return loads().targetLoad;
      },
      get maxLoad() {
        return loads().maxLoad;
      },
      dataSlices: this.config.dataSlices,
      random: this.random.fork(0x4e9a),
      slice: (s) => this.slice(s),
      peer: (id) => this.peers.get(id),
      neighbours: () => this.swaplinks.neighbours(),
      maskOf: (peer) => this.maskOf(peer),
      send: (to, message) => {
        this.send(to, message);
      },
      accept: (packet) => {
        this.acceptPacket(packet);
      },
      fetchOrigin: (slice, seqs) => {
        this.actions.push({ kind: 'fetchOrigin', slice, seqs });
      },
      missing: (_slice, seq) => {
        this.tryParity(seq);
      },
    });
  }

  // ───────────────────────────── public API ─────────────────────────────

  get config(): ResolvedConfig {
    return this.resolved;
  }

  get id(): PeerId {
    return this.config.id;
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** Number of (slice, child) streams this node sends: its load in slices. */
  get currentLoad(): number {
    return this.load;
  }

  /**
   * Load as others see it and as admission counts it: tree streams plus the repair upload in
   * slice-equivalents (issue 4: "repair upload is capped and counted in the load"). Shedding
   * children still looks at tree streams only: repair is bursty and already capped.
   */
  private get effectiveLoad(): number {
    return this.load + (this.config.role === 'member' ? this.repair.loadSlices(this.now) : 0);
  }

  /** The earliest time this engine wants a `timer` input; Infinity when it needs none. */
  nextDeadline(): number {
    // Without allocating: hosts ask after every input (the simulator millions of times a run).
    return this.stopped ? Infinity : this.refreshedDeadlines().soonestMs();
  }

  /** `nextDeadline` and why it is due (which timer of deadlines.ts); for traces and debugging. */
  nextDeadlineWithReason(): Deadline {
    return this.stopped ? { atMs: Infinity, reason: null } : this.refreshedDeadlines().soonest();
  }

  /**
   * The table with the deadlines others keep themselves: the repairer's (it moves with every
   * packet), and the true source's root check (every assignment moves it).
   */
  private refreshedDeadlines(): DeadlineTable {
    this.deadlines.at.repair = this.repair.nextDeadline();
    if (this.source !== null) this.deadlines.at.failureCheck = this.source.rootCheckAt;
    return this.deadlines;
  }

  /** Whether a graceful quit is under way (its linger has not ended). */
  private get quitting(): boolean {
    return this.deadlines.at.quitLingerEnd !== Infinity;
  }

  handle(now: number, input: Input): Action[] {
    if (this.stopped) return [];
    if (now < this.now) throw new RangeError(`time went backwards: ${now} < ${this.now}`);
    this.now = now;
    this.actions = [];
    switch (input.kind) {
      case 'start':
        this.start();
        break;
      case 'installLinks':
        if (!this.started) {
          this.linksInstalled = true;
          this.swaplinks.install(
            input.out.filter((p) => p !== this.id),
            input.in.filter((p) => p !== this.id),
          );
        }
        break;
      case 'liveSequence':
        if (Number.isInteger(input.seq) && input.seq >= 0 && input.seq < U32)
          this.liveSeqHint = { seq: input.seq, at: now };
        break;
      case 'bootstrap':
        this.swaplinks.setBootstrap(input.peers);
        if (this.config.role === 'member') this.swaplinks.maintain(now);
        else this.source?.onBootstrap(input.peers);
        break;
      case 'message':
        this.onMessage(input.from, input.message);
        break;
      case 'timer':
        break;
      case 'publish': {
        if (this.source === null) throw new Error('only the true source publishes');
        if (input.packet !== undefined) this.source.skipTo(input.packet);
        this.source.publish(input.payload);
        break;
      }
      case 'quit':
        this.quit(input.graceful);
        break;
      case 'linkRoute':
        if (this.config.role === 'member') this.setLinkRoute(input.peer, input.relayed);
        break;
      case 'peerUnreachable':
        this.relayedLinks.delete(input.peer);
        if (this.source !== null) this.source.peerUnreachable(input.peer);
        else if (this.peers.has(input.peer)) this.peerFailed(input.peer, 'failed');
        break;
      case 'playout':
        if (this.config.role === 'member')
          this.repair.setPlayout(now, {
            zeroAtMs: input.zeroAtMs,
            packetIntervalMs: input.packetIntervalMs,
            fromMs: input.fromMs,
            ...(input.originRttMs !== undefined ? { originRttMs: input.originRttMs } : {}),
          });
        break;
      case 'deadline':
        if (this.config.role === 'member')
          this.repair.setDeadline(input.firstPacket, input.packets, input.atMs);
        break;
      case 'originPacket':
        if (
          this.config.role === 'member' &&
          Number.isInteger(input.slice) &&
          input.slice >= 0 &&
          input.slice < this.config.dataSlices &&
          Number.isInteger(input.seq) &&
          input.seq >= 0
        )
          this.repair.onOriginPacket(now, input.slice, input.seq, input.payload);
        break;
      case 'transportBacklog':
        this.repair.setBacklog(input.peer, input.bytes);
        break;
      case 'setLoad':
        this.setLoad(input.targetLoadSlices, input.maxLoadSlices);
        break;
      case 'releaseChildren':
        if (this.config.role === 'member' && this.started && !this.quitting) this.releaseChildren();
        break;
      case 'measuredLoss':
        this.source?.measureLoss(input.fraction);
        break;
    }
    this.runTimers();
    return this.actions;
  }

  /** Parent of each slice (null if none), for stats and tests. */
  parents(): (PeerId | null)[] {
    return this.sliceStates.map((st) => st.parent);
  }

  /** Whether this node takes slice `s` from `peer` now (its parent, or the old one during a hand-off). */
  takesSliceFrom(s: number, peer: PeerId): boolean {
    const st = this.sliceStates[s];
    return st !== undefined && (st.parent === peer || st.oldParent === peer);
  }

  /** Active children of each slice. */
  children(): PeerId[][] {
    return this.sliceStates.map((st) =>
      [...st.children].filter(([, e]) => e.untilSeq === Infinity).map(([p]) => p),
    );
  }

  neighbours(): PeerId[] {
    return [...this.swaplinks.neighbours()];
  }

  /**
   * The peers we need a link to: neighbours and tree relations on any slice (parent, old parent,
   * child, pending target; the true source while we root a slice); for the true source, its slice
   * sources, spares and roots being moved. A host may close the others.
   */
  relations(): Set<PeerId> {
    const result = this.treePeers();
    for (const peerId of this.swaplinks.neighbours()) result.add(peerId);
    this.source?.addRelations(result);
    return result;
  }

  /** Whether `peer` is a Swaplinks neighbour (without copying the list, as `neighbours()` does). */
  isNeighbour(peer: PeerId): boolean {
    return this.swaplinks.isNeighbour(peer);
  }

  outLinks(): ReadonlyMap<PeerId, number> {
    return this.swaplinks.out;
  }

  inLinks(): ReadonlyMap<PeerId, number> {
    return this.swaplinks.in;
  }

  /** Slices this node is the slice source of. */
  sliceSourceOf(): number[] {
    const out: number[] = [];
    this.sliceStates.forEach((st, s) => {
      if (st.isSliceSource) out.push(s);
    });
    return out;
  }

  /** True source only: the slice source of each slice (all null for a member). */
  currentSliceSources(): (PeerId | null)[] {
    return this.source?.currentSliceSources() ?? this.sliceStates.map(() => null);
  }

  /** Stream-wide number of the next packet `publish` deals (the true source's; 0 for members). */
  get packetsPublished(): number {
    return this.source?.packetsPublished ?? 0;
  }

  /** True source: whether the parity slice carries real parity now (false for members). */
  get parityActive(): boolean {
    return this.source?.parityActive ?? false;
  }

  /** True source: parity packets sent with a real payload, and empty ones (parity off); zeros for members. */
  get parityCounters(): Readonly<{ active: number; idle: number }> {
    return this.source?.parityCounters ?? NO_PARITY_SENT;
  }

  /** Sequence number the next published packet of `slice` will carry (the true source's; 0 for members). */
  nextSequence(slice: number): number {
    return this.source?.nextSequence(slice) ?? 0;
  }

  /** Whether a packet arrived on `slice` within the receiving timeout. */
  isReceiving(slice: number): boolean {
    const st = this.sliceStates[slice];
    return st !== undefined && this.sliceReceiving(st);
  }

  swaplinksCounters(): Readonly<Swaplinks['counters']> {
    return this.swaplinks.counters;
  }

  // ───────────────────────────── load changes ─────────────────────────────

  /**
   * New TL and ML from the host (its measured uplink). LLT and ULT follow by the same rules as at
   * construction. The Swaplinks degree does not: it was set from the TL declared at join, and
   * changing it would drop or add links (repair walks for our neighbours, swaps along them) on every
   * re-measurement, while the load phase needs no new links to move children. So a member whose
   * uplink turned out smaller keeps its neighbours, which only gives its own slices more choice of
   * parents.
   *
   * Nothing is dropped: a load above the new TL is moved away by the load phase (our next adverts
   * carry the thresholds, sent at once so children need not wait a round), requests above the new
   * ML are refused, and above ML several children are moved per round (parentLoadDecision).
   */
  private setLoad(targetLoadSlices: number, maxLoadSlices: number | undefined): void {
    if (this.config.role === 'source')
      throw new ConfigError('the true source forwards each slice once (M slices): its load is fixed');
    const loads = resolveLoadConfig(targetLoadSlices, maxLoadSlices, this.config.protocol);
    const old = this.resolved;
    if (
      loads.targetLoad === old.targetLoad &&
      loads.maxLoad === old.maxLoad &&
      loads.lowerLatencyThreshold === old.lowerLatencyThreshold &&
      loads.upperLatencyThreshold === old.upperLatencyThreshold
    )
      return;
    this.resolved = { ...old, ...loads };
    if (!this.started || this.quitting) return;
    if (loads.maxLoad === 0) {
      // Receive-only: a root with no upload would starve its whole tree. Hand each slice back to the
      // true source, which roots it elsewhere at once (the declinedRoots path); our subtree stays
      // below us while we rejoin the re-flooded tree, and the load phase then moves it away.
      for (let s = 0; s < this.sliceStates.length; s++) if (this.slice(s).isSliceSource) this.handBackRoot(s);
    }
    this.sendAdverts();
  }

  /** Input 'releaseChildren': every child leaves us now, the active ones told so. */
  private releaseChildren(): void {
    for (let s = 0; s < this.sliceStates.length; s++) {
      const st = this.slice(s);
      for (const [child, entry] of [...st.children]) {
        if (entry.untilSeq === Infinity)
          this.send(child, { type: MessageType.TreeLeave, slice: s, role: TreeRole.Parent });
        this.switching.removeChild(s, child);
      }
    }
    // Our load is in the next adverts anyway; now, so that nobody picks us by the old one.
    this.sendAdverts();
  }

  /** Stop rooting slice `s`: tell the true source (a decline of our epoch) and find a parent. */
  private handBackRoot(s: number): void {
    const st = this.slice(s);
    this.send(this.config.sourceId, {
      type: MessageType.SliceSourceAssign,
      slice: s,
      epoch: st.epoch,
      assigned: false,
    });
    this.leaveRoot(s, null);
    this.emit({ type: 'sliceSource', slice: s, epoch: st.epoch, assigned: false });
  }

  /**
   * We root slice `s` no more (handed back, unassigned, or moved to `successor`): find a parent for
   * it, keeping our subtree. Asked as a planned hand-off (our parent, the true source, leaves us in
   * order): the parent we find resends everything it holds from our next packet, not only the last
   * hand-off lead, so a subtree that waited for us to find a place in the re-flooded tree (seconds:
   * its members only qualify once their adverts show the new root's filters) loses nothing it still
   * holds. After a move that parent is the successor: every other member is in our subtree or in its.
   */
  private leaveRoot(s: number, successor: PeerId | null): void {
    const st = this.slice(s);
    st.stopRooting();
    st.lostReason = ForcedReason.ParentQuit;
    this.emit({
      type: 'parentChanged',
      slice: s,
      parent: null,
      previous: this.config.sourceId,
      switchKind: 'lost',
    });
    if (successor !== null) this.switching.sendForced(s, successor, ForcedReason.ParentQuit);
    else this.switching.requestParent(s, ForcedReason.ParentQuit, [this.config.sourceId]);
  }

  // ───────────────────────────── plumbing ─────────────────────────────

  private send(to: PeerId, message: Message): void {
    this.actions.push({ kind: 'send', to, message });
  }

  private emit(event: EngineEvent): void {
    this.actions.push({ kind: 'event', event });
  }

  private slice(s: number): SliceState {
    return this.sliceStates[s] as SliceState;
  }

  private peer(id: PeerId): PeerState {
    let p = this.peers.get(id);
    if (p === undefined) {
      p = new PeerState(this.now, this.config.protocol.slices);
      const earlier = this.strangerViolations.get(id);
      if (earlier !== undefined) {
        p.violations = earlier;
        this.strangerViolations.delete(id);
      }
      p.relayed = this.relayedLinks.has(id);
      this.peers.set(id, p);
      // Every other peer was last heard no later than now, so only a first peer moves the check.
      if (this.deadlines.at.failureCheck === Infinity && this.source === null)
        this.deadlines.at.failureCheck = this.now + this.config.protocol.failureTimeoutMs + TIMEOUT_PAST_MS;
    }
    return p;
  }

  /** The host learned how its link to `peer` is routed (relayed: through a TURN server). */
  private setLinkRoute(peer: PeerId, relayed: boolean): void {
    if (!Number.isInteger(peer) || peer === this.id || this.banned.has(peer)) return;
    if (relayed) this.relayedLinks.add(peer);
    else this.relayedLinks.delete(peer);
    const p = this.peers.get(peer);
    if (p !== undefined) p.relayed = relayed;
  }

  /** Whether tree edges should avoid `q`'s link: relayed, and the preference is on. */
  private avoidLink(q: PeerState): boolean {
    return q.relayed && this.config.protocol.relayedLinkPenaltyMs > 0;
  }

  /** What a relayed link counts as in arrival-time comparisons (0 for a direct one). */
  private linkPenalty(q: PeerState): number {
    return q.relayed ? this.config.protocol.relayedLinkPenaltyMs : 0;
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    this.startedAt = this.now;
    // Random phase so thousands of nodes do not all decide in the same millisecond.
    this.deadlines.at.decisionRound = this.now + this.random.int(this.config.protocol.decisionIntervalMs);
    if (this.config.role === 'source') {
      this.actions.push({ kind: 'requestBootstrap', count: this.config.protocol.slices + 2 });
      return;
    }
    if (!this.linksInstalled)
      this.actions.push({ kind: 'requestBootstrap', count: this.config.protocol.bootstrapPeers });
  }

  private runTimers(): void {
    if (this.stopped) return;
    if (this.now >= this.deadlines.at.quitLingerEnd) {
      // End of a graceful quit: release the tree edges explicitly, so nobody waits for a timeout.
      for (let s = 0; s < this.sliceStates.length; s++) {
        const st = this.slice(s);
        if (st.parent !== null && !st.isSliceSource)
          this.send(st.parent, { type: MessageType.TreeLeave, slice: s, role: TreeRole.Child });
        for (const [child, entry] of st.children) {
          if (entry.untilSeq === Infinity)
            this.send(child, { type: MessageType.TreeLeave, slice: s, role: TreeRole.Parent });
        }
      }
      this.stopped = true;
      this.emit({ type: 'stopped' });
      return;
    }
    if (this.deadlines.at.floodDecision <= this.now) {
      this.deadlines.at.floodDecision = Infinity;
      for (let s = 0; s < this.sliceStates.length; s++) {
        const st = this.slice(s);
        if (st.floodDecideAt <= this.now) this.flooding.decide(s);
        else if (st.floodDecideAt < this.deadlines.at.floodDecision)
          this.deadlines.at.floodDecision = st.floodDecideAt;
      }
    }
    if (this.config.role === 'member' && !this.quitting) this.repair.tick(this.now);
    if (this.now >= this.deadlines.at.rootHeartbeat) this.beatAsRoot();
    if (this.source !== null) {
      if (this.now >= this.source.rootCheckAt) this.source.checkRoots();
    } else if (this.now >= this.deadlines.at.failureCheck) this.checkFailures();
    if (this.now >= this.deadlines.at.decisionRound) {
      const interval = this.config.protocol.decisionIntervalMs;
      this.deadlines.at.decisionRound += interval;
      if (this.deadlines.at.decisionRound <= this.now) this.deadlines.at.decisionRound = this.now + interval;
      if (this.source !== null) this.source.tick();
      else this.tick();
    }
    if (this.roomAdvertDue || this.latencyRunDue) this.runLatencyTriggers();
  }

  /** The most load a latency switch may bring a member with these thresholds to (latencyRoom, over a direct link). */
  private latencyRoomLimit(q: { targetLoad: number; upperLatencyThreshold: number } = this.config): number {
    return latencyRoom(q, this.config.protocol.latencyPhaseEnds === 1);
  }

  /** latencyTriggers: advert new room at once, and take a neighbour's new room at once. */
  private runLatencyTriggers(): void {
    const advert = this.roomAdvertDue;
    const run = this.latencyRunDue;
    this.roomAdvertDue = false;
    this.latencyRunDue = false;
    if (this.config.role !== 'member' || !this.started || this.quitting) return;
    if (advert && this.now - this.lastRoomAdvertAt >= ROOM_ADVERT_MIN_GAP_MS) {
      this.lastRoomAdvertAt = this.now;
      this.sendAdverts();
    }
    if (run) this.latencyPhase.run();
  }

  /** `weight`: how many violations this one counts for (a distrust or a replay counts for more, trust.ts). */
  private violation(peer: PeerId, reason: string, weight = 1): void {
    const p = this.peers.get(peer);
    this.emit({ type: 'protocolViolation', peer, reason });
    let violations: number;
    if (p !== undefined) violations = p.violations += weight;
    else {
      // Not a neighbour, yet it sent us something it should not have: counted all the same.
      violations = (this.strangerViolations.get(peer) ?? 0) + weight;
      this.rememberStrangerViolations(peer, violations);
    }
    if (violations >= this.config.protocol.maxViolationsPerPeer) {
      const rooted = this.slicesRootedBy(peer);
      this.strangerViolations.delete(peer);
      this.banned.add(peer);
      this.relayedLinks.delete(peer);
      this.peerFailed(peer, 'cutOff');
      this.actions.push({ kind: 'disconnect', peer });
      for (const s of rooted) this.reportStarvedSlice(s);
    }
  }

  /**
   * A parent withheld what it owed us: it is left on every slice, not taken as a parent again for
   * SUSPECT_MS, and the violation counts for `share` of the budget (SILENT_PARENT_SHARE,
   * FAILED_AUDIT_SHARE).
   */
  private distrust(peer: PeerId, reason: string, share: number): void {
    this.counters.parentsDistrusted++;
    this.trust.suspect(peer, this.now);
    const rooted = this.slicesRootedBy(peer);
    this.violation(peer, reason, Math.ceil(this.config.protocol.maxViolationsPerPeer * share));
    // A root we leave leaves us nobody to ask on its slice: the true source is told at once.
    for (const s of rooted) this.reportStarvedSlice(s);
    // Leave it on every slice it feeds us, not only the one that showed it (a parent forwarding half
    // of each of three slices went on for 15–40 s more while the other slices' audits caught up).
    for (let s = 0; s < this.sliceStates.length; s++) {
      const st = this.slice(s);
      // A request to it still in flight is dropped too: its acceptance would make it our parent
      // again (it is answered with a TreeLeave, as any late acceptance).
      if (st.pending?.target === peer) {
        st.pending = null;
        if (st.parent === null)
          this.switching.requestParent(s, st.lostReason ?? ForcedReason.ParentLost, [peer]);
      }
      if (st.parent === peer && !st.isSliceSource) this.loseParent(s, ForcedReason.ParentLost, peer);
    }
  }

  // ───────────────────────────── messages ─────────────────────────────

  private onMessage(from: PeerId, message: Message): void {
    // `size` first: most engines ban nobody, and an empty set's table is one more cache miss per message.
    if ((this.banned.size !== 0 && this.banned.has(from)) || from === this.id) return;
    if (!this.started) return;
    const request = REQUEST_KIND[message.type];
    // A packet repair request costs what it asks for: up to 32 packets of our upload.
    const cost =
      message.type === MessageType.PacketRepairRequest ? Math.max(1, bitCount32(message.wanted)) : 1;
    if (request !== undefined && !this.trust.takeRequestToken(from, request, this.now, cost)) {
      this.counters.requestsThrottled++;
      this.violation(from, `${request} requests beyond the rate`);
      return;
    }
    const known = this.peers.get(from);
    if (known !== undefined) known.lastHeardAt = this.now;
    // A peer we found silent that talks again (a stalled tab, a link that recovered) is alive: the
    // paths through it are no longer dead. `size` first, as for `banned`.
    if (this.failedPaths.size !== 0) this.failedPaths.delete(from);
    if (this.source !== null) {
      this.source.onMessage(from, message);
      return;
    }
    if (this.quitting) {
      this.onMessageWhileQuitting(from, message);
      return;
    }
    if (CARRIES_SLICE[message.type]) {
      const slice = (message as { readonly slice: number }).slice;
      if (slice >= this.config.protocol.slices) {
        this.violation(from, `slice ${slice} out of range`);
        return;
      }
    }
    switch (message.type) {
      case MessageType.Data:
        this.onData(from, message);
        return;
      case MessageType.Advert:
        this.onAdvert(from, message);
        return;
      case MessageType.Heartbeat:
        return; // liveness: lastHeardAt is set above for every message
      case MessageType.Probe:
        this.loops.onProbe(from, message);
        return;
      case MessageType.LoadReport:
        this.loadPhase.onLoadReport(from, message);
        return;
      case MessageType.Instruction:
        this.loadPhase.onInstruction(from, message);
        return;
      case MessageType.SwitchRequest:
        this.switching.onSwitchRequest(from, message);
        return;
      case MessageType.SwitchReply:
        this.switching.onSwitchReply(from, message);
        return;
      case MessageType.SwitchComplete:
        this.switching.onSwitchComplete(from, message);
        return;
      case MessageType.LatencyPermissionRequest:
        this.latencyPhase.onPermissionRequest(from, message);
        return;
      case MessageType.LatencyPermissionReply:
        this.latencyPhase.onPermissionReply(from, message);
        return;
      case MessageType.Flood:
        this.flooding.onFlood(from, message);
        return;
      case MessageType.ForcedParentRequest:
        this.switching.onForcedParentRequest(from, message);
        return;
      case MessageType.Quit:
        this.onQuit(from);
        return;
      case MessageType.TreeLeave:
        this.onTreeLeave(from, message);
        return;
      case MessageType.Walk:
        this.swaplinks.onWalk(message);
        return;
      case MessageType.Link:
        this.swaplinks.onLink(from, message);
        return;
      case MessageType.Swap:
        this.swaplinks.onSwap(from, message);
        return;
      case MessageType.SampleResult:
        this.violation(from, 'members do not sample');
        return;
      case MessageType.SliceSourceAssign:
        this.onSliceSourceAssign(from, message);
        return;
      case MessageType.RepairRequest:
      case MessageType.RepairData:
      case MessageType.RepairNak:
        // Segment repair between neighbours is the host's business (the host holds the segments).
        return;
      case MessageType.PacketRepairRequest:
        // Only neighbours and tree relations may ask: a stranger cannot spend our upload.
        if (this.swaplinks.isNeighbour(from) || this.peers.has(from))
          this.repair.onRepairRequest(this.now, from, message);
        return;
      case MessageType.PacketRepairData:
        this.repair.onRepairData(this.now, from, message);
        return;
      case MessageType.PacketRepairNak:
        this.repair.onRepairNak(this.now, from, message);
        return;
    }
  }

  /** A graceful leaver only keeps its tree edges alive until they are handed off. */
  private onMessageWhileQuitting(from: PeerId, message: Message): void {
    switch (message.type) {
      case MessageType.Data:
        if (message.slice < this.config.protocol.slices) this.onData(from, message);
        return;
      case MessageType.SwitchComplete:
        if (message.slice < this.config.protocol.slices) this.switching.onSwitchComplete(from, message);
        return;
      case MessageType.TreeLeave:
        if (message.slice < this.config.protocol.slices && message.role === TreeRole.Child)
          this.switching.removeChild(message.slice, from);
        return;
      case MessageType.SwitchRequest:
      case MessageType.ForcedParentRequest:
        if (message.slice < this.config.protocol.slices)
          this.switching.reject(
            from,
            message.slice,
            message.type === MessageType.SwitchRequest ? message.handoffSeq : message.fromSeq,
            RejectReason.Quitting,
          );
        return;
      default:
        return;
    }
  }

  // ───────────────────────────── data plane ─────────────────────────────

  private onData(from: PeerId, msg: DataMessage): void {
    const s = msg.slice;
    const st = this.slice(s);
    const fromParent = from === st.parent && msg.seq >= st.parentFromSeq;
    const fromOldParent = from === st.oldParent && msg.seq < st.oldParentUntilSeq;
    if (!fromParent && !fromOldParent) {
      this.counters.strayPackets++;
      // Someone still sends us a slice we no longer take from them: tell them, at most once a second
      // (not the peer we are asking to be our parent: its old packets may cross our request).
      if (
        from !== st.parent &&
        from !== st.oldParent &&
        from !== st.pending?.target &&
        from !== this.config.sourceId &&
        this.now - st.lastStrayNoticeAt >= STRAY_NOTICE_INTERVAL_MS
      ) {
        st.lastStrayNoticeAt = this.now;
        this.send(from, { type: MessageType.TreeLeave, slice: s, role: TreeRole.Child });
      }
      return;
    }
    if (from !== this.config.sourceId && bloomContains(msg.bloom, this.mask)) {
      // Our own mask came back: the packet went round a loop (thesis §4.2, loop avoidance and detection), or a false positive, or a
      // parent lying about the path (a Bloom filter with our mask in it costs us a parent change).
      this.counters.loopsDetected++;
      this.emit({ type: 'loopDetected', slice: s, by: 'data' });
      const parent = st.parent;
      this.leaveLoop(s);
      // A liar's Bloom filter cannot be told from a loop a switch closed (honest runs have a few),
      // so it is no violation: the parent is only not taken again for a while (trust.ts).
      if (from === parent) {
        this.counters.parentsDistrusted++;
        this.trust.suspect(from, this.now);
      }
      return;
    }
    // The true source is the stream: its packets are the live edge, which a root's other slices
    // (reaching it down other trees) may lag by seconds.
    const windowEnd =
      from === this.config.sourceId ||
      (msg.seq <= this.seqWindowFloor && st.highestSeq <= this.seqWindowFloor)
        ? Infinity
        : this.seqWindowEnd();
    if (from === this.config.sourceId && st.isSliceSource && msg.seq < st.rootFromSeq)
      st.rootFromSeq = msg.seq;
    if (st.highestSeq > windowEnd) this.forgetPoisonedSlice(s, st);
    if (msg.seq > windowEnd) {
      this.counters.forgedSequences++;
      this.violation(from, `data sequence ${msg.seq} on slice ${s} beyond the window`);
      return;
    }
    if (fromParent) {
      st.filter = msg.bloom;
      st.hops = msg.hops;
    }
    st.lastDataAt = this.now;
    if (s < this.config.dataSlices) this.repair.onTreePacket(this.now, s, msg.seq);
    // A sender that sends a packet again, or one older than the ring, long after we took it as our
    // parent is replaying: a parent taking us back resends what it holds at once, and never again.
    // Only what it sent us in this tenure counts: a resend repeats what we got before it.
    const replayJudged = this.now - st.parentSince > REPLAY_GRACE_MS;
    if (st.highestSeq >= 0 && msg.seq <= st.highestSeq - st.ringSize) {
      this.counters.latePackets++;
      if (replayJudged) this.replayed(from, s, msg.seq);
      return;
    }
    if (!st.remember(msg.seq, msg.payload, this.now)) {
      this.counters.duplicatePackets++;
      if (replayJudged && st.senderOf(msg.seq) === from && st.arrivedAt(msg.seq) >= st.parentSince) {
        this.replayed(from, s, msg.seq);
        return;
      }
      st.markTreeCopy(msg.seq, from, fromParent, false);
      if (s < this.config.dataSlices) this.repair.onTreeDuplicate(s, msg.seq);
      return;
    }
    st.markTreeCopy(msg.seq, from, fromParent, true);
    if (msg.seq > st.highestSeq) {
      if (st.highestSeq >= 0 && st.lastHighestAt > -Infinity) {
        const interval = (this.now - st.lastHighestAt) / (msg.seq - st.highestSeq);
        // A longer gap than the estimate is taken at once, a shorter one slowly: short ones are bursts
        // (a new parent resends what it holds at once, then the next live packet comes a fraction of
        // an interval later), and an estimate too short puts hand-offs too far ahead (a 105 ms
        // estimate in a stream of one packet per slice every 2 s made a 20-packet lead: the old
        // parent stopped draining after requestTimeoutMs, and 17 packets never came). Too long an
        // estimate only shortens the lead: a hand-off point already passed is resent by the new parent.
        st.seqIntervalMs =
          Number.isNaN(st.seqIntervalMs) || interval > st.seqIntervalMs
            ? interval
            : st.seqIntervalMs + SEQ_INTERVAL_SHRINK_WEIGHT * (interval - st.seqIntervalMs);
      }
      // Our first packet is no baseline: it came with our first parent's answer, however old it was.
      st.lastHighestAt = st.highestSeq < 0 ? -Infinity : this.now;
      st.highestSeq = msg.seq;
      st.highestSeqAt = this.now;
      st.highestSeqFrom = from;
    }
    if (fromOldParent && msg.seq === st.oldParentUntilSeq - 1) {
      // The old parent's last packet before the hand-off (one link keeps its order): its share is done.
      st.oldParent = null;
    }
    this.offsets.record(s, msg.seq, this.now);
    if (s < this.config.dataSlices) {
      this.counters.packetsDelivered++;
      this.actions.push({
        kind: 'deliver',
        slice: s,
        seq: msg.seq,
        hops: msg.hops,
        from,
        payload: msg.payload,
        via: 'tree',
        missingSinceMs: null,
      });
    }
    this.forward(st, s, msg.seq, msg.bloom, msg.hops, msg.payload);
    this.tryParity(msg.seq);
  }

  /**
   * The highest data sequence we can justify now (SEQ_WINDOW_SLACK): where our slices have got to,
   * each plus what the time since it last advanced allows at twice its measured rate (at
   * MIN_SEQ_INTERVAL_MS while unmeasured). With three slices or more, the third highest of those:
   * a forged sequence that was a slice's first packet (nothing to judge it by then) must not raise
   * the window for the others, yet honest slices lie seconds apart when some trees are slow or
   * just rebuilt (the median was 5 packets behind the front, and honest parents ahead of it were
   * judged forgers by the hundred). Before our first packet, a trusted `liveSequence`, else Infinity.
   */
  private seqWindowEnd(): number {
    // Every slice carries the same rate: the fastest measured one is the closest to it (one slice's
    // estimate jumps to the whole gap after a stall, and its extrapolation then crawls; with most
    // slices stalled by a congested uplink, the median fell behind the stream and honest packets
    // were judged forged).
    // With a playout clock the stream's own packet interval is known, and taken over any estimate:
    // under a congested uplink every slice stalled now and then, each estimate jumped to its gap,
    // and the window fell behind the stream (honest packets by the thousand judged forged).
    let fastestMs = this.repair.playoutPacketIntervalMs() ?? Infinity;
    if (fastestMs === Infinity)
      for (const st of this.sliceStates)
        if (st.highestSeq >= 0 && st.seqIntervalMs < fastestMs) fastestMs = st.seqIntervalMs;
    const intervalMs =
      fastestMs === Infinity ? MIN_SEQ_INTERVAL_MS : Math.max(MIN_SEQ_INTERVAL_MS, fastestMs / 2);
    const ends = this.windowScratch;
    const seqs = this.seqScratch;
    let n = 0;
    for (const st of this.sliceStates) {
      if (st.highestSeq < 0) continue;
      insertSorted(seqs, n, st.highestSeq);
      insertSorted(ends, n, st.highestSeq + Math.ceil((this.now - st.highestSeqAt) / intervalMs));
      n++;
    }
    // The trusted word on the live edge, carried forward at the stream's own rate once a playout
    // clock gives it (else at MIN_SEQ_INTERVAL_MS): a member whose slices all lag the stream (its
    // parents' uplinks congested) judged an honest parent at the live edge a forger, by the
    // thousand among 1000 members with request flooders about.
    const hint = this.liveSeqHint;
    const playoutIntervalMs = this.repair.playoutPacketIntervalMs();
    const hintEnd =
      hint === null
        ? -Infinity
        : hint.seq + Math.ceil((this.now - hint.at) / (playoutIntervalMs ?? MIN_SEQ_INTERVAL_MS));
    if (n === 0) return hint === null ? Infinity : hintEnd + SEQ_WINDOW_SLACK;
    // With fewer slices the reference is the highest, which a slice's first packet may lower.
    if (n >= WINDOW_REFERENCE_RANK)
      this.seqWindowFloor = (seqs[n - WINDOW_REFERENCE_RANK] ?? -Infinity) + SEQ_WINDOW_SLACK;
    const reference = ends[n >= WINDOW_REFERENCE_RANK ? n - WINDOW_REFERENCE_RANK : n - 1] ?? 0;
    return Math.max(reference, hintEnd) + SEQ_WINDOW_SLACK;
  }

  /**
   * A slice's highest sequence lies beyond the window the other slices justify: the packet that
   * set it was forged (it came first, when there was nothing to judge it by). Forget the slice's
   * sequence and ring, so honest packets are taken again, and count it against its sender.
   */
  private forgetPoisonedSlice(s: number, st: SliceState): void {
    this.counters.poisonedSlices++;
    const from = st.highestSeqFrom;
    st.forgetSequence();
    this.seqWindowFloor = -Infinity;
    this.repair.forgetSlice(s);
    if (from >= 0 && from !== this.config.sourceId)
      this.violation(from, `slice ${s} sequence beyond the window (set before it could be judged)`);
  }

  private replayed(from: PeerId, s: number, seq: number): void {
    this.counters.replayedPackets++;
    this.violation(
      from,
      `replayed sequence ${seq} on slice ${s}`,
      Math.ceil(this.config.protocol.maxViolationsPerPeer * REPLAY_SHARE),
    );
  }

  /**
   * Audit of each parent (trust.ts): every packet from the hand-off on is judged once a later one
   * arrived AUDIT_LAG_MS ago; a parent that missed more than AUDIT_MAX_MISSES of a window of
   * AUDIT_WINDOW_PACKETS is distrusted and left.
   */
  private auditParents(): void {
    for (let s = 0; s < this.sliceStates.length; s++) {
      const st = this.slice(s);
      const parent = st.parent;
      if (parent === null || st.isSliceSource || parent !== st.auditParent || st.highestSeq < 0) continue;
      const oldestHeld = st.highestSeq - st.ringSize + 1;
      // Up to the newest packet that arrived at least AUDIT_LAG_MS ago, and in any case what is about
      // to leave the ring (a fast stream's ring holds less than the lag; a packet no longer held
      // cannot be judged, and is skipped).
      let judgeUpTo = oldestHeld + AUDIT_RING_MARGIN_PACKETS;
      for (let seq = st.highestSeq; seq >= Math.max(st.auditNextSeq, judgeUpTo); seq--) {
        const at = st.arrivedAt(seq); // −Infinity: not held (perhaps withheld), no clock
        if (at > -Infinity && at <= this.now - AUDIT_LAG_MS) {
          judgeUpTo = seq;
          break;
        }
      }
      // Only packets every member repairs: a parent that had not started playing (nor repairing)
      // could not make up for what its own parent withheld.
      const firstRepaired = this.repair.firstSeqRepairedAfter(s, AUDIT_SETTLE_MS);
      if (firstRepaired === Infinity) continue; // not playing yet
      let seq = Math.max(st.auditNextSeq, oldestHeld, firstRepaired);
      for (; seq <= judgeUpTo; seq++) {
        // A sliding window of the last AUDIT_WINDOW_PACKETS judgements: a parent is caught as soon
        // as it has missed too many, not at the end of a fixed window.
        const missed = st.deliveredByParent(seq) ? 0 : 1;
        if (st.auditCount === AUDIT_WINDOW_PACKETS)
          st.auditMisses -= (st.auditHistory >>> (AUDIT_WINDOW_PACKETS - 1)) & 1;
        else st.auditCount++;
        st.auditHistory = ((st.auditHistory << 1) | missed) & AUDIT_WINDOW_MASK;
        st.auditMisses += missed;
        if (st.auditMisses > AUDIT_MAX_MISSES) {
          const misses = st.auditMisses;
          const judged = st.auditCount;
          st.startAudit(parent, seq + 1);
          // Left on every slice (distrust), unless the violation cut it off already.
          this.distrust(
            parent,
            `parent missed ${misses} of the last ${judged} packets on slice ${s}`,
            FAILED_AUDIT_SHARE,
          );
          break;
        }
      }
      if (st.parent === parent) st.auditNextSeq = Math.max(st.auditNextSeq, seq);
    }
  }

  /** Our live edge, as far as our slices show it (for where a new parent's audit starts). */
  private liveEdgeSeq(): number {
    let edge = -1;
    for (const st of this.sliceStates) if (st.highestSeq > edge) edge = st.highestSeq;
    return edge;
  }

  /** With a parity slice: rebuild the one data packet a stripe still lacks, if it lacks only one. */
  private tryParity(seq: number): void {
    const d = this.config.dataSlices;
    if (d === this.config.protocol.slices) return;
    const parity = this.slice(d).payloadOf(seq);
    if (parity === undefined || parity.byteLength === 0) return;
    let missing = -1;
    const stripe: (Uint8Array | undefined)[] = [];
    for (let s = 0; s < d; s++) {
      const p = this.slice(s).payloadOf(seq);
      if (p === undefined) {
        if (missing >= 0) return; // two or more gone: XOR cannot help (repair will)
        missing = s;
      }
      stripe.push(p);
    }
    // Only a packet overdue on its tree is rebuilt: a slower tree's packet is merely late, and
    // rebuilding it early would only make its tree copy a duplicate.
    if (missing < 0 || !this.repair.isMissing(missing, seq)) return;
    let payload: Uint8Array;
    try {
      payload = recoverFromParity(parity, stripe, missing);
    } catch (e) {
      if (!(e instanceof ParityError)) throw e;
      this.repair.counters.parityErrors++;
      return;
    }
    this.repair.onParityRecovered(this.now, missing, seq, payload);
  }

  /**
   * A packet that came around the tree (repair or origin), already remembered in the ring: to the
   * application, and on down our subtree, which is missing it too.
   */
  private acceptPacket(packet: FilledPacket): void {
    const { slice: s, seq, payload, via } = packet;
    const st = this.slice(s);
    this.counters.packetsDelivered++;
    this.actions.push({ kind: 'deliver', ...packet });
    this.forward(st, s, seq, st.filter, st.hops, payload);
    // A packet that came around may complete a stripe with one other still missing.
    if (via !== 'parity') this.tryParity(seq);
  }

  private forward(
    st: SliceState,
    s: number,
    seq: number,
    bloom: Bloom128,
    hops: number,
    payload: Uint8Array,
  ): void {
    if (st.children.size === 0) return;
    let out: DataMessage | null = null;
    for (const [child, entry] of st.children) {
      if (seq < entry.fromSeq) continue;
      if (seq >= entry.untilSeq) {
        // Draining, and past its hand-off: done once we hold the last packet it is owed (we sent
        // it on as it came). Not before: after our own switch to a parent that is ahead, the
        // hand-off packet can come before the ones just below it from our old parent, and those
        // are still this child's (seen: one packet lost two hops down). The round's timeout ends
        // a draining child whose last packet never comes. Our load is unchanged either way.
        if (st.holds(entry.untilSeq - 1)) st.removeChild(child);
        continue;
      }
      out ??= {
        type: MessageType.Data,
        slice: s,
        seq,
        bloom: bloomOr(bloom, this.mask),
        hops: Math.min(MAX_HOPS, hops + 1),
        payload,
      };
      this.send(child, out);
    }
  }

  /** Send a new child what we still hold from `fromSeq` on, so a hand-off or a repair loses nothing. */
  private resend(st: SliceState, s: number, child: PeerId, fromSeq: number, maxAgeMs: number): void {
    if (st.highestSeq < 0) return;
    const oldest = this.now - maxAgeMs;
    const first = Math.max(fromSeq, st.highestSeq - st.ringSize + 1, 0);
    const bloom = bloomOr(st.filter, this.mask);
    const hops = Math.min(MAX_HOPS, st.hops + 1);
    for (let seq = first; seq <= st.highestSeq; seq++) {
      const payload = st.payloadOf(seq);
      if (payload !== undefined && st.arrivedAt(seq) >= oldest)
        this.send(child, { type: MessageType.Data, slice: s, seq, bloom, hops, payload });
    }
  }

  private sliceReceiving(st: SliceState): boolean {
    return (
      (st.parent !== null || st.isSliceSource) &&
      this.now - st.lastDataAt <= this.config.protocol.receivingTimeoutMs
    );
  }

  // ───────────────────────────── advertisements ─────────────────────────────

  private sliceEntry(s: number): AdvertSliceEntry {
    const st = this.slice(s);
    return {
      slice: s,
      receiving: this.sliceReceiving(st),
      isSliceSource: st.isSliceSource,
      hops: st.hops,
      offsetMs: Number.isNaN(st.offsetMs) ? null : Math.round(st.offsetMs),
      pathMs: this.pathEstimate(st, s),
      filter: st.filter,
    };
  }

  /**
   * Our delay from slice `s`'s root as we advertise it (AdvertSliceEntry.pathMs): 0 at the root, else
   * our parent's advertised estimate plus half the round trip to it; null while either is unknown.
   */
  private pathEstimate(st: SliceState, s: number): number | null {
    if (st.isSliceSource) return 0;
    if (st.parent === null) return null;
    const parent = this.peers.get(st.parent);
    if (parent === undefined) return null;
    const via = pathVia(parent, s);
    return via === Infinity ? null : Math.round(via);
  }

  /**
   * Adverts to every neighbour, and to `treePeers` that are none but the true source (the decision
   * round passes its tree relations; an advert sent between rounds reaches them at the next).
   */
  private sendAdverts(treePeers: ReadonlySet<PeerId> = NO_PEERS): void {
    const slices = this.config.protocol.slices;
    const full: AdvertSliceEntry[] = [];
    const delta: AdvertSliceEntry[] = [];
    const step = this.config.protocol.offsetAdvertStepMs;
    for (let s = 0; s < slices; s++) {
      const entry = this.sliceEntry(s);
      full.push(entry);
      const st = this.slice(s);
      const prev = st.advertised;
      const changed =
        prev === null ||
        prev.receiving !== entry.receiving ||
        prev.isSliceSource !== entry.isSliceSource ||
        prev.hops !== entry.hops ||
        !bloomEquals(prev.filter, entry.filter) ||
        movedBy(prev.offsetMs, entry.offsetMs, step) ||
        movedBy(prev.pathMs, entry.pathMs, step);
      if (changed) {
        delta.push(entry);
        st.advertised = { ...entry };
      }
    }
    // Every neighbour gets an advert every round, even an empty delta: it is the 1 s heartbeat.
    for (const peerId of this.swaplinks.neighbours()) this.sendAdvert(peerId, full, delta);
    // So does a tree relation that is no neighbour (the old root of a moved slice and its successor,
    // parent and child): a child's latency and load phases judge its parent by the parent's advert
    // (path estimate, load, thresholds), and the round trip in it needs adverts both ways. With
    // heartbeats only, the old root's path estimate stayed unknown, and so did its whole subtree's,
    // which then never ran the latency phase on that slice: a moved tree grew 15-18 hops deep and
    // its slice came ~1.6 s later than the others for good (issue 16, burst10, 5000 members, seed 2).
    for (const peerId of treePeers) {
      if (peerId === this.config.sourceId || this.swaplinks.isNeighbour(peerId)) continue;
      this.sendAdvert(peerId, full, delta);
      this.peer(peerId).lastHeartbeatSentAt = this.now;
    }
  }

  private sendAdvert(
    peerId: PeerId,
    full: readonly AdvertSliceEntry[],
    delta: readonly AdvertSliceEntry[],
  ): void {
    const p = this.peer(peerId);
    const sendFull =
      p.needsFullAdvert || this.now - p.lastFullAdvertAt >= this.config.protocol.fullAdvertIntervalMs;
    if (sendFull) {
      p.needsFullAdvert = false;
      p.lastFullAdvertAt = this.now;
    }
    this.send(peerId, this.advert(p, sendFull, sendFull ? full : delta));
  }

  private advert(p: PeerState, full: boolean, entries: readonly AdvertSliceEntry[]): AdvertMessage {
    const hold =
      p.echoSentAtMs === null ? 0 : Math.min(0xfffe, Math.max(0, Math.round(this.now - p.echoReceivedAt)));
    return {
      type: MessageType.Advert,
      full,
      load: Math.min(MAX_LOAD_FIELD, this.effectiveLoad),
      targetLoad: this.config.targetLoad,
      lowerLatencyThreshold: this.config.lowerLatencyThreshold,
      upperLatencyThreshold: this.config.upperLatencyThreshold,
      maxLoad: this.config.maxLoad,
      sentAtMs: Math.floor(this.now) % U32,
      echoSentAtMs: p.echoSentAtMs,
      echoHoldMs: hold,
      entries,
    };
  }

  /** A new link: introduce ourselves at once with a full advert, so a joiner can pick parents quickly. */
  private sendFullAdvertTo(peerId: PeerId): void {
    const p = this.peer(peerId);
    const entries: AdvertSliceEntry[] = [];
    for (let s = 0; s < this.config.protocol.slices; s++) entries.push(this.sliceEntry(s));
    p.needsFullAdvert = false;
    p.lastFullAdvertAt = this.now;
    this.send(peerId, this.advert(p, true, entries));
  }

  /** Whether `peer` is a tree relation of ours on any slice (as treePeers, without building the set). */
  private isTreePeer(peer: PeerId): boolean {
    for (const st of this.sliceStates)
      if (st.parent === peer || st.oldParent === peer || st.pending?.target === peer || st.children.has(peer))
        return true;
    return false;
  }

  private onAdvert(from: PeerId, msg: AdvertMessage): void {
    // Neighbours advertise, and so do tree relations that are none (sendAdverts); anyone else's
    // advert would only be state kept about a stranger.
    if (!this.swaplinks.isNeighbour(from) && !this.isTreePeer(from)) return;
    const p = this.peer(from);
    const slices = this.config.protocol.slices;
    // Which slices the advert speaks for (a bit each while they fit in a word): a full advert that
    // names every slice overwrites all of them, and clearing them first would be wasted work.
    let named = 0;
    for (const entry of msg.entries) {
      if (entry.slice >= slices) {
        this.violation(from, `advert for slice ${entry.slice}`);
        return;
      }
      named |= 1 << entry.slice;
    }
    if (
      msg.targetLoad < msg.lowerLatencyThreshold ||
      msg.upperLatencyThreshold < msg.targetLoad ||
      msg.maxLoad < msg.upperLatencyThreshold
    ) {
      this.violation(from, 'advert thresholds out of order');
      return;
    }
    const wasKnown = p.hasAdvert;
    if (!msg.full && !wasKnown) return; // a delta before any full advert cannot be applied
    if (this.config.protocol.latencyTriggers === 1 && msg.load + 1 <= this.latencyRoomLimit(msg)) {
      // Room a latency switch of ours could take, new since the last advert.
      if (!wasKnown || p.load + 1 > this.latencyRoomLimit(p)) this.latencyRunDue = true;
    }
    p.hasAdvert = true;
    p.load = msg.load;
    p.targetLoad = msg.targetLoad;
    p.lowerLatencyThreshold = msg.lowerLatencyThreshold;
    p.upperLatencyThreshold = msg.upperLatencyThreshold;
    p.maxLoad = msg.maxLoad;
    if (msg.full && (slices > 31 || named !== 2 ** slices - 1)) p.resetSlices();
    let fromMask: Bloom128 | null = null;
    for (const entry of msg.entries) {
      p.sliceFlags[entry.slice] =
        (entry.receiving ? SLICE_FLAG_RECEIVING : 0) | (entry.isSliceSource ? SLICE_FLAG_ROOT : 0);
      p.sliceHops[entry.slice] = entry.hops;
      p.sliceOffsets[entry.slice] = entry.offsetMs ?? Number.NaN;
      p.slicePaths[entry.slice] = entry.pathMs ?? Number.NaN;
      p.setFilter(entry.slice, entry.filter);
      // Our parent's path is ours: a switch above us shows in our filter before the first packet
      // over the new path does (adoptParent). The next packet sets it exactly again.
      const st = this.slice(entry.slice);
      if (st.parent === from) st.takeInPath(entry.filter, (fromMask ??= this.maskOf(from)));
    }
    if (msg.echoSentAtMs !== null) {
      const rtt = (((Math.floor(this.now) % U32) - msg.echoSentAtMs + U32) % U32) - msg.echoHoldMs;
      if (rtt >= 0 && rtt < MAX_PLAUSIBLE_RTT_MS)
        p.rttMs = Number.isNaN(p.rttMs) ? rtt : p.rttMs + RTT_SMOOTHING * (rtt - p.rttMs);
    }
    p.echoSentAtMs = msg.sentAtMs;
    p.echoReceivedAt = this.now;
    if (!wasKnown) this.switching.acquireMissingParents();
  }

  // ───────────────────────────── neighbours and liveness ─────────────────────────────

  private onNeighbourAdded(peerId: PeerId): void {
    this.newestNeighbourAt = this.now;
    const p = this.peer(peerId);
    p.needsFullAdvert = true;
    this.emit({ type: 'neighbourUp', peer: peerId });
    if (this.started) this.sendFullAdvertTo(peerId);
  }

  private onNeighbourRemoved(peerId: PeerId): void {
    const p = this.peers.get(peerId);
    if (p !== undefined) p.hasAdvert = false;
    if (this.failingPeer === peerId) return; // peerFailed reports it and repairs the trees itself
    this.emit({ type: 'neighbourDown', peer: peerId, reason: 'unlinked' });
    // A Swaplinks change took away a parent: a forced switch with a normal hand-off (thesis §4.2, initial tree construction and forced parent selection).
    const reason = p?.quitting === true ? ForcedReason.ParentQuit : ForcedReason.NeighbourChange;
    for (let s = 0; s < this.sliceStates.length; s++) {
      const st = this.slice(s);
      if (st.parent === peerId && st.pending === null && st.oldParent === null && !st.isSliceSource) {
        this.switching.requestParent(s, reason, [peerId]);
      }
    }
  }

  /** Active children, over every slice, not heard from for PARENT_SILENCE_HEARTBEATS (admission counts them out). */
  private silentChildren(): number {
    const silentAfterMs = PARENT_SILENCE_HEARTBEATS * this.config.protocol.heartbeatMs;
    let silent = 0;
    for (const st of this.sliceStates) {
      for (const [child, entry] of st.children) {
        if (entry.untilSeq !== Infinity) continue;
        const q = this.peers.get(child);
        if (q === undefined || q.silentLongerThan(this.now, silentAfterMs)) silent++;
      }
    }
    return silent;
  }

  /** Peers we have a tree relation with on any slice (parent, old parent, child, pending target). */
  private treePeers(): Set<PeerId> {
    const result = new Set<PeerId>();
    for (const st of this.sliceStates) {
      if (st.parent !== null) result.add(st.parent);
      if (st.oldParent !== null) result.add(st.oldParent);
      if (st.pending !== null) result.add(st.pending.target);
      for (const child of st.children.keys()) result.add(child);
    }
    return result;
  }

  /**
   * Marks the paths through a peer that fell silent as dead (failedPaths). Only silence counts: a
   * closed link (`peerUnreachable`) or a peer we cut off says nothing about whether it still feeds
   * others, and in a small swarm the paths through one peer are most of the candidates. Nor the true
   * source: every path runs through it, and a member can do nothing about its silence but wait.
   */
  private rememberFailedPath(peerId: PeerId): void {
    if (peerId === this.config.sourceId) return;
    this.failedPaths.delete(peerId);
    this.failedPaths.set(peerId, { mask: this.maskOf(peerId), at: this.now });
    const oldest = this.failedPaths.keys().next();
    if (this.failedPaths.size > MAX_FAILED_PATHS && oldest.done !== true)
      this.failedPaths.delete(oldest.value);
  }

  /** A peer is gone (silent past the timeout, unreachable, or cut off): repair links and trees. */
  private peerFailed(peerId: PeerId, reason: 'failed' | 'quit' | 'cutOff'): void {
    this.loadPhase.forgetPeer(peerId);
    this.repair.forgetPeer(peerId);
    this.emit({ type: 'neighbourDown', peer: peerId, reason });
    // Trees first (so no hand-off is attempted with a dead parent), then links.
    for (let s = 0; s < this.sliceStates.length; s++) {
      const st = this.slice(s);
      this.switching.removeChild(s, peerId);
      if (st.oldParent === peerId) st.oldParent = null;
      const pending = st.pending;
      if (pending !== null && pending.target === peerId) {
        const wasForced = pending.kind === 'forced';
        st.pending = null;
        if (wasForced && st.parent === null)
          this.switching.requestParent(s, st.lostReason ?? ForcedReason.ParentLost, []);
      }
      if (st.parent === peerId) {
        if (st.isSliceSource) continue; // the true source itself: nothing we can do
        this.loseParent(s, ForcedReason.ParentLost, peerId);
      }
    }
    this.failingPeer = peerId;
    this.swaplinks.dropPeer(peerId);
    this.failingPeer = null;
    this.dropPeerState(peerId);
  }

  /** Forget a peer's state, but not its violations: a withholder we left must not start afresh. */
  private dropPeerState(peerId: PeerId): void {
    const p = this.peers.get(peerId);
    if (p === undefined) return;
    this.peers.delete(peerId);
    if (p.violations > 0 && !this.banned.has(peerId)) this.rememberStrangerViolations(peerId, p.violations);
  }

  private rememberStrangerViolations(peer: PeerId, violations: number): void {
    this.strangerViolations.delete(peer); // re-inserted last: the map stays oldest first
    this.strangerViolations.set(peer, violations);
    const oldest = this.strangerViolations.keys().next();
    if (this.strangerViolations.size > MAX_STRANGER_VIOLATION_ENTRIES && oldest.done !== true)
      this.strangerViolations.delete(oldest.value);
  }

  private loseParent(s: number, reason: ForcedReason, exclude: PeerId | null): void {
    const st = this.slice(s);
    const previous = st.parent;
    st.parent = null;
    st.lostReason = reason;
    this.emit({ type: 'parentChanged', slice: s, parent: null, previous, switchKind: 'lost' });
    if (st.pending === null) this.switching.requestParent(s, reason, exclude === null ? [] : [exclude]);
  }

  private leaveLoop(s: number): void {
    const st = this.slice(s);
    const parent = st.parent;
    if (parent !== null) {
      this.send(parent, { type: MessageType.TreeLeave, slice: s, role: TreeRole.Child });
      st.rejectUntil(parent, this.now + this.config.protocol.rejectBackoffMs);
    }
    if (st.pending !== null) st.pending = null;
    // A loop found right after a switch (the probe of adoptParent) is best undone: the old parent
    // still holds us as a child being handed off and takes us back, even above its ML.
    const back = st.oldParent;
    if (back !== null && back !== parent && this.swaplinks.isNeighbour(back))
      this.switching.sendForced(s, back, ForcedReason.Loop);
    this.loseParent(s, ForcedReason.Loop, parent);
  }

  private onQuit(from: PeerId): void {
    const p = this.peers.get(from);
    if (p !== undefined) p.quitting = true;
    for (let s = 0; s < this.sliceStates.length; s++) {
      const st = this.slice(s);
      // A quitting child stays ours: it keeps forwarding to its own children while they move, and
      // says TreeLeave when its linger ends.
      if (st.parent === from && st.pending?.kind !== 'forced' && st.oldParent === null && !st.isSliceSource) {
        // The leaver keeps forwarding for a while: hand off like a normal switch (thesis §4.2, overview).
        st.pending = null;
        this.switching.requestParent(s, ForcedReason.ParentQuit, [from]);
      }
    }
    this.swaplinks.dropPeer(from);
  }

  private onTreeLeave(from: PeerId, msg: TreeLeaveMessage): void {
    const st = this.slice(msg.slice);
    if (msg.role === TreeRole.Child) {
      this.switching.removeChild(msg.slice, from);
      return;
    }
    if (st.parent === from) this.loseParent(msg.slice, ForcedReason.ParentLost, from);
  }

  /** A peer's Bloom mask (thesis §4.2, loop avoidance and detection), cached: the loop rule asks for our children's on every round. */
  private maskOf(peer: PeerId): Bloom128 {
    let mask = this.masks.get(peer);
    if (mask === undefined) {
      if (this.masks.size >= MASK_CACHE_SIZE) this.masks.clear();
      mask = bloomMaskFor(peer);
      this.masks.set(peer, mask);
    }
    return mask;
  }

  /** Can `q` be our parent on slice `s` at all? Loop rule: not if our mask is in its filter (thesis §4.2, loop avoidance and detection). */
  private eligibleParent(q: PeerState, qId: PeerId, s: number, st: SliceState): boolean {
    if (!q.hasAdvert || q.quitting || !q.receiving(s) || this.trust.isSuspect(qId, this.now)) return false;
    if (q.silentLongerThan(this.now, PARENT_SILENCE_HEARTBEATS * this.config.protocol.heartbeatMs))
      return false;
    if (st.children.has(qId) || q.filterContains(s, this.mask)) return false;
    for (const failed of this.failedPaths.values()) if (q.filterContains(s, failed.mask)) return false;
    // Nor if one of our children is in its filter: it is below that child, so below us, even when
    // its filter does not show us yet. Filters change only with data, and a child that joined us
    // since its last packet on this slice (a live stream's slice carries one packet per segment)
    // left its whole subtree advertising the old path: asking one of them closed loops.
    for (const child of st.children.keys()) if (q.filterContains(s, this.maskOf(child))) return false;
    const until = st.rejectedUntil(qId);
    return until <= this.now;
  }

  // ───────────────────────────── rooting a slice (the member's side of source.ts) ─────────────────────────────

  private onSliceSourceAssign(from: PeerId, msg: SliceSourceAssignMessage): void {
    if (from !== this.config.sourceId) {
      this.violation(from, 'slice source assignment from a member');
      return;
    }
    const s = msg.slice;
    const st = this.slice(s);
    this.peer(from).lastHeardAt = this.now;
    if (msg.epoch < st.epoch) return;
    st.epoch = msg.epoch;
    if (msg.assigned && this.config.maxLoad === 0) {
      // A receive-only member (ML = 0) could never feed the tree it would root: decline, so the
      // true source picks another root at once instead of leaving the slice unserved.
      this.send(from, { type: MessageType.SliceSourceAssign, slice: s, epoch: msg.epoch, assigned: false });
      return;
    }
    if (msg.assigned) {
      // Acknowledge at once, so the true source knows this root is alive; then beat every
      // rootHeartbeatMs while we root a slice.
      this.beatTrueSource();
      if (st.parent !== null && st.parent !== from)
        this.send(st.parent, { type: MessageType.TreeLeave, slice: s, role: TreeRole.Child });
      st.becomeRoot(from, msg.epoch, this.now);
      if (msg.peer !== undefined && msg.peer !== this.id) {
        // A move (the true source's rootSpreadIntervalMs): the tree stands, and its old root will
        // ask to be our child, neighbour or not, with its subtree, once we say we took over.
        st.predecessor = msg.peer;
        this.send(from, { type: MessageType.SliceSourceAssign, slice: s, epoch: msg.epoch, assigned: true });
      } else {
        // As root we have no ancestors, so no child can be one: keep them all, and flood the new tree.
        const flood: FloodMessage = {
          type: MessageType.Flood,
          slice: s,
          epoch: msg.epoch,
          bloom: this.mask,
          hops: ROOT_FLOOD_HOPS,
        };
        for (const n of this.swaplinks.neighbours()) this.send(n, flood);
      }
    } else if (st.isSliceSource) {
      // The true source gave up on us, or moved the slice to another root (rootSpreadIntervalMs,
      // naming it): as our own hand-back.
      this.leaveRoot(s, msg.peer !== undefined && msg.peer !== this.id ? msg.peer : null);
    }
    this.emit({ type: 'sliceSource', slice: s, epoch: msg.epoch, assigned: msg.assigned });
  }

  // ───────────────────────────── the member's periodic round ─────────────────────────────

  /**
   * Failure detection: heartbeat 1 s, timeout 4 s (thesis §4.4, experimental setup). A peer fails
   * the moment its timeout runs out: this runs at the failureCheck deadline (the soonest last-heard
   * time plus the timeout), which then moves to the next one, and in every round: peers are heard
   * every second, so the round's scan moves the deadline ahead before it falls due and it fires only
   * for a real silence (without the round's scan, a 500-member run had 0.2% more events, each an
   * early wake-up that found nothing).
   */
  private checkFailures(): void {
    const timeoutMs = this.config.protocol.failureTimeoutMs;
    let nextMs = Infinity;
    for (const [peerId, peer] of this.peers) {
      if (this.now - peer.lastHeardAt > timeoutMs) {
        if (peer.quitting) this.peerFailed(peerId, 'quit');
        else {
          this.rememberFailedPath(peerId);
          this.peerFailed(peerId, 'failed');
        }
      } else nextMs = Math.min(nextMs, peer.lastHeardAt + timeoutMs + TIMEOUT_PAST_MS);
    }
    // peerFailed may have let go of other peers' state; those still here are in nextMs.
    this.deadlines.at.failureCheck = nextMs;
  }

  /** While we root a slice, the true source hears from us every rootHeartbeatMs (config.ts), not only each round. */
  private beatAsRoot(): void {
    for (const st of this.sliceStates) {
      if (st.isSliceSource) {
        this.beatTrueSource();
        return;
      }
    }
    this.deadlines.at.rootHeartbeat = Infinity;
  }

  private beatTrueSource(): void {
    const sourceId = this.config.sourceId;
    this.peer(sourceId).lastHeartbeatSentAt = this.now;
    this.send(sourceId, { type: MessageType.Heartbeat });
    this.deadlines.at.rootHeartbeat = this.now + this.config.protocol.rootHeartbeatMs;
  }

  private tick(): void {
    const now = this.now;
    this.offsets.newRound();
    const p = this.config.protocol;
    this.checkFailures();
    const treePeers = this.treePeers();
    // Forget peers that are neither neighbours nor tree relations.
    for (const peerId of this.peers.keys()) {
      if (!this.swaplinks.isNeighbour(peerId) && !treePeers.has(peerId) && peerId !== this.config.sourceId)
        this.dropPeerState(peerId);
    }
    this.swaplinks.maintain(now);
    // Before the adverts, so that they already say which slices we no longer receive as their root.
    this.shedRoots();
    this.sendAdverts(treePeers);
    // A slice source's parent, the true source, is no neighbour and takes no advert: it gets heartbeats
    // (other tree relations that are no neighbours got adverts, which are heartbeats too).
    for (const peerId of treePeers) {
      const peer = this.peers.get(peerId);
      if (
        peer === undefined ||
        this.swaplinks.isNeighbour(peerId) ||
        now - peer.lastHeartbeatSentAt < p.heartbeatMs
      )
        continue;
      peer.lastHeartbeatSentAt = now;
      this.send(peerId, { type: MessageType.Heartbeat });
    }
    this.expireStale();
    this.replaceDepartingParents();
    this.loadPhase.parentDecision();
    this.latencyPhase.newRound();
    this.switching.acquireMissingParents();
    this.loadPhase.childReports();
    this.latencyPhase.run();
    this.loops.probeSilentSlices();
    this.auditParents();
    this.reportStarvedSlices();
  }

  /**
   * Slices that bring us nothing while most others flow: nobody around us receives them (their root
   * withholds, say). Tell the true source, which replaces a root that enough members say starves.
   */
  private reportStarvedSlices(): void {
    if (!this.started) return;
    const since = (st: SliceState): number => Math.max(st.lastDataAt, this.startedAt);
    let flowing = 0;
    for (let s = 0; s < this.config.dataSlices; s++)
      if (this.now - this.slice(s).lastDataAt <= this.config.protocol.receivingTimeoutMs) flowing++;
    if (2 * flowing < this.config.dataSlices) return; // we are the problem, or the whole stream is
    for (let s = 0; s < this.sliceStates.length; s++) {
      const st = this.slice(s);
      if (st.isSliceSource || this.now - since(st) < STARVED_SLICE_MS) continue;
      // Only a slice nobody around us receives: a broken branch of a healthy tree is ours to mend
      // (a neighbour that receives it can be our parent), and reports from broken branches made
      // the true source replace honest roots, each a re-flood of a whole tree that sent members to
      // the origin (docs/hostile.md).
      if (this.anyNeighbourReceives(s)) continue;
      this.reportStarvedSlice(s);
    }
  }

  private anyNeighbourReceives(s: number): boolean {
    for (const peerId of this.swaplinks.neighbours()) {
      const q = this.peers.get(peerId);
      if (q?.hasAdvert === true && q.receiving(s) && !this.trust.isSuspect(peerId, this.now)) return true;
    }
    return false;
  }

  /** Slices whose root `peer` is, as our parent that advertised it (before we forget the peer). */
  private slicesRootedBy(peer: PeerId): number[] {
    const q = this.peers.get(peer);
    const rooted: number[] = [];
    if (q === undefined || this.config.role !== 'member') return rooted;
    for (let s = 0; s < this.sliceStates.length; s++)
      if (this.slice(s).parent === peer && ((q.sliceFlags[s] ?? 0) & SLICE_FLAG_ROOT) !== 0) rooted.push(s);
    return rooted;
  }

  /** Tell the true source slice `s` starves here (at most once per STARVED_SLICE_MS). */
  private reportStarvedSlice(s: number): void {
    const st = this.slice(s);
    if (this.now - st.lastStarvedNoticeAt < STARVED_SLICE_MS) return;
    st.lastStarvedNoticeAt = this.now;
    this.counters.starvedSliceNotices++;
    this.send(this.config.sourceId, {
      type: MessageType.ForcedParentRequest,
      slice: s,
      reason: ForcedReason.ParentLost,
      fromSeq: st.nextSeqWanted(),
    });
  }

  private expireStale(): void {
    const p = this.config.protocol;
    for (const [peer, failed] of this.failedPaths) {
      if (this.now - failed.at < FAILED_PATH_MEMORY_MS) break; // oldest first
      this.failedPaths.delete(peer);
    }
    for (let s = 0; s < this.sliceStates.length; s++) {
      const st = this.slice(s);
      if (st.pending !== null && this.now - st.pending.sentAt > p.requestTimeoutMs) {
        const pending = st.pending;
        st.pending = null;
        if (pending.kind === 'forced' && st.parent === null)
          this.switching.requestParent(s, pending.forcedReason ?? ForcedReason.ParentLost, [pending.target]);
      }
      for (const [child, entry] of st.children) {
        if (entry.untilSeq !== Infinity && this.now - entry.drainingSince > p.requestTimeoutMs)
          st.removeChild(child); // draining: our load is unchanged
      }
      if (st.oldParent !== null && this.now - st.parentSince > p.requestTimeoutMs + p.handoffLeadMs)
        st.oldParent = null;
      st.expireRejections(this.now);
    }
    this.loadPhase.expireInstructions();
  }

  /**
   * A parent that stopped being a neighbour (Swaplinks swap) or is quitting must be replaced; done
   * here when it could not be at once (a hand-off was still draining, or no candidate answered).
   */
  private replaceDepartingParents(): void {
    for (let s = 0; s < this.sliceStates.length; s++) {
      const st = this.slice(s);
      const parent = st.parent;
      if (parent === null || st.isSliceSource || st.pending !== null || st.oldParent !== null) continue;
      const quitting = this.peers.get(parent)?.quitting === true;
      if (quitting) this.switching.requestParent(s, ForcedReason.ParentQuit, [parent]);
      else if (!this.swaplinks.isNeighbour(parent))
        this.switching.requestParent(s, ForcedReason.NeighbourChange, [parent]);
    }
  }

  /**
   * A slice source keeps at least one child on each slice it roots that has children at all: every
   * other member receives that slice through it, so no child of it can move out of its subtree (a
   * sibling receives through the root too). Its load therefore never falls below the number of such
   * slices, and the load phase cannot move that part. The thesis never meets this (its TL and ML
   * are fixed at join, and the true source picks roots load-proportionally, thesis §4.2, slice sources); with
   * `setLoad` it does: the first member of a small swarm roots all 16 slices, and when its uplink is
   * measured at TL 7 / ML 8 it stays at 16, starving its children. Above ML (the uplink cannot carry
   * what we forward), we hand back the roots above ULT — the fewest-children ones first — as a
   * receive-only member does (the declinedRoots path): the true source roots them elsewhere at once,
   * we join the re-flooded trees like anyone else, and the load phase moves our old subtree away.
   * At ML we also hand back the roots without a child: nobody else receives such a slice, and we
   * cannot take the child it needs (seen in a lab trial of a slow start: the first member, at ML 6, rooted all 16
   * slices, fed 6 of them, and the other 10 reached nobody for the rest of the run).
   */
  private shedRoots(): void {
    if (this.quitting) return;
    const maxLoad = this.config.maxLoad;
    if (maxLoad > 0 && this.load >= maxLoad)
      for (let s = 0; s < this.sliceStates.length; s++) {
        const st = this.slice(s);
        // Not a root moved to us whose old root has yet to ask to be our child: it brings the whole
        // tree, above our ML if need be. Handing such a root back at once (we had no child yet) left
        // the old root's subtree without a way in: its only neighbour outside, the next root, was
        // full (a 16-member swarm missed a slice for good).
        if (st.isSliceSource && st.activeChildren === 0 && !this.awaitingPredecessor(st))
          this.handBackRoot(s);
      }
    if (this.load <= maxLoad) return;
    const rooted: number[] = [];
    for (let s = 0; s < this.sliceStates.length; s++) {
      const st = this.slice(s);
      if (st.isSliceSource && st.activeChildren > 0) rooted.push(s);
    }
    const excess = Math.min(
      rooted.length - this.config.upperLatencyThreshold,
      this.load - this.config.maxLoad,
    );
    if (excess <= 0) return;
    rooted.sort((a, b) => this.slice(a).activeChildren - this.slice(b).activeChildren || a - b);
    for (const s of rooted.slice(0, excess)) this.handBackRoot(s);
  }

  /** A moved root's old root may still ask to be our child (for 2 × requestTimeoutMs after the move). */
  private awaitingPredecessor(st: SliceState): boolean {
    return st.predecessor !== null && this.now - st.parentSince < 2 * this.config.protocol.requestTimeoutMs;
  }

  // ───────────────────────────── quitting ─────────────────────────────

  private quit(graceful: boolean): void {
    if (!graceful || !this.started) {
      this.stopped = true;
      this.emit({ type: 'stopped' });
      return;
    }
    if (this.quitting) return;
    const linger = this.config.protocol.quitLingerMs;
    this.deadlines.at.quitLingerEnd = this.now + linger;
    const told = new Set<PeerId>();
    for (const peerId of [...this.swaplinks.neighbours(), ...this.peers.keys()]) {
      if (told.has(peerId)) continue;
      told.add(peerId);
      this.send(peerId, { type: MessageType.Quit, lingerMs: linger });
    }
  }
}
