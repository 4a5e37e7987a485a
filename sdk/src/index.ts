// Browser entry of the SDK: the runtime-neutral core, the hls.js loader and <mesh-player>, which is
// defined on import so that a plain <script> tag is all a page needs.
export * from './core.js';
export * from './loader.js';
export * from './playlist-loader.js';
// The element and its types; its attribute parsers are the element's own (tests reach them in src).
export {
  MeshPlayer,
  defineMeshPlayer,
  type MeshPlayerErrorCode,
  type MeshPlayerErrorDetail,
  type MeshPlayerStats,
} from './player.js';
import { defineMeshPlayer } from './player.js';

defineMeshPlayer();
