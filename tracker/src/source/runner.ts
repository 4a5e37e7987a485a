import type { TrueSource } from './true-source.js';

/** The playlist may not exist yet (ffmpeg starts alongside), or the tracker may not be up: keep trying. */
export const SOURCE_RETRY_MS = 2_000;

/**
 * Starts a true source and retries every `retryMs` until it runs or stop() is called. The first
 * join is the runner's to retry; once running, the source's tracker client reconnects by itself.
 * (tracker/src/cli.ts holds an identical copy for its in-process source; it can import this one.)
 */
export class SourceRunner {
  private stopped = false;
  private source: TrueSource | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> = Promise.resolve();

  constructor(
    private readonly startOnce: () => Promise<TrueSource>,
    private readonly retryMs = SOURCE_RETRY_MS,
  ) {}

  /** The running source, once started. */
  get running(): TrueSource | null {
    return this.source;
  }

  start(onFailure: (attempt: number, error: unknown) => void, onRunning: (source: TrueSource) => void): void {
    this.loop = (async () => {
      for (let attempt = 1; !this.isStopped(); attempt++) {
        try {
          const started = await this.startOnce();
          if (this.isStopped()) await started.stop();
          else {
            this.source = started;
            onRunning(started);
          }
          return;
        } catch (e) {
          onFailure(attempt, e);
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.retryMs);
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
