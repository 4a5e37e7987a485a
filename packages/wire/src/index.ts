export * from './bloom.js';
export * from './messages.js';
export * from './codec.js';
export * from './media.js';
export * from './tracker.js';
