import { describe, expect, it } from 'vitest';
import { createRandom } from '@chunkycast/engine';
import {
  BernoulliLinks,
  GilbertElliottLinks,
  solveGilbertElliott,
  type GilbertElliottParams,
  type LinkLossModel,
} from '../src/net/loss.js';

/** A few directed links, including both directions of one pair and ids near the top of uint32. */
const LINKS: readonly (readonly [number, number])[] = [
  [0, 1],
  [1, 0],
  [7, 4999],
  [4999, 7],
  [0xfffffffe, 0xffffffff],
];
const PACKETS_PER_LINK = 200_000;

/** Sends packets round-robin over `links`; returns each link's loss sequence. */
function run(
  model: LinkLossModel,
  links: readonly (readonly [number, number])[],
  perLink: number,
): boolean[][] {
  const sequences = links.map((): boolean[] => []);
  for (let k = 0; k < perLink; k++) {
    links.forEach(([from, to], i) => sequences[i]!.push(model.lost(from, to)));
  }
  return sequences;
}

/** Lengths of the maximal runs of consecutive losses in one link's sequence. */
function lossRuns(sequence: readonly boolean[]): number[] {
  const runs: number[] = [];
  let current = 0;
  for (const lost of sequence) {
    if (lost) {
      current++;
    } else if (current > 0) {
      runs.push(current);
      current = 0;
    }
  }
  if (current > 0) runs.push(current);
  return runs;
}

function countLosses(sequences: readonly (readonly boolean[])[]): number {
  return sequences.reduce((sum, s) => sum + s.filter(Boolean).length, 0);
}

describe('Gilbert–Elliott link loss', () => {
  it('solves p and r so that the stationary loss is meanLoss', () => {
    const chain = solveGilbertElliott({ meanLoss: 0.02, meanBurstPackets: 4 });
    expect(chain.badToGood).toBe(0.25);
    expect(chain.stationaryBad).toBeCloseTo(0.02, 12);
    expect(chain.goodToBad).toBeCloseTo((0.25 * 0.02) / 0.98, 12);
    expect(chain.stationaryLoss).toBeCloseTo(0.02, 12);

    const mixed = solveGilbertElliott({
      meanLoss: 0.05,
      meanBurstPackets: 3,
      lossInBad: 0.5,
      lossInGood: 0.01,
    });
    expect(mixed.stationaryBad).toBeCloseTo(0.04 / 0.49, 12);
    expect(mixed.stationaryLoss).toBeCloseTo(0.05, 12);
    const links = new GilbertElliottLinks(
      { meanLoss: 0.05, meanBurstPackets: 3, lossInBad: 0.5, lossInGood: 0.01 },
      createRandom(1),
    );
    expect(links.stationaryLoss).toBeCloseTo(0.05, 12);
  });

  it.each([0.01, 0.02, 0.05])('empirical loss is within ±10%% of meanLoss %s', (meanLoss) => {
    const model = new GilbertElliottLinks({ meanLoss, meanBurstPackets: 4 }, createRandom(42));
    const sequences = run(model, LINKS, PACKETS_PER_LINK);
    const rate = model.losses / model.packets;
    expect(model.packets).toBe(LINKS.length * PACKETS_PER_LINK);
    expect(model.losses).toBe(countLosses(sequences));
    expect(model.links).toBe(LINKS.length);
    expect(rate).toBeGreaterThan(meanLoss * 0.9);
    expect(rate).toBeLessThan(meanLoss * 1.1);
  });

  it('keeps the long-run loss with lossy Good and partly lossy Bad states', () => {
    const params = { meanLoss: 0.03, meanBurstPackets: 6, lossInBad: 0.6, lossInGood: 0.005 };
    const model = new GilbertElliottLinks(params, createRandom(9));
    run(model, LINKS, PACKETS_PER_LINK);
    const rate = model.losses / model.packets;
    expect(rate).toBeGreaterThan(0.03 * 0.9);
    expect(rate).toBeLessThan(0.03 * 1.1);
  });

  it.each([
    [0.02, 1],
    [0.02, 4],
    [0.05, 4],
    [0.01, 8],
  ])('with lossInBad = 1, loss %s has bursts of mean ≈ %s packets', (meanLoss, meanBurstPackets) => {
    const model = new GilbertElliottLinks({ meanLoss, meanBurstPackets }, createRandom(7));
    const runs = run(model, LINKS, PACKETS_PER_LINK).flatMap(lossRuns);
    const meanRun = runs.reduce((a, b) => a + b, 0) / runs.length;
    expect(runs.length).toBeGreaterThan(1000);
    expect(meanRun).toBeGreaterThan(meanBurstPackets * 0.85);
    expect(meanRun).toBeLessThan(meanBurstPackets * 1.15);
  });

  it('is burstier than Bernoulli loss at the same rate', () => {
    const bursty = run(
      new GilbertElliottLinks({ meanLoss: 0.05, meanBurstPackets: 4 }, createRandom(3)),
      LINKS,
      50_000,
    ).flatMap(lossRuns);
    const independent = run(new BernoulliLinks(0.05, createRandom(3)), LINKS, 50_000).flatMap(lossRuns);
    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    expect(mean(independent)).toBeLessThan(1.1);
    expect(mean(bursty)).toBeGreaterThan(3);
  });

  it('replays the same loss sequence from the same seed, and another from another seed', () => {
    const params: GilbertElliottParams = { meanLoss: 0.05, meanBurstPackets: 4 };
    const a = run(new GilbertElliottLinks(params, createRandom(1234)), LINKS, 20_000);
    const b = run(new GilbertElliottLinks(params, createRandom(1234)), LINKS, 20_000);
    const c = run(new GilbertElliottLinks(params, createRandom(1235)), LINKS, 20_000);
    expect(b).toEqual(a);
    expect(c).not.toEqual(a);
  });

  it('gives each directed link its own chain', () => {
    // Both directions of a pair and a fresh link start in their own stationary draws and evolve apart.
    const model = new GilbertElliottLinks({ meanLoss: 0.05, meanBurstPackets: 4 }, createRandom(5));
    const [ab, ba] = run(
      model,
      [
        [10, 20],
        [20, 10],
      ],
      20_000,
    );
    expect(ab).not.toEqual(ba);
    expect(model.links).toBe(2);
    model.lost(10, 20);
    expect(model.links).toBe(2);
    model.lost(20, 30);
    expect(model.links).toBe(3);
  });

  it('never loses with meanLoss 0', () => {
    const model = new GilbertElliottLinks({ meanLoss: 0, meanBurstPackets: 4 }, createRandom(1));
    run(model, LINKS, 10_000);
    expect(model.losses).toBe(0);
    expect(model.packets).toBe(LINKS.length * 10_000);
    expect(model.stationaryLoss).toBe(0);
  });

  it('rejects invalid parameters and link ids', () => {
    const random = createRandom(1);
    const make = (params: GilbertElliottParams) => () => new GilbertElliottLinks(params, random);
    expect(make({ meanLoss: -0.01, meanBurstPackets: 4 })).toThrow(/meanLoss must be in/);
    expect(make({ meanLoss: 1, meanBurstPackets: 4 })).toThrow(/meanLoss must be in/);
    expect(make({ meanLoss: Number.NaN, meanBurstPackets: 4 })).toThrow(/meanLoss must be in/);
    expect(make({ meanLoss: 0.6, meanBurstPackets: 4, lossInBad: 0.5 })).toThrow(/meanLoss must be in/);
    expect(make({ meanLoss: 0.01, meanBurstPackets: 4, lossInGood: 0.02 })).toThrow(/meanLoss must be in/);
    expect(make({ meanLoss: 0.01, meanBurstPackets: 0.5 })).toThrow(/meanBurstPackets must be/);
    expect(make({ meanLoss: 0.01, meanBurstPackets: Number.POSITIVE_INFINITY })).toThrow(
      /meanBurstPackets must be/,
    );
    expect(make({ meanLoss: 0.01, meanBurstPackets: 4, lossInBad: 1.5 })).toThrow(/lossInBad must be in/);
    expect(make({ meanLoss: 0.01, meanBurstPackets: 4, lossInGood: -1 })).toThrow(/lossInGood must be in/);
    expect(make({ meanLoss: 0.1, meanBurstPackets: 4, lossInBad: 0.2, lossInGood: 0.2 })).toThrow(
      /lossInGood \(0\.2\) must be below lossInBad/,
    );
    // π_B = 0.6 needs p = r·0.6/0.4 = 1.5 when bursts last one packet.
    expect(make({ meanLoss: 0.6, meanBurstPackets: 1 })).toThrow(/unreachable.*at most 0\.5/);
    expect(make({ meanLoss: 0.5, meanBurstPackets: 1 })).not.toThrow();
    expect(make({ meanLoss: 0.01, meanBurstPackets: 4 })).not.toThrow(RangeError);

    const model = new GilbertElliottLinks({ meanLoss: 0.01, meanBurstPackets: 4 }, random);
    expect(() => model.lost(-1, 2)).toThrow(RangeError);
    expect(() => model.lost(1, 2 ** 32)).toThrow(RangeError);
    expect(() => model.lost(1.5, 2)).toThrow(RangeError);
    expect(model.packets).toBe(0);
  });
});

describe('Bernoulli link loss', () => {
  it('loses independently at the given rate', () => {
    for (const rate of [0.01, 0.05]) {
      const model = new BernoulliLinks(rate, createRandom(11));
      const sequences = run(model, LINKS, PACKETS_PER_LINK);
      expect(model.losses).toBe(countLosses(sequences));
      expect(model.losses / model.packets).toBeGreaterThan(rate * 0.95);
      expect(model.losses / model.packets).toBeLessThan(rate * 1.05);
    }
  });

  it('handles the certain rates and rejects bad ones', () => {
    const never = new BernoulliLinks(0, createRandom(1));
    const always = new BernoulliLinks(1, createRandom(1));
    run(never, LINKS, 1000);
    run(always, LINKS, 1000);
    expect(never.losses).toBe(0);
    expect(always.losses).toBe(always.packets);
    expect(() => new BernoulliLinks(-0.1, createRandom(1))).toThrow(/lossRate must be in \[0, 1\]/);
    expect(() => new BernoulliLinks(Number.NaN, createRandom(1))).toThrow(RangeError);
  });

  it('replays the same sequence from the same seed', () => {
    const a = run(new BernoulliLinks(0.02, createRandom(99)), LINKS, 10_000);
    const b = run(new BernoulliLinks(0.02, createRandom(99)), LINKS, 10_000);
    expect(b).toEqual(a);
  });
});
