/**
 * Packet loss on simulated directed links.
 *
 * Real Internet loss comes in bursts: a congested queue drops several packets in a row, then none
 * for a long while. Independent (Bernoulli) loss at the same rate spreads the drops out and so
 * flatters any scheme that recovers one lost packet cheaply but not a run of them. The
 * Gilbert–Elliott model (Gilbert 1960, Elliott 1963) captures bursts with a two-state Markov chain
 * per link, a Good state and a Bad state, each with its own loss probability:
 *
 *   p = P(Good → Bad), r = P(Bad → Good), stepped once per packet
 *   a Bad run lasts Geometric(r) packets, mean 1/r   ⇒   r = 1 / meanBurstPackets
 *   stationary share of Bad:  π_B = p / (p + r)
 *   long-run loss:            loss = π_B · lossInBad + (1 − π_B) · lossInGood
 *
 * Given the long-run loss the caller wants, solve for π_B and then p:
 *
 *   π_B = (meanLoss − lossInGood) / (lossInBad − lossInGood)
 *   p   = r · π_B / (1 − π_B)
 *
 * which needs p ≤ 1, i.e. π_B ≤ meanBurstPackets / (meanBurstPackets + 1). With the defaults
 * lossInBad = 1 and lossInGood = 0 (Gilbert's original model) every packet in a Bad run is lost and
 * none outside, so runs of consecutive losses are exactly the Bad runs, of mean meanBurstPackets.
 */
import type { Random } from '@chunkycast/engine';

/** What the simulator asks of a loss model: one decision per packet sent on a directed link. */
export type LinkLossModel = {
  /** Whether the next packet sent from `from` to `to` (uint32 ids) is lost. */
  lost(from: number, to: number): boolean;
  /** Packets decided so far, over all links. */
  readonly packets: number;
  /** Packets lost so far, over all links. */
  readonly losses: number;
};

export interface GilbertElliottParams {
  /** Long-run fraction of packets lost, in [lossInGood, lossInBad), e.g. 0.01. */
  readonly meanLoss: number;
  /** Mean length of a Bad-state run, in packets, ≥ 1. 4 is a reasonable default. */
  readonly meanBurstPackets: number;
  /** Loss probability in the Bad state, in (0, 1]. Default 1 (pure Gilbert). */
  readonly lossInBad?: number;
  /** Loss probability in the Good state, in [0, lossInBad). Default 0. */
  readonly lossInGood?: number;
}

/** The chain solved from `GilbertElliottParams`. */
export interface GilbertElliottChain {
  /** P(Good → Bad) per packet. */
  readonly goodToBad: number;
  /** P(Bad → Good) per packet. */
  readonly badToGood: number;
  readonly lossInBad: number;
  readonly lossInGood: number;
  /** Stationary probability of the Bad state, π_B. */
  readonly stationaryBad: number;
  /** Long-run loss rate of the chain; equals the requested meanLoss up to rounding. */
  readonly stationaryLoss: number;
}

function checkProbability(name: string, value: number): void {
  if (!(value >= 0 && value <= 1)) throw new RangeError(`${name} must be in [0, 1], got ${value}`);
}

/** Solves p and r from the requested long-run loss and burst length (formula in the file comment). */
export function solveGilbertElliott(params: GilbertElliottParams): GilbertElliottChain {
  const { meanLoss, meanBurstPackets } = params;
  const lossInBad = params.lossInBad ?? 1;
  const lossInGood = params.lossInGood ?? 0;
  checkProbability('lossInBad', lossInBad);
  checkProbability('lossInGood', lossInGood);
  if (!(lossInGood < lossInBad)) {
    throw new RangeError(`lossInGood (${lossInGood}) must be below lossInBad (${lossInBad})`);
  }
  if (!(meanLoss >= lossInGood && meanLoss < lossInBad)) {
    throw new RangeError(
      `meanLoss must be in [lossInGood, lossInBad) = [${lossInGood}, ${lossInBad}), got ${meanLoss}`,
    );
  }
  if (!(meanBurstPackets >= 1 && Number.isFinite(meanBurstPackets))) {
    throw new RangeError(`meanBurstPackets must be a finite number ≥ 1, got ${meanBurstPackets}`);
  }
  const badToGood = 1 / meanBurstPackets;
  const stationaryBad = (meanLoss - lossInGood) / (lossInBad - lossInGood);
  const goodToBad = (badToGood * stationaryBad) / (1 - stationaryBad);
  if (goodToBad > 1) {
    // Even entering Bad after every Good packet cannot keep the chain in Bad this often.
    const maxBad = meanBurstPackets / (meanBurstPackets + 1);
    const maxLoss = maxBad * lossInBad + (1 - maxBad) * lossInGood;
    throw new RangeError(
      `meanLoss ${meanLoss} is unreachable with meanBurstPackets ${meanBurstPackets}: ` +
        `at most ${maxLoss} (raise meanBurstPackets or lower meanLoss)`,
    );
  }
  return {
    goodToBad,
    badToGood,
    lossInBad,
    lossInGood,
    stationaryBad,
    stationaryLoss: stationaryBad * lossInBad + (1 - stationaryBad) * lossInGood,
  };
}

function checkLink(from: number, to: number): void {
  if (!(from >= 0 && from <= 0xffffffff && Number.isInteger(from))) {
    throw new RangeError(`link ids are uint32, got from = ${from}`);
  }
  if (!(to >= 0 && to <= 0xffffffff && Number.isInteger(to))) {
    throw new RangeError(`link ids are uint32, got to = ${to}`);
  }
}

const GOOD = 0;
const BAD = 1;

/**
 * One independent Gilbert–Elliott chain per directed link (from, to), created on the link's first
 * packet with its state drawn from the stationary distribution, so a new link is no luckier than an
 * old one.
 *
 * The chain steps once per packet sent on the link, not once per unit of time: the classic model is
 * a per-packet loss process, so the burst length and loss rate the caller asks for hold in packets
 * whatever the send rate, and an idle link costs nothing.
 *
 * Memory: a link is one entry (its state, 0 or 1) in its sender's Map. Keys and values are small
 * integers for ids below 2^31, which V8 stores unboxed; 100k links (5000 senders × 20) measured
 * about 7 MB. One flat Map keyed by `from · 2^32 + to` would collide for ids above 2^21 (the key
 * passes 2^53) and would box every key as a heap number.
 *
 * All draws come from the one `random` given, in call order, so the loss pattern is a deterministic
 * function of the seed and of the order of `lost` calls (which the simulator fixes). Pass a stream of
 * its own (e.g. `random.fork(label)`) so that other users of the stream do not shift it.
 */
export class GilbertElliottLinks implements LinkLossModel {
  /** Derived long-run loss rate. */
  readonly stationaryLoss: number;
  readonly chain: GilbertElliottChain;
  private readonly random: Random;
  /** from → (to → GOOD | BAD), the state the link's next packet sees. */
  private readonly states = new Map<number, Map<number, number>>();
  private linkCount = 0;
  private packetCount = 0;
  private lossCount = 0;

  constructor(params: GilbertElliottParams, random: Random) {
    this.chain = solveGilbertElliott(params);
    this.stationaryLoss = this.chain.stationaryLoss;
    this.random = random;
  }

  get packets(): number {
    return this.packetCount;
  }

  get losses(): number {
    return this.lossCount;
  }

  /** Directed links that have carried at least one packet. */
  get links(): number {
    return this.linkCount;
  }

  lost(from: number, to: number): boolean {
    checkLink(from, to);
    const chain = this.chain;
    let row = this.states.get(from);
    if (row === undefined) {
      row = new Map();
      this.states.set(from, row);
    }
    let state = row.get(to);
    if (state === undefined) {
      state = this.draw(chain.stationaryBad) ? BAD : GOOD;
      this.linkCount++;
    }
    // The packet sees the current state, then the chain steps for the next one.
    let lost: boolean;
    if (state === BAD) {
      lost = this.draw(chain.lossInBad);
      if (this.draw(chain.badToGood)) state = GOOD;
    } else {
      lost = this.draw(chain.lossInGood);
      if (this.draw(chain.goodToBad)) state = BAD;
    }
    row.set(to, state);
    this.packetCount++;
    if (lost) this.lossCount++;
    return lost;
  }

  /** True with `probability`; certain outcomes use no draw, which keeps pure Gilbert cheap. */
  private draw(probability: number): boolean {
    if (probability <= 0) return false;
    if (probability >= 1) return true;
    return this.random.nextFloat() < probability;
  }
}

/**
 * Independent loss: every packet on every link is lost with probability `lossRate`, whatever came
 * before. The memoryless baseline to compare Gilbert–Elliott against; it keeps no per-link state.
 */
export class BernoulliLinks implements LinkLossModel {
  readonly stationaryLoss: number;
  private readonly random: Random;
  private packetCount = 0;
  private lossCount = 0;

  constructor(lossRate: number, random: Random) {
    checkProbability('lossRate', lossRate);
    this.stationaryLoss = lossRate;
    this.random = random;
  }

  get packets(): number {
    return this.packetCount;
  }

  get losses(): number {
    return this.lossCount;
  }

  lost(from: number, to: number): boolean {
    checkLink(from, to);
    const rate = this.stationaryLoss;
    // Certain outcomes use no draw, matching GilbertElliottLinks.
    const lost = rate <= 0 ? false : rate >= 1 ? true : this.random.nextFloat() < rate;
    this.packetCount++;
    if (lost) this.lossCount++;
    return lost;
  }
}
