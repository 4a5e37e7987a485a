import type { Bloom128, PeerId } from '@chunkycast/wire';
import { mix32 } from './random.js';

/**
 * Bits set in each node's Bloom mask: 6 of 128 (thesis §4.4, experimental setup, "0.25% false positives after 10 keys").
 */
export const BLOOM_MASK_BITS = 6;

/**
 * A node's Bloom mask, derived from its id alone so any peer can compute any neighbour's mask
 * (a prospective parent checks the requester's mask against its own filter before accepting).
 */
export function bloomMaskFor(id: PeerId): Bloom128 {
  const words = [0, 0, 0, 0];
  let state = id >>> 0;
  let placed = 0;
  while (placed < BLOOM_MASK_BITS) {
    state = mix32(state ^ 0x5bd1e995);
    const bit = state & 127;
    const word = bit >>> 5;
    const flag = 1 << (bit & 31);
    const current = words[word] ?? 0;
    if ((current & flag) === 0) {
      words[word] = (current | flag) >>> 0;
      placed++;
    }
  }
  return [words[0] ?? 0, words[1] ?? 0, words[2] ?? 0, words[3] ?? 0];
}
