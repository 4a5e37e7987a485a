// The browser e2e tests: one file, run serially, inside a loopback-only network namespace by
// tools/src/e2e/run.ts (`npm run e2e`). Not part of the root vitest run.
import { defineConfig } from 'vitest/config';
import { fileURLToPath } from 'node:url';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  test: {
    include: ['*.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
    poolOptions: { forks: { singleFork: true } },
    reporters: ['verbose'],
  },
});
