/** Structured logging: one JSON object per line on stdout, so scripts and operators can parse it. */

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

const RESERVED = new Set(['t', 'level', 'msg']);

export function isLogLevel(value: string): value is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(value);
}

export function createLogger(options: LoggerOptions): Logger {
  const threshold = LOG_LEVELS.indexOf(options.level);
  const write =
    options.write ??
    ((line: string) => {
      process.stdout.write(line + '\n');
    });
  const now = options.now ?? (() => new Date());
  return (level, msg, fields) => {
    if (LOG_LEVELS.indexOf(level) < threshold) return;
    const record: Record<string, unknown> = { t: now().toISOString(), level, msg };
    if (fields !== undefined)
      for (const [key, value] of Object.entries(fields)) {
        // A field must never masquerade as the line's own time, level or message.
        if (!RESERVED.has(key)) record[key] = value;
      }
    write(stringify(record));
  };
}

/** A logger that drops everything (tests, embedding). */
export const silentLogger: Logger = () => undefined;

/** Logging must never throw: bigints become strings, errors their message, cycles a marker. */
function stringify(record: Record<string, unknown>): string {
  try {
    return JSON.stringify(record, (_key, value: unknown) => {
      if (typeof value === 'bigint') return value.toString();
      if (value instanceof Error) return { name: value.name, message: value.message };
      return value;
    });
  } catch {
    return JSON.stringify({
      t: record.t,
      level: record.level,
      msg: record.msg,
      logError: 'unserializable fields',
    });
  }
}
