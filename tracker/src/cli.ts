#!/usr/bin/env node
/**
 * chunkycast-tracker: the tracker, optionally with the origin and the true source in one process.
 * Prints one `listening` JSON line once it serves (scripts wait for it and read its URLs).
 */
import { ConfigError, parseConfig, USAGE, type TrackerConfig } from './config.js';
import { generateSigningKeys, KeyError, loadSigningKeys, type SigningKeys } from './keys.js';
import { createLogger, type Logger } from './log.js';
import { createTracker, type Tracker } from './server.js';
import { startTrueSource, type TrueSource } from './source/true-source.js';

/** The playlist may not exist yet (ffmpeg starts alongside), so the source keeps trying. */
const SOURCE_RETRY_MS = 2_000;

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
  const log = createLogger({ level: config.logLevel });

  let keys: SigningKeys;
  try {
    keys =
      config.signingKeyFile === null
        ? await generateSigningKeys()
        : await loadSigningKeys(config.signingKeyFile);
  } catch (e) {
    if (e instanceof KeyError) {
      process.stderr.write(`chunkycast-tracker: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  if (keys.ephemeral)
    // Public by nature; whoever verifies this run's announcements outside the tracker needs it.
    log('info', 'generated an ephemeral signing key', { publicKey: keys.publicKeyBase64 });
  if (config.broadcasterKeyGenerated)
    // Never the value: it is the one secret that makes a peer the source.
    log('info', 'no broadcaster key configured; generated one for the in-process source');

  const tracker = await createTracker({
    host: config.host,
    port: config.port,
    originDir: config.originDir,
    staticDir: config.staticDir,
    broadcasterKey: config.broadcasterKey,
    publicKey: keys.publicKeyBase64,
    log,
  });
  log('info', 'listening', {
    url: tracker.url,
    wsUrl: tracker.wsUrl,
    demoUrl: config.staticDir === null ? null : `${tracker.url}/`,
    originUrl: config.originDir === null ? null : `${tracker.url}/live/`,
    sourceStream: config.sourceStream,
  });

  const runner =
    config.sourceStream === null ? null : runSource(config, config.sourceStream, tracker, keys, log);

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
        await runner?.stop();
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

class SourceRunner {
  private stopped = false;
  private source: TrueSource | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> = Promise.resolve();

  constructor(private readonly startOnce: () => Promise<TrueSource>) {}

  start(onFailure: (attempt: number, error: unknown) => void, onRunning: () => void): void {
    this.loop = (async () => {
      for (let attempt = 1; !this.isStopped(); attempt++) {
        try {
          const started = await this.startOnce();
          if (this.isStopped()) await started.stop();
          else {
            this.source = started;
            onRunning();
          }
          return;
        } catch (e) {
          onFailure(attempt, e);
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, SOURCE_RETRY_MS);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wake = null;
      }
    })();
  }

  /** Read through a method: the flag changes while the loop awaits. */
  private isStopped(): boolean {
    return this.stopped;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
    await this.source?.stop();
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`chunkycast-tracker: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
