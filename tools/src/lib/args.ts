/**
 * The one way the tools parse their command lines: `node:util`'s parseArgs (strict: an unknown
 * flag or a missing value is an error) plus typed readers for numbers, and one exit path for bad
 * usage: the error and the usage text on stderr, exit status 2; `--help` (or `-h`) prints the usage,
 * exit 0.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** A bad command line; the message names the flag. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** What parseArgs found: each flag's value(s) by name, and the positional arguments. */
export interface ParsedCommandLine {
  readonly values: Readonly<Record<string, string | boolean | (string | boolean)[] | undefined>>;
  readonly positionals: readonly string[];
}

/**
 * Parses `argv` against `options` (a `help` boolean is added), then `build` turns the raw values
 * into the tool's typed options (throwing UsageError for bad values). Exits on bad usage or --help.
 */
export function parseCommandLine<T>(
  tool: string,
  usage: string,
  options: Options,
  build: (parsed: ParsedCommandLine) => T,
  argv: readonly string[] = process.argv.slice(2),
): T {
  let parsed: ParsedCommandLine;
  let result: T;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
    if (parsed.values.help === true) {
      process.stdout.write(`${usage.trimEnd()}\n`);
      process.exit(0);
    }
    result = build(parsed);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`${tool}: ${message}\n\n${usage.trimEnd()}\n`);
    process.exit(2);
  }
  return result;
}

/** For tools that take no positional arguments: a stray word is a usage error, not ignored. */
export function noPositionals(parsed: ParsedCommandLine): void {
  if (parsed.positionals.length > 0)
    throw new UsageError(`unexpected argument "${parsed.positionals.join(' ')}" (options start with --)`);
}

/** A string flag's value (the last one when repeated), or undefined. */
export function stringValue(parsed: ParsedCommandLine, flag: string): string | undefined {
  const value = parsed.values[flag];
  if (Array.isArray(value)) {
    const last = value[value.length - 1];
    return typeof last === 'string' ? last : undefined;
  }
  return typeof value === 'string' ? value : undefined;
}

/** Every value of a repeatable string flag (`multiple: true`). */
export function stringValues(parsed: ParsedCommandLine, flag: string): string[] {
  const value = parsed.values[flag];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return typeof value === 'string' ? [value] : [];
}

/**
 * A numeric flag's value: absent gives `fallback`; otherwise a finite number ≥ `min` (and an
 * integer when `integer`), or UsageError naming the flag.
 */
export function numberOption(
  flag: string,
  value: string | undefined,
  fallback: number,
  {
    min = -Infinity,
    max = Infinity,
    integer = false,
  }: { min?: number; max?: number; integer?: boolean } = {},
): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
    const range = max === Infinity ? `≥ ${min}` : `in [${min}, ${max}]`;
    throw new UsageError(`--${flag} needs ${integer ? 'an integer' : 'a number'} ${range}, got "${value}"`);
  }
  return n;
}

/** A flag that takes one of `choices`; absent gives `fallback`. */
export function choiceOption<C extends string>(
  flag: string,
  value: string | undefined,
  choices: readonly C[],
  fallback: C,
): C {
  if (value === undefined) return fallback;
  if (!(choices as readonly string[]).includes(value))
    throw new UsageError(`--${flag} must be one of ${choices.join(', ')}, got "${value}"`);
  return value as C;
}
