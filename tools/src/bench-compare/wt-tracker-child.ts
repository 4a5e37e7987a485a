/**
 * A WebTorrent tracker (bittorrent-tracker from npm, WebSocket only) on 127.0.0.1, for the
 * comparison benchmark's p2p-media-loader arm. Prints one JSON line {"port": N} once listening;
 * exits on SIGTERM/SIGINT or when its parent's stdin pipe closes. Started by wt-tracker.ts in a
 * process of its own, so its CPU is its own and it dies with the benchmark.
 */
import type { AddressInfo } from 'node:net';
import { Server } from 'bittorrent-tracker';

const server = new Server({
  // Browsers only speak WebSocket to a tracker; no UDP announce, no stats page. The WebSocket
  // server rides on the HTTP one, so http stays on.
  udp: false,
  http: true,
  ws: true,
  stats: false,
  trustProxy: false,
});
const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));
server.on('error', (error: unknown) => {
  process.stderr.write(`wt-tracker: ${message(error)}\n`);
  process.exit(1);
});
server.on('warning', (warning: unknown) => {
  process.stderr.write(`wt-tracker warning: ${message(warning)}\n`);
});
server.on('listening', () => {
  const address = server.http.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
});
server.listen(0, '127.0.0.1');

const stop = (): void => {
  server.close(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// The parent keeps our stdin open; EOF means it is gone.
process.stdin.on('end', stop);
process.stdin.resume();
