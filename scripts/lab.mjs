#!/usr/bin/env node
// `npm run lab -- --scenario NAME --duration S --out DIR`: a small internet on this machine. Builds
// network namespaces (a public segment with the tracker, the origin, the true source and coturn;
// every viewer in its own home behind its own NAT, with capped uplinks), runs one Debian Chromium
// per home for S seconds and writes DIR/result.json, DIR/report.md and DIR/links.svg. Needs root
// (namespaces, nftables, tc). Re-runs itself in a fresh network namespace, so nothing leaves the
// machine. Progress goes to stderr.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { numberOption as num, parseCliOrExit, root, runIsolated } from '../e2e/src/harness.mjs';
import { runLab } from '../e2e/src/lab/run.mjs';
import { linksSvg, reportMarkdown } from '../e2e/src/lab/report.mjs';
import { SCENARIOS } from '../e2e/src/lab/scenarios.mjs';

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

function parseArgs(argv) {
  const o = { scenario: 'mixed', duration: undefined, out: undefined, showVideo: false, echo: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') o.help = true;
    else if (a === '--scenario') o.scenario = argv[++i];
    else if (a === '--duration') o.duration = num(a, argv[++i], 10);
    else if (a === '--out') {
      o.out = argv[++i];
      if (o.out === undefined) throw new Error('--out needs a directory');
    } else if (a === '--show-video') o.showVideo = true;
    else if (a === '--echo') o.echo = true;
    else if (a === '--expose-host-addresses') o.exposeHostAddresses = true;
    else throw new Error(`unknown option ${a}`);
  }
  if (!(o.scenario in SCENARIOS))
    throw new Error(
      `unknown scenario ${JSON.stringify(o.scenario)}: one of ${Object.keys(SCENARIOS).join(', ')}`,
    );
  return o;
}

const opts = parseCliOrExit('lab', parseArgs, USAGE);
if (process.getuid?.() !== 0) {
  process.stderr.write('lab: needs root (network namespaces, nftables NAT and tc shaping)\n');
  process.exit(1);
}
await runIsolated(fileURLToPath(import.meta.url), process.argv.slice(2));

const durationS = opts.duration ?? SCENARIOS[opts.scenario].defaultDurationS;
const outDir = resolve(opts.out ?? join(root, 'out', `lab-${opts.scenario}`));
mkdirSync(outDir, { recursive: true });
const t0 = Date.now();
const log = (line) => process.stderr.write(`lab: ${line}\n`);
log(`scenario ${opts.scenario}, ${durationS} s, results in ${outDir}`);
const { result, consoles } = await runLab({
  scenarioName: opts.scenario,
  durationS,
  progress: log,
  showVideo: opts.showVideo,
  echo: opts.echo,
  exposeHostAddresses: opts.exposeHostAddresses === true,
});
result.command = `npm run lab -- --scenario ${opts.scenario} --duration ${durationS} --out ${opts.out ?? `out/lab-${opts.scenario}`}`;
result.wallS = Math.round((Date.now() - t0) / 1000);
writeFileSync(join(outDir, 'result.json'), `${JSON.stringify(result, null, 2)}\n`);
writeFileSync(join(outDir, 'report.md'), reportMarkdown(result));
writeFileSync(join(outDir, 'links.svg'), linksSvg(result));
writeFileSync(
  join(outDir, 'consoles.txt'),
  consoles.map((c, i) => `── ${result.viewers[i]?.name}\n${c}`).join('\n'),
);
log(
  `done in ${result.wallS} s: mesh ${(100 * result.meshShare).toFixed(1)}%, origin ${result.streamCopiesFromOrigin?.toFixed(2)} copies, ` +
    `stalls ${result.stalls}, relayed ${(result.relayedBytes / 1024).toFixed(0)} KiB, min peers ${result.minPeers}`,
);
