/**
 * Read-only views of one tracker: the metrics snapshot (JSON at /debug/metrics, the Prometheus
 * text at /metrics), /healthz, the swarm lists of /debug/swarms and /debug/swarm/<stream>, and the
 * origin's counters.
 */
import type { ConnectivityReport, PeerId, SignedAnnouncement } from '@chunkycast/wire';
import { iceHealth, type IceSettings } from '../ice.js';
import type { TrackerMetrics } from '../metrics.js';
import { emptyOriginStats, type Origin, type OriginStats } from '../origin.js';
import type { Member } from '../swarm.js';
import type { TrackerContext } from './context.js';
import type { Connections } from './connections.js';
import type { Signalling } from './signalling.js';

const MS_PER_S = 1000;

export interface DebugMember {
  readonly peerId: PeerId;
  readonly role: 'viewer' | 'source';
  readonly joinedAtMs: number;
  readonly report: Member['report'];
  /** The member's links by route type, failures and relayed bytes, from its latest report (null: none sent). */
  readonly connectivity: ConnectivityReport | null;
}

export interface DebugSwarm {
  readonly stream: string;
  readonly sourceId: PeerId;
  readonly sourceConnected: boolean;
  readonly members: readonly DebugMember[];
  /** Announcements accepted since the swarm was made. */
  readonly announcements: number;
  readonly lastAnnouncement: SignedAnnouncement | null;
}

export class TrackerViews {
  private readonly startedAtMs = Date.now();
  /** Origin counters from before each /debug/origin/reset, so /metrics counters never go back. */
  private readonly originCarry = { sourceBytes: 0, viewerBytes: 0, sourceRequests: 0, viewerRequests: 0 };

  constructor(
    private readonly context: TrackerContext,
    private readonly connections: Connections,
    private readonly signalling: Signalling,
    private readonly origin: Origin | null,
    private readonly ice: IceSettings,
    /** When the process started (unix s). */
    private readonly processStartTimeS: number,
  ) {}

  metrics(): TrackerMetrics {
    const { registry, counters, cluster } = this.context;
    const members = { viewer: 0, source: 0 };
    for (const swarm of registry.all()) {
      members.viewer += swarm.viewerCount;
      if (swarm.source !== null) members.source++;
    }
    const o = this.originStats();
    const carry = this.originCarry;
    return {
      sessions: this.connections.sessions.size,
      members,
      swarms: registry.size,
      connectionsTotal: counters.connectionsTotal,
      joins: counters.joins,
      signalsRelayed: counters.signalsRelayed,
      signalsRefusedCutOff: counters.signalsRefusedCutOff,
      peersBannedForCutOffs: counters.peersBannedForCutOffs,
      announcements: counters.announcements,
      framesIn: counters.framesIn,
      framesOut: counters.framesOut,
      handlerFaults: counters.handlerFaults,
      debugAuthFailures: counters.debugAuthFailures,
      remoteAnnouncementsRejected: counters.remoteAnnouncementsRejected,
      iceRenewals: counters.iceRenewals,
      errors: { ...counters.errors },
      limitHits: { ...counters.limitHits },
      resumes: { ...counters.resumes },
      disconnects: { ...counters.disconnects },
      originMediaBytes: {
        source: carry.sourceBytes + o.sourceMediaBytes,
        viewers: carry.viewerBytes + o.viewerMediaBytes,
      },
      originMediaRequests: {
        source: carry.sourceRequests + o.sourceMediaRequests,
        viewers: carry.viewerRequests + o.viewerMediaRequests,
      },
      residentMemoryBytes: process.memoryUsage.rss(),
      uptimeS: (Date.now() - this.startedAtMs) / MS_PER_S,
      startTimeS: this.processStartTimeS,
      cluster: cluster.stats(),
      peerLinks: this.signalling.connectivity.totals(this.latestConnectivity()),
    };
  }

  /** /healthz: still ok while Redis is unreachable (this process goes on serving its own members). */
  health(): unknown {
    const { backend, connected } = this.context.cluster.stats();
    return {
      ok: true,
      uptimeMs: Date.now() - this.startedAtMs,
      connections: this.connections.sessions.size,
      swarms: this.context.registry.size,
      shuttingDown: this.context.closing(),
      cluster: { backend, connected },
      ice: iceHealth(this.ice),
    };
  }

  /** /debug/swarms: this process's members only (each process shows its own). */
  swarms(): unknown {
    return [...this.context.registry.all()].map((s) => ({
      stream: s.stream,
      sourceId: s.sourceId,
      sourceConnected: s.source !== null,
      viewers: s.viewerCount,
      announcements: s.totalAnnouncements,
    }));
  }

  debugSwarm(stream: string): DebugSwarm | null {
    const swarm = this.context.registry.get(stream);
    if (swarm === undefined) return null;
    return {
      stream: swarm.stream,
      sourceId: swarm.sourceId,
      sourceConnected: swarm.source !== null,
      members: [...swarm.members()].map((m) => ({
        peerId: m.peerId,
        role: m.role,
        joinedAtMs: m.joinedAtMs,
        report: m.report,
        connectivity: m.report?.connectivity ?? null,
      })),
      announcements: swarm.totalAnnouncements,
      lastAnnouncement: swarm.lastAnnouncement,
    };
  }

  originStats(): OriginStats {
    return this.origin?.snapshot() ?? emptyOriginStats();
  }

  resetOriginStats(): void {
    if (this.origin === null) return;
    const o = this.origin.snapshot();
    this.originCarry.sourceBytes += o.sourceMediaBytes;
    this.originCarry.viewerBytes += o.viewerMediaBytes;
    this.originCarry.sourceRequests += o.sourceMediaRequests;
    this.originCarry.viewerRequests += o.viewerMediaRequests;
    this.origin.reset();
  }

  /** Every current member's latest connectivity (for the open-links gauge). */
  private *latestConnectivity(): Iterable<ConnectivityReport | undefined> {
    for (const swarm of this.context.registry.all())
      for (const m of swarm.members()) yield m.report?.connectivity;
  }
}
