/** Command-line flags and CHUNKYCAST_* environment variables → a validated TrackerConfig. */
import { randomBytes } from 'node:crypto';
import { MAX_ICE_URLS, MAX_KEY_LENGTH, STREAM_ID_PATTERN } from '@chunkycast/wire';
import { DEFAULT_CLUSTER_TIMING } from './cluster.js';
import { DEFAULT_TURN_TTL_S, iceUrlProblem, MAX_TURN_TTL_S, MIN_TURN_TTL_S } from './ice.js';
import { isLogLevel, LOG_LEVELS, type LogLevel } from './log.js';
import { ED25519_PUBLIC_KEY_BYTES } from './keys.js';
import {
  DEFAULT_HTTP_HEADERS_TIMEOUT_MS,
  DEFAULT_MAX_BAD_FRAMES,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
  DEFAULT_MAX_HTTP_CONNECTIONS_PER_ADDRESS,
  DEFAULT_MAX_MESSAGES_PER_SECOND,
} from './server.js';
import { DEFAULT_KEY_PREFIX, KEY_PREFIX_PATTERN } from './redis-layout.js';
import { DEFAULT_PART_TARGET_MS, MAX_PART_TARGET_MS, MIN_PART_TARGET_MS } from './ll-hls/playlist.js';

export interface TrackerConfig {
  /** `--help` was given: print USAGE and do nothing else. */
  readonly help: boolean;
  readonly host: string;
  /** 0 = any free port. */
  readonly port: number;
  /** Directory served under /live/ (the packager's HLS output), or null for no origin. */
  readonly originDir: string | null;
  /** Publish an LL-HLS view of a plain packager's playlists under /live/ (needs `originDir`). */
  readonly llHls: boolean;
  /** Part target of the LL-HLS view (EXT-X-PART-INF PART-TARGET), ms. */
  readonly partTargetMs: number;
  /** Directory served under / (the built demo), or null. */
  readonly staticDir: string | null;
  readonly broadcasterKey: string;
  /** No key was configured and `broadcasterKey` was made up; only the in-process source knows it. */
  readonly broadcasterKeyGenerated: boolean;
  /** PKCS8 PEM Ed25519 private key file; null = an ephemeral pair (or `publicKey` alone). */
  readonly signingKeyFile: string | null;
  /**
   * Base64 raw Ed25519 public key of the broadcaster, for a process that checks and hands out the
   * key but does not run the source (another process of a Redis cluster holds the private key).
   */
  readonly publicKey: string | null;
  /** Run the true source in-process for this stream. */
  readonly sourceStream: string | null;
  /**
   * The playlist the in-process source ingests. Null with a source stream means "this tracker's own
   * /live/live.m3u8", which is only known once the port is bound (the port may be 0).
   */
  readonly sourcePlaylist: string | null;
  readonly logLevel: LogLevel;
  /** Frames one connection may send per second, sustained (bursts of 5 s worth); 0 = unlimited. */
  readonly maxMessagesPerSecond: number;
  /** Open WebSockets per client address (IPv6: per /64); 0 = unlimited. */
  readonly maxConnectionsPerAddress: number;
  /** Open WebSockets in the whole process; 0 = unlimited. */
  readonly maxConnections: number;
  /** Undecodable frames one connection may send before it is closed (1008); 0 = unlimited. */
  readonly maxBadFrames: number;
  /** Open plain HTTP connections per client address (IPv6: per /64); 0 = unlimited. */
  readonly maxHttpConnectionsPerAddress: number;
  /** Time a client has to send its request headers (then 408 and closed). */
  readonly httpHeadersTimeoutMs: number;
  /** HMAC key of viewer join tokens; null = viewers join without a token. */
  readonly joinSecret: string | null;
  /** Page origins allowed to open /ws (exact, normalised `scheme://host[:port]`); null = any. */
  readonly allowedOrigins: readonly string[] | null;
  /** HMAC key of resume tickets and source ids; null = derived from the broadcaster key. */
  readonly trackerSecret: string | null;
  /** Share swarms with other tracker processes through this Redis; null = this process alone. */
  readonly redisUrl: string | null;
  /** Prepended to every Redis key and channel. */
  readonly redisKeyPrefix: string;
  /** How often this process restates in Redis that it is alive. */
  readonly clusterHeartbeatMs: number;
  /** A process not heard from for this long is dead: its members are no longer offered. */
  readonly clusterNodeTtlMs: number;
  /** `stun:` URLs handed to every peer (empty: none). */
  readonly stunUrls: readonly string[];
  /** `turn:`/`turns:` URLs handed to every peer with its own short-lived credentials (empty: none). */
  readonly turnUrls: readonly string[];
  /** Shared secret of the TURN REST API (coturn `static-auth-secret`); null without TURN. */
  readonly turnSecret: string | null;
  /** Lifetime of each peer's TURN credentials, seconds (renewed at 80%). */
  readonly turnTtlS: number;
  /** `token` subcommand: print a join token for this stream and exit; null = run the tracker. */
  readonly token: { readonly stream: string; readonly ttlS: number } | null;
}

/** Defaults for a tracker facing the internet; the reasons are in tracker/README.md ("Limits"). */
export const DEFAULT_LIMITS = {
  /**
   * A viewer sends ~40 frames when it joins (join, bootstrap, an offer or answer per link: whole
   * SDPs, no trickled candidates) and well under 1 per second after that (a report every 2 s, a
   * signal per new link, a bootstrap now and then): 20/s sustained with bursts of 100 is several
   * times what an honest peer needs, and bounds what one socket can make the tracker do.
   */
  maxMessagesPerSecond: DEFAULT_MAX_MESSAGES_PER_SECOND,
  /** Generous for NAT: a CGNAT address or a campus often carries dozens to hundreds of viewers. */
  maxConnectionsPerAddress: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
  maxConnections: DEFAULT_MAX_CONNECTIONS,
  maxBadFrames: DEFAULT_MAX_BAD_FRAMES,
  /** As for WebSockets; an HLS player holds a handful of connections to the origin at most. */
  maxHttpConnectionsPerAddress: DEFAULT_MAX_HTTP_CONNECTIONS_PER_ADDRESS,
  /** A slow mobile link sends its headers in well under a second; Node's own 60 s fed slow-loris. */
  httpHeadersTimeoutMs: DEFAULT_HTTP_HEADERS_TIMEOUT_MS,
} as const;
/** Bounds of --http-headers-timeout-ms. */
const MIN_HTTP_HEADERS_TIMEOUT_MS = 100;
const MAX_HTTP_HEADERS_TIMEOUT_MS = 600_000;

const MIN_CLUSTER_HEARTBEAT_MS = 50;
const MAX_CLUSTER_HEARTBEAT_MS = 60_000;
/** Half the cluster's staleKeyTtlMs (10 min), which must outlive two node TTLs. */
const MAX_CLUSTER_NODE_TTL_MS = 300_000;

/** Secrets shorter than this are refused: an HMAC key can be guessed offline from one token. */
export const MIN_SECRET_LENGTH = 16;
const MAX_SECRET_LENGTH = 1024;
/** The `token` subcommand's default lifetime. */
export const DEFAULT_TOKEN_TTL_S = 3600;
const MAX_TOKEN_TTL_S = 366 * 24 * 3600;

/**
 * Reads `--flag value`, `--flag=value` and `--help`/`-h` from argv into `raw` (a flag given on the
 * command line overrides its environment variable), for both command-line tools of this package.
 * Returns whether help was asked for; throws `fail(message)` for an unknown flag, a stray argument
 * or a flag without its value.
 */
export function readFlagArgs<Name extends string>(
  argv: readonly string[],
  lookup: (
    flag: string,
  ) => { readonly name: Name; readonly arg: string; readonly boolean?: boolean } | undefined,
  raw: Map<Name, { value: string; origin: string }>,
  fail: (message: string) => Error,
): boolean {
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] ?? '';
    if (token === '--help' || token === '-h') {
      help = true;
      continue;
    }
    const eq = token.indexOf('=');
    const flag = token.startsWith('--') && eq > 0 ? token.slice(0, eq) : token;
    const spec = lookup(flag);
    if (spec === undefined)
      throw fail(
        token.startsWith('-') ? `unknown option ${flag}` : `unexpected argument ${JSON.stringify(token)}`,
      );
    let value: string | undefined;
    if (flag !== token) value = token.slice(eq + 1);
    // A switch given alone is on; `--switch=false` (or its variable) turns it off.
    else if (spec.boolean === true) value = 'true';
    else {
      value = argv[i + 1];
      if (value === undefined || value.startsWith('--')) throw fail(`${flag} needs a value (${spec.arg})`);
      i++;
    }
    raw.set(spec.name, { value, origin: flag });
  }
  return help;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

type RawName =
  keyof Omit<TrackerConfig, 'help' | 'broadcasterKeyGenerated' | 'token'> | 'tokenStream' | 'tokenTtlS';

interface FlagSpec {
  readonly name: RawName;
  /** No variable: the `token` subcommand's own flags. */
  readonly env: string | null;
  /** A second variable, read when `env` is unset (REDIS_URL, the name most deployments use). */
  readonly envAlias?: string;
  readonly arg: string;
  readonly help: string;
  /** A switch: no value on the command line (`--flag` alone means on). */
  readonly boolean?: boolean;
}

const FLAGS: Readonly<Record<string, FlagSpec>> = {
  '--host': {
    name: 'host',
    env: 'CHUNKYCAST_HOST',
    arg: 'ADDR',
    help: 'address to bind (default 127.0.0.1)',
  },
  '--port': {
    name: 'port',
    env: 'CHUNKYCAST_PORT',
    arg: 'N',
    help: 'TCP port (default 8080; 0 = any free port)',
  },
  '--origin-dir': {
    name: 'originDir',
    env: 'CHUNKYCAST_ORIGIN_DIR',
    arg: 'DIR',
    help: 'serve this HLS output directory under /live/',
  },
  '--ll-hls': {
    name: 'llHls',
    env: 'CHUNKYCAST_LL_HLS',
    arg: '',
    boolean: true,
    help: "publish an LL-HLS view of a plain packager's output under /live/: parts, preload hint, blocking reload",
  },
  '--part-target-ms': {
    name: 'partTargetMs',
    env: 'CHUNKYCAST_PART_TARGET_MS',
    arg: 'N',
    help: `LL-HLS part target in ms (default ${DEFAULT_PART_TARGET_MS}; ${MIN_PART_TARGET_MS}‥${MAX_PART_TARGET_MS}; with --ll-hls)`,
  },
  '--static-dir': {
    name: 'staticDir',
    env: 'CHUNKYCAST_STATIC_DIR',
    arg: 'DIR',
    help: 'serve these files under / (the built demo)',
  },
  '--broadcaster-key': {
    name: 'broadcasterKey',
    env: 'CHUNKYCAST_BROADCASTER_KEY',
    arg: 'KEY',
    help: 'secret a source must present to join (default: generated for the in-process source)',
  },
  '--signing-key': {
    name: 'signingKeyFile',
    env: 'CHUNKYCAST_SIGNING_KEY',
    arg: 'FILE',
    help: 'PKCS8 PEM Ed25519 private key signing announcements (default: an ephemeral key)',
  },
  '--source-stream': {
    name: 'sourceStream',
    env: 'CHUNKYCAST_SOURCE_STREAM',
    arg: 'ID',
    help: 'run the true source in-process for this stream',
  },
  '--source-playlist': {
    name: 'sourcePlaylist',
    env: 'CHUNKYCAST_SOURCE_PLAYLIST',
    arg: 'URL',
    help: 'HLS playlist the source ingests (default http://HOST:PORT/live/live.m3u8 with --origin-dir)',
  },
  '--log-level': {
    name: 'logLevel',
    env: 'CHUNKYCAST_LOG_LEVEL',
    arg: 'LEVEL',
    help: `${LOG_LEVELS.join('|')} (default info)`,
  },
  '--max-messages-per-second': {
    name: 'maxMessagesPerSecond',
    env: 'CHUNKYCAST_MAX_MESSAGES_PER_SECOND',
    arg: 'N',
    help: `frames per connection per second, bursts of 5 s worth (default ${DEFAULT_LIMITS.maxMessagesPerSecond}; 0 = unlimited)`,
  },
  '--max-connections-per-address': {
    name: 'maxConnectionsPerAddress',
    env: 'CHUNKYCAST_MAX_CONNECTIONS_PER_ADDRESS',
    arg: 'N',
    help: `WebSockets per client address, IPv6 per /64 (default ${DEFAULT_LIMITS.maxConnectionsPerAddress}; 0 = unlimited)`,
  },
  '--max-connections': {
    name: 'maxConnections',
    env: 'CHUNKYCAST_MAX_CONNECTIONS',
    arg: 'N',
    help: `WebSockets in this process (default ${DEFAULT_LIMITS.maxConnections}; 0 = unlimited)`,
  },
  '--max-bad-frames': {
    name: 'maxBadFrames',
    env: 'CHUNKYCAST_MAX_BAD_FRAMES',
    arg: 'N',
    help: `undecodable frames before a connection is closed (default ${DEFAULT_LIMITS.maxBadFrames}; 0 = unlimited)`,
  },
  '--max-http-connections-per-address': {
    name: 'maxHttpConnectionsPerAddress',
    env: 'CHUNKYCAST_MAX_HTTP_CONNECTIONS_PER_ADDRESS',
    arg: 'N',
    help: `plain HTTP connections per client address, IPv6 per /64 (default ${DEFAULT_LIMITS.maxHttpConnectionsPerAddress}; 0 = unlimited)`,
  },
  '--http-headers-timeout-ms': {
    name: 'httpHeadersTimeoutMs',
    env: 'CHUNKYCAST_HTTP_HEADERS_TIMEOUT_MS',
    arg: 'N',
    help: `time a client has to send its request headers, then 408 (default ${DEFAULT_LIMITS.httpHeadersTimeoutMs})`,
  },
  '--join-secret': {
    name: 'joinSecret',
    env: 'CHUNKYCAST_JOIN_SECRET',
    arg: 'SECRET',
    help: `require viewer join tokens signed with this (≥ ${MIN_SECRET_LENGTH} characters; default: no tokens)`,
  },
  '--allowed-origins': {
    name: 'allowedOrigins',
    env: 'CHUNKYCAST_ALLOWED_ORIGINS',
    arg: 'A,B',
    help: 'page origins allowed to open /ws, e.g. https://example.com (default: any)',
  },
  '--tracker-secret': {
    name: 'trackerSecret',
    env: 'CHUNKYCAST_TRACKER_SECRET',
    arg: 'SECRET',
    help: `key of resume tickets and source ids (≥ ${MIN_SECRET_LENGTH} characters; default: derived from the broadcaster key)`,
  },
  '--public-key': {
    name: 'publicKey',
    env: 'CHUNKYCAST_PUBLIC_KEY',
    arg: 'BASE64',
    help: "the broadcaster's raw Ed25519 public key, for a process without --signing-key",
  },
  '--redis-url': {
    name: 'redisUrl',
    env: 'CHUNKYCAST_REDIS_URL',
    envAlias: 'REDIS_URL',
    arg: 'URL',
    help: 'share swarms with other tracker processes through this Redis (redis:// or rediss://)',
  },
  '--redis-key-prefix': {
    name: 'redisKeyPrefix',
    env: 'CHUNKYCAST_REDIS_KEY_PREFIX',
    arg: 'P',
    help: `prefix of every Redis key and channel (default ${DEFAULT_KEY_PREFIX})`,
  },
  '--cluster-heartbeat-ms': {
    name: 'clusterHeartbeatMs',
    env: 'CHUNKYCAST_CLUSTER_HEARTBEAT_MS',
    arg: 'N',
    help: `how often this process tells Redis it is alive (default ${DEFAULT_CLUSTER_TIMING.heartbeatMs})`,
  },
  '--cluster-node-ttl-ms': {
    name: 'clusterNodeTtlMs',
    env: 'CHUNKYCAST_CLUSTER_NODE_TTL_MS',
    arg: 'N',
    help: `a process silent this long is dead, its peers no longer offered (default ${DEFAULT_CLUSTER_TIMING.nodeTtlMs})`,
  },
  '--stun-urls': {
    name: 'stunUrls',
    env: 'CHUNKYCAST_STUN_URLS',
    arg: 'URL,URL',
    help: `STUN servers for every peer, stun:HOST[:PORT] (at most ${MAX_ICE_URLS}; default none)`,
  },
  '--turn-urls': {
    name: 'turnUrls',
    env: 'CHUNKYCAST_TURN_URLS',
    arg: 'URL,URL',
    help: `TURN servers for every peer, turn:HOST[:PORT][?transport=udp|tcp] or turns:… (at most ${MAX_ICE_URLS}; needs --turn-secret)`,
  },
  '--turn-secret': {
    name: 'turnSecret',
    env: 'CHUNKYCAST_TURN_SECRET',
    arg: 'SECRET',
    help: `the TURN server's shared secret (coturn static-auth-secret, ≥ ${MIN_SECRET_LENGTH} characters): each peer gets credentials of its own`,
  },
  '--turn-ttl-s': {
    name: 'turnTtlS',
    env: 'CHUNKYCAST_TURN_TTL_S',
    arg: 'N',
    help: `lifetime of a peer's TURN credentials in seconds, renewed at 80% (default ${DEFAULT_TURN_TTL_S}; ${MIN_TURN_TTL_S}‥${MAX_TURN_TTL_S})`,
  },
};

/** Flags of `chunkycast-tracker token`, besides the general ones (the join secret above all). */
const TOKEN_FLAGS: Readonly<Record<string, FlagSpec>> = {
  '--stream': {
    name: 'tokenStream',
    env: null,
    arg: 'ID',
    help: 'the stream the token admits to (required)',
  },
  '--ttl-s': {
    name: 'tokenTtlS',
    env: null,
    arg: 'N',
    help: `seconds until it expires (default ${DEFAULT_TOKEN_TTL_S})`,
  },
};

const FLAG_COLUMN = 34;

export const USAGE = [
  'usage: chunkycast-tracker [options]',
  '       chunkycast-tracker token --stream ID [--ttl-s N] [--join-secret SECRET]',
  '',
  'options (each also read from the environment variable shown; a flag wins over the variable):',
  ...Object.entries(FLAGS).map(
    ([flag, spec]) =>
      `  ${(spec.arg === '' ? flag : `${flag} ${spec.arg}`).padEnd(FLAG_COLUMN)} ${spec.help}\n  ${''.padEnd(FLAG_COLUMN)} [${[spec.env, spec.envAlias].filter((v) => v != null).join(' or ')}]`,
  ),
  `  ${'--help'.padEnd(FLAG_COLUMN)} print this help`,
  '',
  'token: prints a viewer join token for a stream, signed with the join secret, and exits.',
  ...Object.entries(TOKEN_FLAGS).map(
    ([flag, spec]) => `  ${`${flag} ${spec.arg}`.padEnd(FLAG_COLUMN)} ${spec.help}`,
  ),
].join('\n');

/** Bytes of randomness in a generated broadcaster key (base64url, so 32 characters). */
const GENERATED_KEY_BYTES = 24;

export function parseConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): TrackerConfig {
  /** Raw values and where each came from, for error messages that name what the user typed. */
  const raw = new Map<RawName, { value: string; origin: string }>();
  for (const spec of Object.values(FLAGS))
    for (const name of [spec.env, spec.envAlias]) {
      const value = name == null ? undefined : env[name];
      // An empty variable is how shells and compose files say "unset". The first one set wins.
      if (name != null && value !== undefined && value !== '' && !raw.has(spec.name)) {
        raw.set(spec.name, { value, origin: name });
      }
    }
  const tokenCommand = argv[0] === 'token';
  const help = readFlagArgs(
    argv.slice(tokenCommand ? 1 : 0),
    (flag) => FLAGS[flag] ?? (tokenCommand ? TOKEN_FLAGS[flag] : undefined),
    raw,
    (message) => new ConfigError(message),
  );

  const get = (name: RawName): { value: string; origin: string } | undefined => raw.get(name);
  const text = (name: RawName): string | null => get(name)?.value ?? null;
  /** A non-negative integer setting within `max`, or its default. */
  const integer = (name: RawName, fallback: number, max: number): number => {
    const r = get(name);
    if (r === undefined) return fallback;
    if (!/^\d{1,15}$/.test(r.value) || Number(r.value) > max)
      throw new ConfigError(`${r.origin} must be an integer in 0‥${max}, got ${JSON.stringify(r.value)}`);
    return Number(r.value);
  };
  const secret = (name: RawName): string | null => {
    const r = get(name);
    if (r === undefined) return null;
    if (r.value.length < MIN_SECRET_LENGTH || r.value.length > MAX_SECRET_LENGTH)
      throw new ConfigError(
        `${r.origin} must be ${MIN_SECRET_LENGTH}–${MAX_SECRET_LENGTH} characters (got ${r.value.length}); ` +
          'a short HMAC key can be guessed offline from one token',
      );
    return r.value;
  };

  const host = text('host') ?? '127.0.0.1';
  if (host.trim() === '') throw new ConfigError(`${get('host')?.origin ?? '--host'} must not be empty`);

  let port = 8080;
  const portRaw = get('port');
  if (portRaw !== undefined) {
    if (!/^\d{1,5}$/.test(portRaw.value) || Number(portRaw.value) > 65535)
      throw new ConfigError(
        `${portRaw.origin} must be an integer in 0‥65535, got ${JSON.stringify(portRaw.value)}`,
      );
    port = Number(portRaw.value);
  }

  let logLevel: LogLevel = 'info';
  const levelRaw = get('logLevel');
  if (levelRaw !== undefined) {
    if (!isLogLevel(levelRaw.value))
      throw new ConfigError(
        `${levelRaw.origin} must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(levelRaw.value)}`,
      );
    logLevel = levelRaw.value;
  }

  const keyRaw = get('broadcasterKey');
  if (keyRaw?.value === '') throw new ConfigError(`${keyRaw.origin} must not be empty`);
  if (keyRaw !== undefined && keyRaw.value.length > MAX_KEY_LENGTH)
    // The protocol refuses longer keys in `join`, so a longer one could never be presented.
    throw new ConfigError(`${keyRaw.origin} must be at most ${MAX_KEY_LENGTH} characters`);
  const broadcasterKey = keyRaw?.value ?? randomBytes(GENERATED_KEY_BYTES).toString('base64url');

  const streamRaw = get('sourceStream');
  if (streamRaw !== undefined && !STREAM_ID_PATTERN.test(streamRaw.value))
    throw new ConfigError(
      `${streamRaw.origin} must be 1–64 characters of A–Z a–z 0–9 . _ -, got ${JSON.stringify(streamRaw.value)}`,
    );

  const playlistRaw = get('sourcePlaylist');
  if (playlistRaw !== undefined) {
    let url: URL | null = null;
    try {
      url = new URL(playlistRaw.value);
    } catch {
      url = null;
    }
    if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:'))
      throw new ConfigError(
        `${playlistRaw.origin} must be an http(s) URL, got ${JSON.stringify(playlistRaw.value)}`,
      );
  }
  const originDir = text('originDir');
  if (streamRaw !== undefined && playlistRaw === undefined && originDir === null)
    throw new ConfigError(
      `${streamRaw.origin} needs --source-playlist, or --origin-dir to ingest this tracker's own /live/live.m3u8`,
    );
  if (playlistRaw !== undefined && streamRaw === undefined)
    throw new ConfigError(`${playlistRaw.origin} is only used with --source-stream`);

  const llHls = parseLlHls(get, integer, originDir);

  const maxMessagesPerSecond = integer('maxMessagesPerSecond', DEFAULT_LIMITS.maxMessagesPerSecond, 100_000);
  const maxConnectionsPerAddress = integer(
    'maxConnectionsPerAddress',
    DEFAULT_LIMITS.maxConnectionsPerAddress,
    10_000_000,
  );
  const maxConnections = integer('maxConnections', DEFAULT_LIMITS.maxConnections, 10_000_000);
  const maxBadFrames = integer('maxBadFrames', DEFAULT_LIMITS.maxBadFrames, 1_000_000);
  const maxHttpConnectionsPerAddress = integer(
    'maxHttpConnectionsPerAddress',
    DEFAULT_LIMITS.maxHttpConnectionsPerAddress,
    10_000_000,
  );
  const httpHeadersTimeoutMs = integer(
    'httpHeadersTimeoutMs',
    DEFAULT_LIMITS.httpHeadersTimeoutMs,
    MAX_HTTP_HEADERS_TIMEOUT_MS,
  );
  if (httpHeadersTimeoutMs < MIN_HTTP_HEADERS_TIMEOUT_MS)
    throw new ConfigError(
      `${get('httpHeadersTimeoutMs')?.origin ?? '--http-headers-timeout-ms'} must be at least ${MIN_HTTP_HEADERS_TIMEOUT_MS}`,
    );
  const joinSecret = secret('joinSecret');
  const trackerSecret = secret('trackerSecret');
  const originsRaw = get('allowedOrigins');
  const allowedOrigins = originsRaw === undefined ? null : parseOrigins(originsRaw.value, originsRaw.origin);

  const publicKeyRaw = get('publicKey');
  if (publicKeyRaw !== undefined) {
    const bytes = Buffer.from(publicKeyRaw.value, 'base64');
    if (bytes.length !== ED25519_PUBLIC_KEY_BYTES || bytes.toString('base64') !== publicKeyRaw.value)
      throw new ConfigError(`${publicKeyRaw.origin} must be a raw Ed25519 public key: 32 bytes in base64`);
    if (streamRaw !== undefined && get('signingKeyFile') === undefined)
      throw new ConfigError(
        `${streamRaw.origin} signs announcements, which needs the private key: --signing-key FILE`,
      );
  }

  const cluster = parseCluster(get, integer);
  if (cluster.redisUrl !== null) {
    // Source ids and resume tickets are HMACs of the tracker secret, which every process must share;
    // the announcements' public key likewise.
    if (keyRaw === undefined && trackerSecret === null)
      throw new ConfigError(
        `${cluster.redisOrigin} needs the same --broadcaster-key (or --tracker-secret) on every tracker ` +
          'process; a generated one would differ between them',
      );
    if (get('signingKeyFile') === undefined && publicKeyRaw === undefined)
      throw new ConfigError(
        `${cluster.redisOrigin} needs the broadcaster's public key on every tracker process: ` +
          '--signing-key FILE where the source runs, --public-key KEY (or the same file) elsewhere',
      );
  }

  const ice = parseIce(get, secret, integer);

  let token: TrackerConfig['token'] = null;
  if (tokenCommand && !help) {
    const tokenStream = get('tokenStream');
    if (tokenStream === undefined) throw new ConfigError('token needs --stream ID');
    if (!STREAM_ID_PATTERN.test(tokenStream.value))
      throw new ConfigError(
        `--stream must be 1–64 characters of A–Z a–z 0–9 . _ -, got ${JSON.stringify(tokenStream.value)}`,
      );
    const ttlS = integer('tokenTtlS', DEFAULT_TOKEN_TTL_S, MAX_TOKEN_TTL_S);
    if (ttlS === 0) throw new ConfigError('--ttl-s must be at least 1');
    if (joinSecret === null)
      throw new ConfigError('token needs the join secret: --join-secret SECRET or CHUNKYCAST_JOIN_SECRET');
    token = { stream: tokenStream.value, ttlS };
  }

  return {
    help,
    host,
    port,
    originDir,
    ...llHls,
    staticDir: text('staticDir'),
    broadcasterKey,
    broadcasterKeyGenerated: keyRaw === undefined,
    signingKeyFile: text('signingKeyFile'),
    sourceStream: streamRaw?.value ?? null,
    sourcePlaylist: playlistRaw?.value ?? null,
    logLevel,
    maxMessagesPerSecond,
    maxConnectionsPerAddress,
    maxConnections,
    maxBadFrames,
    maxHttpConnectionsPerAddress,
    httpHeadersTimeoutMs,
    joinSecret,
    allowedOrigins,
    trackerSecret,
    publicKey: publicKeyRaw?.value ?? null,
    redisUrl: cluster.redisUrl,
    redisKeyPrefix: cluster.redisKeyPrefix,
    clusterHeartbeatMs: cluster.heartbeatMs,
    clusterNodeTtlMs: cluster.nodeTtlMs,
    ...ice,
    token,
  };
}

/** `--ll-hls` (a switch) and its part target, which only make sense with an origin directory. */
function parseLlHls(
  get: (name: RawName) => { value: string; origin: string } | undefined,
  integer: (name: RawName, fallback: number, max: number) => number,
  originDir: string | null,
): Pick<TrackerConfig, 'llHls' | 'partTargetMs'> {
  const raw = get('llHls');
  let llHls = false;
  if (raw !== undefined) {
    const value = raw.value.toLowerCase();
    if (['1', 'true', 'yes', 'on'].includes(value)) llHls = true;
    else if (!['0', 'false', 'no', 'off'].includes(value))
      throw new ConfigError(`${raw.origin} must be true or false, got ${JSON.stringify(raw.value)}`);
  }
  if (llHls && originDir === null)
    throw new ConfigError(
      `${raw?.origin ?? '--ll-hls'} needs --origin-dir: it extends the packager's playlists there`,
    );
  const targetRaw = get('partTargetMs');
  if (targetRaw !== undefined && !llHls)
    throw new ConfigError(`${targetRaw.origin} is only used with --ll-hls`);
  // Parsed with a loose bound, so an out-of-range value gets the message with the real bounds below.
  const partTargetMs = integer('partTargetMs', DEFAULT_PART_TARGET_MS, Number.MAX_SAFE_INTEGER);
  if (partTargetMs < MIN_PART_TARGET_MS || partTargetMs > MAX_PART_TARGET_MS)
    throw new ConfigError(
      `${targetRaw?.origin ?? '--part-target-ms'} must be in ${MIN_PART_TARGET_MS}‥${MAX_PART_TARGET_MS}, got ${partTargetMs}: ` +
        'shorter parts are a frame or two (a request each for no gain), longer ones are no longer low latency',
    );
  return { llHls, partTargetMs };
}

/** STUN and TURN servers: URLs checked one by one, TURN only with its secret and vice versa. */
function parseIce(
  get: (name: RawName) => { value: string; origin: string } | undefined,
  secret: (name: RawName) => string | null,
  integer: (name: RawName, fallback: number, max: number) => number,
): Pick<TrackerConfig, 'stunUrls' | 'turnUrls' | 'turnSecret' | 'turnTtlS'> {
  const urls = (name: 'stunUrls' | 'turnUrls', kind: 'stun' | 'turn'): string[] => {
    const r = get(name);
    if (r === undefined) return [];
    const list = [...new Set(r.value.split(',').map((u) => u.trim()))].filter((u) => u !== '');
    if (list.length === 0) throw new ConfigError(`${r.origin} must list at least one ${kind}: URL`);
    // One server entry per kind, and the protocol bounds the URLs of one server.
    if (list.length > MAX_ICE_URLS)
      throw new ConfigError(`${r.origin} lists ${list.length} URLs; at most ${MAX_ICE_URLS}`);
    for (const url of list) {
      const problem = iceUrlProblem(url, kind);
      if (problem !== null) throw new ConfigError(`${r.origin}: ${JSON.stringify(url)} is ${problem}`);
    }
    return list;
  };
  const stunUrls = urls('stunUrls', 'stun');
  const turnUrls = urls('turnUrls', 'turn');
  const turnSecret = secret('turnSecret');
  const urlsOrigin = get('turnUrls')?.origin ?? '--turn-urls';
  const secretOrigin = get('turnSecret')?.origin ?? '--turn-secret';
  if (turnUrls.length > 0 && turnSecret === null)
    throw new ConfigError(
      `${urlsOrigin} needs ${secretOrigin}: peers get TURN credentials made with the TURN server's ` +
        'shared secret (coturn use-auth-secret, static-auth-secret)',
    );
  if (turnSecret !== null && turnUrls.length === 0)
    throw new ConfigError(`${secretOrigin} is only used with --turn-urls`);
  const ttlRaw = get('turnTtlS');
  if (ttlRaw !== undefined && turnUrls.length === 0)
    throw new ConfigError(`${ttlRaw.origin} is only used with --turn-urls`);
  const turnTtlS = integer('turnTtlS', DEFAULT_TURN_TTL_S, MAX_TURN_TTL_S);
  if (turnTtlS < MIN_TURN_TTL_S)
    throw new ConfigError(
      `${ttlRaw?.origin ?? '--turn-ttl-s'} must be at least ${MIN_TURN_TTL_S}: shorter credentials ` +
        'would expire with a little clock skew between the tracker and the TURN server',
    );
  return { stunUrls, turnUrls, turnSecret, turnTtlS };
}

/** The Redis settings; the prefix and timing only make sense with a URL. */
function parseCluster(
  get: (name: RawName) => { value: string; origin: string } | undefined,
  integer: (name: RawName, fallback: number, max: number) => number,
): {
  redisUrl: string | null;
  redisOrigin: string;
  redisKeyPrefix: string;
  heartbeatMs: number;
  nodeTtlMs: number;
} {
  const urlRaw = get('redisUrl');
  if (urlRaw === undefined)
    for (const name of ['redisKeyPrefix', 'clusterHeartbeatMs', 'clusterNodeTtlMs'] as const) {
      const r = get(name);
      if (r !== undefined) throw new ConfigError(`${r.origin} is only used with --redis-url (or REDIS_URL)`);
    }
  if (urlRaw !== undefined) {
    let url: URL | null;
    try {
      url = new URL(urlRaw.value);
    } catch {
      url = null;
    }
    // The value is not echoed: it may hold a password.
    if (url === null || (url.protocol !== 'redis:' && url.protocol !== 'rediss:') || url.hostname === '')
      throw new ConfigError(
        `${urlRaw.origin} must be a redis://[user:password@]host[:port][/db] or rediss:// URL`,
      );
  }
  const prefixRaw = get('redisKeyPrefix');
  if (prefixRaw !== undefined && !KEY_PREFIX_PATTERN.test(prefixRaw.value))
    throw new ConfigError(
      `${prefixRaw.origin} must be at most 64 characters of A–Z a–z 0–9 . _ : -, got ${JSON.stringify(prefixRaw.value)}`,
    );
  const heartbeatMs = integer(
    'clusterHeartbeatMs',
    DEFAULT_CLUSTER_TIMING.heartbeatMs,
    MAX_CLUSTER_HEARTBEAT_MS,
  );
  if (heartbeatMs < MIN_CLUSTER_HEARTBEAT_MS)
    throw new ConfigError(
      `${get('clusterHeartbeatMs')?.origin ?? '--cluster-heartbeat-ms'} must be at least ${MIN_CLUSTER_HEARTBEAT_MS}`,
    );
  const ttlRaw = get('clusterNodeTtlMs');
  // Without an explicit TTL it follows the heartbeat (three beats, as the defaults are).
  const nodeTtlMs = integer(
    'clusterNodeTtlMs',
    Math.max(DEFAULT_CLUSTER_TIMING.nodeTtlMs, 3 * heartbeatMs),
    MAX_CLUSTER_NODE_TTL_MS,
  );
  if (nodeTtlMs < 2 * heartbeatMs)
    throw new ConfigError(
      `${ttlRaw?.origin ?? '--cluster-node-ttl-ms'} must be at least twice the heartbeat (${2 * heartbeatMs} ms): ` +
        'one late heartbeat must not declare a live process dead',
    );
  return {
    redisUrl: urlRaw?.value ?? null,
    redisOrigin: urlRaw?.origin ?? '--redis-url',
    redisKeyPrefix: prefixRaw?.value ?? DEFAULT_KEY_PREFIX,
    heartbeatMs,
    nodeTtlMs,
  };
}

/**
 * A comma-separated list of page origins, each `http(s)://host[:port]`; normalised as a browser
 * sends them in the Origin header (lower-case host, no default port) and de-duplicated.
 */
function parseOrigins(list: string, origin: string): string[] {
  const out = new Set<string>();
  for (const item of list.split(',').map((s) => s.trim())) {
    if (item === '') continue;
    let url: URL | null;
    try {
      url = new URL(item);
    } catch {
      url = null;
    }
    if (
      url === null ||
      (url.protocol !== 'http:' && url.protocol !== 'https:') ||
      // Scheme and authority only (an optional final "/"): a path would never match a header.
      !/^https?:\/\/[^/?#@]+\/?$/i.test(item)
    )
      throw new ConfigError(
        `${origin}: ${JSON.stringify(item)} is not a page origin (http(s)://host[:port], no path)`,
      );
    out.add(url.origin);
  }
  if (out.size === 0) throw new ConfigError(`${origin} must list at least one origin`);
  return [...out];
}
