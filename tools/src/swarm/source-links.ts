/**
 * How many peer connections the true source holds (issue 17: its cost as the audience grows), read
 * from its own connectivity report in the tracker's /debug/swarm view.
 */

export interface SourceLinks {
  /** Seconds since the window started. */
  readonly tS: number;
  /** Links open now (those whose route is known). */
  readonly open: number;
  /** Links that connected since the source's node started. */
  readonly connected: number;
}

const sum = (counts: unknown): number | null => {
  if (typeof counts !== 'object' || counts === null) return null;
  let total = 0;
  for (const v of Object.values(counts)) {
    if (typeof v !== 'number' || !Number.isFinite(v)) return null;
    total += v;
  }
  return total;
};

/** The true source's links in a /debug/swarm view; null if it has not reported them (yet). */
export function sourceLinksOf(view: unknown, tS: number): SourceLinks | null {
  if (typeof view !== 'object' || view === null) return null;
  const members = (view as { members?: unknown }).members;
  if (!Array.isArray(members)) return null;
  const source: unknown = members.find(
    (m: unknown) => typeof m === 'object' && m !== null && (m as { role?: unknown }).role === 'source',
  );
  const connectivity = (source as { connectivity?: unknown } | undefined)?.connectivity;
  if (typeof connectivity !== 'object' || connectivity === null) return null;
  const c = connectivity as { open?: unknown; connected?: unknown };
  const open = sum(c.open);
  const connected = sum(c.connected);
  return open === null || connected === null ? null : { tS, open, connected };
}
