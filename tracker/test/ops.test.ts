/** Operations: the open Prometheus /metrics, and a shutdown that lets clients reconnect at once. */
import { request } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESUME_OUTCOMES } from '@chunkycast/tracker';
import { AUTH, cleanUpAfterEach, Client, connect, KEY, start, within } from './ws-client.js';

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

/** name{labels} → value, from the text format; every sample's family must have HELP and TYPE. */
function parseExposition(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  const described = new Set<string>();
  const typed = new Set<string>();
  for (const line of text.trimEnd().split('\n')) {
    const help = /^# HELP ([a-z_]+) .+$/.exec(line);
    const type = /^# TYPE ([a-z_]+) (counter|gauge)$/.exec(line);
    if (help?.[1] !== undefined) described.add(help[1]);
    else if (type?.[1] !== undefined) typed.add(type[1]);
    else {
      const sample = /^([a-z_]+)(\{[a-z_]+="[A-Za-z]+"\})? (\d+(?:\.\d+)?(?:e[+-]?\d+)?)$/.exec(line);
      if (sample?.[1] === undefined || sample[3] === undefined) throw new Error(`not a sample line: ${line}`);
      expect(described.has(sample[1]) && typed.has(sample[1]), `HELP and TYPE before ${sample[1]}`).toBe(
        true,
      );
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
    expect(tracker.prometheus()).toContain('# TYPE chunkycast_tracker_limit_hits_total counter');
    expect((await fetch(`${tracker.url}/metrics`, { method: 'POST' })).status).toBe(405);
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
