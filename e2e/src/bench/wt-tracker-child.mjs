#!/usr/bin/env node
// A WebTorrent tracker (bittorrent-tracker from npm, WebSocket only) on 127.0.0.1, for the
// comparison benchmark's p2p-media-loader arm. Prints one JSON line {"port": N} once listening;
// exits on SIGTERM/SIGINT or when its parent's stdin pipe closes. Started by wt-tracker.mjs.
import { Server } from 'bittorrent-tracker';

const server = new Server({
  // Browsers only speak WebSocket to a tracker; no UDP or HTTP announce, no stats page.
  udp: false,
  http: true,
  ws: true,
  stats: false,
  trustProxy: false,
});
server.on('error', (error) => {
  process.stderr.write(`wt-tracker: ${String(error?.message ?? error)}\n`);
  process.exit(1);
});
server.on('warning', (warning) => {
  process.stderr.write(`wt-tracker warning: ${String(warning?.message ?? warning)}\n`);
});
server.on('listening', () => {
  const address = server.http.address();
  process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
});
server.listen(0, '127.0.0.1');

const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// The parent keeps our stdin open; EOF means it is gone.
process.stdin.on('end', stop);
process.stdin.resume();
