// Repair walks (issue 16): past its walk length, an in-repair walk ends at the first member that can
// spare an in-link, so the deficit it repairs is absorbed there instead of passed on by the swap; one
// that finds none ends with its last member linking to the origin itself. An out-repair walk ends at
// the first member with an out-link to spare.
import { describe, expect, it } from 'vitest';
import {
  LinkDirection,
  LinkOp,
  MessageType,
  WalkPurpose,
  type Message,
  type PeerId,
  type WalkMessage,
} from '@chunkycast/wire';
import { createRandom, Swaplinks } from '../src/index.js';
import { REPAIR_SEARCH_HOPS } from '../src/swaplinks.js';

const WALK_LENGTH = 6;
const L = 3;
const ORIGIN = 99;

/** A member with L out-links and `inLinks` in-links, recording what it sends. */
function member(inLinks: readonly PeerId[]): { links: Swaplinks; sent: { to: PeerId; message: Message }[] } {
  const sent: { to: PeerId; message: Message }[] = [];
  const links = new Swaplinks(
    {
      id: 1,
      random: createRandom(7),
      send: (to, message) => sent.push({ to, message }),
      neighbourAdded: () => undefined,
      neighbourRemoved: () => undefined,
      sampled: () => undefined,
      needBootstrap: () => undefined,
    },
    L,
    WALK_LENGTH,
    8000,
  );
  // Installed links are kept as given (a host-built graph); more come as links do, from walks.
  links.install([10, 11, 12], inLinks.slice(0, L));
  for (const peer of inLinks.slice(L))
    links.onLink(peer, { type: MessageType.Link, op: LinkOp.Add, direction: LinkDirection.Out, walkId: 0 });
  return { links, sent };
}

const walk = (ttl: number): WalkMessage => ({
  type: MessageType.Walk,
  walkId: 5,
  origin: ORIGIN,
  purpose: WalkPurpose.InRepair,
  ttl,
});

describe('repair walks', () => {
  it('start with the search hops on top of the walk length (out-repair walks too)', () => {
    const { links, sent } = member([20, 21, 22]);
    links.dropPeer(20); // one in-link short
    links.maintain(0);
    const walks = sent
      .filter((x) => x.message.type === MessageType.Walk)
      .map((x) => x.message as WalkMessage);
    expect(walks.map((w) => [w.purpose, w.ttl])).toEqual([
      [WalkPurpose.InRepair, WALK_LENGTH + REPAIR_SEARCH_HOPS],
    ]);
    // So do out-repair walks.
    const short = member([20, 21, 22]);
    short.links.dropPeer(10); // one out-link short
    short.links.maintain(0);
    expect(
      short.sent
        .filter((x) => x.message.type === MessageType.Walk)
        .map((x) => (x.message as WalkMessage).ttl),
    ).toEqual([WALK_LENGTH + REPAIR_SEARCH_HOPS]);
  });

  it('end at a member with an in-link to spare once past the walk length, and go on everywhere else', () => {
    // A spare in-link (4 of L = 3), past the walk length: the walk ends here with a swap.
    const spare = member([20, 21, 22, 23]);
    spare.links.onWalk(walk(REPAIR_SEARCH_HOPS + 1));
    expect(spare.sent.map((x) => x.message.type)).toEqual([MessageType.Swap]);
    expect(spare.links.inDegree).toBe(L);
    expect(spare.links.counters.deficitsAbsorbed).toBe(1);
    // The same member within the walk proper forwards it: the end must stay a random sample.
    const early = member([20, 21, 22, 23]);
    early.links.onWalk(walk(REPAIR_SEARCH_HOPS + 2));
    expect(early.sent.map((x) => [x.message.type, (x.message as WalkMessage).ttl])).toEqual([
      [MessageType.Walk, REPAIR_SEARCH_HOPS + 1],
    ]);
    // A member at its degree passes it on while hops remain.
    const exact = member([20, 21, 22]);
    exact.links.onWalk(walk(3));
    expect(exact.sent.map((x) => x.message.type)).toEqual([MessageType.Walk]);
  });

  it('for an out-link end at a member with an out-link to spare, which then sheds the pair', () => {
    // L + 1 out-links (an in-repair walk that found no spare ended here), L in-links.
    const spare = member([20, 21, 22]);
    spare.links.onLink(13, {
      type: MessageType.Link,
      op: LinkOp.Add,
      direction: LinkDirection.In,
      walkId: 0,
    });
    const outRepair = (ttl: number): WalkMessage => ({ ...walk(ttl), purpose: WalkPurpose.OutRepair });
    // Within the walk proper it goes on (backwards, over an in-link).
    spare.links.onWalk(outRepair(REPAIR_SEARCH_HOPS + 2));
    expect(spare.sent.map((x) => x.message.type)).toEqual([MessageType.Walk]);
    // Past it, the walk ends here: the origin gets its out-link (our in-link) ...
    spare.links.onWalk(outRepair(REPAIR_SEARCH_HOPS + 1));
    expect(spare.sent.slice(1).map((x) => [x.to, x.message])).toEqual([
      [ORIGIN, { type: MessageType.Link, op: LinkOp.Add, direction: LinkDirection.In, walkId: 5 }],
    ]);
    expect(spare.links.counters.deficitsAbsorbed).toBe(1);
    // ... and with one link over each way, the next round splices a pair out: back to L and L.
    spare.links.maintain(0);
    expect([spare.links.outDegree, spare.links.inDegree]).toEqual([L, L]);
    expect(
      spare.sent
        .slice(2)
        .map((x) => x.message.type)
        .sort(),
    ).toEqual([MessageType.Link, MessageType.Swap].sort());
  });

  it('that found no spare end with the last member linking to the origin itself, not with a swap', () => {
    // At its degree, the last member takes one out-link over it and keeps its in-links: the
    // origin's deficit is repaired and no other member is left one short.
    const last = member([20, 21, 22]);
    last.links.onWalk(walk(1));
    expect(last.sent.map((x) => x.message)).toEqual([
      { type: MessageType.Link, op: LinkOp.Add, direction: LinkDirection.Out, walkId: 5 },
    ]);
    expect(last.sent[0]!.to).toBe(ORIGIN);
    expect([last.links.outDegree, last.links.inDegree]).toEqual([L + 1, L]);
    expect(last.links.counters.deficitsAbsorbed).toBe(0);
    // One over is the most: a second walk ending there swaps as before (ref. [66]).
    last.links.onWalk({ ...walk(1), walkId: 6, origin: 98 });
    expect(last.sent.slice(1).map((x) => x.message.type)).toEqual([MessageType.Swap]);
    expect([last.links.outDegree, last.links.inDegree]).toEqual([L + 1, L - 1]);
  });
});
