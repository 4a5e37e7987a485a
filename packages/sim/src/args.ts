import { parseArgs as parseCommandLine, type ParseArgsConfig } from 'node:util';
import { DEFAULT_PROTOCOL } from '@chunkycast/engine';
import { REPORTS_TO_BAN } from '@chunkycast/wire';
import { ADVERSARY_KINDS, AdversaryParseError, parseAdversaries } from './adversaries.js';
import { DEFAULT_RUN, UsageError, isProtocolKey, isScenario, type RunOptions } from './run.js';
import { SCENARIO_NAMES } from './scenarios.js';

export const HELP = `Usage: npm run sim -- --scenario <${SCENARIO_NAMES.join('|')}> [options]

Runs the Chunkyspread engine in a discrete-event simulation and writes
DIR/summary.json, DIR/report.md and SVG plots.

Options:
  --scenario NAME        ${SCENARIO_NAMES.join(', ')} (required)
  --nodes N              members (default ${DEFAULT_RUN.nodes}; join: 75% present + 25% joining at 50/s;
                         grow: one at the start, the others joining one every 2 s from 10 s)
  --seed S               master seed (default ${DEFAULT_RUN.seed})
  --lat 0|2              Lat0 (LLT=ULT=TL) or Lat2 (±2·TL/16) (default ${DEFAULT_RUN.lat})
  --out DIR              output directory (default sim-out/<scenario>-<nodes>-lat<lat>-s<seed>)
  --duration SECONDS     simulated time (defaults: static 120, join 200, burst 90, churn 1200,
                         grow 30 s after the last join)
  --packet-rate R        data packets per slice per second (default ${DEFAULT_RUN.packetsPerSlicePerSecond})
  --stream-kbps K        stream rate, sets data packet sizes on uplinks (default ${DEFAULT_RUN.streamKbps})
  --uplink-headroom H    uplink capacity = H × ML × slice rate; 0 = unlimited, the thesis's model
                         (default ${DEFAULT_RUN.uplinkHeadroom})
  --data-loss F          long-run fraction of data packets lost on a link (default 0)
  --loss-model M         gilbert (Gilbert–Elliott bursts, default) or bernoulli (independent)
  --loss-burst N         mean burst length in packets for gilbert (default ${DEFAULT_RUN.lossBurstPackets})
  --loss-at W            all (every link, default) or sources (only the trees' first hops: the true
                         source's links and each slice source's)
  --buffer-ms MS         playback buffer behind the slowest first packet (default ${DEFAULT_RUN.playbackBufferMs});
                         a packet later than its play time is a missed deadline
  --parity MODE          off (default), auto (a 17th slice of XOR parity, switched on and off by the
                         audience's measured loss) or on (always)
  --production MODE      when the true source publishes what the packager writes at the stream
                         rate: progressive (default: each packet as soon as its bytes are written)
                         or segment (a segment's packets all at once, in order, at the segment's
                         end, when the playlist lists it); summary.json's production figures give
                         the delay from a packet's write to its last member either way
  --segment-ms MS        segment duration for --production segment (default ${DEFAULT_RUN.segmentMs})
  --graceful F           fraction of churn departures that quit gracefully (default 0)
  --adversaries LIST    hostile members, KIND:FRACTION[,KIND:FRACTION] or all:FRACTION (each kind
                         at that fraction); the summary is then of honest members, plus what the
                         attackers got away with. Kinds: ${ADVERSARY_KINDS.join(', ')}
  --no-rendezvous-ban    the rendezvous keeps signalling for a peer that members cut off (by default
                         it stops once ${REPORTS_TO_BAN} of them reported it, as the tracker does)
  --set NAME=VALUE       override a protocol constant (repeatable), e.g. --set latencySwitchMarginMs=80
                         names: ${Object.keys(DEFAULT_PROTOCOL).join(', ')}
  --codec-sample N       encode and decode only one message in N (default 1: every message crosses
                         the wire codec); for the largest runs, recorded in summary.json's codec
  --quiet                no progress on stderr
  --help                 this text
`;

/** The flags; every value is a string checked below (`--set` may repeat). */
const FLAGS = {
  help: { type: 'boolean', short: 'h' },
  scenario: { type: 'string' },
  nodes: { type: 'string' },
  seed: { type: 'string' },
  lat: { type: 'string' },
  out: { type: 'string' },
  duration: { type: 'string' },
  'packet-rate': { type: 'string' },
  'stream-kbps': { type: 'string' },
  'uplink-headroom': { type: 'string' },
  'data-loss': { type: 'string' },
  'loss-model': { type: 'string' },
  'loss-burst': { type: 'string' },
  'loss-at': { type: 'string' },
  parity: { type: 'string' },
  'buffer-ms': { type: 'string' },
  graceful: { type: 'string' },
  production: { type: 'string' },
  'segment-ms': { type: 'string' },
  set: { type: 'string', multiple: true },
  adversaries: { type: 'string' },
  'no-rendezvous-ban': { type: 'boolean' },
  'codec-sample': { type: 'string' },
  quiet: { type: 'boolean' },
} as const satisfies ParseArgsConfig['options'];

function parseNumber(flag: string, value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n))
    throw new UsageError(`${flag} must be a number, got "${value}"`);
  return n;
}

/** node:util's parse errors, in this command's words. */
function usageErrorFrom(error: unknown): UsageError | null {
  if (!(error instanceof Error) || !('code' in error)) return null;
  const named = /'(-[^' ]+)/.exec(error.message)?.[1] ?? '';
  switch (error.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return new UsageError(`unknown option "${named}" (see --help)`);
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL': {
      const arg = /'([^']*)'/.exec(error.message)?.[1] ?? '';
      return new UsageError(`unexpected argument "${arg}" (see --help)`);
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      // A string flag at the end, or followed by something that looks like a flag; or a value
      // given to an on/off flag.
      const flag = named.replace(/^--/, '');
      const onOff = Object.hasOwn(FLAGS, flag) && FLAGS[flag as keyof typeof FLAGS].type === 'boolean';
      return onOff
        ? new UsageError(`${named} takes no value`)
        : new UsageError(`${named} needs a value (one starting with "-" is written ${named}=VALUE)`);
    }
    default:
      return null;
  }
}

export function parseArgs(
  argv: readonly string[],
): { options: RunOptions; out: string | undefined; quiet: boolean } | 'help' {
  let values;
  try {
    ({ values } = parseCommandLine({
      args: [...argv],
      options: FLAGS,
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw usageErrorFrom(error) ?? error;
  }
  if (values.help === true) return 'help';
  const protocol: Record<string, number> = {};
  const options: Omit<RunOptions, 'scenario'> = { ...DEFAULT_RUN, protocol };
  const number = (flag: keyof typeof FLAGS): number | undefined => {
    const value = values[flag];
    return typeof value === 'string' ? parseNumber(`--${flag}`, value) : undefined;
  };
  const nodes = number('nodes');
  if (nodes !== undefined) options.nodes = nodes;
  const seed = number('seed');
  if (seed !== undefined) {
    if (!Number.isInteger(seed) || seed < 0) throw new UsageError('--seed must be a non-negative integer');
    options.seed = seed;
  }
  const lat = number('lat');
  if (lat !== undefined) {
    if (lat !== 0 && lat !== 2) throw new UsageError(`--lat must be 0 or 2, got ${lat}`);
    options.lat = lat;
  }
  const durationS = number('duration');
  if (durationS !== undefined) {
    if (durationS <= 0) throw new UsageError('--duration must be positive');
    options.durationS = durationS;
  }
  const packetRate = number('packet-rate');
  if (packetRate !== undefined) {
    if (packetRate <= 0 || packetRate > 100) throw new UsageError('--packet-rate must be in (0, 100]');
    options.packetsPerSlicePerSecond = packetRate;
  }
  const streamKbps = number('stream-kbps');
  if (streamKbps !== undefined) {
    if (streamKbps <= 0) throw new UsageError('--stream-kbps must be positive');
    options.streamKbps = streamKbps;
  }
  const headroom = number('uplink-headroom');
  if (headroom !== undefined) {
    if (headroom < 0 || (headroom > 0 && headroom < 1))
      throw new UsageError('--uplink-headroom must be 0 (unlimited) or at least 1');
    options.uplinkHeadroom = headroom;
  }
  const dataLoss = number('data-loss');
  if (dataLoss !== undefined) {
    if (dataLoss < 0 || dataLoss >= 1) throw new UsageError('--data-loss must be in [0, 1)');
    options.dataLoss = dataLoss;
  }
  const model = values['loss-model'];
  if (model !== undefined) {
    if (model !== 'gilbert' && model !== 'bernoulli')
      throw new UsageError(`--loss-model must be gilbert or bernoulli, got "${model}"`);
    options.lossModel = model;
  }
  const burst = number('loss-burst');
  if (burst !== undefined) {
    if (burst < 1 || burst > 1000) throw new UsageError('--loss-burst must be in [1, 1000]');
    options.lossBurstPackets = burst;
  }
  const where = values['loss-at'];
  if (where !== undefined) {
    if (where !== 'all' && where !== 'sources')
      throw new UsageError(`--loss-at must be all or sources, got "${where}"`);
    options.lossAt = where;
  }
  const parity = values.parity;
  if (parity !== undefined) {
    if (parity !== 'off' && parity !== 'auto' && parity !== 'on')
      throw new UsageError(`--parity must be off, auto or on, got "${parity}"`);
    options.parity = parity;
  }
  const bufferMs = number('buffer-ms');
  if (bufferMs !== undefined) {
    if (bufferMs < 0 || bufferMs > 60_000) throw new UsageError('--buffer-ms must be in [0, 60000]');
    options.playbackBufferMs = bufferMs;
  }
  const graceful = number('graceful');
  if (graceful !== undefined) {
    if (graceful < 0 || graceful > 1) throw new UsageError('--graceful must be in [0, 1]');
    options.gracefulLeaveFraction = graceful;
  }
  const production = values.production;
  if (production !== undefined) {
    if (production !== 'progressive' && production !== 'segment')
      throw new UsageError(`--production must be progressive or segment, got "${production}"`);
    options.production = production;
  }
  const segmentMs = number('segment-ms');
  if (segmentMs !== undefined) {
    if (segmentMs < 1 || segmentMs > 60_000) throw new UsageError('--segment-ms must be in [1, 60000]');
    options.segmentMs = segmentMs;
  }
  for (const pair of values.set ?? []) {
    const eq = pair.indexOf('=');
    const key = pair.slice(0, eq);
    if (eq <= 0 || !isProtocolKey(key))
      throw new UsageError(`--set expects NAME=VALUE with a protocol constant name, got "${pair}"`);
    protocol[key] = parseNumber(`--set ${key}`, pair.slice(eq + 1));
  }
  if (values.adversaries !== undefined) {
    try {
      options.adversaries = parseAdversaries(values.adversaries);
    } catch (error) {
      if (error instanceof AdversaryParseError) throw new UsageError(error.message);
      throw error;
    }
  }
  if (values['no-rendezvous-ban'] === true) options.rendezvousBan = false;
  const codecSample = number('codec-sample');
  if (codecSample !== undefined) {
    if (!Number.isSafeInteger(codecSample) || codecSample < 1)
      throw new UsageError('--codec-sample must be a whole number ≥ 1');
    options.codecSampleEvery = codecSample;
  }
  const scenario = values.scenario;
  if (scenario === undefined) throw new UsageError('--scenario is required (see --help)');
  if (!isScenario(scenario))
    throw new UsageError(`unknown scenario "${scenario}"; choose one of ${SCENARIO_NAMES.join(', ')}`);
  return {
    options: { ...options, protocol: protocol, scenario },
    out: values.out,
    quiet: values.quiet === true,
  };
}
