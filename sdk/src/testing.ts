// @chunkycast/sdk/testing — INTERNAL: the project's own tests use it to make a viewer misbehave on
// purpose. Not part of the product API; it may change or go without notice. Nothing in here is
// reachable from <mesh-player>'s attributes or the public option types.
//
//   const player = document.createElement('mesh-player');
//   injectFaults(player, { corruptForwardedData: true }); // before it is connected to the page
//
// A <mesh-player> passes its faults to every session it starts; `injectFaults` also marks the
// options of MeshSession.connect or of new MeshNode directly.
export {
  FORGED_SEQUENCE_OFFSET,
  faultsOf,
  parseFaultInjection,
  withFaults as injectFaults,
  type FaultInjection,
} from './faults.js';
