// The mesh end to end: ffmpeg packages a live test stream, the tracker serves it with the true
// source in process, and viewers of the demo play it in Debian Chromium and (test a's, by turns)
// Debian Firefox ESR, sharing it over WebRTC.
// Run by `npm run e2e` (tools/src/e2e/run.ts) inside a loopback-only network namespace. One stream, tracker and browser for
// the whole file; the tests run in order and build on each other's viewers.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Stack,
  brief,
  bytesByDirection,
  hidePlayer,
  failWithEvidence,
  hiddenTabMissing,
  isIsolated,
  launchBrowser,
  log,
  meshShareOf,
  monitor,
  openHiddenTabViewer,
  openViewer,
  sampleAll,
  startStream,
  startTracker,
  steadinessProblems,
  viewerUrl,
  waitFor,
  waitForPlaying,
  type Browser,
  type BrowserName,
  type LiveStream,
  type Tracker,
  type Viewer,
  type ViewerHandle,
  type ViewerSnapshot,
} from './src/harness.js';

/** Seconds the six viewers are watched in test a (the issue asks for at least 60). */
const PLAY_S = 60;

const stack = new Stack();
let stream: LiveStream;
let tracker: Tracker;
let browser: Browser;
/** Firefox: test a's odd-numbered viewers (issue 15: one swarm of both browsers). */
let firefox: Browser;
/** The six viewers of test a (b closes two of them). */
let six: Viewer[] = [];
/** Test d's late joiner, kept in the swarm for e and closed by f. */
let late: Viewer | null = null;
/**
 * A page script making `navigator.connection` a cellular NetworkInformation (Chromium on desktop
 * has the object but no `type`): what a phone on mobile data shows the player.
 */
const CELLULAR_CONNECTION = `{
  const connection = new EventTarget();
  Object.assign(connection, { type: 'cellular', effectiveType: '4g', saveData: false });
  Object.defineProperty(navigator, 'connection', { configurable: true, value: connection });
}`;

/**
 * A page script for test d2: the page says it is hidden for its whole life (a background tab) and
 * its timers wake only at whole multiples of `window.__timerAlignmentMs`, as a browser throttles a
 * hidden page's timers. Headless Chromium pages are never really hidden here, and CDP's
 * Page.setWebLifecycleState('frozen') left a page's timers running (docs/browsers.md), so the
 * throttling is emulated by wrapping the page's timer functions before any script runs.
 */
const HIDDEN_THROTTLED_PAGE = `{
  window.__timerAlignmentMs = 1000;
  Object.defineProperty(Document.prototype, 'visibilityState', { configurable: true, get: () => 'hidden' });
  Object.defineProperty(Document.prototype, 'hidden', { configurable: true, get: () => true });
  const nativeSetTimeout = window.setTimeout.bind(window);
  const nativeClearTimeout = window.clearTimeout.bind(window);
  const delayOf = (ms) => {
    const now = performance.now();
    const align = window.__timerAlignmentMs;
    return Math.ceil((now + Math.max(0, Number(ms) || 0)) / align) * align - now;
  };
  window.setTimeout = (callback, ms, ...args) => nativeSetTimeout(callback, delayOf(ms), ...args);
  const intervals = new Map();
  let nextInterval = 1e9;
  window.setInterval = (callback, ms, ...args) => {
    const id = nextInterval++;
    const arm = () =>
      intervals.set(id, nativeSetTimeout(() => {
        arm();
        if (typeof callback === 'function') callback(...args);
      }, delayOf(ms)));
    arm();
    return id;
  };
  const clear = (id) => {
    const timer = intervals.get(id);
    if (timer === undefined) return nativeClearTimeout(id);
    intervals.delete(id);
    nativeClearTimeout(timer);
  };
  window.clearTimeout = clear;
  window.clearInterval = clear;
}`;

/** A page script removing both MSE constructors, as on a browser that has neither. */
const NO_MSE = `for (const name of ['MediaSource', 'ManagedMediaSource', 'WebKitMediaSource']) delete window[name];`;

/**
 * The browser of test a's viewer i: four Chromium and two Firefox (v1, v4), so that both browsers
 * forward to each other from the start. Three of each saturated this 2-core machine (97–100% busy
 * in vmstat): Chromium's playback then ran at 0.7–0.9× real time with a full buffer and test a
 * failed 2 runs of 4 on its steadiness check. A hidden Firefox viewer costs ~33% of a core, twice a
 * Chromium one. The 3 + 3 swarm is measured by `npm run swarm -- --browsers chromium:3,firefox:3`.
 */
const FIREFOX_VIEWERS_OF_SIX = new Set([1, 4]);
const browserOfSix = (i: number): BrowserName => (FIREFOX_VIEWERS_OF_SIX.has(i) ? 'firefox' : 'chromium');
/**
 * Test d3's check that its tab is really hidden: ticks of a 10 ms interval in 2 s. At full rate
 * ~200; Chromium runs a hidden page's timers about once a second (4 in 3 s here).
 */
const HIDDEN_TAB_MAX_TICKS_IN_2S = 50;
/** Share of the media arriving on every data channel that test f throws away. */
const INJECTED_LOSS = 0.05;

/** Throws with every problem, after printing full per-viewer stats and the logs that explain them. */
const fail = (title: string, problems: readonly string[], viewers: readonly ViewerHandle[]): Promise<never> =>
  failWithEvidence(title, problems, viewers, { tracker, stream });

/** A figure of a snapshot's player stats by name, 0 when absent (counters start at 0). */
const figure = (s: ViewerSnapshot | undefined, key: string): number => {
  const value = s?.stats?.[key];
  return typeof value === 'number' ? value : 0;
};

/** Every series' last snapshot (monitor() always takes at least one round). */
const lastOf = (series: readonly ViewerSnapshot[][]): ViewerSnapshot[] =>
  series.map((s) => s[s.length - 1] ?? { now: Date.now(), error: 'no sample' });

/** The label of viewer i, for messages. */
const labelOf = (viewers: readonly ViewerHandle[], i: number): string => viewers[i]?.label ?? `#${i}`;

const printRound = (viewers: readonly ViewerHandle[]) => (snaps: ViewerSnapshot[], round: number) => {
  if (round % 5 !== 0) return;
  const share = meshShareOf(snaps).share;
  log(
    `t+${round * 2}s ` +
      snaps
        .map((s, i) => {
          const b = brief(labelOf(viewers, i), s);
          const shown = (x: unknown): string =>
            typeof x === 'number' || typeof x === 'string' ? String(x) : '-';
          return `${shown(b.viewer)}:${shown(b.t)}s/${shown(b.peers)}p/L${shown(b.load)}/st${shown(b.stalls)}`;
        })
        .join(' ') +
      ` mesh ${(100 * share).toFixed(0)}%`,
  );
};

describe('live mesh in Chromium and Firefox', () => {
  beforeAll(async () => {
    expect(isIsolated(), 'e2e must run in a loopback-only network namespace (use npm run e2e)').toBe(true);
    const t0 = Date.now();
    stream = await startStream({ quiet: true });
    stack.add('ffmpeg', () => stream.stop());
    tracker = await startTracker({ originDir: stream.dir, sourceStream: 'live' });
    stack.add('tracker', () => tracker.stop());
    browser = await launchBrowser();
    stack.add('chromium', () => browser.close());
    firefox = await launchBrowser({ browser: 'firefox' });
    stack.add('firefox', () => firefox.close());
    await stream.waitForSegments(3);
    await waitFor('the tracker to be healthy', () => tracker.healthy(), { timeoutMs: 10_000 });
    log(`stream, tracker (${tracker.url}), Chromium and Firefox up in ${Date.now() - t0} ms`);
  });

  afterAll(async () => {
    await stack.stopAll();
  });

  test(`a: six viewers, four in Chromium and two in Firefox, play ${PLAY_S} s steadily, ≥80% of media from the mesh, media both ways between the browsers, origin ≤ 2 stream copies`, async () => {
    await tracker.resetOrigin();
    const windowStart = Date.now();
    for (let i = 0; i < 6; i++) {
      const viewer = await openViewer(
        browserOfSix(i) === 'chromium' ? browser : firefox,
        viewerUrl(tracker.url),
        { label: `v${i}-${browserOfSix(i)}` },
      );
      // Hidden (decoded, not painted): six painting players in two browsers, ffmpeg, the tracker
      // and the true source overran this 2-core machine (see FIREFOX_VIEWERS_OF_SIX).
      await hidePlayer(viewer);
      six.push(viewer);
    }
    const problems: string[] = [];
    try {
      await waitForPlaying(six, { timeoutMs: 30_000 });
    } catch (error) {
      await fail('a: startup', [String(error)], six);
    }
    log(`six viewers playing ${Date.now() - windowStart} ms after the first page opened`);
    const series = await monitor(six, {
      durationMs: PLAY_S * 1000,
      intervalMs: 2000,
      onSample: printRound(six),
    });
    const windowEnd = Date.now();
    const last = lastOf(series);
    series.forEach((s, i) => problems.push(...steadinessProblems(labelOf(six, i), s)));
    for (const [i, s] of last.entries()) {
      if (s.stats === null || s.stats === undefined) problems.push(`${labelOf(six, i)}: no player stats`);
      else if (s.stats.stalls !== 0)
        problems.push(`${labelOf(six, i)}: ${s.stats.stalls} stall(s), ${s.stats.stallMs} ms after start`);
    }
    const share = meshShareOf(last);
    if (!(share.share >= 0.8))
      problems.push(
        `mesh share ${(100 * share.share).toFixed(1)}% < 80% (mesh ${share.mesh} B, origin ${share.origin} B)`,
      );
    // Media must cross between the browsers both ways (each viewer counts, per link, the media its
    // neighbour sent it): peers that only ever connect to their own kind would pass the rest.
    const directions = bytesByDirection(
      series,
      six.map((_, i) => browserOfSix(i)),
    );
    log(`media per direction (sender→receiver, bytes): ${JSON.stringify(directions)}`);
    for (const direction of ['chromium→firefox', 'firefox→chromium'])
      if (!((directions[direction] ?? 0) > 0)) problems.push(`no media on ${direction} links`);
    const origin = await tracker.origin();
    const produced = stream.bytesProduced(windowStart, windowEnd);
    const copies = origin.mediaBytes / Math.max(1, produced.bytes);
    log(
      `window ${((windowEnd - windowStart) / 1000).toFixed(0)} s: ${produced.count} segments, ${produced.bytes} B produced; ` +
        `origin served ${origin.mediaBytes} B media (source ${origin.sourceMediaBytes}, viewers ${origin.viewerMediaBytes}) = ` +
        `${copies.toFixed(2)} stream copies; mesh share ${(100 * share.share).toFixed(1)}%`,
    );
    if (produced.count < PLAY_S / 2 / 2)
      problems.push(`only ${produced.count} segments produced in the window`);
    if (!(copies <= 2))
      problems.push(
        `origin served ${copies.toFixed(2)} stream copies (> 2): ${origin.mediaBytes} B vs ${produced.bytes} B produced`,
      );
    if (problems.length > 0) await fail('a', problems, six);
  });

  test('b: two of six viewers close abruptly; the other four keep playing without a stall', async () => {
    expect(six.length, 'needs the viewers of test a').toBe(6);
    const before = await sampleAll(six);
    // Close the two that forward the most: the departure that hurts the rest most.
    const order = before
      .map((s, i) => ({ i, load: s.stats?.load ?? 0 }))
      .sort((x, y) => y.load - x.load)
      .map((x) => x.i);
    const gone = order
      .slice(0, 2)
      .map((i) => six[i])
      .filter((v): v is Viewer => v !== undefined);
    const rest = six.filter((v) => !gone.includes(v));
    const stallsBefore = new Map(rest.map((v) => [v, figure(before[six.indexOf(v)], 'stalls')]));
    log(
      `closing ${gone.map((v) => `${v.label} (load ${figure(before[six.indexOf(v)], 'load')})`).join(', ')}`,
    );
    await Promise.all(gone.map((v) => v.close()));
    const series = await monitor(rest, { durationMs: 30_000, intervalMs: 2000, onSample: printRound(rest) });
    const problems: string[] = [];
    series.forEach((s, i) => problems.push(...steadinessProblems(labelOf(rest, i), s)));
    for (const [i, s] of lastOf(series).entries()) {
      const viewer = rest[i];
      const added = (s.stats?.stalls ?? NaN) - (viewer === undefined ? 0 : (stallsBefore.get(viewer) ?? 0));
      if (added !== 0) problems.push(`${labelOf(rest, i)}: ${added} stall(s) after the departures`);
    }
    six = rest;
    if (problems.length > 0) await fail('b', problems, rest);
  });

  test('c: a viewer on a cellular connection (upload=auto, Network Information stubbed) plays and forwards nothing', async () => {
    // The page's navigator.connection says cellular, as a phone's would; the player's upload is
    // left at its default, auto (issue 15).
    const v = await openViewer(browser, viewerUrl(tracker.url), {
      label: 'cellular',
      initScript: CELLULAR_CONNECTION,
    });
    const problems: string[] = [];
    try {
      await waitForPlaying([v], { timeoutMs: 20_000 });
    } catch (error) {
      await fail('c: startup', [String(error)], [v]);
    }
    const series = await monitor([v], { durationMs: 20_000, intervalMs: 2000 });
    const samples = series[0] ?? [];
    problems.push(...steadinessProblems(v.label, samples));
    const [s] = lastOf([samples]);
    const st = s?.stats;
    if (st === null || st === undefined) problems.push('no player stats');
    else {
      if (st.upload !== 'auto') problems.push(`stats.upload is ${String(st.upload)}, not auto`);
      const reasons = Array.isArray(st.receiveOnlyReasons) ? (st.receiveOnlyReasons as unknown[]) : [];
      if (!reasons.includes('cellular'))
        problems.push(
          `stats.receiveOnlyReasons is ${JSON.stringify(st.receiveOnlyReasons)}, without cellular`,
        );
      if (st.maxLoad !== 0) problems.push(`stats.maxLoad is ${st.maxLoad}, not 0`);
      if (st.load !== 0) problems.push(`stats.load is ${st.load}, not 0`);
      const withChildren = (st.slices ?? []).filter((x) => x.children.length > 0);
      if (withChildren.length > 0)
        problems.push(`children on slice(s) ${withChildren.map((x) => x.slice ?? '?').join(', ')}`);
      if (st.stalls !== 0) problems.push(`${st.stalls} stall(s)`);
    }
    log(
      `cellular: ${JSON.stringify(s === undefined ? null : brief(v.label, s))}, uploadBytes ${st?.uploadBytes ?? '?'}`,
    );
    if (problems.length > 0) await fail('c', problems, [v]);
    await v.close();
  });

  test('c2: a browser with neither MediaSource nor ManagedMediaSource (forced) plays HLS natively from the origin and says why the mesh is off', async () => {
    // Older iOS Safari's situation, forced in Chromium (which plays HLS natively too): the page
    // loses both MSE constructors before the SDK loads, so hls.js cannot run.
    const v = await openViewer(browser, viewerUrl(tracker.url), { label: 'native', initScript: NO_MSE });
    try {
      await waitForPlaying([v], { timeoutMs: 20_000 });
    } catch (error) {
      await fail('c2: startup', [String(error)], [v]);
    }
    const series = await monitor([v], { durationMs: 8_000, intervalMs: 2000 });
    const samples = series[0] ?? [];
    const problems = steadinessProblems(v.label, samples);
    const st = lastOf([samples])[0]?.stats;
    const lastError = await v.page.evaluate(() => {
      const player = (window as unknown as { chunkycast?: { player?: { lastError?: unknown } } }).chunkycast
        ?.player;
      return JSON.stringify(player?.lastError ?? null);
    });
    log(
      `native: ${JSON.stringify({ playback: st?.playback, meshOffReason: st?.meshOffReason, meshEnabled: st?.meshEnabled, lastError })}`,
    );
    if (st?.playback !== 'native') problems.push(`stats.playback is ${String(st?.playback)}, not native`);
    if (st?.meshEnabled !== false) problems.push('the mesh runs although hls.js cannot');
    if (st?.meshOffReason !== 'no-mse')
      problems.push(`stats.meshOffReason is ${String(st?.meshOffReason)}, not no-mse`);
    if (!/"code":"unsupported".*MediaSource/.test(lastError))
      problems.push(`the player's last error is ${lastError}, not an unsupported one naming MediaSource`);
    if (problems.length > 0) await fail('c2', problems, [v]);
    await v.close();
  });

  test('d: a late joiner plays within 5 s of opening the page', async () => {
    const v = await openViewer(browser, viewerUrl(tracker.url), { label: 'late' });
    late = v;
    let previous: number | null = null;
    let playingAfterMs: number | null = null;
    // Poll every 200 ms until 5 s after navigation began: playing means currentTime > 0 and advancing.
    for (let i = 0; i < 40 && Date.now() - v.openedAt <= 5000; i++) {
      const [s] = await sampleAll([v]);
      const t = s?.video?.currentTime ?? 0;
      if (previous !== null && t > 0 && t > previous) {
        playingAfterMs = Date.now() - v.openedAt;
        break;
      }
      previous = t;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    log(`late joiner playing after ${playingAfterMs ?? 'more than 5000'} ms`);
    if (playingAfterMs === null || playingAfterMs > 5000)
      await fail('d', ['the late joiner did not play within 5 s of opening the page'], [v]);
    const series = await monitor([v], { durationMs: 10_000, intervalMs: 2000 });
    const samples = series[0] ?? [];
    const problems = steadinessProblems(v.label, samples);
    const st = lastOf([samples])[0]?.stats;
    if (st?.stalls !== 0) problems.push(`${st?.stalls ?? 'unknown'} stall(s) after start`);
    if (problems.length > 0) await fail('d: after start', problems, [v]);
  });

  test('d2: a viewer hidden for its whole run relays while its timers wake each second, and hands its children over at once when they are throttled harder; nobody else stalls', async () => {
    const others = late === null ? six : [...six, late];
    const before = await sampleAll(others);
    const stallsBefore = new Map(others.map((v, i) => [v, figure(before[i], 'stalls')]));
    // Room for many children (TL 32), so that the load phase hands it some while it relays.
    const h = await openViewer(browser, viewerUrl(tracker.url, { targetLoad: 32, maxLoad: 48 }), {
      label: 'hidden',
      initScript: HIDDEN_THROTTLED_PAGE,
    });
    try {
      await waitForPlaying([h], { timeoutMs: 20_000 });
    } catch (error) {
      await fail('d2: startup', [String(error)], [h]);
    }
    const problems: string[] = [];
    // Whole-second wake-ups: Chromium's throttling of a hidden page with an open data channel.
    const relaying = await monitor([...others, h], { durationMs: 16_000, intervalMs: 2000 });
    const hRelaying = relaying[relaying.length - 1] ?? [];
    problems.push(...steadinessProblems(h.label, hRelaying));
    const mostChildren = Math.max(0, ...hRelaying.map((s) => s.stats?.load ?? 0));
    const reasonsRelaying = lastOf([hRelaying])[0]?.stats?.receiveOnlyReasons ?? null;
    if (mostChildren === 0) problems.push('the hidden viewer never relayed (load 0 throughout)');
    if (JSON.stringify(reasonsRelaying) !== '[]')
      problems.push(`with 1 s wake-ups it stopped relaying: ${JSON.stringify(reasonsRelaying)}`);
    // Harder: 10 s wake-ups, as a browser without Chromium's exemption for WebRTC pages.
    await h.page.evaluate(() => {
      (window as unknown as { __timerAlignmentMs: number }).__timerAlignmentMs = 10_000;
    });
    const throttled = await monitor([...others, h], { durationMs: 24_000, intervalMs: 2000 });
    const hEnd = lastOf([throttled[throttled.length - 1] ?? []])[0]?.stats;
    const hId = hEnd?.peerId ?? null;
    const reasonsEnd = Array.isArray(hEnd?.receiveOnlyReasons) ? (hEnd.receiveOnlyReasons as unknown[]) : [];
    if (!reasonsEnd.includes('throttled'))
      problems.push(`receiveOnlyReasons ${JSON.stringify(hEnd?.receiveOnlyReasons)}, without throttled`);
    if (hEnd?.load !== 0) problems.push(`the throttled viewer still has load ${hEnd?.load ?? '?'}`);
    const ends = lastOf(throttled.slice(0, others.length));
    for (const [i, s] of ends.entries()) {
      const viewer = others[i];
      const added = (s.stats?.stalls ?? NaN) - (viewer === undefined ? 0 : (stallsBefore.get(viewer) ?? 0));
      if (added !== 0) problems.push(`${labelOf(others, i)}: ${added} stall(s) while the hidden viewer ran`);
      const onH = (s.stats?.slices ?? []).filter((x) => x.parent !== null && x.parent === hId);
      if (onH.length > 0)
        problems.push(
          `${labelOf(others, i)} still takes slice(s) ${onH.map((x) => x.slice).join(', ')} from it`,
        );
    }
    log(
      `hidden: up to ${mostChildren} children with 1 s wake-ups; with 10 s ones ${JSON.stringify({ reasons: reasonsEnd, load: hEnd?.load, stalls: hEnd?.stalls })}`,
    );
    if (problems.length > 0) await fail('d2', problems, [...others, h]);
    await h.close();
  });

  test('d3: a viewer in a really hidden tab (headful Chromium, a background tab) relays on time; nobody else stalls', async () => {
    // d2 emulates a hidden page because Playwright's pages never are (docs/browsers.md); this one is:
    // its own headful Chromium on a private X display, the viewer behind a blank tab, over raw CDP.
    const missing = hiddenTabMissing();
    if (missing !== null) throw new Error(`d3 needs an X display: ${missing} (npm run setup installs xvfb)`);
    const others = late === null ? six : [...six, late];
    const before = await sampleAll(others);
    const stallsBefore = new Map(others.map((v, i) => [v, figure(before[i], 'stalls')]));
    // Room for many children (TL 32), as in d2, so that the load phase hands it some.
    const h = await openHiddenTabViewer(viewerUrl(tracker.url, { targetLoad: 32, maxLoad: 48 }), {
      label: 'hidden-tab',
    });
    try {
      const problems: string[] = [];
      const visibility = await h.visibility();
      // A 10 ms interval: ~200 ticks in 2 s at full rate, a few when Chromium throttles a hidden page.
      const ticks = await h.timerTicks(2000);
      if (visibility !== 'hidden' || ticks > HIDDEN_TAB_MAX_TICKS_IN_2S)
        await fail(
          'd3: not a hidden tab',
          [
            `visibilityState ${visibility}, ${ticks} ticks of a 10 ms interval in 2 s: the test would show nothing`,
          ],
          [h],
        );
      try {
        await waitFor(
          'the hidden tab to open a data channel',
          async () => ((await h.stats()).stats?.peers ?? 0) > 0,
          {
            timeoutMs: 20_000,
          },
        );
      } catch (error) {
        await fail('d3: joining', [String(error)], [h]);
      }
      const series = await monitor([...others, h], { durationMs: 24_000, intervalMs: 2000 });
      const hSeries = series[series.length - 1] ?? [];
      const mostChildren = Math.max(0, ...hSeries.map((s) => s.stats?.load ?? 0));
      const hEnd = lastOf([hSeries])[0];
      const uploaded = hEnd?.stats?.uploadBytes ?? 0;
      if (mostChildren === 0) problems.push('the hidden tab never relayed (load 0 throughout)');
      if (uploaded === 0) problems.push('the hidden tab forwarded no media byte');
      const ends = lastOf(series.slice(0, others.length));
      for (const [i, s] of ends.entries()) {
        const viewer = others[i];
        const added = (s.stats?.stalls ?? NaN) - (viewer === undefined ? 0 : (stallsBefore.get(viewer) ?? 0));
        if (added !== 0)
          problems.push(`${labelOf(others, i)}: ${added} stall(s) while the hidden tab relayed`);
      }
      log(
        `hidden tab: ${visibility}, ${ticks} ticks in 2 s; up to ${mostChildren} children, ${(uploaded / 1e6).toFixed(2)} MB forwarded, ` +
          `receive-only reasons ${JSON.stringify(hEnd?.stats?.receiveOnlyReasons)}; its own player at ${hEnd?.video?.currentTime.toFixed(1) ?? '?'} s, ` +
          `paused ${String(hEnd?.video?.paused)}, ${hEnd?.stats?.stalls ?? '?'} stall(s), mesh share ${hEnd?.stats?.meshShare?.toFixed(2) ?? '?'}`,
      );
      if (problems.length > 0) await fail('d3', problems, [...others, h]);
    } finally {
      await h.close();
    }
  });

  test('e: a viewer that corrupts every packet it forwards is cut off; no forged byte reaches a player', async () => {
    // The liar has room for many children (TL 32) so the load phase hands it some.
    const liar = await openViewer(
      browser,
      viewerUrl(tracker.url, { fault: 'corrupt-forwarded', targetLoad: 32, maxLoad: 48 }),
      { label: 'liar' },
    );
    const victims = six;
    const before = await sampleAll(victims);
    const stallsBefore = new Map(victims.map((v, i) => [v, figure(before[i], 'stalls')]));
    const series = await monitor([...victims, liar], {
      durationMs: 40_000,
      intervalMs: 2000,
      onSample: printRound([...victims, liar]),
    });
    const problems: string[] = [];
    const last = lastOf(series);
    victims.forEach((v, i) => {
      problems.push(...steadinessProblems(v.label, series[i] ?? []));
      const st = last[i]?.stats;
      const added = (st?.stalls ?? NaN) - (stallsBefore.get(v) ?? 0);
      if (added !== 0) problems.push(`${v.label}: ${added} stall(s) with the liar in the swarm`);
      // Segment-level hash failures would mean corrupted bytes got as far as assembly.
      if (st?.verificationFailures !== 0)
        problems.push(`${v.label}: ${st?.verificationFailures ?? 'unknown'} verification failure(s)`);
    });
    const liarStats = last[victims.length]?.stats;
    const forged = last.slice(0, victims.length).reduce((sum, x) => sum + figure(x, 'forgedPackets'), 0);
    const cutOffs = last.slice(0, victims.length).reduce((sum, x) => sum + figure(x, 'peersCutOff'), 0);
    log(
      `liar uploaded ${liarStats?.uploadBytes ?? '?'} B; victims dropped ${forged} forged packet(s) and made ${cutOffs} cut-off(s)`,
    );
    if (!((liarStats?.uploadBytes ?? 0) > 0))
      problems.push('the liar never forwarded anything: the test proved nothing');
    if (forged < 3) problems.push(`only ${forged} forged packet(s) were caught`);
    if (cutOffs < 1) problems.push('nobody cut the liar off');
    if (problems.length > 0) await fail('e', problems, [...victims, liar]);
    await liar.close();
  });

  test('e2: a viewer that forges sequences and one that withholds what it should forward are left; the others play without a stall', async () => {
    // Both have room for many children (TL 32), so the load phase hands them some.
    const hostile = [
      await openViewer(
        browser,
        viewerUrl(tracker.url, { fault: 'forge-forwarded', targetLoad: 32, maxLoad: 48 }),
        { label: 'forger' },
      ),
      await openViewer(
        browser,
        viewerUrl(tracker.url, { fault: 'withhold-forwarded', targetLoad: 32, maxLoad: 48 }),
        { label: 'holder' },
      ),
    ];
    const victims = six;
    const all = [...victims, ...hostile];
    const openedAt = Date.now();
    const sum = (snaps: readonly ViewerSnapshot[], key: string): number =>
      snaps.slice(0, victims.length).reduce((total, x) => total + figure(x, key), 0);
    const before = await sampleAll(victims);
    // A forged sequence on a genuine payload is refused by the announcement check (forgedPackets);
    // the engine's sequence window (forgedSequences) catches what reaches it unannounced.
    const keys = ['forgedPackets', 'forgedSequences', 'parentsDistrusted', 'peersCutOff'] as const;
    type Key = (typeof keys)[number];
    const base = Object.fromEntries(keys.map((k) => [k, sum(before, k)])) as Record<Key, number>;
    /** When (ms after the hostile viewers opened) the victims first dropped / left / cut off. */
    const firstAt = Object.fromEntries(keys.map((k) => [k, null])) as Record<Key, number | null>;
    const stallsBefore = new Map(victims.map((v, i) => [v, figure(before[i], 'stalls')]));
    const series = await monitor(all, {
      durationMs: 40_000,
      intervalMs: 2000,
      onSample: (snaps, round) => {
        for (const k of keys)
          if (firstAt[k] === null && sum(snaps, k) > base[k]) firstAt[k] = Date.now() - openedAt;
        printRound(all)(snaps, round);
      },
    });
    const last = lastOf(series);
    const gained = Object.fromEntries(keys.map((k) => [k, sum(last, k) - base[k]])) as Record<Key, number>;
    const when = (k: Key): string => String(firstAt[k] ?? 'never');
    log(
      `hostile viewers: forged packets refused by the announcement check ${gained.forgedPackets} ` +
        `(first after ${when('forgedPackets')} ms), by the sequence window ${gained.forgedSequences} ` +
        `(first after ${when('forgedSequences')} ms), ` +
        `parents left for withholding or loops ${gained.parentsDistrusted} (first after ${when('parentsDistrusted')} ms), ` +
        `peers cut off ${gained.peersCutOff} (first after ${when('peersCutOff')} ms); ` +
        `forger uploaded ${figure(last[victims.length], 'uploadBytes')} B`,
    );
    const problems: string[] = [];
    victims.forEach((v, i) => {
      problems.push(...steadinessProblems(v.label, series[i] ?? []));
      const added = (last[i]?.stats?.stalls ?? NaN) - (stallsBefore.get(v) ?? 0);
      if (added !== 0) problems.push(`${v.label}: ${added} stall(s) with the hostile viewers in the swarm`);
    });
    const forgedCaught = gained.forgedPackets + gained.forgedSequences;
    if (forgedCaught < 3)
      problems.push(`only ${forgedCaught} forged sequence(s) reached a viewer: the forger proved nothing`);
    if (gained.peersCutOff < 1) problems.push('nobody cut the forger off');
    if (gained.parentsDistrusted < 1) problems.push('nobody left the withholder');
    if (problems.length > 0) await fail('e2', problems, all);
    await Promise.all(hostile.map((v) => v.close()));
  });

  test(`f: ${INJECTED_LOSS * 100}% of the media lost on every data channel: six viewers play ${PLAY_S} s without a stall, ≥70% from the mesh`, async () => {
    // A fresh swarm in which every viewer is lossy, so every link loses (issue 4's loss test).
    await Promise.all([...six, ...(late === null ? [] : [late])].map((v) => v.close()));
    six = [];
    late = null;
    await tracker.resetOrigin();
    const lossy: Viewer[] = [];
    for (let i = 0; i < 6; i++)
      lossy.push(
        await openViewer(browser, viewerUrl(tracker.url, { fault: `drop-received:${INJECTED_LOSS}` }), {
          label: `lossy${i}`,
        }),
      );
    try {
      await waitForPlaying(lossy, { timeoutMs: 30_000 });
    } catch (error) {
      await fail('f: startup', [String(error)], lossy);
    }
    const series = await monitor(lossy, {
      durationMs: PLAY_S * 1000,
      intervalMs: 2000,
      onSample: printRound(lossy),
    });
    const problems: string[] = [];
    series.forEach((s, i) => problems.push(...steadinessProblems(labelOf(lossy, i), s)));
    const last = lastOf(series);
    for (const [i, s] of last.entries()) {
      const st = s.stats;
      if (st === null || st === undefined) problems.push(`${labelOf(lossy, i)}: no player stats`);
      else {
        if (st.stalls !== 0) problems.push(`${labelOf(lossy, i)}: ${st.stalls} stall(s), ${st.stallMs} ms`);
        if (st.verificationFailures !== 0)
          problems.push(`${labelOf(lossy, i)}: ${st.verificationFailures} verification failure(s)`);
      }
    }
    const sum = (key: string): number => last.reduce((total, s) => total + figure(s, key), 0);
    const share = meshShareOf(last);
    const origin = await tracker.origin();
    log(
      `f: ${sum('injectedLosses')} media messages lost on purpose; ${sum('repairRequests')} repair requests, ` +
        `${sum('bytesFromRepair')} B repaired, ${sum('segmentsCompletedFromOrigin')} segment(s) completed from ` +
        `origin ranges, ${sum('segmentsFromOrigin')} whole from origin; mesh share ${(100 * share.share).toFixed(1)}%; ` +
        `origin served viewers ${origin.viewerMediaBytes} B`,
    );
    if (sum('injectedLosses') === 0) problems.push('no loss was injected: the test proved nothing');
    if (!(share.share >= 0.7))
      problems.push(
        `mesh share ${(100 * share.share).toFixed(1)}% < 70% (mesh ${share.mesh} B, origin ${share.origin} B)`,
      );
    if (problems.length > 0) await fail('f', problems, lossy);
    await Promise.all(lossy.map((v) => v.close()));
  });
});
