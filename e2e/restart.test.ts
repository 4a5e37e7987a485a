// A tracker restart mid-stream. ffmpeg packages the live stream; one tracker process serves it as the
// origin (and the demo pages); a second tracker process is the rendezvous server alone; the true
// source runs as its own process (chunkycast-source) against the rendezvous tracker; four Chromium
// viewers play. After ~20 s of steady play the rendezvous tracker gets SIGTERM and is started again
// on the same port with the same keys ~0.7 s after it exited. Every viewer and the source must be
// welcomed again within 5 s of the close, keep their peer ids, and no viewer may stall; the WebRTC
// links keep carrying media while the tracker is away — the source keeps publishing and its signed
// announcements travel over the mesh (viewers verify and pass them on), so every viewer must take
// media bytes from the mesh before its own first rejoin — and the mesh keeps its share afterwards.
// Run by `npm run e2e` (tools/src/e2e/run.ts) inside a loopback-only network namespace.
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Stack,
  brief,
  isIsolated,
  launchBrowser,
  meshShareOf,
  monitor,
  openViewer,
  root,
  sampleAll,
  startStream,
  startTracker,
  steadinessProblems,
  stopProcess,
  forEachLine,
  tieToParent,
  viewerUrl,
  waitFor,
  waitForPlaying,
  type Browser,
  type LiveStream,
  type Tracker,
  type Viewer,
  type ViewerSnapshot,
} from './src/harness.js';
import type { PlayerStatsSnapshot } from '../tools/src/viewers/snapshot.js';

const VIEWERS = 4;
/** Steady play before the restart, and watched play after it (the issue: ~20 s each). */
const BEFORE_S = 20;
const AFTER_S = 20;
/** The tracker is started again this long after the old process exited. */
const RESTART_GAP_MS = 700;
/** Close → new welcome, for every viewer and the source (the bound). */
const MAX_OUTAGE_MS = 5000;
/** The mesh's share of the viewers' media bytes in the window after the restart. */
const MIN_MESH_SHARE_AFTER = 0.6;
const FAST_SAMPLE_MS = 250;
/** The harness's ffmpeg writes 2 s segments; the close comes this long before the next is finished. */
const SEGMENT_MS = 2000;
const CUT_INTO_OUTAGE_MS = 500;
const sourceCli = join(root, 'tracker', 'dist', 'source', 'cli.js');

const log = (text: string): void => {
  process.stderr.write(`e2e restart: ${text}\n`);
};
const stack = new Stack();
const broadcasterKey = randomBytes(18).toString('base64url');
let workDir: string;
let keyFile: string;
let stream: LiveStream;
let origin: Tracker;
let rendezvous: Tracker;
let source: Source;
let browser: Browser;

/** A figure of a viewer's player stats by name; NaN when absent, so a comparison with it fails. */
const num = (st: PlayerStatsSnapshot | null | undefined, key: string): number => {
  const value = st?.[key];
  return typeof value === 'number' ? value : NaN;
};

/** One log record of the standalone source, with when it reached us. */
interface SourceRecord {
  readonly msg?: string;
  readonly level?: string;
  readonly receivedAt: number;
  readonly [field: string]: unknown;
}

interface Source {
  readonly proc: ChildProcess;
  readonly records: SourceRecord[];
  readonly lines: string[];
  find(msg: string): SourceRecord[];
  stop(): Promise<void>;
}

/** Starts the rendezvous-only tracker (no origin, no in-process source) with the shared keys. */
function startRendezvous(port = 0): Promise<Tracker> {
  return startTracker({
    port,
    sourceStream: null,
    extraArgs: ['--broadcaster-key', broadcasterKey, '--signing-key', keyFile],
  });
}

/**
 * The standalone true source: its JSON log lines are kept (bounded) so the test can read when it
 * lost and regained the tracker.
 */
function startSource({ trackerWsUrl, playlistUrl }: { trackerWsUrl: string; playlistUrl: string }): Source {
  if (!existsSync(sourceCli)) throw new Error(`${sourceCli} is missing: build first (npx tsc -b)`);
  const proc = spawn(
    process.execPath,
    [
      sourceCli,
      '--tracker',
      trackerWsUrl,
      '--playlist',
      playlistUrl,
      '--stream',
      'live',
      '--signing-key',
      keyFile,
    ],
    // The key through the environment: flags are visible in ps.
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, CHUNKYCAST_BROADCASTER_KEY: broadcasterKey },
    },
  );
  tieToParent(proc);
  const records: SourceRecord[] = [];
  const lines: string[] = [];
  const keep = (line: string): void => {
    lines.push(line);
    if (lines.length > 300) lines.shift();
  };
  forEachLine(proc.stdout, (line) => {
    keep(line);
    try {
      const record = JSON.parse(line) as Omit<SourceRecord, 'receivedAt'>;
      if (record.level !== 'debug') {
        records.push({ ...record, receivedAt: Date.now() });
        if (records.length > 500) records.shift();
      }
    } catch {
      // not JSON: kept as a line
    }
  });
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (chunk: string) => {
    for (const line of chunk.split('\n')) if (line.trim() !== '') keep(`[stderr] ${line}`);
  });
  return {
    proc,
    records,
    lines,
    find: (msg) => records.filter((r) => r.msg === msg),
    stop: () => stopProcess(proc, { signal: 'SIGTERM', graceMs: 5000 }),
  };
}

/** Samples the viewers every FAST_SAMPLE_MS until stopped (bounded: at most 30 s of samples). */
function fastSampler(viewers: readonly Viewer[]): {
  samples: { at: number; snaps: ViewerSnapshot[] }[];
  stop(): Promise<void>;
} {
  const samples: { at: number; snaps: ViewerSnapshot[] }[] = [];
  let running = true;
  const done = (async () => {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- stop() clears it meanwhile
    for (let i = 0; running && i < 30_000 / FAST_SAMPLE_MS; i++) {
      const started = Date.now();
      samples.push({ at: started, snaps: await sampleAll(viewers) });
      await sleep(Math.max(0, FAST_SAMPLE_MS - (Date.now() - started)));
    }
  })();
  return {
    samples,
    async stop() {
      running = false;
      await done;
    },
  };
}

async function fail(title: string, problems: readonly string[], viewers: readonly Viewer[]): Promise<never> {
  const snaps = await sampleAll(viewers);
  const lines = [`${title}: ${problems.length} problem(s)`, ...problems.map((p) => `  - ${p}`), ''];
  snaps.forEach((s, i) => {
    const v = viewers[i];
    if (v === undefined) return;
    lines.push(`── ${v.label} ──`, JSON.stringify(brief(v.label, s)), `full: ${JSON.stringify(s)}`);
    if (v.console.lines.length > 0) lines.push('console:', v.console.text());
  });
  lines.push('── rendezvous tracker log (last lines) ──', rendezvous.logs.lines.slice(-40).join('\n'));
  lines.push('── source log (last lines) ──', source.lines.slice(-40).join('\n'));
  if (stream.stderr.lines.length > 0) lines.push('── ffmpeg ──', stream.stderr.text());
  process.stderr.write(`${lines.join('\n')}\n`);
  throw new Error(`${title}:\n${problems.join('\n')}`);
}

const round = (viewers: readonly Viewer[]) => (snaps: ViewerSnapshot[], r: number) => {
  if (r % 5 !== 0) return;
  const shown = (x: unknown): string => (typeof x === 'number' || typeof x === 'string' ? String(x) : '-');
  log(
    snaps
      .map((s, i) => {
        const b = brief(viewers[i]?.label ?? `#${i}`, s);
        return `${shown(b.viewer)}:${shown(b.t)}s/${shown(b.peers)}p/st${shown(b.stalls)}/${shown(s.stats?.trackerState)}`;
      })
      .join(' ') + ` mesh ${(100 * meshShareOf(snaps).share).toFixed(0)}%`,
  );
};

describe('tracker restart mid-stream', () => {
  beforeAll(async () => {
    expect(isIsolated(), 'e2e must run in a loopback-only network namespace (use npm run e2e)').toBe(true);
    const t0 = Date.now();
    workDir = mkdtempSync(join(tmpdir(), 'chunkycast-restart-'));
    stack.add('work dir', () => {
      rmSync(workDir, { recursive: true, force: true });
      return Promise.resolve();
    });
    keyFile = join(workDir, 'signing-key.pem');
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    stream = await startStream({ quiet: true });
    stack.add('ffmpeg', () => stream.stop());
    origin = await startTracker({ originDir: stream.dir, sourceStream: null });
    stack.add('origin', () => origin.stop());
    rendezvous = await startRendezvous();
    stack.add('rendezvous tracker', () => rendezvous.stop());
    browser = await launchBrowser();
    stack.add('chromium', () => browser.close());
    await stream.waitForSegments(3);
    source = startSource({ trackerWsUrl: rendezvous.wsUrl, playlistUrl: `${origin.url}/live/live.m3u8` });
    stack.add('source', () => source.stop());
    await waitFor('the true source to run', () => source.find('true source running').length > 0, {
      timeoutMs: 20_000,
    });
    log(
      `stream, origin ${origin.url}, rendezvous ${rendezvous.wsUrl}, source and Chromium up in ${Date.now() - t0} ms`,
    );
  });

  afterAll(async () => {
    await stack.stopAll();
  });

  test('viewers and source rejoin within 5 s with their ids; no stall; the mesh carries on', async () => {
    const viewers: Viewer[] = [];
    for (let i = 0; i < VIEWERS; i++)
      viewers.push(
        await openViewer(browser, viewerUrl(origin.url, { tracker: rendezvous.wsUrl }), { label: `v${i}` }),
      );
    try {
      await waitForPlaying(viewers, { timeoutMs: 30_000 });
    } catch (error) {
      await fail('startup', [String(error)], viewers);
    }
    const problems: string[] = [];
    const label = (i: number): string => viewers[i]?.label ?? `#${i}`;
    const before = await monitor(viewers, {
      durationMs: BEFORE_S * 1000,
      intervalMs: 2000,
      onSample: round(viewers),
    });
    before.forEach((s, i) => problems.push(...steadinessProblems(label(i), s)));
    if (problems.length > 0) await fail('steady play before the restart', problems, viewers);
    const sourceRunning = source.find('true source running')[0];

    // ── the restart ──
    // Timed so that ffmpeg finishes a segment ~0.5 s into the outage: one segment is cut while the
    // tracker is away, and its announcement can reach the viewers only over the mesh.
    const known = stream.segments.size;
    await waitFor('a new segment from ffmpeg', () => stream.segments.size > known, {
      timeoutMs: 6000,
      intervalMs: 50,
    });
    const newest = Math.max(...[...stream.segments.values()].map((x) => x.readyAt));
    await sleep(Math.max(0, newest + SEGMENT_MS - CUT_INTO_OUTAGE_MS - Date.now()));
    const port = Number(new URL(rendezvous.url).port);
    const atKill = await sampleAll(viewers);
    const sampler = fastSampler(viewers);
    const killAt = Date.now();
    await rendezvous.stop();
    const exitedAt = Date.now();
    await sleep(RESTART_GAP_MS);
    rendezvous = await startRendezvous(port);
    const upAt = Date.now();
    log(
      `tracker SIGTERM at 0 ms, exited at ${exitedAt - killAt} ms, started again at ${upAt - killAt} ms (listening)`,
    );
    try {
      await waitFor(
        'every viewer and the source to be welcomed again',
        async () => {
          const snaps = await sampleAll(viewers);
          const viewersBack = snaps.every(
            (s) => num(s.stats, 'trackerReconnects') >= 1 && s.stats?.trackerState === 'connected',
          );
          return viewersBack && source.find('true source: tracker reached again').length > 0;
        },
        { timeoutMs: 15_000, intervalMs: FAST_SAMPLE_MS },
      );
    } catch (error) {
      await sampler.stop();
      await fail('rejoin', [String(error)], viewers);
    }
    await sleep(1000); // a second more of fast samples after the last rejoin
    await sampler.stop();
    const afterRejoin = await sampleAll(viewers);

    // ── what each viewer saw ──
    const figures = viewers.map((v, i) => {
      const k = atKill[i]?.stats;
      const a = afterRejoin[i]?.stats;
      const mine = sampler.samples.map((x) => x.snaps[i]).filter((s): s is ViewerSnapshot => s !== undefined);
      const down = mine.filter((s) => s.stats?.trackerState !== 'connected');
      // From the close until this viewer's first rejoin (its reconnect count still the one at the
      // close): it had no tracker, so every announcement it used came over the mesh.
      const beforeRejoin = mine.filter((s) => (s.stats?.trackerReconnects ?? 0) === k?.trackerReconnects);
      const lastBeforeRejoin = beforeRejoin.at(-1)?.stats ?? k;
      const meshWhileDown =
        Math.max(0, ...down.map((s) => s.stats?.bytesFromMesh ?? 0)) - num(k, 'bytesFromMesh');
      const delta = (key: string): number => num(a, key) - num(k, key);
      return {
        viewer: v.label,
        outageMs: a?.trackerLastOutageMs,
        peerIdKept: a?.peerId === k?.peerId && a?.peerIdChanges === 0,
        peerId: `${String(k?.peerId)}→${String(a?.peerId)}`,
        samplesDown: down.length,
        minPeersWhileDown: down.length === 0 ? null : Math.min(...down.map((s) => s.stats?.peers ?? 0)),
        meshBytesWhileDown: meshWhileDown,
        samplesBeforeRejoin: beforeRejoin.length,
        meshBytesBeforeRejoin: num(lastBeforeRejoin, 'bytesFromMesh') - num(k, 'bytesFromMesh'),
        peerAnnouncementsBeforeRejoin:
          (num(lastBeforeRejoin, 'announcementsFromPeers') || 0) - (num(k, 'announcementsFromPeers') || 0),
        meshBytesKillToRejoin1s: delta('bytesFromMesh'),
        originBytesKillToRejoin1s: delta('bytesFromOrigin'),
        originSegmentsKillToRejoin1s: delta('segmentsFromOrigin'),
        signalsDropped: a?.trackerSignalsDropped,
        heldPacketsDropped: delta('heldPacketsDropped'),
        stalls: a?.stalls,
      };
    });
    const lost = source.find('true source: lost the tracker; reconnecting');
    const back = source.find('true source: tracker reached again');
    const sourceFigures = {
      viewer: 'source',
      outageMs: back[0]?.outageMs ?? null,
      peerIdKept: back[0]?.peerIdKept ?? null,
      resumed: back[0]?.resumed ?? null,
      peerId: `${String(sourceRunning?.peerId)}→${String(back[0]?.peerId)}`,
      closeCode: lost[0]?.code ?? null,
      segmentsHeld: source.find('true source: tracker away; segment held').length,
      segmentsFedOverMesh: source
        .find('true source: tracker away; segment announced over the mesh')
        .map((r) => `${String(r.sequence)}→${String(r.peers)}p`),
      heldPublishedAfter: source.find(
        'true source: published the segments held while the tracker was away',
      )[0]?.segments,
    };
    for (const f of [...figures, sourceFigures]) log(JSON.stringify(f));
    const finished = [...stream.segments.values()]
      .filter((x) => x.readyAt >= killAt - 2500 && x.readyAt <= Date.now())
      .map((x) => `${x.sequence}@${x.readyAt - killAt}ms`);
    log(`segments finished by ffmpeg around the close (ms after it): ${finished.join(' ')}`);
    for (const f of [...figures, sourceFigures]) {
      if (!(typeof f.outageMs === 'number' && f.outageMs <= MAX_OUTAGE_MS))
        problems.push(`${f.viewer}: close → welcome took ${String(f.outageMs)} ms (> ${MAX_OUTAGE_MS})`);
      if (f.peerIdKept !== true) problems.push(`${f.viewer}: peer id not kept (${f.peerId})`);
    }
    for (const f of figures) {
      if (f.stalls !== 0) problems.push(`${f.viewer}: ${f.stalls ?? 'unknown'} stall(s) by the rejoin`);
      if (f.minPeersWhileDown !== null && f.minPeersWhileDown < 1)
        problems.push(`${f.viewer}: lost every WebRTC link while the tracker was down`);
      // The point of announcements over the mesh: media kept flowing before this viewer had a
      // tracker again (the segment cut ~0.5 s into the outage, verified with the mesh's copy).
      if (!(f.meshBytesBeforeRejoin > 0))
        problems.push(
          `${f.viewer}: no mesh bytes from the close to its first rejoin (${f.samplesBeforeRejoin} samples)`,
        );
      // The links that survived (same ids, no rebuild) carried media across the outage: the segment
      // cut while the tracker was away, released with its announcement after the rejoin.
      if (!(f.meshBytesKillToRejoin1s > 0))
        problems.push(`${f.viewer}: no media over the mesh from the close to 1 s after the rejoin`);
    }
    // Media bytes each viewer verified while its tracker was away: announcements reach it over the
    // mesh (the source sends each to its slice sources, which pass it on), so they keep flowing.
    const meshDown = figures.reduce((sum, f) => sum + f.meshBytesWhileDown, 0);
    const meshBeforeRejoin = figures.reduce((sum, f) => sum + f.meshBytesBeforeRejoin, 0);
    const meshKillToRejoin = figures.reduce((sum, f) => sum + f.meshBytesKillToRejoin1s, 0);
    log(
      `mesh bytes while the tracker was down (Σ viewers): ${meshDown}; from the close to each viewer's first rejoin: ${meshBeforeRejoin}; from the close to 1 s after the last rejoin: ${meshKillToRejoin}`,
    );

    // ── after the restart ──
    const after = await monitor(viewers, {
      durationMs: AFTER_S * 1000,
      intervalMs: 2000,
      onSample: round(viewers),
    });
    after.forEach((s, i) => problems.push(...steadinessProblems(label(i), s)));
    // monitor() takes at least one round, so every series has a first and a last sample.
    const last = after.map((s) => s[s.length - 1] ?? { now: Date.now(), error: 'no sample' });
    const start = after.map((s) => s[0]);
    let meshAfter = 0;
    let originAfter = 0;
    last.forEach((s, i) => {
      if (s.stats?.stalls !== 0)
        problems.push(`${label(i)}: ${s.stats?.stalls ?? 'unknown'} stall(s) in total`);
      meshAfter += (s.stats?.bytesFromMesh ?? 0) - (start[i]?.stats?.bytesFromMesh ?? 0);
      originAfter += (s.stats?.bytesFromOrigin ?? 0) - (start[i]?.stats?.bytesFromOrigin ?? 0);
    });
    const shareAfter = meshAfter + originAfter === 0 ? 0 : meshAfter / (meshAfter + originAfter);
    const shareTotal = meshShareOf(last).share;
    log(
      `after the restart (${AFTER_S} s): mesh share ${(100 * shareAfter).toFixed(1)}% (mesh ${meshAfter} B, origin ${originAfter} B); ` +
        `whole run ${(100 * shareTotal).toFixed(1)}%; stalls ${last.map((s) => s.stats?.stalls ?? '?').join(',')}`,
    );
    if (!(shareAfter >= MIN_MESH_SHARE_AFTER))
      problems.push(
        `mesh share after the restart ${(100 * shareAfter).toFixed(1)}% < ${100 * MIN_MESH_SHARE_AFTER}%`,
      );
    if (problems.length > 0) await fail('restart', problems, viewers);
  });
});
