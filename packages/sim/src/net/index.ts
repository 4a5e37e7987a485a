export * from './queue.js';
export * from './transit.js';
export * from './uplinks.js';
export * from './rendezvous.js';
export * from './graph.js';
export * from './network.js';
export * from './latency.js';
export * from './loss.js';
