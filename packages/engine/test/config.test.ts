import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  createRandom,
  DEFAULT_PROTOCOL,
  Engine,
  latencyThresholds,
  linksPerDirection,
  nodeDegree,
  resolveConfig,
  type EngineInit,
  type ProtocolConfig,
} from '../src/index.js';

const LAT2 = 2 / 16;

function member(overrides: Partial<EngineInit> = {}): EngineInit {
  return { id: 7, role: 'member', sourceId: 0, targetLoadSlices: 16, ...overrides };
}

function expectConfigError(init: EngineInit, field: string): void {
  let caught: unknown;
  try {
    resolveConfig(init);
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected a ConfigError naming ${field}`).toBeInstanceOf(ConfigError);
  const error = caught as ConfigError;
  expect(error).toBeInstanceOf(RangeError);
  expect(error.name).toBe('ConfigError');
  expect(error.message).toContain(field);
  // The engine validates through the same function.
  expect(() => new Engine(init, createRandom(1))).toThrow(ConfigError);
}

describe('latencyThresholds (LLT/ULT: thesis §4.2, overview; §4.4, experimental setup)', () => {
  it('Lat2: TL 16 gives 14/18 and TL 4 gives 3/5 (ULT rounded up, LLT down)', () => {
    expect(latencyThresholds(16, LAT2)).toEqual({ lower: 14, upper: 18 });
    expect(latencyThresholds(4, LAT2)).toEqual({ lower: 3, upper: 5 });
    // Non-integer half-widths round outward.
    expect(latencyThresholds(7, LAT2)).toEqual({ lower: 6, upper: 8 });
    expect(latencyThresholds(28, LAT2)).toEqual({ lower: 24, upper: 32 });
    expect(latencyThresholds(24, LAT2)).toEqual({ lower: 21, upper: 27 });
  });

  it('Lat0: LLT = ULT = TL for every TL', () => {
    for (let tl = 1; tl <= 40; tl++) expect(latencyThresholds(tl, 0)).toEqual({ lower: tl, upper: tl });
    // TL 0: Math.ceil(−1e−9) is −0; numerically still 0 (=== compares equal).
    const zero = latencyThresholds(0, 0);
    expect(zero.lower === 0 && zero.upper === 0).toBe(true);
  });

  it('always brackets TL and never goes below 0', () => {
    for (let tl = 0; tl <= 64; tl++) {
      for (const f of [0, 0.05, LAT2, 0.25, 0.5, 1]) {
        const { lower, upper } = latencyThresholds(tl, f);
        expect(lower).toBeGreaterThanOrEqual(0);
        expect(lower).toBeLessThanOrEqual(tl);
        expect(upper).toBeGreaterThanOrEqual(tl);
        expect(Number.isInteger(lower) && Number.isInteger(upper)).toBe(true);
      }
    }
  });
});

describe('nodeDegree = max(MND, TL/MinL·MND) (thesis §4.2, parameters)', () => {
  it('matches the formula, MND being the smallest degree', () => {
    for (let tl = 0; tl <= 40; tl++) {
      expect(nodeDegree(tl, 4, 8)).toBe(Math.max(8, Math.round((tl / 4) * 8)));
    }
    expect(nodeDegree(2, 4, 8)).toBe(8); // TL < MinL gives MND
    expect(nodeDegree(4, 4, 8)).toBe(8);
    expect(nodeDegree(16, 4, 8)).toBe(32); // grows with TL: not min[8, …]
    expect(nodeDegree(28, 4, 8)).toBe(56);
    expect(nodeDegree(10, 5, 12)).toBe(24);
  });

  it('links per direction are half the degree, rounded up', () => {
    expect(linksPerDirection(8)).toBe(4);
    expect(linksPerDirection(9)).toBe(5);
    expect(linksPerDirection(32)).toBe(16);
  });
});

describe('resolveConfig', () => {
  it('applies the thesis defaults', () => {
    const c = resolveConfig(member());
    expect(c.protocol).toEqual(DEFAULT_PROTOCOL);
    expect(c.targetLoad).toBe(16);
    expect(c.maxLoad).toBe(24); // 1.5·TL
    expect(c.lowerLatencyThreshold).toBe(14);
    expect(c.upperLatencyThreshold).toBe(18);
    expect(c.degree).toBe(32);
    expect(c.linksPerDirection).toBe(16);
    expect(DEFAULT_PROTOCOL.slices).toBe(16);
    expect(DEFAULT_PROTOCOL.heartbeatMs).toBe(1000);
    expect(DEFAULT_PROTOCOL.failureTimeoutMs).toBe(4000);
  });

  it('caps ULT at ML and takes the source TL as M', () => {
    const capped = resolveConfig(member({ targetLoadSlices: 16, maxLoadSlices: 16 }));
    expect(capped.upperLatencyThreshold).toBe(16);
    expect(capped.lowerLatencyThreshold).toBe(14);
    const source = resolveConfig({ id: 0, role: 'source', sourceId: 0, targetLoadSlices: 3 });
    expect(source.targetLoad).toBe(16);
    const lat0 = resolveConfig(member({ protocol: { latencyRangeFraction: 0 } }));
    expect([lat0.lowerLatencyThreshold, lat0.upperLatencyThreshold]).toEqual([16, 16]);
  });

  it('rejects bad identity and load values with a ConfigError naming the field', () => {
    expectConfigError(member({ id: -1 }), 'id');
    expectConfigError(member({ id: 1.5 }), 'id');
    expectConfigError(member({ id: 2 ** 32 }), 'id');
    expectConfigError(member({ sourceId: -3 }), 'sourceId');
    expectConfigError(member({ role: 'relay' as unknown as 'member' }), 'role');
    expectConfigError(member({ id: 0 }), 'source id');
    expectConfigError(member({ targetLoadSlices: -1 }), 'targetLoadSlices');
    expectConfigError(member({ targetLoadSlices: 2.5 }), 'targetLoadSlices');
    expectConfigError(member({ targetLoadSlices: Number.NaN }), 'targetLoadSlices');
    expectConfigError(member({ maxLoadSlices: 15 }), 'maxLoadSlices');
    expectConfigError(member({ maxLoadSlices: 20.5 }), 'maxLoadSlices');
  });

  it('rejects bad protocol values with a ConfigError naming the field', () => {
    const bad: [Partial<ProtocolConfig>, string][] = [
      [{ slices: 0 }, 'slices'],
      [{ slices: 65 }, 'slices'],
      [{ slices: 2.5 }, 'slices'],
      [{ minNodeDegree: 0 }, 'minNodeDegree'],
      [{ minLoadSlices: 0 }, 'minLoadSlices'],
      [{ latencyRangeFraction: -0.1 }, 'latencyRangeFraction'],
      [{ latencyRangeFraction: 1.5 }, 'latencyRangeFraction'],
      [{ latencyRangeFraction: Number.NaN }, 'latencyRangeFraction'],
      [{ maxLoadFactor: 0.5 }, 'maxLoadFactor'],
      [{ heartbeatMs: 0 }, 'heartbeatMs'],
      [{ decisionIntervalMs: -5 }, 'decisionIntervalMs'],
      [{ failureTimeoutMs: 1000 }, 'failureTimeoutMs'], // must exceed heartbeatMs
      [{ failureTimeoutMs: 500, heartbeatMs: 600 }, 'failureTimeoutMs'],
      [{ walkLength: 0 }, 'walkLength'],
      [{ walkLength: 65 }, 'walkLength'],
      [{ walkTimeoutMs: 0 }, 'walkTimeoutMs'],
      [{ quitLingerMs: 70_000 }, 'quitLingerMs'],
      [{ latencySwitchMarginMs: -1 }, 'latencySwitchMarginMs'],
      [{ relayedLinkPenaltyMs: -1 }, 'relayedLinkPenaltyMs'],
      [{ offsetSmoothing: 0 }, 'offsetSmoothing'],
      [{ offsetSmoothing: 1.1 }, 'offsetSmoothing'],
      [{ candidateSetSize: 0 }, 'candidateSetSize'],
      [{ switchAbortLoadDelta: -1 }, 'switchAbortLoadDelta'],
      [{ resendWindowPackets: 0 }, 'resendWindowPackets'],
      [{ offsetAdvertStepMs: -1 }, 'offsetAdvertStepMs'],
      [{ maxViolationsPerPeer: 0 }, 'maxViolationsPerPeer'],
      [{ bootstrapPeers: 0 }, 'bootstrapPeers'],
      [{ handoffLeadMs: Number.POSITIVE_INFINITY }, 'handoffLeadMs'],
    ];
    for (const [protocol, field] of bad) expectConfigError(member({ protocol }), field);
  });

  it('accepts boundary values', () => {
    expect(() => resolveConfig(member({ protocol: { slices: 64, latencyRangeFraction: 1 } }))).not.toThrow();
    expect(() => resolveConfig(member({ targetLoadSlices: 0 }))).not.toThrow();
    expect(() => resolveConfig(member({ protocol: { failureTimeoutMs: 1001 } }))).not.toThrow();
  });
});
