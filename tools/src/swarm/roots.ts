/**
 * Where the slice trees are rooted in a browser swarm (issue 16, part 3): a viewer roots a slice
 * when its parent on that slice is the true source. Read from the viewers' own stats, so it shows
 * what the viewers see, not what the true source intends.
 */
import type { ViewerSnapshot } from '../viewers/snapshot.js';

export interface RootSpread {
  /** Viewers open when the snapshots were taken. */
  readonly viewers: number;
  /** Seconds since the first viewer opened. */
  readonly atS: number;
  /** Viewers that root at least one slice. */
  readonly distinctRoots: number;
  /** The most slices one viewer roots. */
  readonly maxSlicesPerRoot: number;
  /** Slices no viewer roots (the tree is between roots, or the viewer that roots it did not answer). */
  readonly unrootedSlices: number;
}

/** The spread over `snapshots` (one per open viewer), `slices` slices in all. */
export function rootSpreadOf(snapshots: readonly ViewerSnapshot[], slices: number, atS: number): RootSpread {
  const rooted = new Set<number>();
  let distinctRoots = 0;
  let maxSlicesPerRoot = 0;
  for (const snap of snapshots) {
    const stats = snap.stats;
    const source = stats?.sourceId;
    if (stats === null || stats === undefined || source === null || source === undefined) continue;
    let mine = 0;
    for (const [index, view] of (stats.slices ?? []).entries()) {
      const slice = view.slice ?? index;
      if (view.parent === null || String(view.parent) !== String(source)) continue;
      mine++;
      rooted.add(slice);
    }
    if (mine > 0) distinctRoots++;
    maxSlicesPerRoot = Math.max(maxSlicesPerRoot, mine);
  }
  return {
    viewers: snapshots.length,
    atS: Math.round(atS * 10) / 10,
    distinctRoots,
    maxSlicesPerRoot,
    unrootedSlices: slices - rooted.size,
  };
}
