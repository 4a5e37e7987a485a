/** Command-line flags and CHUNKYCAST_* environment variables → a validated TrackerConfig. */
import { randomBytes } from 'node:crypto';
import { MAX_KEY_LENGTH, STREAM_ID_PATTERN } from '@chunkycast/wire';
import { isLogLevel, LOG_LEVELS, type LogLevel } from './log.js';

export interface TrackerConfig {
  /** `--help` was given: print USAGE and do nothing else. */
  readonly help: boolean;
  readonly host: string;
  /** 0 = any free port. */
  readonly port: number;
  /** Directory served under /live/ (the packager's HLS output), or null for no origin. */
  readonly originDir: string | null;
  /** Directory served under / (the built demo), or null. */
  readonly staticDir: string | null;
  readonly broadcasterKey: string;
  /** No key was configured and `broadcasterKey` was made up; only the in-process source knows it. */
  readonly broadcasterKeyGenerated: boolean;
  /** PKCS8 PEM Ed25519 private key file; null = an ephemeral pair. */
  readonly signingKeyFile: string | null;
  /** Run the true source in-process for this stream. */
  readonly sourceStream: string | null;
  /**
   * The playlist the in-process source ingests. Null with a source stream means "this tracker's own
   * /live/live.m3u8", which is only known once the port is bound (the port may be 0).
   */
  readonly sourcePlaylist: string | null;
  readonly logLevel: LogLevel;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

interface FlagSpec {
  readonly name: keyof Omit<TrackerConfig, 'help' | 'broadcasterKeyGenerated'>;
  readonly env: string;
  readonly arg: string;
  readonly help: string;
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
};

export const USAGE = [
  'usage: chunkycast-tracker [options]',
  '',
  'options (each also read from the environment variable shown; a flag wins over the variable):',
  ...Object.entries(FLAGS).map(
    ([flag, spec]) => `  ${`${flag} ${spec.arg}`.padEnd(26)} ${spec.help}\n  ${''.padEnd(26)} [${spec.env}]`,
  ),
  `  ${'--help'.padEnd(26)} print this help`,
].join('\n');

/** Bytes of randomness in a generated broadcaster key (base64url, so 32 characters). */
const GENERATED_KEY_BYTES = 24;

export function parseConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): TrackerConfig {
  /** Raw values and where each came from, for error messages that name what the user typed. */
  const raw = new Map<FlagSpec['name'], { value: string; origin: string }>();
  for (const spec of Object.values(FLAGS)) {
    const value = env[spec.env];
    // An empty variable is how shells and compose files say "unset".
    if (value !== undefined && value !== '') raw.set(spec.name, { value, origin: spec.env });
  }
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] ?? '';
    if (token === '--help' || token === '-h') {
      help = true;
      continue;
    }
    const eq = token.indexOf('=');
    const flag = token.startsWith('--') && eq > 0 ? token.slice(0, eq) : token;
    const spec = FLAGS[flag];
    if (spec === undefined)
      throw new ConfigError(
        token.startsWith('-') ? `unknown option ${flag}` : `unexpected argument ${JSON.stringify(token)}`,
      );
    let value: string | undefined;
    if (flag !== token) value = token.slice(eq + 1);
    else {
      value = argv[i + 1];
      if (value === undefined || value.startsWith('--'))
        throw new ConfigError(`${flag} needs a value (${spec.arg})`);
      i++;
    }
    raw.set(spec.name, { value, origin: flag });
  }

  const get = (name: FlagSpec['name']): { value: string; origin: string } | undefined => raw.get(name);
  const text = (name: FlagSpec['name']): string | null => get(name)?.value ?? null;

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

  return {
    help,
    host,
    port,
    originDir,
    staticDir: text('staticDir'),
    broadcasterKey,
    broadcasterKeyGenerated: keyRaw === undefined,
    signingKeyFile: text('signingKeyFile'),
    sourceStream: streamRaw?.value ?? null,
    sourcePlaylist: playlistRaw?.value ?? null,
    logLevel,
  };
}
