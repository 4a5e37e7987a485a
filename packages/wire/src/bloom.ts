/**
 * A 128-bit Bloom filter carried in every data packet, probe and flood (thesis §4.4, simulation set-up:
 * "a bloom filter size of 128 bits and a bloom mask size of 6"). Four unsigned 32-bit words, word 0
 * holding bits 0–31. Immutable: every hop makes a new one by OR-ing in its mask.
 */
export type Bloom128 = readonly [number, number, number, number];

/** Filter bits (thesis §4.4). */
export const BLOOM_BITS = 128;

export const EMPTY_BLOOM: Bloom128 = Object.freeze<Bloom128>([0, 0, 0, 0]);

export function bloomOr(a: Bloom128, b: Bloom128): Bloom128 {
  return [(a[0] | b[0]) >>> 0, (a[1] | b[1]) >>> 0, (a[2] | b[2]) >>> 0, (a[3] | b[3]) >>> 0];
}

/** True when every bit of `mask` is set in `filter`: the owner of `mask` is (probably) upstream. */
export function bloomContains(filter: Bloom128, mask: Bloom128): boolean {
  return (
    (filter[0] & mask[0]) >>> 0 === mask[0] &&
    (filter[1] & mask[1]) >>> 0 === mask[1] &&
    (filter[2] & mask[2]) >>> 0 === mask[2] &&
    (filter[3] & mask[3]) >>> 0 === mask[3]
  );
}

export function bloomEquals(a: Bloom128, b: Bloom128): boolean {
  return a[0] === b[0] && a[1] === b[1] && a[2] === b[2] && a[3] === b[3];
}

/** Set bits in one 32-bit word (a filter word, or a packet bitmap). */
export function bitCount32(word: number): number {
  let v = word >>> 0;
  v -= (v >>> 1) & 0x55555555;
  v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
  return (((v + (v >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
}

export function bloomPopCount(filter: Bloom128): number {
  return bitCount32(filter[0]) + bitCount32(filter[1]) + bitCount32(filter[2]) + bitCount32(filter[3]);
}

export function bloomIsEmpty(filter: Bloom128): boolean {
  return filter[0] === 0 && filter[1] === 0 && filter[2] === 0 && filter[3] === 0;
}
