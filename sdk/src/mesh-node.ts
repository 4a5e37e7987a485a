import SimplePeer from '@thaunknown/simple-peer/lite.js';
import {
  Engine,
  createRandom,
  type Action,
  type DeliveryPath,
  type EngineEvent,
  type Input,
  type ProtocolConfig,
  type Random,
  type Role,
} from '@chunkycast/engine';
import {
  MAX_MESSAGE_BYTES,
  MAX_REPORT_CUT_OFFS,
  MessageType,
  SlabAllocator,
  decode,
  encode,
  type DataMessage,
  type Message,
  type PacketRepairDataMessage,
  type RepairDataMessage,
  type RepairNakMessage,
  type RepairRequestMessage,
  type ConnectivityReport,
  type PeerId,
  type RouteCounts,
  type RouteType,
  type SignalData,
  type SignedAnnouncement,
} from '@chunkycast/wire';
import {
  candidateKindsWanted,
  candidateLineKind,
  forNodeDatachannel,
  ON_NODE_DATACHANNEL,
  selectedPairOfReport,
  type StatsReportLike,
  type ConnectFailure,
  type ConnectFailureReason,
  type PeerLinkStats,
  type SelectedPair,
} from './connectivity.js';
import { BUSY_LINK_BYTES, LINK_BACKLOG_BYTES, UploadBucket, type UplinkSample } from './capacity.js';
import { corruptedPayload, faultsOf, forgedSequence, type FaultInjection } from './faults.js';
import { unreachable } from './unreachable.js';
import { TrafficCounts } from './traffic.js';

/**
 * A peer we never managed to connect to is reported unreachable after this long. WebRTC set-up
 * through the tracker is far quicker on loopback (environment.md). On real networks the worst honest
 * case is: the offer and then the answer each wait up to ICE_GATHER_TIMEOUT_MS (2 s) for candidates
 * (a STUN or TURN server that does not answer makes both wait it out), each crosses the tracker, and
 * ICE checks, DTLS and SCTP over a TURN relay take a few round trips more — ICE with TURN usually
 * completes in 2–5 s, so about 6 s at worst. 8 s covers that with a margin. Longer only delays the
 * engine's replacement of a dead dial (Swaplinks picks another neighbour): a slice stays silent
 * 4.5 s before the engine probes (LIVE_PROTOCOL) and the loader waits at most 4 s for a segment. A
 * failure ICE reports itself (state `failed`) ends the attempt at once; this bound is for what it
 * never reports, e.g. a bootstrap peer that left and never answers.
 */
export const CONNECT_TIMEOUT_MS = 8000;
/**
 * A peer whose link failed before opening is not dialled again for a while: the engine would
 * otherwise re-dial it on its next walk or sample (bootstrap lists and walks name it again), each
 * attempt costing the signalling and another CONNECT_TIMEOUT_MS. The engine is told at once that it
 * is unreachable instead. Its own offers are still answered (its side may get through).
 *
 * The wait doubles with each failure in a row, from FIRST_DIAL_BACKOFF_MS up to DIAL_BACKOFF_MS. A
 * first failure is often a one-off: libdatachannel refusing an answer that raced its own setup
 * ("remote candidate without ICE transport") left the other side waiting out its connect timeout,
 * and a flat 30 s wait then kept two of a four-viewer swarm apart for half a minute, both sides
 * waiting for the other to dial (tracker/test/scale-out.test.ts failed so). A peer that fails
 * again is most likely gone.
 */
export const FIRST_DIAL_BACKOFF_MS = 5000;
/** The longest wait before re-dialling a peer that keeps failing (see FIRST_DIAL_BACKOFF_MS). */
export const DIAL_BACKOFF_MS = 30_000;
/**
 * How often each open link's route, round-trip time and bytes are read (getStats; never per packet).
 * Once a second: the upload capacity is measured from the wire bytes these reads give, in windows
 * of this length, and a thin uplink must be measured within a couple of seconds of falling behind.
 */
export const LINK_STATS_INTERVAL_MS = 1000;
/**
 * A link between two members that carried nothing but announcements for this long is closed
 * (MeshNodeOptions.idleLinkCloseMs). Links were never closed but for a cut-off: every peer a viewer
 * ever reached (a walk's end, a bootstrap peer, a neighbour swapped away) kept a peer connection,
 * with its SCTP and DTLS state and a stats read every second, for the whole session. Neighbours
 * and tree relations exchange adverts every second, so theirs are never idle; 20 s is a walk's and
 * a forced request's timeouts several times over. A member keeps its link to the true source (the
 * source decides: it tells a root it is one over it); the true source closes its own idle links
 * to members it has no use for (not a slice source, spare or root being moved: Engine.relations),
 * or it would hold one to every member it ever sampled (all 16 of a 16-viewer swarm within 70 s).
 */
export const IDLE_LINK_CLOSE_MS = 20_000;
/**
 * Received payloads are copied into slabs of this size (wire's `decode` with a SlabAllocator): a
 * viewer keeps a packet ~20 s (the slice rings, the segment store), and with one allocation per
 * packet Chromium kept 3.3 MiB per viewer of freed payload slots resident beside 2.3 MiB of live
 * ones (issue 17, 16 viewers, after a full collection). 256 KiB is 16 packets of 16 KiB, ~2 s of a
 * 1 Mbit/s stream: a slab goes back whole once its last payload is let go, ~2 s after its first.
 */
export const PAYLOAD_SLAB_BYTES = 256 * 1024;
/** Failed peers remembered at most (older entries are pruned first; each lapses DIAL_BACKOFF_MS after its wait). */
const MAX_BACKOFF_ENTRIES = 1024;
/** A link to a peer that failed before opening, and how long the peer is not dialled since. */
interface DialFailure {
  readonly at: number;
  readonly backoffMs: number;
}
/** Whether a failure still counts: one soon after it doubles the wait (it lapses DIAL_BACKOFF_MS after its wait). */
const stillRemembered = (failed: DialFailure, now: number): boolean =>
  now - failed.at < failed.backoffMs + DIAL_BACKOFF_MS;
/**
 * Above this many bytes in the data channel's own buffer we queue in the host (backpressure): the
 * ceiling, and the mark while the uplink's capacity is unknown (it never fell behind).
 */
const CHANNEL_HIGH_WATER_BYTES = 1024 * 1024;
/**
 * Once the uplink's capacity is measured, a link's channel holds at most this long of its share of
 * it (and at least MIN_CHANNEL_HIGH_WATER_BYTES). What sits in a channel's buffer cannot be dropped
 * or passed, and control shares the channel with data: with 1 MiB per link, a thin uplink shared
 * by several links holds a minute or more of backlog per link, and the load phase's instructions to
 * move away wait behind it (the lab's thin first viewer was slow to shed its children).
 */
const CHANNEL_BUFFER_MS = 300;
/** The smallest high-water mark: a whole media packet (the wire's limit is 16 KiB) may wait. */
const MIN_CHANNEL_HIGH_WATER_BYTES = 16 * 1024;
/**
 * Data that waited this long in the host's queue is dropped when its turn comes (counted in
 * `droppedStale`): a packet this late reaches our children's players after they have asked a
 * neighbour or the origin for it, and sending it anyway only delays what is behind it (control
 * too). Control is never dropped.
 */
const MAX_DATA_QUEUE_AGE_MS = 2000;
/**
 * Host queue bound per peer: ~30 s of a 1 Mbit/s stream. A peer that falls this far behind cannot
 * play what we send; its data messages are dropped (counted) while control messages still queue,
 * so the engine's heartbeats and switch messages decide whether the link survives.
 */
const MAX_QUEUED_BYTES = 4 * 1024 * 1024;
/**
 * A peer that sends this many packets failing their announced hash (or announcements failing their
 * signature; both count) is cut off. More than one, as
 * a rule against ever blaming a peer for one unlucky packet; few, because every forged packet costs
 * its receivers an origin request.
 */
const MAX_FORGED_PACKETS = 3;
/**
 * A packet whose segment is not announced yet waits at most this long. The true source announces
 * before it sends (the announcement travels one tracker hop, packets one or more peer hops), so a
 * longer wait means the announcement was lost: the packet is dropped and fetched from the origin.
 */
export const HOLD_MAX_MS = 1500;
/** Held packets at most (all peers): bounds what unannounced packets can make us keep. */
const MAX_HELD_PACKETS = 512;
/** Longest wait for ICE gathering before the offer or answer goes out with what it has. */
const ICE_GATHER_TIMEOUT_MS = 2000;
/**
 * After the last kind of candidate a description needs arrives, this long for its siblings (the same
 * kind on another interface: Chromium gathers each phase on every network at once) before it is sent.
 */
const GATHER_SETTLE_MS = 15;
/** A peer that sends this many undecodable messages is cut off: no honest peer sends one. */
const MAX_BAD_MESSAGES = 3;
/**
 * Fresh connections a repeated offer may cause per minute (all peers together): an honest peer
 * re-dials after a timeout, a replaying one must not make us churn connections.
 */
const MAX_RENEGOTIATIONS_PER_MINUTE = 120;
/** How often a queue is retried while a channel is above its high-water mark. */
const FLUSH_INTERVAL_MS = 20;
/** The window MAX_RENEGOTIATIONS_PER_MINUTE counts in. */
const RENEGOTIATION_WINDOW_MS = 60_000;
/**
 * Held packets are looked at again this often, so one whose announcement never came is dropped
 * within a third of HOLD_MAX_MS after its time (new announcements recheck them at once anyway).
 */
const HELD_RECHECK_INTERVAL_MS = HOLD_MAX_MS / 3;
/**
 * The longest graceful leave: a node that quits tells its neighbours it keeps forwarding for the
 * engine's `quitLingerMs` and then waits that long before closing its links. A page being closed or
 * a source being stopped cannot wait much longer, so a longer linger is refused when the node is
 * built (a RangeError) rather than cut short in silence, which would break the promise the Quit
 * message made to the children. The engine's default (3 s: a hand-off lead plus a round trip) fits.
 */
export const MAX_QUIT_LINGER_MS = 3000;
/**
 * The injected losses draw from their own fork of the node's seeded PRNG (this is the fork's
 * label), so a lossy run keeps the engine's own random choices.
 */
const LOSS_RANDOM_FORK = 0x1055;

export type DataVerdict = 'accept' | 'reject' | 'hold';
export type RepairMessage = RepairRequestMessage | RepairDataMessage | RepairNakMessage;

export type LogFn = (
  level: 'debug' | 'info' | 'warn' | 'error',
  msg: string,
  fields?: Record<string, unknown>,
) => void;

export interface MeshNodeOptions {
  readonly id: PeerId;
  readonly sourceId: PeerId;
  readonly role: Role;
  readonly targetLoadSlices: number;
  readonly maxLoadSlices: number;
  readonly protocol?: Partial<ProtocolConfig>;
  /** Seed of the engine's PRNG (the host picks it; the engine never reads ambient randomness). */
  readonly seed: number;
  /**
   * Passed to each new RTCPeerConnection (in Node: node-datachannel's, e.g. `{ iceServers: [],
   * bindAddress }`). A function is asked afresh for every new link, so renewed ICE servers (fresh
   * TURN credentials) reach new links while open ones keep theirs.
   */
  readonly rtcConfig: Record<string, unknown> | (() => Record<string, unknown>);
  /** How long a link may take to open (default CONNECT_TIMEOUT_MS; tests shorten it). */
  readonly connectTimeoutMs?: number;
  /** A link was given up before its data channel opened (after it, the peer is reported unreachable). */
  readonly onConnectFailure?: (failure: ConnectFailure) => void;
  /** Relay WebRTC signalling to a peer through the tracker. */
  readonly signal: (to: PeerId, data: SignalData) => void;
  readonly requestBootstrap: (count: number) => void;
  /**
   * A new packet for the application (each (slice, seq) once), and how it came: down the tree, from a
   * neighbour's packet repair, from the origin (`fetchOrigin`), or rebuilt from parity.
   */
  readonly deliver: (
    slice: number,
    seq: number,
    payload: Uint8Array,
    from: PeerId,
    hops: number,
    via: DeliveryPath,
  ) => void;
  /**
   * The engine's packet repair asks the origin for these packets of `slice` (its last resort, only
   * once the host gave it a playout clock: `playout`). The host answers with `originPacket`, checked.
   * Without this option a MeshNode gives no playout clock, and an engine that asks anyway is a
   * host error (counted in actionsFailed and logged).
   */
  readonly fetchOrigin?: (slice: number, seqs: readonly number[]) => void;
  readonly onEvent?: (event: EngineEvent) => void;
  /**
   * Checks a data packet (a tree packet or a neighbour's packet repair) before the engine sees (and
   * forwards) it: 'accept', 'reject' (forged: it is dropped and counts against the sender), or 'hold'
   * (cannot tell yet, e.g. its segment is not announced: kept until `recheckHeld()` or dropped after
   * HOLD_MAX_MS).
   */
  readonly inspectData?: (slice: number, seq: number, payload: Uint8Array) => DataVerdict;
  /** Repair messages between neighbours are the host's (it holds the segments); they go here. */
  readonly onRepair?: (from: PeerId, message: RepairMessage) => void;
  /**
   * A signed segment announcement a neighbour passed on (its shape is checked, its signature is not:
   * the host verifies it, and calls `reportForgedAnnouncement` for a bad one).
   */
  readonly onAnnouncement?: (from: PeerId, announcement: SignedAnnouncement) => void;
  readonly log?: LogFn;
  /**
   * Upload cap in kbps (`max-upload-kbps`): a token bucket on what is written to the data channels;
   * data beyond it waits in the host queue (see UploadBucket). Default none.
   */
  readonly maxUploadKbps?: number;
  /** Monotonic milliseconds; default performance.now(). */
  readonly now?: () => number;
  /** A link idle this long (ms) to a peer the engine has no use for is closed (IDLE_LINK_CLOSE_MS by default; 0: never). */
  readonly idleLinkCloseMs?: number;
}

export interface MeshNodeCounters {
  /** Payload bytes of data messages sent (what this node forwarded). */
  uploadBytes: number;
  /** Bytes written to data channels (every message, control included): what the uplink was asked to carry. */
  bytesWritten: number;
  messagesSent: number;
  messagesReceived: number;
  /** Data messages dropped because a peer's queue was full. */
  droppedForBackpressure: number;
  /**
   * Messages not sent because they were larger than the link's negotiated SCTP max-message-size
   * (sendLimitOf): the link stays up, the receiver recovers the content by repair.
   */
  oversizeDropped: number;
  /** Data messages dropped from the host's queue after MAX_DATA_QUEUE_AGE_MS there. */
  droppedStale: number;
  badMessages: number;
  /** Data packets that failed their announced hash (dropped, never forwarded). */
  forgedPackets: number;
  /** Announcements from neighbours whose signature failed (reported by the host). */
  forgedAnnouncements: number;
  /** Announcement messages written to neighbours (one per neighbour per announcement). */
  announcementsSent: number;
  /** Data packets held for their announcement and dropped when it did not come in time. */
  heldPacketsDropped: number;
  /** Payload bytes of repair packets sent to neighbours. */
  repairUploadBytes: number;
  /** Media messages thrown away by injected loss (internal fault injection; 0 otherwise). */
  injectedLosses: number;
  peersCutOff: number;
  /** Links given up before their channel opened (ICE failed, timed out, closed, errored). */
  connectFailures: number;
  /** Dials refused because the peer's link failed within its backoff (reported unreachable at once). */
  dialsBackedOff: number;
  /** Bytes sent and received over links whose route is `relay` (TURN), as their stats counted them. */
  relayedBytes: number;
  /** Engine actions that threw when carried out (logged; the rest of their batch went on). */
  actionsFailed: number;
  /** Links to members closed after carrying nothing but announcements for idleLinkCloseMs. */
  idleLinksClosed: number;
}

/**
 * A whole offer or answer goes out once it can connect, not when gathering ends. simple-peer
 * (trickle off) sends the description at the end-of-candidates null `icecandidate`; this gives it
 * that null earlier, GATHER_SETTLE_MS after the description holds a UDP candidate of every kind the
 * configuration can give (`candidateKindsWanted`: host, and srflx or relay with STUN or TURN
 * servers), or at `icegatheringstatechange` to `complete`. The latter because node-datachannel's
 * RTCPeerConnection (the true source's) never emits the null `icecandidate`, only the state
 * change; without it every description of the true source would wait out ICE_GATHER_TIMEOUT_MS.
 * The early end only in browsers: Chromium's offer reached `complete` ~120 ms after its host
 * candidate on loopback, for a TCP candidate no peer can use (connectivity.ts); libjuice ends its
 * gathering with its last server's answer, and its description is the true source's own concern.
 * A description read later (`localDescription`) still lists whatever was gathered by then.
 */
export function sendDescriptionWhenUsable(
  peer: SimplePeer,
  config: Record<string, unknown>,
  early = !ON_NODE_DATACHANNEL,
): void {
  const internals = peer as unknown as {
    _pc?: EventTarget & { iceGatheringState?: string };
    _onIceCandidate?: (event: { candidate: null }) => void;
  };
  const pc = internals._pc;
  if (pc === undefined || typeof internals._onIceCandidate !== 'function') return;
  let ended = false;
  const end = (): void => {
    if (ended) return;
    ended = true;
    internals._onIceCandidate?.call(peer, { candidate: null });
  };
  pc.addEventListener('icegatheringstatechange', () => {
    if (pc.iceGatheringState === 'complete') end();
  });
  if (!early) return;
  const wanted = candidateKindsWanted(config);
  const seen = new Set<RouteType>();
  let settling = false;
  pc.addEventListener('icecandidate', (event) => {
    const line = (event as { candidate?: { candidate?: unknown } | null }).candidate?.candidate;
    if (settling || typeof line !== 'string') return;
    const kind = candidateLineKind(line);
    if (kind === null || !kind.udp) return;
    seen.add(kind.type);
    for (const type of wanted) if (!seen.has(type)) return;
    settling = true;
    setTimeout(end, GATHER_SETTLE_MS);
  });
}

/**
 * The largest message a link's channel takes: the SCTP max-message-size its two ends negotiated
 * (RTCSctpTransport.maxMessageSize), within the wire's MAX_MESSAGE_BYTES. Browsers differ: Chromium
 * offers 256 KiB, Firefox 1 GiB but assumes 64 KiB of a peer whose SDP does not say, Safari has
 * offered 64 KiB. A larger send throws (TypeError in Firefox, OperationError in Chromium). Unknown
 * (no `sctp` yet, node-datachannel, or 0, which means "no limit"): MAX_MESSAGE_BYTES.
 */
export function sendLimitOf(peer: unknown): number {
  const pc = (peer as { _pc?: { sctp?: { maxMessageSize?: unknown } | null } } | null)?._pc;
  const size = pc?.sctp?.maxMessageSize;
  return typeof size === 'number' && Number.isFinite(size) && size > 0
    ? Math.min(Math.floor(size), MAX_MESSAGE_BYTES)
    : MAX_MESSAGE_BYTES;
}

interface QueuedMessage {
  readonly bytes: Uint8Array;
  /** The message's type (the traffic counts are by type). */
  readonly type: MessageType;
  /** When it was queued (the node's clock). */
  readonly queuedAtMs: number;
  /** Data may be dropped when the queue is full; control never is. */
  readonly isData: boolean;
  /** Announcements go ahead of everything queued but earlier announcements (see `enqueue`). */
  readonly ahead: boolean;
}

interface Link {
  readonly peer: SimplePeer;
  readonly initiator: boolean;
  open: boolean;
  /** Set when we close it on purpose: its close event must not report the peer unreachable. */
  closingByUs: boolean;
  queue: QueuedMessage[];
  queuedBytes: number;
  /** Bytes written to this link's channel; and the value at the last uplinkSample. */
  writtenBytes: number;
  sampledWrittenBytes: number;
  /** Its channel's bufferedAmount at the last uplinkSample (abandoned if the link goes). */
  sampledBufferedBytes: number;
  badMessages: number;
  /** The largest message its channel takes (sendLimitOf), once open. */
  maxMessageBytes: number;
  /**
   * Media payload bytes this peer sent us (tree packets and repairs, before their checks): which
   * links carry media, e.g. between browsers of different kinds.
   */
  mediaBytesReceived: number;
  /** Forged packets and forged announcements from this peer (MAX_FORGED_PACKETS cuts it off). */
  forgedPackets: number;
  /** The connection's id in every signal of it, both ways: random from the dialling side. */
  readonly pairId: number;
  /** An initiator takes one answer. */
  answered: boolean;
  connectTimer: ReturnType<typeof setTimeout> | null;
  /** When the link was made (the node's clock), for a failure's `afterMs`. */
  createdAt: number;
  /** Unix ms of the channel opening (null before). */
  openedAtMs: number | null;
  /** The latest read of its selected candidate pair (null: not read yet, or no stats here). */
  pair: SelectedPair | null;
  /** Its route was counted in `connectedByRoute` (once, when first known). */
  routeCounted: boolean;
  /** The link's getStats transport id, once known: later reads look its pair up (connectivity.ts). */
  readonly statsMemo: { transportId: string | null };
  /**
   * When the link last carried something other than an announcement, either way (the node's
   * clock; its creation until then): IDLE_LINK_CLOSE_MS.
   */
  lastActiveAt: number;
  /** Made with `iceTransportPolicy: 'relay'`: every path it can take goes through a TURN relay. */
  readonly relayOnly: boolean;
  /** What the engine was last told of this link's route (`linkRoute`): relayed or not; null: nothing. */
  relayedFed: boolean | null;
}

/**
 * Hosts one Chunkyspread engine over WebRTC data channels (simple-peer), in a page or in Node:
 * feeds it decoded messages, the clock and its timer, and carries out its actions.
 *
 * One data channel per peer, reliable and ordered, carries both control and data. Control must
 * arrive, and in order (switch hand-offs, heartbeats). Data is reliable too: a packet SCTP
 * retransmits costs one round trip, while a lost one costs a repair request to a neighbour (the
 * session's repair layer) or, late, a byte range from the origin. Unreliable channels
 * (`maxRetransmits: 0`) lost packets even on loopback, and a lost packet spoils its whole segment
 * (environment.md).
 *
 * The engine's own packet repair runs only once the host gives it a playout clock (`playout`), and
 * its `fetchOrigin` last resort then goes to the host's `fetchOrigin` option; a session in
 * `packetRepair: 'segment'` mode gives none and repairs whole segments itself (issue 14).
 */
export class MeshNode {
  readonly engine: Engine;
  /** What the data channels carried, by message type (stats: `traffic`). */
  readonly traffic = new TrafficCounts();
  readonly counters: MeshNodeCounters = {
    uploadBytes: 0,
    bytesWritten: 0,
    messagesSent: 0,
    messagesReceived: 0,
    droppedForBackpressure: 0,
    oversizeDropped: 0,
    droppedStale: 0,
    badMessages: 0,
    forgedPackets: 0,
    forgedAnnouncements: 0,
    announcementsSent: 0,
    heldPacketsDropped: 0,
    repairUploadBytes: 0,
    injectedLosses: 0,
    peersCutOff: 0,
    connectFailures: 0,
    dialsBackedOff: 0,
    idleLinksClosed: 0,
    relayedBytes: 0,
    actionsFailed: 0,
  };
  /** Links that opened, by the route type of their selected candidate pair (once it is known). */
  readonly connectedByRoute: Record<RouteType, number> = { host: 0, srflx: 0, prflx: 0, relay: 0 };
  private readonly links = new Map<PeerId, Link>();
  private firstLinkOpenedAt: number | null = null;
  private firstLinkStartedAt: number | null = null;
  /** The last dial failure per peer (see FIRST_DIAL_BACKOFF_MS), ordered by failure time. */
  private readonly failedAt = new Map<PeerId, DialFailure>();
  private statsTimer: ReturnType<typeof setInterval> | null = null;
  /** Peers cut off for misbehaving: their offers are refused. */
  private readonly blocked = new Set<PeerId>();
  /** Where received payloads are copied (PAYLOAD_SLAB_BYTES). */
  private readonly payloadSlabs = new SlabAllocator(PAYLOAD_SLAB_BYTES);
  /** Peers cut off since the last `takeCutOffs` (bounded: the report carries MAX_REPORT_CUT_OFFS). */
  private readonly cutOffsToReport: PeerId[] = [];
  private readonly inputs: Input[] = [];
  private running = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private timerAt = Infinity;
  private flushTimer: ReturnType<typeof setInterval> | null = null;
  private stopped = false;
  private renegotiations = 0;
  private held: { from: PeerId; message: DataMessage | PacketRepairDataMessage; at: number }[] = [];
  private heldTimer: ReturnType<typeof setInterval> | null = null;
  private renegotiationTimer: ReturnType<typeof setInterval> | null = null;
  private readonly now: () => number;
  private readonly log: LogFn;
  /** Test faults (internal: `@chunkycast/sdk/testing`); none in the product. */
  private readonly faults: FaultInjection;
  /** Draws the injected losses; its own stream so a lossy run keeps the engine's choices. */
  private readonly lossRandom: Random;
  private readonly dropFraction: number;
  /** The upload cap (null: none). */
  private readonly uploadBucket: UploadBucket | null;
  /** The channel buffer's high-water mark now (setUplinkCapacity). */
  private channelHighWaterBytes = CHANNEL_HIGH_WATER_BYTES;
  /** Wire bytes the transports of links now gone had sent, as last read (uplinkSample's total). */
  private goneTransportSentBytes = 0;
  private goneTransportReceivedBytes = 0;
  /** Σ wire bytes sent by all transports at the last complete stats read, and when (node clock). */
  private transportSent: { atMs: number; bytes: number } | null = null;
  /** Bytes that were still in the channels of links we lost: written, never sent (uplinkSample). */
  private abandonedBytes = 0;
  /** Where the next flush round starts, so no link's queue always goes first for the cap's tokens. */
  private flushTurn = 0;

  constructor(private readonly options: MeshNodeOptions) {
    this.now = options.now ?? (() => performance.now());
    this.log = options.log ?? (() => undefined);
    this.faults = faultsOf(options);
    const dropFraction = this.faults.dropReceivedDataFraction ?? 0;
    if (!(dropFraction >= 0 && dropFraction <= 1))
      throw new RangeError(`dropReceivedDataFraction must be in 0‥1, got ${dropFraction}`);
    this.dropFraction = dropFraction;
    this.uploadBucket =
      options.maxUploadKbps === undefined ? null : new UploadBucket(options.maxUploadKbps, this.now());
    this.lossRandom = createRandom(options.seed).fork(LOSS_RANDOM_FORK);
    this.engine = new Engine(
      {
        id: options.id,
        role: options.role,
        sourceId: options.sourceId,
        targetLoadSlices: options.targetLoadSlices,
        maxLoadSlices: options.maxLoadSlices,
        ...(options.protocol === undefined ? {} : { protocol: options.protocol }),
      },
      createRandom(options.seed),
    );
    const lingerMs = this.engine.config.protocol.quitLingerMs;
    if (lingerMs > MAX_QUIT_LINGER_MS)
      throw new RangeError(
        `protocol.quitLingerMs must be at most ${MAX_QUIT_LINGER_MS} ms for a MeshNode (a graceful leave waits that long), got ${lingerMs}`,
      );
  }

  get id(): PeerId {
    return this.options.id;
  }

  /** When this node's first data channel opened (its `now` scale); null before. */
  get firstLinkOpenedAtMs(): number | null {
    return this.firstLinkOpenedAt;
  }

  /** When this node started its first connection, dialling or answering (its `now` scale); null before. */
  get firstLinkStartedAtMs(): number | null {
    return this.firstLinkStartedAt;
  }

  /** Peers with an open data channel. */
  get openPeers(): number {
    let n = 0;
    for (const link of this.links.values()) if (link.open) n++;
    return n;
  }

  start(): void {
    this.renegotiationTimer = setInterval(() => {
      this.renegotiations = 0;
    }, RENEGOTIATION_WINDOW_MS);
    this.statsTimer = setInterval(() => {
      this.closeIdleLinks();
      void this.readAllLinkStats();
    }, LINK_STATS_INTERVAL_MS);
    this.feed({ kind: 'start' });
  }

  bootstrap(peers: readonly PeerId[]): void {
    this.feed({
      kind: 'bootstrap',
      peers: peers.filter((p) => p !== this.id && !this.blocked.has(p) && !this.backingOff(p)),
    });
  }

  /** Every open link: its route, round-trip time and bytes as last read (every LINK_STATS_INTERVAL_MS). */
  peerLinks(): PeerLinkStats[] {
    const out: PeerLinkStats[] = [];
    for (const [peer, link] of this.links) {
      if (!link.open) continue;
      const pair = link.pair;
      out.push({
        peer,
        route: pair?.route ?? null,
        localCandidateType: pair?.localCandidateType ?? null,
        remoteCandidateType: pair?.remoteCandidateType ?? null,
        rttMs: pair?.rttMs ?? null,
        bytesSent: pair?.bytesSent ?? 0,
        bytesReceived: pair?.bytesReceived ?? 0,
        mediaBytesReceived: link.mediaBytesReceived,
        openedAtMs: link.openedAtMs ?? 0,
      });
    }
    return out;
  }

  /**
   * Bytes the links' transports sent and received (their selected candidate pairs: media, control,
   * SCTP and DTLS framing and acknowledgements), links gone included, as last read.
   */
  transportBytes(): { sent: number; received: number } {
    let sent = this.goneTransportSentBytes;
    let received = this.goneTransportReceivedBytes;
    for (const link of this.links.values())
      if (link.pair !== null) {
        sent += link.pair.bytesSent;
        received += link.pair.bytesReceived;
      }
    return { sent, received };
  }

  /** Open links by route type (links whose route is not known yet are not counted). */
  openByRoute(): RouteCounts {
    const open: Record<RouteType, number> = { host: 0, srflx: 0, prflx: 0, relay: 0 };
    for (const link of this.links.values())
      if (link.open && link.pair?.route != null) open[link.pair.route]++;
    return open;
  }

  /** This node's part of a tracker report (cumulative since it started). */
  connectivity(): ConnectivityReport {
    return {
      open: this.openByRoute(),
      connected: { ...this.connectedByRoute },
      failed: this.counters.connectFailures,
      relayedBytes: this.counters.relayedBytes,
    };
  }

  /**
   * Peers cut off since the last call, for the tracker's report: the tracker stops signalling new
   * connections for a peer several members cut off (tracker cut-offs.ts), so it cannot walk on to
   * fresh neighbours.
   */
  takeCutOffs(): PeerId[] {
    return this.cutOffsToReport.splice(0);
  }

  /**
   * True source only: the next packet of the stream, optionally with its stream-wide number (the one
   * its signed announcement implies; numbers may be skipped, never reused).
   */
  publish(payload: Uint8Array, packet?: number): void {
    this.feed(packet === undefined ? { kind: 'publish', payload } : { kind: 'publish', payload, packet });
  }

  /**
   * The player's playback clock (see the engine's `playout` input): switches the engine's packet
   * repair on, and moves it. Only for a node whose host answers `fetchOrigin`; a bad clock is logged
   * and ignored (the engine refuses it).
   */
  playout(clock: {
    readonly zeroAtMs: number;
    readonly packetIntervalMs: number;
    readonly fromMs: number;
    readonly originRttMs?: number;
  }): void {
    if (this.options.fetchOrigin === undefined) {
      this.log('error', 'a playout clock needs the fetchOrigin option: ignored');
      return;
    }
    this.feed({ kind: 'playout', ...clock });
  }

  /**
   * The player needs these stream-wide packets by `atMs` (the engine's `deadline` input: a segment
   * taken whole). Only with a playout clock's host; a bad span is logged and ignored.
   */
  deadline(span: { readonly firstPacket: number; readonly packets: number; readonly atMs: number }): void {
    if (this.options.fetchOrigin === undefined) {
      this.log('error', 'a deadline needs the fetchOrigin option: ignored');
      return;
    }
    this.feed({ kind: 'deadline', ...span });
  }

  /**
   * A packet fetched from the origin for the engine's `fetchOrigin`, already checked against its
   * announced hash by the host: the engine delivers it (if still needed) and forwards it down the tree.
   */
  originPacket(slice: number, seq: number, payload: Uint8Array): void {
    this.feed({ kind: 'originPacket', slice, seq, payload });
  }

  /** A trusted word on the newest sequence the true source has dealt (from a verified announcement). */
  liveSequence(seq: number): void {
    this.feed({ kind: 'liveSequence', seq });
  }

  /**
   * Signalling from `from`, relayed by the tracker. Every signal carries the id of the connection
   * it belongs to (`link`: chosen at random by the dialling side, echoed by the answering side), and
   * a connection accepts only its own: one offer or one answer, then candidates. Anything else is
   * dropped — libdatachannel refuses an answer or candidate meant for another connection ("remote
   * candidate without ICE transport"; simple-peer then destroys the connection) and aborts the
   * whole process on a second offer to a connection that already answered ("Unexpected local
   * description type answer in signaling state stable"). So neither two peers dialling each other
   * at once nor a peer replaying signalling can break links or crash the true source.
   */
  handleSignal(from: PeerId, data: SignalData): void {
    if (this.stopped || from === this.id || this.blocked.has(from)) return;
    const pairId = data.link ?? 0;
    let link = this.links.get(from);
    if (data.type === 'offer') {
      if (link !== undefined) {
        if (link.pairId === pairId) return; // a repeat of the offer we answered
        // Both sides dialled at once ("glare"): the lower id's offer wins, on both sides.
        if (link.initiator && !link.open && this.id < from) return;
        // Otherwise the peer started over (its side of any old connection is gone): so do we.
        if (this.renegotiations++ > MAX_RENEGOTIATIONS_PER_MINUTE) return;
        this.retire(from, link);
      }
      link = this.createLink(from, false, pairId, link);
    } else {
      if (link?.pairId !== pairId) return; // for another (or a dropped) connection
      if (data.type === 'answer') {
        if (!link.initiator || link.answered) return;
        link.answered = true;
      }
    }
    try {
      link.peer.signal(data);
    } catch (e) {
      this.log('debug', 'bad signal from peer', { peer: from, error: String(e) });
    }
  }

  /**
   * New TL and ML for the engine (the session measured the uplink): the load phase moves children
   * away above them, and the next adverts carry them. A bad value is logged and ignored.
   */
  setLoad(targetLoadSlices: number, maxLoadSlices: number): void {
    this.feed({ kind: 'setLoad', targetLoadSlices, maxLoadSlices });
  }

  /**
   * Hand every child over now (the page is being frozen, or its timers are throttled): each finds
   * another parent at once instead of through the load phase. The session sets ML 0 first.
   */
  releaseChildren(): void {
    this.feed({ kind: 'releaseChildren' });
  }

  /**
   * What the uplink carried so far and what waits, summed over the open links, for the session's
   * capacity estimate (capacity.ts). A link counts as busy if it wrote or holds BUSY_LINK_BYTES
   * since the previous call (data, not an advert), and as behind if it holds LINK_BACKLOG_BYTES or
   * more unsent.
   */
  uplinkSample(): UplinkSample {
    const transport = this.transportSent;
    let channelBufferedBytes = 0;
    let queuedBytes = 0;
    let busyLinks = 0;
    let backloggedLinks = 0;
    for (const link of this.links.values()) {
      if (!link.open) continue;
      const buffered = link.peer.bufferSize;
      const unsent = buffered + link.queuedBytes;
      const wrote = link.writtenBytes - link.sampledWrittenBytes;
      link.sampledWrittenBytes = link.writtenBytes;
      link.sampledBufferedBytes = buffered;
      channelBufferedBytes += buffered;
      queuedBytes += link.queuedBytes;
      if (wrote >= BUSY_LINK_BYTES || unsent >= BUSY_LINK_BYTES) busyLinks++;
      if (unsent >= LINK_BACKLOG_BYTES) backloggedLinks++;
    }
    return {
      // Bytes left behind in the channels of lost links were never sent: not drained.
      writtenBytes: this.counters.bytesWritten - this.abandonedBytes,
      channelBufferedBytes,
      queuedBytes,
      busyLinks,
      backloggedLinks,
      ...(transport === null
        ? {}
        : { transportSentBytes: transport.bytes, transportReadAtMs: transport.atMs }),
    };
  }

  /** Peers with an open data channel (repair helpers are chosen among them). */
  openPeerIds(): PeerId[] {
    const out: PeerId[] = [];
    for (const [peerId, link] of this.links) if (link.open) out.push(peerId);
    return out;
  }

  /** Peers whose link is being set up (dialled or answered, its channel not open yet). */
  connectingPeerIds(): PeerId[] {
    const out: PeerId[] = [];
    for (const [peerId, link] of this.links) if (!link.open) out.push(peerId);
    return out;
  }

  /** Sends a repair message over an open link; false if there is none (repair never dials). */
  sendRepair(to: PeerId, message: RepairMessage): boolean {
    const link = this.links.get(to);
    if (link?.open !== true || this.blocked.has(to)) return false;
    const isData = message.type === MessageType.RepairData;
    const sent = this.enqueue(to, link, encode(message), message.type, isData);
    if (sent && isData) this.counters.repairUploadBytes += message.payload.length;
    return sent;
  }

  /** The host found a forged packet from `peer` outside the tree (a repair reply). */
  reportForged(peer: PeerId): void {
    const link = this.links.get(peer);
    if (link !== undefined) this.forged(peer, link);
  }

  /**
   * Sends a signed announcement to one neighbour over an open link (never dials). It goes as
   * control, ahead of queued data: it is what lets the neighbour check the packets behind it.
   */
  sendAnnouncement(to: PeerId, announcement: SignedAnnouncement): boolean {
    return this.broadcastEncoded(encode({ type: MessageType.Announcement, announcement }), [to]) === 1;
  }

  /**
   * Sends a signed announcement to every neighbour with an open link but `except` (one peer or
   * several: those that told us); returns to how many. Encoded once for all of them.
   */
  broadcastAnnouncement(announcement: SignedAnnouncement, except?: PeerId | readonly PeerId[]): number {
    const skip = except === undefined ? [] : typeof except === 'number' ? [except] : except;
    const to = this.openPeerIds().filter((p) => !skip.includes(p));
    if (to.length === 0) return 0;
    return this.broadcastEncoded(encode({ type: MessageType.Announcement, announcement }), to);
  }

  /** The host found an announcement from `peer` whose signature fails: it counts like a forged packet. */
  reportForgedAnnouncement(peer: PeerId): void {
    this.counters.forgedAnnouncements++;
    const link = this.links.get(peer);
    if (link !== undefined) this.strike(peer, link, 'forged announcement');
  }

  private broadcastEncoded(bytes: Uint8Array, to: readonly PeerId[]): number {
    let sent = 0;
    for (const peerId of to) {
      const link = this.links.get(peerId);
      if (link?.open !== true || this.blocked.has(peerId)) continue;
      if (this.enqueue(peerId, link, bytes, MessageType.Announcement, false, true)) sent++;
    }
    this.counters.announcementsSent += sent;
    return sent;
  }

  /** Leave: gracefully (children are told and served a little longer) or at once. */
  async stop(graceful: boolean): Promise<void> {
    if (this.stopped) return;
    this.feed({ kind: 'quit', graceful });
    if (graceful) {
      const lingerMs = this.engine.config.protocol.quitLingerMs;
      await new Promise((resolve) => setTimeout(resolve, lingerMs));
    }
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.flushTimer !== null) clearInterval(this.flushTimer);
    if (this.renegotiationTimer !== null) clearInterval(this.renegotiationTimer);
    if (this.heldTimer !== null) clearInterval(this.heldTimer);
    if (this.statsTimer !== null) clearInterval(this.statsTimer);
    for (const [peerId, link] of this.links) this.closeLink(peerId, link);
  }

  // ───────────────────────────── engine loop ─────────────────────────────

  private feed(input: Input): void {
    if (this.stopped) return;
    this.inputs.push(input);
    if (this.running) return; // re-entered from an action's side effect: handled by the loop below
    this.running = true;
    try {
      for (let next = this.inputs.shift(); next !== undefined; next = this.inputs.shift()) {
        let actions: Action[];
        try {
          actions = this.engine.handle(this.now(), next);
        } catch (e) {
          this.log('error', 'engine refused an input', { input: next.kind, error: String(e) });
          continue;
        }
        for (const action of actions)
          try {
            this.perform(action);
          } catch (e) {
            // One action that fails (a message that does not encode, a host callback that throws)
            // must not cost the rest of the batch: the timers and sends after it still happen.
            this.counters.actionsFailed++;
            this.log('error', 'an engine action failed', { action: action.kind, error: String(e) });
          }
      }
    } finally {
      this.running = false;
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    const deadline = this.engine.nextDeadline();
    if (deadline === this.timerAt) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = deadline;
    if (deadline === Infinity) return;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.timerAt = Infinity;
        this.feed({ kind: 'timer' });
      },
      Math.max(0, deadline - this.now()),
    );
  }

  private perform(action: Action): void {
    switch (action.kind) {
      case 'send':
        this.send(action.to, action.message);
        break;
      case 'deliver':
        this.options.deliver(action.slice, action.seq, action.payload, action.from, action.hops, action.via);
        break;
      case 'requestBootstrap':
        this.options.requestBootstrap(action.count);
        break;
      case 'disconnect': {
        const link = this.links.get(action.peer);
        if (link !== undefined) this.closeLink(action.peer, link);
        break;
      }
      case 'event':
        if (action.event.type === 'neighbourDown' && action.event.reason === 'cutOff')
          this.cutOff(action.event.peer, 'cut off by the engine', true);
        this.options.onEvent?.(action.event);
        break;
      case 'fetchOrigin':
        // The engine's packet repair asks this as its last resort, and only once the host gave it a
        // playout clock, which `playout` allows only with a host that answers. An engine that asks
        // anyway is a host error, made loud: counted in actionsFailed and logged, never ignored.
        if (this.options.fetchOrigin === undefined)
          throw new Error(
            `the engine asked for ${action.seqs.length} packets of slice ${action.slice} from the origin, ` +
              'but this MeshNode has no fetchOrigin host',
          );
        this.options.fetchOrigin(action.slice, action.seqs);
        break;
      default:
        unreachable(action, 'engine action');
    }
  }

  // ───────────────────────────── transport ─────────────────────────────

  private send(to: PeerId, message: Message): void {
    if (this.blocked.has(to)) return;
    const isData = message.type === MessageType.Data;
    const member = this.options.role === 'member';
    const faults = this.faults;
    if (isData && member && faults.withholdForwardedData === true) return;
    const bytes = encode(
      isData && member && faults.corruptForwardedData === true
        ? { ...message, payload: corruptedPayload(message.payload) }
        : isData && member && faults.forgeForwardedSequences === true
          ? { ...message, seq: forgedSequence(message.seq) }
          : message,
    );
    let link = this.links.get(to);
    if (link === undefined) {
      if (this.backingOff(to)) {
        // Dialled and failed moments ago: another dial would most likely fail the same way.
        this.counters.dialsBackedOff++;
        this.feed({ kind: 'peerUnreachable', peer: to });
        return;
      }
      link = this.createLink(to, true);
    }
    if (this.enqueue(to, link, bytes, message.type, isData) && isData)
      this.counters.uploadBytes += message.payload.length;
  }

  /** Whether a link to `peer` failed before opening less than its backoff ago. */
  private backingOff(peer: PeerId): boolean {
    const failed = this.failedAt.get(peer);
    return failed !== undefined && this.now() - failed.at < failed.backoffMs;
  }

  private noteFailure(peer: PeerId): void {
    const now = this.now();
    const previous = this.failedAt.get(peer);
    const backoffMs =
      previous !== undefined && stillRemembered(previous, now)
        ? Math.min(2 * previous.backoffMs, DIAL_BACKOFF_MS)
        : FIRST_DIAL_BACKOFF_MS;
    this.failedAt.delete(peer); // re-inserted last: the map stays ordered by failure time
    this.failedAt.set(peer, { at: now, backoffMs });
    for (const [p, failed] of this.failedAt) {
      // Oldest failure first, up to the first still remembered (one after it may be kept past its
      // time until then: harmless).
      if (this.failedAt.size <= MAX_BACKOFF_ENTRIES && stillRemembered(failed, now)) break;
      this.failedAt.delete(p);
    }
  }

  /**
   * Reads every open link's stats at once; when all have answered, the total the transports sent
   * (links gone included) becomes the uplink sample's wire count, stamped with this moment.
   */
  private async readAllLinkStats(): Promise<void> {
    const reads: Promise<void>[] = [];
    for (const [peerId, link] of this.links) if (link.open) reads.push(this.readLinkStats(peerId, link));
    await Promise.all(reads);
    if (this.stopped) return;
    const { sent } = this.transportBytes();
    let known = false;
    for (const link of this.links.values()) known ||= link.pair !== null;
    if (!known && sent === 0) return; // no stats in this runtime (yet)
    this.transportSent = { atMs: this.now(), bytes: sent };
  }

  /**
   * Reads a link's selected candidate pair (route, round-trip time, bytes): at open and then every
   * LINK_STATS_INTERVAL_MS. Counts the link's route once it is known, and relayed bytes.
   */
  private async readLinkStats(peerId: PeerId, link: Link): Promise<void> {
    const pc = (link.peer as unknown as { _pc?: { getStats?: () => Promise<StatsReportLike> } })._pc;
    let pair: SelectedPair | null;
    try {
      if (pc?.getStats === undefined) return;
      pair = selectedPairOfReport(await pc.getStats(), link.statsMemo, ON_NODE_DATACHANNEL ? 'ms' : 's');
    } catch {
      return; // closed meanwhile, or a runtime without stats: the route stays unknown
    }
    if (pair === null || this.links.get(peerId) !== link || !link.open) return;
    // Relay-only links are relayed whatever the pair's ends say: libjuice (node-datachannel) reports
    // its relayed end as `host` (seen against coturn, whose log showed the allocation in use).
    if (link.relayOnly && pair.route !== null) pair = { ...pair, route: 'relay' };
    const before = link.pair === null ? 0 : link.pair.bytesSent + link.pair.bytesReceived;
    const after = pair.bytesSent + pair.bytesReceived;
    if (pair.route === 'relay' && after > before) this.counters.relayedBytes += after - before;
    if (!link.routeCounted && pair.route !== null) {
      link.routeCounted = true;
      this.connectedByRoute[pair.route]++;
    }
    link.pair = pair;
    // The engine prefers direct links for tree edges: tell it once the route is known, and again
    // whenever it changes (an ICE restart, or the pair reselected). A lost link needs nothing: the
    // engine forgets the route with the peer (peerUnreachable).
    const relayed = pair.route === 'relay';
    if (pair.route !== null && link.relayedFed !== relayed) {
      link.relayedFed = relayed;
      this.feed({ kind: 'linkRoute', peer: peerId, relayed });
    }
  }

  /**
   * Sends now, or queues behind the channel's backpressure; false if a data message was dropped.
   * `ahead` (announcements) queues before everything but earlier announcements: the engine's
   * control messages keep their order among themselves, and an announcement is independent of them.
   */
  private enqueue(
    to: PeerId,
    link: Link,
    bytes: Uint8Array,
    type: MessageType,
    isData: boolean,
    ahead = false,
  ): boolean {
    if (!ahead) link.lastActiveAt = this.now();
    if (
      link.open &&
      link.queue.length === 0 &&
      link.peer.bufferSize < this.channelHighWaterBytes &&
      (!isData || this.uploadAllowed())
    ) {
      this.transmit(to, link, bytes, type);
      return true;
    }
    if (isData && link.queuedBytes + bytes.length > MAX_QUEUED_BYTES) {
      this.counters.droppedForBackpressure++;
      return false;
    }
    const item: QueuedMessage = { bytes, type, isData, ahead, queuedAtMs: this.now() };
    if (ahead) {
      let at = 0;
      while (at < link.queue.length && link.queue[at]?.ahead === true) at++;
      link.queue.splice(at, 0, item);
    } else link.queue.push(item);
    link.queuedBytes += bytes.length;
    if (link.open) this.ensureFlushing();
    return true;
  }

  private transmit(to: PeerId, link: Link, bytes: Uint8Array, type: MessageType): void {
    if (bytes.length > link.maxMessageBytes) {
      // send() would throw, which reads as a closed channel and would cost a healthy link.
      this.counters.oversizeDropped++;
      this.log('warn', 'message larger than the link takes: not sent', {
        peer: to,
        bytes: bytes.length,
        maxMessageBytes: link.maxMessageBytes,
      });
      return;
    }
    try {
      link.peer.send(bytes);
      this.counters.messagesSent++;
      this.counters.bytesWritten += bytes.length;
      this.traffic.sent(type, bytes.length);
      link.writtenBytes += bytes.length;
      this.uploadBucket?.spend(this.now(), bytes.length);
    } catch (e) {
      // The channel closed under us (its close event may not have fired yet).
      this.linkGone(to, link, `send failed: ${String(e)}`);
    }
  }

  private ensureFlushing(): void {
    if (this.flushTimer !== null) return;
    this.flushTimer = setInterval(() => {
      this.flushAll();
    }, FLUSH_INTERVAL_MS);
  }

  /**
   * A link is going: what the last uplinkSample counted in its channel will never be sent. Taking
   * exactly that out of the written bytes keeps the link's disappearance from reading as a drain.
   */
  private abandon(link: Link): void {
    if (!link.open) return;
    this.abandonedBytes += link.sampledBufferedBytes;
    link.sampledBufferedBytes = 0;
  }

  /** Whether the upload cap lets data out now (always, without a cap). */
  private uploadAllowed(): boolean {
    return this.uploadBucket?.allowsData(this.now()) ?? true;
  }

  private flushAll(): void {
    let pending = false;
    const links = [...this.links];
    // Round robin: under the upload cap the first link flushed takes the tokens.
    const start = links.length === 0 ? 0 : this.flushTurn++ % links.length;
    for (let i = 0; i < links.length; i++) {
      const [peerId, link] = links[(start + i) % links.length] as [PeerId, Link];
      if (link.open) this.flush(peerId, link);
      if (link.open && link.queue.length > 0) pending = true;
    }
    if (!pending && this.flushTimer !== null) {
      clearInterval(this.flushTimer);
      this.flushTimer = null;
    }
  }

  private flush(peerId: PeerId, link: Link): void {
    this.dropStaleData(link);
    while (link.open && link.queue.length > 0 && link.peer.bufferSize < this.channelHighWaterBytes) {
      // The queue keeps its order (hand-offs rely on it): data at its head waits for the cap, and
      // so does what follows it.
      if (link.queue[0]?.isData === true && !this.uploadAllowed()) break;
      const item = link.queue.shift();
      if (item === undefined) break;
      link.queuedBytes -= item.bytes.length;
      this.transmit(peerId, link, item.bytes, item.type);
    }
  }

  /** Drops the data that waited MAX_DATA_QUEUE_AGE_MS in the link's queue (the head is the oldest). */
  private dropStaleData(link: Link): void {
    const head = link.queue[0];
    const cutoff = this.now() - MAX_DATA_QUEUE_AGE_MS;
    if (head === undefined || head.queuedAtMs > cutoff) return;
    link.queue = link.queue.filter((item) => {
      if (!item.isData || item.queuedAtMs > cutoff) return true;
      link.queuedBytes -= item.bytes.length;
      this.counters.droppedStale++;
      return false;
    });
  }

  /**
   * The uplink's measured capacity (null: unknown): each link's channel then holds at most
   * CHANNEL_BUFFER_MS of its share of it, the rest waiting in the host's queue.
   */
  setUplinkCapacity(kbps: number | null): void {
    if (kbps === null || !(kbps > 0)) {
      this.channelHighWaterBytes = CHANNEL_HIGH_WATER_BYTES;
      return;
    }
    let busy = 0;
    for (const link of this.links.values()) if (link.open && link.writtenBytes > 0) busy++;
    const share = (kbps * 1000) / 8 / Math.max(1, busy);
    this.channelHighWaterBytes = Math.round(
      Math.min(
        CHANNEL_HIGH_WATER_BYTES,
        Math.max(MIN_CHANNEL_HIGH_WATER_BYTES, (share * CHANNEL_BUFFER_MS) / 1000),
      ),
    );
  }

  private createLink(
    peerId: PeerId,
    initiator: boolean,
    pairId = crypto.getRandomValues(new Uint32Array(1))[0] ?? 0,
    inherited?: Link,
  ): Link {
    const rtcConfig = this.options.rtcConfig;
    const config = typeof rtcConfig === 'function' ? rtcConfig() : rtcConfig;
    const peer = new SimplePeer({
      initiator,
      // Whole SDPs, no trickled candidates: node-datachannel refused candidates racing the answer
      // ("remote candidate without ICE transport", fatal to the connection), and one offer and one
      // answer per link is also the least load on the tracker. Host candidates gather in
      // milliseconds; with STUN/TURN servers gathering is cut off after ICE_GATHER_TIMEOUT_MS.
      trickle: false,
      iceCompleteTimeout: ICE_GATHER_TIMEOUT_MS,
      config: ON_NODE_DATACHANNEL ? forNodeDatachannel(config) : config,
      channelConfig: { ordered: true },
    });
    sendDescriptionWhenUsable(peer, config);
    const link: Link = {
      peer,
      initiator,
      open: false,
      closingByUs: false,
      queue: inherited?.queue ?? [],
      queuedBytes: inherited?.queuedBytes ?? 0,
      writtenBytes: 0,
      sampledWrittenBytes: 0,
      sampledBufferedBytes: 0,
      badMessages: inherited?.badMessages ?? 0,
      mediaBytesReceived: 0,
      maxMessageBytes: MAX_MESSAGE_BYTES,
      forgedPackets: inherited?.forgedPackets ?? 0,
      pairId,
      answered: false,
      connectTimer: null,
      createdAt: this.now(),
      lastActiveAt: this.now(),
      openedAtMs: null,
      pair: null,
      routeCounted: false,
      statsMemo: { transportId: null },
      relayOnly: config.iceTransportPolicy === 'relay',
      relayedFed: null,
    };
    this.links.set(peerId, link);
    this.firstLinkStartedAt ??= link.createdAt;
    link.connectTimer = setTimeout(() => {
      link.connectTimer = null;
      if (link.open || this.links.get(peerId) !== link) return;
      this.linkGone(peerId, link, 'connect timeout', 'connect-timeout');
    }, this.options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS);
    peer.on('signal', (data) => {
      const type = (data as { type?: unknown }).type;
      // simple-peer may also emit 'renegotiate'/'transceiverRequest': a data-only peer never needs them.
      if (type === 'offer' || type === 'answer' || type === 'candidate')
        this.options.signal(peerId, { ...(data as SignalData), link: link.pairId });
    });
    const createdAt = link.createdAt;
    peer.on('connect', () => {
      if (this.links.get(peerId) !== link) return;
      link.open = true;
      link.openedAtMs = Date.now();
      this.firstLinkOpenedAt ??= this.now();
      link.maxMessageBytes = sendLimitOf(peer);
      this.failedAt.delete(peerId);
      // The route at once, so a link that closes before the next stats round is still counted.
      void this.readLinkStats(peerId, link);
      this.log('debug', 'peer link open', {
        peer: peerId,
        initiator,
        setupMs: Math.round(this.now() - createdAt),
      });
      if (link.connectTimer !== null) clearTimeout(link.connectTimer);
      link.connectTimer = null;
      this.flush(peerId, link);
      if (link.queue.length > 0) this.ensureFlushing();
    });
    peer.on('data', (bytes) => {
      this.onData(peerId, link, bytes);
    });
    peer.on('close', () => {
      this.linkGone(peerId, link, 'closed', 'closed-before-open');
    });
    peer.on('error', (error) => {
      // simple-peer ends the connection with these when ICE (or the whole connection) reports `failed`.
      const iceFailed =
        error.code === 'ERR_ICE_CONNECTION_FAILURE' || error.code === 'ERR_CONNECTION_FAILURE';
      this.linkGone(
        peerId,
        link,
        `error ${error.code ?? ''}: ${error.message}`,
        iceFailed ? 'ice-failed' : 'error',
      );
    });
    return link;
  }

  private onData(peerId: PeerId, link: Link, bytes: Uint8Array): void {
    if (this.links.get(peerId) !== link || this.stopped) return;
    this.counters.messagesReceived++;
    const decoded = decode(bytes, this.payloadSlabs.allocate);
    if (!decoded.ok) {
      this.counters.badMessages++;
      link.badMessages++;
      this.log('warn', 'undecodable message from peer', {
        peer: peerId,
        kind: decoded.error.kind,
        error: decoded.error.message,
      });
      if (link.badMessages >= MAX_BAD_MESSAGES) this.cutOff(peerId, 'undecodable messages');
      return;
    }
    const message = decoded.message;
    this.traffic.received(message.type, bytes.length);
    if (message.type !== MessageType.Announcement) link.lastActiveAt = this.now();
    if (
      message.type === MessageType.Data ||
      message.type === MessageType.RepairData ||
      message.type === MessageType.PacketRepairData
    ) {
      if (this.dropFraction > 0 && this.lossRandom.nextFloat() < this.dropFraction) {
        this.counters.injectedLosses++;
        return;
      }
      link.mediaBytesReceived += message.payload.length;
    }
    if (
      message.type === MessageType.RepairRequest ||
      message.type === MessageType.RepairData ||
      message.type === MessageType.RepairNak
    ) {
      this.options.onRepair?.(peerId, message);
      return;
    }
    if (message.type === MessageType.Announcement) {
      // The host's, like repair: it holds the segment store and the broadcaster's key.
      this.options.onAnnouncement?.(peerId, message.announcement);
      return;
    }
    // A neighbour's packet repair is checked like a tree packet: the engine forwards it down the tree.
    if (
      (message.type === MessageType.Data || message.type === MessageType.PacketRepairData) &&
      this.options.inspectData !== undefined
    ) {
      const verdict = this.options.inspectData(message.slice, message.seq, message.payload);
      if (verdict === 'reject') {
        this.forged(peerId, link);
        return;
      }
      if (verdict === 'hold') {
        this.hold(peerId, message);
        return;
      }
    }
    this.feed({ kind: 'message', from: peerId, message });
  }

  /** A packet failed its announced hash: drop it, and cut off a peer that keeps sending such. */
  private forged(peerId: PeerId, link: Link): void {
    this.counters.forgedPackets++;
    this.strike(peerId, link, 'forged packet');
  }

  /** One forgery from `peerId`: MAX_FORGED_PACKETS of them (packets and announcements) cut it off. */
  private strike(peerId: PeerId, link: Link, what: string): void {
    link.forgedPackets++;
    this.log('warn', `${what} from peer dropped`, { peer: peerId, forged: link.forgedPackets });
    if (link.forgedPackets >= MAX_FORGED_PACKETS) this.cutOff(peerId, 'forged packets or announcements');
  }

  /**
   * A misbehaving peer: refuse its offers from now on and close its link. The engine is told the
   * peer is gone, unless the engine itself decided (it already dropped the peer).
   */
  private cutOff(peerId: PeerId, reason: string, byEngine = false): void {
    if (!this.blocked.has(peerId) && this.cutOffsToReport.length < MAX_REPORT_CUT_OFFS)
      this.cutOffsToReport.push(peerId);
    this.blocked.add(peerId);
    this.counters.peersCutOff++;
    const link = this.links.get(peerId);
    if (link === undefined) return;
    if (byEngine) link.closingByUs = true;
    this.linkGone(peerId, link, reason);
  }

  private hold(from: PeerId, message: DataMessage | PacketRepairDataMessage): void {
    if (this.held.length >= MAX_HELD_PACKETS) {
      this.counters.heldPacketsDropped++;
      return;
    }
    this.held.push({ from, message, at: this.now() });
    this.heldTimer ??= setInterval(() => {
      this.recheckHeld();
    }, HELD_RECHECK_INTERVAL_MS);
  }

  /** New announcements arrived (or time passed): feed held packets that can now be checked. */
  recheckHeld(): void {
    const inspect = this.options.inspectData;
    if (inspect === undefined) return;
    const now = this.now();
    const still: typeof this.held = [];
    for (const h of this.held) {
      const link = this.links.get(h.from);
      if (link === undefined || this.blocked.has(h.from)) continue;
      const verdict = inspect(h.message.slice, h.message.seq, h.message.payload);
      if (verdict === 'accept') this.feed({ kind: 'message', from: h.from, message: h.message });
      else if (verdict === 'reject') this.forged(h.from, link);
      else if (now - h.at < HOLD_MAX_MS) still.push(h);
      else this.counters.heldPacketsDropped++;
    }
    this.held = still;
    if (still.length === 0 && this.heldTimer !== null) {
      clearInterval(this.heldTimer);
      this.heldTimer = null;
    }
  }

  /** Drop a link that a fresh one replaces (an incoming offer); its queued messages move over. */
  private retire(peerId: PeerId, old: Link): void {
    this.abandon(old);
    old.closingByUs = true;
    this.links.delete(peerId);
    if (old.connectTimer !== null) clearTimeout(old.connectTimer);
    old.peer.destroy();
  }

  /**
   * Closes links idle for idleLinkCloseMs (IDLE_LINK_CLOSE_MS), unless the engine still counts the
   * peer among its relations (a page whose timers were held back, say) or, at a member, the peer is
   * the true source. The engine is not told: it kept no state for the peer, and a later send dials
   * again.
   */
  private closeIdleLinks(): void {
    const idleMs = this.options.idleLinkCloseMs ?? IDLE_LINK_CLOSE_MS;
    if (!(idleMs > 0)) return; // 0 (or not a number): never
    const now = this.now();
    let related: Set<PeerId> | null = null;
    for (const [peerId, link] of this.links) {
      if (!link.open || peerId === this.options.sourceId || now - link.lastActiveAt < idleMs) continue;
      related ??= this.engine.relations();
      if (related.has(peerId)) continue;
      this.counters.idleLinksClosed++;
      this.log('debug', 'idle peer link closed', {
        peer: peerId,
        idleMs: Math.round(now - link.lastActiveAt),
      });
      this.closeLink(peerId, link);
    }
  }

  private closeLink(peerId: PeerId, link: Link): void {
    link.closingByUs = true;
    this.linkGone(peerId, link, 'closed by us');
  }

  /**
   * The link is finished: forget it and, unless we closed it, tell the engine the peer is gone. One
   * that never opened is a connect failure (`failure` says why): counted, reported, and the peer is
   * not dialled again for a while (FIRST_DIAL_BACKOFF_MS, doubling up to DIAL_BACKOFF_MS).
   */
  private linkGone(
    peerId: PeerId,
    link: Link,
    reason: string,
    failure: ConnectFailureReason = 'error',
  ): void {
    if (link.connectTimer !== null) clearTimeout(link.connectTimer);
    link.connectTimer = null;
    const wasCurrent = this.links.get(peerId) === link;
    if (wasCurrent) this.links.delete(peerId);
    this.abandon(link);
    // Its wire count stays in the total (which only grows), as last read.
    if (link.pair !== null) {
      this.goneTransportSentBytes += link.pair.bytesSent;
      this.goneTransportReceivedBytes += link.pair.bytesReceived;
    }
    link.pair = null;
    if (wasCurrent && !link.closingByUs && !link.open && !this.stopped) {
      this.counters.connectFailures++;
      this.noteFailure(peerId);
      const afterMs = Math.round(this.now() - link.createdAt);
      this.log('debug', 'peer link failed before opening', { peer: peerId, failure, afterMs, reason });
      this.options.onConnectFailure?.({ peer: peerId, reason: failure, afterMs, initiator: link.initiator });
    }
    link.open = false;
    if (!link.peer.destroyed) link.peer.destroy();
    if (wasCurrent && !link.closingByUs) {
      this.log('info', 'peer link lost', { peer: peerId, reason, initiator: link.initiator });
      this.feed({ kind: 'peerUnreachable', peer: peerId });
    }
  }
}
