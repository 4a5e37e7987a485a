import { describe, expect, it } from 'vitest';
import { MessageType, type PeerId } from '@chunkycast/wire';
import { createRandom } from '@chunkycast/engine';
import { deliveryCounts, Network, prelinkedSwarm, randomTargetLoads } from './harness.js';

const M = 16;
const RATE = 80;
const PUBLISH_FROM = 1000;

function seqAt(t: number): number {
  return Math.floor(((t - PUBLISH_FROM) * RATE) / 1000 / M);
}

function gaps(times: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 1; i < times.length; i++) out.push(times[i]! - times[i - 1]!);
  return out;
}

describe('heartbeats (1 s, thesis §4.4, experimental setup)', () => {
  it('without data, members advertise to every neighbour exactly every 1 s', () => {
    const net = new Network({ seed: 70 });
    const ids = prelinkedSwarm(net, randomTargetLoads(20, 8, 24, createRandom(700)), { withSource: false });
    net.runUntil(12_000);
    for (const id of ids) {
      for (const n of net.engine(id).neighbours()) {
        const times = net
          .sentOf(id, MessageType.Advert)
          .filter((r) => r.to === n)
          .map((r) => r.time);
        expect(times.length, `${id} → ${n}`).toBeGreaterThanOrEqual(11);
        for (const g of gaps(times)) expect(g, `${id} → ${n}`).toBe(1000);
      }
    }
  });

  it('with data flowing, every neighbour still hears from a member at least every 1 s', () => {
    const net = new Network({ seed: 71 });
    const ids = prelinkedSwarm(net, randomTargetLoads(20, 8, 24, createRandom(710)));
    net.publisher(RATE, PUBLISH_FROM);
    net.runUntil(15_000);
    let maxSilence = 0;
    for (const id of ids) {
      for (const n of net.engine(id).neighbours()) {
        const any = net
          .log(id)
          .sent.filter((r) => r.to === n && r.time >= 2000)
          .map((r) => r.time);
        expect(any.length, `${id} → ${n}`).toBeGreaterThanOrEqual(13);
        maxSilence = Math.max(maxSilence, ...gaps(any));
        // Adverts (the heartbeat) stay on the 1 s grid.
        const adverts = net
          .sentOf(id, MessageType.Advert)
          .filter((r) => r.to === n)
          .map((r) => r.time);
        for (const g of gaps(adverts.slice(1))) expect(g % 1000, `${id} → ${n}`).toBe(0);
      }
    }
    console.info(`heartbeat: longest silence member → neighbour with data flowing: ${maxSilence} ms`);
    expect(maxSilence).toBeLessThanOrEqual(1000);
    // The true source and each slice source (not neighbours) heartbeat each other every second.
    const sources = new Set(net.engine(0).currentSliceSources());
    for (const src of sources) {
      const down = net
        .sentOf(0, MessageType.Heartbeat)
        .filter((r) => r.to === src)
        .map((r) => r.time);
      expect(down.length).toBeGreaterThanOrEqual(13);
      for (const g of gaps(down)) expect(g).toBe(1000);
      const up = net
        .sentOf(src!, MessageType.Heartbeat)
        .filter((r) => r.to === 0)
        .map((r) => r.time);
      expect(up.length).toBeGreaterThanOrEqual(13);
      // Plus one immediate acknowledgement when a node becomes a slice source.
      for (const g of gaps(up)) expect(g).toBeLessThanOrEqual(1000);
    }
  });
});

describe('graceful quit (thesis §4.2, overview)', () => {
  let scenario: { net: Network; leaver: PeerId; children: Map<number, PeerId[]>; at: number } | undefined;

  /** 40 members; at 20 s the busiest member that roots no slice leaves gracefully. */
  function quitScenario(): NonNullable<typeof scenario> {
    if (scenario !== undefined) return scenario;
    const net = new Network({ seed: 72 });
    const ids = prelinkedSwarm(net, randomTargetLoads(40, 8, 28, createRandom(720)));
    net.publisher(RATE, PUBLISH_FROM);
    net.runUntil(20_000);
    const roots = new Set(net.engine(0).currentSliceSources());
    const leaver = ids
      .filter((id) => !roots.has(id))
      .sort((a, b) => net.engine(b).currentLoad - net.engine(a).currentLoad)[0]!;
    const children = new Map<number, PeerId[]>();
    net
      .engine(leaver)
      .children()
      .forEach((c, s) => {
        if (c.length > 0) children.set(s, c);
      });
    expect(children.size).toBeGreaterThan(0);
    net.quit(leaver, true);
    net.runUntil(30_000);
    scenario = { net, leaver, children, at: 20_000 };
    return scenario;
  }

  it('announces the quit, switches every child away, and stops after quitLingerMs', () => {
    const { net, leaver, children, at } = quitScenario();
    const quits = net.sentOf(leaver, MessageType.Quit);
    expect(quits.length).toBeGreaterThan(0);
    for (const q of quits) {
      expect(q.time).toBe(at);
      expect(q.message.lingerMs).toBe(3000);
    }
    const told = new Set(quits.map((q) => q.to));
    for (const kids of children.values()) for (const c of kids) expect(told.has(c)).toBe(true);
    expect(net.events(leaver, 'stopped').map((e) => e.time)).toEqual([at + 3000]);
    expect(net.log(leaver).sent.filter((r) => r.time > at + 3000)).toEqual([]);
    for (const [s, kids] of children) {
      for (const c of kids) {
        const moved = net
          .events(c, 'parentChanged')
          .find((e) => e.event.slice === s && e.event.previous === leaver);
        expect(moved, `child ${c} slice ${s}`).toBeDefined();
        expect(moved!.time).toBeLessThan(at + 3000);
        expect(moved!.event.parent).not.toBeNull();
      }
    }
    for (const id of net.members())
      for (let s = 0; s < M; s++) expect(net.engine(id).isReceiving(s)).toBe(true);
  });

  it('the leaver keeps forwarding while it lingers', () => {
    const { net, leaver, at } = quitScenario();
    const forwarded = net.sentOf(leaver, MessageType.Data).filter((r) => r.time >= at);
    const received = net
      .log(leaver)
      .received.filter((r) => r.time >= at && r.message.type === MessageType.Data);
    const lastSend = forwarded.at(-1)?.time ?? at;
    console.info(
      `graceful quit: the leaver got ${received.length} packets and forwarded ${forwarded.length} after quitting; ` +
        `last forward at +${lastSend - at} ms`,
    );
    // Its children hand off ~handoffLeadMs (2 s) ahead, so it must still be forwarding then.
    expect(lastSend - at).toBeGreaterThanOrEqual(1500);
  });

  it('its children (and their subtrees) lose no packet', () => {
    const { net } = quitScenario();
    const missing = new Map<string, number>();
    for (const id of net.members()) {
      const counts = deliveryCounts(net, id, M);
      for (let s = 0; s < M; s++)
        for (let q = seqAt(18_000); q < seqAt(28_000); q++)
          if (!counts[s]!.has(q)) missing.set(`${id}/${s}`, (missing.get(`${id}/${s}`) ?? 0) + 1);
    }
    const total = [...missing.values()].reduce((a, b) => a + b, 0);
    console.info(`graceful quit: ${total} packets missing over ${missing.size} (member, slice) pairs`);
    expect(total).toBe(0);
  });
});
