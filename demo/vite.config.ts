// The demo site: viewer (index.html) and broadcaster console (broadcaster.html). It imports the SDK
// from source, so no SDK build is needed first; `base: './'` lets any server host dist/ anywhere.
import { builtinModules, createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import type { Plugin } from 'vite';

const require = createRequire(import.meta.url);
const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));
const nodeBuiltins = new Set([...builtinModules, ...builtinModules.map((name) => `node:${name}`)]);
/** Where `vite` (dev) forwards /ws, /live and /debug: the tracker serving the stream, on loopback. */
const trackerHttp = process.env.CHUNKYCAST_TRACKER_HTTP ?? 'http://127.0.0.1:8080';

/** Fails the build when Node code would otherwise be stubbed out silently (Vite only warns). */
function noNodeBuiltins(): Plugin {
  return {
    name: 'chunkycast:no-node-builtins',
    enforce: 'pre',
    resolveId(source, importer) {
      if (source !== 'events' && nodeBuiltins.has(source)) {
        this.error(`Node built-in "${source}" imported by ${importer ?? '?'} would leak into the page`);
      }
      return null;
    },
  };
}

export default defineConfig({
  root: here('.'),
  base: './',
  plugins: [noNodeBuiltins()],
  resolve: {
    alias: [
      // @thaunknown/simple-peer imports Node's "events"; in the browser the npm package stands in.
      { find: /^events$/, replacement: require.resolve('events/') },
      { find: /^@chunkycast\/sdk$/, replacement: here('../sdk/src/index.ts') },
      { find: /^@chunkycast\/wire$/, replacement: here('../packages/wire/src/index.ts') },
      { find: /^@chunkycast\/engine$/, replacement: here('../packages/engine/src/index.ts') },
    ],
  },
  define: {
    'process.env.NODE_ENV': JSON.stringify('production'),
  },
  server: {
    host: '127.0.0.1',
    proxy: {
      '/ws': { target: trackerHttp, ws: true },
      '/live': trackerHttp,
      '/debug': trackerHttp,
    },
  },
  build: {
    outDir: here('dist'),
    emptyOutDir: true,
    target: 'es2022',
    // hls.js alone is over Vite's 500 kB warning; the page is one player, not a site to split.
    chunkSizeWarningLimit: 2000,
    rollupOptions: {
      input: { index: here('index.html'), broadcaster: here('broadcaster.html') },
    },
  },
});
