import { describe, expect, it } from 'vitest';
import { withoutOut } from '../src/lib/out-dir.js';
import { parsePlaylist } from '../src/stack/stream.js';
import type { ViewerSnapshot } from '../src/viewers/snapshot.js';
import { meshShareOf, steadinessProblems, swarmSummary } from '../src/viewers/watch.js';
import {
  classifyBrowserProcess,
  cpuBetween,
  machineBusyPct,
  memoryOf,
  ofBrowser,
} from '../src/bench-compare/browser-stats.js';
import { liveDelayMs } from '../src/bench-compare/trial.js';
import { uplinkFigures } from '../src/lab/run.js';
import { emptyOriginStats } from '@chunkycast/tracker';

const playing = (now: number, currentTime: number, stats: ViewerSnapshot['stats'] = {}): ViewerSnapshot => ({
  now,
  stats,
  video: { currentTime, paused: false, readyState: 4, buffered: 4, error: null },
  firstPlayingMs: 500,
});

describe('stream', () => {
  it('parsePlaylist numbers segments from the media sequence', () => {
    const text = '#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:7\n#EXTINF:2.0,\nlive7.ts\n#EXTINF:1.5,\nlive8.ts\n';
    expect(parsePlaylist(text)).toEqual({
      sequence: 7,
      segments: [
        { sequence: 7, uri: 'live7.ts', duration: 2 },
        { sequence: 8, uri: 'live8.ts', duration: 1.5 },
      ],
    });
  });
});

describe('viewers', () => {
  it('steadinessProblems flags a sample that advanced less than half the wall time', () => {
    const steady = [playing(0, 1), playing(2000, 3), playing(4000, 5)];
    expect(steadinessProblems('v0', steady)).toEqual([]);
    const stuck = [playing(0, 1), playing(2000, 1.5)];
    expect(steadinessProblems('v0', stuck)).toHaveLength(1);
    expect(steadinessProblems('v0', [playing(0, 1), { now: 2000, error: 'gone' }])[0]).toMatch(
      /did not answer: gone/,
    );
  });

  it('swarmSummary sums the viewers and counts stream copies against what was produced', () => {
    const snaps = [
      playing(0, 10, {
        bytesFromMesh: 300,
        bytesFromOrigin: 100,
        peers: 3,
        stalls: 1,
        stallMs: 400,
        liveDelayMs: 5000,
      }),
      playing(0, 10, { bytesFromMesh: 100, bytesFromOrigin: 0, peers: 1, liveDelayMs: 7000 }),
      { now: 0, error: 'no answer' },
    ];
    expect(meshShareOf(snaps).share).toBe(0.8);
    const sum = swarmSummary(
      snaps,
      { ...emptyOriginStats(), mediaBytes: 1500, viewerMediaBytes: 500 },
      { bytes: 1000 },
    );
    expect(sum).toMatchObject({
      viewers: 3,
      playing: 2,
      meshShare: 0.8,
      peersAvg: 2,
      stalls: 1,
      stallMs: 400,
      liveDelayMsP50: 5000,
      streamCopiesFromOrigin: 1.5,
    });
    expect(swarmSummary(snaps, null, null).streamCopiesFromOrigin).toBeNull();
  });

  it('withoutOut drops --out and its value, in both spellings', () => {
    expect(withoutOut(['--viewers', '4', '--out', 'x', '--hide-video'])).toEqual([
      '--viewers',
      '4',
      '--hide-video',
    ]);
    expect(withoutOut(['--out=x', '--viewers', '4'])).toEqual(['--viewers', '4']);
  });
});

describe('bench:compare figures', () => {
  it('liveDelayMs: segment finished → now, plus what of the segment is still ahead', () => {
    const segments = new Map([[5, { sequence: 5, uri: 's5.ts', duration: 2, bytes: 1, readyAt: 1000 }]]);
    const snap = playing(4000, 10, {
      playingSn: 5,
      playingFragEndS: 11,
      playingFragDurationS: 2,
      currentTime: 10,
    });
    expect(liveDelayMs(snap, segments)).toBe(3000 + 1000);
    expect(liveDelayMs({ ...snap, firstPlayingMs: null }, segments)).toBeNull();
    expect(liveDelayMs(playing(4000, 10, { playingSn: 7 }), segments)).toBeNull();
  });

  it('liveDelayMs: an LL fragment reported as far as its parts were listed; a segment still written', () => {
    const segments = new Map([[5, { sequence: 5, uri: 's5.ts', duration: 2, bytes: 1, readyAt: 1000 }]]);
    // The playhead entered segment 5 (starting at 9 s) when one 0.5 s part of it was listed.
    const partly = { playingSn: 5, playingFragEndS: 9.5, playingFragDurationS: 0.5, currentTime: 10 };
    // 1 s of it is still ahead: its media was captured 1 s before the segment was finished.
    expect(liveDelayMs(playing(4000, 10, partly), segments)).toBe(3000 + 1000);
    // Segment 6 is being written: it began when 5 was finished, and 0.25 s of it has played.
    const open = { playingSn: 6, playingFragEndS: 11.5, playingFragDurationS: 0.5, currentTime: 11.25 };
    expect(liveDelayMs(playing(4000, 10, open), segments)).toBe(3000 - 250);
  });

  it('cpuBetween counts a new process from zero and splits out renderers; memoryOf sums Pss and footprints', () => {
    const a = { atMs: 0, processes: [{ pid: 1, browser: 'chromium', type: 'browser', cpuS: 1 }] } as const;
    const b = {
      atMs: 2000,
      processes: [
        { pid: 1, browser: 'chromium', type: 'browser', cpuS: 1.5, pssKb: 1024, footprintKb: 4096 },
        { pid: 2, browser: 'chromium', type: 'renderer', cpuS: 0.5, pssKb: 2048, footprintKb: 3072 },
        { pid: 3, browser: 'chromium', type: 'renderer', cpuS: 0, pssKb: null, footprintKb: null },
      ],
    } as const;
    expect(cpuBetween(a, b)).toEqual({
      wallS: 2,
      allPct: 50,
      renderersPct: 25,
      renderers: 2,
      processes: 3,
      byTypePct: { browser: 25, renderer: 25 },
    });
    // The browser's footprint is not a renderer's; an unreadable process adds nothing.
    expect(memoryOf(b)).toEqual({ allMiB: 3, renderersMiB: 2, renderersFootprintMiB: 3 });
    expect(machineBusyPct({ busy: 0, total: 0 }, { busy: 50, total: 100 }, 2)).toBe(100);
    expect(machineBusyPct({ busy: 0, total: 0 }, { busy: 0, total: 0 }, 2)).toBeNull();
  });
});

describe('browser processes', () => {
  it('classifies Chromium by --type and Firefox by its last word, fork-server children included', () => {
    expect(
      classifyBrowserProcess('/usr/lib/chromium/chromium', ['/usr/lib/chromium/chromium', '--no-sandbox']),
    ).toEqual({
      browser: 'chromium',
      type: 'browser',
    });
    expect(
      classifyBrowserProcess('/usr/lib/chromium/chromium', [
        'chromium',
        '--type=utility',
        '--utility-sub-type=network.mojom.NetworkService',
      ]),
    ).toEqual({ browser: 'chromium', type: 'utility:NetworkService' });
    // A page's renderer, and the browser's own UI's, which is no page's.
    expect(classifyBrowserProcess('/usr/lib/chromium/chromium', ['chromium', '--type=renderer'])).toEqual({
      browser: 'chromium',
      type: 'renderer',
    });
    expect(
      classifyBrowserProcess('/usr/lib/chromium/chromium', [
        'chromium',
        '--type=renderer',
        '--top-chrome-webui',
      ]),
    ).toEqual({ browser: 'chromium', type: 'renderer:webui' });
    // Forked by the zygote: one string with spaces, as it shows in /proc/PID/cmdline.
    expect(
      classifyBrowserProcess('/usr/lib/chromium/chromium', [
        '/usr/lib/chromium/chromium --type=renderer --top-chrome-webui --lang=en-US',
      ]),
    ).toEqual({ browser: 'chromium', type: 'renderer:webui' });
    const firefox = '/usr/lib/firefox-esr/firefox-esr';
    expect(classifyBrowserProcess(firefox, [firefox, '--remote-debugging-port=0', '--headless'])).toEqual({
      browser: 'firefox',
      type: 'browser',
    });
    // Launched directly: one argument per word. Forked by the fork server: one string with spaces.
    expect(classifyBrowserProcess(firefox, [firefox, '-contentproc', '-isForBrowser', '3', 'tab'])).toEqual({
      browser: 'firefox',
      type: 'renderer',
    });
    expect(
      classifyBrowserProcess(firefox, [`${firefox} -contentproc -parentBuildID 1 -appDir /x 2 socket`]),
    ).toEqual({
      browser: 'firefox',
      type: 'firefox:socket',
    });
    expect(classifyBrowserProcess('/usr/bin/ffmpeg', ['ffmpeg'])).toBeNull();
  });
  it('ofBrowser keeps one browser of a sample', () => {
    const sample = {
      atMs: 5,
      processes: [
        { pid: 1, browser: 'chromium', type: 'renderer', cpuS: 1 },
        { pid: 2, browser: 'firefox', type: 'renderer', cpuS: 2 },
      ],
    } as const;
    expect(ofBrowser(sample, 'firefox').processes.map((p) => p.pid)).toEqual([2]);
  });
});

describe('lab figures', () => {
  it('uplinkFigures: peak over 1 s windows and the longest run above 90% of the cap', () => {
    // 1000 kbit/s cap; readings every 500 ms; 125,000 B per second = 1000 kbit/s.
    const readings = [0, 62_500, 125_000, 187_500, 250_000, 260_000, 270_000].map((bytes, i) => ({
      bytes,
      atMs: i * 500,
    }));
    const figures = uplinkFigures(readings, 1000);
    expect(figures.peakKbps).toBe(1000);
    expect(figures.longestSaturatedMs).toBe(2000);
    expect(uplinkFigures([null, null, null], 1000)).toEqual({ peakKbps: 0, longestSaturatedMs: 0 });
  });
});
