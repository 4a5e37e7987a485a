#!/usr/bin/env node
/**
 * chunkycast-source: the true source as its own process, against a tracker elsewhere. It follows a
 * live playlist, signs each segment's announcement with the broadcaster's Ed25519 key and deals the
 * packets over the mesh, exactly as the tracker's in-process source (`--source-stream`) does; its
 * tracker connection survives a tracker restart (reconnect with a resume ticket, same peer id).
 * Prints one `true source running` JSON line once joined. Exits 3 when the tracker refuses the
 * broadcaster key (at the first join or after a reconnect), 2 on bad options.
 */
import { MeshError } from '@chunkycast/sdk/core';
import { MAX_KEY_LENGTH, STREAM_ID_PATTERN } from '@chunkycast/wire';
import { readFlagArgs } from '../config.js';
import { KeyError, loadSigningKeys, type SigningKeys } from '../keys.js';
import { createLogger, isLogLevel, LOG_LEVELS, type LogLevel } from '../log.js';
import { SourceRunner, SOURCE_RETRY_MS } from './runner.js';
import { startTrueSource, type WhileDisconnected } from './true-source.js';

interface SourceCliConfig {
  readonly help: boolean;
  readonly trackerUrl: string;
  readonly playlistUrl: string;
  readonly stream: string;
  readonly broadcasterKey: string;
  readonly signingKeyFile: string;
  readonly whileDisconnected: WhileDisconnected;
  readonly logLevel: LogLevel;
}

class UsageError extends Error {
  override readonly name = 'UsageError';
}

interface Flag {
  readonly name: keyof Omit<SourceCliConfig, 'help'>;
  readonly env: string;
  readonly arg: string;
  readonly help: string;
}

const FLAGS: Readonly<Record<string, Flag>> = {
  '--tracker': {
    name: 'trackerUrl',
    env: 'CHUNKYCAST_TRACKER_URL',
    arg: 'URL',
    help: "the tracker's WebSocket endpoint, ws://HOST:PORT/ws (required)",
  },
  '--playlist': {
    name: 'playlistUrl',
    env: 'CHUNKYCAST_SOURCE_PLAYLIST',
    arg: 'URL',
    help: 'the live HLS media playlist to ingest, http(s):// (required)',
  },
  '--stream': {
    name: 'stream',
    env: 'CHUNKYCAST_SOURCE_STREAM',
    arg: 'ID',
    help: 'stream id (required)',
  },
  '--broadcaster-key': {
    name: 'broadcasterKey',
    env: 'CHUNKYCAST_BROADCASTER_KEY',
    arg: 'KEY',
    help: "the tracker's broadcaster key (required; prefer the variable: flags show in ps)",
  },
  '--signing-key': {
    name: 'signingKeyFile',
    env: 'CHUNKYCAST_SIGNING_KEY',
    arg: 'FILE',
    help: "PKCS8 PEM Ed25519 private key; the tracker's --signing-key must be the same (required)",
  },
  '--while-disconnected': {
    name: 'whileDisconnected',
    env: 'CHUNKYCAST_SOURCE_WHILE_DISCONNECTED',
    arg: 'MODE',
    help: 'feed|hold: feed (default) announces every segment over the mesh too, so segments cut while the tracker is away are published at once; hold (for viewers older than mesh announcements) keeps them until it is back',
  },
  '--log-level': {
    name: 'logLevel',
    env: 'CHUNKYCAST_LOG_LEVEL',
    arg: 'LEVEL',
    help: `${LOG_LEVELS.join('|')} (default info)`,
  },
};

/** Width of the flag column in the usage text. */
const HELP_COLUMN = 28;

const USAGE = [
  'usage: chunkycast-source --tracker ws://HOST:PORT/ws --playlist http://…/live.m3u8 --stream ID \\',
  '                         --broadcaster-key KEY --signing-key FILE [options]',
  '',
  'options (each also read from the environment variable shown; a flag wins over the variable):',
  ...Object.entries(FLAGS).map(
    ([flag, spec]) =>
      `  ${`${flag} ${spec.arg}`.padEnd(HELP_COLUMN)} ${spec.help}\n  ${''.padEnd(HELP_COLUMN)} [${spec.env}]`,
  ),
  `  ${'--help'.padEnd(HELP_COLUMN)} print this help`,
].join('\n');

function parseSourceConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): SourceCliConfig {
  const raw = new Map<Flag['name'], { value: string; origin: string }>();
  for (const spec of Object.values(FLAGS)) {
    const value = env[spec.env];
    if (value !== undefined && value !== '') raw.set(spec.name, { value, origin: spec.env });
  }
  const help = readFlagArgs(
    argv,
    (flag) => FLAGS[flag],
    raw,
    (message) => new UsageError(message),
  );
  if (help)
    return {
      help,
      trackerUrl: '',
      playlistUrl: '',
      stream: '',
      broadcasterKey: '',
      signingKeyFile: '',
      whileDisconnected: 'feed',
      logLevel: 'info',
    };
  const required = (name: Flag['name'], flag: string): { value: string; origin: string } => {
    const got = raw.get(name);
    if (got === undefined) throw new UsageError(`${flag} is required`);
    return got;
  };
  const url = (name: Flag['name'], flag: string, protocols: readonly string[]): string => {
    const got = required(name, flag);
    let parsed: URL | null = null;
    try {
      parsed = new URL(got.value);
    } catch {
      parsed = null;
    }
    if (parsed === null || !protocols.includes(parsed.protocol))
      throw new UsageError(
        `${got.origin} must be a ${protocols.map((p) => p.slice(0, -1)).join(' or ')} URL, got ${JSON.stringify(got.value)}`,
      );
    return got.value;
  };
  const trackerUrl = url('trackerUrl', '--tracker', ['ws:', 'wss:']);
  const playlistUrl = url('playlistUrl', '--playlist', ['http:', 'https:']);
  const stream = required('stream', '--stream');
  if (!STREAM_ID_PATTERN.test(stream.value))
    throw new UsageError(
      `${stream.origin} must be 1–64 characters of A–Z a–z 0–9 . _ -, got ${JSON.stringify(stream.value)}`,
    );
  const key = required('broadcasterKey', '--broadcaster-key');
  if (key.value.length > MAX_KEY_LENGTH)
    throw new UsageError(`${key.origin} must be at most ${MAX_KEY_LENGTH} characters`);
  const signingKeyFile = required('signingKeyFile', '--signing-key').value;
  const modeRaw = raw.get('whileDisconnected');
  if (modeRaw !== undefined && modeRaw.value !== 'hold' && modeRaw.value !== 'feed')
    throw new UsageError(`${modeRaw.origin} must be hold or feed, got ${JSON.stringify(modeRaw.value)}`);
  const levelRaw = raw.get('logLevel');
  if (levelRaw !== undefined && !isLogLevel(levelRaw.value))
    throw new UsageError(
      `${levelRaw.origin} must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(levelRaw.value)}`,
    );
  return {
    help,
    trackerUrl,
    playlistUrl,
    stream: stream.value,
    broadcasterKey: key.value,
    signingKeyFile,
    whileDisconnected: modeRaw?.value === 'hold' ? 'hold' : 'feed',
    logLevel: levelRaw !== undefined && isLogLevel(levelRaw.value) ? levelRaw.value : 'info',
  };
}

async function main(): Promise<void> {
  let config: SourceCliConfig;
  try {
    config = parseSourceConfig(process.argv.slice(2), process.env);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`chunkycast-source: ${e.message}\n\n${USAGE}\n`);
      process.exit(2);
    }
    throw e;
  }
  if (config.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const log = createLogger({ level: config.logLevel });
  let keys: SigningKeys;
  try {
    keys = await loadSigningKeys(config.signingKeyFile);
  } catch (e) {
    if (e instanceof KeyError) {
      process.stderr.write(`chunkycast-source: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  log('info', 'true source starting', {
    stream: config.stream,
    trackerUrl: config.trackerUrl,
    playlistUrl: config.playlistUrl,
    publicKey: keys.publicKeyBase64,
    whileDisconnected: config.whileDisconnected,
  });

  let stopping = false;
  const runner = new SourceRunner(() =>
    startTrueSource({
      trackerUrl: config.trackerUrl,
      stream: config.stream,
      broadcasterKey: config.broadcasterKey,
      playlistUrl: config.playlistUrl,
      signingKey: keys.privateKey,
      whileDisconnected: config.whileDisconnected,
      log,
      onFatal: (error) => {
        // The tracker will not take this source any more (e.g. its broadcaster key changed):
        // running on would publish packets nobody can verify. Exit so a supervisor notices.
        log('error', 'true source refused by the tracker; exiting', { error: error.message });
        shutdown('SIGTERM', 3);
      },
    }),
  );
  runner.start(
    (attempt, error) => {
      if (error instanceof MeshError && error.trackerCode === 'badKey') {
        // A wrong broadcaster key does not get better by retrying.
        log('error', 'the tracker refused the broadcaster key; exiting', { error: error.message });
        shutdown('SIGTERM', 3);
        return;
      }
      log('error', 'true source failed to start; retrying', {
        stream: config.stream,
        attempt,
        retryMs: SOURCE_RETRY_MS,
        error,
      });
    },
    (source) => {
      log('info', 'true source running', {
        stream: config.stream,
        peerId: source.peerId,
        trackerUrl: config.trackerUrl,
        playlistUrl: config.playlistUrl,
      });
    },
  );

  const shutdown = (signal: NodeJS.Signals, exitCode = 0): void => {
    if (stopping) {
      log('warn', 'second signal: exiting at once', { signal });
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
      return;
    }
    stopping = true;
    log('info', 'shutting down', { signal });
    void (async () => {
      try {
        await runner.stop();
        process.exit(exitCode);
      } catch (e) {
        log('error', 'shutdown failed', { error: e });
        process.exit(1);
      }
    })();
  };
  process.on('SIGINT', () => {
    shutdown('SIGINT');
  });
  process.on('SIGTERM', () => {
    shutdown('SIGTERM');
  });
}

main().catch((e: unknown) => {
  process.stderr.write(`chunkycast-source: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
