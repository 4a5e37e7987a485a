// Runtime-neutral part of the SDK (no DOM elements): the true source and Node tests use it too.
export * from './types.js';
export { MeshSession, LIVE_PROTOCOL, resolveLoads, type SessionHost } from './session.js';
export { MeshNode, type MeshNodeOptions, type MeshNodeCounters, type LogFn } from './mesh-node.js';
export {
  SegmentStore,
  importPublicKey,
  bytesToBase64,
  base64ToBytes,
  bytesToHex,
  type SegmentStoreCounters,
} from './segments.js';
export { TrackerClient, type WebSocketFactory, type WebSocketLike, type Welcome } from './tracker-client.js';
