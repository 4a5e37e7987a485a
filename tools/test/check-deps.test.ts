import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { dependencyProblems, e2eImports, forbiddenImports } from '../src/check-deps.js';
import { root } from '../src/lib/paths.js';

describe('check-deps', () => {
  const made: string[] = [];
  afterEach(() => {
    for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('finds imports against the direction, static and dynamic, with their line', () => {
    const text = [
      "import { Engine } from '@chunkycast/engine';",
      "import { createTracker } from '@chunkycast/tracker';",
      "const sim = await import('@chunkycast/sim');",
    ].join('\n');
    expect(forbiddenImports('engine', text)).toEqual([
      { line: 2, target: 'tracker' },
      { line: 3, target: 'sim' },
    ]);
    expect(forbiddenImports('tools', text)).toEqual([]);
    expect(forbiddenImports('tracker', "import x from '@chunkycast/tools';")).toEqual([
      { line: 1, target: 'tools' },
    ]);
  });

  it('finds a tools import of the e2e harness, so npm start cannot come to depend on test code', () => {
    const text = [
      "import { Stack } from '../stack/cleanup.js';",
      "import { waitForPlaying } from '../../../e2e/src/harness.js';",
      "const h = await import('../../e2e/src/harness.js');",
    ].join('\n');
    expect(e2eImports(text)).toEqual([2, 3]);
  });

  it('reports a manifest and a source file that point the wrong way, and passes this repository', () => {
    const repo = mkdtempSync(join(tmpdir(), 'check-deps-'));
    made.push(repo);
    mkdirSync(join(repo, 'packages', 'wire', 'src'), { recursive: true });
    writeFileSync(
      join(repo, 'packages', 'wire', 'package.json'),
      JSON.stringify({ dependencies: { '@chunkycast/engine': '0.1.0' } }),
    );
    writeFileSync(
      join(repo, 'packages', 'wire', 'src', 'a.ts'),
      "export const a = 1;\n\nimport { b } from '@chunkycast/sdk';\n",
    );
    expect(dependencyProblems(repo)).toEqual([
      'packages/wire/package.json: wire must not depend on @chunkycast/engine',
      'packages/wire/src/a.ts:3: wire must not import @chunkycast/sdk',
    ]);
    expect(dependencyProblems(root)).toEqual([]);
  });
});
