/**
 * Structured logging through pino: one JSON object per line on stdout, so scripts and operators can
 * parse it. Each line holds `t` (ISO time), `level` (its name), `msg` and the caller's fields.
 */
import { pino, type DestinationStream } from 'pino';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

/** The same shape the true source takes, so one logger serves both. */
export type Logger = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => void;

export interface LoggerOptions {
  /** Lines below this level are dropped. */
  readonly level: LogLevel;
  /** Where a finished line goes (without its newline); stdout by default. */
  readonly write?: (line: string) => void;
  /** Clock, injectable for tests. */
  readonly now?: () => Date;
}

/** The line's own time, level and message: a field must never masquerade as one of them. */
const RESERVED = new Set(['t', 'level', 'msg']);

export function isLogLevel(value: string): value is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(value);
}

export function createLogger(options: LoggerOptions): Logger {
  const now = options.now ?? (() => new Date());
  const write = options.write;
  const destination: DestinationStream =
    write === undefined
      ? process.stdout
      : {
          write: (line: string) => {
            write(line.endsWith('\n') ? line.slice(0, -1) : line);
          },
        };
  const logger = pino(
    {
      level: options.level,
      // No pid or hostname: the lines carry what the tracker says, nothing more.
      base: null,
      messageKey: 'msg',
      timestamp: () => `,"t":${JSON.stringify(now().toISOString())}`,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
  return (level, msg, fields) => {
    if (!logger.isLevelEnabled(level)) return;
    const record: Record<string, unknown> = {};
    if (fields !== undefined)
      for (const [key, value] of Object.entries(fields))
        if (!RESERVED.has(key)) record[key] = plain(value, new WeakSet());
    logger[level](record, msg);
  };
}

/** A logger that drops everything (tests, embedding). */
export const silentLogger: Logger = () => undefined;

/** Logging must never throw: bigints become strings, errors their name and message, cycles a marker. */
function plain(value: unknown, seen: WeakSet<object>): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value !== 'object' || value === null) return value;
  if (value instanceof Error) return { name: value.name, message: value.message };
  // Dates, Buffers and the like say themselves how they become JSON.
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return value;
  if (seen.has(value)) return '[Circular]';
  seen.add(value);
  const copy = Array.isArray(value)
    ? value.map((item: unknown) => plain(item, seen))
    : Object.fromEntries(Object.entries(value).map(([key, item]) => [key, plain(item, seen)]));
  seen.delete(value);
  return copy;
}
