/**
 * How a WebRTC link connects, read from RTCPeerConnection.getStats(): the selected candidate pair,
 * the type of each end (host, srflx, prflx, relay), round-trip time and bytes. And the one place
 * ICE servers are adapted to node-datachannel, the RTCPeerConnection of Node (the true source).
 */
import type { PeerId, RouteType } from '@chunkycast/wire';

/**
 * Route types from the most to the least direct. A link's route is that of its less direct end:
 * `relay` if either end is a TURN relay; else `prflx` if either is peer-reflexive (a NAT mapping
 * found only during the checks, typically a symmetric NAT, one STUN could not predict); else `srflx`
 * if either is server-reflexive (a NAT mapping learned from STUN); else `host` (both ends on their
 * own interface addresses: the same machine or LAN).
 */
const DIRECTNESS: readonly RouteType[] = ['host', 'srflx', 'prflx', 'relay'];

/** The route of a pair whose ends are of these candidate types; null if either is unknown. */
export function routeOf(local: RouteType | null, remote: RouteType | null): RouteType | null {
  if (local === null || remote === null) return null;
  return DIRECTNESS.indexOf(local) >= DIRECTNESS.indexOf(remote) ? local : remote;
}

/** A candidate type as stats report it (also Firefox's older spellings), or null if unknown. */
export function candidateType(value: unknown): RouteType | null {
  switch (value) {
    case 'host':
      return 'host';
    case 'srflx':
    case 'serverreflexive':
      return 'srflx';
    case 'prflx':
    case 'peerreflexive':
      return 'prflx';
    case 'relay':
    case 'relayed':
      return 'relay';
    default:
      return null;
  }
}

/**
 * The kinds of UDP candidate a whole (non-trickle) offer or answer needs before it is sent without
 * waiting for ICE gathering to end: a host candidate always, a server-reflexive one when a STUN
 * server is configured, a relay when a TURN server is; only a relay under the `relay` policy (the
 * browser surfaces nothing else). Gathering's end can come much later than these: Chromium gathers
 * a TCP host candidate (`tcptype active`, port 9) in a later phase, ~120 ms after the UDP one on
 * loopback, and an active TCP candidate cannot reach another browser (none listens on TCP) nor the
 * true source (libjuice speaks UDP only). Waiting for it was most of a link's set-up time.
 */
export function candidateKindsWanted(config: {
  readonly iceServers?: unknown;
  readonly iceTransportPolicy?: unknown;
}): ReadonlySet<RouteType> {
  if (config.iceTransportPolicy === 'relay') return new Set(['relay']);
  const wanted = new Set<RouteType>(['host']);
  const servers: unknown[] = Array.isArray(config.iceServers) ? (config.iceServers as unknown[]) : [];
  for (const server of servers) {
    if (!isStat(server)) continue;
    const urls: unknown[] = Array.isArray(server.urls) ? (server.urls as unknown[]) : [server.urls];
    for (const url of urls) {
      if (typeof url !== 'string') continue;
      if (/^stuns?:/.test(url)) wanted.add('srflx');
      else if (/^turns?:/.test(url)) wanted.add('relay');
    }
  }
  return wanted;
}

/**
 * The transport and type of an ICE candidate line (`candidate:<foundation> <component> <transport>
 * <priority> <address> <port> typ <type> ...`, RFC 8839 §5.1), or null if it is not one.
 */
export function candidateLineKind(line: string): { udp: boolean; type: RouteType } | null {
  const m = /^(?:a=)?candidate:\S+ \d+ (\S+) \d+ \S+ \d+ typ (\S+)/.exec(line);
  if (m === null) return null;
  const type = candidateType(m[2]);
  return type === null ? null : { udp: (m[1] ?? '').toLowerCase() === 'udp', type };
}

/** Why a link was given up before its data channel opened. */
export type ConnectFailureReason = 'ice-failed' | 'connect-timeout' | 'closed-before-open' | 'error';

export interface ConnectFailure {
  readonly peer: PeerId;
  readonly reason: ConnectFailureReason;
  /** From the link's creation to giving up, ms. */
  readonly afterMs: number;
  /** We dialled (true) or answered (false). */
  readonly initiator: boolean;
}

/** One open link as its stats describe it. */
export interface PeerLinkStats {
  readonly peer: PeerId;
  /** routeOf the selected candidate pair's two ends; null until its stats are read. */
  readonly route: RouteType | null;
  readonly localCandidateType: RouteType | null;
  readonly remoteCandidateType: RouteType | null;
  readonly rttMs: number | null;
  readonly bytesSent: number;
  readonly bytesReceived: number;
  /** Media payload bytes received from this peer (tree packets and repairs), before their checks. */
  readonly mediaBytesReceived: number;
  /** When the data channel opened, Unix ms. */
  readonly openedAtMs: number;
}

/** What the selected candidate pair of a link says. */
export interface SelectedPair {
  readonly localCandidateType: RouteType | null;
  readonly remoteCandidateType: RouteType | null;
  /** routeOf the two ends; null while either is unknown. */
  readonly route: RouteType | null;
  /** The pair's current round-trip time, ms (null: not measured yet). */
  readonly rttMs: number | null;
  readonly bytesSent: number;
  readonly bytesReceived: number;
}

type Stat = Readonly<Record<string, unknown>>;

const isStat = (value: unknown): value is Stat => typeof value === 'object' && value !== null;
const count = (value: unknown): number =>
  typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;

/**
 * The selected candidate pair of a getStats() report (its values, in any order): the one the
 * `transport` names (`selectedCandidatePairId`), else a pair marked `selected` (Firefox), else a
 * nominated pair whose checks succeeded (the one with the most bytes if several). Null when there is
 * none (not connected yet, or a runtime without candidate-pair stats).
 *
 * `rttUnit`: the spec and browsers give `currentRoundTripTime` in seconds; node-datachannel's
 * polyfill passes libdatachannel's milliseconds (−1 when unknown) under the same name.
 */
export function selectedPairOf(stats: Iterable<unknown>, rttUnit: 's' | 'ms' = 's'): SelectedPair | null {
  return scanForPair(stats, rttUnit).pair;
}

/** A getStats() report: its values, and a lookup by stat id (RTCStatsReport and Map both have it). */
export interface StatsReportLike {
  values(): Iterable<unknown>;
  get(id: string): unknown;
}

/**
 * selectedPairOf for a whole report, read cheaply when `memo` knows the report's transport: then
 * the transport, its selected pair and the pair's two candidates are looked up by id (four stats)
 * instead of every stat being made into an object. Issue 17's profile of a viewer with 16 links:
 * the full scan of a report a second per link was 45 ms of main thread a second. The first read of
 * a link, and any whose transport or pair is missing, scans the whole report and remembers the
 * transport for the next.
 */
export function selectedPairOfReport(
  report: StatsReportLike,
  memo: { transportId: string | null },
  rttUnit: 's' | 'ms' = 's',
): SelectedPair | null {
  if (memo.transportId !== null) {
    const transport = report.get(memo.transportId);
    const pairId = isStat(transport) ? transport.selectedCandidatePairId : undefined;
    const pair = typeof pairId === 'string' ? report.get(pairId) : undefined;
    if (isStat(pair)) return describePair(pair, (id) => report.get(id), rttUnit);
    memo.transportId = null;
  }
  const scan = scanForPair(report.values(), rttUnit);
  memo.transportId = scan.transportId;
  return scan.pair;
}

function scanForPair(
  stats: Iterable<unknown>,
  rttUnit: 's' | 'ms',
): { pair: SelectedPair | null; transportId: string | null } {
  const byId = new Map<string, Stat>();
  const pairs: Stat[] = [];
  let selectedId: string | null = null;
  let transportId: string | null = null;
  for (const stat of stats) {
    if (!isStat(stat)) continue;
    if (typeof stat.id === 'string') byId.set(stat.id, stat);
    if (stat.type === 'candidate-pair' || stat.type === 'candidatepair') pairs.push(stat);
    else if (
      stat.type === 'transport' &&
      typeof stat.selectedCandidatePairId === 'string' &&
      selectedId === null
    ) {
      selectedId = stat.selectedCandidatePairId;
      if (typeof stat.id === 'string') transportId = stat.id;
    }
  }
  let pair = selectedId === null ? undefined : byId.get(selectedId);
  pair ??= pairs.find((p) => p.selected === true);
  if (pair === undefined) {
    const succeeded = pairs.filter((p) => p.nominated === true && p.state === 'succeeded');
    pair = succeeded.sort(
      (a, b) => count(b.bytesSent) + count(b.bytesReceived) - count(a.bytesSent) - count(a.bytesReceived),
    )[0];
  }
  if (pair === undefined) return { pair: null, transportId };
  return { pair: describePair(pair, (id) => byId.get(id), rttUnit), transportId };
}

/** A candidate pair's route, round-trip time and bytes; `lookup` finds its candidates by id. */
function describePair(pair: Stat, lookup: (id: string) => unknown, rttUnit: 's' | 'ms'): SelectedPair {
  const end = (id: unknown): RouteType | null => {
    const candidate = typeof id === 'string' ? lookup(id) : undefined;
    return isStat(candidate) ? candidateType(candidate.candidateType) : null;
  };
  const localCandidateType = end(pair.localCandidateId);
  const remoteCandidateType = end(pair.remoteCandidateId);
  const rtt = pair.currentRoundTripTime;
  return {
    localCandidateType,
    remoteCandidateType,
    route: routeOf(localCandidateType, remoteCandidateType),
    rttMs:
      typeof rtt === 'number' && Number.isFinite(rtt) && rtt >= 0
        ? Math.round((rttUnit === 's' ? rtt * 1000 : rtt) * 10) / 10
        : null,
    bytesSent: count(pair.bytesSent),
    bytesReceived: count(pair.bytesReceived),
  };
}

/**
 * Whether RTCPeerConnection here is node-datachannel's (through simple-peer's `webrtc-polyfill`):
 * browsers have a global RTCPeerConnection, Node does not (the polyfill is imported, not installed).
 */
export const ON_NODE_DATACHANNEL =
  typeof (globalThis as { RTCPeerConnection?: unknown }).RTCPeerConnection === 'undefined';

/** The ports a TURN URL without one means (RFC 7065 §3): 3478 for turn:, 5349 for turns:. */
const TURN_DEFAULT_PORT = 3478;
const TURNS_DEFAULT_PORT = 5349;
const TURN_URL = /^(turns?):(\[[0-9A-Fa-f:.]+\]|[^:?/@[\]]+)(?::(\d{1,5}))?(?:\?transport=(udp|tcp))?$/;

/** node-datachannel's own form of a TURN server (its `IceServer`). */
interface NativeTurnServer {
  readonly hostname: string;
  readonly port: number;
  readonly username: string;
  readonly password: string;
  readonly relayType: 'TurnUdp' | 'TurnTcp' | 'TurnTls';
  toString(): string;
}

/**
 * The RTCPeerConnection configuration adapted to node-datachannel. Its polyfill turns a server with
 * credentials into the URL `turn:USER:PASS@host`, and libdatachannel's URL parser ends the user
 * part at the first ':' — so the TURN REST API's `<expiry>:<peer id>` usernames reach coturn cut in
 * two and every allocation is refused (seen with coturn: "Cannot find credentials of user
 * <1795530814>"). node-datachannel also takes a server as an object `{hostname, port, username,
 * password, relayType}`, and the polyfill passes any `urls` entry through untouched when the server
 * has no credentials of its own: so a TURN URL with credentials becomes that object inside `urls`,
 * its toString() the plain URL for the polyfill's URL check. `stuns:` URLs are dropped: libdatachannel
 * throws on them, which would fail every connection.
 */
export function forNodeDatachannel(config: Record<string, unknown>): Record<string, unknown> {
  const servers = config.iceServers;
  if (!Array.isArray(servers)) return config;
  const adapted = servers.flatMap((server: unknown) => {
    if (!isStat(server)) return [];
    const urls = (Array.isArray(server.urls) ? server.urls : [server.urls]).filter(
      (u): u is string => typeof u === 'string' && !u.startsWith('stuns:'),
    );
    const { username, credential } = server;
    if (typeof username !== 'string' || typeof credential !== 'string' || username === '')
      return urls.length === 0 ? [] : [{ urls }];
    const out: (string | NativeTurnServer)[] = [];
    for (const url of urls) {
      const m = TURN_URL.exec(url);
      if (m === null) {
        if (url.startsWith('stun:')) out.push(url); // STUN takes no credentials
        continue;
      }
      const secure = m[1] === 'turns';
      const hostname = (m[2] ?? '').replace(/^\[|\]$/g, '');
      const port = m[3] === undefined ? (secure ? TURNS_DEFAULT_PORT : TURN_DEFAULT_PORT) : Number(m[3]);
      const relayType = secure ? 'TurnTls' : m[4] === 'tcp' ? 'TurnTcp' : 'TurnUdp';
      const plain = `${m[1] ?? 'turn'}:${m[2] ?? ''}:${port}`;
      out.push({ hostname, port, username, password: credential, relayType, toString: () => plain });
    }
    return out.length === 0 ? [] : [{ urls: out }];
  });
  return { ...config, iceServers: adapted };
}
