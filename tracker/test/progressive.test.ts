// The true source's push while the packager writes (issue 14): the cut into fixed-size packets, the
// packet size from the stream's rate, the successor of a segment URI, and one segment streamed from
// a stand-in origin into signed packets that verify and reassemble to the bytes written.
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  MAX_MEDIA_PACKET_PAYLOAD_BYTES,
  OPEN_SEGMENT_COUNT,
  decodeMediaPacket,
  packetSigningBytes,
  type MediaPacket,
} from '@chunkycast/wire';
import { GROWING_HEADER } from '../src/ll-hls/index.js';
import {
  MIN_PACKET_BYTES,
  PacketCutter,
  packetBytesFor,
  pushWhileWritten,
} from '../src/source/progressive.js';
import { successorUri } from '../src/source/true-source.js';

describe('PacketCutter', () => {
  it('cuts full packets as bytes come, then the tail', () => {
    const cutter = new PacketCutter(1000);
    const bytes = Uint8Array.from({ length: 5500 }, (_, i) => (i * 7) & 0xff);
    const out: Uint8Array[] = [];
    // Chunks that straddle packet boundaries.
    for (const [from, to] of [
      [0, 1],
      [1, 999],
      [999, 2500],
      [2500, 2500],
      [2500, 5500],
    ] as const)
      out.push(...cutter.push(bytes.subarray(from, to)));
    expect(out.map((p) => p.length)).toEqual([1000, 1000, 1000, 1000, 1000]);
    out.push(...cutter.finish());
    expect(out.map((p) => p.length)).toEqual([1000, 1000, 1000, 1000, 1000, 500]);
    expect(Buffer.concat(out)).toEqual(Buffer.from(bytes));
    expect(cutter.packets).toBe(6);
    expect(cutter.bytes).toBe(5500);
  });

  it('gives an empty segment one empty packet, and an exact one no tail', () => {
    const empty = new PacketCutter(1000);
    expect(empty.finish().map((p) => p.length)).toEqual([0]);
    const exact = new PacketCutter(1000);
    expect(exact.push(new Uint8Array(2000))).toHaveLength(2);
    expect(exact.finish()).toHaveLength(0);
  });
});

describe('packet size from the stream rate', () => {
  it('fills a packet in about 125 ms, within its bounds', () => {
    expect(packetBytesFor(null)).toBe(MAX_MEDIA_PACKET_PAYLOAD_BYTES);
    expect(packetBytesFor(112_000)).toBe(14_000); // the test stream, ~900 kbit/s
    expect(packetBytesFor(1000)).toBe(MIN_PACKET_BYTES);
    expect(packetBytesFor(10_000_000)).toBe(MAX_MEDIA_PACKET_PAYLOAD_BYTES);
    expect(packetBytesFor(Number.NaN)).toBe(MAX_MEDIA_PACKET_PAYLOAD_BYTES);
  });
});

describe('successorUri', () => {
  it('adds one to the last run of digits, keeping its width', () => {
    expect(successorUri('live12.ts')).toBe('live13.ts');
    expect(successorUri('seg_0099.ts')).toBe('seg_0100.ts');
    expect(successorUri('v2/live9.m4s')).toBe('v2/live10.m4s');
    expect(successorUri('live.ts')).toBeNull();
    expect(successorUri('a1/live.ts')).toBeNull();
    expect(successorUri('chunk-7')).toBe('chunk-8');
  });
});

let server: Server | null = null;
afterEach(async () => {
  await new Promise<void>((resolve) => {
    if (server === null) resolve();
    else
      server.close(() => {
        resolve();
      });
  });
  server = null;
});

/** A stand-in origin: `growing` streams `bytes` in chunks with the growing header; else a plain file. */
async function origin(bytes: Uint8Array, growing: boolean, breakAfter?: number): Promise<string> {
  server = createServer((req, res) => {
    if (req.url !== '/live/live7.ts') {
      res.writeHead(404).end();
      return;
    }
    if (!growing) {
      res.writeHead(200, { 'Content-Length': bytes.length }).end(Buffer.from(bytes));
      return;
    }
    res.writeHead(206, { [GROWING_HEADER]: '1', 'Content-Type': 'video/mp2t' });
    let at = 0;
    const step = (): void => {
      if (breakAfter !== undefined && at >= breakAfter) {
        res.destroy();
        return;
      }
      if (at >= bytes.length) {
        res.end();
        return;
      }
      res.write(Buffer.from(bytes.subarray(at, at + 3000)));
      at += 3000;
      setTimeout(step, 2);
    };
    step();
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/live/live7.ts`;
}

describe('pushWhileWritten', () => {
  it('streams a growing segment into signed packets that verify and reassemble to its bytes', async () => {
    const { privateKey, publicKey } = await crypto.subtle.generateKey({ name: 'Ed25519' }, false, [
      'sign',
      'verify',
    ]);
    const bytes = Uint8Array.from({ length: 40_000 }, (_, i) => (i * 31 + (i >> 8)) & 0xff);
    const url = await origin(bytes, true);
    const published: { packet: MediaPacket; number: number }[] = [];
    const outcome = await pushWhileWritten({
      url,
      stream: 'live',
      sequence: 7,
      firstPacket: 160,
      packetBytes: 4096,
      signingKey: privateKey,
      publish: (encoded, number) => {
        const decoded = decodeMediaPacket(encoded);
        if (!decoded.ok) throw new Error(decoded.error.message);
        published.push({ packet: decoded.packet, number });
      },
    });
    expect(outcome.kind).toBe('complete');
    if (outcome.kind !== 'complete') return;
    expect(outcome.bytes).toBe(40_000);
    expect(outcome.packets).toBe(10); // 9 full, the tail of 3136 bytes
    expect(outcome.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(published.map((p) => p.number)).toEqual(Array.from({ length: 10 }, (_, i) => 160 + i));
    expect(Buffer.concat(published.map((p) => p.packet.bytes))).toEqual(Buffer.from(bytes));
    for (const [index, { packet }] of published.entries()) {
      expect(packet.count).toBe(OPEN_SEGMENT_COUNT);
      expect(packet.index).toBe(index);
      const signed = packet.signed;
      if (signed === undefined) throw new Error('unsigned packet');
      const digest = new Uint8Array(createHash('sha256').update(packet.bytes).digest());
      const message = packetSigningBytes('live', { segment: 7, index, signed }, digest);
      expect(
        await crypto.subtle.verify(
          'Ed25519',
          publicKey,
          Uint8Array.from(signed.signature),
          Uint8Array.from(message),
        ),
      ).toBe(true);
      expect(outcome.packetHashes.slice(index * 32, index * 32 + 32)).toBe(
        Buffer.from(digest).toString('hex').slice(0, 32),
      );
    }
  });

  it('sends nothing for an origin that does not stream the segment in progress', async () => {
    const { privateKey } = await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']);
    const url = await origin(new Uint8Array(10_000), false);
    let sent = 0;
    const options = {
      stream: 'live',
      sequence: 7,
      firstPacket: 0,
      packetBytes: 4096,
      signingKey: privateKey,
      publish: () => sent++,
    };
    expect(await pushWhileWritten({ ...options, url })).toEqual({ kind: 'notGrowing', status: 200 });
    expect(await pushWhileWritten({ ...options, url: url.replace('live7', 'live8') })).toEqual({
      kind: 'notGrowing',
      status: 404,
    });
    expect(sent).toBe(0);
  });

  it('reports a stream that breaks midway with the packets already sent', async () => {
    const { privateKey } = await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']);
    const url = await origin(new Uint8Array(40_000), true, 15_000);
    let sent = 0;
    const outcome = await pushWhileWritten({
      url,
      stream: 'live',
      sequence: 7,
      firstPacket: 0,
      packetBytes: 4096,
      signingKey: privateKey,
      publish: () => sent++,
    });
    expect(outcome.kind).toBe('broken');
    if (outcome.kind === 'broken') expect(outcome.packets).toBe(3);
    expect(sent).toBe(3);
  });
});
