/**
 * Peers' connectivity, aggregated per tracker process for /metrics: how links connect (by route
 * type: host, srflx, prflx, relay), how many fail, how many bytes go through TURN. Each member
 * reports cumulative counts since it joined (wire's ConnectivityReport, every 2 s); the process adds
 * the difference to its previous report. Aggregates only: nothing here names a peer or a swarm.
 */
import { ROUTE_TYPES, type ConnectivityReport, type RouteCounts, type RouteType } from '@chunkycast/wire';

/**
 * What one report may add at most (a report is what a viewer says: a lying one must not make the
 * counters meaningless). An honest viewer connects a few dozen links a minute — its ~16–24
 * neighbours and their replacements — so 256 in one 2 s report is far above it; 2.5 GB is 2 s at
 * 10 Gbit/s.
 */
export const MAX_LINKS_PER_REPORT = 256;
export const MAX_RELAYED_BYTES_PER_REPORT = 2_500_000_000;

export interface PeerLinkTotals {
  /** Links that connected, by route type, summed over members' reports (a counter). */
  readonly connected: RouteCounts;
  /** Links given up before their channel opened (a counter). */
  readonly failures: number;
  /** Bytes members sent and received over TURN-relayed links (a counter). */
  readonly relayedBytes: number;
  /** Links open now, by route type, over members' latest reports (a gauge). */
  readonly open: RouteCounts;
}

export function zeroRoutes(): Record<RouteType, number> {
  return { host: 0, srflx: 0, prflx: 0, relay: 0 };
}

/**
 * The growth of a cumulative count from `previous` to `next`, at most `cap`. A count that went down
 * was reset (or lied about): the new value is only a baseline, never a negative step.
 */
export function growth(previous: number, next: number, cap: number): number {
  return next >= previous ? Math.min(next - previous, cap) : 0;
}

/** The process's counters: fed each member's reports in order. */
export class ConnectivityCounters {
  private readonly connectedByRoute = zeroRoutes();
  private failureCount = 0;
  private relayedByteCount = 0;

  /**
   * A member's new report. `previous` is its last report that carried connectivity; without one
   * (its first) the counts start from zero — unless `baselineOnly`: a resumed session's counts
   * since it joined were its old connection's (counted there, or by a tracker that is gone), so its
   * first report here is only the baseline for the next.
   */
  add(previous: ConnectivityReport | undefined, next: ConnectivityReport, baselineOnly: boolean): void {
    if (previous === undefined && baselineOnly) return;
    for (const route of ROUTE_TYPES)
      this.connectedByRoute[route] += growth(
        previous?.connected[route] ?? 0,
        next.connected[route],
        MAX_LINKS_PER_REPORT,
      );
    this.failureCount += growth(previous?.failed ?? 0, next.failed, MAX_LINKS_PER_REPORT);
    this.relayedByteCount += growth(
      previous?.relayedBytes ?? 0,
      next.relayedBytes,
      MAX_RELAYED_BYTES_PER_REPORT,
    );
  }

  /** The counters, and the open links of `latest` (every current member's latest report) summed. */
  totals(latest: Iterable<ConnectivityReport | undefined>): PeerLinkTotals {
    const open = zeroRoutes();
    for (const report of latest)
      if (report !== undefined)
        for (const route of ROUTE_TYPES) open[route] += Math.min(report.open[route], MAX_LINKS_PER_REPORT);
    return {
      connected: { ...this.connectedByRoute },
      failures: this.failureCount,
      relayedBytes: this.relayedByteCount,
      open,
    };
  }
}
