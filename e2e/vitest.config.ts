// The browser e2e tests: the files run serially, inside a loopback-only network namespace by
// tools/src/e2e/run.ts (`npm run e2e`). Not part of the root vitest run.
import { defineConfig } from 'vitest/config';
import { fileURLToPath } from 'node:url';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  test: {
    // WebKitGTK's test runs on its own (`npm run e2e:webkit`): its automation failed 4 of 12 runs
    // here (3 WebDriver commands timing out after a navigation, 1 playhead stuck at the start), too
    // often for `npm test`.
    include: process.env.CHUNKYCAST_E2E_WEBKIT === '1' ? ['webkit.test.ts'] : ['*.test.ts'],
    exclude: process.env.CHUNKYCAST_E2E_WEBKIT === '1' ? [] : ['webkit.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
    poolOptions: { forks: { singleFork: true } },
    reporters: ['verbose'],
  },
});
