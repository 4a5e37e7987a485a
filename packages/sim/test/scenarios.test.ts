import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_RUN, NOT_RECEIVED, runScenario, type RunOptions, type RunOutput } from '../src/index.js';

/**
 * Small seeded scenarios that run in `npm test` and assert the properties the protocol promises:
 * no loops, every member receives every slice, loads settle into LLT–ULT, nothing is lost or
 * doubled across switches, joiners start quickly and a failure burst is repaired.
 */
function run(overrides: Partial<RunOptions> & Pick<RunOptions, 'scenario'>): RunOutput {
  return runScenario({ ...DEFAULT_RUN, packetsPerSlicePerSecond: 1, ...overrides });
}

const SOURCE = 0;
/** A member without a parent this soon after losing it is still recovering (see treeProblems). */
const RECOVERING_MS = 10_000;

/** For every surviving member and slice, follow parents up to the true source. */
function treeProblems(out: RunOutput): string[] {
  const problems: string[] = [];
  const engines = new Map<number, NonNullable<RunOutput['result']['members'][number]['engine']>>();
  for (const m of out.result.members)
    if (m.leftAt === Infinity && m.engine !== null) engines.set(m.id, m.engine);
  const parents = new Map<number, (number | null)[]>();
  const lostParentAt = new Map(out.result.members.map((m) => [m.id, m.parentLostAt]));
  for (const [id, engine] of engines) parents.set(id, engine.parents());
  for (const [id] of engines) {
    for (let s = 0; s < 16; s++) {
      let node = id;
      const seen = new Set<number>([id]);
      for (;;) {
        const parent = parents.get(node)?.[s] ?? null;
        if (parent === SOURCE) break;
        // A slice that lost its parent moments ago is recovering (thesis: ~5 s at the 90th
        // percentile after a failure), not broken; a snapshot must not call it a broken tree.
        const lostAt = lostParentAt.get(node)?.[s] ?? Number.NaN;
        if (parent === null && out.result.simMs - lostAt <= RECOVERING_MS) break;
        if (parent === null) {
          problems.push(
            `member ${id} slice ${s}: ${node === id ? 'no parent' : `ancestor ${node} has no parent`}`,
          );
          break;
        }
        if (seen.has(parent)) {
          problems.push(`member ${id} slice ${s}: loop through ${parent}`);
          break;
        }
        if (!engines.has(parent)) {
          problems.push(`member ${id} slice ${s}: ancestor ${parent} is gone`);
          break;
        }
        seen.add(parent);
        node = parent;
      }
    }
  }
  return problems;
}

/**
 * Members that got no packet of some slice in the run's last 10 s. (A load switch can stall a
 * subtree for a few seconds, so "a packet this very second" would flake; 10 s cannot.)
 */
function notReceiving(out: RunOutput): string[] {
  const missing: string[] = [];
  const end = out.result.simMs;
  for (const m of out.result.members) {
    if (m.leftAt !== Infinity || m.engine === null) continue;
    for (let s = 0; s < 16; s++) {
      const times = out.result.emitTimes[s];
      // The log is indexed from the member's baseSeq (MemberRecord.delays), not from its first packet.
      const base = m.firstSeq[s] === -1 ? -1 : m.baseSeq;
      const log = m.delays[s];
      let recent = false;
      if (times !== undefined && log !== undefined && base >= 0) {
        for (let i = 0; i < log.length && !recent; i++) {
          const delay = log[i] ?? NOT_RECEIVED;
          if (delay !== NOT_RECEIVED && (times[base + i] ?? 0) + delay >= end - 10_000) recent = true;
        }
      }
      if (!recent) missing.push(`member ${m.id} slice ${s}`);
    }
  }
  return missing;
}

function overMaxLoad(out: RunOutput): string[] {
  return out.result.members
    .filter((m) => m.leftAt === Infinity && m.finalLoad > m.maxLoad)
    .map((m) => `member ${m.id}: load ${m.finalLoad} > ML ${m.maxLoad}`);
}

describe('static scenario, 300 members', () => {
  let lat2: RunOutput;
  beforeAll(() => {
    lat2 = run({ scenario: 'static', nodes: 300, durationS: 60, seed: 11, lat: 2 });
  });

  it('forms 16 loop-free trees that reach every member', () => {
    expect(treeProblems(lat2)).toEqual([]);
    expect(notReceiving(lat2)).toEqual([]);
    expect(lat2.summary.startup.neverCompletedFraction).toBe(0);
  });

  it('Lat2: loads settle into LLT–ULT and never exceed ML', () => {
    expect(overMaxLoad(lat2)).toEqual([]);
    expect(lat2.summary.load.withinRangeFraction).toBeGreaterThanOrEqual(0.8);
    expect(lat2.summary.load.within25PctFraction).toBeGreaterThanOrEqual(0.9);
  });

  it('delivers the stream with nothing doubled and no codec or protocol errors', () => {
    expect(lat2.summary.delivery.packetsDeliveredFraction).toBeGreaterThanOrEqual(0.995);
    expect(lat2.summary.delivery.duplicateFraction).toBeLessThan(0.005);
    expect(lat2.summary.health.decodeErrors).toBe(0);
    expect(lat2.summary.health.protocolViolations).toBe(0);
    expect(lat2.summary.hops.p90Max).toBeLessThanOrEqual(8);
  });

  it('Lat0: most members end exactly at TL, hardly any above it', () => {
    const lat0 = run({ scenario: 'static', nodes: 300, durationS: 60, seed: 12, lat: 0 });
    expect(treeProblems(lat0)).toEqual([]);
    expect(notReceiving(lat0)).toEqual([]);
    expect(lat0.summary.load.atTargetFraction).toBeGreaterThanOrEqual(0.8);
    // A forced request (join, loop, lost parent) may push a parent past ULT = TL (thesis §4.2, initial tree construction and forced parent selection); the load
    // phase pulls it back, so at any moment only a few are above.
    expect(lat0.result.members.filter((m) => m.finalLoad > m.targetLoad).length).toBeLessThanOrEqual(6);
    expect(lat0.summary.overhead.switchesPerNodeTotal.latency).toBe(0);
  });
});

describe('join, burst and churn scenarios (small)', () => {
  it('join: 100 members joining at 50/s all get the full stream, 90% within 10 s', () => {
    const out = run({ scenario: 'join', nodes: 400, durationS: 60, seed: 13 });
    expect(treeProblems(out)).toEqual([]);
    expect(notReceiving(out)).toEqual([]);
    expect(out.summary.startup.neverCompletedFraction).toBe(0);
    expect(out.summary.startup.p90Seconds).toBeLessThanOrEqual(10);
  });

  it('burst10: after 10% fail at once, survivors are repaired and receive everything again', () => {
    const out = run({ scenario: 'burst10', nodes: 300, durationS: 70, seed: 14 });
    const recovery = out.summary.recovery;
    expect(recovery).not.toBeNull();
    expect(recovery?.failedMembers).toBe(30);
    expect(treeProblems(out)).toEqual([]);
    expect(notReceiving(out)).toEqual([]);
    expect(recovery?.p90Seconds ?? Infinity).toBeLessThanOrEqual(10);
  });

  it('churn: with members failing and joining, the survivors at the end receive every slice', () => {
    const out = run({ scenario: 'churn', nodes: 200, durationS: 150, seed: 15 });
    const left = out.result.members.filter((m) => m.leftAt !== Infinity).length;
    expect(left).toBeGreaterThan(0);
    expect(out.result.members.length).toBeGreaterThan(200);
    expect(treeProblems(out)).toEqual([]);
    expect(notReceiving(out)).toEqual([]);
  });
});

describe('a swarm that grows viewer by viewer (issue 16, root spread)', () => {
  it('grow: the first viewer roots every slice, and by 16 members the roots are spread; every member gets every slice', () => {
    const out = run({ scenario: 'grow', nodes: 16, seed: 1 });
    const bySize = new Map(out.summary.roots.bySize.map((r) => [r.members, r]));
    expect(bySize.get(1)).toMatchObject({ distinctRoots: 1, maxSlicesPerRoot: 16 });
    expect(bySize.get(4)?.distinctRoots).toBeGreaterThan(1);
    // Within one of even: a member that handed a root back is not asked again for 30 s.
    expect(bySize.get(16)?.distinctRoots).toBeGreaterThanOrEqual(14);
    expect(bySize.get(16)?.maxSlicesPerRoot).toBeLessThanOrEqual(2);
    expect(out.summary.roots.moves).toBeGreaterThanOrEqual(15);
    expect(treeProblems(out)).toEqual([]);
    expect(notReceiving(out)).toEqual([]);
    expect(out.summary.playback.missed).toBe(0);
  });

  it('grow with rootSpreadIntervalMs 0: the first viewer keeps its roots', () => {
    const out = run({ scenario: 'grow', nodes: 16, seed: 1, protocol: { rootSpreadIntervalMs: 0 } });
    expect(out.summary.roots.moves).toBe(0);
    expect(out.summary.roots.bySize.find((r) => r.members === 16)?.maxSlicesPerRoot).toBeGreaterThan(8);
  });
});

describe('a latency phase that ends (issue 16, latencyPhaseEnds)', () => {
  it('static, 150 members, thesis model: the load phase stops answering the latency phase; every member in range, every slice flowing', () => {
    // Without the option (the thesis's rules) load switches go on to the end here (207 in the last
    // 20 s at seed 1): latency switches fill parents past their TL and the load phase empties them.
    const out = run({
      scenario: 'static',
      nodes: 150,
      seed: 1,
      durationS: 60,
      uplinkHeadroom: 0,
      protocol: { repairHelpers: 0, latencyPhaseEnds: 1 },
    });
    const lateLoadSwitches = out.result.samples
      .filter((sample) => sample.t >= 40_000)
      .reduce((sum, sample) => sum + sample.optimisingSwitches - sample.latencySwitches, 0);
    expect(lateLoadSwitches).toBe(0);
    expect(out.summary.convergence.lastLoadSwitchSeconds ?? Infinity).toBeLessThan(40);
    expect(out.summary.load.withinRangeFraction).toBe(1);
    expect(treeProblems(out)).toEqual([]);
    expect(notReceiving(out)).toEqual([]);
  });
});

describe('determinism', () => {
  it('the same seed gives the same numbers; another seed does not', () => {
    const strip = (out: RunOutput): unknown => ({ ...out.summary, wallSeconds: 0 });
    const a = run({ scenario: 'static', nodes: 120, durationS: 20, seed: 5 });
    const b = run({ scenario: 'static', nodes: 120, durationS: 20, seed: 5 });
    const c = run({ scenario: 'static', nodes: 120, durationS: 20, seed: 6 });
    expect(strip(a)).toStrictEqual(strip(b));
    expect(a.result.events).toBe(b.result.events);
    expect(strip(a)).not.toStrictEqual(strip(c));
  });
});

describe('repair, parity and the origin under link loss (issue 4)', () => {
  const lossy = {
    scenario: 'static',
    nodes: 150,
    durationS: 45,
    seed: 21,
    uplinkHeadroom: 0,
    dataLoss: 0.05,
  } as const;
  const sumOfPaths = (out: RunOutput): number => {
    const p = out.summary.playback;
    return p.tree + p.repair + p.parity + p.origin + p.missed;
  };

  it('without repair, 5% bursty loss makes members miss deadlines', () => {
    const out = run({ ...lossy, protocol: { repairHelpers: 0 } });
    const p = out.summary.playback;
    expect(p.packets).toBeGreaterThan(10_000);
    expect(sumOfPaths(out)).toBe(p.packets);
    expect(p.repair + p.origin + p.parity).toBe(0);
    expect(p.missed / p.packets).toBeGreaterThan(0.01);
  });

  it('with repair, ≥ 99.9% of packets are on time, most filled by neighbours, little from the origin', () => {
    const out = run(lossy);
    const p = out.summary.playback;
    expect(sumOfPaths(out)).toBe(p.packets);
    expect(p.missed / p.packets).toBeLessThanOrEqual(0.001);
    expect(p.repair).toBeGreaterThan(p.origin);
    expect(out.summary.origin.shareOfAudienceBytes).toBeLessThan(0.02);
    expect(out.summary.repair.latencyMs.count).toBeGreaterThan(0);
    expect(out.summary.repair.latencyMs.p50).toBeLessThan(out.summary.playback.bufferMs);
  });

  it('parity: off when the audience loses nothing, on (and rebuilding packets) under loss, its upload reported', () => {
    const clean = run({ ...lossy, dataLoss: 0, parity: 'auto' });
    expect(clean.summary.parity.stripesActive).toBe(0);
    expect(clean.summary.parity.uploadShare).toBe(0);
    const out = run({ ...lossy, lossAt: 'sources', parity: 'auto' });
    expect(out.summary.parity.switches[0]?.active).toBe(true);
    expect(out.summary.playback.parity).toBeGreaterThan(0);
    expect(out.summary.parity.uploadShare).toBeGreaterThan(0);
    expect(out.summary.parity.uploadShare).toBeLessThanOrEqual(1 / 16 + 1e-9);
    expect(out.summary.playback.missed).toBe(0);
  });
});

describe('hostile members (issue 18)', () => {
  // Forgers, withholders and half-forwarders at 5% each among 200 members: everything measured is
  // of the honest members, and what the attackers got away with is in summary.adversaries.
  let out: RunOutput;
  beforeAll(() => {
    out = run({
      scenario: 'static',
      nodes: 200,
      durationS: 60,
      seed: 5,
      packetsPerSlicePerSecond: 2,
      adversaries: [
        { kind: 'seq-forger', fraction: 0.05 },
        { kind: 'withholder', fraction: 0.05 },
        { kind: 'selective', fraction: 0.05 },
      ],
    });
  });

  it('every honest member plays, on time', () => {
    const adversaries = out.summary.adversaries;
    expect(adversaries?.hostileMembers).toBe(30);
    expect(adversaries?.honestMembers).toBe(170);
    // A slice rooted by an attacker starves its whole tree until the true source replaces the root
    // (members report it): before that, nobody here started playing (playback waits for all slices).
    expect(out.summary.playback.members).toBe(170);
    expect(out.summary.playback.onTimeFraction).toBeGreaterThanOrEqual(0.999);
    // Those slices come from the origin meanwhile: several percent of the stream in this small,
    // short run with 15% attackers (docs/results/hostile measures 1000 members for 120 s).
    expect(adversaries?.honestOriginShare).toBeLessThan(0.15);
  });

  it('every attacker harmed somebody, and each victim stopped taking it within 45 s', () => {
    const kinds = out.summary.adversaries?.kinds ?? [];
    expect(kinds.map((k) => k.kind)).toEqual(['seq-forger', 'withholder', 'selective']);
    for (const k of kinds) {
      expect(k.attackersHarming, k.kind).toBe(10);
      expect(k.harmSeconds.max, k.kind).toBeLessThanOrEqual(45);
    }
    // Forgers break the protocol outright: their victims cut them off.
    expect(kinds[0]?.pairsCutOffFraction).toBeGreaterThan(0.5);
  });

  it('no honest member is cut off by another', () => {
    expect(out.summary.adversaries?.honestMembersCutOff).toBe(0);
  });

  it('the rendezvous bans forgers that several members cut off, and no honest member', () => {
    const ban = out.summary.adversaries?.rendezvousBan;
    expect(ban?.enabled).toBe(true);
    expect(ban?.honestBanned).toBe(0);
    // Forgers are cut off by most victims (above), so most reach REPORTS_TO_BAN reporters; the
    // withholders and half-forwarders are only left, not cut off.
    expect(ban?.hostileBanned).toBeGreaterThanOrEqual(5);
    expect(ban?.messagesRefused).toBeGreaterThan(0);
  });
});
