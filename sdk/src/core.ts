// Runtime-neutral part of the SDK (no DOM elements): the true source and Node hosts use it too.
// Only what hosts use is exported; helpers inside the modules are reached by the SDK's own unit
// tests from src/ (not through the package).
export * from './types.js';
export { MeshSession, LIVE_PROTOCOL, inspectPacket, type SessionHost } from './session.js';
export { DEFAULT_PACKET_REPAIR, type PacketRepairMode } from './packet-repair.js';
export { type Loads, type UploadCapacityMode, type UploadCapacitySource } from './capacity.js';
export {
  LOW_BATTERY_LEVEL,
  UPLOAD_MODES,
  type BatteryLike,
  type ConnectionLike,
  type ReceiveOnlyReason,
  type UploadMode,
  type UploadPlatform,
} from './upload-policy.js';
export {
  MeshNode,
  CONNECT_TIMEOUT_MS,
  DIAL_BACKOFF_MS,
  FIRST_DIAL_BACKOFF_MS,
  LINK_STATS_INTERVAL_MS,
  MAX_QUIT_LINGER_MS,
  type MeshNodeOptions,
  type MeshNodeCounters,
  type LogFn,
} from './mesh-node.js';
export {
  forNodeDatachannel,
  type ConnectFailure,
  type ConnectFailureReason,
  type PeerLinkStats,
} from './connectivity.js';
export { MAX_SEGMENTS_KEPT, SegmentStore, bytesToBase64, type SegmentStoreCounters } from './segments.js';
export {
  TrackerClient,
  DEFAULT_RECONNECT_POLICY,
  type ReconnectPolicy,
  type TrackerClientOptions,
  type TrackerClientStats,
  type TrackerClock,
  type TrackerDisconnect,
  type TrackerReconnect,
  type TrackerState,
  type WebSocketFactory,
  type WebSocketLike,
  type Welcome,
} from './tracker-client.js';
