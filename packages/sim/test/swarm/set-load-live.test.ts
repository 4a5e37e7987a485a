// `setLoad` on the member that roots every slice, in a live stream (one packet per slice per 2 s
// segment). In a small swarm the first joiner becomes the slice source of all 16 slices (for good
// with rootSpreadIntervalMs 0, until the true source spreads them otherwise); when its
// host then measures a thin uplink (TL 7, ML 8: the lab's 0.5 Mbit/s home), the load phase alone
// cannot bring it under ML — each rooted slice keeps a child that every other member receives
// through — so it hands back the roots above ULT (shedRoots) and the true source roots them elsewhere.
import { describe, expect, it } from 'vitest';
import type { PeerId } from '@chunkycast/wire';
import type { ProtocolConfig } from '@chunkycast/engine';
import { Network } from './harness.js';

const SLICES = 16;
/** sdk/src/session.ts LIVE_PROTOCOL (copied: the engine's tests may not import the SDK). */
const LIVE_PROTOCOL: Partial<ProtocolConfig> = { receivingTimeoutMs: 5000, probeAfterSilenceMs: 4500 };
const SEGMENT_MS = 2000;

/** Members joining 500 ms apart with the given TLs, a live publisher: 16 packets every segment. */
function liveSwarm(
  seed: number,
  targetLoads: number[],
  protocol: Partial<ProtocolConfig> = {},
): { net: Network; ids: PeerId[] } {
  const net = new Network({ seed, protocol: { ...LIVE_PROTOCOL, ...protocol }, latency: 20 });
  const ids: PeerId[] = [];
  targetLoads.forEach((tl, i) => {
    ids.push(i + 1);
    net.at(i * 500, () => net.join(i + 1, tl));
  });
  net.addSource();
  net.at(100, () => {
    net.start(0);
  });
  let index = 0;
  const burst = (t: number): void => {
    net.at(t, () => {
      for (let k = 0; k < SLICES; k++) {
        const payload = new Uint8Array(4);
        new DataView(payload.buffer).setUint32(0, index++);
        net.input(0, { kind: 'publish', payload });
      }
      burst(t + SEGMENT_MS);
    });
  };
  burst(1000);
  return { net, ids };
}

/** Packets each member received per slice in [fromMs, toMs). */
function receivedPerSlice(net: Network, id: PeerId, fromMs: number, toMs: number): number[] {
  const got = Array.from({ length: SLICES }, () => 0);
  for (const d of net.log(id).deliveries)
    if (d.time >= fromMs && d.time < toMs) got[d.slice] = (got[d.slice] ?? 0) + 1;
  return got;
}

/**
 * Every slice is rooted at some member, and every member received at least 9 of the 10 segments'
 * packets on every slice in [fromMs, toMs).
 */
function expectWholeSwarmServed(net: Network, ids: PeerId[], fromMs: number, toMs: number): void {
  const rooted = new Set<number>();
  for (const id of ids) for (const s of net.engine(id).sliceSourceOf()) rooted.add(s);
  expect(rooted.size).toBe(SLICES);
  for (const id of ids) {
    const got = receivedPerSlice(net, id, fromMs, toMs);
    expect(
      got.every((n) => n >= 9),
      `member ${id}: ${got.join(' ')}`,
    ).toBe(true);
  }
}

describe('setLoad on the root of every slice, live stream', () => {
  for (const seed of [1, 2, 3]) {
    it(`seed ${seed}: load falls under the new ML within 3 s, hands roots back, and nobody misses a slice`, () => {
      // The true source spreads roots as a swarm grows (rootSpreadIntervalMs); off here, so that the
      // first joiner still roots every slice when its uplink shrinks (as it may before the spread).
      const { net, ids } = liveSwarm(seed, [16, 16, 16, 16], { rootSpreadIntervalMs: 0 });
      net.runUntil(20_000);
      const root = net.engine(1);
      expect(root.sliceSourceOf().length).toBe(SLICES);
      expect(root.currentLoad).toBeGreaterThan(8);

      net.input(1, { kind: 'setLoad', targetLoadSlices: 7, maxLoadSlices: 8 });
      const loads: number[] = [];
      for (let k = 1; k <= 30; k++) net.at(20_000 + k * 1000, () => loads.push(root.currentLoad));
      net.runUntil(50_000);

      // Under ML from 3 s on, for good.
      expect(
        loads.slice(2).every((l) => l <= 8),
        `loads ${loads.join(' ')}`,
      ).toBe(true);
      // Roots above ULT went back to the true source, which rooted them at other members.
      expect(root.sliceSourceOf().length).toBeLessThan(SLICES);
      // From 10 s after the change, every member receives every segment's packet on every slice.
      expectWholeSwarmServed(net, ids, 30_000, 50_000);
    });
  }
});

describe('a first joiner with a small ML (slow start) roots every slice', () => {
  for (const seed of [1, 2, 3]) {
    it(`seed ${seed}: it hands back the roots it cannot give a child, and every member gets every slice`, () => {
      // TL 4 / ML 6 (a slow start tried in the lab). It joins first and roots all 16 slices, but can
      // feed only 6 of them; the members after it start at TL 16.
      const { net, ids } = liveSwarm(seed, [4, 16, 16, 16, 16]);
      net.runUntil(40_000);
      const first = net.engine(1);
      expect(first.currentLoad).toBeLessThanOrEqual(6);
      expect(first.sliceSourceOf().length).toBeLessThanOrEqual(6);
      expectWholeSwarmServed(net, ids, 20_000, 40_000);
    });
  }
});
