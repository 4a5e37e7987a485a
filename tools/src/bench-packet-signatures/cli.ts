/**
 * `npm run bench:packet-signatures -- [--packets N] [--packet-bytes B] [--out DIR]`: what checking a
 * packet of a segment still being written costs (issue 14). The true source signs every packet
 * (Ed25519, WebCrypto) and every viewer verifies it before forwarding (WebCrypto) after hashing it
 * (SHA-256, @noble/hashes in the SDK); the alternative, signed announcements of packet groups
 * flooded over every link, is costed from the same figures in docs/low-latency.md. Measured in
 * Node (the true source) and in headless Chromium (a viewer). Writes DIR/result.json and
 * DIR/report.md. Its one socket is a page server on 127.0.0.1 (WebCrypto wants a secure context).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { sha256 } from '@noble/hashes/sha2.js';
import { noPositionals, numberOption, parseCommandLine, stringValue } from '../lib/args.js';
import { resolveOut } from '../lib/out-dir.js';
import { fromRoot } from '../lib/paths.js';
import { launchBrowser } from '../viewers/browser.js';

const USAGE = `usage: npm run bench:packet-signatures -- [--packets N] [--packet-bytes B] [--out DIR]

  --packets N        packets per measurement (default 2000)
  --packet-bytes B   payload bytes per packet (default 14000: the test stream at 125 ms per packet)
  --out DIR          output directory (default out/bench-packet-signatures)`;

const opts = parseCommandLine(
  'bench:packet-signatures',
  USAGE,
  { packets: { type: 'string' }, 'packet-bytes': { type: 'string' }, out: { type: 'string' } },
  (parsed) => {
    noPositionals(parsed);
    return {
      packets: Math.floor(numberOption('packets', stringValue(parsed, 'packets'), 2000, { min: 10 })),
      packetBytes: Math.floor(
        numberOption('packet-bytes', stringValue(parsed, 'packet-bytes'), 14_000, { min: 1, max: 16_384 }),
      ),
      out: resolveOut(stringValue(parsed, 'out') ?? fromRoot('out', 'bench-packet-signatures')),
    };
  },
);

/** Microseconds per operation: sign, verify and hash over `packets` distinct messages. */
interface Costs {
  readonly signUs: number | null;
  readonly verifyUs: number;
  readonly sha256Us: number;
  readonly sha256Engine: string;
}

/** The signed message's size: tag, stream id, segment, index, size, number, SHA-256. */
const SIGNED_MESSAGE_BYTES = 20 + 1 + 4 + 4 + 2 + 2 + 6 + 32;

async function nodeCosts(packets: number, packetBytes: number): Promise<Costs> {
  const { privateKey, publicKey } = await crypto.subtle.generateKey({ name: 'Ed25519' }, false, [
    'sign',
    'verify',
  ]);
  const messages = Array.from({ length: packets }, (_, i) => {
    const m = new Uint8Array(SIGNED_MESSAGE_BYTES);
    new DataView(m.buffer).setUint32(0, i, true);
    return m;
  });
  let t = performance.now();
  const signatures: Uint8Array<ArrayBuffer>[] = [];
  for (const m of messages)
    signatures.push(new Uint8Array(await crypto.subtle.sign('Ed25519', privateKey, m)));
  const signUs = ((performance.now() - t) * 1000) / packets;
  t = performance.now();
  for (const [i, m] of messages.entries()) {
    const signature = signatures[i];
    if (signature === undefined || !(await crypto.subtle.verify('Ed25519', publicKey, signature, m)))
      throw new Error('a signature did not verify');
  }
  const verifyUs = ((performance.now() - t) * 1000) / packets;
  const payload = new Uint8Array(packetBytes).fill(7);
  t = performance.now();
  for (let i = 0; i < packets; i++) {
    payload[0] = i & 0xff;
    sha256(payload);
  }
  const sha256Us = ((performance.now() - t) * 1000) / packets;
  return { signUs, verifyUs, sha256Us, sha256Engine: '@noble/hashes (as the SDK)' };
}

/** In a page: WebCrypto verify (as the SDK does) and WebCrypto digest (a bound on a native hash). */
async function chromiumCosts(packets: number, packetBytes: number): Promise<Costs> {
  // WebCrypto needs a secure context: a page from 127.0.0.1 is one, about:blank is not.
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html' }).end('<!doctype html><title>bench</title>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const browser = await launchBrowser({ askMicrophone: false });
  try {
    const page = await browser.context.newPage();
    await page.goto(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    return await page.evaluate(
      async ({ packets, packetBytes, messageBytes }) => {
        const { privateKey, publicKey } = await crypto.subtle.generateKey({ name: 'Ed25519' }, false, [
          'sign',
          'verify',
        ]);
        const messages = Array.from({ length: packets }, (_, i) => {
          const m = new Uint8Array(messageBytes);
          new DataView(m.buffer).setUint32(0, i, true);
          return m;
        });
        const signatures: ArrayBuffer[] = [];
        for (const m of messages) signatures.push(await crypto.subtle.sign('Ed25519', privateKey, m));
        let t = performance.now();
        for (const [i, m] of messages.entries()) {
          const signature = signatures[i];
          if (signature === undefined || !(await crypto.subtle.verify('Ed25519', publicKey, signature, m)))
            throw new Error('a signature did not verify');
        }
        const verifyUs = ((performance.now() - t) * 1000) / packets;
        const payload = new Uint8Array(packetBytes).fill(7);
        t = performance.now();
        for (let i = 0; i < packets; i++) {
          payload[0] = i & 0xff;
          await crypto.subtle.digest('SHA-256', payload);
        }
        const sha256Us = ((performance.now() - t) * 1000) / packets;
        return { signUs: null, verifyUs, sha256Us, sha256Engine: 'WebCrypto digest (async)' };
      },
      { packets, packetBytes, messageBytes: SIGNED_MESSAGE_BYTES },
    );
  } finally {
    await browser.close();
    server.close();
  }
}

const node = await nodeCosts(opts.packets, opts.packetBytes);
process.stderr.write(`bench:packet-signatures: node done\n`);
const chromium = await chromiumCosts(opts.packets, opts.packetBytes);
process.stderr.write(`bench:packet-signatures: chromium done\n`);
/** Packets a second of the test stream (~900 kbit/s) at this packet size. */
const packetsPerSecond = 112_500 / opts.packetBytes;
const result = {
  packets: opts.packets,
  packetBytes: opts.packetBytes,
  signedHeaderOverheadBytes: 72,
  node,
  chromium,
  perViewer: {
    packetsPerSecond,
    verifyCpuPctOfCore: (packetsPerSecond * chromium.verifyUs) / 10_000,
    overheadPctOfBytes: (72 / opts.packetBytes) * 100,
  },
  perSource: { signCpuPctOfCore: node.signUs === null ? null : (packetsPerSecond * node.signUs) / 10_000 },
};
mkdirSync(opts.out, { recursive: true });
writeFileSync(join(opts.out, 'result.json'), `${JSON.stringify(result, null, 2)}\n`);
const us = (v: number | null): string => (v === null ? '—' : v.toFixed(1));
const report = `# Packet signatures: cost per packet

${opts.packets} packets of ${opts.packetBytes} bytes; µs per packet.

| where | sign (Ed25519) | verify (Ed25519) | SHA-256 of the payload |
|---|---|---|---|
| Node (true source) | ${us(node.signUs)} | ${us(node.verifyUs)} | ${us(node.sha256Us)} (${node.sha256Engine}) |
| Chromium (viewer) | — | ${us(chromium.verifyUs)} | ${us(chromium.sha256Us)} (${chromium.sha256Engine}) |

At ${packetsPerSecond.toFixed(1)} packets/s (a ~900 kbit/s stream): a viewer spends
${result.perViewer.verifyCpuPctOfCore.toFixed(3)}% of a core on verification; the signed header adds
${result.perViewer.overheadPctOfBytes.toFixed(2)}% to the bytes; the source spends
${result.perSource.signCpuPctOfCore === null ? '—' : result.perSource.signCpuPctOfCore.toFixed(3)}% of a core signing.
`;
writeFileSync(join(opts.out, 'report.md'), report);
process.stdout.write(report);
