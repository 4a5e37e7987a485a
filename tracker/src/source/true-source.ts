import { createHash, randomInt } from 'node:crypto';
import { WebSocket } from 'ws';
import {
  LIVE_PROTOCOL,
  MeshError,
  MeshNode,
  TrackerClient,
  bytesToBase64,
  type LogFn,
  type ReconnectPolicy,
  type TrackerClientStats,
  type WebSocketLike,
} from '@chunkycast/sdk/core';
import {
  MAX_ANNOUNCED_PACKETS,
  MAX_BOOTSTRAP_PEERS,
  MAX_SEGMENT_BYTES,
  PACKET_HASH_HEX,
  announcementSigningBytes,
  encodeMediaPacket,
  packetRange,
  planPackets,
  type IceServer,
  type PeerId,
  type SegmentAnnouncement,
  type SignedAnnouncement,
} from '@chunkycast/wire';
import { parseMediaPlaylist, PlaylistError } from './playlist.js';

/**
 * How often the playlist is read. ffmpeg lists a segment only once it is written, so a segment
 * waits on average half of this before it enters the mesh; 250 ms costs 4 small requests a second.
 */
export const PLAYLIST_POLL_MS = 250;
/** A fetch of the playlist or a segment that takes longer is abandoned (and retried on the next poll). */
const FETCH_TIMEOUT_MS = 5000;
const REPORT_INTERVAL_MS = 2000;
/** The engine's seed is drawn from [1, this): a positive 31-bit integer. */
const MAX_ENGINE_SEED = 0x7fff_ffff;
/** The true source's engine deals M = 16 slices (the thesis's default, §4.2, protocol parameters). */
const SLICES = 16;
/**
 * Segments kept back while the tracker is away ('hold' mode): 3 × 2 s. An older one would reach
 * viewers after their loader gave up on it (it waits ≤ 4 s, then takes the origin's copy).
 */
export const MAX_SEGMENTS_HELD_WHILE_DISCONNECTED = 3;

/**
 * What the source does with a new segment while its tracker is away (a tracker restart).
 * - 'feed' (default): carry on as usual. Every announcement goes to the tracker and, over the mesh,
 *   to every peer the source has a link with (its slice sources), ahead of the packets; viewers
 *   verify it and pass it on (the SDK's AnnouncementRelay), so during an outage they verify and
 *   play the segment from the mesh. The tracker's copy is queued by the tracker client and sent
 *   first thing after the next welcome (for viewers that join later and the tracker's last 16).
 * - 'hold': the behaviour from before announcements travelled over the mesh, for a swarm of viewers
 *   whose SDK predates the `Announcement` peer message (they would count it as undecodable and cut
 *   the source off after three): announcements go to the tracker only, and a segment cut while it is
 *   away is kept (announcement and packets, at most MAX_SEGMENTS_HELD_WHILE_DISCONNECTED) and, right
 *   after the next welcome, announced and published as a fresh one: it reaches the mesh late by the
 *   outage.
 */
export type WhileDisconnected = 'feed' | 'hold';

/** The tracker's structured log sink, as the SDK's mesh host takes it. */
export type SourceLogFn = LogFn;

export interface TrueSourceOptions {
  /** ws://… URL of the tracker's WebSocket endpoint. */
  readonly trackerUrl: string;
  readonly stream: string;
  readonly broadcasterKey: string;
  /** http(s) URL of the live HLS media playlist to ingest. */
  readonly playlistUrl: string;
  /** Ed25519 private key (WebCrypto) that signs segment announcements. */
  readonly signingKey: CryptoKey;
  /** Structured log sink (the tracker's JSON logger). */
  readonly log: SourceLogFn;
  /**
   * The base of every RTCPeerConnection configuration for node-datachannel (`bindAddress`, …); the
   * ICE servers are added to it. Default: bound to 127.0.0.1 when the tracker URL is on loopback
   * (node-datachannel gathers no loopback candidate otherwise, environment.md), unbound otherwise. A
   * tracker reached on loopback may still serve viewers elsewhere (the in-process source of a tracker
   * bound to 0.0.0.0): its host passes `{}` here so the source is not bound to loopback.
   */
  readonly rtcConfig?: Record<string, unknown>;
  /**
   * STUN/TURN servers overriding the tracker's. Default: the servers of the tracker's welcome and of
   * its later `ice` frames (renewed TURN credentials), for each new connection — in process and as
   * chunkycast-source alike, since the tracker makes them from its own configuration.
   */
  readonly iceServers?: readonly IceServer[];
  /** Segments cut while the tracker is away (default 'feed'; see WhileDisconnected). */
  readonly whileDisconnected?: WhileDisconnected;
  /** Reconnection after a lost tracker (default the SDK's policy). */
  readonly reconnect?: Partial<ReconnectPolicy>;
  /**
   * The tracker refused the source for good after a reconnect (a changed broadcaster key): the
   * source can no longer announce, so whoever runs it should stop it or alert.
   */
  readonly onFatal?: (error: MeshError) => void;
}

export interface TrueSourceStats {
  readonly segmentsPublished: number;
  readonly bytesPublished: number;
  /** Media bytes sent to slice sources (one stream copy when every slice has a source). */
  readonly egressBytes: number;
  readonly sliceSources: readonly (number | null)[];
  readonly lastSequence: number | null;
  /** The tracker connection: state, reconnects, time without a tracker, dropped signalling. */
  readonly tracker: TrackerClientStats;
  /** Segments cut while the tracker was away and published at once, announced over the mesh ('feed' mode). */
  readonly segmentsFedWhileDisconnected: number;
  /** Announcement messages sent to peers over the mesh (one per linked peer per segment). */
  readonly announcementsSentToPeers: number;
  /** Segments cut while the tracker was away and published after it came back ('hold' mode). */
  readonly segmentsHeldWhileDisconnected: number;
  /** Segments cut while the tracker was away and given up (beyond the hold bound): origin only. */
  readonly segmentsDroppedWhileDisconnected: number;
  /** Mesh nodes rebuilt because the tracker gave the source another id after a reconnect. */
  readonly nodeRebuilds: number;
}

export interface TrueSource {
  /** The source's peer id (deterministic per stream with a tracker that derives it). */
  readonly peerId: number;
  stats(): TrueSourceStats;
  stop(): Promise<void>;
}

/**
 * The true source: joins the tracker with the broadcaster key, follows the live playlist, and for
 * each new segment announces `{sequence, uri, bytes, packets, sha256}` signed with the broadcaster's
 * key, then cuts it into packets (a multiple of 16) that its engine deals over the 16 slices, each
 * slice sent once, to that slice's source (Chunkyspread's true source, thesis §4.2, roles of the
 * true source).
 */
export async function startTrueSource(options: TrueSourceOptions): Promise<TrueSource> {
  const { log, stream } = options;
  const trackerHost = new URL(options.trackerUrl).hostname;
  const baseRtcConfig =
    options.rtcConfig ??
    (trackerHost === '127.0.0.1' || trackerHost === 'localhost' ? { bindAddress: '127.0.0.1' } : {});
  const whileDisconnected = options.whileDisconnected ?? 'feed';
  const tracker = new TrackerClient({
    url: options.trackerUrl,
    stream,
    role: 'source',
    key: options.broadcasterKey,
    createSocket: (url) => new WebSocket(url) as unknown as WebSocketLike,
    ...(options.reconnect === undefined ? {} : { reconnect: options.reconnect }),
  });
  const welcome = await tracker.join();
  log('info', 'true source joined', {
    stream,
    peerId: welcome.peerId,
    iceServers: (options.iceServers ?? welcome.ice.servers).length,
  });
  // Asked for each new connection: links opened later get renewed TURN credentials.
  const rtcConfig = (): Record<string, unknown> => ({
    ...baseRtcConfig,
    iceServers: (options.iceServers ?? tracker.ice?.servers ?? []).map((server) => ({
      ...server,
      urls: [...server.urls],
    })),
  });
  const createNode = (peerId: PeerId, sourceId: PeerId): MeshNode => {
    const node: MeshNode = new MeshNode({
      id: peerId,
      sourceId,
      role: 'source',
      targetLoadSlices: SLICES,
      maxLoadSlices: SLICES,
      protocol: LIVE_PROTOCOL,
      seed: randomInt(1, MAX_ENGINE_SEED),
      rtcConfig,
      // A replaced node (after an id change) must not speak for the current one.
      signal: (to, data) => {
        if (current === node) tracker.send({ type: 'signal', to, data });
      },
      requestBootstrap: (count) => {
        if (current === node)
          tracker.send({ type: 'bootstrap', count: Math.min(MAX_BOOTSTRAP_PEERS, Math.max(1, count)) });
      },
      deliver: () => undefined,
      log,
    });
    return node;
  };
  let current = createNode(welcome.peerId, welcome.sourceId);
  let retiredUploadBytes = 0;
  let retiredAnnouncementsSent = 0;
  let nodeRebuilds = 0;
  /** Segments cut while the tracker was away ('hold' mode), oldest first. */
  let held: { announcement: SignedAnnouncement; packets: Uint8Array[] }[] = [];
  let segmentsHeld = 0;
  let segmentsFed = 0;
  /**
   * Stream-wide number of the next segment's first packet: signed in its announcement, and carried on
   * across node rebuilds, so every packet's slice and sequence are the ones viewers can check.
   */
  let nextPacket = 0;
  let segmentsDropped = 0;

  const sendSegment = (announcement: SignedAnnouncement, packets: readonly Uint8Array[]): void => {
    // Announce first: viewers can then verify the segment the moment its last packet arrives. To
    // the tracker (queued by the client while it is away) and, but for the legacy 'hold' mode, over
    // the mesh to every linked peer (the slice sources pass it on), on the same ordered channels
    // as the packets, ahead of them.
    tracker.send({ type: 'announce', announcement });
    if (whileDisconnected === 'feed') current.broadcastAnnouncement(announcement);
    // Each packet under the number its announcement signs (a dropped held segment leaves a gap).
    packets.forEach((packet, index) => {
      current.publish(packet, announcement.firstPacket + index);
    });
  };

  /** After a welcome that follows a loss: same id, carry on; another id, a new node. Then the held segments. */
  const rejoined = (peerId: PeerId, sourceId: PeerId): void => {
    if (peerId !== current.id) {
      log('warn', 'true source: the tracker gave another id; rebuilding the mesh node', {
        previousPeerId: current.id,
        peerId,
      });
      const old = current;
      retiredUploadBytes += old.counters.uploadBytes;
      retiredAnnouncementsSent += old.counters.announcementsSent;
      nodeRebuilds++;
      current = createNode(peerId, sourceId);
      void old.stop(false);
      current.start();
    }
    const release = held;
    held = [];
    for (const segment of release) sendSegment(segment.announcement, segment.packets);
    if (release.length > 0)
      log('info', 'true source: published the segments held while the tracker was away', {
        segments: release.map((x) => x.announcement.sequence),
      });
  };

  tracker.onMessage = (message) => {
    if (message.type === 'peers') current.bootstrap(message.peers);
    else if (message.type === 'signal') current.handleSignal(message.from, message.data);
    else if (message.type === 'welcome') rejoined(message.peerId, message.sourceId);
    else if (message.type === 'error')
      log('debug', 'tracker error', { code: message.code, message: message.message });
  };
  tracker.onProblem = (error) => {
    log('warn', 'true source: tracker problem', { error: error.message });
  };
  tracker.onDisconnected = (detail) => {
    // The links to the slice sources stay up: the engine keeps feeding them meanwhile.
    log('warn', 'true source: lost the tracker; reconnecting', { code: detail.code, reason: detail.reason });
  };
  tracker.onReconnected = (detail) => {
    log('info', 'true source: tracker reached again', { ...detail });
  };
  tracker.onFatal = (error) => {
    log('error', 'true source: the tracker refused us for good', { error: error.message });
    options.onFatal?.(error);
  };
  current.start();

  let lastSequence: number | null = null;
  let segmentsPublished = 0;
  let bytesPublished = 0;
  const state = { stopped: false };
  // A function, not a read of `state.stopped`: stop() may run while a poll awaits.
  const isStopped = (): boolean => state.stopped;
  let polling = false;
  let lastPlaylistError = '';

  const fetchBytes = async (url: string): Promise<Uint8Array> => {
    const response = await fetch(url, {
      headers: { 'X-Chunkycast-Role': 'source' },
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    });
    if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status}`);
    const length = Number(response.headers.get('content-length') ?? '0');
    if (length > MAX_SEGMENT_BYTES)
      throw new Error(`GET ${url}: ${length} bytes exceeds ${MAX_SEGMENT_BYTES}`);
    return new Uint8Array(await response.arrayBuffer());
  };

  const publishSegment = async (sequence: number, uri: string, durationMs: number): Promise<void> => {
    const url = new URL(uri, options.playlistUrl).toString();
    const bytes = await fetchBytes(url);
    if (bytes.length > MAX_SEGMENT_BYTES) throw new Error(`segment ${sequence} is ${bytes.length} bytes`);
    const plan = planPackets(bytes.length, SLICES);
    if (plan.packets > MAX_ANNOUNCED_PACKETS)
      throw new Error(
        `segment ${sequence} needs ${plan.packets} packets; at most ${MAX_ANNOUNCED_PACKETS} are announced`,
      );
    const packetBytes = (index: number): Uint8Array => {
      const [start, end] = packetRange(plan, bytes.length, index);
      return bytes.subarray(start, end);
    };
    let packetHashes = '';
    for (let index = 0; index < plan.packets; index++)
      packetHashes += createHash('sha256').update(packetBytes(index)).digest('hex').slice(0, PACKET_HASH_HEX);
    const firstPacket = nextPacket;
    nextPacket += plan.packets;
    const announcement: SegmentAnnouncement = {
      stream,
      sequence,
      uri,
      bytes: bytes.length,
      packets: plan.packets,
      firstPacket,
      sha256: createHash('sha256').update(bytes).digest('hex'),
      packetHashes,
      durationMs,
      publishedAtMs: Date.now(),
    };
    const signature = new Uint8Array(
      await crypto.subtle.sign(
        'Ed25519',
        options.signingKey,
        Uint8Array.from(announcementSigningBytes(announcement)),
      ),
    );
    const signed: SignedAnnouncement = { ...announcement, signature: bytesToBase64(signature) };
    const packets = Array.from({ length: plan.packets }, (_, index) =>
      encodeMediaPacket({ segment: sequence, index, count: plan.packets, bytes: packetBytes(index) }),
    );
    if (whileDisconnected === 'hold' && !tracker.connected) {
      held.push({ announcement: signed, packets });
      segmentsHeld++;
      if (held.length > MAX_SEGMENTS_HELD_WHILE_DISCONNECTED) {
        held.shift();
        segmentsDropped++;
      }
      log('info', 'true source: tracker away; segment held', { sequence, held: held.length });
    } else {
      sendSegment(signed, packets);
      if (!tracker.connected) {
        segmentsFed++;
        log('info', 'true source: tracker away; segment announced over the mesh', {
          sequence,
          peers: current.openPeers,
        });
      }
    }
    segmentsPublished++;
    bytesPublished += bytes.length;
    log('debug', 'segment published', { sequence, bytes: bytes.length, packets: plan.packets });
  };

  const poll = async (): Promise<void> => {
    if (polling || state.stopped) return;
    polling = true;
    try {
      const response = await fetch(options.playlistUrl, {
        headers: { 'X-Chunkycast-Role': 'source' },
        signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      });
      if (!response.ok) throw new Error(`GET ${options.playlistUrl}: HTTP ${response.status}`);
      const playlist = parseMediaPlaylist(await response.text());
      // Start at the live edge: segments listed before we started are the origin's to serve.
      const fresh = playlist.segments.filter((s) =>
        lastSequence === null
          ? s === playlist.segments[playlist.segments.length - 1]
          : s.sequence > lastSequence,
      );
      for (const segment of fresh) {
        if (isStopped()) break;
        await publishSegment(segment.sequence, segment.uri, segment.durationMs);
        lastSequence = segment.sequence;
      }
      lastPlaylistError = '';
    } catch (e) {
      const message = e instanceof PlaylistError ? `bad playlist: ${e.message}` : String(e);
      // Log a failure once until it changes (the playlist may not exist yet while ffmpeg starts).
      if (message !== lastPlaylistError)
        log('warn', 'true source: cannot read the stream', { error: message });
      lastPlaylistError = message;
    } finally {
      polling = false;
    }
  };

  const pollTimer = setInterval(() => {
    void poll();
  }, PLAYLIST_POLL_MS);
  const reportTimer = setInterval(() => {
    tracker.send({
      type: 'report',
      report: {
        parents: new Array<null>(SLICES).fill(null),
        children: current.engine.currentSliceSources().map((s) => (s === null ? [] : [s])),
        meshBytes: 0,
        originBytes: bytesPublished,
        uploadBytes: retiredUploadBytes + current.counters.uploadBytes,
        stalls: 0,
        playing: true,
        // The current node's links (counted from its start: a rebuilt node starts a new baseline).
        connectivity: current.connectivity(),
      },
    });
  }, REPORT_INTERVAL_MS);
  void poll();

  return {
    get peerId() {
      return current.id;
    },
    stats: () => ({
      segmentsPublished,
      bytesPublished,
      egressBytes: retiredUploadBytes + current.counters.uploadBytes,
      sliceSources: current.engine.currentSliceSources(),
      lastSequence,
      tracker: tracker.stats(),
      segmentsFedWhileDisconnected: segmentsFed,
      announcementsSentToPeers: retiredAnnouncementsSent + current.counters.announcementsSent,
      segmentsHeldWhileDisconnected: segmentsHeld,
      segmentsDroppedWhileDisconnected: segmentsDropped,
      nodeRebuilds,
    }),
    stop: async () => {
      if (state.stopped) return;
      state.stopped = true;
      clearInterval(pollTimer);
      clearInterval(reportTimer);
      await current.stop(true);
      tracker.close();
    },
  };
}
