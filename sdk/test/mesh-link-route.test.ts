// MeshNode tells its engine how each link is routed (`linkRoute`), from the link's getStats(), so
// the engine can keep tree edges off TURN relays. Real WebRTC (node-datachannel) on 127.0.0.1: the
// links are direct; one link's stats are then made to report a relayed pair.
import { afterEach, describe, expect, it } from 'vitest';
import { LIVE_PROTOCOL, LINK_STATS_INTERVAL_MS, MeshNode } from '@chunkycast/sdk/core';
import type { PeerId, SignalData } from '@chunkycast/wire';
import { until } from './until.js';

const LOOPBACK_RTC = { iceServers: [], bindAddress: '127.0.0.1' };
const SOURCE_ID = 1000;

type EngineInput = Parameters<MeshNode['engine']['handle']>[1];
type LinkRoute = Extract<EngineInput, { kind: 'linkRoute' }>;

/** A getStats() report shaped like Chrome's, whose selected pair has these candidate types. */
function report(local: string, remote: string): Map<string, unknown> {
  const stats = [
    { id: 'T01', type: 'transport', selectedCandidatePairId: 'CP1' },
    {
      id: 'CP1',
      type: 'candidate-pair',
      localCandidateId: 'L1',
      remoteCandidateId: 'R1',
      state: 'succeeded',
      nominated: true,
      currentRoundTripTime: 0.04,
      bytesSent: 1000,
      bytesReceived: 1000,
    },
    { id: 'L1', type: 'local-candidate', candidateType: local },
    { id: 'R1', type: 'remote-candidate', candidateType: remote },
  ];
  return new Map(stats.map((s) => [s.id, s]));
}

let running: MeshNode[] = [];
afterEach(async () => {
  await Promise.all(running.map((n) => n.stop(false)));
  running = [];
});

describe('MeshNode feeds each link’s route to its engine', () => {
  it('once the route is known (direct on loopback), and again when it changes to relayed', async () => {
    const nodes = new Map<PeerId, MeshNode>();
    const routes = new Map<PeerId, LinkRoute[]>();
    const memberIds = [31, 32, 33];
    const make = (id: PeerId, role: 'member' | 'source'): MeshNode =>
      new MeshNode({
        id,
        sourceId: SOURCE_ID,
        role,
        targetLoadSlices: 16,
        maxLoadSlices: role === 'source' ? 16 : 24,
        protocol: LIVE_PROTOCOL,
        seed: id,
        rtcConfig: LOOPBACK_RTC,
        signal: (to: PeerId, data: SignalData) => {
          setTimeout(() => nodes.get(to)?.handleSignal(id, data), 1);
        },
        requestBootstrap: (count: number) => {
          const others = memberIds.filter((m) => m !== id && nodes.has(m));
          setTimeout(() => nodes.get(id)?.bootstrap(others.slice(0, count)), 1);
        },
        deliver: () => undefined,
      });
    nodes.set(SOURCE_ID, make(SOURCE_ID, 'source'));
    for (const id of memberIds) nodes.set(id, make(id, 'member'));
    // Record every linkRoute input as the engine gets it (the same feed() path as all inputs).
    for (const [id, node] of nodes) {
      const fed: LinkRoute[] = [];
      routes.set(id, fed);
      const handle = node.engine.handle.bind(node.engine);
      node.engine.handle = (now: number, input: EngineInput) => {
        if (input.kind === 'linkRoute') fed.push(input);
        return handle(now, input);
      };
    }
    running = [...nodes.values()];
    for (const id of memberIds) nodes.get(id)!.start();
    nodes.get(SOURCE_ID)!.start();

    const member = nodes.get(31)!;
    const fedTo = (id: PeerId): LinkRoute[] => routes.get(id)!;
    // Every open link with a known route was reported once, not relayed; nothing else was reported.
    await until(
      () => {
        const links = member.peerLinks();
        return (
          links.length >= 2 &&
          links.every((l) => l.route !== null && fedTo(31).some((r) => r.peer === l.peer))
        );
      },
      20_000,
      'member 31 to have two open links with known routes, each fed to the engine',
    );
    for (const link of member.peerLinks())
      expect(fedTo(31).filter((r) => r.peer === link.peer)).toEqual([
        { kind: 'linkRoute', peer: link.peer, relayed: false },
      ]);

    // The same route read again (next stats rounds) is not fed again.
    await new Promise((resolve) => setTimeout(resolve, 2.5 * LINK_STATS_INTERVAL_MS));
    const target = member.peerLinks()[0]!.peer;
    expect(fedTo(31).filter((r) => r.peer === target)).toHaveLength(1);

    // The pair is now relayed (e.g. reselected after an ICE restart): fed at the next stats round.
    const links = (member as unknown as { links: Map<PeerId, { peer: { _pc?: { getStats: unknown } } }> })
      .links;
    const pc = links.get(target)?.peer._pc;
    expect(pc).toBeDefined();
    pc!.getStats = () => Promise.resolve(report('host', 'relay'));
    await until(
      () => fedTo(31).some((r) => r.peer === target && r.relayed),
      5 * LINK_STATS_INTERVAL_MS,
      'the relayed route to be fed',
    );
    expect(fedTo(31).filter((r) => r.peer === target)).toEqual([
      { kind: 'linkRoute', peer: target, relayed: false },
      { kind: 'linkRoute', peer: target, relayed: true },
    ]);
    expect(member.openByRoute().relay).toBe(1);
  }, 60_000);
});
