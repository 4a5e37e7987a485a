import { describe, expect, it } from 'vitest';
import { rootSpreadOf } from '../src/swarm/roots.js';
import type { ViewerSnapshot } from '../src/viewers/snapshot.js';

/** A viewer whose parent is the true source (id 9) on `rooted`, and another member elsewhere. */
function viewer(peerId: number, rooted: readonly number[]): ViewerSnapshot {
  return {
    now: 0,
    stats: {
      peerId,
      sourceId: 9,
      slices: Array.from({ length: 16 }, (_, slice) => ({
        slice,
        parent: rooted.includes(slice) ? 9 : 100 + slice,
        children: [],
      })),
    },
  };
}

describe('rootSpreadOf (the slice roots of a browser swarm)', () => {
  it('counts the viewers rooting slices, the most on one, and the slices nobody roots', () => {
    const spread = rootSpreadOf(
      [viewer(1, [0, 1, 2, 3, 4, 5]), viewer(2, [6, 7]), viewer(3, []), { now: 0, error: 'closed' }],
      16,
      12.34,
    );
    expect(spread).toEqual({
      viewers: 4,
      atS: 12.3,
      distinctRoots: 2,
      maxSlicesPerRoot: 6,
      unrootedSlices: 8,
    });
  });

  it('a first viewer that roots every slice', () => {
    const all = Array.from({ length: 16 }, (_, s) => s);
    expect(rootSpreadOf([viewer(1, all)], 16, 0)).toMatchObject({
      distinctRoots: 1,
      maxSlicesPerRoot: 16,
      unrootedSlices: 0,
    });
  });

  it('ids compared as text (a page may report them as strings)', () => {
    const snap: ViewerSnapshot = {
      now: 0,
      stats: { sourceId: '9', slices: [{ slice: 0, parent: 9, children: [] }] },
    };
    expect(rootSpreadOf([snap], 1, 0)).toMatchObject({ distinctRoots: 1, unrootedSlices: 0 });
  });
});
