/** Stopping what a run started, in reverse order, whatever fails on the way. */

/** How long one stop may take before it is reported and the next one runs. */
const STOP_TIMEOUT_MS = 10_000;

/** Stops everything started through it, last started first; safe to call twice. */
export class Stack {
  private readonly items: { name: string; stop: () => Promise<unknown> }[] = [];

  add(name: string, stop: () => Promise<unknown>): void {
    this.items.push({ name, stop });
  }

  async stopAll(): Promise<void> {
    for (let item = this.items.pop(); item !== undefined; item = this.items.pop()) {
      const { name, stop } = item;
      // The timer is cleared once stop() settles: only a stop that really hangs is reported.
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          stop(),
          new Promise<void>((resolve) => {
            timer = setTimeout(() => {
              process.stderr.write(`stack: stopping ${name} timed out\n`);
              resolve();
            }, STOP_TIMEOUT_MS);
          }),
        ]);
      } catch (error) {
        process.stderr.write(`stack: stopping ${name} failed: ${String(error)}\n`);
      } finally {
        clearTimeout(timer);
      }
    }
  }
}

/**
 * A bounded run's guard: on SIGINT or SIGTERM (exit 130), or once `ceilingMs` has passed (exit 1),
 * everything on `stack` is stopped and the process exits; a second signal exits at once.
 * `stopping()` says whether that has begun (read it after each await: a trial loop stops there).
 */
export function guardRun(
  stack: Stack,
  { ceilingMs, progress }: { ceilingMs: number; progress: (line: string) => void },
): { stopping(): boolean } {
  let stopping = false;
  const abort = (why: string, code: number): void => {
    if (stopping) process.exit(code);
    stopping = true;
    progress(`${why}; stopping`);
    void stack.stopAll().then(() => process.exit(code));
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => {
      abort('interrupted', 130);
    });
  setTimeout(() => {
    abort(`still running after ${Math.round(ceilingMs / 1000)} s`, 1);
  }, ceilingMs).unref();
  return { stopping: () => stopping };
}
