/**
 * Plain HTTP connections are bounded like WebSockets: per client address, and in how long their
 * request headers may take. Raw TCP sockets over 127.0.0.1 stand in for a slow or greedy client.
 */
import { connect as tcpConnect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUpAfterEach, start, within } from './ws-client.js';

cleanUpAfterEach();

const sockets: Socket[] = [];
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy();
});

interface RawConnection {
  readonly socket: Socket;
  /** Everything the server sent, as text. */
  received(): string;
  /** Resolves when the server closes (or resets) the connection. */
  readonly ended: Promise<void>;
}

async function open(port: number): Promise<RawConnection> {
  const socket = tcpConnect({ host: '127.0.0.1', port });
  sockets.push(socket);
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    text += chunk;
  });
  const ended = new Promise<void>((resolve) => {
    socket.on('close', () => {
      resolve();
    });
  });
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  return { socket, received: () => text, ended };
}

/** Whether the connection is still open after the server has had `ms` to act on it. */
async function stillOpenAfter(connection: RawConnection, ms: number): Promise<boolean> {
  const outcome = await Promise.race([
    connection.ended.then(() => 'closed' as const),
    new Promise<'open'>((resolve) =>
      setTimeout(() => {
        resolve('open');
      }, ms),
    ),
  ]);
  return outcome === 'open';
}

describe('HTTP connection limits', () => {
  it('refuses HTTP connections beyond the per-address limit, and counts them', async () => {
    const tracker = await start({ maxHttpConnectionsPerAddress: 3 });
    const held = [];
    for (let i = 0; i < 3; i++) held.push(await open(tracker.port));
    const refused = await open(tracker.port);
    await within(refused.ended, 'the fourth connection from one address is closed');
    expect(refused.received()).toMatch(/^HTTP\/1\.1 503 /);
    expect(tracker.metrics().limitHits.httpConnectionsPerAddress).toBe(1);
    for (const connection of held) expect(await stillOpenAfter(connection, 50)).toBe(true);

    // The held ones still get answers; once one closes, a new connection is admitted.
    held[0]?.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await within(held[0]?.ended ?? Promise.resolve(), 'the answered connection closes');
    expect(held[0]?.received()).toMatch(/^HTTP\/1\.1 200 /);
    // The server sees the close a moment after the client does.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const again = await open(tracker.port);
    expect(await stillOpenAfter(again, 100)).toBe(true);
    expect(tracker.metrics().limitHits.httpConnectionsPerAddress).toBe(1);
  });

  it('closes a connection whose request headers take too long (408), and counts it', async () => {
    const tracker = await start({ httpHeadersTimeoutMs: 300 });
    const slow = await open(tracker.port);
    // Headers begun but never finished: a slow-loris.
    slow.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
    const startedMs = Date.now();
    await within(slow.ended, 'the slow connection is closed');
    // The header time plus the server's check interval (capped at the header time here).
    expect(Date.now() - startedMs).toBeLessThan(2_000);
    expect(slow.received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(tracker.metrics().limitHits.httpHeaderTime).toBe(1);
    // A prompt client is unaffected.
    expect((await fetch(`${tracker.url}/healthz`)).status).toBe(200);
  });
});
