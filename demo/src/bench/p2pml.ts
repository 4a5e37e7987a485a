// Benchmark arm "p2pml": hls.js with p2p-media-loader (core + hlsjs 2.x), integrated the way its
// documentation shows (HlsJsP2PEngine.injectMixin), announcing to a local WebTorrent tracker.
// Query: `tracker` (ws:// URL of the bittorrent-tracker, required), `swarm` (swarmId, the same for
// every viewer), `liveSync` (hls.js liveSyncDurationCount; absent: p2p-media-loader's own choice).
// Every other p2p-media-loader setting is the library's default; the page reports the effective
// configuration through `window.chunkycast.settings()` so the results file records all of it.
import Hls from 'hls.js';
import { HlsJsP2PEngine } from 'p2p-media-loader-hlsjs';
import type { CoreConfig } from 'p2p-media-loader-core';
import {
  PlaybackProbe,
  attachPlayerPolicy,
  createVideo,
  expose,
  fail,
  hlsSettings,
  liveSyncFromQuery,
} from './measure.js';

function start(): void {
  const params = new URLSearchParams(location.search);
  const liveSync = liveSyncFromQuery(params);
  const src = params.get('src') ?? '/live/live.m3u8';
  const tracker = params.get('tracker');
  if (tracker === null || !/^wss?:\/\//.test(tracker)) throw new Error('?tracker=ws://… is required');
  const swarmId = params.get('swarm') ?? 'chunkycast-bench';
  if (!Hls.isSupported()) throw new Error('this browser has no Media Source Extensions');

  /** The settings this benchmark gives p2p-media-loader; all others are its defaults. */
  const core: Partial<CoreConfig> = {
    // The local tracker instead of the public ones (the test network is loopback only).
    announceTrackers: [tracker],
    // No STUN servers: host candidates on 127.0.0.1 are all a loopback swarm needs.
    rtcConfig: { iceServers: [] },
    // One swarm for every viewer of the stream (the default derives it from the manifest URL,
    // which is the same here anyway; set so that it cannot differ).
    swarmId,
  };
  const video = createVideo(document.body);
  const HlsWithP2P = HlsJsP2PEngine.injectMixin(Hls);
  let httpBytes = 0;
  let p2pBytes = 0;
  let uploadBytes = 0;
  let trackerErrors = 0;
  let segmentErrors = 0;
  const peers = new Set<string>();
  const hls = new HlsWithP2P({
    // Only when asked: without it p2p-media-loader moves hls.js deep into the live window itself.
    ...(liveSync === null ? {} : { liveSyncDurationCount: liveSync }),
    p2p: {
      core,
      onHlsJsCreated(created) {
        const engine = created.p2pEngine;
        engine.addEventListener('onChunkDownloaded', (bytes, source) => {
          if (source === 'p2p') p2pBytes += bytes;
          else httpBytes += bytes;
        });
        engine.addEventListener('onChunkUploaded', (bytes) => {
          uploadBytes += bytes;
        });
        engine.addEventListener('onPeerConnect', (peer) => {
          peers.add(peer.peerId);
        });
        engine.addEventListener('onPeerClose', (peer) => {
          peers.delete(peer.peerId);
        });
        engine.addEventListener('onTrackerError', () => {
          trackerErrors++;
        });
        engine.addEventListener('onSegmentError', () => {
          segmentErrors++;
        });
      },
    },
  });
  const policy = attachPlayerPolicy(hls, video);
  const probe = new PlaybackProbe(video, hls);
  hls.loadSource(src);
  hls.attachMedia(video);
  expose({
    player: {
      video,
      hls,
      get stats() {
        return probe.stats('p2pml', { p2pBytes, httpBytes, peers: peers.size }, policy.fatal(), {
          uploadBytes,
          trackerErrors,
          segmentErrors,
        });
      },
    },
    settings: () => ({
      arm: 'p2pml',
      src,
      given: { liveSyncDurationCount: liveSync, core },
      // JSON drops the function-valued settings (all undefined by default).
      p2pmlEffective: JSON.parse(JSON.stringify(hls.p2pEngine.getConfig())) as unknown,
      hls: hlsSettings(hls),
    }),
  });
}

try {
  start();
} catch (error) {
  fail(error);
}
