// The browser bundles: one IIFE for a plain <script> tag (global `Chunkycast`) and one ES module,
// both with hls.js inside. tsc writes dist/*.js + .d.ts beside them for ESM-with-types users.
import { builtinModules, createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import type { Plugin } from 'vite';

const require = createRequire(import.meta.url);
const nodeBuiltins = new Set([...builtinModules, ...builtinModules.map((name) => `node:${name}`)]);

/** Fails the build when Node code would otherwise be stubbed out silently (Vite only warns). */
function noNodeBuiltins(): Plugin {
  return {
    name: 'chunkycast:no-node-builtins',
    enforce: 'pre',
    resolveId(source, importer) {
      if (source !== 'events' && nodeBuiltins.has(source)) {
        this.error(
          `Node built-in "${source}" imported by ${importer ?? '?'} would leak into the browser bundle`,
        );
      }
      return null;
    },
  };
}

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  plugins: [noNodeBuiltins()],
  resolve: {
    // @thaunknown/simple-peer imports Node's "events"; in the browser the npm package stands in.
    // Browser conditions (Vite's default for client builds) pick webrtc-polyfill's "browser" export.
    alias: [
      { find: /^events$/, replacement: require.resolve('events/') },
      {
        find: '@chunkycast/wire',
        replacement: fileURLToPath(new URL('../packages/wire/src/index.ts', import.meta.url)),
      },
      {
        find: '@chunkycast/engine',
        replacement: fileURLToPath(new URL('../packages/engine/src/index.ts', import.meta.url)),
      },
    ],
  },
  define: {
    // Library mode leaves process.env alone; dependencies read NODE_ENV, browsers have no process.
    'process.env.NODE_ENV': JSON.stringify('production'),
  },
  build: {
    outDir: 'dist/bundle',
    // tsc owns dist/: only this subdirectory is ours, and it is overwritten file by file.
    emptyOutDir: false,
    target: 'es2022',
    sourcemap: true,
    lib: {
      entry: fileURLToPath(new URL('src/index.ts', import.meta.url)),
      name: 'Chunkycast',
      formats: ['iife', 'es'],
      fileName: (format) => `chunkycast.${format}.js`,
    },
  },
});
