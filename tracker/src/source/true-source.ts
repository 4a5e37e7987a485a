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
import { parseMediaPlaylist, PlaylistError, type MediaPlaylist } from './playlist.js';
import { packetBytesFor, pushWhileWritten } from './progressive.js';

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

/**
 * When the source deals a segment (issue 14).
 * - 'while-written' (default): while the packager writes it, as the origin streams the segment in
 *   progress (`progressive.ts`); each packet is signed on its own and leaves as soon as it is full,
 *   and the segment is announced when it is complete. A segment the origin does not stream (a plain
 *   file server, or one listed before the source got to it) is cut whole once listed.
 * - 'when-listed': once the playlist lists it, whole (the behaviour before issue 14).
 * 'hold' mode (for viewers that predate mesh announcements) implies 'when-listed'.
 */
export type PushMode = 'while-written' | 'when-listed';

/** After a segment pushed while written ends, the playlist is read this often until it lists it. */
const LISTING_RETRY_MS = 25;
/** …at most this many times (1 s): the origin ends the stream only once the playlist lists it. */
const LISTING_ATTEMPTS = 40;
/** The next segment's file is looked for this often right after one ends (ffmpeg opens it at once)… */
const SUCCESSOR_RETRY_MS = 20;
/** …this many times (0.5 s) before the 250 ms playlist poll takes over again. */
const SUCCESSOR_RETRIES = 25;
/** Segments cut whole in a row, with pushing on, before the source stops trying for a while… */
const PUSH_MISSES_BEFORE_PAUSE = 3;
/** …this long (an origin restarted with streaming is found again within half a minute). */
const PUSH_PAUSE_MS = 30_000;

/**
 * The URI of the segment after `uri` as a numbering packager names it: its last run of digits plus
 * one, width kept (live12.ts → live13.ts, seg_0099.ts → seg_0100.ts); null without digits.
 */
export function successorUri(uri: string): string | null {
  // The digits of the file name, not of its directory or extension (v2/live9.m4s → v2/live10.m4s).
  const nameStart = uri.lastIndexOf('/') + 1;
  const dot = uri.lastIndexOf('.');
  const stemEnd = dot > nameStart ? dot : uri.length;
  const match = /(\d+)(\D*)$/.exec(uri.slice(nameStart, stemEnd));
  if (match === null) return null;
  const digits = match[1] ?? '';
  const next = String(Number(digits) + 1).padStart(digits.length, '0');
  const at = nameStart + match.index;
  return uri.slice(0, at) + next + (match[2] ?? '') + uri.slice(stemEnd);
}

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
  /** When segments are dealt (default 'while-written'; see PushMode). */
  readonly push?: PushMode;
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
  /** Segments dealt while the packager wrote them (the rest were cut whole once listed). */
  readonly segmentsPushedWhileWritten: number;
  /** Segments whose stream broke after packets had left: never announced, viewers take the origin's. */
  readonly segmentsAbandoned: number;
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

  /**
   * To the tracker (queued by the client while it is away) and, but for the legacy 'hold' mode, over
   * the mesh to every linked peer (the slice sources pass it on), on the same ordered channels as
   * the packets.
   */
  const announce = (announcement: SignedAnnouncement): void => {
    tracker.send({ type: 'announce', announcement });
    if (whileDisconnected === 'feed') current.broadcastAnnouncement(announcement);
  };

  const sendSegment = (announcement: SignedAnnouncement, packets: readonly Uint8Array[]): void => {
    // Announce first: viewers can then verify the segment the moment its last packet arrives.
    announce(announcement);
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
  const pushMode: PushMode = whileDisconnected === 'hold' ? 'when-listed' : (options.push ?? 'while-written');
  let segmentsPushed = 0;
  let segmentsAbandoned = 0;
  /** The stream's rate (bytes/s) over the last segment dealt: it sizes the next one's packets. */
  let recentBytesPerSecond: number | null = null;
  /** The newest playlist read (a segment pushed while written takes its duration from it). */
  let latestPlaylist: MediaPlaylist | null = null;
  /** A segment is being pushed while written: the poll publishes nothing meanwhile. */
  let pushing = false;
  /** Segments in a row cut whole although pushing was on (the origin did not stream them). */
  let segmentsNotPushedInARow = 0;
  /** Until then (performance.now() ms) no push is tried: the origin does not seem to stream. */
  let pushPausedUntilMs = 0;
  const pushAbort = new AbortController();
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

  const signAnnouncement = async (announcement: SegmentAnnouncement): Promise<SignedAnnouncement> => {
    const signature = new Uint8Array(
      await crypto.subtle.sign(
        'Ed25519',
        options.signingKey,
        Uint8Array.from(announcementSigningBytes(announcement)),
      ),
    );
    return { ...announcement, signature: bytesToBase64(signature) };
  };

  const noteRate = (bytes: number, durationMs: number): void => {
    if (durationMs > 0) recentBytesPerSecond = (bytes * 1000) / durationMs;
  };

  const publishSegment = async (sequence: number, uri: string, durationMs: number): Promise<void> => {
    const url = new URL(uri, options.playlistUrl).toString();
    const bytes = await fetchBytes(url);
    if (bytes.length > MAX_SEGMENT_BYTES) throw new Error(`segment ${sequence} is ${bytes.length} bytes`);
    noteRate(bytes.length, durationMs);
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
    const signed = await signAnnouncement(announcement);
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

  const readPlaylist = async (): Promise<MediaPlaylist> => {
    const response = await fetch(options.playlistUrl, {
      headers: { 'X-Chunkycast-Role': 'source' },
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    });
    if (!response.ok) throw new Error(`GET ${options.playlistUrl}: HTTP ${response.status}`);
    const playlist = parseMediaPlaylist(await response.text());
    latestPlaylist = playlist;
    return playlist;
  };

  /**
   * Pushes the segment after the newest listed one while the packager writes it. 'notGrowing': the
   * origin does not stream it (not started yet, or an origin that cannot); 'done': pushed and
   * announced, or abandoned after a broken stream; 'behind': the source is not at the live edge.
   */
  const pushNext = async (): Promise<'notGrowing' | 'done' | 'behind'> => {
    const last = latestPlaylist?.segments.at(-1);
    if (last === undefined || lastSequence === null || last.sequence !== lastSequence) return 'behind';
    const uri = successorUri(last.uri);
    if (uri === null) return 'notGrowing';
    const sequence = last.sequence + 1;
    const firstPacket = nextPacket;
    const packetBytes = packetBytesFor(recentBytesPerSecond);
    const outcome = await pushWhileWritten({
      url: new URL(uri, options.playlistUrl).toString(),
      stream,
      sequence,
      firstPacket,
      packetBytes,
      signingKey: options.signingKey,
      publish: (packet, packetNumber) => {
        current.publish(packet, packetNumber);
      },
      signal: pushAbort.signal,
    });
    if (outcome.kind === 'notGrowing') return 'notGrowing';
    if (outcome.kind === 'broken') {
      if (outcome.packets === 0) return 'notGrowing';
      // Packets left under these numbers: the next segment's follow them (no skip: with parity on,
      // the engine takes a skip only to the start of a stripe).
      nextPacket += outcome.packets;
      lastSequence = sequence;
      segmentsAbandoned++;
      log('warn', 'true source: the stream of a segment broke; viewers take it from the origin', {
        sequence,
        packets: outcome.packets,
        error: outcome.error,
      });
      return 'done';
    }
    nextPacket += outcome.packets;
    const finishedAtMs = Date.now();
    // The origin ended the stream because the packager listed the segment: its duration is there.
    let listed = latestPlaylist?.segments.find((x) => x.sequence === sequence);
    for (let attempt = 0; listed === undefined && attempt < LISTING_ATTEMPTS && !isStopped(); attempt++) {
      const playlist = await readPlaylist().catch(() => null);
      listed = playlist?.segments.find((x) => x.sequence === sequence);
      if (listed === undefined) await new Promise((resolve) => setTimeout(resolve, LISTING_RETRY_MS));
    }
    lastSequence = sequence;
    if (isStopped()) return 'done';
    if (listed?.uri !== uri) {
      segmentsAbandoned++;
      log('warn', 'true source: a segment pushed while written is not listed as expected; not announced', {
        sequence,
        uri,
        listed: listed?.uri ?? null,
      });
      return 'done';
    }
    const signed = await signAnnouncement({
      stream,
      sequence,
      uri,
      bytes: outcome.bytes,
      packets: outcome.packets,
      firstPacket,
      sha256: outcome.sha256,
      packetHashes: outcome.packetHashes,
      durationMs: listed.durationMs,
      publishedAtMs: finishedAtMs,
      packetBytes,
    });
    announce(signed);
    noteRate(outcome.bytes, listed.durationMs);
    segmentsPushed++;
    segmentsNotPushedInARow = 0;
    segmentsPublished++;
    bytesPublished += outcome.bytes;
    log('debug', 'segment pushed while written', {
      sequence,
      bytes: outcome.bytes,
      packets: outcome.packets,
      packetBytes,
      streamedMs: Math.round(outcome.streamedMs),
    });
    return 'done';
  };

  /** Pushes segment after segment while the origin streams them; the poll takes over otherwise. */
  const startPushing = (): void => {
    if (pushing || pushMode !== 'while-written' || isStopped() || performance.now() < pushPausedUntilMs)
      return;
    pushing = true;
    void (async () => {
      try {
        let misses = 0;
        while (!isStopped() && misses <= SUCCESSOR_RETRIES) {
          const result = await pushNext();
          if (result === 'behind') break;
          if (result === 'done') misses = 0;
          else {
            // The packager opens the next file right after listing the last: look again soon.
            misses++;
            await new Promise((resolve) => setTimeout(resolve, SUCCESSOR_RETRY_MS));
          }
        }
      } catch (e) {
        log('warn', 'true source: pushing while written failed', { error: String(e) });
      } finally {
        pushing = false;
      }
    })();
  };

  const poll = async (): Promise<void> => {
    if (polling || state.stopped) return;
    polling = true;
    try {
      const playlist = await readPlaylist();
      // A segment being pushed while written is dealt by startPushing, in order.
      if (pushing) return;
      // Start at the live edge: segments listed before we started are the origin's to serve.
      const fresh = playlist.segments.filter((s) =>
        lastSequence === null
          ? s === playlist.segments[playlist.segments.length - 1]
          : s.sequence > lastSequence,
      );
      for (const segment of fresh) {
        if (isStopped()) break;
        await publishSegment(segment.sequence, segment.uri, segment.durationMs);
        // A segment cut whole while pushing was on: the origin did not stream it in progress (a
        // plain file server, or a packager whose next name cannot be guessed). After a few in a
        // row, stop asking for a while rather than asking 40 times a second for nothing.
        if (lastSequence !== null && pushMode === 'while-written') segmentsNotPushedInARow++;
        lastSequence = segment.sequence;
      }
      if (segmentsNotPushedInARow >= PUSH_MISSES_BEFORE_PAUSE) {
        segmentsNotPushedInARow = 0;
        pushPausedUntilMs = performance.now() + PUSH_PAUSE_MS;
        log(
          'info',
          'true source: the origin does not stream segments in progress; cutting them whole for a while',
          {
            pauseMs: PUSH_PAUSE_MS,
          },
        );
      }
      lastPlaylistError = '';
      startPushing();
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
      segmentsPushedWhileWritten: segmentsPushed,
      segmentsAbandoned,
    }),
    stop: async () => {
      if (state.stopped) return;
      state.stopped = true;
      pushAbort.abort();
      clearInterval(pollTimer);
      clearInterval(reportTimer);
      await current.stop(true);
      tracker.close();
    },
  };
}
