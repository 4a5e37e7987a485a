import { defineConfig } from 'vitest/config';
import { fileURLToPath } from 'node:url';

const src = (name: string): string =>
  fileURLToPath(new URL(`./packages/${name}/src/index.ts`, import.meta.url));
const file = (path: string): string => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig({
  resolve: {
    alias: {
      '@chunkycast/wire': src('wire'),
      '@chunkycast/engine': src('engine'),
      '@chunkycast/sim': src('sim'),
      '@chunkycast/sdk/core': file('./sdk/src/core.ts'),
      '@chunkycast/sdk': file('./sdk/src/index.ts'),
      '@chunkycast/tracker': file('./tracker/src/index.ts'),
    },
  },
  test: {
    include: [
      'packages/*/test/**/*.test.ts',
      'sdk/test/**/*.test.ts',
      'tracker/test/**/*.test.ts',
      'tools/test/**/*.test.ts',
    ],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    setupFiles: ['./vitest.setup.ts'],
    pool: 'forks',
    // One test process: the simulation tests block their process for tens of seconds, and with two
    // of them on a 2-core machine the runner itself starved ("Timeout calling onTaskUpdate").
    poolOptions: { forks: { maxForks: 1, minForks: 1 } },
  },
});
