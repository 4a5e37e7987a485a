// Safari's engine (issue 15): the demo's <mesh-player> in WebKitGTK (Debian's MiniBrowser under
// WebKitWebDriver, on a private Xvfb), against a real ffmpeg stream and tracker. Debian builds
// WebKitGTK without WebRTC, so the player must play from the origin through hls.js (MSE or
// ManagedMediaSource) and say why the mesh is off, in its stats and in an error event.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Stack,
  isIsolated,
  launchWebKit,
  log,
  startStream,
  startTracker,
  viewerUrl,
  waitFor,
  type LiveStream,
  type Tracker,
  type WebKitPage,
} from './src/harness.js';

/** Seconds of playback the page must show after it started. */
const PLAY_S = 10;

const stack = new Stack();
let stream: LiveStream;
let tracker: Tracker;
let webkit: WebKitPage;

/** What the test reads from the page each time: the player's stats and the errors the demo shows. */
interface PageState {
  readonly currentTime: number;
  readonly paused: boolean;
  readonly readyState: number;
  /** The video's buffered ranges, [start, end] seconds. */
  readonly buffered: [number, number][];
  readonly meshEnabled: boolean;
  readonly meshOffReason: string | null;
  readonly playback: string;
  readonly bytesFromOrigin: number;
  readonly stalls: number;
  readonly lastError: { code: string; message: string } | null;
  readonly errorsShown: string;
  readonly api: { mse: boolean; mms: boolean; webrtc: boolean };
}

const READ_PAGE = `
  const player = window.chunkycast && window.chunkycast.player;
  if (!player) return null;
  const s = player.stats;
  return {
    currentTime: player.video.currentTime,
    paused: player.video.paused,
    readyState: player.video.readyState,
    buffered: Array.from({ length: player.video.buffered.length }, (_, i) => [
      player.video.buffered.start(i),
      player.video.buffered.end(i),
    ]),
    meshEnabled: s.meshEnabled,
    meshOffReason: s.meshOffReason,
    playback: s.playback,
    bytesFromOrigin: s.bytesFromOrigin,
    stalls: s.stalls,
    lastError: player.lastError,
    errorsShown: (document.getElementById('errors') || {}).textContent || '',
    api: {
      mse: 'MediaSource' in window,
      mms: 'ManagedMediaSource' in window,
      webrtc: typeof RTCPeerConnection !== 'undefined',
    },
  };`;

describe('WebKitGTK', () => {
  beforeAll(async () => {
    expect(isIsolated(), 'e2e must run in a loopback-only network namespace (use npm run e2e)').toBe(true);
    stream = await startStream({ quiet: true });
    stack.add('ffmpeg', () => stream.stop());
    tracker = await startTracker({ originDir: stream.dir, sourceStream: 'live' });
    stack.add('tracker', () => tracker.stop());
    webkit = await launchWebKit();
    stack.add('webkit', () => webkit.close());
    await stream.waitForSegments(3);
    log(`${webkit.version} up`);
  });

  afterAll(async () => {
    await stack.stopAll();
  });

  test(`the player plays ${PLAY_S} s from the origin through MSE, and says the mesh is off for want of WebRTC`, async () => {
    const read = (): Promise<PageState | null> => webkit.evaluate<PageState | null>(READ_PAGE);
    /** Loads the page and waits for its playhead to move: a first sample past 0, then a later one past it. */
    const load = async (): Promise<PageState> => {
      await webkit.navigate(viewerUrl(tracker.url));
      let first: PageState | null = null;
      return waitFor(
        'the WebKitGTK viewer to play',
        async () => {
          const s = await read();
          if (s === null || s.paused || s.currentTime <= 0) return false;
          if (first === null) {
            first = s;
            return false;
          }
          return s.currentTime > first.currentTime ? s : false;
        },
        { timeoutMs: 20_000, intervalMs: 500 },
      );
    };
    // One reload if the first load never moves: in 1 of 6 runs (within the full e2e suite) the
    // playhead stayed at 0.04 s with 16 s buffered, readyState unknown; alone it played 5 of 5.
    // The reload is logged, so a second stuck start fails the test.
    let started: PageState;
    try {
      started = await load();
    } catch (error) {
      log(`WebKitGTK did not play (${String(error)}): ${JSON.stringify(await read())}; reloading once`);
      started = await load();
    }
    await new Promise((resolve) => setTimeout(resolve, PLAY_S * 1000));
    const end = await read();
    log(`WebKitGTK: ${JSON.stringify(end)}`);
    expect(end).not.toBeNull();
    if (end === null) return;
    expect(end.currentTime - started.currentTime, 'seconds played').toBeGreaterThan(PLAY_S - 2);
    expect(end.stalls).toBe(0);
    expect(end.playback).toBe('hls.js');
    expect(end.bytesFromOrigin).toBeGreaterThan(0);
    expect(end.api.mse || end.api.mms).toBe(true);
    if (end.api.webrtc) {
      // A WebKitGTK built with WebRTC would join the mesh: then this test should grow a swarm.
      expect(end.meshEnabled).toBe(true);
      return;
    }
    expect(end.meshEnabled).toBe(false);
    expect(end.meshOffReason).toBe('no-webrtc');
    expect(end.lastError?.code).toBe('unsupported');
    expect(end.lastError?.message).toMatch(/no WebRTC/);
    // The demo lists the player's error events: the event fired, not only the property.
    expect(end.errorsShown).toMatch(/\[unsupported\].*no WebRTC/);
  });
});
