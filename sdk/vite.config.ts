// The browser bundles: one IIFE for a plain <script> tag (global `Chunkycast`) and one ES module,
// both with hls.js inside. tsc writes dist/*.js + .d.ts beside them for ESM-with-types users.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { browserBuild } from './vite.browser.js';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  ...browserBuild(),
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
