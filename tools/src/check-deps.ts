#!/usr/bin/env node
/**
 * `npm run check:deps` (and a step of `npm test`): dependencies point one way,
 * wire ← engine ← (sim, sdk, tracker) ← tools. Checks the package.json files and every import in
 * the sources, so a stray import fails CI with the file and line. Runs from the built output
 * (tools/dist/check-deps.js): `npm test`'s setup has built everything by then.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseCommandLine } from './lib/args.js';
import { isMain } from './lib/main.js';
import { root } from './lib/paths.js';

export const PACKAGES = ['wire', 'engine', 'sim', 'sdk', 'tracker', 'tools'] as const;
export type PackageName = (typeof PACKAGES)[number];

/** Which of our packages each package may depend on. */
export const ALLOWED: Readonly<Record<PackageName, readonly PackageName[]>> = {
  wire: [],
  engine: ['wire'],
  sim: ['wire', 'engine'],
  sdk: ['wire', 'engine'],
  // The true source runs the SDK's mesh host in Node (one host implementation, two runtimes).
  tracker: ['wire', 'engine', 'sdk'],
  // Benchmarks, fuzzers and drivers run everything from outside; nothing depends on them.
  tools: ['wire', 'engine', 'sim', 'sdk', 'tracker'],
};

const LOCATIONS: Readonly<Record<PackageName, string>> = {
  wire: 'packages/wire',
  engine: 'packages/engine',
  sim: 'packages/sim',
  sdk: 'sdk',
  tracker: 'tracker',
  tools: 'tools',
};

const IMPORT = /from\s+['"]@chunkycast\/([\w-]+)['"]|import\(\s*['"]@chunkycast\/([\w-]+)['"]/g;
/**
 * A relative import that climbs out of tools/src into e2e/: the tools (`npm start` among them)
 * must never run the e2e tests' harness; the harness imports the tools, not the other way round.
 */
const E2E_IMPORT = /(?:from\s+|import\(\s*)['"](?:\.\.\/)+e2e\//;

/** The lines of a tools source file that import from e2e/, 1-based. */
export function e2eImports(text: string): number[] {
  const lines: number[] = [];
  text.split('\n').forEach((line, i) => {
    if (E2E_IMPORT.test(line)) lines.push(i + 1);
  });
  return lines;
}

function* sourceFiles(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|tsx|js|mjs)$/.test(name)) yield path;
  }
}

function mayDependOn(pkg: PackageName, target: string): boolean {
  return target === pkg || (ALLOWED[pkg] as readonly string[]).includes(target);
}

/** The imports of `@chunkycast/…` in `text` that `pkg` may not have, as `line: message`. */
export function forbiddenImports(pkg: PackageName, text: string): { line: number; target: string }[] {
  const found: { line: number; target: string }[] = [];
  text.split('\n').forEach((line, i) => {
    for (const match of line.matchAll(IMPORT)) {
      const target = match[1] ?? match[2];
      if (target !== undefined && !mayDependOn(pkg, target)) found.push({ line: i + 1, target });
    }
  });
  return found;
}

interface Manifest {
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/** Every violation in the repository at `repositoryRoot`, one line each. */
export function dependencyProblems(repositoryRoot: string): string[] {
  const problems: string[] = [];
  for (const pkg of PACKAGES) {
    const dir = LOCATIONS[pkg];
    const base = join(repositoryRoot, dir);
    if (!existsSync(join(base, 'package.json'))) continue;
    const manifest = JSON.parse(readFileSync(join(base, 'package.json'), 'utf8')) as Manifest;
    for (const dep of Object.keys({
      ...manifest.dependencies,
      ...manifest.devDependencies,
      ...manifest.peerDependencies,
    })) {
      const target = /^@chunkycast\/(.+)$/.exec(dep)?.[1];
      if (target !== undefined && !(ALLOWED[pkg] as readonly string[]).includes(target))
        problems.push(`${dir}/package.json: ${pkg} must not depend on ${dep}`);
    }
    for (const sub of ['src', 'test']) {
      if (!existsSync(join(base, sub))) continue;
      for (const file of sourceFiles(join(base, sub))) {
        const text = readFileSync(file, 'utf8');
        for (const { line, target } of forbiddenImports(pkg, text))
          problems.push(
            `${relative(repositoryRoot, file)}:${line}: ${pkg} must not import @chunkycast/${target}`,
          );
        if (pkg === 'tools' && sub === 'src')
          for (const line of e2eImports(text))
            problems.push(`${relative(repositoryRoot, file)}:${line}: tools must not import the e2e harness`);
      }
    }
  }
  return problems;
}

if (isMain(import.meta.url)) {
  parseCommandLine(
    'check-deps',
    'usage: npm run check:deps\n\nChecks that dependencies point one way: wire ← engine ← sim/sdk ← tracker ← tools.',
    {},
    () => null,
  );
  const problems = dependencyProblems(root);
  if (problems.length > 0) {
    process.stderr.write(
      `Dependency direction violated (wire ← engine ← sim/sdk ← tracker):\n${problems.map((p) => `  ${p}`).join('\n')}\n`,
    );
    process.exit(1);
  }
  process.stdout.write('dependencies point one way: wire ← engine ← sim/sdk ← tracker\n');
}
