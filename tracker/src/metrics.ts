/**
 * The tracker's counters as one snapshot (served as JSON at /debug/metrics) and the same snapshot in
 * the Prometheus text exposition format (served openly at /metrics) through prom-client, with the
 * process's default metrics (CPU, memory, file descriptors, event-loop lag, GC) beside them. Only
 * aggregate numbers: no stream id, peer id or address ever appears in a metric, so the open endpoint
 * lists nothing.
 *
 * The tracker counts in plain fields (one increment on the hot path, and the JSON view reads them
 * synchronously); each Prometheus family reads the snapshot taken at the start of a scrape. Every
 * tracker has a registry of its own, so several in one process (tests, embedding) never clash; the
 * process metrics live once per process in a registry they all share.
 */
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
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
  /** Seconds since this tracker started. */
  readonly uptimeS: number;
  /** When the process started (unix s), as `process_start_time_seconds` says. */
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

type Sample = { readonly labels?: Readonly<Record<string, string>>; readonly value: number };

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge';
  readonly labelNames?: readonly string[];
  /** The family's samples in a snapshot; null: none (the series is absent until known). */
  readonly samples: (m: TrackerMetrics) => readonly Sample[] | null;
}

const PREFIX = 'chunkycast_tracker_';

function byLabel(label: string, values: Readonly<Record<string, number>>): Sample[] {
  return Object.entries(values).map(([key, value]) => ({ labels: { [label]: key }, value }));
}

const one = (value: number): Sample[] => [{ value }];

/** Every family of the tracker, in exposition order, with the snapshot field it reads. */
const FAMILIES: readonly Family[] = [
  {
    name: `${PREFIX}sessions`,
    help: 'Open WebSocket sessions.',
    type: 'gauge',
    samples: (m) => one(m.sessions),
  },
  {
    name: `${PREFIX}members`,
    help: 'Joined swarm members of this process by role.',
    type: 'gauge',
    labelNames: ['role'],
    samples: (m) => byLabel('role', m.members),
  },
  {
    name: `${PREFIX}swarms`,
    help: 'Swarms with at least one member in this process.',
    type: 'gauge',
    samples: (m) => one(m.swarms),
  },
  {
    name: `${PREFIX}connections_total`,
    help: 'WebSocket connections accepted, refused ones included.',
    type: 'counter',
    samples: (m) => one(m.connectionsTotal),
  },
  { name: `${PREFIX}joins_total`, help: 'Successful joins.', type: 'counter', samples: (m) => one(m.joins) },
  {
    name: `${PREFIX}resumes_total`,
    help: 'Resume tickets presented in a join, by outcome.',
    type: 'counter',
    labelNames: ['outcome'],
    samples: (m) => byLabel('outcome', m.resumes),
  },
  {
    name: `${PREFIX}signals_relayed_total`,
    help: 'WebRTC signals relayed between members of a swarm.',
    type: 'counter',
    samples: (m) => one(m.signalsRelayed),
  },
  {
    name: `${PREFIX}signals_refused_cut_off_total`,
    help: 'Signals refused because the sender or the target was cut off by several members.',
    type: 'counter',
    samples: (m) => one(m.signalsRefusedCutOff),
  },
  {
    name: `${PREFIX}peers_banned_for_cut_offs_total`,
    help: 'Peers no new connection is signalled for, after several members reported them cut off.',
    type: 'counter',
    samples: (m) => one(m.peersBannedForCutOffs),
  },
  {
    name: `${PREFIX}announcements_total`,
    help: 'Segment announcements accepted from true sources.',
    type: 'counter',
    samples: (m) => one(m.announcements),
  },
  {
    name: `${PREFIX}frames_in_total`,
    help: 'WebSocket frames received.',
    type: 'counter',
    samples: (m) => one(m.framesIn),
  },
  {
    name: `${PREFIX}frames_out_total`,
    help: 'WebSocket frames sent.',
    type: 'counter',
    samples: (m) => one(m.framesOut),
  },
  {
    name: `${PREFIX}errors_total`,
    help: 'Error frames sent to clients, by code.',
    type: 'counter',
    labelNames: ['code'],
    samples: (m) => byLabel('code', m.errors),
  },
  {
    name: `${PREFIX}limit_hits_total`,
    help: 'Times a limit refused a frame or a connection, by limit.',
    type: 'counter',
    labelNames: ['limit'],
    samples: (m) => byLabel('limit', m.limitHits),
  },
  {
    name: `${PREFIX}disconnects_total`,
    help: 'WebSocket sessions ended, by reason.',
    type: 'counter',
    labelNames: ['reason'],
    samples: (m) => byLabel('reason', m.disconnects),
  },
  {
    name: `${PREFIX}handler_faults_total`,
    help: 'Frames whose handling failed inside the tracker (bugs).',
    type: 'counter',
    samples: (m) => one(m.handlerFaults),
  },
  {
    name: `${PREFIX}debug_auth_failures_total`,
    help: 'Requests to /debug/* without the broadcaster key.',
    type: 'counter',
    samples: (m) => one(m.debugAuthFailures),
  },
  {
    name: `${PREFIX}origin_bytes_total`,
    help: 'Media bytes served by the origin, by requester role.',
    type: 'counter',
    labelNames: ['role'],
    samples: (m) => byLabel('role', m.originMediaBytes),
  },
  {
    name: `${PREFIX}origin_requests_total`,
    help: 'Media requests served by the origin, by requester role.',
    type: 'counter',
    labelNames: ['role'],
    samples: (m) => byLabel('role', m.originMediaRequests),
  },
  {
    name: `${PREFIX}uptime_seconds`,
    help: 'Seconds since the tracker started.',
    type: 'gauge',
    samples: (m) => one(m.uptimeS),
  },
  // The cluster's series; the global gauges only once a heartbeat has read them.
  {
    name: `${PREFIX}cluster_connected`,
    help: 'Whether the cluster store is reachable (1) or not (0; the process serves its own members), by backend.',
    type: 'gauge',
    labelNames: ['backend'],
    samples: (m) => [{ labels: { backend: m.cluster.backend }, value: m.cluster.connected ? 1 : 0 }],
  },
  {
    name: `${PREFIX}cluster_local_members`,
    help: 'Members this process holds in the cluster.',
    type: 'gauge',
    samples: (m) => one(m.cluster.localMembers),
  },
  {
    name: `${PREFIX}cluster_global_members`,
    help: 'Members over all live tracker processes, as of the last heartbeat.',
    type: 'gauge',
    samples: (m) => (m.cluster.globalMembers === null ? null : one(m.cluster.globalMembers)),
  },
  {
    name: `${PREFIX}cluster_live_nodes`,
    help: 'Live tracker processes, as of the last heartbeat.',
    type: 'gauge',
    samples: (m) => (m.cluster.liveNodes === null ? null : one(m.cluster.liveNodes)),
  },
  {
    name: `${PREFIX}cluster_relays_total`,
    help: 'Signals relayed to (out) or from (in) other tracker processes.',
    type: 'counter',
    labelNames: ['direction'],
    samples: (m) => byLabel('direction', { out: m.cluster.relaysOut, in: m.cluster.relaysIn }),
  },
  {
    name: `${PREFIX}cluster_announcements_total`,
    help: 'Announcements sent to (out) or received from (in) other tracker processes.',
    type: 'counter',
    labelNames: ['direction'],
    samples: (m) => byLabel('direction', { out: m.cluster.announcementsOut, in: m.cluster.announcementsIn }),
  },
  {
    name: `${PREFIX}cluster_announcements_rejected_total`,
    help: 'Announcements from other processes dropped because their signature did not verify.',
    type: 'counter',
    samples: (m) => one(m.remoteAnnouncementsRejected),
  },
  {
    name: `${PREFIX}cluster_bad_entries_total`,
    help: 'Malformed records read from the cluster store or its channels, dropped.',
    type: 'counter',
    samples: (m) => one(m.cluster.badEntries),
  },
  {
    name: `${PREFIX}cluster_members_lost_total`,
    help: 'Members whose id another tracker process took over.',
    type: 'counter',
    samples: (m) => one(m.cluster.membersLost),
  },
  {
    name: `${PREFIX}cluster_store_errors_total`,
    help: 'Cluster store commands that failed (the operation fell back to this process).',
    type: 'counter',
    samples: (m) => one(m.cluster.storeErrors),
  },
  {
    name: `${PREFIX}ice_renewals_total`,
    help: 'Frames with fresh TURN credentials sent to connected peers before theirs expired.',
    type: 'counter',
    samples: (m) => one(m.iceRenewals),
  },
  // The peers' own view of their links (from their reports), named for the peers rather than the
  // tracker: `chunkycast_peer_*`. Route types are host, srflx, prflx and relay (the less direct end
  // of the selected candidate pair).
  {
    name: 'chunkycast_peer_links_connected_total',
    help: "Peers' WebRTC links that opened, by route type of their selected candidate pair.",
    type: 'counter',
    labelNames: ['route'],
    samples: (m) => byLabel('route', m.peerLinks.connected),
  },
  {
    name: 'chunkycast_peer_links_open',
    help: "Peers' WebRTC links open now, by route type (members' latest reports).",
    type: 'gauge',
    labelNames: ['route'],
    samples: (m) => byLabel('route', m.peerLinks.open),
  },
  {
    name: 'chunkycast_peer_link_failures_total',
    help: "Peers' WebRTC links given up before their data channel opened (ICE failed or timed out).",
    type: 'counter',
    samples: (m) => one(m.peerLinks.failures),
  },
  {
    name: 'chunkycast_peer_relayed_bytes_total',
    help: 'Bytes peers sent and received over TURN-relayed links.',
    type: 'counter',
    samples: (m) => one(m.peerLinks.relayedBytes),
  },
];

/** Sets a collector's series to `samples`; null removes the unlabelled series. */
function fill(metric: Counter | Gauge, samples: readonly Sample[] | null): void {
  metric.reset();
  if (samples === null) {
    metric.remove({});
    return;
  }
  for (const { labels, value } of samples)
    if (metric instanceof Counter) metric.inc(labels ?? {}, value);
    else metric.set(labels ?? {}, value);
}

/** The process's default metrics, registered once per process and shared by every tracker in it. */
let processRegistry: Registry | null = null;

function processMetrics(): Registry {
  if (processRegistry === null) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** When the process started (unix s): the value of `process_start_time_seconds`. */
export async function processStartTimeS(): Promise<number> {
  const metric = processMetrics().getSingleMetric('process_start_time_seconds');
  const value = (await metric?.get())?.values[0]?.value;
  if (value === undefined) throw new Error('prom-client has no process_start_time_seconds');
  return value;
}

/** One tracker's Prometheus exposition: its own registry, filled from a snapshot at each scrape. */
export class TrackerPrometheus {
  private readonly registry = new Registry();
  /** The snapshot the current scrape reads. */
  private snapshot: TrackerMetrics | null = null;

  constructor(private readonly read: () => TrackerMetrics) {
    for (const family of FAMILIES) {
      const config = {
        name: family.name,
        help: family.help,
        labelNames: family.labelNames ?? [],
        registers: [this.registry],
      };
      const samples = (): readonly Sample[] | null =>
        this.snapshot === null ? [] : family.samples(this.snapshot);
      if (family.type === 'counter')
        new Counter({
          ...config,
          collect(this: Counter) {
            fill(this, samples());
          },
        });
      else
        new Gauge({
          ...config,
          collect(this: Gauge) {
            fill(this, samples());
          },
        });
    }
  }

  /** The text exposition: the tracker's families, then (unless told not to) the process's. */
  async text(withProcessMetrics = true): Promise<string> {
    this.snapshot = this.read();
    if (!withProcessMetrics) return this.registry.metrics();
    return Registry.merge([this.registry, processMetrics()]).metrics();
  }
}

/** The Prometheus text of one snapshot (the tracker's families only). */
export function renderPrometheus(m: TrackerMetrics): Promise<string> {
  return new TrackerPrometheus(() => m).text(false);
}

export const PROMETHEUS_CONTENT_TYPE: string = Registry.PROMETHEUS_CONTENT_TYPE;
