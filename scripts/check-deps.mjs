#!/usr/bin/env node
// Dependencies point one way: wire ← engine ← (sim, sdk, tracker). Checks package.json files and
// every import in the sources, so a stray import fails CI with the file and line.
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const allowed = {
  wire: [],
  engine: ['wire'],
  sim: ['wire', 'engine'],
  sdk: ['wire', 'engine'],
  // The true source runs the SDK's mesh host in Node (one host implementation, two runtimes).
  tracker: ['wire', 'engine', 'sdk'],
  // Benchmarks, fuzzers and drivers run everything from outside; nothing depends on them.
  tools: ['wire', 'engine', 'sim', 'sdk', 'tracker'],
};
const locations = {
  wire: 'packages/wire',
  engine: 'packages/engine',
  sim: 'packages/sim',
  sdk: 'sdk',
  tracker: 'tracker',
  tools: 'tools',
};

function* files(dir) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* files(path);
    else if (/\.(ts|tsx|js|mjs)$/.test(name)) yield path;
  }
}

const problems = [];
for (const [pkg, dir] of Object.entries(locations)) {
  const base = join(root, dir);
  if (!existsSync(join(base, 'package.json'))) continue;
  const manifest = JSON.parse(readFileSync(join(base, 'package.json'), 'utf8'));
  for (const dep of Object.keys({
    ...manifest.dependencies,
    ...manifest.devDependencies,
    ...manifest.peerDependencies,
  })) {
    const m = /^@chunkycast\/(.+)$/.exec(dep);
    if (m && !allowed[pkg].includes(m[1]))
      problems.push(`${dir}/package.json: ${pkg} must not depend on ${dep}`);
  }
  for (const sub of ['src', 'test']) {
    if (!existsSync(join(base, sub))) continue;
    for (const file of files(join(base, sub))) {
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          for (const m of line.matchAll(
            /from\s+['"]@chunkycast\/([\w-]+)['"]|import\(\s*['"]@chunkycast\/([\w-]+)['"]/g,
          )) {
            const target = m[1] ?? m[2];
            if (target !== pkg && !allowed[pkg].includes(target))
              problems.push(`${relative(root, file)}:${i + 1}: ${pkg} must not import @chunkycast/${target}`);
          }
        });
    }
  }
}
if (problems.length > 0) {
  process.stderr.write(
    `Dependency direction violated (wire ← engine ← sim/sdk ← tracker):\n${problems.map((p) => `  ${p}`).join('\n')}\n`,
  );
  process.exit(1);
}
process.stdout.write('dependencies point one way: wire ← engine ← sim/sdk ← tracker\n');
