import { beforeEach } from 'vitest';

// The simulation tests run synchronously for seconds each. Between tests vitest only awaits
// promises, so without a macrotask turn the worker never reads the runner's RPC replies, and after a
// minute of back-to-back synchronous tests it reports "Timeout calling onTaskUpdate". One
// setImmediate per test lets those replies in.
beforeEach(async () => {
  await new Promise<void>((resolve) => {
    setImmediate(resolve);
  });
});
