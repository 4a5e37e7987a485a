export {
  CLOSE_REPLACED,
  CLOSE_SERVICE_RESTART,
  createTracker,
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_MAX_BAD_FRAMES,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
  DEFAULT_MAX_HTTP_CONNECTIONS_PER_ADDRESS,
  DEFAULT_HTTP_HEADERS_TIMEOUT_MS,
  DEFAULT_MAX_MESSAGES_PER_SECOND,
  DEFAULT_RESUME_TICKET_TTL_S,
  MESSAGE_BURST_SECONDS,
  type DebugMember,
  type DebugSwarm,
  type ErrorCounts,
  type Tracker,
  type TrackerMetrics,
  type TrackerOptions,
} from './server.js';
export {
  ConfigError,
  DEFAULT_LIMITS,
  DEFAULT_TOKEN_TTL_S,
  MIN_SECRET_LENGTH,
  parseConfig,
  USAGE,
  type TrackerConfig,
} from './config.js';
export {
  deriveTrackerSecret,
  makeJoinToken,
  makeResumeTicket,
  readResumeTicket,
  sourceIdFor,
  verifyJoinToken,
  type CredentialProblem,
  type JoinTokenCheck,
  type ResumeClaim,
  type ResumeTicketCheck,
} from './tickets.js';
export { addressKey, AddressCounts, LIMIT_KINDS, TokenBucket, type LimitKind } from './limits.js';
export {
  DISCONNECT_REASONS,
  PROMETHEUS_CONTENT_TYPE,
  renderPrometheus,
  RESUME_OUTCOMES,
  type DisconnectReason,
  type ResumeOutcome,
} from './metrics.js';
export {
  checkIceSettings,
  DEFAULT_TURN_TTL_S,
  ICE_RENEW_AT_FRACTION,
  iceConfigFor,
  iceUrlProblem,
  MAX_TURN_TTL_S,
  MIN_TURN_TTL_S,
  NO_ICE,
  NO_ICE_WARNING,
  turnCredentials,
  type IceSettings,
} from './ice.js';
export {
  ConnectivityCounters,
  growth,
  MAX_LINKS_PER_REPORT,
  MAX_RELAYED_BYTES_PER_REPORT,
  type PeerLinkTotals,
} from './connectivity.js';
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
export { randomPeerId, Swarm, SwarmRegistry, type Member } from './swarm.js';
export {
  ClusterStartError,
  DEFAULT_CLUSTER_TIMING,
  MemoryCluster,
  MemoryHub,
  type Cluster,
  type ClusterHandlers,
  type ClusterStats,
  type ClusterTiming,
  type DeliverResult,
  type JoinOutcome,
  type JoinRequest,
  type JoinResult,
  type MemberLossReason,
  type MemoryClusterOptions,
  type MemoryHubOptions,
  type ResumeRequest,
} from './cluster.js';
export {
  connectRedisCluster,
  DEFAULT_KEY_PREFIX,
  RedisCluster,
  type RedisClusterOptions,
} from './redis-cluster.js';
export * from './source/true-source.js';
