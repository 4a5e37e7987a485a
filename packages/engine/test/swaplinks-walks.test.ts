// In-repair walks (issue 16): past its walk length, a walk ends at the first member that can spare
// an in-link, so the deficit it repairs is absorbed there instead of passed on by the swap.
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
import { IN_REPAIR_SEARCH_HOPS } from '../src/swaplinks.js';

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

describe('in-repair walks', () => {
  it('start with the search hops on top of the walk length', () => {
    const { links, sent } = member([20, 21, 22]);
    links.dropPeer(20); // one in-link short
    links.maintain(0);
    const walks = sent
      .filter((x) => x.message.type === MessageType.Walk)
      .map((x) => x.message as WalkMessage);
    expect(walks.map((w) => [w.purpose, w.ttl])).toEqual([
      [WalkPurpose.InRepair, WALK_LENGTH + IN_REPAIR_SEARCH_HOPS],
    ]);
  });

  it('end at a member with an in-link to spare once past the walk length, and go on everywhere else', () => {
    // A spare in-link (4 of L = 3), past the walk length: the walk ends here with a swap.
    const spare = member([20, 21, 22, 23]);
    spare.links.onWalk(walk(IN_REPAIR_SEARCH_HOPS + 1));
    expect(spare.sent.map((x) => x.message.type)).toEqual([MessageType.Swap]);
    expect(spare.links.inDegree).toBe(L);
    expect(spare.links.counters.deficitsAbsorbed).toBe(1);
    // The same member within the walk proper forwards it: the end must stay a random sample.
    const early = member([20, 21, 22, 23]);
    early.links.onWalk(walk(IN_REPAIR_SEARCH_HOPS + 2));
    expect(early.sent.map((x) => [x.message.type, (x.message as WalkMessage).ttl])).toEqual([
      [MessageType.Walk, IN_REPAIR_SEARCH_HOPS + 1],
    ]);
    // A member at its degree passes it on while hops remain, and at the last hop swaps as before.
    const exact = member([20, 21, 22]);
    exact.links.onWalk(walk(3));
    expect(exact.sent.map((x) => x.message.type)).toEqual([MessageType.Walk]);
    const last = member([20, 21, 22]);
    last.links.onWalk(walk(1));
    expect(last.sent.map((x) => x.message.type)).toEqual([MessageType.Swap]);
    expect(last.links.inDegree).toBe(L - 1);
    expect(last.links.counters.deficitsAbsorbed).toBe(0);
  });
});
