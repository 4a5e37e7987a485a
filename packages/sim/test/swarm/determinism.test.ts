import { describe, expect, it } from 'vitest';
import { MessageType } from '@chunkycast/wire';
import { createRandom } from '@chunkycast/engine';
import { joiningSwarm, Network, randomTargetLoads } from './harness.js';

/** 20 members join through the rendezvous server, the source starts at 1 s, 80 packets/s, 10 s. */
function run(seed: number): { trace: string[]; parents: string } {
  const net = new Network({ seed, trace: true, recordMessages: false });
  const ids = joiningSwarm(net, randomTargetLoads(20, 8, 24, createRandom(seed)), 100);
  net.addSource();
  net.at(1000, () => {
    net.start(0);
  });
  net.publisher(80, 1500);
  net.runUntil(10_000);
  return { trace: net.trace, parents: JSON.stringify(ids.map((id) => net.engine(id).parents())) };
}

describe('determinism of a swarm', () => {
  it('the same seed gives an identical action log; a different seed does not', () => {
    const a = run(7);
    const b = run(7);
    const c = run(8);
    console.info(`determinism: ${a.trace.length} actions per run`);
    expect(a.trace.length).toBeGreaterThan(10_000);
    // Something happened: data, walks and switches are all in the log.
    expect(a.trace.some((l) => l.includes('"kind":"deliver"'))).toBe(true);
    expect(a.trace.some((l) => l.includes(`"type":${MessageType.Walk}`))).toBe(true);
    expect(b.trace.length).toBe(a.trace.length);
    const firstDiff = a.trace.findIndex((line, i) => line !== b.trace[i]);
    expect(firstDiff, `first difference: ${a.trace[firstDiff]} vs ${b.trace[firstDiff]}`).toBe(-1);
    expect(b.parents).toBe(a.parents);
    expect(c.trace).not.toEqual(a.trace);
  });
});
