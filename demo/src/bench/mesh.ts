// Benchmark arm "mesh": one <mesh-player> with the tracker and its true source. Query: `tracker`
// (default this host's /ws), `stream` (default live), `liveSync` (the player's live-sync attribute),
// `lowLatency=1` (its low-latency attribute), `packetRepair` (engine or segment: its packet-repair
// attribute).
// The page is as bare as the other arms' pages (no stats panel), so their CPU figures compare.
import { MeshPlayer } from '@chunkycast/sdk';
import type Hls from 'hls.js';
import {
  PlaybackProbe,
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
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const player = document.createElement('mesh-player');
  if (!(player instanceof MeshPlayer)) throw new Error('<mesh-player> is not defined');
  player.setAttribute('src', params.get('src') ?? '/live/live.m3u8');
  player.setAttribute('tracker', params.get('tracker') ?? `${scheme}//${location.host}/ws`);
  player.setAttribute('stream', params.get('stream') ?? 'live');
  if (liveSync !== null) player.setAttribute('live-sync', String(liveSync));
  if (lowLatencyFromQuery(params)) player.setAttribute('low-latency', '');
  const packetRepair = params.get('packetRepair');
  if (packetRepair !== null) player.setAttribute('packet-repair', packetRepair);
  player.setAttribute('autoplay', '');
  player.setAttribute('muted', '');
  player.className = 'player';
  document.body.append(player);
  // Connected: the element built its hls.js pipeline synchronously.
  const hls: Hls | null = player.hls;
  if (hls === null) throw new Error('<mesh-player> has no hls.js instance (no MSE?)');
  let fatal = 0;
  player.addEventListener('error', (event) => {
    if (event instanceof CustomEvent && (event.detail as { code?: string } | null)?.code === 'playback')
      fatal++;
  });
  const probe = new PlaybackProbe(player.video, hls);
  expose({
    player: {
      video: player.video,
      hls,
      get stats() {
        const own = player.stats;
        return probe.stats(
          'mesh',
          { p2pBytes: own.bytesFromMesh, httpBytes: own.bytesFromOrigin, peers: own.peers },
          fatal,
          {
            // The player's own figures, for cross-checking the common ones.
            playerStalls: own.stalls,
            playerStallMs: own.stallMs,
            playerLiveDelayMs: own.liveDelayMs,
            uploadBytes: own.uploadBytes,
            bytesFromRepair: own.bytesFromRepair,
            segmentsFromMesh: own.segmentsFromMesh,
            segmentsFromOrigin: own.segmentsFromOrigin,
            startupSegmentsFromMesh: own.startupSegmentsFromMesh,
            startupSegmentsFromOrigin: own.startupSegmentsFromOrigin,
            welcomeAfterMs: own.welcomeAfterMs,
            firstDialAfterMs: own.firstDialAfterMs,
            firstLinkAfterMs: own.firstLinkAfterMs,
            segmentsKeptFromOrigin: own.segmentsKeptFromOrigin,
            partsFromMesh: own.partsFromMesh,
            partsFromOrigin: own.partsFromOrigin,
            segmentsCompletedFromOrigin: own.segmentsCompletedFromOrigin,
            packetRepair: own.packetRepair,
            repairPacketsFromPeers: own.repairPacketsFromPeers,
            repairPacketsFromOrigin: own.repairPacketsFromOrigin,
            repairOriginBytes: own.repairOriginBytes,
            load: own.load,
            trackerConnected: own.trackerConnected,
            playlistReloadsHeld: own.playlistReloadsHeld,
            playlistReloadsHeldFound: own.playlistReloadsHeldFound,
            playlistHeldMs: own.playlistHeldMs,
            playlistReloadsStepped: own.playlistReloadsStepped,
            playlistSteppedMs: own.playlistSteppedMs,
          },
        );
      },
    },
    settings: () => ({
      arm: 'mesh',
      attributes: Object.fromEntries(player.getAttributeNames().map((n) => [n, player.getAttribute(n)])),
      hls: hlsSettings(hls),
    }),
  });
}

try {
  start();
} catch (error) {
  fail(error);
}
