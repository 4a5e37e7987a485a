/**
 * How the tools start the simulator's CLI in a process of its own: with the Node flags
 * scripts/run-built.mjs gives it (the two lists must agree, so a run started either way costs the
 * same).
 */

/**
 * A larger young generation: simulated messages live a few hundred ms, and with the default 16 MB
 * semi-space most of them were promoted and collected by full GCs. The old generation may grow to
 * 16 GB for the largest runs.
 */
export const simulatorNodeFlags: readonly string[] = [
  '--max-semi-space-size=64',
  '--max-old-space-size=16384',
];
