import { describe, expect, it } from 'vitest';
import { MessageType, type PeerId } from '@chunkycast/wire';
import { createRandom, Swaplinks, type Engine } from '@chunkycast/engine';
import { joiningSwarm, Network, prelinkedSwarm, randomTargetLoads } from './harness.js';

function total(links: ReadonlyMap<PeerId, number>): number {
  let sum = 0;
  for (const c of links.values()) sum += c;
  return sum;
}

interface DegreeReport {
  exact: number;
  offenders: string[];
  /** Σ |out − L| + |in − L| */
  deviation: number;
}

/** Compare every live member's out/in degree with its L; `tolerance(L)` is the allowed |deviation|. */
function degreeReport(net: Network, tolerance: (l: number) => number): DegreeReport {
  const report: DegreeReport = { exact: 0, offenders: [], deviation: 0 };
  for (const id of net.members()) {
    const e = net.engine(id);
    const l = e.config.linksPerDirection;
    const out = total(e.outLinks());
    const inn = total(e.inLinks());
    if (out === l && inn === l) report.exact++;
    report.deviation += Math.abs(out - l) + Math.abs(inn - l);
    if (Math.abs(out - l) > tolerance(l) || Math.abs(inn - l) > tolerance(l))
      report.offenders.push(`node ${id}: L=${l} out=${out} in=${inn}`);
  }
  return report;
}

/** Every out-link A→B (with multiplicity) is an in-link at B, and vice versa. */
function linkInconsistencies(net: Network): string[] {
  const bad: string[] = [];
  const live = new Set(net.members());
  for (const a of live) {
    const ea: Engine = net.engine(a);
    for (const [b, count] of ea.outLinks()) {
      const back = live.has(b) ? (net.engine(b).inLinks().get(a) ?? 0) : 0;
      if (back !== count) bad.push(`${a}→${b}: out ${count}, in at ${b}: ${back}`);
    }
    for (const [b, count] of ea.inLinks()) {
      const fwd = live.has(b) ? (net.engine(b).outLinks().get(a) ?? 0) : 0;
      if (fwd !== count) bad.push(`${b}→${a}: in ${count}, out at ${b}: ${fwd}`);
    }
  }
  return bad;
}

function pearson(a: readonly number[], b: readonly number[]): number {
  const n = a.length;
  const ma = a.reduce((x, y) => x + y, 0) / n;
  const mb = b.reduce((x, y) => x + y, 0) / n;
  let sab = 0;
  let saa = 0;
  let sbb = 0;
  for (let i = 0; i < n; i++) {
    const da = a[i]! - ma;
    const db = b[i]! - mb;
    sab += da * db;
    saa += da * da;
    sbb += db * db;
  }
  return sab / Math.sqrt(saa * sbb);
}

describe('Swaplinks joins', () => {
  it('sequential joins by walks give every joiner out = in = L, consistent links, a connected graph', () => {
    // A small pre-linked core (two lone nodes cannot have unequal degrees), then 60 joins, each
    // finished before the next starts.
    const net = new Network({ seed: 21, recordMessages: false });
    const tls = randomTargetLoads(70, 4, 28, createRandom(210));
    prelinkedSwarm(net, tls.slice(0, 10), { withSource: false });
    joiningSwarm(net, tls.slice(10), 500, 1000, 11);
    net.runUntil(1000 + 60 * 500 + 10_000);
    const report = degreeReport(net, () => 1);
    console.info(
      `sequential joins: ${report.exact}/70 nodes exactly at L, total deviation ${report.deviation}`,
    );
    expect(report.offenders).toEqual([]);
    expect(report.exact).toBeGreaterThanOrEqual(67);
    expect(linkInconsistencies(net)).toEqual([]);
    expect(net.connected()).toBe(true);
  });

  it('concurrent joins (thesis join scenario: 50 joins/s into a running swarm) keep degrees near L', () => {
    // 60 members present, 40 join at 50/s (the thesis: 3750 present + 1250 joining at 50/s, §4.4, join scenario).
    const net = new Network({ seed: 22, recordMessages: false });
    const tls = randomTargetLoads(100, 4, 28, createRandom(220));
    prelinkedSwarm(net, tls.slice(0, 60), { withSource: false });
    joiningSwarm(net, tls.slice(60), 20, 1000, 61);
    net.runUntil(20_000);
    const report = degreeReport(net, (l) => Math.max(2, Math.round(0.1 * l)));
    console.info(
      `concurrent joins: ${report.exact}/100 exactly at L, total deviation ${report.deviation}, ` +
        `${report.offenders.length} beyond max(2, 10% L)`,
    );
    expect(linkInconsistencies(net)).toEqual([]);
    expect(net.connected()).toBe(true);
    // Swaplinks keeps |out| = |in| = L; "small deviation" = max(2 links, 10 % of L).
    expect(report.offenders).toEqual([]);
  });

  it('the swap step keeps every existing node at its degree while the joiner gets L each way', () => {
    const net = new Network({ seed: 23 });
    const tls = randomTargetLoads(40, 4, 20, createRandom(230));
    const ids = prelinkedSwarm(net, tls, { withSource: false });
    net.runUntil(2000);
    const before = new Map(
      ids.map((id) => [id, [total(net.engine(id).outLinks()), total(net.engine(id).inLinks())]]),
    );
    for (const id of ids) {
      const l = net.engine(id).config.linksPerDirection;
      expect(before.get(id)).toEqual([l, l]);
    }
    const swapsBefore = ids.reduce((a, id) => a + net.engine(id).swaplinksCounters().swaps, 0);
    const joiner = net.join(500, 12);
    net.runUntil(6000);
    const l = joiner.config.linksPerDirection;
    expect(l).toBe(12);
    expect([total(joiner.outLinks()), total(joiner.inLinks())]).toEqual([l, l]);
    // One walk per link pair, none lost or retried.
    expect(joiner.swaplinksCounters().walksStarted).toBe(l);
    for (const id of ids) {
      expect([total(net.engine(id).outLinks()), total(net.engine(id).inLinks())], `node ${id}`).toEqual(
        before.get(id),
      );
    }
    // Each join walk ended in exactly one swap (a donor re-pointed its link at the joiner).
    const swaps = ids.reduce((a, id) => a + net.engine(id).swaplinksCounters().swaps, 0) - swapsBefore;
    expect(swaps).toBe(l);
    expect(net.sentOf(500, MessageType.Walk).every((w) => w.message.ttl === 6)).toBe(true);
    expect(linkInconsistencies(net)).toEqual([]);
  });
});

describe('Swaplinks failures', () => {
  it('neighbours declare a killed node failed after the 4 s timeout (not before 3 s) and repair to about L', () => {
    const net = new Network({ seed: 24, recordMessages: false });
    const tls = randomTargetLoads(60, 4, 20, createRandom(240));
    const ids = prelinkedSwarm(net, tls, { withSource: false });
    net.runUntil(10_000);
    const victims = ids.filter((_, i) => i % 10 === 3);
    const neighboursOf = new Map(victims.map((v) => [v, net.engine(v).neighbours()]));
    for (const v of victims) net.kill(v);

    net.runUntil(16_000);
    const delays: number[] = [];
    for (const [v, neighbours] of neighboursOf) {
      for (const n of neighbours) {
        if (victims.includes(n)) continue;
        const failed = net
          .events(n, 'neighbourDown')
          .filter((e) => e.event.peer === v && e.event.reason === 'failed');
        expect(failed, `node ${n} should declare ${v} failed exactly once`).toHaveLength(1);
        delays.push(failed[0]!.time - 10_000);
      }
    }
    console.info(
      `failure detection after kill: min ${Math.min(...delays)} ms, max ${Math.max(...delays)} ms over ${delays.length} links`,
    );
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(3000);
    // Last heard ≤ kill time; declared at the first 1 s tick more than 4 s later.
    expect(Math.max(...delays)).toBeLessThanOrEqual(5000 + 100);

    net.runUntil(40_000);
    const report = degreeReport(net, () => 1);
    console.info(
      `30 s after killing 6 of 60: ${report.exact}/54 exactly at L, total deviation ${report.deviation}`,
    );
    expect(report.offenders).toEqual([]);
    expect(report.exact).toBeGreaterThanOrEqual(Math.ceil(0.85 * 54));
    for (const id of net.members()) {
      for (const v of victims) expect(net.engine(id).neighbours()).not.toContain(v);
    }
    expect(linkInconsistencies(net)).toEqual([]);
    expect(net.connected()).toBe(true);
  });
});

describe('Swaplinks sampling', () => {
  it('random walks sample nodes in proportion to their degree (300 nodes, TL 4..28, built by joins)', () => {
    const net = new Network({ seed: 25, recordMessages: false });
    const tls = randomTargetLoads(300, 4, 28, createRandom(250));
    const ids = joiningSwarm(net, tls, 50);
    net.runUntil(25_000);

    // A sampler outside the graph (like the true source, which has no links): each walk starts at a
    // uniformly random member and is forwarded by the members' engines over their out-links.
    const SAMPLER = 1_000_000;
    const counts = new Map<PeerId, number>();
    const sampler = new Swaplinks(
      {
        id: SAMPLER,
        random: createRandom(251),
        send: (to, message) => {
          net.inject(SAMPLER, to, message);
        },
        neighbourAdded: () => undefined,
        neighbourRemoved: () => undefined,
        sampled: (_walkId, peer) => {
          counts.set(peer, (counts.get(peer) ?? 0) + 1);
        },
        needBootstrap: () => undefined,
      },
      0,
      6,
      8000,
    );
    sampler.setBootstrap(ids);
    net.addEndpoint(SAMPLER, (_now, from, message) => {
      if (message.type === MessageType.SampleResult) sampler.onSampleResult(from, message.walkId);
    });
    const WALKS = 30_000;
    for (let k = 0; k < 100; k++) {
      net.at(25_000 + k * 100, () => {
        for (let i = 0; i < WALKS / 100; i++) sampler.sample(net.now);
      });
    }
    net.runUntil(40_000);
    const got = [...counts.values()].reduce((a, b) => a + b, 0);
    expect(got).toBe(WALKS);
    expect(sampler.pendingSamples()).toBe(0);

    const degree = ids.map((id) => total(net.engine(id).outLinks()));
    const configured = ids.map((id) => net.engine(id).config.linksPerDirection);
    const freq = ids.map((id) => counts.get(id) ?? 0);
    // In-degree ≈ out-degree everywhere is what makes walk sampling degree-proportional. Concurrent
    // joins and repair walks leave a node a link off now and then; the proportionality checks below
    // are the real test.
    const unbalanced = ids.filter(
      (id) => Math.abs(total(net.engine(id).inLinks()) - total(net.engine(id).outLinks())) > 2,
    );
    expect(unbalanced.length).toBeLessThanOrEqual(Math.floor(0.05 * ids.length));
    const r = pearson(degree, freq);
    const rConfigured = pearson(configured, freq);
    const degreeSum = degree.reduce((a, b) => a + b, 0);
    let chi2 = 0;
    degree.forEach((d, i) => {
      const expected = (WALKS * d) / degreeSum;
      chi2 += (freq[i]! - expected) ** 2 / expected;
    });
    const chi2PerDof = chi2 / (ids.length - 1);
    // Share of samples / share of degree, per TL bucket: 1 means exactly proportional.
    const buckets: [number, number][] = [
      [4, 9],
      [10, 15],
      [16, 21],
      [22, 28],
    ];
    const ratios = buckets.map(([lo, hi]) => {
      let f = 0;
      let d = 0;
      ids.forEach((_, i) => {
        if (tls[i]! >= lo && tls[i]! <= hi) {
          f += freq[i]!;
          d += degree[i]!;
        }
      });
      return f / WALKS / (d / degreeSum);
    });
    console.info(
      `sampling: r(freq, degree) = ${r.toFixed(3)}, r(freq, configured L) = ${rConfigured.toFixed(3)}, ` +
        `chi2/dof = ${chi2PerDof.toFixed(2)}, bucket ratios ${ratios.map((x) => x.toFixed(3)).join(' ')}`,
    );
    expect(r).toBeGreaterThan(0.9);
    // Poisson noise alone gives chi2/dof ≈ 1; a uniform sampler would give ≫ 10 here.
    expect(chi2PerDof).toBeLessThan(1.5);
    for (const ratio of ratios) expect(Math.abs(ratio - 1)).toBeLessThan(0.1);
    // Not uniform: the top bucket's nodes are sampled far more often than the bottom bucket's.
    const meanFreq = (lo: number, hi: number): number => {
      const sel = freq.filter((_, i) => tls[i]! >= lo && tls[i]! <= hi);
      return sel.reduce((a, b) => a + b, 0) / sel.length;
    };
    expect(meanFreq(22, 28) / meanFreq(4, 9)).toBeGreaterThan(2.5);
  });
});
