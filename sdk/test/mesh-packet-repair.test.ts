// The engine's packet repair through MeshNode over real WebRTC on loopback (issue 14): a member that
// loses a share of the media arriving on its links gets the lost packets back from its neighbours
// (PacketRepairRequest/Data) or, last, from the "origin" (fetchOrigin → originPacket), all within
// their playout deadlines, and each through the deliver path with how it came.
import { afterEach, describe, expect, it } from 'vitest';
import { LIVE_PROTOCOL, MeshNode, type MeshNodeOptions } from '@chunkycast/sdk/core';
import type { DeliveryPath } from '@chunkycast/engine';
import type { PeerId, SignalData } from '@chunkycast/wire';
import { injectFaults } from '../src/testing.js';
import { until } from './until.js';

const LOOPBACK_RTC = { iceServers: [], bindAddress: '127.0.0.1' };
const SOURCE_ID = 1000;
const SLICES = 16;
/** One row of 16 packets (one per slice) every this long: one slice's packet interval. */
const ROW_INTERVAL_MS = 200;
/** How far behind publication the members' players play. */
const PLAYOUT_LEAD_MS = 5000;
const LOSSY = 3;

const payloadFor = (n: number): Uint8Array => new Uint8Array(600).fill(n % 251);

interface Member {
  readonly node: MeshNode;
  readonly received: Map<string, { payload: Uint8Array; via: DeliveryPath }>;
}

let running: MeshNode[] = [];
afterEach(async () => {
  await Promise.all(running.map((n) => n.stop(false)));
  running = [];
});

describe('engine packet repair over WebRTC on loopback', () => {
  it('recovers the packets a lossy member drops, from neighbours first', async () => {
    const ids = [1, 2, LOSSY];
    const nodes = new Map<PeerId, MeshNode>();
    const members = new Map<PeerId, Member>();
    /** Packets each member asked the origin for. */
    const originAsks = new Map<PeerId, number>();
    const make = (
      id: PeerId,
      role: 'member' | 'source',
      received?: Map<string, { payload: Uint8Array; via: DeliveryPath }>,
    ): MeshNode => {
      const options: MeshNodeOptions = {
        id,
        sourceId: SOURCE_ID,
        role,
        targetLoadSlices: 16,
        maxLoadSlices: role === 'source' ? 16 : 24,
        // A shorter grace than live HLS needs: loopback delivers in milliseconds, and it leaves the
        // neighbours most of the lead before the origin's turn.
        protocol: { ...LIVE_PROTOCOL, repairGraceMs: 300 },
        seed: id,
        rtcConfig: LOOPBACK_RTC,
        signal: (to: PeerId, data: SignalData) => {
          setTimeout(() => nodes.get(to)?.handleSignal(id, data), 1);
        },
        requestBootstrap: (count: number) => {
          const others = ids.filter((m) => m !== id && nodes.get(m) !== undefined);
          setTimeout(() => nodes.get(id)?.bootstrap(others.slice(0, count)), 1);
        },
        deliver: (slice, seq, payload, _from, _hops, via) => {
          received?.set(`${slice}:${seq}`, { payload: payload.slice(), via });
        },
        ...(role === 'member'
          ? {
              // The "origin" knows every packet of the stream.
              fetchOrigin: (slice: number, seqs: readonly number[]) => {
                const self = nodes.get(id);
                originAsks.set(id, (originAsks.get(id) ?? 0) + seqs.length);
                for (const seq of seqs) self?.originPacket(slice, seq, payloadFor(seq * SLICES + slice));
              },
            }
          : {}),
      };
      return new MeshNode(injectFaults(options, id === LOSSY ? { dropReceivedDataFraction: 0.1 } : {}));
    };
    const source = make(SOURCE_ID, 'source');
    nodes.set(SOURCE_ID, source);
    for (const id of ids) {
      const received = new Map<string, { payload: Uint8Array; via: DeliveryPath }>();
      const node = make(id, 'member', received);
      nodes.set(id, node);
      members.set(id, { node, received });
    }
    running = [...nodes.values()];
    for (const id of ids) nodes.get(id)?.start();
    source.start();
    await until(() => source.engine.currentSliceSources().every((s) => s !== null), 20_000, 'slice sources');

    let published = 0;
    const startedAt = performance.now();
    const publisher = setInterval(() => {
      for (let i = 0; i < SLICES; i++) source.publish(payloadFor(published++));
    }, ROW_INTERVAL_MS);
    const lossy = members.get(LOSSY);
    if (lossy === undefined) throw new Error('no lossy member');
    try {
      // Row k (sequence k on every slice) is published about k intervals after the start and
      // played PLAYOUT_LEAD_MS later.
      const clock = { zeroAtMs: startedAt + PLAYOUT_LEAD_MS, packetIntervalMs: ROW_INTERVAL_MS };
      for (const id of ids) nodes.get(id)?.playout({ ...clock, fromMs: performance.now() });
      // A window of rows published once the trees and the adverts have settled.
      const firstRow = Math.ceil((performance.now() - startedAt) / ROW_INTERVAL_MS) + 30;
      const lastRow = firstRow + 40;
      const holds = (m: Member): boolean => {
        for (let seq = firstRow; seq <= lastRow; seq++)
          for (let s = 0; s < SLICES; s++) if (!m.received.has(`${s}:${seq}`)) return false;
        return true;
      };
      await until(() => holds(lossy), 40_000, 'the lossy member to hold every packet of the window');
      const vias = new Map<DeliveryPath, number>();
      for (let seq = firstRow; seq <= lastRow; seq++)
        for (let s = 0; s < SLICES; s++) {
          const got = lossy.received.get(`${s}:${seq}`);
          expect(got?.payload).toEqual(payloadFor(seq * SLICES + s));
          if (got !== undefined) vias.set(got.via, (vias.get(got.via) ?? 0) + 1);
        }
      // It did lose packets, and got them back other than down the tree: neighbours first.
      expect(lossy.node.counters.injectedLosses).toBeGreaterThan(0);
      expect(vias.get('repair') ?? 0).toBeGreaterThan(0);
      expect(lossy.node.counters.actionsFailed).toBe(0);
      // What came from the origin, the engine asked for (and nothing else reached it that way).
      expect(vias.get('origin') ?? 0).toBeLessThanOrEqual(originAsks.get(LOSSY) ?? 0);
    } finally {
      clearInterval(publisher);
    }
  }, 90_000);
});
