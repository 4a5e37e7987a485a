// What every browser build of our code needs (the SDK bundle and the demo site alike): no Node
// built-in may slip into the page, simple-peer's "events" comes from npm, our packages from source.
import { builtinModules, createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { Alias, Plugin, UserConfig } from 'vite';

const require = createRequire(import.meta.url);
const nodeBuiltins = new Set([...builtinModules, ...builtinModules.map((name) => `node:${name}`)]);
const fromRoot = (path: string): string => fileURLToPath(new URL(`../${path}`, import.meta.url));

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

/** Plugins, aliases and defines for a browser build; `extraAliases` come first. */
export function browserBuild(extraAliases: Alias[] = []): Pick<UserConfig, 'plugins' | 'resolve' | 'define'> {
  return {
    plugins: [noNodeBuiltins()],
    resolve: {
      // @thaunknown/simple-peer imports Node's "events"; in the browser the npm package stands in.
      // Browser conditions (Vite's default for client builds) pick webrtc-polyfill's "browser" export.
      alias: [
        ...extraAliases,
        { find: /^events$/, replacement: require.resolve('events/') },
        { find: /^@chunkycast\/wire$/, replacement: fromRoot('packages/wire/src/index.ts') },
        { find: /^@chunkycast\/engine$/, replacement: fromRoot('packages/engine/src/index.ts') },
      ],
    },
    define: {
      // Dependencies read NODE_ENV; browsers have no process (and library mode leaves it alone).
      'process.env.NODE_ENV': JSON.stringify('production'),
    },
  };
}
