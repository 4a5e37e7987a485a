// Fault injection: the project's own tests make a viewer misbehave on purpose (a liar, a forger, a
// withholder, a lossy link) to show that the others catch it. Not product API: nothing here is
// reachable from an attribute or a public option type. Tests reach it through the internal entry
// `@chunkycast/sdk/testing`, which attaches faults to a <mesh-player>, a session's options or a
// MeshNode's options under a symbol property (not enumerable, so no spread or JSON copies it).

import { MEDIA_PACKET_HEADER_BYTES } from '@chunkycast/wire';

/** What a node does wrong on purpose. */
export interface FaultInjection {
  /** Corrupt the payload of every data packet it forwards (a liar its children must cut off). */
  readonly corruptForwardedData?: boolean;
  /** Forward every data packet under its sequence + FORGED_SEQUENCE_OFFSET (a sequence forger). */
  readonly forgeForwardedSequences?: boolean;
  /** Accept children and forward them nothing (a withholder). */
  readonly withholdForwardedData?: boolean;
  /**
   * Drop this fraction (0–1) of the media messages (tree data and repair data) arriving on every
   * data channel, as if the network had lost them. The channel itself is reliable, so this is the
   * only way to make loss on loopback; control messages are not dropped. Drawn from a PRNG seeded
   * from the node's seed, so a run is reproducible.
   */
  readonly dropReceivedDataFraction?: number;
}

/** A forger's offset: far outside any honest sequence window, so its children must refuse it. */
export const FORGED_SEQUENCE_OFFSET = 1_000_000;

/**
 * The key faults are kept under. `Symbol.for`, so a test build and the page's SDK agree on it even
 * when they are two copies of this module (the demo's viewer imports the SDK from source and the
 * testing entry from wherever its bundler finds it).
 */
const FAULTS = Symbol.for('@chunkycast/sdk/testing:faults');

const NO_FAULTS: FaultInjection = Object.freeze({});

/** Attaches `faults` to `target` (an element or an options object) and returns it. */
export function withFaults<T extends object>(target: T, faults: FaultInjection): T {
  Object.defineProperty(target, FAULTS, { value: faults, enumerable: false, configurable: true });
  return target;
}

/** The faults attached to `target`, or none. */
export function faultsOf(target: object): FaultInjection {
  const faults = (target as { readonly [FAULTS]?: FaultInjection })[FAULTS];
  return faults ?? NO_FAULTS;
}

/** A forger's sequence for `seq`: FORGED_SEQUENCE_OFFSET on, wrapped to the wire's u32. */
export function forgedSequence(seq: number): number {
  return (seq + FORGED_SEQUENCE_OFFSET) >>> 0;
}

/** A liar's payload: every byte after the media header inverted (the header stays decodable). */
export function corruptedPayload(payload: Uint8Array): Uint8Array {
  const out = payload.slice();
  for (let i = MEDIA_PACKET_HEADER_BYTES; i < out.length; i++) out[i] = (out[i] ?? 0) ^ 0xff;
  return out;
}

/**
 * The demo viewer's `?fault=` parameter (which the end-to-end tests use): `corrupt-forwarded`,
 * `forge-forwarded`, `withhold-forwarded` or `drop-received:<0–1>`. Undefined when absent or
 * empty, null when not understood.
 */
export function parseFaultInjection(value: string | null): FaultInjection | null | undefined {
  if (value === null || value === '') return undefined;
  if (value === 'corrupt-forwarded') return { corruptForwardedData: true };
  if (value === 'forge-forwarded') return { forgeForwardedSequences: true };
  if (value === 'withhold-forwarded') return { withholdForwardedData: true };
  const drop = /^drop-received:(0|1|0?\.\d+)$/.exec(value);
  if (drop !== null) return { dropReceivedDataFraction: Number(drop[1]) };
  return null;
}
