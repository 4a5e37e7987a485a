/**
 * What a browser swarm's data channels carried, by message type (issue 17: what a viewer's
 * datagrams are besides the media), from each viewer's own `traffic` stats, averaged per viewer per
 * second, and its transports' byte totals against what the channels were given.
 */
import type { TrafficFigures } from '../viewers/snapshot.js';

/** One viewer's counts over a stretch of `seconds` (result.json's perViewer `traffic`). */
export interface ViewerTraffic {
  readonly seconds: number;
  readonly byType: Readonly<Record<string, TrafficFigures>>;
  readonly transportBytesSent: number | null;
  readonly transportBytesReceived: number | null;
}

/** One sample of a viewer's stats: when, and its traffic figures (any may be missing). */
export interface TrafficReading {
  readonly atMs: number;
  readonly traffic?: Readonly<Record<string, TrafficFigures>> | undefined;
  readonly transportBytesSent?: number | undefined;
  readonly transportBytesReceived?: number | undefined;
}

/** What changed between two samples of one viewer's stats (a type absent at first counts from 0). */
export function trafficBetween(first: TrafficReading, last: TrafficReading): ViewerTraffic | null {
  if (last.traffic === undefined || last.atMs <= first.atMs) return null;
  const byType: Record<string, TrafficFigures> = {};
  for (const [type, f] of Object.entries(last.traffic)) {
    const before = first.traffic?.[type];
    byType[type] = {
      sent: f.sent - (before?.sent ?? 0),
      sentBytes: f.sentBytes - (before?.sentBytes ?? 0),
      received: f.received - (before?.received ?? 0),
      receivedBytes: f.receivedBytes - (before?.receivedBytes ?? 0),
    };
  }
  const delta = (a: number | undefined, b: number | undefined): number | null =>
    a === undefined || b === undefined ? null : b - a;
  return {
    seconds: (last.atMs - first.atMs) / 1000,
    byType,
    transportBytesSent: delta(first.transportBytesSent, last.transportBytesSent),
    transportBytesReceived: delta(first.transportBytesReceived, last.transportBytesReceived),
  };
}

export interface TrafficSummary {
  /** Viewers whose stats had traffic counts. */
  readonly viewers: number;
  /** Per message type, per viewer per second; busiest (bytes both ways) first. */
  readonly byType: readonly ({ readonly type: string } & TrafficFigures)[];
  /** Every type together, per viewer per second. */
  readonly total: TrafficFigures;
  /** Transport bytes per viewer per second (null: no viewer's transport was read). */
  readonly transportBytesSent: number | null;
  readonly transportBytesReceived: number | null;
}

/** Per viewer per second over the viewers that report traffic; null if none does. */
export function trafficSummary(viewers: readonly (ViewerTraffic | null)[]): TrafficSummary | null {
  const counted = viewers.filter((v): v is ViewerTraffic => v !== null && v.seconds > 0);
  if (counted.length === 0) return null;
  const per = counted.reduce((a, v) => a + v.seconds, 0);
  const sums = new Map<
    string,
    { sent: number; sentBytes: number; received: number; receivedBytes: number }
  >();
  for (const v of counted)
    for (const [type, f] of Object.entries(v.byType)) {
      const sum = sums.get(type) ?? { sent: 0, sentBytes: 0, received: 0, receivedBytes: 0 };
      sum.sent += f.sent;
      sum.sentBytes += f.sentBytes;
      sum.received += f.received;
      sum.receivedBytes += f.receivedBytes;
      sums.set(type, sum);
    }
  const byType = [...sums]
    .map(([type, s]) => ({
      type,
      sent: s.sent / per,
      sentBytes: s.sentBytes / per,
      received: s.received / per,
      receivedBytes: s.receivedBytes / per,
    }))
    .sort((a, b) => b.sentBytes + b.receivedBytes - (a.sentBytes + a.receivedBytes));
  const total = byType.reduce(
    (t, f) => ({
      sent: t.sent + f.sent,
      sentBytes: t.sentBytes + f.sentBytes,
      received: t.received + f.received,
      receivedBytes: t.receivedBytes + f.receivedBytes,
    }),
    { sent: 0, sentBytes: 0, received: 0, receivedBytes: 0 },
  );
  const transport = (pick: (v: ViewerTraffic) => number | null): number | null => {
    const read = counted.filter((v) => pick(v) !== null);
    if (read.length === 0) return null;
    return read.reduce((a, v) => a + (pick(v) ?? 0), 0) / read.reduce((a, v) => a + v.seconds, 0);
  };
  return {
    viewers: counted.length,
    byType,
    total,
    transportBytesSent: transport((v) => v.transportBytesSent),
    transportBytesReceived: transport((v) => v.transportBytesReceived),
  };
}

/** report.md's section: a table by message type and the transport's totals. */
export function trafficMarkdown(summary: TrafficSummary | null): string {
  if (summary === null) return '';
  const n = (x: number): string => x.toFixed(1);
  const kB = (x: number | null): string => (x === null ? '—' : (x / 1000).toFixed(2));
  const rows = summary.byType.map(
    (f) => `| ${f.type} | ${n(f.sent)} | ${kB(f.sentBytes)} | ${n(f.received)} | ${kB(f.receivedBytes)} |`,
  );
  const t = summary.total;
  return `Data-channel traffic by message type, per viewer per second (${summary.viewers} viewers' own
counts; bytes as encoded, without SCTP and DTLS framing):

| type | sent | sent kB | received | received kB |
|---|---:|---:|---:|---:|
${rows.join('\n')}
| **all** | ${n(t.sent)} | ${kB(t.sentBytes)} | ${n(t.received)} | ${kB(t.receivedBytes)} |
| transports (framing and acknowledgements included) | | ${kB(summary.transportBytesSent)} | | ${kB(summary.transportBytesReceived)} |

`;
}
