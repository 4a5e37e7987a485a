// Runtime-neutral part of the SDK (no DOM elements): usable in Node by the true source and tests.
export * from './types.js';
