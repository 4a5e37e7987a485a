/**
 * What a viewer page reports each sample. The pages are the demo's viewer (<mesh-player>, whose
 * `stats` are the SDK's) and the comparison benchmark's pages (demo/src/bench/measure.ts, one per
 * arm); the snapshot is a JSON clone of whichever `window.chunkycast.player.stats` the page has, so
 * every figure is optional: a page kind that does not have it leaves it out.
 */

/** One message type's data-channel traffic as the SDK reports it (`traffic`): messages and bytes each way. */
export interface TrafficFigures {
  readonly sent: number;
  readonly sentBytes: number;
  readonly received: number;
  readonly receivedBytes: number;
}

/** One peer link as the SDK reports it. */
export interface PeerLinkSnapshot {
  readonly peer: number | string;
  readonly route?: string;
  readonly localCandidateType?: string | null;
  readonly remoteCandidateType?: string | null;
  readonly rttMs?: number | null;
  readonly bytesSent?: number;
  readonly bytesReceived?: number;
  /** Media payload bytes received from this peer (tree packets and repairs). */
  readonly mediaBytesReceived?: number;
}

/** One slice's place in the trees as the SDK reports it. */
export interface SliceSnapshot {
  readonly slice?: number;
  readonly parent: number | string | null;
  readonly children: readonly unknown[];
}

/** The player's stats: the SDK's, or a benchmark page's (`BenchStats`). */
export interface PlayerStatsSnapshot {
  // The SDK's <mesh-player>.
  readonly bytesFromMesh?: number;
  readonly bytesFromOrigin?: number;
  readonly bytesFromRepair?: number;
  readonly meshShare?: number;
  readonly segmentsFromMesh?: number;
  readonly segmentsFromOrigin?: number;
  readonly partsFromMesh?: number;
  readonly partsFromOrigin?: number;
  readonly segmentsCompletedFromOrigin?: number;
  readonly uploadBytes?: number;
  readonly traffic?: Readonly<Record<string, TrafficFigures>>;
  readonly transportBytesSent?: number;
  readonly transportBytesReceived?: number;
  readonly peers?: number;
  readonly load?: number;
  readonly targetLoad?: number;
  readonly maxLoad?: number;
  readonly stalls?: number;
  readonly stallMs?: number;
  readonly verificationFailures?: number;
  readonly forgedPackets?: number;
  readonly liveDelayMs?: number;
  readonly relayedBytes?: number;
  readonly connectFailures?: number;
  readonly uploadCapacityKbps?: number | null;
  readonly uploadCapacitySource?: string;
  readonly peerId?: number | string | null;
  readonly sourceId?: number | string | null;
  readonly slices?: readonly SliceSnapshot[];
  readonly peerLinks?: readonly PeerLinkSnapshot[];
  readonly peersByRoute?: Readonly<Record<string, number>>;
  // The comparison benchmark's pages.
  readonly playing?: boolean;
  readonly p2pBytes?: number;
  readonly httpBytes?: number;
  readonly p2pShare?: number;
  readonly fatalErrors?: number;
  readonly currentTime?: number;
  readonly playingSn?: number | null;
  readonly playingFragEndS?: number | null;
  readonly playingFragDurationS?: number | null;
  readonly extra?: Readonly<Record<string, number | string | boolean | null>>;
  /** Set when the stats could not be cloned. */
  readonly error?: string;
  readonly [figure: string]: unknown;
}

/** The page's <video> element. */
export interface VideoSnapshot {
  readonly currentTime: number;
  readonly paused: boolean;
  /** Above 1 while `<mesh-player>` (or hls.js in LL mode) catches up to its live position. */
  readonly playbackRate?: number;
  readonly readyState: number;
  /** Seconds buffered ahead of the playhead. */
  readonly buffered: number;
  readonly error: string | null;
  /** getVideoPlaybackQuality(): frames the decoder dropped, of those it was given (absent: no API). */
  readonly droppedFrames?: number;
  readonly totalFrames?: number;
}

/** One sample of one viewer page; `error` alone when the page did not answer. */
export interface ViewerSnapshot {
  /** Wall time of the sample, ms. */
  readonly now: number;
  readonly pageMs?: number;
  readonly stats?: PlayerStatsSnapshot | null;
  readonly video?: VideoSnapshot | null;
  /** Page time (ms since navigation) of the first `playing` event, null before. */
  readonly firstPlayingMs?: number | null;
  readonly waitingAfterStart?: number;
  /** Chromium's `performance.memory.usedJSHeapSize` of the page, bytes (absent elsewhere). */
  readonly jsHeapBytes?: number | null;
  /** How the fake microphone request went. */
  readonly gum?: string | null;
  readonly errors?: readonly string[];
  readonly error?: string;
}
