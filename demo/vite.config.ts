// The demo site: viewer (index.html) and broadcaster console (broadcaster.html). It imports the SDK
// from source, so no SDK build is needed first; `base: './'` lets any server host dist/ anywhere.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { browserBuild } from '../sdk/vite.browser.js';

const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));
/** Where `vite` (dev) forwards /ws, /live and /debug: the tracker serving the stream, on loopback. */
const trackerHttp = process.env.CHUNKYCAST_TRACKER_HTTP ?? 'http://127.0.0.1:8080';

export default defineConfig({
  root: here('.'),
  base: './',
  ...browserBuild([
    { find: /^@chunkycast\/sdk$/, replacement: here('../sdk/src/index.ts') },
    // The viewer's ?fault= test parameter (internal fault injection, for the end-to-end tests).
    { find: /^@chunkycast\/sdk\/testing$/, replacement: here('../sdk/src/testing.ts') },
    // The comparison benchmark's p2p-media-loader arm: the core's self-contained browser bundle (the
    // build its package exports for bundlers under "p2pml:core-as-bundle"), since its plain ES build
    // pulls in bittorrent-tracker's Node-flavoured client.
    {
      find: /^p2p-media-loader-core$/,
      replacement: here('../node_modules/p2p-media-loader-core/dist/p2p-media-loader-core.es.js'),
    },
  ]),
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
    // Maps next to the bundles: the cost benchmark's profiles (npm run swarm -- --profile-viewer)
    // name the source file and function of every sample; the page loads them only in DevTools.
    sourcemap: true,
    // hls.js alone is over Vite's 500 kB warning; the page is one player, not a site to split.
    chunkSizeWarningLimit: 2000,
    rollupOptions: {
      input: {
        index: here('index.html'),
        broadcaster: here('broadcaster.html'),
        // The comparison benchmark's arms (npm run bench:compare), one bare player each.
        'bench-http': here('bench/http.html'),
        'bench-p2pml': here('bench/p2pml.html'),
        'bench-mesh': here('bench/mesh.html'),
      },
    },
  },
});
