import { describe, expect, it } from 'vitest';
import { UsageError } from '../src/lib/args.js';
import {
  SOURCE,
  bytesByDirection,
  crossDirections,
  interleave,
  parseBrowserMix,
} from '../src/swarm/browsers.js';
import type { ViewerSnapshot } from '../src/viewers/snapshot.js';

describe('parseBrowserMix', () => {
  it('reads BROWSER[:COUNT] lists', () => {
    expect(parseBrowserMix('chromium:4,firefox:3')).toEqual([
      { browser: 'chromium', viewers: 4 },
      { browser: 'firefox', viewers: 3 },
    ]);
    expect(parseBrowserMix('firefox')).toEqual([{ browser: 'firefox', viewers: 1 }]);
  });
  it('refuses unknown browsers, bad counts and repeats, naming the part', () => {
    expect(() => parseBrowserMix('safari:2')).toThrow(/"safari:2" is not BROWSER\[:COUNT\]/);
    expect(() => parseBrowserMix('chromium:0')).toThrow(UsageError);
    expect(() => parseBrowserMix('chromium:2.5')).toThrow(/whole number/);
    expect(() => parseBrowserMix('chromium:x')).toThrow(/whole number/);
    expect(() => parseBrowserMix('chromium:1:2')).toThrow(UsageError);
    expect(() => parseBrowserMix('chromium:1,chromium:2')).toThrow(/named twice/);
  });
});

describe('interleave and crossDirections', () => {
  it('takes the browsers in turn until each has its count', () => {
    expect(
      interleave([
        { browser: 'chromium', viewers: 3 },
        { browser: 'firefox', viewers: 1 },
      ]),
    ).toEqual(['chromium', 'firefox', 'chromium', 'chromium']);
  });
  it('lists both directions between different browsers only', () => {
    expect(
      crossDirections([
        { browser: 'chromium', viewers: 1 },
        { browser: 'firefox', viewers: 1 },
      ]),
    ).toEqual(['chromium→firefox', 'firefox→chromium']);
    expect(crossDirections([{ browser: 'chromium', viewers: 3 }])).toEqual([]);
  });
});

/** A sample of a viewer with the given id whose links received the given media bytes. */
const sample = (peerId: number, links: Record<number, number>, sourceId = 1): ViewerSnapshot => ({
  now: 0,
  stats: {
    peerId,
    sourceId,
    peerLinks: Object.entries(links).map(([peer, bytes]) => ({
      peer: Number(peer),
      mediaBytesReceived: bytes,
    })),
  },
});

describe('bytesByDirection', () => {
  it('sums each link at its largest sample, by sender and receiver browser', () => {
    const series: ViewerSnapshot[][] = [
      // Viewer 10 (chromium): from the source, then from 20; its link to 20 later closed (absent).
      [sample(10, { 1: 100 }), sample(10, { 1: 300, 20: 50 }), sample(10, { 1: 400 })],
      // Viewer 20 (firefox): from 10, and from a peer nobody reported (99).
      [sample(20, { 10: 70, 99: 5 })],
    ];
    expect(bytesByDirection(series, ['chromium', 'firefox'])).toEqual({
      [`${SOURCE}→chromium`]: 400,
      'firefox→chromium': 50,
      'chromium→firefox': 70,
      'unknown→firefox': 5,
    });
  });
  it('counts nothing for viewers without links or stats', () => {
    expect(bytesByDirection([[{ now: 0 }], [{ now: 0, stats: null }]], ['chromium', 'firefox'])).toEqual({});
  });
});
