import { describe, expect, it } from 'vitest';
import { Swarm, SwarmRegistry, type Member } from '@chunkycast/tracker';

function member(peerId: number, stream = 's', role: 'viewer' | 'source' = 'viewer'): Member {
  return { peerId, role, stream, joinedAtMs: 0, report: null, send: () => undefined };
}

describe('Swarm.newViewerId', () => {
  it('skips 0, the source id and ids of current viewers', () => {
    const draws = [0, 7, 9, 7, 0, 11, 5];
    const swarm = new Swarm('s', 7, 0, () => draws.shift() ?? 13);
    const first = swarm.newViewerId();
    expect(first).toBe(9);
    swarm.addViewer(member(first));
    // 7 is the source's, 0 is never used, 9 is taken: 11 is next.
    expect(swarm.newViewerId()).toBe(11);
  });
});

describe('Swarm.replace', () => {
  it('puts a member in the place of the holder of its id, keeping the sample index', () => {
    const swarm = new Swarm('s', 1, 0);
    for (const id of [2, 3, 4]) swarm.addViewer(member(id));
    const heir = member(3);
    expect(swarm.replace(heir)?.peerId).toBe(3);
    expect(swarm.get(3)).toBe(heir);
    expect(swarm.viewerCount).toBe(3);
    expect(new Set(swarm.sampleViewers(64, null))).toEqual(new Set([2, 3, 4]));
    const source = member(1, 's', 'source');
    expect(swarm.replace(source)).toBeUndefined();
    expect(swarm.source).toBe(source);
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
  it('gives each stream its derived source id and drops a swarm once it is empty', () => {
    const registry = new SwarmRegistry((stream) => (stream === 's' ? 42 : 43));
    const swarm = registry.getOrCreate('s');
    expect(swarm.sourceId).toBe(42);
    expect(registry.getOrCreate('t').sourceId).toBe(43);
    const viewer = member(swarm.newViewerId());
    swarm.addViewer(viewer);
    const source = member(swarm.sourceId, 's', 'source');
    swarm.source = source;
    registry.leave(source);
    expect(registry.get('s')).toBe(swarm); // viewers remain
    registry.leave(viewer);
    expect(registry.get('s')).toBeUndefined();
    // A re-made swarm has the same source id: it is derived, not drawn.
    expect(registry.getOrCreate('s').sourceId).toBe(42);
  });

  it('ignores the leave of a member that a resumed session displaced', () => {
    const registry = new SwarmRegistry(() => 1);
    const swarm = registry.getOrCreate('s');
    const old = member(5);
    swarm.addViewer(old);
    const heir = member(5);
    swarm.replace(heir);
    registry.leave(old);
    expect(swarm.get(5)).toBe(heir);
    expect(registry.get('s')).toBe(swarm);
  });
});
