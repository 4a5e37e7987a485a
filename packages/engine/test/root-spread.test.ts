// Issue 16, part 3: a swarm that grows viewer by viewer starts with one member, which the true
// source makes the root of every slice. As members arrive, the roots spread to them, one move per
// rootSpreadIntervalMs, until no member roots two more slices than another the source knows of.
import { describe, expect, it } from 'vitest';
import { ForcedReason, MessageType, type AdvertMessage, type PeerId } from '@chunkycast/wire';
import { bloomMaskFor, type ProtocolConfig } from '../src/index.js';
import { accept, dataMessage, Solo } from './solo.js';

const SOURCE = 0;
const FIRST = 5;
const SECOND = 9;

function trueSource(protocol: Partial<ProtocolConfig> = {}): Solo {
  const solo = new Solo({ id: SOURCE, role: 'source', targetLoadSlices: 16, protocol });
  solo.input({ kind: 'start' });
  return solo;
}

/** Roots answer the source's messages at once (a silent root is replaced after 2 s). */
function heartbeats(solo: Solo, roots: readonly PeerId[]): void {
  for (const root of roots) solo.feed(root, { type: MessageType.Heartbeat });
}

function countOf(solo: Solo, peer: PeerId): number {
  return solo.engine.currentSliceSources().filter((p) => p === peer).length;
}

/**
 * Advance in half seconds to `untilMs`: the roots stay alive, and each request the true source
 * makes to the rendezvous server is answered with `members` (as the tracker answers with the
 * members it has).
 */
function run(solo: Solo, untilMs: number, members: readonly PeerId[]): void {
  for (let t = solo.now + 500; t <= untilMs; t += 500) {
    heartbeats(solo, members);
    const mark = solo.mark();
    solo.advance(t);
    if (solo.log.slice(mark).some((a) => a.action.kind === 'requestBootstrap'))
      solo.input({ kind: 'bootstrap', peers: members });
    acceptMoves(solo, mark);
  }
}

/** Each member told it takes over a moved slice says so, as the engine does (make before break). */
function acceptMoves(solo: Solo, since: number): void {
  for (const a of solo.sendsOf(MessageType.SliceSourceAssign, since))
    if (a.message.assigned && a.message.peer !== undefined)
      solo.feed(a.to, {
        type: MessageType.SliceSourceAssign,
        slice: a.message.slice,
        epoch: a.message.epoch,
        assigned: true,
      });
}

/** The stream's first viewer roots every slice: each bootstrap answer naming it gives it one more. */
function firstViewerRootsAll(solo: Solo): void {
  for (let i = 0; i < 16; i++) solo.input({ kind: 'bootstrap', peers: [FIRST] });
  expect(countOf(solo, FIRST)).toBe(16);
}

describe('the true source spreads slice roots as the swarm grows', () => {
  it('moves one root per interval to a newcomer until the two root 8 slices each', () => {
    const solo = trueSource();
    firstViewerRootsAll(solo);
    run(solo, 1000, [FIRST]);
    const mark = solo.mark();
    solo.input({ kind: 'bootstrap', peers: [SECOND] });
    run(solo, 40_000, [FIRST, SECOND]);
    expect(countOf(solo, FIRST)).toBe(8);
    expect(countOf(solo, SECOND)).toBe(8);
    expect(solo.engine.counters.rootsSpread).toBe(8);

    const assigns = solo.sendsOf(MessageType.SliceSourceAssign, mark);
    const handedOver = assigns.filter((a) => a.to === FIRST && !a.message.assigned);
    const given = assigns.filter((a) => a.to === SECOND && a.message.assigned);
    expect(handedOver).toHaveLength(8);
    expect(given.map((a) => a.message.slice)).toEqual(handedOver.map((a) => a.message.slice));
    // Each side learns the other: the new root its predecessor, the old root whom to ask.
    expect(given.every((a) => a.message.peer === FIRST)).toBe(true);
    expect(handedOver.every((a) => a.message.peer === SECOND)).toBe(true);
    // The old root is told with the epoch it rooted; the new root gets the next one.
    for (let i = 0; i < given.length; i++)
      expect(given[i]?.message.epoch).toBe((handedOver[i]?.message.epoch ?? 0) + 1);
    // Gradually: moves at least rootSpreadIntervalMs (2 s by default) apart.
    const times = given.map((a) => a.time);
    for (let i = 1; i < times.length; i++)
      expect((times[i] ?? 0) - (times[i - 1] ?? 0)).toBeGreaterThanOrEqual(2000);
    // Settled: no move once the spread is within one slice.
    const settled = solo.mark();
    run(solo, 60_000, [FIRST, SECOND]);
    expect(solo.sendsOf(MessageType.SliceSourceAssign, settled)).toEqual([]);
  });

  it('make before break: the old root keeps the packets until the new root accepts, then is told to join it', () => {
    const solo = trueSource();
    firstViewerRootsAll(solo);
    run(solo, 1000, [FIRST]);
    const mark = solo.mark();
    solo.input({ kind: 'bootstrap', peers: [SECOND] });
    // Advance without accepting: the move waits.
    heartbeats(solo, [FIRST, SECOND]);
    solo.advance(2000);
    const given = solo.sendsOf(MessageType.SliceSourceAssign, mark).find((a) => a.to === SECOND);
    expect(given?.message).toMatchObject({ assigned: true, peer: FIRST });
    const slice = given?.message.slice ?? -1;
    expect(solo.sendsOf(MessageType.SliceSourceAssign, mark).filter((a) => a.to === FIRST)).toEqual([]);
    const published = solo.mark();
    for (let i = 0; i < 16; i++) solo.input({ kind: 'publish', payload: new Uint8Array([i]) });
    const dataTo = (peer: PeerId, since: number): number[] =>
      solo
        .sendsOf(MessageType.Data, since)
        .filter((d) => d.to === peer && d.message.slice === slice)
        .map((d) => d.message.seq);
    expect(dataTo(SECOND, published)).toHaveLength(1);
    expect(dataTo(FIRST, published)).toEqual(dataTo(SECOND, published));
    // A heartbeat is no acceptance (it may have left before the assignment arrived).
    heartbeats(solo, [SECOND]);
    expect(solo.sendsOf(MessageType.SliceSourceAssign, published)).toEqual([]);
    solo.feed(SECOND, {
      type: MessageType.SliceSourceAssign,
      slice,
      epoch: given?.message.epoch ?? 0,
      assigned: true,
    });
    const told = solo.sendsOf(MessageType.SliceSourceAssign, published);
    expect(told.map((a) => [a.to, a.message.slice, a.message.assigned, a.message.peer])).toEqual([
      [FIRST, slice, false, SECOND],
    ]);
    const after = solo.mark();
    for (let i = 0; i < 16; i++) solo.input({ kind: 'publish', payload: new Uint8Array([i]) });
    expect(dataTo(FIRST, after)).toEqual([]);
    expect(dataTo(SECOND, after)).toHaveLength(1);
  });

  it('a move the new root never accepts goes back to the old root', () => {
    const solo = trueSource();
    firstViewerRootsAll(solo);
    run(solo, 1000, [FIRST]);
    const mark = solo.mark();
    solo.input({ kind: 'bootstrap', peers: [SECOND] });
    for (let t = 1500; t <= 6000; t += 500) {
      heartbeats(solo, [FIRST]); // SECOND stays silent
      solo.advance(t);
    }
    expect(countOf(solo, FIRST)).toBe(16);
    const back = solo.sendsOf(MessageType.SliceSourceAssign, mark).filter((a) => a.to === FIRST);
    expect(back.map((a) => a.message.assigned)).toEqual([true]);
  });

  it('the new root gets the newest packet with its assignment, so its tree has data at once', () => {
    const solo = trueSource();
    firstViewerRootsAll(solo);
    for (let i = 0; i < 32; i++) solo.input({ kind: 'publish', payload: new Uint8Array([i]) });
    const mark = solo.mark();
    solo.input({ kind: 'bootstrap', peers: [SECOND] });
    run(solo, 3000, [FIRST, SECOND]);
    const given = solo.sendsOf(MessageType.SliceSourceAssign, mark).find((a) => a.to === SECOND);
    expect(given).toBeDefined();
    const data = solo.sendsOf(MessageType.Data, mark).filter((d) => d.to === SECOND);
    expect(data.map((d) => d.message.slice)).toContain(given?.message.slice);
  });

  it('asks the rendezvous server for members while no spare roots fewer, and finds nobody in a swarm of one', () => {
    const solo = trueSource();
    firstViewerRootsAll(solo);
    const mark = solo.mark();
    run(solo, 10_000, [FIRST]);
    const asked = solo.log.slice(mark).filter((a) => a.action.kind === 'requestBootstrap');
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.length).toBeLessThanOrEqual(10); // at most once per decision round
    expect(countOf(solo, FIRST)).toBe(16);
    expect(solo.engine.counters.rootsSpread).toBe(0);
  });

  it('a slice that needs a new root goes to the spare rooting the fewest, not the freshest', () => {
    const THIRD = 11;
    const solo = trueSource({ rootSpreadIntervalMs: 0 });
    for (let i = 0; i < 15; i++) solo.input({ kind: 'bootstrap', peers: [FIRST] });
    solo.input({ kind: 'bootstrap', peers: [THIRD] });
    expect(solo.engine.currentSliceSources()[15]).toBe(THIRD);
    // Spares: SECOND (roots nothing), then FIRST (roots 15), the freshest.
    solo.input({ kind: 'bootstrap', peers: [SECOND] });
    solo.input({ kind: 'bootstrap', peers: [FIRST] });
    solo.input({ kind: 'peerUnreachable', peer: THIRD });
    expect(solo.engine.currentSliceSources()[15]).toBe(SECOND);
  });

  it('never moves a root with rootSpreadIntervalMs 0', () => {
    const solo = trueSource({ rootSpreadIntervalMs: 0 });
    firstViewerRootsAll(solo);
    run(solo, 1000, [FIRST]);
    solo.input({ kind: 'bootstrap', peers: [SECOND] });
    run(solo, 30_000, [FIRST, SECOND]);
    expect(countOf(solo, FIRST)).toBe(16);
    expect(solo.engine.counters.rootsSpread).toBe(0);
  });
});

describe('members in a moved slice', () => {
  /** The true source moves slice 2 to this member, naming its old root, FIRST. */
  const moveSlice2FromFirst = (solo: Solo): void => {
    solo.feed(SOURCE, {
      type: MessageType.SliceSourceAssign,
      slice: 2,
      epoch: 3,
      assigned: true,
      peer: FIRST,
    });
  };

  /** The true source tells the old root of slice 2 (epoch 1) that SECOND roots it now. */
  const tellFirstSlice2MovedToSecond = (solo: Solo): void => {
    solo.feed(SOURCE, {
      type: MessageType.SliceSourceAssign,
      slice: 2,
      epoch: 1,
      assigned: false,
      peer: SECOND,
    });
  };

  it('the new root keeps its tree, says it took over, and takes the old root as a child though not a neighbour and full', () => {
    const solo = new Solo({ id: SECOND, role: 'member', targetLoadSlices: 1, maxLoadSlices: 1 });
    solo.startWith([3, 4]);
    const mark = solo.mark();
    moveSlice2FromFirst(solo);
    expect(solo.engine.sliceSourceOf()).toEqual([2]);
    expect(solo.sendsOf(MessageType.Flood, mark)).toEqual([]);
    expect(
      solo
        .sendsOf(MessageType.SliceSourceAssign, mark)
        .map((a) => [a.to, a.message.slice, a.message.assigned]),
    ).toEqual([[SOURCE, 2, true]]);
    // Fill ML with a neighbour child first, then the old root (no neighbour) asks.
    solo.feed(3, { type: MessageType.ForcedParentRequest, slice: 2, reason: ForcedReason.Join, fromSeq: 0 });
    const asked = solo.mark();
    solo.feed(FIRST, {
      type: MessageType.ForcedParentRequest,
      slice: 2,
      reason: ForcedReason.ParentQuit,
      fromSeq: 0,
    });
    const replies = solo.sendsOf(MessageType.SwitchReply, asked).filter((r) => r.to === FIRST);
    expect(replies.map((r) => r.message.accepted)).toEqual([true]);
    // Only the predecessor, and only once: another stranger is still refused.
    const later = solo.mark();
    solo.feed(77, {
      type: MessageType.ForcedParentRequest,
      slice: 2,
      reason: ForcedReason.ParentQuit,
      fromSeq: 0,
    });
    expect(solo.sendsOf(MessageType.SwitchReply, later).map((r) => r.message.accepted)).toEqual([false]);
  });

  it('a full new root keeps a moved slice while its old root may still ask to be its child, and hands it back after', () => {
    // At ML (1) with a child on another slice it roots, a childless root is one it cannot feed and
    // hands back; a moved one is not childless for long: the old root brings the whole tree.
    const solo = new Solo({ id: SECOND, role: 'member', targetLoadSlices: 1, maxLoadSlices: 1 });
    solo.startWith([3, 4]);
    solo.feed(SOURCE, { type: MessageType.SliceSourceAssign, slice: 5, epoch: 1, assigned: true });
    solo.takeChildren([3], 5);
    expect(solo.engine.currentLoad).toBe(1);
    const movedAt = solo.now;
    const mark = solo.mark();
    moveSlice2FromFirst(solo);
    const handedBack = (since: number): number[] =>
      solo
        .sendsOf(MessageType.SliceSourceAssign, since)
        .filter((a) => a.to === SOURCE && !a.message.assigned)
        .map((a) => a.message.slice);
    // Decision rounds run (the child on slice 5 stays alive); the old root has not asked yet.
    const runTo = (time: number): void => {
      while (solo.now < time) {
        solo.advance(Math.min(time, solo.now + 500));
        solo.feed(3, { type: MessageType.Heartbeat });
      }
    };
    runTo(movedAt + 5000);
    expect(solo.engine.currentLoad).toBe(1);
    expect(handedBack(mark)).toEqual([]);
    expect(solo.engine.sliceSourceOf()).toEqual([2, 5]);
    // It never asks (it failed, say): after 2 × requestTimeoutMs the childless root goes back.
    runTo(movedAt + 8000);
    expect(handedBack(mark)).toEqual([2]);
    expect(solo.engine.sliceSourceOf()).toEqual([5]);
  });

  it('the new root advertises to the old root, its child though no neighbour, every round', () => {
    const solo = new Solo({ id: SECOND, role: 'member', targetLoadSlices: 16 });
    solo.startWith([3, 4]);
    moveSlice2FromFirst(solo);
    solo.feed(FIRST, {
      type: MessageType.ForcedParentRequest,
      slice: 2,
      reason: ForcedReason.ParentQuit,
      fromSeq: 0,
    });
    const mark = solo.mark();
    solo.advance(solo.now + 3000);
    const adverts = solo.sendsOf(MessageType.Advert, mark).filter((a) => a.to === FIRST);
    expect(adverts.length).toBeGreaterThanOrEqual(3);
    const entry = adverts[0]?.message.entries.find((e) => e.slice === 2);
    expect(entry).toMatchObject({ isSliceSource: true, pathMs: 0 });
    // The advert is its heartbeat: no separate one.
    expect(solo.sendsOf(MessageType.Heartbeat, mark).filter((h) => h.to === FIRST)).toEqual([]);
  });

  it('the old root takes its successor’s advert, though no neighbour, and advertises a path below it', () => {
    const solo = new Solo({ id: FIRST, role: 'member', targetLoadSlices: 16 });
    solo.startWith([3, 4]);
    solo.feed(SOURCE, { type: MessageType.SliceSourceAssign, slice: 2, epoch: 1, assigned: true });
    tellFirstSlice2MovedToSecond(solo);
    const advert = (): AdvertMessage =>
      solo.advertFrom(SECOND, {
        load: 1,
        lower: 14,
        upper: 18,
        maxLoad: 24,
        rttMs: 80,
        slices: { 2: { receiving: true, isSliceSource: true, pathMs: 0, filter: bloomMaskFor(SECOND) } },
      });
    const ourPath = (): number | null | undefined =>
      solo.lastAdvertTo(3)?.message.entries.find((e) => e.slice === 2)?.pathMs;
    // Not yet its parent: a stranger's advert is ignored.
    solo.feed(SECOND, advert());
    solo.feed(SECOND, accept(2));
    solo.feed(SECOND, dataMessage(2, 0, bloomMaskFor(SECOND), 1));
    solo.advance(solo.now + 1000);
    expect(ourPath()).toBeNull();
    // Its parent now: the advert is taken, and our path is the root's 0 plus half the round trip.
    solo.feed(SECOND, advert());
    solo.advance(solo.now + 1000);
    expect(ourPath()).toBe(40);
  });

  it('the old root, told its successor, asks it to be its parent as a planned hand-off', () => {
    const solo = new Solo({ id: FIRST, role: 'member', targetLoadSlices: 16 });
    solo.startWith([3, 4]);
    solo.feed(SOURCE, { type: MessageType.SliceSourceAssign, slice: 2, epoch: 1, assigned: true });
    const mark = solo.mark();
    tellFirstSlice2MovedToSecond(solo);
    expect(solo.engine.sliceSourceOf()).toEqual([]);
    const asks = solo.sendsOf(MessageType.ForcedParentRequest, mark);
    expect(asks.map((a) => [a.to, a.message.slice, a.message.reason])).toEqual([
      [SECOND, 2, ForcedReason.ParentQuit],
    ]);
  });
});
