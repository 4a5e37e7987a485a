/**
 * The lab's scenarios: who sits behind which NAT with which uplink. The test stream is about
 * 0.9 Mbit/s (800 kbit/s video + 96 kbit/s audio), so one slice of 16 is about 56 kbit/s.
 */
import type { HomeSpec, NatKind } from './network.js';

const DOWNLINK_KBPS = 20_000;

export interface Scenario {
  readonly description: string;
  readonly homes: readonly HomeSpec[];
  /** ICE servers the tracker hands out. */
  readonly ice: 'stun+turn' | 'none';
  /** Upload capacity: measured by the SDK, or fixed load thresholds from attributes. */
  readonly capacity: 'measured' | 'fixed';
  readonly defaultDurationS: number;
}

/** `[nat, uplink Mbit/s, LAN group?]` → a home description. */
const homes = (list: readonly (readonly [NatKind, number, string?])[]): HomeSpec[] =>
  list.map(([nat, uplinkMbps, lanGroup], i) => ({
    name: `v${i + 1}`,
    nat,
    uplinkKbps: Math.round(uplinkMbps * 1000),
    downlinkKbps: DOWNLINK_KBPS,
    ...(lanGroup === undefined ? {} : { lanGroup }),
  }));

const MIXED = homes([
  ['port-preserving', 0.5],
  ['port-preserving', 1],
  ['port-preserving', 2],
  ['symmetric', 2],
  ['symmetric', 4],
  ['lan', 8, 'home-lan'],
  ['lan', 8, 'home-lan'],
  ['public', 20],
]);

export const SCENARIOS: Readonly<Record<string, Scenario>> = {
  mixed: {
    description:
      '8 viewers: 3 behind port-preserving NATs, 2 behind symmetric NATs, 2 on one LAN behind one NAT, 1 public; uplinks 0.5–20 Mbit/s; STUN and TURN',
    homes: MIXED,
    ice: 'stun+turn',
    capacity: 'measured',
    defaultDurationS: 120,
  },
  'mixed-fixed': {
    description:
      '`mixed` with fixed load thresholds from attributes (TL 16, ML 24 slices): the behaviour before measured capacity',
    homes: MIXED,
    ice: 'stun+turn',
    capacity: 'fixed',
    defaultDurationS: 120,
  },
  'no-ice-servers': {
    description: '`mixed` without STUN or TURN: host candidates only, as the SDK shipped before',
    homes: MIXED,
    ice: 'none',
    capacity: 'measured',
    defaultDurationS: 120,
  },
  'thin-uplinks': {
    description: '8 viewers, six of them with uplinks below one stream copy (0.9 Mbit/s); STUN and TURN',
    homes: homes([
      ['port-preserving', 0.3],
      ['port-preserving', 0.5],
      ['symmetric', 0.5],
      ['symmetric', 0.6],
      ['lan', 0.8, 'home-lan'],
      ['lan', 0.8, 'home-lan'],
      ['port-preserving', 2],
      ['public', 4],
    ]),
    ice: 'stun+turn',
    capacity: 'measured',
    defaultDurationS: 120,
  },
  smoke: {
    description:
      '4 viewers for `npm test`: one behind a port-preserving NAT on a thin 0.5 Mbit/s uplink, one behind a port-preserving NAT, one behind a symmetric NAT, one public; STUN and TURN',
    homes: homes([
      ['port-preserving', 0.5],
      ['port-preserving', 4],
      ['symmetric', 4],
      ['public', 8],
    ]),
    ice: 'stun+turn',
    capacity: 'measured',
    defaultDurationS: 60,
  },
};
