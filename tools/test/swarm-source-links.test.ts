import { describe, expect, it } from 'vitest';
import { sourceLinksOf } from '../src/swarm/source-links.js';

describe('sourceLinksOf', () => {
  it('sums the true source’s open and connected links by route, ignoring viewers', () => {
    const view = {
      members: [
        { role: 'viewer', connectivity: { open: { host: 9 }, connected: { host: 9 } } },
        {
          role: 'source',
          connectivity: {
            open: { host: 3, srflx: 1, prflx: 2, relay: 0 },
            connected: { host: 5, srflx: 1, prflx: 2, relay: 1 },
            failed: 0,
            relayedBytes: 0,
          },
        },
      ],
    };
    expect(sourceLinksOf(view, 12)).toEqual({ tS: 12, open: 6, connected: 9 });
  });

  it('is null while the source has not reported, or for a view of another shape', () => {
    expect(sourceLinksOf({ members: [{ role: 'source', connectivity: null }] }, 0)).toBeNull();
    expect(sourceLinksOf({ members: [{ role: 'viewer' }] }, 0)).toBeNull();
    expect(sourceLinksOf({ members: 'none' }, 0)).toBeNull();
    expect(sourceLinksOf('text', 0)).toBeNull();
    expect(
      sourceLinksOf(
        { members: [{ role: 'source', connectivity: { open: { host: 'x' }, connected: {} } }] },
        0,
      ),
    ).toBeNull();
  });
});
