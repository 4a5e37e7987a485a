export {
  createTracker,
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_MAX_BAD_FRAMES,
  type DebugMember,
  type DebugSwarm,
  type ErrorCounts,
  type Tracker,
  type TrackerMetrics,
  type TrackerOptions,
} from './server.js';
export { ConfigError, parseConfig, USAGE, type TrackerConfig } from './config.js';
export { createLogger, silentLogger, LOG_LEVELS, type Logger, type LogLevel } from './log.js';
export {
  generateSigningKeys,
  importPublicKey,
  KeyError,
  loadSigningKeys,
  rawPublicKeyBase64,
  type SigningKeys,
} from './keys.js';
export { emptyOriginStats, ROLE_HEADER, type OriginStats } from './origin.js';
export { PeerIdSpace, Swarm, SwarmRegistry, type Member } from './swarm.js';
export * from './source/true-source.js';
