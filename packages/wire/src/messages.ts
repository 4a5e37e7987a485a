import type { Bloom128 } from './bloom.js';
import type { SignedAnnouncement } from './tracker.js';

/**
 * Every message two Chunkycast peers exchange. The engine produces and consumes these typed
 * values; only this package turns them into bytes and back.
 *
 * Peer ids are unsigned 32-bit integers assigned by the rendezvous server (never chosen by a
 * client). Slices are 0‥M−1. Sequence numbers count packets within one slice (one per block).
 */
export type PeerId = number;

/**
 * The wire format version; a decoder refuses any other. 2: advert entries carry `pathMs` (issue 16),
 * which a version-1 decoder would misread as the start of the filter.
 */
export const WIRE_VERSION = 2;

/**
 * The largest message we ever send or accept: the SCTP maximum message size Chromium and
 * node-datachannel negotiate (262,144 bytes, measured in environment.md). Larger sends throw there.
 */
export const MAX_MESSAGE_BYTES = 262_144;

/** Bytes of every header: version + type. */
export const HEADER_BYTES = 2;

/**
 * Upper bound on slices per stream. The thesis's default is M = 16 (§4.2) and it experimented with
 * 8 and 32 (§4.4, "Effect of other parameters"); 64 leaves room for redundant slices without letting a peer make us allocate.
 */
export const MAX_SLICES = 64;

/** At most this many underloaded candidates in one load-switch report (a "subset of the most underloaded", thesis §4.2, "Fine-tuning Load"). */
export const MAX_REPORT_CANDIDATES = 8;

/** Sequence value meaning "no particular packet: start with the next one you get". */
export const SEQ_NONE = 0xffff_ffff;
/** Hop counts travel in one byte: senders saturate at this rather than wrap. */
export const MAX_HOPS = 255;
/** Loads travel in two bytes (adverts, switch messages): senders saturate at this rather than wrap. */
export const MAX_LOAD_FIELD = 0xffff;

export const MessageType = {
  Data: 1,
  Probe: 2,
  Advert: 3,
  LoadReport: 4,
  Instruction: 5,
  SwitchRequest: 6,
  SwitchReply: 7,
  SwitchComplete: 8,
  LatencyPermissionRequest: 9,
  LatencyPermissionReply: 10,
  Flood: 11,
  ForcedParentRequest: 12,
  Heartbeat: 13,
  Quit: 14,
  TreeLeave: 15,
  Walk: 16,
  Link: 17,
  Swap: 18,
  SampleResult: 19,
  SliceSourceAssign: 20,
  RepairRequest: 21,
  RepairData: 22,
  RepairNak: 23,
  Announcement: 24,
  PacketRepairRequest: 25,
  PacketRepairData: 26,
  PacketRepairNak: 27,
} as const;
export type MessageType = (typeof MessageType)[keyof typeof MessageType];

/** A slice-stream packet, parent → child. The payload is opaque to the engine. */
export interface DataMessage {
  readonly type: typeof MessageType.Data;
  readonly slice: number;
  readonly seq: number;
  /** OR of the masks of every node that forwarded this packet, the true source excluded. */
  readonly bloom: Bloom128;
  /** Overlay hops from the slice source (the slice source's own children see 1). */
  readonly hops: number;
  readonly payload: Uint8Array;
}

/** Sent down a tree while no data flows, so a loop is caught even without data (thesis §4.2, "Loop avoidance and detection"). */
export interface ProbeMessage {
  readonly type: typeof MessageType.Probe;
  readonly slice: number;
  readonly probeId: number;
  readonly bloom: Bloom128;
  readonly hops: number;
}

/** Per-slice facts in an advertisement (thesis §4.2). */
export interface AdvertSliceEntry {
  readonly slice: number;
  /** Data for this slice currently reaches the sender. */
  readonly receiving: boolean;
  readonly isSliceSource: boolean;
  /** Hops from the slice source of the sender's latest packet. */
  readonly hops: number;
  /**
   * When this slice reaches the sender relative to the sender's other slices (moving average, ms;
   * negative = earlier than the sender's average slice). null until measured. No clock sync needed
   * (thesis §4.2, "Fine-tuning Latency").
   */
  readonly offsetMs: number | null;
  /**
   * How long the slice takes from its root to the sender, as the sender estimates it (ms, integer,
   * clamped to 0‥65534): its parent's advertised estimate plus half the round trip to that parent,
   * 0 at the root. null until known. No clock sync either; unlike `offsetMs` it compares between
   * neighbours without a bias (the latency phase's estimate by default, see ProtocolConfig's
   * latencyEstimate).
   */
  readonly pathMs: number | null;
  /** The Bloom filter the sender receives on this slice. */
  readonly filter: Bloom128;
}

/**
 * Periodic advertisement, node → every neighbour (thesis §4.2): load, thresholds and per-slice
 * filters / arrival offsets. It doubles as the 1 s heartbeat. `full` adverts carry every slice;
 * others carry only slices whose facts changed since the sender's previous advert (the control
 * channel is reliable and ordered, so a delta is safe).
 */
export interface AdvertMessage {
  readonly type: typeof MessageType.Advert;
  readonly full: boolean;
  readonly load: number;
  /** TL, the load the sender aims for (its LLT ≤ TL ≤ ULT). */
  readonly targetLoad: number;
  readonly lowerLatencyThreshold: number;
  readonly upperLatencyThreshold: number;
  readonly maxLoad: number;
  /** Sender's local clock (ms mod 2^32) when sent; echoed back for round-trip time. */
  readonly sentAtMs: number;
  /** The receiver's own `sentAtMs` most recently seen by the sender, or null. */
  readonly echoSentAtMs: number | null;
  /** How long the sender held that echo before sending (ms, < 0xffff); 0 when `echoSentAtMs` is null. */
  readonly echoHoldMs: number;
  readonly entries: readonly AdvertSliceEntry[];
}

export interface LoadCandidate {
  readonly peer: PeerId;
  readonly load: number;
  readonly lowerLatencyThreshold: number;
  readonly targetLoad: number;
}

/** Child → its overloaded parent: underloaded loop-free neighbours that could take `slice` (thesis §4.2, "Fine-tuning Load"). */
export interface LoadReportMessage {
  readonly type: typeof MessageType.LoadReport;
  readonly slice: number;
  readonly candidates: readonly LoadCandidate[];
}

/** Overloaded parent → the one child it picked: switch `slice` to `target` (thesis §4.2, "Fine-tuning Load"). */
export interface InstructionMessage {
  readonly type: typeof MessageType.Instruction;
  readonly slice: number;
  readonly target: PeerId;
  readonly targetLoadSeen: number;
}

export const SwitchReason = { Load: 0, Latency: 1 } as const;
export type SwitchReason = (typeof SwitchReason)[keyof typeof SwitchReason];

/**
 * Child → prospective parent (thesis §4.2, "Fine-tuning Load"): start sending `slice` at `handoffSeq`; the load
 * figures the decision was made on travel along, so the receiver can abort if they changed.
 */
export interface SwitchRequestMessage {
  readonly type: typeof MessageType.SwitchRequest;
  readonly slice: number;
  readonly reason: SwitchReason;
  readonly handoffSeq: number;
  readonly targetLoadSeen: number;
  readonly parentLoadSeen: number;
}

export const RejectReason = {
  None: 0,
  OverMaxLoad: 1,
  Loop: 2,
  LoadChanged: 3,
  NotReceiving: 4,
  NotUnderloaded: 5,
  OverUpperThreshold: 6,
  NotNeighbour: 7,
  Busy: 8,
  Quitting: 9,
} as const;
export type RejectReason = (typeof RejectReason)[keyof typeof RejectReason];

/** Prospective parent → child, for switch and forced requests alike (thesis §4.2, "Fine-tuning Load"). */
export interface SwitchReplyMessage {
  readonly type: typeof MessageType.SwitchReply;
  readonly slice: number;
  readonly handoffSeq: number;
  readonly accepted: boolean;
  readonly rejectReason: RejectReason;
  readonly load: number;
}

/** Child → old parent: stop sending `slice` at `handoffSeq`; the new parent starts there (thesis §4.2, "Fine-tuning Load"). */
export interface SwitchCompleteMessage {
  readonly type: typeof MessageType.SwitchComplete;
  readonly slice: number;
  readonly handoffSeq: number;
  readonly newParent: PeerId;
}

/** Child → current parent: may I move `slice` to `target` for latency? (thesis §4.4, control overhead) */
export interface LatencyPermissionRequestMessage {
  readonly type: typeof MessageType.LatencyPermissionRequest;
  readonly slice: number;
  readonly target: PeerId;
  readonly parentLoadSeen: number;
}

export interface LatencyPermissionReplyMessage {
  readonly type: typeof MessageType.LatencyPermissionReply;
  readonly slice: number;
  readonly target: PeerId;
  readonly granted: boolean;
}

/** Controlled flood that kick-starts a slice tree (thesis §4.2, initial tree construction); `epoch` counts slice-source changes. */
export interface FloodMessage {
  readonly type: typeof MessageType.Flood;
  readonly slice: number;
  readonly epoch: number;
  readonly bloom: Bloom128;
  readonly hops: number;
}

export const ForcedReason = {
  Join: 0,
  Loop: 1,
  ParentLost: 2,
  NeighbourChange: 3,
  Flood: 4,
  ParentQuit: 5,
} as const;
export type ForcedReason = (typeof ForcedReason)[keyof typeof ForcedReason];

/**
 * Child → neighbour: be my parent for `slice`. May only be refused above ML or on a loop
 * (thesis §4.2, forced parents). `fromSeq` is the first packet the child still needs (SEQ_NONE: the next one).
 */
export interface ForcedParentRequestMessage {
  readonly type: typeof MessageType.ForcedParentRequest;
  readonly slice: number;
  readonly reason: ForcedReason;
  readonly fromSeq: number;
}

/** Liveness on links that carry no advertisement (true source ↔ slice sources). */
export interface HeartbeatMessage {
  readonly type: typeof MessageType.Heartbeat;
}

/** Graceful quit: the sender keeps forwarding for `lingerMs` while its children find new parents. */
export interface QuitMessage {
  readonly type: typeof MessageType.Quit;
  readonly lingerMs: number;
}

export const TreeRole = { Child: 0, Parent: 1 } as const;
export type TreeRole = (typeof TreeRole)[keyof typeof TreeRole];

/** "I am no longer your child (or parent) for `slice`": ends a tree edge without a hand-off. */
export interface TreeLeaveMessage {
  readonly type: typeof MessageType.TreeLeave;
  readonly slice: number;
  readonly role: TreeRole;
}

export const WalkPurpose = { Join: 0, OutRepair: 1, InRepair: 2, Sample: 3 } as const;
export type WalkPurpose = (typeof WalkPurpose)[keyof typeof WalkPurpose];

/** A Swaplinks random walk, forwarded hop by hop until `ttl` runs out. */
export interface WalkMessage {
  readonly type: typeof MessageType.Walk;
  readonly walkId: number;
  readonly origin: PeerId;
  readonly purpose: WalkPurpose;
  readonly ttl: number;
}

export const LinkOp = { Add: 0, Remove: 1 } as const;
export type LinkOp = (typeof LinkOp)[keyof typeof LinkOp];
export const LinkDirection = { Out: 0, In: 1 } as const;
export type LinkDirection = (typeof LinkDirection)[keyof typeof LinkDirection];

/**
 * Swaplinks link bookkeeping: the sender added or removed one link `Out` (sender → receiver) or
 * `In` (receiver → sender). Links are multisets, so each message moves one unit.
 */
export interface LinkMessage {
  readonly type: typeof MessageType.Link;
  readonly op: LinkOp;
  readonly direction: LinkDirection;
  /** The walk this link answers (so its origin can tell which walk completed), or 0. */
  readonly walkId: number;
}

/** Swaplinks swap step: move one of your out-links to me so it points at `newTarget` instead. */
export interface SwapMessage {
  readonly type: typeof MessageType.Swap;
  readonly walkId: number;
  readonly newTarget: PeerId;
}

/** End of a sampling walk → its origin: "I am your sample". */
export interface SampleResultMessage {
  readonly type: typeof MessageType.SampleResult;
  readonly walkId: number;
}

/** True source → node: you are (or no longer are) the slice source of `slice` in `epoch` (thesis §4.2, true source and slice sources). */
export interface SliceSourceAssignMessage {
  readonly type: typeof MessageType.SliceSourceAssign;
  readonly slice: number;
  readonly epoch: number;
  readonly assigned: boolean;
  /**
   * When the true source moves a root (not in the thesis; engine rootSpreadIntervalMs): to the new
   * root (`assigned`), the old one, which will ask to be its child; to the old root (not
   * `assigned`), the new one, to ask. Absent otherwise.
   */
  readonly peer?: PeerId;
}

/** Most packets one segment may have (as a media packet's u16 count allows; see media.ts). */
export const MAX_REPAIR_PACKETS = 4096;

/**
 * Viewer → neighbour: send me these packets of a segment you hold (repair from neighbours, after
 * Bullet's recovery from peers rather than the source; the packets are checked against the signed
 * announcement like tree packets). `missing` is a bitmap, bit i (LSB first) = packet i.
 */
export interface RepairRequestMessage {
  readonly type: typeof MessageType.RepairRequest;
  readonly requestId: number;
  readonly segment: number;
  /** Packets in the segment (1‥MAX_REPAIR_PACKETS); the bitmap has ceil(count / 8) bytes. */
  readonly count: number;
  readonly missing: Uint8Array;
}

/** One requested packet: a media packet (segment, index, count, bytes) as the tree carries it. */
export interface RepairDataMessage {
  readonly type: typeof MessageType.RepairData;
  readonly requestId: number;
  readonly payload: Uint8Array;
}

/**
 * NotHeld: not here. Busy: over the helper's repair budget or transport backlog. Pending (packet
 * repair only): not here yet, but the helper is chasing it itself and will pass it down its tree.
 */
export const RepairNakReason = { NotHeld: 0, Busy: 1, Pending: 2 } as const;
export type RepairNakReason = (typeof RepairNakReason)[keyof typeof RepairNakReason];

/** The neighbour cannot serve the request: it does not hold the segment, or is too busy. */
export interface RepairNakMessage {
  readonly type: typeof MessageType.RepairNak;
  readonly requestId: number;
  readonly reason: RepairNakReason;
}

/**
 * A signed segment announcement passed on over the mesh (host-level, like repair): the tracker's
 * WebSocket is not the only way in, so packets keep being verifiable, and flowing, while the
 * tracker is away. The announcement is checked exactly as in a tracker frame (`validateAnnouncement`)
 * and travels as its canonical text (`announcementText`); its signature is the receiver's to verify.
 */
export interface AnnouncementMessage {
  readonly type: typeof MessageType.Announcement;
  readonly announcement: SignedAnnouncement;
}

/** Packets one packet-repair request or NAK covers: a 32-bit bitmap from `baseSeq`. */
export const PACKET_REPAIR_SPAN = 32;

/**
 * Member → neighbour: send me these packets of one slice (engine-level, deadline-aware repair after
 * Bullet's recovery from peers, not from the source). Bit i of `wanted` (LSB first) = `baseSeq + i`;
 * never zero.
 */
export interface PacketRepairRequestMessage {
  readonly type: typeof MessageType.PacketRepairRequest;
  readonly slice: number;
  readonly requestId: number;
  readonly baseSeq: number;
  readonly wanted: number;
}

/** One repaired packet of a slice, helper → requester. No Bloom filter: it does not extend a tree path. */
export interface PacketRepairDataMessage {
  readonly type: typeof MessageType.PacketRepairData;
  readonly slice: number;
  readonly requestId: number;
  readonly seq: number;
  /** The helper's own hop count on the slice (for the requester's statistics only). */
  readonly hops: number;
  readonly payload: Uint8Array;
}

/** The helper does not serve these packets of a request: it does not hold them, or it is busy. */
export interface PacketRepairNakMessage {
  readonly type: typeof MessageType.PacketRepairNak;
  readonly slice: number;
  readonly requestId: number;
  readonly baseSeq: number;
  /** Bit i = `baseSeq + i` not served; never zero. */
  readonly unserved: number;
  readonly reason: RepairNakReason;
}

export type Message =
  | DataMessage
  | ProbeMessage
  | AdvertMessage
  | LoadReportMessage
  | InstructionMessage
  | SwitchRequestMessage
  | SwitchReplyMessage
  | SwitchCompleteMessage
  | LatencyPermissionRequestMessage
  | LatencyPermissionReplyMessage
  | FloodMessage
  | ForcedParentRequestMessage
  | HeartbeatMessage
  | QuitMessage
  | TreeLeaveMessage
  | WalkMessage
  | LinkMessage
  | SwapMessage
  | SampleResultMessage
  | SliceSourceAssignMessage
  | RepairRequestMessage
  | RepairDataMessage
  | RepairNakMessage
  | AnnouncementMessage
  | PacketRepairRequestMessage
  | PacketRepairDataMessage
  | PacketRepairNakMessage;

/** Messages that negotiate a parent change (what the thesis counts as "switch messages", thesis §4.4, control overhead). */
export function isSwitchMessage(type: MessageType): boolean {
  return (
    type === MessageType.Instruction ||
    type === MessageType.SwitchRequest ||
    type === MessageType.SwitchReply ||
    type === MessageType.SwitchComplete ||
    type === MessageType.LatencyPermissionRequest ||
    type === MessageType.LatencyPermissionReply ||
    type === MessageType.ForcedParentRequest
  );
}

export const MESSAGE_TYPE_NAMES: Readonly<Record<MessageType, string>> = {
  1: 'data',
  2: 'probe',
  3: 'advert',
  4: 'loadReport',
  5: 'instruction',
  6: 'switchRequest',
  7: 'switchReply',
  8: 'switchComplete',
  9: 'latencyPermissionRequest',
  10: 'latencyPermissionReply',
  11: 'flood',
  12: 'forcedParentRequest',
  13: 'heartbeat',
  14: 'quit',
  15: 'treeLeave',
  16: 'walk',
  17: 'link',
  18: 'swap',
  19: 'sampleResult',
  20: 'sliceSourceAssign',
  21: 'repairRequest',
  22: 'repairData',
  23: 'repairNak',
  24: 'announcement',
  25: 'packetRepairRequest',
  26: 'packetRepairData',
  27: 'packetRepairNak',
};
