import { describe, expect, it } from 'vitest';
import { PeerIdSpace, Swarm, SwarmRegistry, type Member } from '@chunkycast/tracker';

function member(peerId: number, stream = 's', role: 'viewer' | 'source' = 'viewer'): Member {
  return { peerId, role, stream, joinedAtMs: 0, report: null, send: () => undefined };
}

describe('PeerIdSpace', () => {
  it('skips 0 and ids in use, and reuses nothing live', () => {
    const draws = [0, 7, 7, 0, 9, 7, 11];
    const space = new PeerIdSpace(() => draws.shift() ?? 13);
    expect([space.allocate(), space.allocate(), space.allocate()]).toEqual([7, 9, 11]);
    space.release(9);
    expect(space.size).toBe(2);
  });
});

describe('Swarm.sampleViewers', () => {
  it('returns distinct viewers, never the excluded one, as many as asked or available', () => {
    const swarm = new Swarm('s', 1, 0);
    for (let id = 100; id < 300; id++) swarm.addViewer(member(id));
    for (const count of [1, 5, 64]) {
      const sample = swarm.sampleViewers(count, 150);
      expect(sample).toHaveLength(count);
      expect(new Set(sample).size).toBe(count);
      expect(sample).not.toContain(150);
      for (const id of sample) expect(id >= 100 && id < 300).toBe(true);
    }
    const small = new Swarm('t', 2, 0);
    for (const id of [5, 6, 7]) small.addViewer(member(id, 't'));
    expect(new Set(small.sampleViewers(64, 6))).toEqual(new Set([5, 7]));
    expect(new Set(small.sampleViewers(2, null)).size).toBe(2);
  });

  it('keeps its dense index right across removals', () => {
    const swarm = new Swarm('s', 1, 0);
    for (const id of [1, 2, 3, 4, 5]) swarm.addViewer(member(id));
    expect(swarm.remove(2)).toBe(true);
    expect(swarm.remove(5)).toBe(true);
    expect(swarm.remove(2)).toBe(false);
    expect(new Set(swarm.sampleViewers(64, null))).toEqual(new Set([1, 3, 4]));
    expect(swarm.viewerCount).toBe(3);
  });
});

describe('SwarmRegistry', () => {
  it('reserves the source id with the swarm and frees it when the swarm empties', () => {
    const registry = new SwarmRegistry();
    const swarm = registry.getOrCreate('s');
    const viewer = member(registry.ids.allocate());
    swarm.addViewer(viewer);
    const source = member(swarm.sourceId, 's', 'source');
    swarm.source = source;
    expect(registry.ids.size).toBe(2);
    registry.leave(source);
    expect(registry.get('s')).toBe(swarm);
    expect(registry.ids.size).toBe(2); // the source id stays reserved while viewers remain
    registry.leave(viewer);
    expect(registry.get('s')).toBeUndefined();
    expect(registry.ids.size).toBe(0);
  });
});
