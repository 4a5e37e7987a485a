import type { PeerId, RouteCounts, TrackerErrorCode } from '@chunkycast/wire';
import type { PeerLinkStats } from './connectivity.js';
import type { ReceiveOnlyReason, UploadMode } from './upload-policy.js';

/** How many of a viewer's first whole segments `startupSegmentsFrom…` counts (issue 14). */
export const STARTUP_SEGMENTS = 3;

/** Options of a viewer's (or the true source's) place in one stream's mesh. */
export interface MeshSessionOptions {
  /** The rendezvous server's WebSocket URL (ws:// or wss://). */
  readonly tracker: string;
  /** Stream id (1–64 of [A-Za-z0-9._-]). */
  readonly stream: string;
  /**
   * Target load TL in slices: how many slice streams this viewer forwards when it can. 16 slices
   * make one stream copy (the thesis's TL = 16, chunkyspread.md). Default 16. With a measured
   * upload capacity this is the starting TL and its upper bound.
   */
  readonly targetLoad?: number;
  /**
   * Maximum load ML in slices; default 1.5·TL (the thesis's ML). 0 makes a receive-only viewer.
   * With a measured upload capacity, the starting ML and its upper bound.
   */
  readonly maxLoad?: number;
  /**
   * `measured` (default): TL and ML follow what the uplink is measured to carry (65% and 80% of
   * it, in slices), within `targetLoad` and `maxLoad`; an uplink that cannot carry one slice makes
   * the viewer receive-only. `fixed`: `targetLoad` and `maxLoad` as given (the earlier behaviour).
   */
  readonly uploadCapacity?: 'measured' | 'fixed';
  /**
   * Upload cap in kbit/s, for viewers who pay for data: the loads are set from it (as from a
   * measurement, in either mode) and the data channels never carry more (a token bucket; payload
   * plus an estimated 7% of packet headers). 0 makes a receive-only viewer. Default none.
   */
  readonly maxUploadKbps?: number;
  /**
   * Whether this viewer shares its upload. `auto` (default): receive-only while the browser says
   * the connection is cellular or the user asked to save data (Network Information), or the battery
   * is discharging below 20% (Battery Status), and sharing again once that ends; a browser without
   * those APIs shares. `on`: always shares (within the loads and `maxUploadKbps`). `off`: never
   * forwards (load 0), as `maxLoad: 0`. Anything else is a `config` error.
   */
  readonly upload?: UploadMode;
  /** Base64 raw Ed25519 public key of the broadcaster; default: the key the tracker announces. */
  readonly publicKey?: string;
  /**
   * Viewer join token, for a tracker that requires one (`--join-secret`): sent in every join,
   * reconnections included. A token the tracker refuses (`badToken`) ends the session's tracker
   * connection for good (an 'error' event with code `trackerRefused`).
   */
  readonly token?: string;
  /**
   * STUN/TURN servers for RTCPeerConnection. Given, they override the tracker's; absent, each new
   * connection uses the servers of the tracker's welcome, or of its latest `ice` frame (renewed TURN
   * credentials); a tracker without any gives none (host candidates only).
   */
  readonly iceServers?: readonly RTCIceServer[];
  /**
   * `relay` makes every connection go through a TURN server (RTCPeerConnection's
   * `iceTransportPolicy`: for viewers who must not reveal their address to peers, or to test TURN);
   * default `all`.
   */
  readonly iceTransportPolicy?: 'all' | 'relay';
  /**
   * Which repair recovers packets the trees lost (issue 14). `engine` (default): the engine's
   * deadline-aware packet repair, on a playout clock and per-segment deadlines taken from the
   * player's (earliest deadline first, helpers chosen by Bloom filter, the origin's byte ranges as
   * its last resort); a segment from before joining is asked of neighbours' stores. `segment`: the
   * session asks neighbours for a segment's missing packets and then the origin for their byte
   * ranges, within the loader's wait. Either way the loader's whole-segment origin fetch stays the player's safety
   * net.
   */
  readonly packetRepair?: 'engine' | 'segment';
}

/** One slice as this viewer sees it. */
export interface SliceView {
  readonly slice: number;
  readonly parent: PeerId | null;
  readonly children: readonly PeerId[];
}

/** Everything a page may want to show about this viewer's share of the mesh. */
export interface MeshStats {
  readonly stream: string;
  readonly peerId: PeerId | null;
  readonly sourceId: PeerId | null;
  /** WebSocket to the tracker is open and joined. */
  readonly trackerConnected: boolean;
  /**
   * `connecting`, `connected`, `reconnecting` (lost, trying again: WebRTC links keep carrying media
   * meanwhile), `failed` (refused for good, or the first join failed) or `closed`; `idle` before the
   * session starts.
   */
  readonly trackerState: TrackerConnectionState;
  /** Times the tracker was reached again after losing it. */
  readonly trackerReconnects: number;
  /** Time without a tracker since the first welcome (the current outage included), ms. */
  readonly trackerDisconnectedMs: number;
  /** The last finished outage, from the socket's close to the next welcome, ms (null: none yet). */
  readonly trackerLastOutageMs: number | null;
  /**
   * Reconnections that came back with another peer id (the resume ticket was refused or expired):
   * each rebuilt this viewer's place in the mesh (links closed, a fresh bootstrap).
   */
  readonly peerIdChanges: number;
  /** Signalling messages not delivered because the tracker was away (bounded queue, stale, or id change). */
  readonly trackerSignalsDropped: number;
  /** Data packets held for their segment's announcement and dropped when it did not come in time. */
  readonly heldPacketsDropped: number;
  /**
   * Data packets we did not forward because our uplink was behind: dropped from a peer's queue after
   * waiting 2 s there (too late for its player), or because that queue was full. The peer gets them
   * by repair or from the origin.
   */
  readonly forwardsDropped: number;
  /** Open WebRTC data channels. */
  readonly peers: number;
  /** Media bytes received from peers (tree packets and repaired ones; all verified). */
  readonly bytesFromMesh: number;
  /** Media bytes fetched from the origin by the loader. */
  readonly bytesFromOrigin: number;
  /** bytesFromMesh / (bytesFromMesh + bytesFromOrigin), 0 before any byte. */
  readonly meshShare: number;
  readonly segmentsFromMesh: number;
  readonly segmentsFromOrigin: number;
  /**
   * Of the first STARTUP_SEGMENTS (3) whole segments the player loaded, how many came from the mesh
   * and how many from the origin: a joining viewer's first segments should come from neighbours.
   */
  readonly startupSegmentsFromMesh: number;
  readonly startupSegmentsFromOrigin: number;
  /**
   * How long joining took, from the session's start (ms): to the tracker's first welcome, to the
   * first connection started (dialled or answered), and to the first open data channel (a joining
   * viewer's first segments can come from neighbours only after it). Null until it happened.
   */
  readonly welcomeAfterMs: number | null;
  readonly firstDialAfterMs: number | null;
  readonly firstLinkAfterMs: number | null;
  /**
   * Whole segments the player fetched from the origin that this viewer verified against their signed
   * hash and keeps for neighbours catching up (a joining viewer's first segments are in no tree).
   */
  readonly segmentsKeptFromOrigin: number;
  /** LL-HLS parts (`low-latency`) the mesh delivered, and those fetched from the origin. */
  readonly partsFromMesh: number;
  readonly partsFromOrigin: number;
  /** Packets of segments still being written whose signature was checked (valid, forged). */
  readonly packetSignaturesVerified: number;
  readonly packetSignaturesForged: number;
  /** Segments the mesh delivered in part, completed with byte ranges from the origin (counted as mesh segments; their range bytes count as origin bytes). */
  readonly segmentsCompletedFromOrigin: number;
  /** Media bytes this viewer forwarded to its children. */
  readonly uploadBytes: number;
  /** Slice streams currently forwarded (the engine's load). */
  readonly load: number;
  /** TL and ML in force now: measured or capped when `uploadCapacity` is measured or a cap is set. */
  readonly targetLoad: number;
  readonly maxLoad: number;
  /** The upload capacity the loads come from, kbit/s (measured, or the cap); null while unknown. */
  readonly uploadCapacityKbps: number | null;
  /** Where it comes from: `measured`, `capped` (max-upload-kbps is the limit) or `fixed` (not measured). */
  readonly uploadCapacitySource: 'measured' | 'fixed' | 'capped';
  /** The `upload` option in force. */
  readonly upload: UploadMode;
  /**
   * Why this viewer forwards nothing now (`upload-off`, `cellular`, `save-data`, `battery-low`; in
   * any mode but `off`, `frozen` and `throttled` when the page cannot relay on time); empty while it
   * shares its upload.
   */
  readonly receiveOnlyReasons: readonly ReceiveOnlyReason[];
  readonly slices: readonly SliceView[];
  /** Playback stalls after playback first started (reported by the player). */
  readonly stalls: number;
  readonly stallMs: number;
  /** Segments whose bytes did not match the signed hash, and announcements with a bad signature. */
  readonly verificationFailures: number;
  /** Packets that failed their announced per-packet hash on arrival (dropped, never forwarded). */
  readonly forgedPackets: number;
  /** Packets whose sequence lay beyond what this viewer's slices justify (dropped, never forwarded). */
  readonly forgedSequences: number;
  /** Parents this viewer left and stopped asking for a while: withholding, or closing a loop. */
  readonly parentsDistrusted: number;
  /**
   * Signed announcements that first reached this viewer from a neighbour rather than the tracker
   * (verified and placed; they keep the mesh going while the tracker is away).
   */
  readonly announcementsFromPeers: number;
  /** Announcements this viewer passed on to its neighbours (each at most once). */
  readonly announcementsForwarded: number;
  /** Announcements from neighbours with a bad signature (dropped, not passed on; they count toward cutting the sender off). */
  readonly forgedAnnouncements: number;
  /** Announcements from neighbours dropped unverified: beyond that neighbour's rate budget. */
  readonly peerAnnouncementsRateLimited: number;
  /** Announcements from neighbours refused: another stream, too far from the live edge, or no broadcaster key to verify with. */
  readonly peerAnnouncementsRefused: number;
  /** Media messages thrown away by fault injection (`dropReceivedDataFraction`); 0 in production. */
  readonly injectedLosses: number;
  /** Peers this viewer cut off (forged packets or undecodable messages). */
  readonly peersCutOff: number;
  /** Media bytes neighbours sent on request (repair), outside the trees; part of bytesFromMesh. */
  readonly bytesFromRepair: number;
  /**
   * Of bytesFromRepair, what the engine's per-packet repair brought (`packetRepair` engine); the rest
   * came by whole-segment requests (a segment from before joining, or every repair in segment mode).
   */
  readonly bytesFromPacketRepair: number;
  /** Segments for which neighbours were asked for missing packets. */
  readonly repairRequests: number;
  /** Shares of those requests a neighbour refused (busy, or not holding the segment) and another was asked for. */
  readonly repairsReasked: number;
  /** Packets this viewer sent to neighbours that asked. */
  readonly repairPacketsServed: number;
  /** The repair this viewer runs (`packetRepair` option): these figures are that path's. */
  readonly packetRepair: 'engine' | 'segment';
  /** Packets recovered from neighbours by repair (either path), verified. */
  readonly repairPacketsFromPeers: number;
  /** Packets recovered from the origin by repair (byte ranges; either path), verified. */
  readonly repairPacketsFromOrigin: number;
  /** Bytes the origin sent for repair's byte ranges (part of bytesFromOrigin; whole segments are not). */
  readonly repairOriginBytes: number;
  /** Packets in the origin's byte ranges that failed their announced hash (refused). */
  readonly repairOriginRefused: number;
  /**
   * Engine repair only: packets the engine found missing and could not repair before their
   * deadline (the current mesh node's count). Segment repair's misses show as segmentsFromOrigin.
   */
  readonly repairPacketsExpired: number;
  /**
   * Engine repair only: the engine's own repair counters (the current mesh node's): what it found
   * missing, asked, was refused, timed out on and took from the origin, and why (`originNeverAsked`:
   * due before any neighbour could be asked; `originWhileAsking`: a neighbour was still asked). Null
   * with segment repair. For diagnosis: the names follow the engine and may change.
   */
  readonly engineRepairCounters: Readonly<Record<string, number>> | null;
  /** Every open WebRTC link: route type, candidate types, round-trip time, bytes (read every 2 s). */
  readonly peerLinks: readonly PeerLinkStats[];
  /** Open links by route type: `host`, `srflx`, `prflx` or `relay` (TURN); links not yet read are left out. */
  readonly peersByRoute: RouteCounts;
  /** Bytes sent and received over TURN-relayed links since joining. */
  readonly relayedBytes: number;
  /** Links given up before their channel opened (ICE failed, timed out, …) since joining. */
  readonly connectFailures: number;
  /** Links to other viewers closed since joining because nothing but announcements crossed them for 20 s. */
  readonly idleLinksClosed: number;
  /**
   * What this viewer's data channels carried since joining, by message type (`data`, `advert`,
   * `announcement`, …): messages and encoded bytes each way. What a viewer's datagrams are made of
   * besides the media it forwards.
   */
  readonly traffic: Readonly<Record<string, TrafficOfType>>;
  /**
   * Bytes the WebRTC transports sent and received since joining (selected candidate pairs, links
   * closed since included): the messages above plus SCTP and DTLS framing and acknowledgements.
   */
  readonly transportBytesSent: number;
  readonly transportBytesReceived: number;
}

/** One message type's traffic over the data channels: messages and encoded bytes, each way. */
export interface TrafficOfType {
  readonly sent: number;
  readonly sentBytes: number;
  readonly received: number;
  readonly receivedBytes: number;
}

/** The tracker connection's state (TrackerClient's). */
export type TrackerConnectionState =
  'idle' | 'connecting' | 'connected' | 'reconnecting' | 'failed' | 'closed';

export type MeshErrorCode =
  'tracker' | 'trackerRefused' | 'badAnnouncement' | 'verification' | 'peer' | 'config';

export class MeshError extends Error {
  override readonly name = 'MeshError';
  constructor(
    readonly code: MeshErrorCode,
    message: string,
    /** The tracker's own error code when the tracker refused something (`trackerRefused`). */
    readonly trackerCode?: TrackerErrorCode,
  ) {
    super(message);
  }
}

/** What the hls.js loader and the player need from a mesh session. */
export interface SegmentProvider {
  /**
   * Resolves with the verified bytes of the segment with this media sequence number once the mesh
   * has all of it, or null when `deadlineMs` (on the provider's clock: in a page performance.now(),
   * the scale of hls.js's loading stats) passes first, the signal aborts, or the session closes. Never resolves with unverified bytes. With the segment's `url`,
   * a segment the mesh delivered only in part is completed from the origin with HTTP Range
   * requests for just the missing packets: shortly before the deadline (`packetRepair: 'segment'`),
   * or as the engine's last resort per packet, the deadline being its playout clock ('engine').
   */
  waitForSegment(
    sequence: number,
    deadlineMs: number,
    signal?: AbortSignal,
    url?: string,
  ): Promise<Uint8Array | null>;
  /**
   * Resolves with the verified bytes [start, end) of a segment (an LL-HLS part given as a byte
   * range of its segment) once the mesh has the packets covering them, possibly long before the
   * segment is complete (the true source pushes packets while the packager writes); null when
   * `deadlineMs` passes first, the signal aborts, or the session closes. Never unverified bytes.
   */
  waitForRange(
    sequence: number,
    start: number,
    end: number,
    deadlineMs: number,
    signal?: AbortSignal,
  ): Promise<Uint8Array | null>;
  /**
   * Whether it is worth waiting for the mesh: the segment is announced (or expected soon) after this
   * session joined. False for segments the true source published before we joined: those come
   * from the origin at once.
   */
  expectsSegment(sequence: number): boolean;
  /** The loader fetched this many media bytes (one segment, or one LL-HLS part) from the origin. */
  noteOriginSegment(bytes: number, part?: boolean): void;
  /**
   * A whole segment the loader fetched from the origin (a copy the provider may keep): verified and
   * kept, it can be served to neighbours catching up. Optional.
   */
  keepOriginSegment?(sequence: number, bytes: Uint8Array<ArrayBuffer>): void;
  /** The loader handed a mesh segment (or an LL-HLS part of it) to the player. */
  noteMeshSegment(sequence: number, part?: boolean): void;
  /** The player stalled for `ms` (reported when the stall ends). */
  noteStall(ms: number): void;
  /** The time the packager finished the segment (Unix ms), if announced. */
  publishedAtMs(sequence: number): number | undefined;
  /**
   * The segment's duration as announced, ms, if announced. Optional. An LL player enters a segment
   * while it is written, and hls.js then reports only the part of it listed so far.
   */
  segmentDurationMs?(sequence: number): number | undefined;
  /**
   * Resolves true once the mesh holds this segment whole and verified, false when `deadlineMs` (the
   * provider's clock) passes first, the signal aborts, or the mesh cannot bring it. Unlike
   * `waitForSegment` it starts no repair and takes nothing from the origin: the playlist loader
   * only learns when the mesh has the next segment, to reload the playlist then. Optional.
   */
  waitUntilHeld?(sequence: number, deadlineMs: number, signal?: AbortSignal): Promise<boolean>;
  /**
   * Whether the segment is announced: the true source announces a segment once the origin's playlist
   * lists it. Undefined when the provider cannot tell. Optional (the playlist loader then takes
   * every segment it waits for to be listed).
   */
  segmentAnnounced?(sequence: number): boolean | undefined;
  /** When the mesh came to hold this segment whole and verified (the provider's clock), if it does. Optional. */
  segmentHeldAtMs?(sequence: number): number | undefined;
}
