/**
 * Seeded pseudo-random numbers. The engine has no ambient randomness: each host gives each engine
 * its own `Random`, derived from one master seed, so a simulation with the same seed replays
 * exactly and a unit test can pin every choice.
 */
export interface Random {
  /** Uniform integer in [0, 2^32). */
  nextU32(): number;
  /** Uniform float in [0, 1). */
  nextFloat(): number;
  /** Uniform integer in [0, bound); bound must be a positive integer ≤ 2^32. */
  int(bound: number): number;
  /** An independent stream, deterministic in (this stream's seed, label). */
  fork(label: number): Random;
}

/** SplitMix32-style finaliser: spreads any 32-bit input over all 32 bits. */
export function mix32(value: number): number {
  let z = (value + 0x9e3779b9) >>> 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
  return (z ^ (z >>> 16)) >>> 0;
}

/**
 * sfc32 (Chris Doty-Humphrey's Small Fast Counting generator): 128 bits of state, passes PractRand,
 * and is a handful of 32-bit integer operations, which matters when 5000 engines draw numbers.
 */
class Sfc32 implements Random {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(private readonly seed: number) {
    this.a = mix32(seed);
    this.b = mix32(this.a ^ 0x1b873593);
    this.c = mix32(this.b ^ 0xcc9e2d51);
    this.d = 1;
    // Discard the first outputs so nearby seeds diverge.
    for (let i = 0; i < 12; i++) this.nextU32();
  }

  nextU32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  nextFloat(): number {
    return this.nextU32() / 4294967296;
  }

  int(bound: number): number {
    if (!(bound >= 1) || bound > 4294967296 || !Number.isInteger(bound)) {
      throw new RangeError(`Random.int bound must be an integer in [1, 2^32], got ${bound}`);
    }
    // Rejection sampling removes modulo bias.
    const limit = 4294967296 - (4294967296 % bound);
    for (;;) {
      const x = this.nextU32();
      if (x < limit) return x % bound;
    }
  }

  fork(label: number): Random {
    return new Sfc32(mix32((this.seed ^ mix32(label >>> 0)) >>> 0));
  }
}

export function createRandom(seed: number): Random {
  return new Sfc32(seed >>> 0);
}

/** Fisher–Yates shuffle in place. */
export function shuffleInPlace<T>(items: T[], random: Random): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = random.int(i + 1);
    const tmp = items[i] as T;
    items[i] = items[j] as T;
    items[j] = tmp;
  }
  return items;
}
