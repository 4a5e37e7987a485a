#!/usr/bin/env node
// Makes a fresh clone ready: installs the Debian packages the browser tests need (chromium,
// firefox-esr, ffmpeg…) when missing, npm packages when missing or stale, then builds the
// packages, the SDK bundle and the demo. Runs before `npm start` and `npm test` (npm's pre-scripts), so nothing else has to be done
// first. Quiet when there is nothing to do. Plain JavaScript on purpose: it runs on a fresh clone
// before `npm install` and before anything is compiled (it is what installs TypeScript and builds).
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const stampFile = join(root, 'node_modules', '.setup-stamp');

function run(command, args, { cwd = root, env } = {}) {
  process.stderr.write(`setup: ${command} ${args.join(' ')}\n`);
  const result = spawnSync(command, args, { cwd, stdio: 'inherit', env: { ...process.env, ...env } });
  if (result.status !== 0) {
    process.stderr.write(
      `setup: "${command} ${args.join(' ')}" failed (exit ${result.status ?? result.signal})\n`,
    );
    process.exit(result.status ?? 1);
  }
}

/** Whether the Debian package is installed (dpkg says so; false where there is no dpkg). */
const installed = (name) =>
  spawnSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8' }).stdout?.includes(
    'install ok installed',
  ) === true;
const has = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 20 || (major === 20 && minor < 19)) {
  process.stderr.write(
    `setup: Node ${process.versions.node} is too old; Chunkycast needs Node 20.19 or newer.\n`,
  );
  process.exit(1);
}

// System packages: Debian Chromium and Firefox ESR for the browser tests (browsers cannot be
// downloaded by Playwright here), ffmpeg for the live test stream, iproute2 for the tests' network namespace,
// coturn and nftables for the network lab.
// CHUNKYCAST_SKIP_SYSTEM_PACKAGES=1 skips this (for machines that provide them another way).
if (process.env.CHUNKYCAST_SKIP_SYSTEM_PACKAGES !== '1') {
  const wanted = [
    ['chromium', has('chromium') || has('chromium-browser') || existsSync(process.env.CHROMIUM_PATH ?? '')],
    // Firefox viewers share the e2e swarm with Chromium ones (issue 15), driven over WebDriver BiDi.
    ['firefox-esr', has('firefox-esr') || has('firefox') || existsSync(process.env.FIREFOX_PATH ?? '')],
    // WebKitGTK (Safari's engine) for the WebKit e2e test: its WebDriver and MiniBrowser, on Xvfb.
    ['webkit2gtk-driver', has('WebKitWebDriver')],
    // Xvfb also for the e2e test of a viewer in a really hidden tab (a headful Chromium).
    ['xvfb', has('Xvfb')],
    // WebKitGTK decodes through GStreamer: H.264 and AAC need libav and the plugin sets (recommended
    // by libwebkit2gtk, which --no-install-recommends would skip).
    ...[
      'gstreamer1.0-libav',
      'gstreamer1.0-plugins-base',
      'gstreamer1.0-plugins-good',
      'gstreamer1.0-plugins-bad',
    ].map((name) => [name, installed(name)]),
    ['ffmpeg', has('ffmpeg')],
    ['iproute2', has('ip')],
    // The tracker's Redis scale-out test runs a real redis-server.
    ['redis-server', has('redis-server')],
    // The network lab (`npm run lab`, and its short scenario in the e2e tests): STUN/TURN and NAT.
    ['coturn', has('turnserver')],
    ['nftables', has('nft')],
  ];
  const missing = wanted.filter(([, present]) => !present).map(([name]) => name);
  if (missing.length > 0) {
    const isRoot = process.getuid?.() === 0;
    const sudo =
      !isRoot && has('sudo') && spawnSync('sudo', ['-n', 'true'], { stdio: 'ignore' }).status === 0;
    if (!has('apt-get') || (!isRoot && !sudo)) {
      process.stderr.write(
        `setup: missing system packages: ${missing.join(', ')}.\n` +
          `setup: install them (Debian/Ubuntu: apt-get install -y --no-install-recommends ${missing.join(' ')}),\n` +
          `setup: or run setup as root / with passwordless sudo so it can do it.\n`,
      );
      process.exit(1);
    }
    const prefix = isRoot ? [] : ['sudo', '-n', 'env', 'DEBIAN_FRONTEND=noninteractive'];
    const apt = (args) =>
      prefix.length === 0
        ? run('apt-get', args, { env: { DEBIAN_FRONTEND: 'noninteractive' } })
        : run(prefix[0], [...prefix.slice(1), 'apt-get', ...args]);
    apt(['update', '-qq']);
    apt(['install', '-y', '-qq', '--no-install-recommends', ...missing]);
  }
}

// npm packages: reinstall when the lockfile changed since the last install.
const lock = readFileSync(join(root, 'package-lock.json'));
const digest = createHash('sha256').update(lock).digest('hex');
const stamp = existsSync(stampFile) ? readFileSync(stampFile, 'utf8').trim() : '';
if (stamp !== digest || !existsSync(join(root, 'node_modules', '.bin', 'tsc'))) {
  // `npm install`, not `npm ci`: npm 11 on this machine kind writes lockfiles without the other
  // platforms' optional packages (rollup, esbuild), and `npm ci` then refuses them as out of sync.
  // With an unchanged package.json, install follows the lockfile's versions all the same.
  run('npm', ['install', '--no-audit', '--no-fund']);
  writeFileSync(stampFile, `${digest}\n`);
}

// Build every package (incremental: a no-op when nothing changed).
run(join(root, 'node_modules', '.bin', 'tsc'), ['-b']);

/** Newest modification time (ms) of the files under `paths` (dist and node_modules skipped). */
function newest(paths) {
  let max = 0;
  const visit = (path) => {
    if (!existsSync(path)) return;
    const st = statSync(path);
    if (st.isDirectory()) {
      for (const name of readdirSync(path))
        if (name !== 'node_modules' && name !== 'dist') visit(join(path, name));
    } else max = Math.max(max, st.mtimeMs);
  };
  for (const p of paths) visit(p);
  return max;
}
const mtime = (path) => (existsSync(path) ? statSync(path).mtimeMs : 0);
const libs = [
  'packages/wire/src',
  'packages/engine/src',
  'sdk/src',
  'sdk/package.json',
  'sdk/vite.browser.ts',
].map((p) => join(root, p));

const vite = join(root, 'node_modules', '.bin', 'vite');
const viteConfigIn = (dir) =>
  ['vite.config.ts', 'vite.config.js', 'vite.config.mjs'].map((n) => join(dir, n)).find((p) => existsSync(p));

// The SDK's browser bundles (sdk/dist/bundle: an IIFE for a <script> tag and an ES module).
const sdk = join(root, 'sdk');
const sdkConfig = viteConfigIn(sdk);
if (sdkConfig !== undefined) {
  const output = join(sdk, 'dist', 'bundle', 'chunkycast.es.js');
  if (newest([...libs, sdkConfig]) > mtime(output)) run(vite, ['build', '--logLevel', 'warn'], { cwd: sdk });
}

// The demo site (viewer and broadcaster pages), served by the tracker from demo/dist.
const demo = join(root, 'demo');
const viteConfig = viteConfigIn(demo);
if (viteConfig !== undefined) {
  const inputs = [
    join(demo, 'src'),
    join(demo, 'public'),
    // The comparison benchmark's pages (npm run bench:compare).
    join(demo, 'bench'),
    join(demo, 'package.json'),
    viteConfig,
    ...libs,
  ];
  for (const name of readdirSync(demo)) if (name.endsWith('.html')) inputs.push(join(demo, name));
  if (newest(inputs) > mtime(join(demo, 'dist', 'index.html')))
    run(vite, ['build', '--logLevel', 'warn'], { cwd: demo });
}
