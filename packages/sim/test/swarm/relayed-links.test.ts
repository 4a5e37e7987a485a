// Relayed links (not in the thesis): the host tells the engine which of its links go through a TURN
// relay (`linkRoute`), and tree edges prefer direct links — forced requests and flood choices take a
// relayed neighbour only when no direct one qualifies, and the latency phase counts a relayed link
// as `relayedLinkPenaltyMs` of extra arrival — but a relayed link is never refused.
import { describe, expect, it } from 'vitest';
import { type PeerId } from '@chunkycast/wire';
import { createRandom, type ProtocolConfig } from '@chunkycast/engine';
import { deliveryCounts, Network, prelinkedSwarm, randomTargetLoads } from './harness.js';

describe('tree edges in swarms with relayed links', () => {
  interface Outcome {
    /** Member→member tree edges over relayed links ÷ all member→member tree edges. */
    readonly share: number;
    /** (member, packet) pairs of the packets published from 10 s to 25 s not received exactly once. */
    readonly missing: number;
    /** All such pairs. */
    readonly expected: number;
  }

  /**
   * A static swarm whose links are relayed where `relayed(a, b)` says (both ends told), run to 30 s.
   * Checks that every member has a parent on every slice and receives it.
   */
  function run(
    seed: number,
    tls: readonly number[],
    relayed: (a: PeerId, b: PeerId) => boolean,
    protocol: Partial<ProtocolConfig>,
    options: { latency?: number; maxLoad?: (id: PeerId) => number | undefined } = {},
  ): Outcome {
    const net = new Network({ seed, protocol, recordMessages: false, latency: options.latency ?? 50 });
    const ids = prelinkedSwarm(
      net,
      tls,
      options.maxLoad === undefined ? {} : { maxLoadSlices: (id) => options.maxLoad?.(id) },
    );
    for (const a of ids)
      for (const b of ids)
        if (a !== b && relayed(a, b)) net.input(a, { kind: 'linkRoute', peer: b, relayed: true });
    net.publisher(80, 1000);
    net.runUntil(30_000);
    let edges = 0;
    let over = 0;
    let missing = 0;
    let expected = 0;
    for (const id of ids) {
      const e = net.engine(id);
      e.parents().forEach((p, s) => {
        expect(p, `member ${id} slice ${s}`).not.toBeNull();
        expect(e.isReceiving(s), `member ${id} slice ${s}`).toBe(true);
        if (p === null || p === net.sourceId) return;
        edges++;
        if (relayed(id, p)) over++;
      });
      const counts = deliveryCounts(net, id, 16);
      for (let i = (10_000 - 1000) * 0.08; i < (25_000 - 1000) * 0.08; i++) {
        expected++;
        if ((counts[i % 16]!.get(Math.floor(i / 16)) ?? 0) !== 1) missing++;
      }
    }
    return { share: over / edges, missing, expected };
  }

  it('half the members behind symmetric NATs: no relayed tree edge remains (30 s, 24 members)', () => {
    // Between two of members 1–12 every link is relayed; every other link is direct, so every
    // member has direct options.
    const natted = (id: PeerId): boolean => id >= 1 && id <= 12;
    const relayed = (a: PeerId, b: PeerId): boolean => natted(a) && natted(b);
    const tls = randomTargetLoads(24, 12, 24, createRandom(23));
    const on = run(23, tls, relayed, {});
    const off = run(23, tls, relayed, { relayedLinkPenaltyMs: 0 });
    console.info(
      `half behind symmetric NATs: relayed tree edges ${(on.share * 100).toFixed(1)}% with the preference, ${(off.share * 100).toFixed(1)}% without`,
    );
    expect(off.share).toBeGreaterThan(0.15);
    expect(on.share).toBeLessThan(0.02);
    // Moving off relays costs nothing but the odd packet of a transient loop (thesis §4.2, loop avoidance and detection: filters
    // lag a switch), which the latency switches it takes make a little likelier: at most 0.1%.
    expect(on.missing).toBeLessThanOrEqual(on.expected / 1000);
    expect(off.missing).toBeLessThanOrEqual(off.expected / 1000);
  });

  it('the network lab’s `mixed` homes: far fewer relayed tree edges, bounded by the public home’s ULT', () => {
    // tools/src/lab/scenarios.ts: v1–v3 behind port-preserving NATs (v1 and v2 on thin uplinks),
    // v4 and v5 behind symmetric NATs, v6 and v7 on one LAN, v8 public; no delay to speak of. A
    // symmetric-NAT home reaches only the public one directly, so v8 is the sole direct parent of
    // v4 and v5: once it is at its ULT, the rest of their slices must come over relays.
    const symmetric = (id: PeerId): boolean => id === 4 || id === 5;
    const relayed = (a: PeerId, b: PeerId): boolean => (symmetric(a) && b !== 8) || (symmetric(b) && a !== 8);
    const tls = [6, 13, 16, 16, 16, 16, 16, 16];
    const maxLoad = (id: PeerId): number => [8, 16][id - 1] ?? 24;
    const on = run(1, tls, relayed, {}, { latency: 5, maxLoad });
    const off = run(1, tls, relayed, { relayedLinkPenaltyMs: 0 }, { latency: 5, maxLoad });
    console.info(
      `lab 'mixed' homes: relayed tree edges ${(on.share * 100).toFixed(1)}% with the preference, ${(off.share * 100).toFixed(1)}% without`,
    );
    expect(on.share).toBeLessThan(0.7 * off.share);
    expect(on.share).toBeLessThan(0.3);
    expect(on.missing).toBeLessThanOrEqual(on.expected / 1000);
  });
});

describe('a member whose only neighbours are relayed', () => {
  it('gets a parent for every slice and every packet in a swarm (its links and its neighbours’ to it relayed)', () => {
    const net = new Network({ seed: 17 });
    const tls = randomTargetLoads(12, 12, 24, createRandom(17));
    const ids = prelinkedSwarm(net, tls);
    const X = 5;
    // Every link of X is relayed, both ways (a viewer behind a symmetric NAT); the true source's is not.
    for (const id of ids) {
      if (id === X) continue;
      net.input(X, { kind: 'linkRoute', peer: id, relayed: true });
      net.input(id, { kind: 'linkRoute', peer: X, relayed: true });
    }
    net.publisher(80, 1000);
    net.runUntil(20_000);
    const parents = net.engine(X).parents();
    expect(parents.every((p) => p !== null)).toBe(true);
    // Every packet published from 8 s to 18 s (5 per slice per second) reached X exactly once.
    const counts = deliveryCounts(net, X, 16);
    for (let i = (8000 - 1000) * 0.08; i < (18_000 - 1000) * 0.08; i++) {
      const slice = i % 16;
      const seq = Math.floor(i / 16);
      expect(counts[slice]!.get(seq) ?? 0, `slice ${slice} seq ${seq}`).toBe(1);
    }
    // Its parents are its relayed neighbours (or, for a slice it roots, the true source).
    const rooted = new Set(net.engine(X).sliceSourceOf());
    parents.forEach((p, s) => {
      expect(p === net.sourceId).toBe(rooted.has(s));
    });
  });
});
