/**
 * The `--out DIR` of the drivers that re-run themselves in a network namespace: resolved before
 * the re-run, relative to where npm was run (INIT_CWD), and passed on to the isolated process
 * as an absolute path.
 */
import { resolve } from 'node:path';

/** DIR resolved against the directory npm was run in (or this process's). */
export function resolveOut(dir: string): string {
  return resolve(process.env.INIT_CWD ?? process.cwd(), dir);
}

/** `argv` without its `--out DIR` (and `--out=DIR`), to append the resolved one. */
export function withoutOut(argv: readonly string[]): string[] {
  return argv.filter((a, i) => a !== '--out' && argv[i - 1] !== '--out' && !a.startsWith('--out='));
}
