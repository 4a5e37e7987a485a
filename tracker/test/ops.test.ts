/** Operations: the open Prometheus /metrics, and a shutdown that lets clients reconnect at once. */
import { request } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESUME_OUTCOMES } from '@chunkycast/tracker';
import type { ConnectivityReport } from '@chunkycast/wire';
import { AUTH, cleanUpAfterEach, Client, connect, eventually, KEY, start, within } from './ws-client.js';

cleanUpAfterEach();

let originDir: string;
const SEGMENT = Buffer.alloc(4 * 1024 * 1024, 7);
beforeAll(async () => {
  originDir = await mkdtemp(join(tmpdir(), 'chunkycast-ops-'));
  await writeFile(join(originDir, 'seg.ts'), SEGMENT);
  await writeFile(join(originDir, 'small.ts'), Buffer.alloc(1000, 1));
});
afterAll(async () => {
  await rm(originDir, { recursive: true, force: true });
});

/**
 * name{labels} → value, from the text format; every sample's family must have HELP and TYPE (a
 * histogram's _bucket, _sum and _count samples belong to its family). Families are separated by
 * blank lines; prom-client writes a NaN as `Nan` (Prometheus parses either).
 */
function parseExposition(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  const described = new Set<string>();
  const typed = new Set<string>();
  for (const line of text.trimEnd().split('\n')) {
    if (line === '') continue;
    const help = /^# HELP ([a-z_][a-z0-9_]*) .+$/.exec(line);
    const type = /^# TYPE ([a-z_][a-z0-9_]*) (counter|gauge|histogram|summary)$/.exec(line);
    if (help?.[1] !== undefined) described.add(help[1]);
    else if (type?.[1] !== undefined) typed.add(type[1]);
    else {
      const sample =
        /^([a-z_][a-z0-9_]*)(\{(?:[a-z_]+="[^"]*",?)*\})? (-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|\+Inf|NaN|Nan)$/.exec(
          line,
        );
      if (sample?.[1] === undefined || sample[3] === undefined) throw new Error(`not a sample line: ${line}`);
      const family = [sample[1], sample[1].replace(/_(bucket|sum|count)$/, '')].find((name) =>
        typed.has(name),
      );
      expect(family !== undefined && described.has(family), `HELP and TYPE before ${sample[1]}`).toBe(true);
      samples.set(sample[1] + (sample[2] ?? ''), Number(sample[3]));
    }
  }
  return samples;
}

describe('/metrics', () => {
  it('exposes the counters in the Prometheus text format, naming no stream or peer', async () => {
    const tracker = await start({ originDir });
    const viewer = await connect(tracker);
    const welcome = await viewer.join('secret-stream-name');
    const source = await connect(tracker);
    await source.join('secret-stream-name', 'source', KEY);
    viewer.send({ type: 'signal', to: welcome.sourceId, data: { type: 'offer', sdp: 'v=0' } });
    await source.next('signal');
    viewer.send('nope');
    await viewer.error('malformed');
    const resumer = await connect(tracker);
    await resumer.join('secret-stream-name', 'viewer', { resume: 'bogus.ticket' });
    const media = await fetch(`${tracker.url}/live/small.ts`);
    await media.arrayBuffer();

    const res = await fetch(`${tracker.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const text = await res.text();
    expect(text).not.toContain('secret-stream-name');
    for (const id of [welcome.peerId, welcome.sourceId]) expect(text).not.toContain(String(id));
    const samples = parseExposition(text);
    const json = tracker.metrics();
    expect(samples.get('chunkycast_tracker_sessions')).toBe(3);
    expect(samples.get('chunkycast_tracker_members{role="viewer"}')).toBe(2);
    expect(samples.get('chunkycast_tracker_members{role="source"}')).toBe(1);
    expect(samples.get('chunkycast_tracker_swarms')).toBe(1);
    expect(samples.get('chunkycast_tracker_joins_total')).toBe(3);
    expect(samples.get('chunkycast_tracker_signals_relayed_total')).toBe(1);
    expect(samples.get('chunkycast_tracker_errors_total{code="malformed"}')).toBe(1);
    expect(samples.get('chunkycast_tracker_errors_total{code="badKey"}')).toBe(0);
    expect(samples.get('chunkycast_tracker_resumes_total{outcome="invalid"}')).toBe(1);
    for (const outcome of RESUME_OUTCOMES)
      expect(samples.has(`chunkycast_tracker_resumes_total{outcome="${outcome}"}`)).toBe(true);
    expect(samples.get('chunkycast_tracker_limit_hits_total{limit="messageRate"}')).toBe(0);
    expect(samples.get('chunkycast_tracker_disconnects_total{reason="client"}')).toBe(0);
    expect(samples.get('chunkycast_tracker_origin_bytes_total{role="viewers"}')).toBe(1000);
    expect(samples.get('chunkycast_tracker_origin_bytes_total{role="source"}')).toBe(0);
    expect(samples.get('chunkycast_tracker_frames_in_total')).toBe(json.framesIn);
    expect(samples.get('process_resident_memory_bytes')).toBeGreaterThan(1_000_000);
    expect(samples.get('chunkycast_tracker_uptime_seconds')).toBeGreaterThanOrEqual(0);
    expect(samples.get('process_start_time_seconds')).toBe(json.startTimeS);
    // The JSON view holds the same numbers.
    expect(json.errors.malformed).toBe(1);
    expect(json.resumes.invalid).toBe(1);
    expect(await tracker.prometheus()).toContain('# TYPE chunkycast_tracker_limit_hits_total counter');
    expect((await fetch(`${tracker.url}/metrics`, { method: 'POST' })).status).toBe(405);
  });

  it('keeps each tracker in a process to its own counters, beside the process metrics', async () => {
    const [a, b] = [await start(), await start()];
    const viewer = await connect(a);
    await viewer.join('own-counters');
    const [fromA, fromB] = [parseExposition(await a.prometheus()), parseExposition(await b.prometheus())];
    expect(fromA.get('chunkycast_tracker_joins_total')).toBe(1);
    expect(fromB.get('chunkycast_tracker_joins_total')).toBe(0);
    // prom-client's defaults: CPU, file descriptors, event-loop lag, heap, GC as a histogram.
    for (const samples of [fromA, fromB]) {
      expect(samples.get('process_cpu_user_seconds_total')).toBeGreaterThan(0);
      expect(samples.has('nodejs_eventloop_lag_seconds')).toBe(true);
      expect(samples.has('nodejs_heap_size_used_bytes')).toBe(true);
    }
    expect(await a.prometheus()).toContain('# TYPE nodejs_gc_duration_seconds histogram');
  });

  it('keeps counting origin bytes across /debug/origin/reset (counters never go back)', async () => {
    const tracker = await start({ originDir });
    for (let i = 0; i < 2; i++) await (await fetch(`${tracker.url}/live/small.ts`)).arrayBuffer();
    const reset = await fetch(`${tracker.url}/debug/origin/reset`, { method: 'POST', headers: AUTH });
    expect(reset.status).toBe(200);
    await (
      await fetch(`${tracker.url}/live/small.ts`, { headers: { 'X-Chunkycast-Role': 'source' } })
    ).arrayBuffer();
    expect(tracker.originStats().viewerMediaBytes).toBe(0);
    expect(tracker.metrics().originMediaBytes).toEqual({ source: 1000, viewers: 2000 });
    expect(tracker.metrics().originMediaRequests).toEqual({ source: 1, viewers: 2 });
  });
});

describe("peers' connectivity in /metrics and the debug view", () => {
  const base = {
    parents: [null],
    children: [[]],
    meshBytes: 0,
    originBytes: 0,
    uploadBytes: 0,
    stalls: 0,
    playing: true,
  };
  const connectivity = (
    connected: Partial<ConnectivityReport['connected']>,
    open: Partial<ConnectivityReport['open']>,
    failed: number,
    relayedBytes: number,
  ): ConnectivityReport => {
    const zero = { host: 0, srflx: 0, prflx: 0, relay: 0 };
    return { open: { ...zero, ...open }, connected: { ...zero, ...connected }, failed, relayedBytes };
  };

  it('counts the growth of each member’s reports; open links are a gauge; a resumed session starts a baseline', async () => {
    const tracker = await start();
    const metric = async (): Promise<Map<string, number>> =>
      parseExposition(await (await fetch(`${tracker.url}/metrics`)).text());
    const a = await connect(tracker);
    const wa = await a.join('live');
    const b = await connect(tracker);
    const wb = await b.join('live');
    a.send({
      type: 'report',
      report: { ...base, connectivity: connectivity({ host: 2 }, { host: 2 }, 1, 0) },
    });
    a.send({
      type: 'report',
      report: { ...base, connectivity: connectivity({ host: 3, relay: 1 }, { host: 2, relay: 1 }, 2, 5000) },
    });
    b.send({
      type: 'report',
      report: { ...base, connectivity: connectivity({ srflx: 4 }, { srflx: 3 }, 0, 0) },
    });
    // An older SDK's report: no connectivity, counted as nothing.
    b.send({ type: 'report', report: base });
    b.send({
      type: 'report',
      report: { ...base, connectivity: connectivity({ srflx: 5 }, { srflx: 4 }, 0, 0) },
    });
    await a.bootstrap();
    await b.bootstrap();
    let m = await metric();
    expect(m.get('chunkycast_peer_links_connected_total{route="host"}')).toBe(3);
    expect(m.get('chunkycast_peer_links_connected_total{route="relay"}')).toBe(1);
    expect(m.get('chunkycast_peer_links_connected_total{route="srflx"}')).toBe(5);
    expect(m.get('chunkycast_peer_links_connected_total{route="prflx"}')).toBe(0);
    expect(m.get('chunkycast_peer_links_open{route="host"}')).toBe(2);
    expect(m.get('chunkycast_peer_links_open{route="relay"}')).toBe(1);
    expect(m.get('chunkycast_peer_links_open{route="srflx"}')).toBe(4);
    expect(m.get('chunkycast_peer_link_failures_total')).toBe(2);
    expect(m.get('chunkycast_peer_relayed_bytes_total')).toBe(5000);
    // Aggregates only: no peer id anywhere.
    const text = await (await fetch(`${tracker.url}/metrics`)).text();
    for (const id of [wa.peerId, wb.peerId]) expect(text).not.toContain(String(id));

    // Each member's own numbers are in the debug view, behind the broadcaster key.
    const swarm = (await (await fetch(`${tracker.url}/debug/swarm/live`, { headers: AUTH })).json()) as {
      members: { peerId: number; connectivity: ConnectivityReport | null }[];
    };
    expect(swarm.members.find((x) => x.peerId === wa.peerId)?.connectivity).toEqual(
      connectivity({ host: 3, relay: 1 }, { host: 2, relay: 1 }, 2, 5000),
    );

    // A's counts go down (a reset): a baseline, nothing subtracted.
    a.send({
      type: 'report',
      report: { ...base, connectivity: connectivity({ host: 1 }, { host: 1 }, 0, 10) },
    });
    await a.bootstrap();
    m = await metric();
    expect(m.get('chunkycast_peer_links_connected_total{route="host"}')).toBe(3);
    expect(m.get('chunkycast_peer_relayed_bytes_total')).toBe(5000);
    expect(m.get('chunkycast_peer_links_open{route="host"}')).toBe(1);

    // B leaves: its open links leave the gauge, its counts stay in the counters.
    b.close();
    await eventually(() => tracker.metrics().members.viewer === 1, 'b to leave');
    // B resumes on a new connection: its first report there is a baseline (its old connection
    // counted what it had), then only growth counts.
    const resumed = await connect(tracker);
    const wr = await resumed.join('live', 'viewer', { resume: wb.resume });
    expect(wr).toMatchObject({ peerId: wb.peerId, resumed: true });
    resumed.send({
      type: 'report',
      report: { ...base, connectivity: connectivity({ srflx: 6 }, { srflx: 2 }, 1, 0) },
    });
    resumed.send({
      type: 'report',
      report: { ...base, connectivity: connectivity({ srflx: 7 }, { srflx: 2 }, 1, 0) },
    });
    await resumed.bootstrap();
    m = await metric();
    expect(m.get('chunkycast_peer_links_connected_total{route="srflx"}')).toBe(6);
    expect(m.get('chunkycast_peer_link_failures_total')).toBe(2);
    expect(m.get('chunkycast_peer_links_open{route="srflx"}')).toBe(2);
    expect(tracker.metrics().peerLinks.connected.srflx).toBe(6);
  });
});

describe('graceful shutdown', () => {
  it('closes WebSockets with 1012, refuses new ones and lets an in-flight download finish', async () => {
    const tracker = await start({ originDir, closeGraceMs: 3_000 });
    const viewer = await connect(tracker);
    await viewer.join('live');

    // A 4 MiB download whose reader is paused when the shutdown begins.
    let closeNow = (): void => undefined;
    const closed = new Promise<void>((resolve, reject) => {
      closeNow = () => {
        tracker.close().then(resolve, reject);
      };
    });
    const body = new Promise<{ status: number; bytes: number }>((resolve, reject) => {
      const req = request(`${tracker.url}/live/seg.ts`, (res) => {
        res.pause();
        let bytes = 0;
        res.on('data', (chunk: Buffer) => (bytes += chunk.length));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, bytes });
        });
        res.on('error', reject);
        closeNow();
        setTimeout(() => res.resume(), 100);
      });
      req.on('error', reject);
      req.end();
    });

    expect(await within(viewer.closed, 'viewer closed')).toEqual({ code: 1012, reason: 'service restart' });
    expect(await within(body, 'download finished')).toEqual({ status: 200, bytes: SEGMENT.length });
    await within(closed, 'close finished');
    expect(tracker.metrics().disconnects.shutdown).toBe(1);
    await expect(Client.open(tracker.wsUrl)).rejects.toThrow();
  });
});
