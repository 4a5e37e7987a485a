// MeshNode's upload cap (max-upload-kbps) and its uplink samples, over real WebRTC
// (node-datachannel through simple-peer) on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { LIVE_PROTOCOL, MeshNode } from '@chunkycast/sdk/core';
import type { PeerId, SignalData } from '@chunkycast/wire';
import { UplinkEstimator, type UplinkSample } from '../src/capacity.js';
import { until } from './until.js';

const LOOPBACK_RTC = { iceServers: [], bindAddress: '127.0.0.1' };
const SOURCE_ID = 2000;
const FORWARDER = 31;
const RECEIVE_ONLY = 32;

let running: MeshNode[] = [];
afterEach(async () => {
  await Promise.all(running.map((n) => n.stop(false)));
  running = [];
});

/** The true source, a forwarder with the given cap, and a receive-only member that needs it for everything. */
function trio(maxUploadKbps: number | undefined): {
  source: MeshNode;
  forwarder: MeshNode;
  received: Map<string, number>;
} {
  const nodes = new Map<PeerId, MeshNode>();
  const received = new Map<string, number>();
  const make = (id: PeerId, role: 'member' | 'source', maxLoad: number, cap?: number): MeshNode => {
    const node = new MeshNode({
      id,
      sourceId: SOURCE_ID,
      role,
      targetLoadSlices: Math.min(16, maxLoad),
      maxLoadSlices: role === 'source' ? 16 : maxLoad,
      protocol: LIVE_PROTOCOL,
      seed: id,
      rtcConfig: LOOPBACK_RTC,
      ...(cap === undefined ? {} : { maxUploadKbps: cap }),
      signal: (to: PeerId, data: SignalData) => {
        setTimeout(() => nodes.get(to)?.handleSignal(id, data), 1);
      },
      requestBootstrap: (count: number) => {
        const others = [FORWARDER, RECEIVE_ONLY].filter((m) => m !== id);
        setTimeout(() => nodes.get(id)?.bootstrap(others.slice(0, count)), 1);
      },
      deliver: (slice: number, seq: number) => {
        if (id === RECEIVE_ONLY) received.set(`${slice}:${seq}`, performance.now());
      },
    });
    nodes.set(id, node);
    return node;
  };
  const source = make(SOURCE_ID, 'source', 16);
  const forwarder = make(FORWARDER, 'member', 24, maxUploadKbps);
  const receiveOnly = make(RECEIVE_ONLY, 'member', 0);
  running = [source, forwarder, receiveOnly];
  forwarder.start();
  receiveOnly.start();
  source.start();
  return { source, forwarder, received };
}

/** Until the forwarder roots all 16 slices (the receive-only member declines every root). */
function forwarderRootsEverySlice(source: MeshNode): Promise<void> {
  return until(
    () => source.engine.currentSliceSources().every((s) => s === FORWARDER),
    20_000,
    'the forwarder to root every slice',
  );
}

/** 16 packets of 2000 bytes every 250 ms from the source (1024 kbit/s); clear the timer to stop. */
function publishMegabit(source: MeshNode): ReturnType<typeof setInterval> {
  let published = 0;
  return setInterval(() => {
    for (let i = 0; i < 16; i++) source.publish(new Uint8Array(2000).fill(published++ % 251));
  }, 250);
}

describe('max-upload-kbps in MeshNode', () => {
  it('keeps what a forwarder writes under its cap, queueing the rest, and its samples show the backlog', async () => {
    const CAP_KBPS = 300;
    const { source, forwarder, received } = trio(CAP_KBPS);
    await forwarderRootsEverySlice(source);
    // 1024 kbit/s, all of it for the receive-only member.
    const publisher = publishMegabit(source);
    const samples: UplinkSample[] = [];
    // The session's estimator, fed as the session feeds it.
    const estimator = new UplinkEstimator();
    const measurements: number[] = [];
    const sampler = setInterval(() => {
      const sample = forwarder.uplinkSample();
      samples.push(sample);
      const m = estimator.sample(performance.now(), sample);
      if (m !== null) measurements.push(m);
    }, 100);
    let writtenKbps = 0;
    try {
      await until(() => received.size > 0, 20_000, 'the receive-only member to receive');
      const t1 = performance.now();
      const w1 = forwarder.counters.bytesWritten;
      await new Promise((resolve) => setTimeout(resolve, 4000));
      const t2 = performance.now();
      const w2 = forwarder.counters.bytesWritten;
      const kbps = ((w2 - w1) * 8) / (t2 - t1);
      writtenKbps = kbps;
      console.info(`capped at ${CAP_KBPS} kbit/s: wrote ${kbps.toFixed(0)} kbit/s while 1024 were offered`);
      // Payload plus 7% headers within the cap; a short burst and one message may sit on top.
      expect(kbps).toBeLessThanOrEqual(CAP_KBPS);
      expect(kbps).toBeGreaterThan(CAP_KBPS * 0.6);
    } finally {
      clearInterval(publisher);
      clearInterval(sampler);
    }
    // What did not fit waited in the host queue, and the link to the member was behind.
    const late = samples.slice(-10);
    expect(late.some((s) => s.queuedBytes > 0)).toBe(true);
    expect(late.every((s) => s.busyLinks >= 1 && s.backloggedLinks >= 1)).toBe(true);
    for (let i = 1; i < samples.length; i++)
      expect(samples[i]!.writtenBytes).toBeGreaterThanOrEqual(samples[i - 1]!.writtenBytes);
    // Queued, not dropped: the cap delays data, the 4 MiB host bound was never reached.
    expect(forwarder.counters.droppedForBackpressure).toBe(0);
    // To the estimator the cap is the uplink: backlogged, it drains at what the bucket lets out.
    console.info(`estimator: ${measurements.map((m) => m.toFixed(0)).join(', ')} kbit/s`);
    expect(measurements.length).toBeGreaterThan(0);
    expect(measurements.at(-1)).toBeGreaterThan(writtenKbps * 0.75);
    expect(measurements.at(-1)).toBeLessThan(writtenKbps * 1.25);
  }, 60_000);

  it('without a cap the same forwarder writes what is offered and nothing waits', async () => {
    const { source, forwarder, received } = trio(undefined);
    await forwarderRootsEverySlice(source);
    const publisher = publishMegabit(source);
    // An uplink that keeps up (loopback) is never measured: the declared loads stay.
    const estimator = new UplinkEstimator();
    const sampler = setInterval(() => estimator.sample(performance.now(), forwarder.uplinkSample()), 100);
    try {
      await until(() => received.size > 0, 20_000, 'the receive-only member to receive');
      const t1 = performance.now();
      const w1 = forwarder.counters.bytesWritten;
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const kbps = ((forwarder.counters.bytesWritten - w1) * 8) / (performance.now() - t1);
      console.info(`uncapped: wrote ${kbps.toFixed(0)} kbit/s of 1024 offered`);
      expect(kbps).toBeGreaterThan(800);
      expect(forwarder.uplinkSample().queuedBytes).toBe(0);
      expect(estimator.measurements).toBe(0);
    } finally {
      clearInterval(publisher);
      clearInterval(sampler);
    }
  }, 60_000);

  it('with its capacity measured, a backlogged forwarder keeps its channel short and drops data that waited 2 s', async () => {
    const CAP_KBPS = 300;
    const { source, forwarder, received } = trio(CAP_KBPS);
    await forwarderRootsEverySlice(source);
    // What the session does once its estimator has measured the uplink.
    forwarder.setUplinkCapacity(CAP_KBPS);
    const publisher = publishMegabit(source);
    const samples: UplinkSample[] = [];
    const sampler = setInterval(() => samples.push(forwarder.uplinkSample()), 100);
    try {
      await until(() => received.size > 0, 20_000, 'the receive-only member to receive');
      await new Promise((resolve) => setTimeout(resolve, 6000));
      const before = received.size;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      // Still delivering: what is sent is recent data, not a growing backlog.
      expect(received.size).toBeGreaterThan(before);
    } finally {
      clearInterval(publisher);
      clearInterval(sampler);
    }
    const late = samples.slice(-20);
    console.info(
      `measured 300 kbit/s, 1024 offered: dropped stale ${forwarder.counters.droppedStale}, ` +
        `channel ≤ ${Math.max(...late.map((s) => s.channelBufferedBytes))} B, queue ≤ ${Math.max(...late.map((s) => s.queuedBytes))} B`,
    );
    expect(forwarder.counters.droppedStale).toBeGreaterThan(0);
    // The channel holds 300 ms of the uplink (11 kB: the 16 KiB floor) plus one message; the host
    // queue at most 2 s of what is offered (256 kB) plus one round of the publisher.
    for (const s of late) {
      expect(s.channelBufferedBytes).toBeLessThanOrEqual(16 * 1024 + 2100);
      expect(s.queuedBytes).toBeLessThanOrEqual(((1024 * 2250) / 8) * 1.1);
    }
  }, 60_000);

  it('refuses a cap that is not a number ≥ 0', () => {
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY])
      expect(
        () =>
          new MeshNode({
            id: 5,
            sourceId: SOURCE_ID,
            role: 'member',
            targetLoadSlices: 4,
            maxLoadSlices: 6,
            seed: 5,
            rtcConfig: LOOPBACK_RTC,
            maxUploadKbps: bad,
            signal: () => undefined,
            requestBootstrap: () => undefined,
            deliver: () => undefined,
          }),
      ).toThrow(RangeError);
  });
});
