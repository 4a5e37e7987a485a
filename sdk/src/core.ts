// Runtime-neutral part of the SDK (no DOM elements): the true source and Node tests use it too.
export * from './types.js';
export {
  MeshSession,
  LIVE_PROTOCOL,
  inspectPacket,
  resolveLoads,
  resolveUploadCapacity,
  type SessionHost,
} from './session.js';
export {
  UplinkEstimator,
  UploadBucket,
  UploadCapacity,
  loadsForCapacity,
  streamKbps,
  type LoadChange,
  type Loads,
  type UplinkSample,
  type UploadCapacityMode,
  type UploadCapacitySource,
} from './capacity.js';
export {
  MeshNode,
  CONNECT_TIMEOUT_MS,
  DIAL_BACKOFF_MS,
  LINK_STATS_INTERVAL_MS,
  MAX_QUIT_LINGER_MS,
  type MeshNodeOptions,
  type MeshNodeCounters,
  type LogFn,
} from './mesh-node.js';
export {
  candidateType,
  forNodeDatachannel,
  ON_NODE_DATACHANNEL,
  routeOf,
  selectedPairOf,
  type ConnectFailure,
  type ConnectFailureReason,
  type PeerLinkStats,
  type SelectedPair,
} from './connectivity.js';
export {
  SegmentStore,
  importPublicKey,
  bytesToBase64,
  base64ToBytes,
  bytesToHex,
  type SegmentStoreCounters,
} from './segments.js';
export {
  TrackerClient,
  DEFAULT_RECONNECT_POLICY,
  MAX_QUEUED_ANNOUNCEMENTS,
  MAX_QUEUED_SIGNALS,
  MAX_QUEUED_SIGNAL_AGE_MS,
  PERMANENT_JOIN_REFUSALS,
  reconnectDelayMs,
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
