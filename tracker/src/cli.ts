#!/usr/bin/env node
/**
 * chunkycast-tracker: the tracker, optionally with the origin and the true source in one process.
 * Prints one `listening` JSON line once it serves (scripts wait for it and read its URLs).
 * `chunkycast-tracker token --stream S` prints a viewer join token instead.
 */
import { ClusterStartError } from './cluster.js';
import { ConfigError, parseConfig, USAGE, type TrackerConfig } from './config.js';
import { generateSigningKeys, importPublicKey, KeyError, loadSigningKeys, type SigningKeys } from './keys.js';
import { createLogger, type Logger } from './log.js';
import { createTracker, type Tracker } from './server.js';
import { SOURCE_RETRY_MS, SourceRunner } from './source/runner.js';
import { startTrueSource } from './source/true-source.js';
import { makeJoinToken } from './tickets.js';

/** Stopping the in-process source (WebRTC teardown) may stall; the tracker's shutdown must not. */
const SOURCE_STOP_TIMEOUT_MS = 3_000;

async function main(): Promise<void> {
  let config: TrackerConfig;
  try {
    config = parseConfig(process.argv.slice(2), process.env);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`chunkycast-tracker: ${e.message}\n\n${USAGE}\n`);
      process.exit(2);
    }
    throw e;
  }
  if (config.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (config.token !== null) {
    // parseConfig refuses `token` without a join secret.
    const secret = config.joinSecret ?? '';
    process.stdout.write(
      `${makeJoinToken(secret, config.token.stream, Date.now() + config.token.ttlS * 1000)}\n`,
    );
    return;
  }
  const log = createLogger({ level: config.logLevel });

  let keys: SigningKeys | null = null;
  try {
    // --public-key alone: this process checks announcements and hands the key out, another signs.
    if (config.signingKeyFile !== null) keys = await loadSigningKeys(config.signingKeyFile);
    else if (config.publicKey === null) keys = await generateSigningKeys();
    if (config.publicKey !== null) {
      await importPublicKey(config.publicKey);
      if (keys !== null && keys.publicKeyBase64 !== config.publicKey)
        throw new KeyError('--public-key is not the public half of --signing-key');
    }
  } catch (e) {
    if (e instanceof KeyError) {
      process.stderr.write(`chunkycast-tracker: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  const publicKey = keys?.publicKeyBase64 ?? config.publicKey;
  if (keys?.ephemeral === true)
    // Public by nature; whoever verifies this run's announcements outside the tracker needs it.
    log('info', 'generated an ephemeral signing key', { publicKey: keys.publicKeyBase64 });
  if (config.broadcasterKeyGenerated) {
    // Never the value: it is the one secret that makes a peer the source.
    log('info', 'no broadcaster key configured; generated one for the in-process source');
    if (config.trackerSecret === null)
      log('info', 'resume tickets will not survive a restart: set --broadcaster-key or --tracker-secret');
  }

  let tracker: Tracker;
  try {
    tracker = await createTracker({
      host: config.host,
      port: config.port,
      originDir: config.originDir,
      llHlsPartTargetMs: config.llHls ? config.partTargetMs : null,
      staticDir: config.staticDir,
      broadcasterKey: config.broadcasterKey,
      publicKey,
      maxBadFrames: config.maxBadFrames,
      maxMessagesPerSecond: config.maxMessagesPerSecond,
      maxConnectionsPerAddress: config.maxConnectionsPerAddress,
      maxConnections: config.maxConnections,
      maxHttpConnectionsPerAddress: config.maxHttpConnectionsPerAddress,
      httpHeadersTimeoutMs: config.httpHeadersTimeoutMs,
      joinSecret: config.joinSecret,
      allowedOrigins: config.allowedOrigins,
      trackerSecret: config.trackerSecret,
      redisUrl: config.redisUrl,
      redisKeyPrefix: config.redisKeyPrefix,
      clusterTiming: { heartbeatMs: config.clusterHeartbeatMs, nodeTtlMs: config.clusterNodeTtlMs },
      stunUrls: config.stunUrls,
      turnUrls: config.turnUrls,
      turnSecret: config.turnSecret,
      turnTtlS: config.turnTtlS,
      log,
    });
  } catch (e) {
    if (e instanceof ClusterStartError) {
      // Redis unreachable (or too old): a configuration problem, like a bad flag.
      process.stderr.write(`chunkycast-tracker: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  const cluster = tracker.metrics().cluster;
  log('info', 'listening', {
    url: tracker.url,
    wsUrl: tracker.wsUrl,
    demoUrl: config.staticDir === null ? null : `${tracker.url}/`,
    originUrl: config.originDir === null ? null : `${tracker.url}/live/`,
    metricsUrl: `${tracker.url}/metrics`,
    sourceStream: config.sourceStream,
    // Public: the other tracker processes of a Redis cluster need it (--public-key).
    publicKey,
    // The settings in force, secrets only as whether they are set.
    joinTokensRequired: config.joinSecret !== null,
    allowedOrigins: config.allowedOrigins,
    trackerSecret: config.trackerSecret === null ? 'derived from the broadcaster key' : 'configured',
    cluster:
      cluster.backend === 'memory'
        ? { backend: 'memory' }
        : {
            backend: 'redis',
            nodeId: cluster.nodeId,
            keyPrefix: config.redisKeyPrefix,
            heartbeatMs: config.clusterHeartbeatMs,
            nodeTtlMs: config.clusterNodeTtlMs,
          },
    // URLs are the operator's own; the TURN secret only as whether it is set.
    ice: {
      stunUrls: config.stunUrls,
      turnUrls: config.turnUrls,
      turnCredentials: config.turnSecret === null ? null : { ttlS: config.turnTtlS },
    },
    limits: {
      maxMessagesPerSecond: config.maxMessagesPerSecond,
      maxConnectionsPerAddress: config.maxConnectionsPerAddress,
      maxConnections: config.maxConnections,
      maxBadFrames: config.maxBadFrames,
      maxHttpConnectionsPerAddress: config.maxHttpConnectionsPerAddress,
      httpHeadersTimeoutMs: config.httpHeadersTimeoutMs,
    },
  });

  // parseConfig refuses --source-stream without a private key (--public-key alone).
  const runner =
    config.sourceStream === null || keys === null
      ? null
      : runSource(config, config.sourceStream, tracker, keys, log);

  let stopping = false;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (stopping) {
      log('warn', 'second signal: exiting at once', { signal });
      // Re-raised with the default action: the process dies by the signal at once. process.exit()
      // would first run native teardown, which can stall while WebRTC peers are being closed.
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
      return;
    }
    stopping = true;
    log('info', 'shutting down', { signal });
    void (async () => {
      try {
        // The source first, so it leaves cleanly instead of trying to reconnect to us; then every
        // WebSocket gets 1012 and reconnects (and resumes) as soon as a tracker is back. Links
        // between peers are WebRTC and keep carrying media meanwhile.
        if (runner !== null) {
          let timer: NodeJS.Timeout | undefined;
          const stalled = await Promise.race([
            runner.stop().then(() => false),
            new Promise<boolean>((resolve) => {
              timer = setTimeout(() => {
                resolve(true);
              }, SOURCE_STOP_TIMEOUT_MS);
            }),
          ]);
          clearTimeout(timer);
          if (stalled) log('warn', 'the true source did not stop in time; closing the tracker anyway');
        }
        await tracker.close();
        process.exit(0);
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

/** Starts the true source, retrying every SOURCE_RETRY_MS until it runs or stop() is called. */
function runSource(
  config: TrackerConfig,
  stream: string,
  tracker: Tracker,
  keys: SigningKeys,
  log: Logger,
): SourceRunner {
  const playlistUrl = config.sourcePlaylist ?? `${tracker.url}/live/live.m3u8`;
  const runner = new SourceRunner(() =>
    startTrueSource({
      trackerUrl: tracker.wsUrl,
      stream,
      broadcasterKey: config.broadcasterKey,
      playlistUrl,
      signingKey: keys.privateKey,
      // It reaches this tracker on loopback whatever the bind address, so the tracker's own address
      // decides: bound to loopback only when viewers can only be here too. ICE servers come in its
      // welcome, made from this process's configuration like every viewer's.
      rtcConfig: isLoopbackHost(config.host) ? { bindAddress: '127.0.0.1' } : {},
      log,
    }),
  );
  runner.start(
    (attempt, error) => {
      log('error', 'true source failed to start; retrying', {
        stream,
        playlistUrl,
        attempt,
        retryMs: SOURCE_RETRY_MS,
        error,
      });
    },
    () => {
      log('info', 'true source running', { stream, playlistUrl });
    },
  );
  return runner;
}

/** 127.0.0.0/8, ::1 or localhost: only peers on this machine reach a tracker bound there. */
function isLoopbackHost(host: string): boolean {
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) || host === '::1' || host === 'localhost';
}

main().catch((e: unknown) => {
  process.stderr.write(`chunkycast-tracker: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
