// Issue 16, part 2 (recovery after a burst): the true source replaces a slice root the moment its
// failure timeout runs out. A burst may have taken the spares sampled before it with it, so a spare
// heard from since the root fell silent comes first, then any spare, and with no spare at all a live
// root for the time being (moved on to a spare heard from since, later, without a re-flood).
import { describe, expect, it } from 'vitest';
import { MessageType, type PeerId } from '@chunkycast/wire';
import { DEFAULT_PROTOCOL } from '../src/index.js';
import { Solo } from './solo.js';

const SOURCE = 0;
/** Eighteen members the rendezvous names at t = 0. */
const MEMBERS: readonly PeerId[] = Array.from({ length: 18 }, (_, i) => 100 + i);

/**
 * A true source whose 16 slices have 16 confirmed roots among `members`, the others left over as
 * spares.
 */
function rootedSource(members = MEMBERS): { solo: Solo; roots: PeerId[]; spares: PeerId[] } {
  const solo = new Solo({ id: SOURCE, role: 'source', targetLoadSlices: 16 });
  solo.input({ kind: 'start' });
  solo.input({ kind: 'bootstrap', peers: members });
  const roots = solo.engine.currentSliceSources().filter((p): p is PeerId => p !== null);
  expect(new Set(roots).size).toBe(16);
  for (const root of roots) heartbeat(solo, root);
  return { solo, roots, spares: members.filter((p) => !roots.includes(p)) };
}

function heartbeat(solo: Solo, peer: PeerId): void {
  solo.feed(peer, { type: MessageType.Heartbeat });
}

/** Advance in 100 ms steps to `untilMs`, every root but `silent` answering every 500 ms. */
function runWithout(solo: Solo, silent: PeerId, untilMs: number): void {
  for (let t = solo.now + 100; t <= untilMs; t += 100) {
    if (t % 500 === 0)
      for (const root of new Set(solo.engine.currentSliceSources()))
        if (root !== null && root !== silent) heartbeat(solo, root);
    solo.advance(t);
  }
}

/** The slice `root` roots (it roots exactly one). */
function sliceOf(solo: Solo, root: PeerId): number {
  const s = solo.engine.currentSliceSources().indexOf(root);
  expect(s).toBeGreaterThanOrEqual(0);
  return s;
}

describe('a slice root that falls silent (thesis §4.2, slice sources; rootFailureTimeoutMs, not the 4 s of §4.4)', () => {
  it('is replaced when its timeout runs out, not at the next round', () => {
    const { solo } = rootedSource();
    const silent = solo.engine.currentSliceSources()[3] as PeerId;
    const slice = sliceOf(solo, silent);
    runWithout(solo, -1, 2300);
    heartbeat(solo, silent);
    const lastHeardAt = solo.now;
    const mark = solo.mark();
    runWithout(solo, silent, 9000);
    const reassigned = solo
      .sendsOf(MessageType.SliceSourceAssign, mark)
      .filter((a) => a.message.slice === slice && a.message.assigned && a.message.peer === undefined);
    expect(reassigned).toHaveLength(1);
    const timeoutMs = DEFAULT_PROTOCOL.rootFailureTimeoutMs;
    expect((reassigned[0]?.time ?? 0) - lastHeardAt).toBeGreaterThan(timeoutMs);
    expect((reassigned[0]?.time ?? 0) - lastHeardAt).toBeLessThanOrEqual(timeoutMs + 1);
  });

  it('goes to a live root when no spare is left, then moves on to a spare heard from since', () => {
    const { solo, roots } = rootedSource(MEMBERS.slice(0, 16));
    const silent = solo.engine.currentSliceSources()[7] as PeerId;
    const slice = sliceOf(solo, silent);
    runWithout(solo, -1, 5000);
    const mark = solo.mark();
    runWithout(solo, silent, 9100);
    const given = solo
      .sendsOf(MessageType.SliceSourceAssign, mark)
      .find((a) => a.message.slice === slice && a.message.assigned);
    expect(roots).toContain(given?.to);
    expect(given?.to).not.toBe(silent);
    expect(given?.message.peer).toBeUndefined(); // a new tree: it floods
    // Confirmed, it now roots two slices. A spare heard from since takes one over, once the new
    // tree has had time to stand (2 × rootSpreadIntervalMs), as a move (its predecessor named: the
    // tree stands).
    heartbeat(solo, given?.to ?? -1);
    const moved = solo.mark();
    const LATE_SPARE = 300;
    solo.input({ kind: 'bootstrap', peers: [LATE_SPARE] });
    runWithout(solo, silent, 20_000);
    const move = solo.sendsOf(MessageType.SliceSourceAssign, moved).find((a) => a.message.assigned);
    expect(move?.to).toBe(LATE_SPARE);
    expect(move?.message.peer).toBe(given?.to);
    expect((move?.time ?? 0) - (given?.time ?? 0)).toBeGreaterThanOrEqual(4000);
  });

  it('goes to a spare heard from after the root fell silent, if there is one', () => {
    const { solo } = rootedSource();
    const silent = solo.engine.currentSliceSources()[11] as PeerId;
    const slice = sliceOf(solo, silent);
    runWithout(solo, -1, 5000);
    runWithout(solo, silent, 6000);
    const LATE_SPARE = 300;
    solo.input({ kind: 'bootstrap', peers: [LATE_SPARE] });
    const mark = solo.mark();
    runWithout(solo, silent, 9100);
    const given = solo
      .sendsOf(MessageType.SliceSourceAssign, mark)
      .find((a) => a.message.slice === slice && a.message.assigned);
    expect(given?.to).toBe(LATE_SPARE);
  });

  it('without a burst in view (a root that declined), any spare will do, as before', () => {
    const { solo, spares } = rootedSource();
    const decliner = solo.engine.currentSliceSources()[2] as PeerId;
    const slice = sliceOf(solo, decliner);
    runWithout(solo, -1, 5000);
    const mark = solo.mark();
    solo.feed(decliner, { type: MessageType.SliceSourceAssign, slice, epoch: 1, assigned: false });
    const given = solo
      .sendsOf(MessageType.SliceSourceAssign, mark)
      .find((a) => a.message.slice === slice && a.message.assigned);
    expect(spares).toContain(given?.to);
  });
});
