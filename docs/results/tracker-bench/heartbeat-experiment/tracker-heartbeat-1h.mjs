// Experiment: the same tracker with its heartbeat sweep pushed out to one hour.
import { createTracker } from '/work/main/tracker/dist/index.js';
const port = Number(process.argv[process.argv.indexOf('--port') + 1]);
await createTracker({
  host: '127.0.0.1', port, broadcasterKey: 'bench-broadcaster-key-0123456789', publicKey: null,
  heartbeatMs: 3_600_000, maxMessagesPerSecond: 0, maxConnectionsPerAddress: 0, maxConnections: 0,
});
