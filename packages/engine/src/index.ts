export * from './random.js';
export * from './config.js';
export * from './mask.js';
export * from './types.js';
export { Engine, type EngineCounters } from './engine.js';
export { Swaplinks, type SwaplinksHost } from './swaplinks.js';
export { Repairer, type FilledPacket, type RepairCounters, type RepairHost } from './repair.js';
export { ParityError, ParitySwitch, encodeParity, recoverFromParity } from './parity.js';
