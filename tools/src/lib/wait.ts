/**
 * Bounded waiting: poll a condition until it holds or a deadline passes, and keep the last lines of
 * a child's log for the error message when it does not.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** A bounded ring of recent log lines, for diagnostics when something fails. */
export class Ring {
  /** The kept lines, oldest first. */
  readonly lines: string[] = [];
  constructor(private readonly size: number) {}
  push(line: string): void {
    this.lines.push(line);
    if (this.lines.length > this.size) this.lines.splice(0, this.lines.length - this.size);
  }
  text(): string {
    return this.lines.join('\n');
  }
}

/**
 * Polls `check` every `intervalMs` until it returns a value other than undefined/false/null, and
 * returns that value. Throws after `timeoutMs` (with the last error `check` threw, if any).
 */
export async function waitFor<T>(
  what: string,
  check: () => T | false | null | undefined | Promise<T | false | null | undefined>,
  { timeoutMs = 30_000, intervalMs = 250 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (let attempt = 0; attempt < Math.ceil(timeoutMs / intervalMs) + 2; attempt++) {
    try {
      const value = await check();
      if (value !== undefined && value !== false && value !== null) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) break;
    await sleep(intervalMs);
  }
  const cause = lastError === undefined ? '' : ` (last error: ${errorMessage(lastError)})`;
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${cause}`);
}

/** An error's message (or the thrown value as text), for log lines. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** An error's stack (or the thrown value as text), for the last line of a failed run. */
export function errorStack(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
