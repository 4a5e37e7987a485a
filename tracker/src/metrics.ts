/**
 * The tracker's counters as one snapshot (served as JSON at /debug/metrics) and the same snapshot in
 * the Prometheus text exposition format (served openly at /metrics). Only aggregate numbers: no
 * stream id, peer id or address ever appears in a metric, so the open endpoint lists nothing.
 */
import type { TrackerErrorCode } from '@chunkycast/wire';
import type { ClusterStats } from './cluster.js';
import type { PeerLinkTotals } from './connectivity.js';
import type { LimitKind } from './limits.js';

/** What became of a resume ticket presented in a `join`. */
export const RESUME_OUTCOMES = [
  /** The old id was free and is the peer's again. */
  'resumed',
  /** The old id was still held by a connection the tracker thought alive; that one was replaced. */
  'replaced',
  /** Malformed, or not signed with this tracker's secret: a fresh id instead. */
  'invalid',
  'expired',
  /** Valid, but for another stream or role: a fresh id instead. */
  'mismatch',
  /** The id is held by a connection with a newer ticket (a clone of the session): a fresh id. */
  'conflict',
] as const;
export type ResumeOutcome = (typeof RESUME_OUTCOMES)[number];

/** Why a WebSocket ended. */
export const DISCONNECT_REASONS = [
  /** The peer closed it, or its connection failed. */
  'client',
  'heartbeat',
  'slowConsumer',
  'badFrames',
  'rateLimited',
  'frameTooLarge',
  'originNotAllowed',
  'tooManyConnections',
  /** A resumed session took over this connection's peer id. */
  'replaced',
  'shutdown',
] as const;
export type DisconnectReason = (typeof DISCONNECT_REASONS)[number];

export interface TrackerMetrics {
  /** Open WebSocket sessions (admitted; refused connections are not sessions). */
  readonly sessions: number;
  /** Joined members by role. */
  readonly members: { readonly viewer: number; readonly source: number };
  readonly swarms: number;
  /** WebSocket connections accepted since start, refused ones included. */
  readonly connectionsTotal: number;
  readonly joins: number;
  readonly signalsRelayed: number;
  /** Signals refused because the sender or target was banned for cut-offs. */
  readonly signalsRefusedCutOff: number;
  /** Peers banned from new connections after several members reported them cut off. */
  readonly peersBannedForCutOffs: number;
  readonly announcements: number;
  readonly framesIn: number;
  readonly framesOut: number;
  /** Error frames sent, by code. */
  readonly errors: Readonly<Record<TrackerErrorCode, number>>;
  readonly limitHits: Readonly<Record<LimitKind, number>>;
  readonly resumes: Readonly<Record<ResumeOutcome, number>>;
  readonly disconnects: Readonly<Record<DisconnectReason, number>>;
  /** Frames whose handling threw (a bug): the frame was lost, the connection kept. */
  readonly handlerFaults: number;
  /** /debug/* requests without the right bearer key. */
  readonly debugAuthFailures: number;
  /** Media bytes the origin served since start (not reset by /debug/origin/reset), by requester. */
  readonly originMediaBytes: { readonly source: number; readonly viewers: number };
  readonly originMediaRequests: { readonly source: number; readonly viewers: number };
  readonly residentMemoryBytes: number;
  readonly uptimeS: number;
  readonly startTimeS: number;
  /** Announcements from other tracker processes whose signature did not verify (dropped). */
  readonly remoteAnnouncementsRejected: number;
  /** The cluster this process shares swarms through (in memory when it runs alone). */
  readonly cluster: ClusterStats;
  /** Peers' WebRTC links as their reports tell: by route type, failures, relayed bytes. */
  readonly peerLinks: PeerLinkTotals;
  /** `ice` frames sent with fresh TURN credentials. */
  readonly iceRenewals: number;
}

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge';
  readonly samples: readonly { readonly labels?: Readonly<Record<string, string>>; readonly value: number }[];
}

const PREFIX = 'chunkycast_tracker_';

function byLabel(label: string, values: Readonly<Record<string, number>>): Family['samples'] {
  return Object.entries(values).map(([key, value]) => ({ labels: { [label]: key }, value }));
}

function families(m: TrackerMetrics): Family[] {
  const one = (value: number): Family['samples'] => [{ value }];
  return [
    { name: `${PREFIX}sessions`, help: 'Open WebSocket sessions.', type: 'gauge', samples: one(m.sessions) },
    {
      name: `${PREFIX}members`,
      help: 'Joined swarm members of this process by role.',
      type: 'gauge',
      samples: byLabel('role', m.members),
    },
    {
      name: `${PREFIX}swarms`,
      help: 'Swarms with at least one member in this process.',
      type: 'gauge',
      samples: one(m.swarms),
    },
    {
      name: `${PREFIX}connections_total`,
      help: 'WebSocket connections accepted, refused ones included.',
      type: 'counter',
      samples: one(m.connectionsTotal),
    },
    { name: `${PREFIX}joins_total`, help: 'Successful joins.', type: 'counter', samples: one(m.joins) },
    {
      name: `${PREFIX}resumes_total`,
      help: 'Resume tickets presented in a join, by outcome.',
      type: 'counter',
      samples: byLabel('outcome', m.resumes),
    },
    {
      name: `${PREFIX}signals_relayed_total`,
      help: 'WebRTC signals relayed between members of a swarm.',
      type: 'counter',
      samples: one(m.signalsRelayed),
    },
    {
      name: `${PREFIX}signals_refused_cut_off_total`,
      help: 'Signals refused because the sender or the target was cut off by several members.',
      type: 'counter',
      samples: one(m.signalsRefusedCutOff),
    },
    {
      name: `${PREFIX}peers_banned_for_cut_offs_total`,
      help: 'Peers no new connection is signalled for, after several members reported them cut off.',
      type: 'counter',
      samples: one(m.peersBannedForCutOffs),
    },
    {
      name: `${PREFIX}announcements_total`,
      help: 'Segment announcements accepted from true sources.',
      type: 'counter',
      samples: one(m.announcements),
    },
    {
      name: `${PREFIX}frames_in_total`,
      help: 'WebSocket frames received.',
      type: 'counter',
      samples: one(m.framesIn),
    },
    {
      name: `${PREFIX}frames_out_total`,
      help: 'WebSocket frames sent.',
      type: 'counter',
      samples: one(m.framesOut),
    },
    {
      name: `${PREFIX}errors_total`,
      help: 'Error frames sent to clients, by code.',
      type: 'counter',
      samples: byLabel('code', m.errors),
    },
    {
      name: `${PREFIX}limit_hits_total`,
      help: 'Times a limit refused a frame or a connection, by limit.',
      type: 'counter',
      samples: byLabel('limit', m.limitHits),
    },
    {
      name: `${PREFIX}disconnects_total`,
      help: 'WebSocket sessions ended, by reason.',
      type: 'counter',
      samples: byLabel('reason', m.disconnects),
    },
    {
      name: `${PREFIX}handler_faults_total`,
      help: 'Frames whose handling failed inside the tracker (bugs).',
      type: 'counter',
      samples: one(m.handlerFaults),
    },
    {
      name: `${PREFIX}debug_auth_failures_total`,
      help: 'Requests to /debug/* without the broadcaster key.',
      type: 'counter',
      samples: one(m.debugAuthFailures),
    },
    {
      name: `${PREFIX}origin_bytes_total`,
      help: 'Media bytes served by the origin, by requester role.',
      type: 'counter',
      samples: byLabel('role', m.originMediaBytes),
    },
    {
      name: `${PREFIX}origin_requests_total`,
      help: 'Media requests served by the origin, by requester role.',
      type: 'counter',
      samples: byLabel('role', m.originMediaRequests),
    },
    {
      name: `${PREFIX}uptime_seconds`,
      help: 'Seconds since the tracker started.',
      type: 'gauge',
      samples: one(m.uptimeS),
    },
    ...clusterFamilies(m.cluster, m.remoteAnnouncementsRejected),
    {
      name: `${PREFIX}ice_renewals_total`,
      help: 'Frames with fresh TURN credentials sent to connected peers before theirs expired.',
      type: 'counter',
      samples: one(m.iceRenewals),
    },
    ...peerLinkFamilies(m.peerLinks),
    {
      name: 'process_resident_memory_bytes',
      help: 'Resident memory size in bytes.',
      type: 'gauge',
      samples: one(m.residentMemoryBytes),
    },
    {
      name: 'process_start_time_seconds',
      help: 'Start time of the process since unix epoch in seconds.',
      type: 'gauge',
      samples: one(m.startTimeS),
    },
  ];
}

/** The cluster's series; the global gauges only once a heartbeat has read them. */
function clusterFamilies(c: ClusterStats, rejected: number): Family[] {
  const one = (value: number): Family['samples'] => [{ value }];
  const gauges: Family[] = [
    {
      name: `${PREFIX}cluster_connected`,
      help: 'Whether the cluster store is reachable (1) or not (0; the process serves its own members), by backend.',
      type: 'gauge',
      samples: [{ labels: { backend: c.backend }, value: c.connected ? 1 : 0 }],
    },
    {
      name: `${PREFIX}cluster_local_members`,
      help: 'Members this process holds in the cluster.',
      type: 'gauge',
      samples: one(c.localMembers),
    },
  ];
  if (c.globalMembers !== null)
    gauges.push({
      name: `${PREFIX}cluster_global_members`,
      help: 'Members over all live tracker processes, as of the last heartbeat.',
      type: 'gauge',
      samples: one(c.globalMembers),
    });
  if (c.liveNodes !== null)
    gauges.push({
      name: `${PREFIX}cluster_live_nodes`,
      help: 'Live tracker processes, as of the last heartbeat.',
      type: 'gauge',
      samples: one(c.liveNodes),
    });
  return [
    ...gauges,
    {
      name: `${PREFIX}cluster_relays_total`,
      help: 'Signals relayed to (out) or from (in) other tracker processes.',
      type: 'counter',
      samples: byLabel('direction', { out: c.relaysOut, in: c.relaysIn }),
    },
    {
      name: `${PREFIX}cluster_announcements_total`,
      help: 'Announcements sent to (out) or received from (in) other tracker processes.',
      type: 'counter',
      samples: byLabel('direction', { out: c.announcementsOut, in: c.announcementsIn }),
    },
    {
      name: `${PREFIX}cluster_announcements_rejected_total`,
      help: 'Announcements from other processes dropped because their signature did not verify.',
      type: 'counter',
      samples: one(rejected),
    },
    {
      name: `${PREFIX}cluster_bad_entries_total`,
      help: 'Malformed records read from the cluster store or its channels, dropped.',
      type: 'counter',
      samples: one(c.badEntries),
    },
    {
      name: `${PREFIX}cluster_members_lost_total`,
      help: 'Members whose id another tracker process took over.',
      type: 'counter',
      samples: one(c.membersLost),
    },
    {
      name: `${PREFIX}cluster_store_errors_total`,
      help: 'Cluster store commands that failed (the operation fell back to this process).',
      type: 'counter',
      samples: one(c.storeErrors),
    },
  ];
}

/**
 * The peers' own view of their links (from their reports), named for the peers rather than the
 * tracker: `chunkycast_peer_*`. Route types are host, srflx, prflx and relay (the less direct end of
 * the selected candidate pair).
 */
function peerLinkFamilies(p: PeerLinkTotals): Family[] {
  return [
    {
      name: 'chunkycast_peer_links_connected_total',
      help: "Peers' WebRTC links that opened, by route type of their selected candidate pair.",
      type: 'counter',
      samples: byLabel('route', p.connected),
    },
    {
      name: 'chunkycast_peer_links_open',
      help: "Peers' WebRTC links open now, by route type (members' latest reports).",
      type: 'gauge',
      samples: byLabel('route', p.open),
    },
    {
      name: 'chunkycast_peer_link_failures_total',
      help: "Peers' WebRTC links given up before their data channel opened (ICE failed or timed out).",
      type: 'counter',
      samples: [{ value: p.failures }],
    },
    {
      name: 'chunkycast_peer_relayed_bytes_total',
      help: 'Bytes peers sent and received over TURN-relayed links.',
      type: 'counter',
      samples: [{ value: p.relayedBytes }],
    },
  ];
}

/** Label values here are fixed words, but escape as the format requires anyway. */
function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

/** The Prometheus text exposition format (version 0.0.4). */
export function renderPrometheus(m: TrackerMetrics): string {
  const lines: string[] = [];
  for (const family of families(m)) {
    lines.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`);
    for (const sample of family.samples) {
      const labels = Object.entries(sample.labels ?? {})
        .map(([key, value]) => `${key}="${escapeLabel(value)}"`)
        .join(',');
      lines.push(`${family.name}${labels === '' ? '' : `{${labels}}`} ${formatValue(sample.value)}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
