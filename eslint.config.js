// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

/** Ambient time and randomness are forbidden in the sans-IO engine: the host supplies `now` and a
 * seeded PRNG, which is what makes the simulator deterministic and the engine testable by hand. */
const engineBannedGlobals = [
  'Date',
  'performance',
  'setTimeout',
  'setInterval',
  'setImmediate',
  'clearTimeout',
  'clearInterval',
  'clearImmediate',
  'queueMicrotask',
  'requestAnimationFrame',
  'process',
  'crypto',
].map((name) => ({
  name,
  message: `packages/engine is sans-IO: take time and randomness from the host, not from "${name}".`,
}));

export default tseslint.config(
  {
    ignores: ['**/dist/**', '**/node_modules/**', 'out/**', 'sim-out/**', '**/*.d.ts'],
  },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        // One program for sources and tests (tests live outside the packages' build configs).
        project: ['./tsconfig.tests.json'],
        tsconfigRootDir: import.meta.dirname,
      },
      globals: { ...globals.node },
    },
    rules: {
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // Bit twiddling on Bloom filters and wire integers is the point of this codebase.
      'no-bitwise': 'off',
      '@typescript-eslint/no-non-null-assertion': 'error',
    },
  },
  {
    // Browser code: the SDK and the demo run in pages (the SDK's core also runs in Node).
    files: ['sdk/src/**/*.ts', 'demo/src/**/*.ts', 'e2e/src/page/**/*.ts'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ['packages/engine/src/**/*.ts', 'packages/wire/src/**/*.ts'],
    languageOptions: { globals: {} },
    rules: {
      'no-restricted-globals': ['error', ...engineBannedGlobals],
      'no-restricted-properties': [
        'error',
        { object: 'Math', property: 'random', message: 'Use the seeded Random the host passes in.' },
        { object: 'globalThis', message: 'No ambient state in the sans-IO packages.' },
      ],
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'path', 'os', 'net', 'dgram', 'timers', 'perf_hooks', 'crypto'],
              message: 'Sans-IO: no Node APIs here.',
            },
            {
              group: ['@chunkycast/sim', '@chunkycast/sdk', '@chunkycast/tracker'],
              message: 'Dependencies point one way: wire ← engine ← hosts.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['packages/wire/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['@chunkycast/*'], message: 'wire depends on nothing of ours.' },
            { group: ['node:*'], message: 'No Node APIs in wire.' },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['**/test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
