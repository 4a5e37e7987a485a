import type { EngineEvent, ProtocolConfig } from '@chunkycast/engine';
import { PACKET_HASH_HEX, decodeMediaPacket, type PeerReport, type ServerMessage } from '@chunkycast/wire';
import { MeshNode, type DataVerdict, type LogFn } from './mesh-node.js';
import { sha256 } from './sha256.js';
import { SegmentStore, bytesToHex, importPublicKey } from './segments.js';
import { TrackerClient, type WebSocketFactory } from './tracker-client.js';
import { MeshError, type MeshSessionOptions, type MeshStats, type SegmentProvider } from './types.js';

/**
 * Engine settings for a live HLS stream. A 2 s segment of a ~1 Mbit/s stream is one packet per
 * slice, so a slice carries a burst every segment rather than the thesis's steady packet flow
 * (L2929): "receiving" and "silent" must span a segment and its jitter, or every slice would look
 * idle between segments.
 */
export const LIVE_PROTOCOL: Partial<ProtocolConfig> = {
  receivingTimeoutMs: 5000,
  probeAfterSilenceMs: 4500,
};

/** Stream copies a viewer forwards by default: TL = M = 16 slices is one copy (the thesis's TL = 16). */
export const DEFAULT_TARGET_LOAD_SLICES = 16;
/** ML = 1.5·TL (the thesis's maximum load, chunkyspread.md). */
export const MAX_LOAD_FACTOR = 1.5;
/** Cap on load attributes: 64 stream copies is far beyond any browser's upload. */
const MAX_LOAD_LIMIT_SLICES = 1024;
const STATS_INTERVAL_MS = 1000;
/**
 * Of the loader's wait for a segment, the last this many ms go to completing a partial segment from
 * the origin: a loopback range request takes a few ms, a real one a round trip or two.
 */
export const ORIGIN_FILL_LEAD_MS = 800;
/** More missing runs than this: the whole segment from the origin is cheaper than many requests. */
const MAX_ORIGIN_FILL_REQUESTS = 4;
/** Hashing a filled segment takes well under this. */
const ORIGIN_FILL_VERIFY_MS = 1000;
const REPORT_INTERVAL_MS = 2000;

/**
 * Checks a media packet against its segment's signed announcement before the engine forwards it:
 * the first 16 bytes of its SHA-256 must equal the announced ones. A packet of a segment not yet
 * announced is held (the announcement usually arrives first; see MeshNode's HOLD_MAX_MS).
 */
export function inspectPacket(store: SegmentStore, payload: Uint8Array): DataVerdict {
  const decoded = decodeMediaPacket(payload);
  if (!decoded.ok) return 'reject';
  const { segment, index, count, bytes } = decoded.packet;
  const announcement = store.announcement(segment);
  if (announcement === null) return 'hold';
  if (count !== announcement.packets) return 'reject';
  const expected = announcement.packetHashes.slice(index * PACKET_HASH_HEX, (index + 1) * PACKET_HASH_HEX);
  return bytesToHex(sha256(bytes).subarray(0, PACKET_HASH_HEX / 2)) === expected ? 'accept' : 'reject';
}

/** Host hooks for non-browser runtimes and tests. */
export interface SessionHost {
  readonly createSocket?: WebSocketFactory;
  /** Overrides the RTCPeerConnection configuration (Node: node-datachannel's `bindAddress`). */
  readonly rtcConfig?: Record<string, unknown>;
  readonly log?: LogFn;
  /** Every engine event (parent changes, loops, …), for debugging and tests. */
  readonly onEvent?: (event: EngineEvent) => void;
  /** Every packet the engine delivers, before assembly (for tests). */
  readonly onDeliver?: (slice: number, seq: number, from: number) => void;
}

/** Resolves TL and ML from options: ML defaults to 1.5·TL; ML below TL lowers TL (ML = 0: receive only). */
export function resolveLoads(options: MeshSessionOptions): { targetLoad: number; maxLoad: number } {
  const check = (name: string, v: number | undefined): void => {
    if (v !== undefined && (!Number.isInteger(v) || v < 0 || v > MAX_LOAD_LIMIT_SLICES))
      throw new MeshError(
        'config',
        `${name} must be an integer 0‥${MAX_LOAD_LIMIT_SLICES} (slices), got ${v}`,
      );
  };
  check('targetLoad', options.targetLoad);
  check('maxLoad', options.maxLoad);
  let targetLoad = options.targetLoad ?? DEFAULT_TARGET_LOAD_SLICES;
  const maxLoad = options.maxLoad ?? Math.round(targetLoad * MAX_LOAD_FACTOR);
  if (maxLoad < targetLoad) targetLoad = maxLoad;
  return { targetLoad, maxLoad };
}

/**
 * One viewer's membership of a stream's mesh: the tracker connection, the engine over WebRTC, and
 * the verified segments it assembles. Implements what the hls.js loader needs (SegmentProvider).
 *
 * Events: 'ready', 'stats' (CustomEvent<MeshStats>, every second), 'peers' (CustomEvent<{peers}>
 * when the number of open channels changes), 'error' (CustomEvent<MeshError>).
 */
export class MeshSession extends EventTarget implements SegmentProvider {
  /** Resolves once joined; rejects (and an 'error' event fires) if the mesh cannot be used. */
  readonly ready: Promise<void>;
  private readonly targetLoad: number;
  private readonly maxLoad: number;
  private tracker: TrackerClient | null = null;
  private node: MeshNode | null = null;
  private store: SegmentStore | null = null;
  private closed = false;
  private readonly timers: ReturnType<typeof setInterval>[] = [];
  private peerId: number | null = null;
  private sourceId: number | null = null;
  private bytesFromOrigin = 0;
  private segmentsFromMesh = 0;
  private segmentsFromOrigin = 0;
  private segmentsCompletedFromOrigin = 0;
  private stalls = 0;
  private stallMs = 0;
  private lastPeers = -1;

  /** Joins the stream's mesh (asynchronously); errors arrive as 'error' events and reject `ready`. */
  static connect(options: MeshSessionOptions, host: SessionHost = {}): MeshSession {
    return new MeshSession(options, host);
  }

  private constructor(
    readonly options: MeshSessionOptions,
    private readonly host: SessionHost,
  ) {
    super();
    const loads = resolveLoads(options);
    this.targetLoad = loads.targetLoad;
    this.maxLoad = loads.maxLoad;
    this.ready = this.start();
    this.ready.catch((e: unknown) => {
      // A session that cannot start leaves nothing open behind it.
      this.tracker?.close();
      this.fail(e instanceof MeshError ? e : new MeshError('tracker', String(e)));
    });
  }

  private async start(): Promise<void> {
    const log = this.host.log ?? (() => undefined);
    const tracker = new TrackerClient({
      url: this.options.tracker,
      stream: this.options.stream,
      role: 'viewer',
      ...(this.host.createSocket === undefined ? {} : { createSocket: this.host.createSocket }),
    });
    this.tracker = tracker;
    const welcome = await tracker.join();
    // Peers may dial us (offers) while we still verify the welcome's announcements: keep every
    // message until the node exists, or the offer is lost and that peer's first messages with it.
    const early: ServerMessage[] = [];
    tracker.onMessage = (message) => early.push(message);
    if (this.closed) {
      tracker.close();
      return;
    }
    this.peerId = welcome.peerId;
    this.sourceId = welcome.sourceId;
    const keyText = this.options.publicKey ?? welcome.publicKey;
    let publicKey: CryptoKey | null = null;
    if (keyText !== null) {
      try {
        publicKey = await importPublicKey(keyText);
      } catch (e) {
        throw new MeshError('config', `the broadcaster's public key is not a raw Ed25519 key: ${String(e)}`);
      }
    } else {
      log('warn', 'no broadcaster public key: announcements are not signature-checked (hashes still are)');
    }
    const store = new SegmentStore({
      stream: this.options.stream,
      publicKey,
      now: () => performance.now(),
      onProblem: (message) => {
        this.dispatchEvent(new CustomEvent('error', { detail: new MeshError('verification', message) }));
      },
    });
    await store.seed(welcome.announcements);
    this.store = store;
    const seed = crypto.getRandomValues(new Uint32Array(1))[0] ?? 1;
    const node = new MeshNode({
      id: welcome.peerId,
      sourceId: welcome.sourceId,
      role: 'member',
      targetLoadSlices: this.targetLoad,
      maxLoadSlices: this.maxLoad,
      protocol: LIVE_PROTOCOL,
      seed,
      rtcConfig: this.host.rtcConfig ?? { iceServers: [...(this.options.iceServers ?? [])] },
      signal: (to, data) => {
        tracker.send({ type: 'signal', to, data });
      },
      requestBootstrap: (count) => {
        tracker.send({ type: 'bootstrap', count: Math.min(64, Math.max(1, count)) });
      },
      ...(this.host.onEvent === undefined ? {} : { onEvent: this.host.onEvent }),
      inspectData: (_slice, _seq, payload) => inspectPacket(store, payload),
      ...(this.options.faultInjection?.corruptForwardedData === true ? { corruptForwardedData: true } : {}),
      deliver: (slice, seq, payload, from) => {
        this.host.onDeliver?.(slice, seq, from);
        const decoded = decodeMediaPacket(payload);
        if (decoded.ok) store.addPacket(decoded.packet);
        else log('warn', 'undecodable media packet', { error: decoded.error.message });
      },
      log,
    });
    this.node = node;
    const dispatch = (message: ServerMessage): void => {
      switch (message.type) {
        case 'peers':
          node.bootstrap(message.peers);
          break;
        case 'signal':
          node.handleSignal(message.from, message.data);
          break;
        case 'announce':
          void store.announce(message.announcement).then(() => {
            node.recheckHeld();
          });
          break;
        case 'error':
          // Mostly 'unknownPeer' for a peer that left between bootstrap and dial: the connect
          // timeout reports it to the engine. Kept visible for debugging.
          log('debug', 'tracker error', { code: message.code, message: message.message });
          break;
        case 'welcome':
          break;
      }
    };
    tracker.onMessage = dispatch;
    tracker.onProblem = (error) => {
      this.dispatchEvent(new CustomEvent('error', { detail: error }));
    };
    node.start();
    for (const message of early.splice(0)) dispatch(message);
    this.timers.push(
      setInterval(() => {
        this.tick();
      }, STATS_INTERVAL_MS),
      setInterval(() => {
        this.report();
      }, REPORT_INTERVAL_MS),
    );
    this.dispatchEvent(new Event('ready'));
  }

  private fail(error: MeshError): void {
    this.dispatchEvent(new CustomEvent('error', { detail: error }));
  }

  private tick(): void {
    const stats = this.stats();
    this.dispatchEvent(new CustomEvent('stats', { detail: stats }));
    if (stats.peers !== this.lastPeers) {
      this.lastPeers = stats.peers;
      this.dispatchEvent(new CustomEvent('peers', { detail: { peers: stats.peers } }));
    }
  }

  private report(): void {
    const node = this.node;
    if (node === null || this.tracker === null) return;
    const report: PeerReport = {
      parents: node.engine.parents(),
      children: node.engine.children().map((c) => c.slice(0, 256)),
      meshBytes: this.store?.counters.bytesReceived ?? 0,
      originBytes: this.bytesFromOrigin,
      uploadBytes: node.counters.uploadBytes,
      stalls: this.stalls,
      playing: this.segmentsFromMesh + this.segmentsFromOrigin > 0,
    };
    this.tracker.send({ type: 'report', report });
  }

  // ─────────────────────────── SegmentProvider ───────────────────────────

  async waitForSegment(
    sequence: number,
    deadlineMs: number,
    signal?: AbortSignal,
    url?: string,
  ): Promise<Uint8Array | null> {
    const store = this.store;
    if (store === null || this.closed) return null;
    // Keep the last part of the budget for completing a partial segment from the origin.
    const fillAtMs = url === undefined ? deadlineMs : deadlineMs - ORIGIN_FILL_LEAD_MS;
    const bytes = await store.wait(sequence, fillAtMs - performance.now(), signal);
    if (bytes !== null || url === undefined || signal?.aborted === true) return bytes;
    return this.completeFromOrigin(sequence, url, signal);
  }

  /**
   * A segment the mesh delivered only in part: fetch exactly the missing packets' byte ranges from
   * the origin (HTTP Range), so a lost packet costs its own bytes and not the whole segment's. The
   * result is verified against the signed hash like any segment; null if it cannot be completed.
   */
  private async completeFromOrigin(
    sequence: number,
    url: string,
    signal?: AbortSignal,
  ): Promise<Uint8Array | null> {
    if (this.closed) return null;
    const store = this.store;
    const runs = store?.missingRanges(sequence) ?? null;
    if (store === null || runs === null || runs.length === 0 || runs.length > MAX_ORIGIN_FILL_REQUESTS)
      return null;
    const announcement = store.announcement(sequence);
    if (announcement === null) return null;
    const packetBytes = Math.max(1, Math.ceil(announcement.bytes / announcement.packets));
    try {
      await Promise.all(
        runs.map(async (run) => {
          const response = await fetch(url, {
            headers: { Range: `bytes=${run.start}-${run.end - 1}` },
            ...(signal === undefined ? {} : { signal }),
          });
          const body = new Uint8Array(await response.arrayBuffer());
          this.bytesFromOrigin += body.length;
          // 206 with exactly the range; a server that ignores Range sends the whole segment (200).
          const part =
            response.status === 206 && body.length === run.end - run.start
              ? body
              : response.status === 200 && body.length === announcement.bytes
                ? body.subarray(run.start, run.end)
                : null;
          if (part === null) throw new Error(`origin answered ${response.status} with ${body.length} bytes`);
          for (const index of run.indexes) {
            const offset = index * packetBytes - run.start;
            store.fillPacket(
              sequence,
              index,
              part.subarray(offset, Math.min(part.length, offset + packetBytes)),
            );
          }
        }),
      );
    } catch {
      return null; // the loader falls back to the whole segment from the origin
    }
    const bytes = await store.wait(sequence, ORIGIN_FILL_VERIFY_MS, signal);
    if (bytes !== null) this.segmentsCompletedFromOrigin++;
    return bytes;
  }

  expectsSegment(sequence: number): boolean {
    return !this.closed && this.store !== null && this.store.expects(sequence);
  }

  noteOriginSegment(bytes: number): void {
    this.bytesFromOrigin += bytes;
    this.segmentsFromOrigin++;
  }

  noteMeshSegment(_sequence: number): void {
    this.segmentsFromMesh++;
  }

  noteStall(ms: number): void {
    this.stalls++;
    this.stallMs += ms;
  }

  publishedAtMs(sequence: number): number | undefined {
    return this.store?.announcement(sequence)?.publishedAtMs;
  }

  // ─────────────────────────────── stats ───────────────────────────────

  stats(): MeshStats {
    const node = this.node;
    const parents = node?.engine.parents() ?? [];
    const children = node?.engine.children() ?? [];
    const bytesFromMesh = this.store?.counters.bytesReceived ?? 0;
    const total = bytesFromMesh + this.bytesFromOrigin;
    return {
      stream: this.options.stream,
      peerId: this.peerId,
      sourceId: this.sourceId,
      trackerConnected: this.tracker?.connected ?? false,
      peers: node?.openPeers ?? 0,
      bytesFromMesh,
      bytesFromOrigin: this.bytesFromOrigin,
      meshShare: total === 0 ? 0 : bytesFromMesh / total,
      segmentsFromMesh: this.segmentsFromMesh,
      segmentsFromOrigin: this.segmentsFromOrigin,
      segmentsCompletedFromOrigin: this.segmentsCompletedFromOrigin,
      uploadBytes: node?.counters.uploadBytes ?? 0,
      load: node?.engine.currentLoad ?? 0,
      targetLoad: this.targetLoad,
      maxLoad: this.maxLoad,
      slices: parents.map((parent, slice) => ({ slice, parent, children: children[slice] ?? [] })),
      stalls: this.stalls,
      stallMs: this.stallMs,
      verificationFailures:
        (this.store?.counters.hashMismatches ?? 0) + (this.store?.counters.badSignatures ?? 0),
      forgedPackets: node?.counters.forgedPackets ?? 0,
      peersCutOff: node?.counters.peersCutOff ?? 0,
    };
  }

  /** Leaves the mesh: children are told (graceful quit), then every connection closes. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.store?.close();
    const node = this.node;
    const tracker = this.tracker;
    void (async () => {
      await node?.stop(true);
      tracker?.close();
    })();
  }
}
