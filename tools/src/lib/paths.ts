/**
 * Where things are: the repository's root, from this file's own place (tools/src/lib/ when run from
 * source by the tests, tools/dist/lib/ when built; both three levels below the root).
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root directory. */
export const root: string = fileURLToPath(new URL('../../../', import.meta.url));

/** A path inside the repository, from its parts relative to the root. */
export function fromRoot(...parts: string[]): string {
  return join(root, ...parts);
}
