import {
  createRandom,
  shuffleInPlace,
  type EngineEvent,
  type ProtocolConfig,
  type Random,
} from '@chunkycast/engine';
import {
  MAX_BOOTSTRAP_PEERS,
  MessageType,
  RepairNakReason,
  decodeMediaPacket,
  encodeMediaPacket,
  headerCount,
  planOf,
  packetPlace,
  packetRange,
  ROUTE_TYPES,
  type ConnectivityReport,
  type PeerId,
  type PeerReport,
  type RouteType,
  type ServerMessage,
} from '@chunkycast/wire';
// Audited and synchronous: a packet must be checked before the engine forwards it, and WebCrypto's
// digest is asynchronous (whole segments are still checked with WebCrypto).
import { sha256 } from '@noble/hashes/sha2.js';
import { AnnouncementRelay } from './announcements.js';
import { faultsOf, withFaults } from './faults.js';
import {
  MeshNode,
  type DataVerdict,
  type LogFn,
  type MeshNodeOptions,
  type RepairMessage,
} from './mesh-node.js';
import {
  BITRATE_SEGMENTS,
  SAMPLE_INTERVAL_MS,
  UploadCapacity,
  streamKbps,
  type UploadCapacityMode,
} from './capacity.js';
import { PacketHasher, sha256OffThread, type PacketDigests } from './packet-hasher.js';
import { PacketSignatures } from './packet-signatures.js';
import {
  OriginRepair,
  playoutFor,
  resolvePacketRepair,
  SegmentPace,
  runPacketDigests,
  segmentDeadline,
  type PacketRepairMode,
} from './packet-repair.js';
import { SegmentStore, importPublicKey, matchesPacketHash } from './segments.js';
import {
  SYSTEM_CLOCK,
  TrackerClient,
  type ReconnectPolicy,
  type TrackerClock,
  type WebSocketFactory,
  type Welcome,
} from './tracker-client.js';
import { unreachable } from './unreachable.js';
import { TrafficCounts } from './traffic.js';
import {
  CANNOT_RELAY_REASONS,
  UploadPolicy,
  browserUploadPlatform,
  parseUploadMode,
  type UploadPlatform,
} from './upload-policy.js';
import {
  MeshError,
  STARTUP_SEGMENTS,
  type MeshSessionOptions,
  type MeshStats,
  type SegmentProvider,
} from './types.js';

/**
 * Engine settings for a live HLS stream. A 2 s segment of a ~1 Mbit/s stream is one packet per
 * slice, so a slice carries a burst every segment rather than the thesis's steady packet flow
 * (thesis §4.2, protocol parameters): "receiving" and "silent" must span a segment and its jitter, or every slice would look
 * idle between segments.
 */
export const LIVE_PROTOCOL: Partial<ProtocolConfig> = {
  // MinL, "the expected smallest target load" (thesis §4.2, parameters), is what gives a node at that
  // load the smallest degree, MND = 8. The engine's 4 is the thesis's population (TL 4–28); a browser
  // viewer declares one stream copy, TL 16, and with MinL 4 got degree 32: at 16 viewers every viewer
  // linked to all the others, and each link is a peer connection with its own SCTP and DTLS state,
  // adverts, heartbeats and stats reads every second (issue 17: per-viewer memory and CPU grew with
  // the swarm). 16 gives such a viewer MND's 8 neighbours; one that declares two copies gets 16.
  minLoadSlices: 16,
  receivingTimeoutMs: 5000,
  probeAfterSilenceMs: 4500,
  // Engine repair's last resort is an HTTP range request to the origin, not the thesis's 650 ms
  // overlay round trip (config.ts's 1500): 1.5 × a 250 ms round trip + 200 ms until the first fetch
  // measures the real one (OriginRepair's originRttMs). The engine also treats a packet as missing
  // 2 × this before its deadline; at 1500 that was before a segment cut whole was even published,
  // when the player's deadline is ~3 s after publication, and every packet went to the origin.
  originLeadMs: 600,
  // A slice root fetched a packet merely late (a live source's pace jitters by hundreds of ms) from
  // the origin at once: in the Node live test with engine repair the origin's share was 0.12 with
  // no root shortcut and 0.26 with it. A second leaves a late packet time to come; its children
  // wait for the root's copy meanwhile (Pending). (That test stayed noisy with it, 0.27–0.36.)
  rootOriginWaitMs: 1000,
  // The slice rings (dedupe, repair, hand-offs) in packets: the engine's 64 with the thesis-scale
  // resend window of 48 were 2 minutes of a ~1 Mbit/s stream here (a browser packet is ~125 ms of
  // stream, so 2 s per slice), 14 MiB of JS heap per viewer (issue 17's bench:cost: 24 MiB against
  // plain hls.js's 7). 24 per slice is 48 s at 1 Mbit/s and 10 s at 5 Mbit/s (16 KiB packets): more
  // than a player's buffer, the hand-off lead and the audit's 6 s lag plus its margin. Not fewer:
  // engine repair serves and takes only what is still in the rings, so they must span the playout
  // lead; at 16 (tried for issue 17's memory goal) the loopback engine-repair test, 5 packets per
  // slice a second and a 5 s lead, never recovered its window (3.2 s of ring).
  resendWindowPackets: 24,
  minRingPackets: 24,
  // ...and their bytes for 20 s at most: at 1 Mbit/s the 24 slots span 48 s, and the 28 s past 20
  // held ~3 MiB of JS heap that neither the player (8 s behind live by default, 2 s at `low`) nor the
  // audit's 6 s lag nor a hand-off reaches. Segment repair serves from the segment store, not
  // the rings; engine repair serves what plays within the player's buffer, well inside 20 s. A
  // fast stream (5 Mbit/s: 10 s in 24 slots) is bounded by the slots first.
  ringPayloadMaxAgeMs: 20_000,
  // A slice root still beats every 500 ms (config.ts), but a page's timers and main thread are
  // less punctual than a simulated node's: a hidden page's timers run at most once a second, and a
  // busy one (decoding, a collection) can hold a beat back for hundreds of ms. A root given up
  // wrongly costs its whole slice tree a re-flood, so the true source waits six beats, not three.
  // A tab that closes is noticed sooner anyway: its data channel closes (peerUnreachable).
  rootFailureTimeoutMs: 3000,
};

/** Stream copies a viewer forwards by default: TL = M = 16 slices is one copy (the thesis's TL = 16). */
const DEFAULT_TARGET_LOAD_SLICES = 16;
/** ML = 1.5·TL (the thesis's maximum load, chunkyspread.md). */
const MAX_LOAD_FACTOR = 1.5;
/** Cap on load attributes: 64 stream copies is far beyond any browser's upload. */
const MAX_LOAD_LIMIT_SLICES = 1024;
const STATS_INTERVAL_MS = 1000;
/**
 * Of the loader's wait for a segment, the last this many ms go to completing a partial segment from
 * the origin: a loopback range request takes a few ms, a real one a round trip or two.
 */
const ORIGIN_FILL_LEAD_MS = 800;
/**
 * Neighbours are asked this long before the origin would be: a loopback round trip is milliseconds, a
 * real one tens; a neighbour that NAKs or is slow leaves the rest of the time to the origin.
 */
const REPAIR_LEAD_MS = 1200;
/** Neighbours asked at once, the missing packets split between them. */
const REPAIR_HELPERS = 2;
/**
 * Repair requests remembered until answered (for passing a NAKed share to another neighbour); the
 * oldest is forgotten beyond this. A viewer asks for a few segments at startup and an occasional
 * gap later: 64 outstanding is far more than that.
 */
const MAX_REPAIRS_IN_FLIGHT = 64;
/**
 * Repair requests served per neighbour per window: an honest viewer asks for a few segments at
 * startup and for an occasional gap, far below 8 per 2 s.
 */
const MAX_REPAIRS_SERVED_PER_PEER = 8;
const REPAIR_WINDOW_MS = 2000;
/** A repair request is served up to this many packets (a larger ask is someone's bug or greed). */
const MAX_REPAIR_PACKETS_PER_REQUEST = 64;
/** More missing runs than this: the whole segment from the origin is cheaper than many requests. */
const MAX_ORIGIN_FILL_REQUESTS = 4;
/** Hashing a filled segment takes well under this. */
const ORIGIN_FILL_VERIFY_MS = 1000;
/**
 * While a joining viewer's first data channels are still opening, a segment from before it joined
 * waits for one this often (within the loader's budget) before asking neighbours for it.
 */
const CATCH_UP_POLL_MS = 50;
/**
 * The first segment's catch-up, at startup, waits at most this long (within the loader's startup
 * budget, 300 ms): a neighbour's answer took 30–130 ms when it came (N = 16, bench:compare
 * default), and a wait that brings nothing is added whole to the viewer's startup.
 */
const STARTUP_CATCH_UP_MS = 150;
/**
 * A catch-up every asked neighbour refused (none held the segment) is asked again every third of
 * the time left, within these bounds, while an answer still has time to arrive within the loader's
 * budget: a neighbour may hold it a moment later. Short budgets need the shorter interval: a
 * viewer's second segment has ~0.5 s (2 s buffered less the 1.5 s margin), and at 16 viewers three
 * early joiners took theirs from the origin 0.3 s after the first viewer had it, having been
 * refused before it did. A handful of requests of a few dozen bytes per catch-up.
 */
const CATCH_UP_REASK_MIN_MS = 100;
const CATCH_UP_REASK_MAX_MS = 250;
/**
 * Once every neighbour asked has refused a catch-up (nobody holds the segment yet), the viewer goes
 * to the origin after a random delay within this share of the time left, not at its deadline: the
 * suppression timer of SRM's repair (Floyd et al., "A reliable multicast framework for
 * light-weight sessions"; Chunkyspread's repair has no such step). The early joiners of a swarm all
 * start with segments written before any of them joined; with their channels open they refused
 * each other, each waited out its budget and all took the segment from the origin at once (N = 8,
 * 600 s: v1–v3 took all three of their first segments so). With the timer, the first to fire
 * fetches it and keeps it, and the others' re-asks find that copy. Half, so that a re-ask after the
 * first firing still has time to be answered.
 */
const CATCH_UP_SUPPRESSION_SHARE = 0.5;
const REPORT_INTERVAL_MS = 2000;
/**
 * Children per slice in a report to the tracker: its decoder refuses a report with more (wire's
 * report limit), and no honest node has this many.
 */
const MAX_REPORTED_CHILDREN = 256;
/**
 * Segments from the origin remembered until the store exists: hls.js asks for two or three at once
 * at startup, sometimes before the tracker's welcome.
 */
const MAX_EARLY_ORIGIN_SEGMENTS = 4;
/** Player deadlines remembered for segments not yet announced (engine repair's playout clock). */
const MAX_AWAITED_DEADLINES = 16;
/** Repair budgets remembered at most: beyond, they are forgotten at once (ids of long-gone peers). */
const MAX_REPAIR_BUDGETS = 1024;
/**
 * Mixed into the crypto-drawn seed of the session's own PRNG (which picks repair helpers). Any
 * constant would do; this one is kept so the session draws as it did.
 */
const REPAIR_RANDOM_SALT = 0x5eed_5eed;

/**
 * Checks a media packet before the engine forwards it. Against its segment's signed announcement
 * when there is one: the first 16 bytes of its SHA-256 must equal the announced ones, and a tree
 * packet (`place`) must travel on the slice and under the sequence the announcement's `firstPacket`
 * gives it, so a genuine payload replayed under a forged sequence is refused too (issue 18). A packet
 * of a segment still being written (count 0, issue 14) comes before any announcement: it is checked
 * by its own signature (`signatures`; 'hold' while that is verified), its place by its signed packet
 * number. Any other packet of a segment not yet announced is held (the announcement usually arrives
 * first; see MeshNode's HOLD_MAX_MS).
 */
export function inspectPacket(
  store: SegmentStore,
  payload: Uint8Array,
  place?: { readonly slice: number; readonly seq: number; readonly dataSlices: number },
  signatures?: PacketSignatures,
  hasher?: PacketDigests,
): DataVerdict {
  const decoded = decodeMediaPacket(payload);
  if (!decoded.ok) return 'reject';
  const packet = decoded.packet;
  const { segment, index, count, bytes, signed } = packet;
  const announcement = store.announcement(segment);
  // Hashed only once nothing cheaper decides: held packets are looked at again and again.
  if (announcement === null) {
    if (signed === undefined || signatures === undefined) return 'hold';
    if (place !== undefined) {
      const dealt = packetPlace(signed.packetNumber, 0, place.dataSlices);
      if (dealt.slice !== place.slice || dealt.seq !== place.seq) return 'reject';
    }
    const digest = digestOf(payload, bytes, hasher);
    if (digest === null) return 'hold';
    const verdict = signatures.check(packet, signed, digest);
    return verdict === 'valid' ? 'accept' : verdict === 'forged' ? 'reject' : 'hold';
  }
  if (count !== headerCount(announcement) && count !== announcement.packets) return 'reject';
  if (index >= announcement.packets) return 'reject';
  if (signed !== undefined) {
    if (
      signed.packetBytes !== announcement.packetBytes ||
      signed.packetNumber !== announcement.firstPacket + index
    )
      return 'reject';
  }
  if (place !== undefined) {
    const dealt = packetPlace(announcement.firstPacket, index, place.dataSlices);
    if (dealt.slice !== place.slice || dealt.seq !== place.seq) return 'reject';
  }
  const digest = digestOf(payload, bytes, hasher);
  if (digest === null) return 'hold';
  return matchesPacketHash(announcement, index, digest) ? 'accept' : 'reject';
}

/**
 * A packet's digest: synchronous without a hasher (a repair reply checked at once); with one, kept
 * by payload, or null while a native one is under way (the packet is then held until it lands).
 */
function digestOf(
  payload: Uint8Array,
  bytes: Uint8Array,
  hasher: PacketDigests | undefined,
): Uint8Array | null {
  return hasher === undefined ? sha256(bytes) : hasher.digest(payload, bytes);
}

/** Host hooks for non-browser runtimes and tests. */
export interface SessionHost {
  readonly createSocket?: WebSocketFactory;
  /**
   * The RTCPeerConnection configuration's base (Node: node-datachannel's `bindAddress`). Its
   * `iceServers` are used only when neither the `iceServers` option nor the tracker gives any.
   */
  readonly rtcConfig?: Record<string, unknown>;
  readonly log?: LogFn;
  /** Every engine event (parent changes, loops, …), for debugging and tests. */
  readonly onEvent?: (event: EngineEvent) => void;
  /** Every packet the engine delivers, before assembly (for tests). */
  readonly onDeliver?: (slice: number, seq: number, from: number) => void;
  /** Reconnection policy of the tracker connection (tests: shorter or off). */
  readonly trackerReconnect?: Partial<ReconnectPolicy> | false;
  /**
   * The session's one clock (default: performance.now() and the runtime's timers). Every time the
   * session reads is this clock's: the segment store, the announcement relay, its mesh node, the
   * upload capacity estimate, repair budgets, and the deadlines of `waitForSegment`; the tracker
   * connection runs its reconnection timers on it. Tests drive it by hand. (The session's periodic
   * stats, report and uplink sampling, and the mesh node's timers, stay the runtime's timers.)
   */
  readonly clock?: TrackerClock;
  /**
   * Where `upload: 'auto'` reads the connection and the battery, and where any mode but `off` reads
   * the page's lifecycle (default: the page's `navigator` and `document`; a host without them, such
   * as Node, uploads).
   */
  readonly uploadPlatform?: UploadPlatform;
}

/** Resolves TL and ML from options: ML defaults to 1.5·TL; ML below TL lowers TL (ML = 0: receive only). */
function resolveLoads(options: MeshSessionOptions): { targetLoad: number; maxLoad: number } {
  const check = (name: string, v: number | undefined): void => {
    if (v !== undefined && (!Number.isInteger(v) || v < 0 || v > MAX_LOAD_LIMIT_SLICES))
      throw new MeshError(
        'config',
        `${name} must be an integer 0‥${MAX_LOAD_LIMIT_SLICES} (slices), got ${v}`,
      );
  };
  check('targetLoad', options.targetLoad);
  check('maxLoad', options.maxLoad);
  let targetLoad = options.targetLoad ?? DEFAULT_TARGET_LOAD_SLICES;
  const maxLoad = options.maxLoad ?? Math.round(targetLoad * MAX_LOAD_FACTOR);
  if (maxLoad < targetLoad) targetLoad = maxLoad;
  return { targetLoad, maxLoad };
}

/** `max-upload-kbps` above this (10 Gbit/s) is a typo, not a plan. */
export const MAX_UPLOAD_LIMIT_KBPS = 10_000_000;

/** Resolves and checks `uploadCapacity` (default 'measured') and `maxUploadKbps` (default none). */
export function resolveUploadCapacity(options: MeshSessionOptions): {
  mode: UploadCapacityMode;
  maxUploadKbps: number | null;
} {
  const mode: unknown = options.uploadCapacity ?? 'measured'; // hosts may pass unchecked JSON
  if (mode !== 'measured' && mode !== 'fixed')
    throw new MeshError('config', `uploadCapacity must be "measured" or "fixed", got ${String(mode)}`);
  const cap = options.maxUploadKbps;
  if (cap !== undefined && !(Number.isFinite(cap) && cap >= 0 && cap <= MAX_UPLOAD_LIMIT_KBPS))
    throw new MeshError(
      'config',
      `maxUploadKbps must be a number 0‥${MAX_UPLOAD_LIMIT_KBPS} (kbit/s), got ${String(cap)}`,
    );
  return { mode, maxUploadKbps: cap ?? null };
}

/**
 * One viewer's membership of a stream's mesh: the tracker connection, the engine over WebRTC, and
 * the verified segments it assembles. Implements what the hls.js loader needs (SegmentProvider).
 *
 * Events: 'ready', 'stats' (CustomEvent<MeshStats>, every second), 'peers' (CustomEvent<{peers}>
 * when the number of open channels changes), 'error' (CustomEvent<MeshError>),
 * 'trackerdisconnected' (CustomEvent<TrackerDisconnect>: the tracker was lost, reconnection runs
 * while the WebRTC links keep carrying media), 'trackerreconnected' (CustomEvent<TrackerReconnect>),
 * 'connection-failed' (CustomEvent<ConnectFailure>: a link to a peer was given up before it opened).
 */
export class MeshSession extends EventTarget implements SegmentProvider {
  /** Resolves once joined; rejects (and an 'error' event fires) if the mesh cannot be used. */
  readonly ready: Promise<void>;
  /** The declared loads (options): the starting loads, and upper bounds when measured. */
  private readonly targetLoad: number;
  private readonly maxLoad: number;
  /** The uplink's measured capacity (or the cap) and the loads that follow from it. */
  private readonly capacity: UploadCapacity;
  private tracker: TrackerClient | null = null;
  private node: MeshNode | null = null;
  private store: SegmentStore | null = null;
  /** Announcements neighbours pass on: verified, placed and passed on once (see AnnouncementRelay). */
  private relay: AnnouncementRelay | null = null;
  /** Signatures of packets of segments still being written (issue 14), checked before their announcement. */
  private signatures: PacketSignatures | null = null;
  private recheckScheduled = false;
  /**
   * Tree packets' digests, kept while a packet is held. Native (PacketHasher's `native`, WebCrypto
   * off the main thread): it took hashing off a browser viewer's main thread in bench:cost. It was
   * off for a while because the Node live tests failed with it on; they failed as often with it off
   * under CPU load, and with the 5 s first dial backoff (mesh-node.ts) both passed 10 of 10 runs
   * with it on (live-mesh beside a 1000-member simulation, scale-out alone).
   */
  private readonly packetHasher = new PacketHasher({
    native: true,
    ready: () => {
      this.scheduleRecheck();
    },
  });
  /** The highest `liveSequence` told to the current node (-1: none yet). */
  private liveSequenceTold = -1;
  private closed = false;
  /** The session's start, the first welcome, and the first connection started and opened after it (stats). */
  private readonly startedAtMs: number;
  private welcomeAfterMs: number | null = null;
  private firstLinkStartedAtMs: number | null = null;
  private firstLinkOpenedAtMs: number | null = null;
  /** Whole segments the player took from the origin before the store existed (keepOriginSegment). */
  private readonly earlyOriginSegments: { sequence: number; bytes: Uint8Array<ArrayBuffer> }[] = [];
  private readonly timers: ReturnType<typeof setInterval>[] = [];
  /** Whether this viewer shares its upload now (`upload` option). */
  private readonly uploadPolicy: UploadPolicy;
  private peerId: number | null = null;
  private sourceId: number | null = null;
  private bytesFromOrigin = 0;
  private segmentsFromMesh = 0;
  private segmentsFromOrigin = 0;
  private partsFromMesh = 0;
  private partsFromOrigin = 0;
  private segmentsCompletedFromOrigin = 0;
  /** Where the first STARTUP_SEGMENTS whole segments came from. */
  private readonly startupSegments = { mesh: 0, origin: 0 };
  private nextRepairId = 1;
  /** Seeded by the session (helpers for repair are chosen at random, reproducibly per seed). */
  private random: Random = createRandom(1);
  private repairRequests = 0;
  private repairPacketsServed = 0;
  /**
   * Our recent repair requests by id (oldest first): whom we asked for which packets, and whether
   * they refused. A refused one stays, so that neighbour is not asked for that segment again.
   */
  private readonly repairsInFlight = new Map<
    number,
    {
      readonly segment: number;
      readonly helper: number;
      readonly indexes: readonly number[];
      refused: boolean;
    }
  >();
  /** Shares of repair requests passed on to another neighbour after a NAK. */
  private repairsReasked = 0;
  private readonly repairBudgets = new Map<number, { since: number; served: number }>();
  private stalls = 0;
  private stallMs = 0;
  private lastPeers = -1;
  /** The broadcaster key the session verifies with (the option's, or the first welcome's). */
  private keyText: string | null = null;
  /** Traffic counts of mesh nodes replaced after an identity change (stats: `traffic`). */
  private readonly retiredTraffic = new TrafficCounts();
  /** Counters of mesh nodes replaced after an identity change, so the stats never go backwards. */
  private readonly retired = {
    transportBytesSent: 0,
    transportBytesReceived: 0,
    uploadBytes: 0,
    forgedPackets: 0,
    forgedSequences: 0,
    parentsDistrusted: 0,
    peersCutOff: 0,
    heldPacketsDropped: 0,
    forwardsDropped: 0,
    injectedLosses: 0,
    connectFailures: 0,
    idleLinksClosed: 0,
    relayedBytes: 0,
    connectedByRoute: { host: 0, srflx: 0, prflx: 0, relay: 0 } as Record<RouteType, number>,
  };
  private readonly log: LogFn;
  /** The one clock (SessionHost.clock). */
  private readonly clock: TrackerClock;
  /** Which repair runs (options.packetRepair): the session's by segment, or the engine's by packet. */
  readonly packetRepair: PacketRepairMode;
  /** Catch-up waits, by segment: called when every neighbour asked has refused. */
  private readonly everyoneRefused = new Map<number, () => void>();
  /** Engine mode: the engine's `fetchOrigin` answered with checked byte ranges of the origin. */
  private originRepair: OriginRepair | null = null;
  /** Engine mode: the player's deadline for segments it waits for that are not announced yet. */
  private readonly awaitedDeadlines = new Map<number, number>();
  /** The pace segments are published at (engine repair's clock rate). */
  private readonly segmentPace = new SegmentPace();
  /** Engine mode: packets (and their bytes) the engine recovered from neighbours' packet repair. */
  private enginePacketsRepaired = 0;
  private engineBytesRepaired = 0;
  /** Segment mode: bytes the origin sent for byte-range completion, and packets in them refused. */
  private segmentRepairOriginBytes = 0;
  private segmentRepairOriginRefused = 0;

  /** Joins the stream's mesh (asynchronously); errors arrive as 'error' events and reject `ready`. */
  static connect(options: MeshSessionOptions, host: SessionHost = {}): MeshSession {
    return new MeshSession(options, host);
  }

  private constructor(
    readonly options: MeshSessionOptions,
    private readonly host: SessionHost,
  ) {
    super();
    this.log = host.log ?? (() => undefined);
    this.clock = host.clock ?? SYSTEM_CLOCK;
    this.startedAtMs = this.clock.now();
    const loads = resolveLoads(options);
    this.targetLoad = loads.targetLoad;
    this.maxLoad = loads.maxLoad;
    const upload = resolveUploadCapacity(options);
    this.packetRepair = resolvePacketRepair(options.packetRepair);
    this.capacity = new UploadCapacity({ ...upload, declared: loads });
    const uploadMode = parseUploadMode(options.upload);
    if (uploadMode.error !== null) throw new MeshError('config', uploadMode.error);
    let cannotRelay = false;
    this.uploadPolicy = new UploadPolicy(
      uploadMode.mode,
      host.uploadPlatform ?? browserUploadPlatform(),
      (reasons) => {
        this.log('info', reasons.length > 0 ? 'receive-only' : 'uploading again', { reasons });
        // A page being frozen or throttled cannot run the load phase that would move its children
        // away: they leave now, each finding another parent at once.
        const cannotRelayNow = reasons.some((r) => CANNOT_RELAY_REASONS.includes(r));
        const release = cannotRelayNow && !cannotRelay;
        cannotRelay = cannotRelayNow;
        const node = this.node;
        if (node === null) return;
        this.applyLoads(node);
        if (release) node.releaseChildren();
      },
      this.clock,
    );
    this.ready = this.start();
    this.ready.catch((e: unknown) => {
      // A session that cannot start leaves nothing open behind it.
      this.tracker?.close();
      this.fail(e instanceof MeshError ? e : new MeshError('tracker', String(e)));
    });
  }

  private async start(): Promise<void> {
    const log = this.log;
    // Signatures and hashes need WebCrypto, which browsers give only to secure contexts (https://,
    // or http://localhost): on a plain-http page the mesh cannot verify anything, so say so plainly.
    if (typeof crypto === 'undefined' || (crypto as Partial<Crypto>).subtle === undefined)
      throw new MeshError(
        'config',
        'WebCrypto (crypto.subtle) is unavailable: serve the page over https:// (or from localhost) to join the mesh; playing from the origin only',
      );
    const tracker = new TrackerClient({
      url: this.options.tracker,
      stream: this.options.stream,
      role: 'viewer',
      ...(this.options.token === undefined ? {} : { token: this.options.token }),
      ...(this.host.createSocket === undefined ? {} : { createSocket: this.host.createSocket }),
      ...(this.host.trackerReconnect === undefined ? {} : { reconnect: this.host.trackerReconnect }),
      clock: this.clock,
    });
    this.tracker = tracker;
    // Peers may dial us (offers) while we still verify the welcome's announcements, and the tracker
    // may even be lost and regained meanwhile: keep every message until the node exists, or the
    // offer is lost and that peer's first messages with it.
    const early: ServerMessage[] = [];
    tracker.onMessage = (message) => early.push(message);
    tracker.onProblem = (error) => {
      this.dispatchEvent(new CustomEvent('error', { detail: error }));
    };
    tracker.onDisconnected = (detail) => {
      log('info', 'lost the tracker; reconnecting', { code: detail.code, reason: detail.reason });
      this.dispatchEvent(new CustomEvent('trackerdisconnected', { detail }));
    };
    tracker.onReconnected = (detail) => {
      log('info', 'tracker reached again', { ...detail });
      this.dispatchEvent(new CustomEvent('trackerreconnected', { detail }));
    };
    tracker.onFatal = (error) => {
      // The mesh links we have keep working; the player falls back to the origin as they thin out.
      this.fail(error);
    };
    const welcome = await tracker.join();
    this.welcomeAfterMs = this.clock.now() - this.startedAtMs;
    if (this.closed) {
      tracker.close();
      return;
    }
    this.peerId = welcome.peerId;
    this.sourceId = welcome.sourceId;
    const keyText = this.options.publicKey ?? welcome.publicKey;
    this.keyText = keyText;
    let publicKey: CryptoKey | null = null;
    if (keyText !== null) {
      try {
        publicKey = await importPublicKey(keyText);
      } catch (e) {
        throw new MeshError('config', `the broadcaster's public key is not a raw Ed25519 key: ${String(e)}`);
      }
    } else {
      log('warn', 'no broadcaster public key: announcements are not signature-checked (hashes still are)');
    }
    const store = new SegmentStore({
      stream: this.options.stream,
      publicKey,
      now: () => this.clock.now(),
      onProblem: (message) => {
        this.dispatchEvent(new CustomEvent('error', { detail: new MeshError('verification', message) }));
      },
      onAnnounced: (a) => {
        if (a.sequence === store.newestAnnouncedSequence) this.tellLiveSequence();
        this.originRepair?.announced();
        this.segmentPace.announced(a);
        const deadlineMs = this.awaitedDeadlines.get(a.sequence);
        if (deadlineMs !== undefined) {
          this.awaitedDeadlines.delete(a.sequence);
          this.tellPlayout(a.sequence, deadlineMs);
        }
      },
    });
    await store.seed(welcome.announcements);
    this.store = store;
    for (const early of this.earlyOriginSegments.splice(0)) void store.keepWhole(early.sequence, early.bytes);
    if (this.packetRepair === 'engine')
      this.originRepair = new OriginRepair({
        announcement: (segment) => store.announcement(segment),
        announcements: () => store.announcements(),
        held: (segment, index) => store.hasPacket(segment, index),
        dataSlices: () => this.node?.engine.config.dataSlices ?? 1,
        deliver: (slice, seq, payload) => {
          this.node?.originPacket(slice, seq, payload);
        },
        fetch: (url, init) => fetch(url, init),
        now: () => this.clock.now(),
      });
    this.signatures = new PacketSignatures({
      stream: this.options.stream,
      publicKey,
      verified: (packetNumber) => {
        const node = this.node;
        if (node !== null)
          this.tellEngineLiveSequence(packetPlace(packetNumber, 0, node.engine.config.dataSlices).seq);
      },
      settled: () => {
        this.scheduleRecheck();
      },
    });
    this.relay = new AnnouncementRelay({
      stream: this.options.stream,
      store,
      now: () => this.clock.now(),
      forward: (announcement, except) => {
        this.node?.broadcastAnnouncement(announcement, except);
      },
      reportForged: (peer) => {
        this.node?.reportForgedAnnouncement(peer);
      },
      added: () => {
        this.node?.recheckHeld();
      },
    });
    this.random = createRandom((crypto.getRandomValues(new Uint32Array(1))[0] ?? 1) ^ REPAIR_RANDOM_SALT);
    // Read through a method: close() may have run while we awaited the key and the seed.
    if (this.isClosed()) {
      tracker.close();
      return;
    }
    const node = this.createNode(welcome.peerId, welcome.sourceId);
    this.node = node;
    this.liveSequenceTold = -1;
    const dispatch = (message: ServerMessage): void => {
      const current = this.node;
      if (current === null || this.closed) return;
      switch (message.type) {
        case 'peers':
          current.bootstrap(message.peers);
          break;
        case 'signal':
          current.handleSignal(message.from, message.data);
          break;
        case 'announce':
          void store.announce(message.announcement).then(() => {
            this.node?.recheckHeld();
          });
          break;
        case 'error':
          // Mostly 'unknownPeer' for a peer that left between bootstrap and dial: the connect
          // timeout reports it to the engine. Kept visible for debugging.
          log('debug', 'tracker error', { code: message.code, message: message.message });
          break;
        case 'welcome':
          this.rejoined(message);
          break;
        case 'ice':
          // The tracker client keeps the latest servers (`tracker.ice`); rtcConfig() reads them for
          // every new link.
          break;
        default:
          unreachable(message, 'tracker message');
      }
    };
    tracker.onMessage = dispatch;
    node.start();
    this.tellLiveSequence();
    for (const message of early.splice(0)) dispatch(message);
    this.timers.push(
      setInterval(() => {
        this.tick();
      }, STATS_INTERVAL_MS),
      setInterval(() => {
        this.report();
      }, REPORT_INTERVAL_MS),
      setInterval(() => {
        this.sampleUplink();
      }, SAMPLE_INTERVAL_MS),
    );
    this.dispatchEvent(new Event('ready'));
  }

  /** A MeshNode for this identity; its callbacks act only while it is the session's current node. */
  private createNode(peerId: PeerId, sourceId: PeerId): MeshNode {
    const store = this.store;
    const tracker = this.tracker;
    if (store === null || tracker === null)
      throw new MeshError('config', 'the session has no store or tracker');
    const seed = crypto.getRandomValues(new Uint32Array(1))[0] ?? 1;
    // Test faults (internal, `@chunkycast/sdk/testing`) pass from the session's options to its node.
    const nodeOptions: MeshNodeOptions = withFaults(
      {
        id: peerId,
        sourceId,
        role: 'member',
        // The declared loads, which set the Swaplinks degree; the measured ones follow below.
        targetLoadSlices: this.targetLoad,
        maxLoadSlices: this.maxLoad,
        ...(this.options.maxUploadKbps === undefined ? {} : { maxUploadKbps: this.options.maxUploadKbps }),
        protocol: LIVE_PROTOCOL,
        seed,
        // Asked for each new connection: renewed TURN credentials reach new links, open ones keep theirs.
        rtcConfig: () => this.rtcConfig(),
        now: () => this.clock.now(),
        onConnectFailure: (failure) => {
          if (this.node === node)
            this.dispatchEvent(new CustomEvent('connection-failed', { detail: failure }));
        },
        signal: (to, data) => {
          if (this.node === node) tracker.send({ type: 'signal', to, data });
        },
        requestBootstrap: (count) => {
          if (this.node === node)
            tracker.send({ type: 'bootstrap', count: Math.min(MAX_BOOTSTRAP_PEERS, Math.max(1, count)) });
        },
        ...(this.host.onEvent === undefined ? {} : { onEvent: this.host.onEvent }),
        inspectData: (slice, seq, payload) =>
          inspectPacket(
            store,
            payload,
            { slice, seq, dataSlices: node.engine.config.dataSlices },
            this.signatures ?? undefined,
            this.packetHasher,
          ),
        onRepair: (from, message) => {
          if (this.node === node) this.onRepair(from, message);
        },
        onAnnouncement: (from, announcement) => {
          if (this.node === node) void this.relay?.fromPeer(from, announcement);
        },
        deliver: (slice, seq, payload, from, _hops, via) => {
          this.host.onDeliver?.(slice, seq, from);
          const decoded = decodeMediaPacket(payload);
          if (!decoded.ok) {
            this.log('warn', 'undecodable media packet', { error: decoded.error.message });
            return;
          }
          const packet = decoded.packet;
          if (via === 'tree') store.treePacket(slice, seq, node.engine.config.dataSlices);
          // The origin's copies count as origin bytes (OriginRepair counted them), not the mesh's.
          // OriginRepair hands the engine only bytes it checked against the segment's announced
          // hash (packet-repair.ts, fetchRun), and an announcement never changes once known.
          if (via === 'origin' && store.announcement(packet.segment) !== null)
            store.fillPacket(packet.segment, packet.index, packet.bytes, 'origin', 'checked');
          else if (store.addPacket(packet) && via === 'repair') {
            this.enginePacketsRepaired++;
            this.engineBytesRepaired += packet.bytes.length;
          }
        },
        ...(this.originRepair === null
          ? {}
          : {
              fetchOrigin: (slice: number, seqs: readonly number[]) => {
                if (this.node === node) this.originRepair?.fetchOrigin(slice, seqs);
              },
            }),
        log: this.log,
      },
      faultsOf(this.options),
    );
    const node = new MeshNode(nodeOptions);
    this.applyLoads(node);
    return node;
  }

  /**
   * The loads in force: the capacity estimate's (measured, capped or declared), or 0 while the
   * upload policy makes this viewer receive-only (its children then find other parents).
   */
  private applyLoads(node: MeshNode): void {
    const loads = this.uploadPolicy.receiveOnly ? { targetLoad: 0, maxLoad: 0 } : this.capacity.loads;
    const { targetLoad, maxLoad } = node.engine.config;
    if (loads.targetLoad !== targetLoad || loads.maxLoad !== maxLoad)
      node.setLoad(loads.targetLoad, loads.maxLoad);
  }

  /**
   * Every SAMPLE_INTERVAL_MS: the links' drain into the capacity estimate, and new loads to the
   * engine when it says so (see capacity.ts for the rules). One slice is the stream's bitrate over
   * its data slices, from the latest announcements.
   */
  private sampleUplink(): void {
    const node = this.node;
    if (node === null || this.closed) return;
    const change = this.capacity.update(this.clock.now(), node.uplinkSample(), {
      sliceKbps: this.sliceKbps(node),
      load: node.engine.currentLoad,
    });
    node.setUplinkCapacity(this.capacity.capacityKbps);
    if (change === null) return;
    this.log('info', 'upload capacity: new loads', {
      targetLoad: change.targetLoad,
      maxLoad: change.maxLoad,
      previousTargetLoad: change.previous.targetLoad,
      previousMaxLoad: change.previous.maxLoad,
      capacityKbps: Math.round(change.capacityKbps),
      reason: change.reason,
      load: node.engine.currentLoad,
    });
    this.applyLoads(node);
  }

  /** One slice's rate in kbps (the stream's recent bitrate / data slices), null before any announcement. */
  private sliceKbps(node: MeshNode): number | null {
    const store = this.store;
    if (store === null) return null;
    const newest = store.newestAnnouncedSequence;
    const segments = [];
    for (let seq = newest; seq >= 0 && seq > newest - BITRATE_SEGMENTS; seq--) {
      const a = store.announcement(seq);
      if (a !== null) segments.push(a);
    }
    const kbps = streamKbps(segments);
    return kbps === null ? null : kbps / node.engine.config.dataSlices;
  }

  /**
   * The configuration of a new RTCPeerConnection: the `iceServers` option if given, else the
   * tracker's latest servers (welcome or `ice` renewal), else the host's; the transport policy.
   */
  private rtcConfig(): Record<string, unknown> {
    const base = this.host.rtcConfig ?? {};
    const fromTracker = this.tracker?.ice?.servers ?? [];
    const servers =
      this.options.iceServers ??
      (fromTracker.length > 0
        ? fromTracker.map((server) => ({ ...server, urls: [...server.urls] }))
        : null) ??
      (Array.isArray(base.iceServers) ? (base.iceServers as unknown[]) : []);
    return {
      ...base,
      iceServers: [...servers],
      ...(this.options.iceTransportPolicy === 'relay' ? { iceTransportPolicy: 'relay' } : {}),
    };
  }

  /**
   * A welcome after the tracker was lost and reached again. Its announcements are the tracker's
   * last 16: those made while we were away (the source queues them and sends them when it is back)
   * reach us here, and packets held for them can now be checked and forwarded.
   *
   * Same peer id and source id (the tracker honoured our resume ticket): nothing else changes, the
   * node and its WebRTC links carry on. Another id: our links and tree places name the old id, and
   * peers would refuse or misroute anything under the new one, so the node is rebuilt — the old
   * one stops (its links close, its neighbours repair around it), a new one with the new id
   * bootstraps afresh. The store stays, so playback continues from the buffer, the segments
   * already assembled and the origin.
   */
  private rejoined(welcome: Welcome): void {
    const store = this.store;
    const old = this.node;
    if (store === null || old === null || this.closed) return;
    if (this.options.publicKey === undefined && welcome.publicKey !== this.keyText)
      this.log(
        'warn',
        'the tracker announces another broadcaster key after reconnecting; keeping the first',
        {},
      );
    void Promise.all(welcome.announcements.map((a) => store.announce(a))).then(() => {
      this.node?.recheckHeld();
    });
    if (welcome.peerId === this.peerId && welcome.sourceId === this.sourceId) return;
    this.log('info', 'the tracker gave us another identity; rebuilding the mesh node', {
      previousPeerId: this.peerId,
      peerId: welcome.peerId,
      previousSourceId: this.sourceId,
      sourceId: welcome.sourceId,
    });
    this.retired.uploadBytes += old.counters.uploadBytes;
    this.retiredTraffic.add(old.traffic);
    const oldTransport = old.transportBytes();
    this.retired.transportBytesSent += oldTransport.sent;
    this.retired.transportBytesReceived += oldTransport.received;
    this.retired.forgedPackets += old.counters.forgedPackets;
    this.retired.forgedSequences += old.engine.counters.forgedSequences;
    this.retired.parentsDistrusted += old.engine.counters.parentsDistrusted;
    this.retired.peersCutOff += old.counters.peersCutOff;
    this.retired.heldPacketsDropped += old.counters.heldPacketsDropped;
    this.retired.forwardsDropped += old.counters.droppedStale + old.counters.droppedForBackpressure;
    this.retired.injectedLosses += old.counters.injectedLosses;
    this.retired.connectFailures += old.counters.connectFailures;
    this.retired.idleLinksClosed += old.counters.idleLinksClosed;
    this.retired.relayedBytes += old.counters.relayedBytes;
    for (const route of ROUTE_TYPES) this.retired.connectedByRoute[route] += old.connectedByRoute[route];
    this.firstLinkTimes(old);
    this.peerId = welcome.peerId;
    this.sourceId = welcome.sourceId;
    // The new node's counters start at zero: the estimate keeps its value, not its baseline.
    this.capacity.resetBaseline();
    const node = this.createNode(welcome.peerId, welcome.sourceId);
    this.node = node;
    this.liveSequenceTold = -1;
    void old.stop(false);
    node.start();
    this.tellLiveSequence();
  }

  private isClosed(): boolean {
    return this.closed;
  }

  private fail(error: MeshError): void {
    this.dispatchEvent(new CustomEvent('error', { detail: error }));
  }

  /**
   * One recheck of held packets for the signature checks and digests that finish together: each
   * recheck looks at every held packet.
   */
  private scheduleRecheck(): void {
    if (this.recheckScheduled) return;
    this.recheckScheduled = true;
    setTimeout(() => {
      this.recheckScheduled = false;
      this.node?.recheckHeld();
    }, 0);
  }

  private tick(): void {
    const stats = this.stats();
    this.dispatchEvent(new CustomEvent('stats', { detail: stats }));
    if (stats.peers !== this.lastPeers) {
      this.lastPeers = stats.peers;
      this.dispatchEvent(new CustomEvent('peers', { detail: { peers: stats.peers } }));
    }
  }

  private report(): void {
    const node = this.node;
    if (node === null || this.tracker === null) return;
    const report: PeerReport = {
      parents: node.engine.parents(),
      children: node.engine.children().map((c) => c.slice(0, MAX_REPORTED_CHILDREN)),
      meshBytes: this.meshBytes(),
      originBytes: this.originBytes(),
      uploadBytes: this.retired.uploadBytes + node.counters.uploadBytes,
      stalls: this.stalls,
      playing:
        this.segmentsFromMesh + this.segmentsFromOrigin + this.partsFromMesh + this.partsFromOrigin > 0,
      connectivity: this.connectivity(node),
    };
    const cutOff = node.takeCutOffs();
    this.tracker.send({ type: 'report', report: cutOff.length > 0 ? { ...report, cutOff } : report });
  }

  /** Links by route, failures and relayed bytes since this session joined (rebuilt nodes included). */
  private connectivity(node: MeshNode): ConnectivityReport {
    const current = node.connectivity();
    const connected = { ...current.connected };
    for (const route of ROUTE_TYPES) connected[route] += this.retired.connectedByRoute[route];
    return {
      open: current.open,
      connected,
      failed: this.retired.connectFailures + current.failed,
      relayedBytes: this.retired.relayedBytes + current.relayedBytes,
    };
  }

  // ─────────────────────────── SegmentProvider ───────────────────────────

  waitForRange(
    sequence: number,
    start: number,
    end: number,
    deadlineMs: number,
    signal?: AbortSignal,
  ): Promise<Uint8Array | null> {
    const store = this.store;
    if (store === null || this.closed) return Promise.resolve(null);
    return store.waitRange(sequence, start, end, deadlineMs - this.clock.now(), signal);
  }

  async waitForSegment(
    sequence: number,
    deadlineMs: number,
    signal?: AbortSignal,
    url?: string,
  ): Promise<Uint8Array | null> {
    const store = this.store;
    if (store === null || this.closed) return null;
    if (this.packetRepair === 'engine') return this.waitWithEngineRepair(sequence, deadlineMs, signal, url);
    // Keep the last part of the budget for completing a partial segment from the origin, and
    // before that ask neighbours for what the trees have not brought (a segment from before we
    // joined: at once).
    const fillAtMs = url === undefined ? deadlineMs : deadlineMs - ORIGIN_FILL_LEAD_MS;
    const beforeJoin = !store.expects(sequence);
    // A segment from before we joined has nothing to complete from the origin until a neighbour
    // sends part of it. With a wait shorter than the fill lead (startup: the loader's 300 ms) the
    // neighbours get all of it and the loader takes the whole segment after; otherwise they were
    // never asked at all.
    const meshUntilMs = beforeJoin && fillAtMs <= this.clock.now() ? deadlineMs : fillAtMs;
    const repairAtMs = beforeJoin ? this.clock.now() : Math.max(this.clock.now(), fillAtMs - REPAIR_LEAD_MS);
    // A function: `signal.aborted` changes while we await.
    const aborted = (): boolean => signal?.aborted === true;
    let bytes = await store.wait(sequence, repairAtMs - this.clock.now(), signal);
    if (bytes !== null || aborted()) return bytes;
    if (beforeJoin) await this.waitForHelper(meshUntilMs, signal);
    if (aborted()) return null;
    if (this.requestRepair(sequence))
      bytes = await store.wait(sequence, meshUntilMs - this.clock.now(), signal, true);
    if (bytes !== null || url === undefined || aborted() || meshUntilMs !== fillAtMs) return bytes;
    return this.completeFromOrigin(sequence, url, signal);
  }

  /**
   * Engine mode: the player's deadline becomes the engine's playout clock, and the engine repairs the
   * segment's missing packets (neighbours, then the origin) on its own schedule; the session waits.
   * What is still missing shortly before the deadline comes as byte ranges, and failing that the
   * loader takes the whole segment from the origin.
   * A segment from before we joined is out of the engine's reach (it repairs only what plays after
   * its clock started, and its ring holds no history), so it is asked of neighbours' segment stores
   * at once (catch-up, the same request as segment repair's).
   */
  private async waitWithEngineRepair(
    sequence: number,
    deadlineMs: number,
    signal?: AbortSignal,
    url?: string,
  ): Promise<Uint8Array | null> {
    const store = this.store;
    if (store === null) return null;
    if (url !== undefined) this.originRepair?.setUrl(sequence, url);
    const beforeJoin = store.announcement(sequence) !== null && !store.expects(sequence);
    if (!beforeJoin) {
      // The engine's deadline comes before the loader's, as segment repair's origin fill does: its
      // last resort is a range request that must land, be checked and reach the store in time on a
      // loaded machine (the engine leaves it ~1.5 origin round trips, a few ms on loopback). Not for
      // a segment from before we joined: the engine would chase its packets too, and take them from
      // the origin at its deadline while neighbours' stores are still sending them (the Node live
      // test's late joiner: one segment from the origin in two runs of three).
      this.tellPlayout(sequence, deadlineMs - ORIGIN_FILL_LEAD_MS);
      const fillAtMs = url === undefined ? deadlineMs : deadlineMs - ORIGIN_FILL_LEAD_MS / 2;
      const bytes = await store.wait(sequence, fillAtMs - this.clock.now(), signal);
      if (bytes !== null || url === undefined || signal?.aborted === true) return bytes;
      // What the engine could not bring in time comes as byte ranges, and failing that the loader
      // takes the whole segment.
      return this.completeFromOrigin(sequence, url, signal);
    }
    // Catch-up; nobody to ask leaves the segment to the origin at once rather than at the deadline.
    const startup = !this.tookASegment();
    const untilMs = startup ? Math.min(deadlineMs, this.clock.now() + STARTUP_CATCH_UP_MS) : deadlineMs;
    await this.waitForHelper(untilMs, signal);
    if (signal?.aborted === true || !this.requestRepair(sequence)) return null;
    // Every neighbour asked said it does not hold the segment: one may a moment later (the copy it
    // took from the origin and kept, or its own catch-up), as the joining viewers of a swarm are
    // often each other's neighbours (bench:compare default, N = 8: a viewer waited 2 s for its third
    // segment, then took it from the origin, 0.5 s after three other viewers had it).
    let reaskTimer: unknown = null;
    const scheduleReask = (): void => {
      const leftMs = untilMs - this.clock.now();
      const everyMs = Math.min(CATCH_UP_REASK_MAX_MS, Math.max(CATCH_UP_REASK_MIN_MS, leftMs / 3));
      // Only while an answer asked then still has time to arrive before the deadline.
      reaskTimer = 2 * everyMs < leftMs ? this.clock.setTimeout(reask, everyMs) : null;
    };
    // The segment arriving, an abort or the session closing ends the wait, and with it the timer.
    const reask = (): void => {
      if (this.everyRepairRefused(sequence)) this.requestRepair(sequence);
      scheduleReask();
    };
    scheduleReask();
    // Once every neighbour asked has refused and no other is open to ask: at startup, where every ms
    // of the wait is the viewer's, the origin at once (a re-ask rarely fits in a startup budget);
    // later, the origin after a random share of the time left (CATCH_UP_SUPPRESSION_SHARE).
    const waiting = new AbortController();
    const giveUp = (): void => {
      waiting.abort();
    };
    let suppressionTimer: unknown = null;
    const everyoneRefused = (): void => {
      if (startup) {
        giveUp();
        return;
      }
      if (suppressionTimer !== null) return;
      const leftMs = untilMs - this.clock.now();
      suppressionTimer = this.clock.setTimeout(
        giveUp,
        this.random.nextFloat() * CATCH_UP_SUPPRESSION_SHARE * Math.max(0, leftMs),
      );
    };
    signal?.addEventListener('abort', giveUp, { once: true });
    this.everyoneRefused.set(sequence, everyoneRefused);
    try {
      return await store.wait(sequence, untilMs - this.clock.now(), waiting.signal, true);
    } finally {
      if (reaskTimer !== null) this.clock.clearTimeout(reaskTimer);
      if (suppressionTimer !== null) this.clock.clearTimeout(suppressionTimer);
      signal?.removeEventListener('abort', giveUp);
      if (this.everyoneRefused.get(sequence) === everyoneRefused) this.everyoneRefused.delete(sequence);
    }
  }

  /** Whether we asked neighbours for this segment and every one of them refused (a NAK). */
  private everyRepairRefused(sequence: number): boolean {
    let asked = false;
    for (const r of this.repairsInFlight.values()) {
      if (r.segment !== sequence) continue;
      if (!r.refused) return false;
      asked = true;
    }
    return asked;
  }

  /**
   * A segment from before we joined is asked of neighbours; a joining viewer's first channels may
   * not be open yet (expectsSegment let the loader wait for them): wait for one, within the budget.
   */
  private async waitForHelper(deadlineMs: number, signal?: AbortSignal): Promise<void> {
    // Not for a link that is not even being set up: nothing would come of the wait.
    while (
      this.repairHelpers().length === 0 &&
      (this.helpersConnecting() || this.tookASegment()) &&
      this.clock.now() + CATCH_UP_POLL_MS < deadlineMs &&
      signal?.aborted !== true &&
      !this.closed
    )
      await new Promise<void>((resolve) => this.clock.setTimeout(resolve, CATCH_UP_POLL_MS));
  }

  /**
   * Engine mode: the playout clock that runs at the published pace with this segment's first packet
   * at `deadlineMs` (`playoutFor`), and that deadline for every packet of the segment
   * (`segmentDeadline`). A segment not announced yet (its packets still
   * being written) gets its clock when its announcement comes.
   */
  private tellPlayout(sequence: number, deadlineMs: number): void {
    const node = this.node;
    const a = this.store?.announcement(sequence) ?? null;
    if (node === null || this.packetRepair !== 'engine') return;
    if (a === null) {
      this.awaitedDeadlines.set(sequence, deadlineMs);
      const oldest = this.awaitedDeadlines.keys().next();
      if (this.awaitedDeadlines.size > MAX_AWAITED_DEADLINES && oldest.done !== true)
        this.awaitedDeadlines.delete(oldest.value);
      return;
    }
    const clock = playoutFor(
      a,
      deadlineMs,
      node.engine.config.dataSlices,
      this.clock.now(),
      this.segmentPace.ms,
    );
    const span = segmentDeadline(a, deadlineMs);
    if (clock === null || span === null) return;
    const rttMs = this.originRepair?.originRttMs ?? null;
    node.playout(rttMs === null ? clock : { ...clock, originRttMs: rttMs });
    node.deadline(span);
  }

  /**
   * Asks up to REPAIR_HELPERS neighbours with an open channel for the missing packets of an
   * announced segment, split between them (Bullet's recovery from several peers at once); replies
   * are checked like tree packets. Each neighbour gets a contiguous run of the missing packets, so a
   * share nobody serves is one byte range for the origin, not every other packet. A NAKed share is
   * passed to a neighbour not yet asked (onRepairNak). False if there is nothing or nobody to ask.
   */
  private requestRepair(sequence: number): boolean {
    const store = this.store;
    const node = this.node;
    if (store === null || node === null) return false;
    const missing = store.missingIndexes(sequence);
    if (missing === null || missing.length === 0) return false;
    const chosen = shuffleInPlace(this.repairHelpers(), this.random).slice(0, REPAIR_HELPERS);
    let asked = false;
    for (const [k, helper] of chosen.entries()) {
      const from = Math.floor((k * missing.length) / chosen.length);
      const to = Math.floor(((k + 1) * missing.length) / chosen.length);
      asked = this.askForRepair(helper, sequence, missing.slice(from, to)) || asked;
    }
    if (asked) this.repairRequests++;
    return asked;
  }

  /**
   * Neighbours worth asking for repair: open channels, never the true source (it keeps no segments
   * to serve, so asking it would only waste the wait until the origin fill).
   */
  private repairHelpers(): number[] {
    return this.node?.openPeerIds().filter((id) => id !== this.sourceId) ?? [];
  }

  /** One repair request for these packets of an announced segment; false if it could not be sent. */
  private askForRepair(helper: number, sequence: number, indexes: readonly number[]): boolean {
    const node = this.node;
    const announcement = this.store?.announcement(sequence) ?? null;
    if (node === null || announcement === null || indexes.length === 0) return false;
    const bitmap = new Uint8Array(Math.ceil(announcement.packets / 8));
    for (const index of indexes) bitmap[index >> 3] = (bitmap[index >> 3] ?? 0) | (1 << (index & 7));
    const requestId = this.nextRepairId++;
    const sent = node.sendRepair(helper, {
      type: MessageType.RepairRequest,
      requestId,
      segment: sequence,
      count: announcement.packets,
      missing: bitmap,
    });
    if (!sent) return false;
    this.repairsInFlight.set(requestId, { segment: sequence, helper, indexes, refused: false });
    const oldest = this.repairsInFlight.keys().next();
    if (this.repairsInFlight.size > MAX_REPAIRS_IN_FLIGHT && oldest.done !== true)
      this.repairsInFlight.delete(oldest.value);
    return true;
  }

  /**
   * A neighbour could not serve our request (busy: receive-only or its uplink behind; or it does
   * not hold the segment): ask one not yet asked for this segment for what is still missing of that
   * share, once per NAK. With nobody left, the origin completes it at the fill time.
   */
  private onRepairNak(from: number, requestId: number): void {
    const request = this.repairsInFlight.get(requestId);
    // Only the neighbour we asked can refuse our request, and only once.
    if (request === undefined || request.helper !== from || request.refused) return;
    request.refused = true;
    const stillMissing = new Set(this.store?.missingIndexes(request.segment) ?? []);
    const indexes = request.indexes.filter((index) => stillMissing.has(index));
    if (indexes.length === 0) return;
    const asked = new Set<number>();
    for (const r of this.repairsInFlight.values()) if (r.segment === request.segment) asked.add(r.helper);
    const untried = this.repairHelpers().filter((id) => !asked.has(id));
    const next = shuffleInPlace(untried, this.random)[0];
    if (next !== undefined && this.askForRepair(next, request.segment, indexes)) this.repairsReasked++;
    else if (this.everyRepairRefused(request.segment)) this.everyoneRefused.get(request.segment)?.();
  }

  /**
   * Per-neighbour budget for serving repair: a request of a few bytes can cost 64 packets of upload,
   * so one neighbour gets at most MAX_REPAIRS_SERVED_PER_PEER requests per REPAIR_WINDOW_MS.
   */
  private admitRepair(peer: number): boolean {
    const now = this.clock.now();
    const budget = this.repairBudgets.get(peer);
    if (budget === undefined || now - budget.since > REPAIR_WINDOW_MS) {
      this.repairBudgets.set(peer, { since: now, served: 1 });
      if (this.repairBudgets.size > MAX_REPAIR_BUDGETS) this.repairBudgets.clear();
      return true;
    }
    budget.served++;
    return budget.served <= MAX_REPAIRS_SERVED_PER_PEER;
  }

  /**
   * The newest verified announcement tells the engine where the stream is (`liveSequence`): the
   * sequence of its last packet, which the true source deals right after announcing it. Its sequence
   * window then judges a neighbour's first packet too (issue 18).
   */
  private tellLiveSequence(): void {
    const node = this.node;
    const a = this.store?.announcement(this.store.newestAnnouncedSequence) ?? null;
    if (node === null || a === null) return;
    this.tellEngineLiveSequence(packetPlace(a.firstPacket, a.packets - 1, node.engine.config.dataSlices).seq);
  }

  /**
   * Moves the engine's trusted `liveSequence` forward, never back: signed packets of a segment
   * still being written run ahead of the newest announcement, and their verifications finish in
   * any order.
   */
  private tellEngineLiveSequence(seq: number): void {
    const node = this.node;
    if (node === null || seq <= this.liveSequenceTold) return;
    this.liveSequenceTold = seq;
    node.liveSequence(seq);
  }

  /** Repair between neighbours: serve requests from the segments we hold; take verified replies. */
  private onRepair(from: number, message: RepairMessage): void {
    const store = this.store;
    const node = this.node;
    if (store === null || node === null) return;
    switch (message.type) {
      case MessageType.RepairRequest: {
        // Not from an uplink that is receive-only or behind: the asker has the origin, our
        // children have only us.
        const uplinkFull = node.engine.config.maxLoad === 0 || this.capacity.behindAt(this.clock.now());
        if (uplinkFull || !this.admitRepair(from)) {
          node.sendRepair(from, {
            type: MessageType.RepairNak,
            requestId: message.requestId,
            reason: RepairNakReason.Busy,
          });
          return;
        }
        const bytes = store.bytes(message.segment);
        const announcement = store.announcement(message.segment);
        if (bytes === null || announcement === null || announcement.packets !== message.count) {
          node.sendRepair(from, {
            type: MessageType.RepairNak,
            requestId: message.requestId,
            reason: RepairNakReason.NotHeld,
          });
          return;
        }
        const plan = planOf(announcement);
        let served = 0;
        for (let index = 0; index < message.count && served < MAX_REPAIR_PACKETS_PER_REQUEST; index++) {
          if (((message.missing[index >> 3] ?? 0) & (1 << (index & 7))) === 0) continue;
          const [start, end] = packetRange(plan, announcement.bytes, index);
          const payload = encodeMediaPacket({
            segment: message.segment,
            index,
            count: message.count,
            bytes: bytes.subarray(start, end),
          });
          if (!node.sendRepair(from, { type: MessageType.RepairData, requestId: message.requestId, payload }))
            break; // the channel is gone or full: the requester takes the rest from the origin
          served++;
        }
        this.repairPacketsServed += served;
        return;
      }
      case MessageType.RepairData:
        void this.onRepairData(store, node, from, message.payload);
        return;
      case MessageType.RepairNak:
        this.onRepairNak(from, message.requestId);
        return;
      default:
        unreachable(message, 'repair message');
    }
  }

  /**
   * A neighbour's segment-repair reply: hashed off the main thread (it can wait a task: the loader
   * waits for the segment anyway), then checked against its segment's announcement like a tree packet.
   */
  private async onRepairData(
    store: SegmentStore,
    node: MeshNode,
    from: PeerId,
    payload: Uint8Array,
  ): Promise<void> {
    const decoded = decodeMediaPacket(payload);
    if (!decoded.ok) {
      node.reportForged(from);
      return;
    }
    const packet = decoded.packet;
    const digest = await sha256OffThread(packet.bytes);
    if (this.store !== store || this.node !== node) return;
    const verdict = inspectPacket(store, payload, undefined, undefined, { digest: () => digest });
    if (verdict === 'reject') {
      node.reportForged(from);
      return;
    }
    // Accepted means checked against its segment's announcement just now: not hashed again.
    if (verdict === 'accept')
      store.fillPacket(packet.segment, packet.index, packet.bytes, 'repair', 'checked');
  }

  /**
   * A segment the mesh delivered only in part: fetch exactly the missing packets' byte ranges from
   * the origin (HTTP Range), so a lost packet costs its own bytes and not the whole segment's. The
   * result is verified against the signed hash like any segment; null if it cannot be completed.
   */
  private async completeFromOrigin(
    sequence: number,
    url: string,
    signal?: AbortSignal,
  ): Promise<Uint8Array | null> {
    if (this.closed) return null;
    const store = this.store;
    const runs = store?.missingRanges(sequence) ?? null;
    if (store === null || runs === null || runs.length === 0 || runs.length > MAX_ORIGIN_FILL_REQUESTS)
      return null;
    const announcement = store.announcement(sequence);
    if (announcement === null) return null;
    try {
      await Promise.all(
        runs.map(async (run) => {
          const response = await fetch(url, {
            headers: { Range: `bytes=${run.start}-${run.end - 1}` },
            ...(signal === undefined ? {} : { signal }),
          });
          const body = new Uint8Array(await response.arrayBuffer());
          this.bytesFromOrigin += body.length;
          this.segmentRepairOriginBytes += body.length;
          // 206 with exactly the range; a server that ignores Range sends the whole segment (200).
          const part =
            response.status === 206 && body.length === run.end - run.start
              ? body
              : response.status === 200 && body.length === announcement.bytes
                ? body.subarray(run.start, run.end)
                : null;
          if (part === null) throw new Error(`origin answered ${response.status} with ${body.length} bytes`);
          // Hashed off the main thread, all at once: a whole segment hashed synchronously held the
          // main thread ~100 ms on a loaded machine, while the player's buffer ran out.
          const packets = await runPacketDigests(announcement, run.start, part, run.indexes);
          for (const { index, bytes, digest } of packets) {
            // Refused only for its hash (a copy that came meanwhile is no refusal).
            const mismatches = store.counters.hashMismatches;
            store.fillPacket(sequence, index, bytes, 'origin', digest);
            this.segmentRepairOriginRefused += store.counters.hashMismatches - mismatches;
          }
        }),
      );
    } catch {
      return null; // the loader falls back to the whole segment from the origin
    }
    const bytes = await store.wait(sequence, ORIGIN_FILL_VERIFY_MS, signal, true);
    if (bytes !== null) this.segmentsCompletedFromOrigin++;
    return bytes;
  }

  async waitUntilHeld(sequence: number, deadlineMs: number, signal?: AbortSignal): Promise<boolean> {
    const store = this.store;
    if (store === null || this.closed) return false;
    return (await store.wait(sequence, deadlineMs - this.clock.now(), signal)) !== null;
  }

  segmentAnnounced(sequence: number): boolean | undefined {
    if (this.store === null || this.closed) return undefined;
    return this.store.announcement(sequence) !== null;
  }

  segmentHeldAtMs(sequence: number): number | undefined {
    return this.store?.heldAtMs(sequence) ?? undefined;
  }

  expectsSegment(sequence: number): boolean {
    if (this.closed || this.store === null) return false;
    if (this.store.expects(sequence)) return true;
    // From before we joined: neighbours may hold it (repair), if a channel is open already, or once
    // the player holds a segment in any case (the loader's budget is then the buffer less its safety
    // margin, so waiting for a first channel costs no stall). Waiting for the first channels before
    // the first segment delayed startup noticeably to save one segment from the origin: playback
    // first. (Measured at 8 viewers, 3 segments behind: still only the third of the first three
    // came from neighbours; a first channel opened after the wait for the second had ended.)
    // A channel to the true source alone is no neighbour to ask (repairHelpers): the first viewer of
    // a stream, linked only to it, waited its whole startup budget for nothing (0.78 s to its first
    // frame against 0.25–0.33 s for the seven after it, N = 8, one segment behind).
    // Not for a link still being set up, though one opens 40–60 ms after its dial now: waiting for
    // it moved origin segments between viewers without saving any (N = 16, 600 s: 18 whole segments
    // from the origin in each of three runs, with and without the wait) and added 0.1–0.25 s to the
    // startup of the viewers that waited (docs/low-latency.md).
    if (this.store.announcement(sequence) === null) return false;
    if (this.node === null) return false;
    return this.repairHelpers().length > 0 || this.tookASegment();
  }

  /** Whether the player took a segment yet (from either side): before it, every wait is startup's. */
  private tookASegment(): boolean {
    return this.segmentsFromMesh + this.segmentsFromOrigin > 0;
  }

  /** Whether a link to a neighbour other than the true source is being set up. */
  private helpersConnecting(): boolean {
    return this.node?.connectingPeerIds().some((id) => id !== this.sourceId) ?? false;
  }

  keepOriginSegment(sequence: number, bytes: Uint8Array<ArrayBuffer>): void {
    if (this.store !== null) {
      void this.store.keepWhole(sequence, bytes);
      return;
    }
    // The player's first segments often come before the welcome (and the store it seeds): kept
    // until then, a few at most.
    if (this.closed || this.earlyOriginSegments.length >= MAX_EARLY_ORIGIN_SEGMENTS) return;
    this.earlyOriginSegments.push({ sequence, bytes });
  }

  noteOriginSegment(bytes: number, part = false): void {
    this.bytesFromOrigin += bytes;
    if (part) this.partsFromOrigin++;
    else {
      this.segmentsFromOrigin++;
      this.noteStartupSegment('origin');
    }
  }

  private noteStartupSegment(from: 'mesh' | 'origin'): void {
    const counted = this.startupSegments.mesh + this.startupSegments.origin;
    if (counted < STARTUP_SEGMENTS) this.startupSegments[from]++;
  }

  noteMeshSegment(_sequence: number, part = false): void {
    if (part) this.partsFromMesh++;
    else {
      this.segmentsFromMesh++;
      this.noteStartupSegment('mesh');
    }
  }

  noteStall(ms: number): void {
    this.stalls++;
    this.stallMs += ms;
  }

  publishedAtMs(sequence: number): number | undefined {
    return this.store?.announcement(sequence)?.publishedAtMs;
  }

  segmentDurationMs(sequence: number): number | undefined {
    return this.store?.announcement(sequence)?.durationMs;
  }

  // ─────────────────────────────── stats ───────────────────────────────

  /** The first connection this session started and the first it opened (any of its nodes), ms after its start. */
  private firstLinkTimes(node: MeshNode | null): { started: number | null; opened: number | null } {
    this.firstLinkStartedAtMs ??= node?.firstLinkStartedAtMs ?? null;
    this.firstLinkOpenedAtMs ??= node?.firstLinkOpenedAtMs ?? null;
    const since = (at: number | null): number | null => (at === null ? null : at - this.startedAtMs);
    return { started: since(this.firstLinkStartedAtMs), opened: since(this.firstLinkOpenedAtMs) };
  }

  stats(): MeshStats {
    const node = this.node;
    const parents = node?.engine.parents() ?? [];
    const children = node?.engine.children() ?? [];
    const bytesFromMesh = this.meshBytes();
    const bytesFromOrigin = this.originBytes();
    const total = bytesFromMesh + bytesFromOrigin;
    const tracker = this.tracker?.stats();
    const firstLink = this.firstLinkTimes(node);
    const transport = node?.transportBytes();
    return {
      stream: this.options.stream,
      peerId: this.peerId,
      sourceId: this.sourceId,
      trackerConnected: this.tracker?.connected ?? false,
      trackerState: tracker?.state ?? 'idle',
      trackerReconnects: tracker?.reconnects ?? 0,
      trackerDisconnectedMs: tracker?.disconnectedMs ?? 0,
      trackerLastOutageMs: tracker?.lastOutageMs ?? null,
      peerIdChanges: tracker?.peerIdChanges ?? 0,
      trackerSignalsDropped: tracker?.signalsDropped ?? 0,
      heldPacketsDropped: this.retired.heldPacketsDropped + (node?.counters.heldPacketsDropped ?? 0),
      forwardsDropped:
        this.retired.forwardsDropped +
        (node === null ? 0 : node.counters.droppedStale + node.counters.droppedForBackpressure),
      peers: node?.openPeers ?? 0,
      bytesFromMesh,
      bytesFromOrigin,
      meshShare: total === 0 ? 0 : bytesFromMesh / total,
      segmentsFromMesh: this.segmentsFromMesh,
      segmentsFromOrigin: this.segmentsFromOrigin,
      startupSegmentsFromMesh: this.startupSegments.mesh,
      startupSegmentsFromOrigin: this.startupSegments.origin,
      welcomeAfterMs: this.welcomeAfterMs,
      firstDialAfterMs: firstLink.started,
      firstLinkAfterMs: firstLink.opened,
      segmentsKeptFromOrigin: this.store?.counters.segmentsKeptFromOrigin ?? 0,
      partsFromMesh: this.partsFromMesh,
      partsFromOrigin: this.partsFromOrigin,
      packetSignaturesVerified: this.signatures?.counters.verified ?? 0,
      packetSignaturesForged: this.signatures?.counters.forged ?? 0,
      segmentsCompletedFromOrigin: this.segmentsCompletedFromOrigin,
      uploadBytes: this.retired.uploadBytes + (node?.counters.uploadBytes ?? 0),
      load: node?.engine.currentLoad ?? 0,
      // The engine's live loads (measured, capped or declared).
      targetLoad: node?.engine.config.targetLoad ?? this.capacity.loads.targetLoad,
      maxLoad: node?.engine.config.maxLoad ?? this.capacity.loads.maxLoad,
      uploadCapacityKbps: this.capacity.capacityKbps === null ? null : Math.round(this.capacity.capacityKbps),
      uploadCapacitySource: this.capacity.source,
      upload: this.uploadPolicy.mode,
      receiveOnlyReasons: this.uploadPolicy.reasons,
      slices: parents.map((parent, slice) => ({ slice, parent, children: children[slice] ?? [] })),
      stalls: this.stalls,
      stallMs: this.stallMs,
      verificationFailures:
        (this.store?.counters.hashMismatches ?? 0) + (this.store?.counters.badSignatures ?? 0),
      forgedPackets: this.retired.forgedPackets + (node?.counters.forgedPackets ?? 0),
      forgedSequences: this.retired.forgedSequences + (node?.engine.counters.forgedSequences ?? 0),
      parentsDistrusted: this.retired.parentsDistrusted + (node?.engine.counters.parentsDistrusted ?? 0),
      announcementsFromPeers: this.relay?.counters.accepted ?? 0,
      announcementsForwarded: this.relay?.counters.forwarded ?? 0,
      forgedAnnouncements: this.relay?.counters.forged ?? 0,
      peerAnnouncementsRateLimited: this.relay?.counters.rateLimited ?? 0,
      peerAnnouncementsRefused: this.relay?.counters.refused ?? 0,
      injectedLosses: this.retired.injectedLosses + (node?.counters.injectedLosses ?? 0),
      bytesFromRepair: (this.store?.counters.bytesRepaired ?? 0) + this.engineBytesRepaired,
      bytesFromPacketRepair: this.engineBytesRepaired,
      packetRepair: this.packetRepair,
      repairPacketsFromPeers: (this.store?.counters.packetsRepaired ?? 0) + this.enginePacketsRepaired,
      repairPacketsFromOrigin: this.store?.counters.packetsFilledFromOrigin ?? 0,
      repairOriginBytes: this.segmentRepairOriginBytes + (this.originRepair?.counters.bytesFetched ?? 0),
      repairPacketsExpired: node?.engine.repair.counters.packetsExpired ?? 0,
      engineRepairCounters:
        this.packetRepair === 'engine' && node !== null ? { ...node.engine.repair.counters } : null,
      repairOriginRefused:
        this.segmentRepairOriginRefused + (this.originRepair?.counters.packetsRefused ?? 0),
      repairRequests: this.repairRequests,
      repairsReasked: this.repairsReasked,
      repairPacketsServed: this.repairPacketsServed,
      peersCutOff: this.retired.peersCutOff + (node?.counters.peersCutOff ?? 0),
      peerLinks: node?.peerLinks() ?? [],
      peersByRoute: node?.openByRoute() ?? { host: 0, srflx: 0, prflx: 0, relay: 0 },
      relayedBytes: this.retired.relayedBytes + (node?.counters.relayedBytes ?? 0),
      connectFailures: this.retired.connectFailures + (node?.counters.connectFailures ?? 0),
      idleLinksClosed: this.retired.idleLinksClosed + (node?.counters.idleLinksClosed ?? 0),
      traffic: node === null ? this.retiredTraffic.byName() : node.traffic.byName(this.retiredTraffic),
      transportBytesSent: this.retired.transportBytesSent + (transport?.sent ?? 0),
      transportBytesReceived: this.retired.transportBytesReceived + (transport?.received ?? 0),
    };
  }

  /** Media bytes from the origin: the loader's segments, byte-range completion, and the engine's last resort. */
  private originBytes(): number {
    return this.bytesFromOrigin + (this.originRepair?.counters.bytesFetched ?? 0);
  }

  /** Media bytes from peers: tree packets plus repaired ones. */
  private meshBytes(): number {
    const c = this.store?.counters;
    return c === undefined ? 0 : c.bytesReceived + c.bytesRepaired;
  }

  /** Leaves the mesh: children are told (graceful quit), then every connection closes. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.uploadPolicy.close();
    this.originRepair?.close();
    this.store?.close();
    const node = this.node;
    const tracker = this.tracker;
    void (async () => {
      await node?.stop(true);
      tracker?.close();
    })();
  }
}
