// Benchmark arm "http": plain hls.js from the origin, the control. `?liveSync=N` sets hls.js's
// liveSyncDurationCount (hls.js's default 3 otherwise); `?lowLatency=1` its lowLatencyMode (LL-HLS,
// at the playlist's PART-HOLD-BACK), which is off otherwise so that a plain position means the
// same on every origin; nothing else differs from hls.js defaults but the LL catch-up rate below.
import Hls from 'hls.js';
import type { FragLoadedData } from 'hls.js';
import {
  PlaybackProbe,
  attachPlayerPolicy,
  createVideo,
  expose,
  fail,
  hlsSettings,
  liveSyncFromQuery,
  lowLatencyFromQuery,
  markPageStart,
} from './measure.js';

function start(): void {
  markPageStart();
  const params = new URLSearchParams(location.search);
  const liveSync = liveSyncFromQuery(params);
  const src = params.get('src') ?? '/live/live.m3u8';
  if (!Hls.isSupported()) throw new Error('this browser has no Media Source Extensions');
  const video = createVideo(document.body);
  const hls = new Hls({
    lowLatencyMode: lowLatencyFromQuery(params),
    // <mesh-player low-latency>'s catch-up (LOW_LATENCY_CATCH_UP_RATE in sdk/src/player.ts), so the
    // arms differ only in where segments come from; not imported, to keep the SDK off this page.
    maxLiveSyncPlaybackRate: 1.1,
    ...(liveSync === null ? {} : { liveSyncDurationCount: liveSync }),
  });
  const policy = attachPlayerPolicy(hls, video);
  const probe = new PlaybackProbe(video, hls);
  let httpBytes = 0;
  hls.on(Hls.Events.FRAG_LOADED, (_event, data: FragLoadedData) => {
    httpBytes += data.payload.byteLength;
  });
  hls.loadSource(src);
  hls.attachMedia(video);
  expose({
    player: {
      video,
      hls,
      get stats() {
        return probe.stats('http', { p2pBytes: 0, httpBytes, peers: 0 }, policy.fatal());
      },
    },
    settings: () => ({ arm: 'http', src, hls: hlsSettings(hls) }),
  });
}

try {
  start();
} catch (error) {
  fail(error);
}
