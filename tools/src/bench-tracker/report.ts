/**
 * What `npm run bench:tracker` writes: one point's result.json, report.md and plots, and a sweep's
 * sweep.json, report.md and plots. The shapes here are the committed results' (docs/results/
 * tracker-bench): keep them, so new runs compare with old ones.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { linePlot } from '@chunkycast/sim';
import type { Sweep } from './options.js';
import type { Tally } from './protocol.js';

/** A point meets the goal when it holds every session, joins at ≥ 95 % of the rate asked and stays under this CPU. */
export const JOIN_RATE_TOLERANCE = 0.95;
export const CPU_SATURATED_PCT = 90;

export type RunPhase = 'join' | 'hold' | 'stop';

/** One second of a run. */
export interface TimelineSample {
  readonly tS: number | null;
  readonly phase: RunPhase;
  readonly trackerCpuPct: number | null;
  readonly trackerRssMB: number | null;
  readonly clientCpuPct: number | null;
  readonly trackerCoreBusyPct: number | null;
  readonly clientCoreBusyPct: number | null;
  /** What else ran on the tracker's core (other processes, interrupts); ≈ 0 on a quiet machine. */
  readonly trackerCoreOtherPct: number | null;
  readonly sessions: number;
  readonly trackerConnections: number | null;
  readonly joinsPerSec: number | null;
  readonly relaysPerSec: number | null;
  readonly relayMsP50: number | null;
  readonly relayMsP99: number | null;
  readonly relayMsMax: number | null;
  readonly clientLoopDelayP99Ms: number | null;
  readonly clientLoopDelayMaxMs: number | null;
  readonly trackerLoopDelayMaxMs: number | null;
  readonly trackerGcMs: number | null;
  readonly trackerGcMaxMs: number | null;
  readonly trackerHeapMB: number | null;
}

/** The timeline's numeric columns. */
export type TimelineColumn = {
  [K in keyof TimelineSample]: TimelineSample[K] extends number | null ? K : never;
}[keyof TimelineSample];

export interface Machine {
  readonly nproc: number;
  readonly cpuModel: string;
  readonly node: string;
  readonly kernel: string;
  readonly loadAverageBefore: readonly (number | null)[];
  readonly trackerCore: number;
  readonly generatorCore: number;
  readonly nice: number;
}

export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** Which goals a point misses, each on its own (a sweep reports where each first bends). */
export interface FailedGoals {
  readonly sessions: boolean;
  readonly joinRate: boolean;
  readonly relayP99: boolean;
  readonly cpu: boolean;
  readonly trackerExited: boolean;
}

export interface Verdict {
  readonly ok: boolean;
  readonly failed: FailedGoals;
  readonly reasons: readonly string[];
  readonly generatorSaturated: boolean;
  readonly caveats: readonly string[];
}

/** One point's result.json. */
export interface PointResult {
  readonly peers: number;
  readonly joinRate: number;
  readonly duration: number;
  readonly swarmSize: number;
  readonly swarms: number;
  readonly relaysPerSecTarget: number;
  readonly bootstrapsPerSecTarget: number;
  readonly sdpBytes: number;
  readonly sessionsHeld: number;
  readonly trackerConnectionsAtEnd: number | null;
  readonly heldBeforeStop: number;
  readonly joinsPerSec: number | null;
  readonly joinPhaseS: number | null;
  readonly joinMsP50: number | null;
  readonly joinMsP99: number | null;
  readonly joinMsMax: number | null;
  readonly relayMsP50: number | null;
  readonly relayMsP99: number | null;
  readonly relayMsMax: number | null;
  readonly relays: number;
  readonly relaysPerSec: number | null;
  readonly joinPhaseRelays: {
    readonly relays: number;
    readonly relayMsP50: number | null;
    readonly relayMsP99: number | null;
    readonly relayMsMax: number | null;
  };
  readonly bootstrap: {
    readonly requests: number;
    readonly answered: number;
    readonly peersReturned: number;
    readonly foreignPeers: number;
    readonly notYetWelcomedPeers: number;
    readonly msP50: number | null;
    readonly msP99: number | null;
  };
  readonly cpuPct: number | null;
  readonly cpuPctJoin: number | null;
  readonly cpuPctPeak: number | null;
  readonly rssMB: number | null;
  readonly rssKBPerSession: number | null;
  readonly cpuUsPerRelay: number | null;
  readonly cpuUsPerJoin: number | null;
  readonly clientCpuPct: number | null;
  readonly clientCpuPctJoin: number | null;
  readonly clientLoopDelayP99MsMax: number;
  readonly stalls: {
    readonly trackerLoopDelayMaxMs: number | null;
    readonly trackerStalledSeconds: number | null;
    readonly trackerGcMaxMs: number | null;
    readonly generatorLoopDelayMaxMs: number;
    readonly generatorStalledSeconds: number;
    readonly holdSeconds: number;
  };
  readonly trackerCoreOtherPct: number | null;
  readonly failures: {
    readonly joinTimeouts: number;
    readonly connectFailures: number;
    readonly closedBeforeWelcome: number;
    readonly closedAfterWelcome: number;
    readonly notAttempted: number;
    readonly relaysLost: number;
    readonly relayMismatches: number;
    readonly relaysSkipped: number;
    readonly unexpectedMessages: number;
    readonly trackerErrors: Tally;
    readonly socketErrors: Tally;
  };
  readonly trackerWarnings: number;
  readonly trackerLogTail: readonly string[];
  readonly trackerExit: ChildExit | null;
  readonly generators: readonly {
    readonly peers: number;
    readonly swarms: number;
    readonly exit: ChildExit | null;
    readonly finished: string | null;
    readonly stderrTail: readonly string[];
  }[];
  readonly limits: { readonly trackerOpenFiles: number | null; readonly generatorOpenFiles: number };
  readonly verdict: Verdict;
  readonly machine: Machine;
  readonly tracker: {
    readonly cli: string;
    readonly commit: string | null;
    readonly srcChanged: boolean;
    readonly builtAt: string | null;
  };
  readonly startedAt: string;
  readonly timeline: readonly TimelineSample[];
}

/** One point of a sweep: the value swept, its directory (under the sweep's) and its result. */
export interface SweepPoint {
  readonly value: number;
  readonly label: string;
  readonly result: PointResult;
}

const series = (timeline: readonly TimelineSample[], key: TimelineColumn): { x: number; y: number }[] =>
  timeline.map((s) => ({ x: s.tS ?? Number.NaN, y: s[key] ?? Number.NaN }));

function machineLines(m: Machine): string[] {
  return [
    `- machine: ${m.nproc} cores (\`nproc\`), ${m.cpuModel}, Node ${m.node}, Linux ${m.kernel}`,
    `- load average before the run: ${m.loadAverageBefore.join(', ')}`,
    `- tracker pinned to core ${m.trackerCore}; load generators and this orchestrator to core ${m.generatorCore}` +
      (m.nice === 0 ? '' : `; tracker and generators at nice ${m.nice}`),
  ];
}

/** How template literals showed null before: as the word. */
const show = (x: number | string | null): string => (x === null ? 'null' : String(x));

export function writeOutputs(dir: string, r: PointResult, command: string, relayP99GoalMs: number): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'result.json'), `${JSON.stringify(r, null, 2)}\n`);
  const t = r.timeline;
  const plots = {
    'sessions.svg': linePlot({
      title: `Sessions held (${r.peers} peers at ${r.joinRate} joins/s)`,
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'Sessions',
      series: [
        { name: 'sessions welcomed and open (generators)', points: series(t, 'sessions') },
        { name: 'connections (tracker /healthz)', points: series(t, 'trackerConnections') },
      ],
      yMin: 0,
    }),
    'rates.svg': linePlot({
      title: 'Joins and relays per second',
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'Per second',
      series: [
        { name: 'joins/s (welcomes)', points: series(t, 'joinsPerSec') },
        { name: 'relays/s (delivered)', points: series(t, 'relaysPerSec') },
      ],
      yMin: 0,
    }),
    'relay-latency.svg': linePlot({
      title: 'Signal relay latency per second (sender → tracker → receiver)',
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'Latency (ms)',
      series: [
        { name: 'p50', points: series(t, 'relayMsP50') },
        { name: 'p99', points: series(t, 'relayMsP99') },
        { name: 'max', points: series(t, 'relayMsMax') },
      ],
      yMin: 0,
    }),
    'cpu.svg': linePlot({
      title: 'CPU (% of one core)',
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'CPU (%)',
      series: [
        { name: 'tracker', points: series(t, 'trackerCpuPct') },
        { name: 'load generators', points: series(t, 'clientCpuPct') },
        { name: "other load on the tracker's core", points: series(t, 'trackerCoreOtherPct') },
      ],
      yMin: 0,
      yMax: 110,
    }),
    'stalls.svg': linePlot({
      title: 'Longest stall per second: event loops and relays',
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'ms',
      series: [
        { name: 'slowest relay', points: series(t, 'relayMsMax') },
        { name: "tracker's event loop (probe)", points: series(t, 'trackerLoopDelayMaxMs') },
        { name: "generators' event loops", points: series(t, 'clientLoopDelayMaxMs') },
        { name: 'tracker GC pause', points: series(t, 'trackerGcMaxMs') },
      ],
      yMin: 0,
    }),
    'rss.svg': linePlot({
      title: 'Tracker resident memory',
      xLabel: 'Time since the tracker started (s)',
      yLabel: 'RSS (MB)',
      series: [{ name: 'tracker RSS', points: series(t, 'trackerRssMB') }],
      yMin: 0,
    }),
  };
  for (const [name, svg] of Object.entries(plots)) writeFileSync(join(dir, name), `${svg}\n`);

  const f = r.failures;
  const tally = (o: Tally): string =>
    Object.keys(o).length === 0
      ? 'none'
      : Object.entries(o)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ');
  const yes = (ok: boolean): string => (ok ? 'yes' : '**no**');
  const lines = [
    `# Tracker load benchmark: ${r.peers} peers at ${r.joinRate} joins/s`,
    '',
    `\`${command}\` — ${r.startedAt}`,
    '',
    ...machineLines(r.machine),
    `- ${r.swarms} swarm(s) of ≤ ${r.swarmSize} viewers, ${r.relaysPerSecTarget} relays/s of ${r.sdpBytes}-byte offers, ` +
      `${r.bootstrapsPerSecTarget} bootstraps/s while holding, ${r.duration} s hold; ${r.generators.length} generator process(es)`,
    `- open-files limit: tracker ${show(r.limits.trackerOpenFiles)}, generators ${r.limits.generatorOpenFiles}`,
    `- tracker: ${r.tracker.cli} at commit ${r.tracker.commit ?? '?'}${r.tracker.srcChanged ? ' (tracker/src or wire changed since)' : ''}, built ${r.tracker.builtAt ?? '?'}`,
    '',
    '| | goal | measured | met |',
    '| --- | --- | --- | --- |',
    `| sessions held | ${r.peers} | ${r.sessionsHeld} (tracker: ${r.trackerConnectionsAtEnd ?? '?'}) | ${yes(r.sessionsHeld >= r.peers)} |`,
    `| joins/s (welcomes) | ${r.joinRate} | ${show(r.joinsPerSec)} (join p50 ${show(r.joinMsP50)} ms, p99 ${show(r.joinMsP99)} ms) | ${yes((r.joinsPerSec ?? 0) >= JOIN_RATE_TOLERANCE * r.joinRate)} |`,
    `| relay p99 while holding | < ${relayP99GoalMs} ms | ${show(r.relayMsP99)} ms (p50 ${show(r.relayMsP50)}, max ${show(r.relayMsMax)}; ${r.relays} relays, ${show(r.relaysPerSec)}/s) | ${yes(r.relayMsP99 !== null && r.relayMsP99 < relayP99GoalMs)} |`,
    `| relay p99 while joining | | ${show(r.joinPhaseRelays.relayMsP99)} ms (p50 ${show(r.joinPhaseRelays.relayMsP50)}, max ${show(r.joinPhaseRelays.relayMsMax)}; ${r.joinPhaseRelays.relays} relays) | |`,
    `| tracker CPU (% of one core) | < ${CPU_SATURATED_PCT} | hold ${show(r.cpuPct)}, join ${show(r.cpuPctJoin)}, peak ${show(r.cpuPctPeak)} | ${yes((r.cpuPct ?? 0) < CPU_SATURATED_PCT && (r.cpuPctJoin ?? 0) < CPU_SATURATED_PCT)} |`,
    `| tracker RSS (peak) | | ${show(r.rssMB)} MB (${r.rssKBPerSession ?? '?'} KB per session) | |`,
    `| bootstrap | | ${r.bootstrap.answered}/${r.bootstrap.requests} answered, p99 ${show(r.bootstrap.msP99)} ms, ${r.bootstrap.foreignPeers} foreign ids, ${r.bootstrap.notYetWelcomedPeers} not yet welcomed | |`,
    `| tracker CPU per unit (rough) | | ${r.cpuUsPerRelay ?? '?'} µs per relay while holding, ${r.cpuUsPerJoin ?? '?'} µs per join | |`,
    `| load generators' CPU | | hold ${show(r.clientCpuPct)}, join ${show(r.clientCpuPctJoin)}; loop delay p99 ≤ ${r.clientLoopDelayP99MsMax} ms | |`,
    `| stalls ≥ ${relayP99GoalMs} ms while holding | | tracker loop: ${r.stalls.trackerStalledSeconds ?? '?'} of ${r.stalls.holdSeconds} s (longest ${r.stalls.trackerLoopDelayMaxMs ?? '?'} ms, GC ≤ ${r.stalls.trackerGcMaxMs ?? '?'} ms); generators: ${r.stalls.generatorStalledSeconds} s (longest ${r.stalls.generatorLoopDelayMaxMs} ms) | |`,
    '',
    `Failures: join timeouts ${f.joinTimeouts}, connect failures ${f.connectFailures}, closed before welcome ` +
      `${f.closedBeforeWelcome}, closed after welcome ${f.closedAfterWelcome}, not attempted ${f.notAttempted}, ` +
      `relays lost ${f.relaysLost}, mismatched ${f.relayMismatches}, skipped ${f.relaysSkipped}; tracker errors: ` +
      `${tally(f.trackerErrors)}; socket errors: ${tally(f.socketErrors)}; tracker log lines at warn or above: ${r.trackerWarnings}.`,
    '',
    r.verdict.ok ? 'Verdict: every goal met.' : `Verdict: bent — ${r.verdict.reasons.join('; ')}.`,
    ...r.verdict.caveats.map((c) => `\nCaveat: ${c}.`),
    '',
    '![sessions](sessions.svg) ![rates](rates.svg)',
    '![relay latency](relay-latency.svg) ![stalls](stalls.svg) ![cpu](cpu.svg) ![rss](rss.svg)',
    '',
  ];
  writeFileSync(join(dir, 'report.md'), lines.join('\n'));
}

/** A sweep's sweep.json. */
export interface SweepSummary {
  readonly sweep: string;
  readonly values: readonly number[];
  readonly bend: { readonly value: number; readonly reasons: readonly string[] } | null;
  /** The first value at which each goal failed, and the generators first saturated their core. */
  readonly bendBy: Readonly<
    Record<'sessions' | 'joinRate' | 'relayP99' | 'cpu' | 'generatorSaturated', number | null>
  >;
  readonly points: readonly Record<string, unknown>[];
  readonly machine: Machine | null;
}

export function writeSweep(
  dir: string,
  sweep: Sweep,
  points: readonly SweepPoint[],
  command: string,
  relayP99GoalMs: number,
): SweepSummary {
  mkdirSync(dir, { recursive: true });
  const bendIndex = points.findIndex((p) => !p.result.verdict.ok);
  const bent = bendIndex < 0 ? undefined : points[bendIndex];
  const firstValue = (test: (r: PointResult) => boolean): number | null =>
    points.find((p) => test(p.result))?.value ?? null;
  /** Where each goal first fails, and where the generators (not the tracker) run out of CPU. */
  const bendBy = {
    sessions: firstValue((r) => r.verdict.failed.sessions),
    joinRate: firstValue((r) => r.verdict.failed.joinRate),
    relayP99: firstValue((r) => r.verdict.failed.relayP99),
    cpu: firstValue((r) => r.verdict.failed.cpu),
    generatorSaturated: firstValue((r) => r.verdict.generatorSaturated),
  };
  const summary: SweepSummary = {
    sweep: sweep.flag,
    values: sweep.values,
    bend: bent === undefined ? null : { value: bent.value, reasons: bent.result.verdict.reasons },
    bendBy,
    points: points.map(({ value, label, result: r }) => ({
      value,
      dir: label,
      peers: r.peers,
      joinRate: r.joinRate,
      relaysPerSecTarget: r.relaysPerSecTarget,
      swarmSize: r.swarmSize,
      sessionsHeld: r.sessionsHeld,
      joinsPerSec: r.joinsPerSec,
      joinMsP99: r.joinMsP99,
      relayMsP50: r.relayMsP50,
      relayMsP99: r.relayMsP99,
      relayMsMax: r.relayMsMax,
      joinPhaseRelayMsP99: r.joinPhaseRelays.relayMsP99,
      relaysPerSec: r.relaysPerSec,
      cpuPct: r.cpuPct,
      cpuPctJoin: r.cpuPctJoin,
      cpuPctPeak: r.cpuPctPeak,
      rssMB: r.rssMB,
      clientCpuPct: r.clientCpuPct,
      clientCpuPctJoin: r.clientCpuPctJoin,
      trackerCoreOtherPct: r.trackerCoreOtherPct,
      failures: r.failures,
      verdict: r.verdict,
    })),
    machine: points[0]?.result.machine ?? null,
  };
  writeFileSync(join(dir, 'sweep.json'), `${JSON.stringify(summary, null, 2)}\n`);
  const xs = points.map((p) => p.value);
  const last = xs[xs.length - 1];
  const xy = (key: 'relayMsP50' | 'relayMsP99' | 'cpuPctJoin' | 'cpuPct' | 'clientCpuPctJoin') =>
    points.map((p) => ({ x: p.value, y: p.result[key] ?? Number.NaN }));
  writeFileSync(
    join(dir, 'sweep-latency.svg'),
    `${linePlot({
      title: `Relay latency while holding, by ${sweep.flag}`,
      xLabel: sweep.flag,
      yLabel: 'Latency (ms)',
      series: [
        { name: 'p50', points: xy('relayMsP50') },
        { name: 'p99', points: xy('relayMsP99') },
        { name: `goal (p99 < ${relayP99GoalMs} ms)`, points: xs.map((x) => ({ x, y: relayP99GoalMs })) },
      ],
      yMin: 0,
    })}\n`,
  );
  writeFileSync(
    join(dir, 'sweep-cpu.svg'),
    `${linePlot({
      title: `Tracker CPU and joins/s, by ${sweep.flag}`,
      xLabel: sweep.flag,
      yLabel: '% of one core',
      series: [
        { name: 'tracker CPU while joining', points: xy('cpuPctJoin') },
        { name: 'tracker CPU while holding', points: xy('cpuPct') },
        { name: 'load generators while joining', points: xy('clientCpuPctJoin') },
      ],
      yMin: 0,
      yMax: 110,
    })}\n`,
  );
  const first = points[0]?.result;
  const lines = [
    `# Tracker load sweep over ${sweep.flag}`,
    '',
    `\`${command}\``,
    '',
    ...(first === undefined ? [] : machineLines(first.machine)),
    '',
    `A point bends when it holds fewer sessions than it opened, joins below ${JOIN_RATE_TOLERANCE * 100} % of the ` +
      `rate asked, has a relay p99 ≥ ${relayP99GoalMs} ms while holding, or the tracker's CPU averages ≥ ` +
      `${CPU_SATURATED_PCT} % in a phase.`,
    '',
    '| ' +
      [
        sweep.flag,
        'peers',
        'joins/s asked',
        'relays/s asked',
        'held',
        'joins/s',
        'join p99 ms',
        'relay p50 ms',
        'relay p99 ms',
        'relay max ms',
        'relay p99 joining ms',
        'tracker CPU join/hold/peak %',
        'RSS MB',
        'generators CPU join/hold %',
        'bent because',
      ].join(' | ') +
      ' |',
    `|${' --- |'.repeat(15)}`,
    ...points.map(
      ({ value, label, result: r }) =>
        `| [${value}](${label}/report.md) | ${r.peers} | ${r.joinRate} | ${r.relaysPerSecTarget} | ${r.sessionsHeld} | ` +
        `${show(r.joinsPerSec)} | ${show(r.joinMsP99)} | ${show(r.relayMsP50)} | ${show(r.relayMsP99)} | ${show(r.relayMsMax)} | ` +
        `${show(r.joinPhaseRelays.relayMsP99)} | ${show(r.cpuPctJoin)}/${show(r.cpuPct)}/${show(r.cpuPctPeak)} | ${show(r.rssMB)} | ` +
        `${show(r.clientCpuPctJoin)}/${show(r.clientCpuPct)} | ${r.verdict.reasons.join('; ') || '—'}` +
        `${r.verdict.caveats.length > 0 ? ` (caveat: ${r.verdict.caveats.join('; ')})` : ''} |`,
    ),
    '',
    bent === undefined
      ? `No point bent: the tracker met every goal up to ${sweep.flag} = ${show(last ?? null)}.`
      : `It bends at ${sweep.flag} = ${bent.value}: ${bent.result.verdict.reasons.join('; ')}.`,
    '',
    `First ${sweep.flag} at which each goal fails (— = none up to ${show(last ?? null)}): sessions held ` +
      `${bendBy.sessions ?? '—'}, joins/s ${bendBy.joinRate ?? '—'}, relay p99 ${bendBy.relayP99 ?? '—'}, ` +
      `tracker CPU ${bendBy.cpu ?? '—'}; the load generators saturate their core from ` +
      `${bendBy.generatorSaturated ?? '— (never)'}${bendBy.generatorSaturated === null ? '' : ' on (figures there bound the tracker from below)'}.`,
    '',
    '![relay latency by point](sweep-latency.svg) ![cpu by point](sweep-cpu.svg)',
    '',
  ];
  writeFileSync(join(dir, 'report.md'), lines.join('\n'));
  return summary;
}
