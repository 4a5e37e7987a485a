// A receive-only member (ML = 0, e.g. <mesh-player max-load="0">) must not root a slice tree: it
// could never feed it. It declines, and the true source moves the slice to another member.
import { describe, expect, it } from 'vitest';
import { MessageType } from '@chunkycast/wire';
import { Solo } from './solo.js';

const SOURCE = 0;

describe('receive-only members and slice sources', () => {
  it('a member with ML = 0 declines a slice-source assignment and does not become a root', () => {
    const solo = new Solo({ id: 7, role: 'member', targetLoadSlices: 0, maxLoadSlices: 0 });
    solo.startWith([3, 4]);
    const mark = solo.mark();
    solo.feed(SOURCE, { type: MessageType.SliceSourceAssign, slice: 2, epoch: 1, assigned: true });
    const replies = solo.sendsOf(MessageType.SliceSourceAssign, mark);
    expect(replies.map((r) => [r.to, r.message.slice, r.message.epoch, r.message.assigned])).toEqual([
      [SOURCE, 2, 1, false],
    ]);
    expect(solo.engine.sliceSourceOf()).toEqual([]);
    expect(solo.sendsOf(MessageType.Flood, mark)).toEqual([]);
  });

  it('a member with ML > 0 accepts and floods its new tree', () => {
    const solo = new Solo({ id: 7, role: 'member', targetLoadSlices: 16 });
    solo.startWith([3, 4]);
    const mark = solo.mark();
    solo.feed(SOURCE, { type: MessageType.SliceSourceAssign, slice: 2, epoch: 1, assigned: true });
    expect(solo.engine.sliceSourceOf()).toEqual([2]);
    expect(solo.sendsOf(MessageType.Flood, mark).length).toBeGreaterThan(0);
  });

  it('the true source reassigns a declined slice and does not ask the decliner again while others can root', () => {
    const solo = new Solo({ id: SOURCE, role: 'source', targetLoadSlices: 16 });
    solo.input({ kind: 'start' });
    solo.input({ kind: 'bootstrap', peers: [5, 6] });
    const first = solo.engine.currentSliceSources();
    const declined = first[0];
    expect(declined === 5 || declined === 6).toBe(true);
    const mark = solo.mark();
    solo.feed(declined!, { type: MessageType.SliceSourceAssign, slice: 0, epoch: 1, assigned: false });
    expect(solo.engine.currentSliceSources()[0]).not.toBe(declined);
    expect(solo.events('sliceSource', mark).map((e) => [e.event.slice, e.event.assigned])).toContainEqual([
      0,
      false,
    ]);
    // Later bootstrap answers that include the decliner fill slices with everyone else only, each
    // a fresh member at a time, before ROOT_RETRY_MS (5 s) has passed.
    const assignedTo = (since: number): number[] =>
      solo.sendsOf(MessageType.SliceSourceAssign, since).map((r) => r.to);
    for (let t = 1; t <= 4; t++) {
      solo.advance(t * 1000);
      solo.input({ kind: 'bootstrap', peers: [declined!, 10 + 2 * t, 11 + 2 * t] });
    }
    const later = solo.engine.currentSliceSources();
    expect(later.filter((p) => p !== null).length).toBeGreaterThan(2);
    expect(later).not.toContain(declined);
    expect(assignedTo(mark)).not.toContain(declined);
  });

  it('asks a member that handed back a root again after 5 s when nobody else can take a slice', () => {
    const solo = new Solo({ id: SOURCE, role: 'source', targetLoadSlices: 16 });
    solo.input({ kind: 'start' });
    solo.input({ kind: 'bootstrap', peers: [5] });
    expect(solo.engine.currentSliceSources()[0]).toBe(5);
    // 5 hands slice 0 back (its uplink was full); nobody else is known.
    solo.feed(5, { type: MessageType.SliceSourceAssign, slice: 0, epoch: 1, assigned: false });
    expect(solo.engine.currentSliceSources()[0]).toBeNull();
    const mark = solo.mark();
    const assignsTo5 = (): number =>
      solo.sendsOf(MessageType.SliceSourceAssign, mark).filter((r) => r.to === 5 && r.message.assigned)
        .length;
    solo.advance(4000);
    solo.input({ kind: 'bootstrap', peers: [5] });
    expect(assignsTo5()).toBe(0); // held back for now
    solo.advance(5500);
    expect(assignsTo5()).toBeGreaterThan(0);
    expect(solo.engine.currentSliceSources()[0]).toBe(5);
    // It declines again: held back again, not asked at every tick.
    const epoch = solo
      .sendsOf(MessageType.SliceSourceAssign, mark)
      .filter((r) => r.to === 5 && r.message.slice === 0)
      .at(-1)?.message.epoch;
    solo.feed(5, { type: MessageType.SliceSourceAssign, slice: 0, epoch: epoch ?? 0, assigned: false });
    const again = solo.mark();
    solo.advance(9000);
    expect(
      solo.sendsOf(MessageType.SliceSourceAssign, again).filter((r) => r.to === 5 && r.message.assigned),
    ).toEqual([]);
  });

  it('a decline for an older epoch or from a member that is not the root changes nothing', () => {
    const solo = new Solo({ id: SOURCE, role: 'source', targetLoadSlices: 16 });
    solo.input({ kind: 'start' });
    solo.input({ kind: 'bootstrap', peers: [5, 6] });
    const before = solo.engine.currentSliceSources();
    const notRoot = before[0] === 5 ? 6 : 5;
    solo.feed(notRoot, { type: MessageType.SliceSourceAssign, slice: 0, epoch: 1, assigned: false });
    expect(solo.engine.currentSliceSources()[0]).toBe(before[0]);
  });
});

describe('the true source and its transport', () => {
  it('counts its slice sources among its relations (the links it keeps), and no longer a member that handed its roots back', () => {
    const solo = new Solo({ id: SOURCE, role: 'source', targetLoadSlices: 16 });
    solo.input({ kind: 'start' });
    solo.input({ kind: 'bootstrap', peers: [5, 6] });
    const roots = solo.engine.currentSliceSources();
    expect(roots).toContain(5);
    expect(roots).toContain(6);
    expect([...solo.engine.relations()].sort()).toEqual([5, 6]);
    roots.forEach((root, slice) => {
      if (root === 5) solo.feed(5, { type: MessageType.SliceSourceAssign, slice, epoch: 1, assigned: false });
    });
    expect(solo.engine.currentSliceSources()).not.toContain(5);
    expect([...solo.engine.relations()]).toEqual([6]);
  });

  it('gives the slices of a slice source whose connection died new roots at once', () => {
    const solo = new Solo({ id: SOURCE, role: 'source', targetLoadSlices: 16 });
    solo.input({ kind: 'start' });
    solo.input({ kind: 'bootstrap', peers: [5, 6, 7] });
    const before = solo.engine.currentSliceSources();
    const dead = before[0]!;
    const mark = solo.mark();
    solo.input({ kind: 'peerUnreachable', peer: dead });
    const lostSlices = before.flatMap((p, s) => (p === dead ? [s] : []));
    expect(
      solo
        .events('sliceSource', mark)
        .filter((e) => !e.event.assigned)
        .map((e) => e.event.slice),
    ).toEqual(lostSlices);
    expect(solo.engine.currentSliceSources()).not.toContain(dead);
  });
});
