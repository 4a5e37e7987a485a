export * from './bloom.js';
export * from './messages.js';
export * from './codec.js';
