/**
 * For modules that are both a library (imported by tests) and a command (run by node): whether this
 * process was started with the module as its entry point.
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** True when `moduleUrl` (the caller's `import.meta.url`) is the script node was asked to run. */
export function isMain(moduleUrl: string): boolean {
  const invokedAs = process.argv[1];
  if (invokedAs === undefined) return false;
  try {
    return pathToFileURL(realpathSync(invokedAs)).href === moduleUrl;
  } catch {
    return false;
  }
}
