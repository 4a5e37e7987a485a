/**
 * `npm run lab -- --scenario NAME --duration S --out DIR`: a small internet on this machine. Builds
 * network namespaces (a public segment with the tracker, the origin, the true source and coturn;
 * every viewer in its own home behind its own NAT, with capped uplinks), runs one Debian Chromium
 * per home for S seconds and writes DIR/result.json, DIR/report.md and DIR/links.svg. Needs root
 * (namespaces, nftables, tc). Re-runs itself in a fresh network namespace, so nothing leaves the
 * machine. Progress goes to stderr.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { noPositionals, numberOption, parseCommandLine, stringValue, UsageError } from '../lib/args.js';
import { runIsolated } from '../lib/netns.js';
import { fromRoot } from '../lib/paths.js';
import { linksSvg, reportMarkdown } from './report.js';
import { runLab } from './run.js';
import { SCENARIOS } from './scenarios.js';

const USAGE = `usage: npm run lab -- [--scenario NAME] [--duration S] [--out DIR] [options]

Builds a lab internet out of network namespaces (NATs, capped uplinks, coturn) and watches one
Chromium viewer per home for S seconds. Writes DIR/result.json, DIR/report.md, DIR/links.svg.

scenarios:
${Object.entries(SCENARIOS)
  .map(([name, s]) => `  ${name.padEnd(16)}${s.description} (default ${s.defaultDurationS} s)`)
  .join('\n')}

options:
  --scenario NAME   one of the above (default mixed)
  --duration S      seconds to watch after the last viewer opened (default: the scenario's)
  --out DIR         output directory (default out/lab-NAME)
  --show-video      paint the players (default: hidden with display: none, still decoded: less CPU)
  --echo            print the tracker's and coturn's logs
  --expose-host-addresses
                    grant the pages a (fake) microphone so Chromium puts real host addresses in
                    its candidates instead of mDNS names (default: mDNS, as for real viewers)
  --help            print this help`;

const opts = parseCommandLine(
  'lab',
  USAGE,
  {
    scenario: { type: 'string' },
    duration: { type: 'string' },
    out: { type: 'string' },
    'show-video': { type: 'boolean' },
    echo: { type: 'boolean' },
    'expose-host-addresses': { type: 'boolean' },
  },
  (parsed) => {
    noPositionals(parsed);
    const scenarioName = stringValue(parsed, 'scenario') ?? 'mixed';
    const scenario = SCENARIOS[scenarioName];
    if (scenario === undefined)
      throw new UsageError(
        `unknown scenario ${JSON.stringify(scenarioName)}: one of ${Object.keys(SCENARIOS).join(', ')}`,
      );
    return {
      scenarioName,
      durationS: numberOption('duration', stringValue(parsed, 'duration'), scenario.defaultDurationS, {
        min: 10,
      }),
      /** As given (for the command line in result.json), or undefined for the default. */
      out: stringValue(parsed, 'out'),
      showVideo: parsed.values['show-video'] === true,
      echo: parsed.values.echo === true,
      exposeHostAddresses: parsed.values['expose-host-addresses'] === true,
    };
  },
);
if (process.getuid?.() !== 0) {
  process.stderr.write('lab: needs root (network namespaces, nftables NAT and tc shaping)\n');
  process.exit(1);
}
await runIsolated(fileURLToPath(import.meta.url), process.argv.slice(2));

const outDir = resolve(opts.out ?? fromRoot('out', `lab-${opts.scenarioName}`));
mkdirSync(outDir, { recursive: true });
const t0 = Date.now();
const log = (line: string): void => {
  process.stderr.write(`lab: ${line}\n`);
};
log(`scenario ${opts.scenarioName}, ${opts.durationS} s, results in ${outDir}`);
const { result, consoles } = await runLab({
  scenarioName: opts.scenarioName,
  durationS: opts.durationS,
  progress: log,
  showVideo: opts.showVideo,
  echo: opts.echo,
  exposeHostAddresses: opts.exposeHostAddresses,
});
result.command = `npm run lab -- --scenario ${opts.scenarioName} --duration ${opts.durationS} --out ${opts.out ?? `out/lab-${opts.scenarioName}`}`;
result.wallS = Math.round((Date.now() - t0) / 1000);
writeFileSync(join(outDir, 'result.json'), `${JSON.stringify(result, null, 2)}\n`);
writeFileSync(join(outDir, 'report.md'), reportMarkdown(result));
writeFileSync(join(outDir, 'links.svg'), linksSvg(result));
writeFileSync(
  join(outDir, 'consoles.txt'),
  consoles.map((c, i) => `── ${result.viewers[i]?.name ?? `#${i}`}\n${c}`).join('\n'),
);
log(
  `done in ${result.wallS} s: mesh ${(100 * result.meshShare).toFixed(1)}%, origin ${result.streamCopiesFromOrigin?.toFixed(2) ?? '—'} copies, ` +
    `stalls ${result.stalls}, relayed ${(result.relayedBytes / 1024).toFixed(0)} KiB, min peers ${result.minPeers}`,
);
