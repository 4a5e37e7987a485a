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
  --nodes N              members (default ${DEFAULT_RUN.nodes}; join: 75% present + 25% joining at 50/s)
  --seed S               master seed (default ${DEFAULT_RUN.seed})
  --lat 0|2              Lat0 (LLT=ULT=TL) or Lat2 (±2·TL/16) (default ${DEFAULT_RUN.lat})
  --out DIR              output directory (default sim-out/<scenario>-<nodes>-lat<lat>-s<seed>)
  --duration SECONDS     simulated time (defaults: static 120, join 200, burst 90, churn 1200)
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
  --graceful F           fraction of churn departures that quit gracefully (default 0)
  --adversaries LIST    hostile members, KIND:FRACTION[,KIND:FRACTION] or all:FRACTION (each kind
                         at that fraction); the summary is then of honest members, plus what the
                         attackers got away with. Kinds: ${ADVERSARY_KINDS.join(', ')}
  --no-rendezvous-ban    the rendezvous keeps signalling for a peer that members cut off (by default
                         it stops once ${REPORTS_TO_BAN} of them reported it, as the tracker does)
  --set NAME=VALUE       override a protocol constant (repeatable), e.g. --set latencySwitchMarginMs=80
                         names: ${Object.keys(DEFAULT_PROTOCOL).join(', ')}
  --quiet                no progress on stderr
  --help                 this text
`;

function parseNumber(flag: string, value: string | undefined): number {
  if (value === undefined) throw new UsageError(`${flag} needs a value`);
  const n = Number(value);
  if (!Number.isFinite(n)) throw new UsageError(`${flag} must be a number, got "${value}"`);
  return n;
}

export function parseArgs(
  argv: readonly string[],
): { options: RunOptions; out: string | undefined; quiet: boolean } | 'help' {
  let scenario: string | undefined;
  let out: string | undefined;
  let quiet = false;
  const protocol: Record<string, number> = {};
  const options: Omit<RunOptions, 'scenario'> = { ...DEFAULT_RUN, protocol };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i] ?? '';
    const value = argv[i + 1];
    const take = (): string => {
      i++;
      if (value === undefined || value.startsWith('--')) throw new UsageError(`${flag} needs a value`);
      return value;
    };
    switch (flag) {
      case '--help':
      case '-h':
        return 'help';
      case '--scenario':
        scenario = take();
        break;
      case '--nodes':
        options.nodes = parseNumber(flag, take());
        break;
      case '--seed':
        options.seed = parseNumber(flag, take());
        if (!Number.isInteger(options.seed) || options.seed < 0)
          throw new UsageError('--seed must be a non-negative integer');
        break;
      case '--lat': {
        const lat = parseNumber(flag, take());
        if (lat !== 0 && lat !== 2) throw new UsageError(`--lat must be 0 or 2, got ${lat}`);
        options.lat = lat;
        break;
      }
      case '--out':
        out = take();
        break;
      case '--duration':
        options.durationS = parseNumber(flag, take());
        if (options.durationS <= 0) throw new UsageError('--duration must be positive');
        break;
      case '--packet-rate':
        options.packetsPerSlicePerSecond = parseNumber(flag, take());
        if (options.packetsPerSlicePerSecond <= 0 || options.packetsPerSlicePerSecond > 100)
          throw new UsageError('--packet-rate must be in (0, 100]');
        break;
      case '--stream-kbps':
        options.streamKbps = parseNumber(flag, take());
        if (options.streamKbps <= 0) throw new UsageError('--stream-kbps must be positive');
        break;
      case '--uplink-headroom':
        options.uplinkHeadroom = parseNumber(flag, take());
        if (options.uplinkHeadroom < 0 || (options.uplinkHeadroom > 0 && options.uplinkHeadroom < 1))
          throw new UsageError('--uplink-headroom must be 0 (unlimited) or at least 1');
        break;
      case '--data-loss':
        options.dataLoss = parseNumber(flag, take());
        if (options.dataLoss < 0 || options.dataLoss >= 1)
          throw new UsageError('--data-loss must be in [0, 1)');
        break;
      case '--loss-model': {
        const model = take();
        if (model !== 'gilbert' && model !== 'bernoulli')
          throw new UsageError(`--loss-model must be gilbert or bernoulli, got "${model}"`);
        options.lossModel = model;
        break;
      }
      case '--loss-burst':
        options.lossBurstPackets = parseNumber(flag, take());
        if (options.lossBurstPackets < 1 || options.lossBurstPackets > 1000)
          throw new UsageError('--loss-burst must be in [1, 1000]');
        break;
      case '--loss-at': {
        const where = take();
        if (where !== 'all' && where !== 'sources')
          throw new UsageError(`--loss-at must be all or sources, got "${where}"`);
        options.lossAt = where;
        break;
      }
      case '--parity': {
        const mode = take();
        if (mode !== 'off' && mode !== 'auto' && mode !== 'on')
          throw new UsageError(`--parity must be off, auto or on, got "${mode}"`);
        options.parity = mode;
        break;
      }
      case '--buffer-ms':
        options.playbackBufferMs = parseNumber(flag, take());
        if (options.playbackBufferMs < 0 || options.playbackBufferMs > 60_000)
          throw new UsageError('--buffer-ms must be in [0, 60000]');
        break;
      case '--graceful':
        options.gracefulLeaveFraction = parseNumber(flag, take());
        if (options.gracefulLeaveFraction < 0 || options.gracefulLeaveFraction > 1)
          throw new UsageError('--graceful must be in [0, 1]');
        break;
      case '--set': {
        const pair = take();
        const eq = pair.indexOf('=');
        const key = pair.slice(0, eq);
        if (eq <= 0 || !isProtocolKey(key))
          throw new UsageError(`--set expects NAME=VALUE with a protocol constant name, got "${pair}"`);
        protocol[key] = parseNumber(`--set ${key}`, pair.slice(eq + 1));
        break;
      }
      case '--adversaries':
        try {
          options.adversaries = parseAdversaries(take());
        } catch (error) {
          if (error instanceof AdversaryParseError) throw new UsageError(error.message);
          throw error;
        }
        break;
      case '--no-rendezvous-ban':
        options.rendezvousBan = false;
        break;
      case '--quiet':
        quiet = true;
        break;
      default:
        throw new UsageError(`unknown option "${flag}" (see --help)`);
    }
  }
  if (scenario === undefined) throw new UsageError('--scenario is required (see --help)');
  if (!isScenario(scenario))
    throw new UsageError(`unknown scenario "${scenario}"; choose one of ${SCENARIO_NAMES.join(', ')}`);
  return { options: { ...options, protocol: protocol, scenario }, out, quiet };
}
