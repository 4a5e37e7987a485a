/**
 * The Cluster backend over Redis (REDIS_URL): several tracker processes share ids, samples, relays
 * and announcements. Needs Redis ≥ 6.2 (HRANDFIELD, SET … GET), standalone or a primary: the Lua
 * scripts below touch keys they derive themselves, which Redis Cluster's slot routing forbids.
 *
 * The key layout, the channel envelopes and the Lua scripts are in redis-layout.ts.
 *
 * One round trip per join (claim + recent list, pipelined), leave, sample, relay and announcement.
 *
 * While Redis is unreachable the process serves its own members only: joins get ids checked against
 * local members only, samples and recent announcements are local, relays to other processes answer
 * `unavailable`, announcements reach local viewers only. On reconnect the process restates all its
 * members; one whose id another process took meanwhile is reported through onMemberLost.
 * A resume ticket presented on another process than the holder's displaces the holder just as on
 * one process: the claim publishes a "lost" envelope to the holder's process, which drops it.
 */
import { randomInt } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import {
  decodeServerMessage,
  encodeTrackerMessage,
  MAX_BOOTSTRAP_PEERS,
  MAX_RECENT_ANNOUNCEMENTS,
  STREAM_ID_PATTERN,
  type PeerId,
  type PeerRole,
  type ServerMessage,
  type SignedAnnouncement,
} from '@chunkycast/wire';
import { silentLogger, type Logger } from './log.js';
import {
  checkJoinRequest,
  checkPeerId,
  checkStream,
  clampSampleCount,
  ClusterStartError,
  defaultDrawPeerId,
  newNodeId,
  NODE_ID_PATTERN,
  resolveClusterTiming,
  runJoin,
  type ClaimOutcome,
  type Cluster,
  type ClusterHandlers,
  type ClusterStats,
  type ClusterTiming,
  type DeliverResult,
  type JoinRequest,
  type JoinResult,
  type MemberLossReason,
} from './cluster.js';
import {
  ANNOUNCE_TAG,
  DEFAULT_KEY_PREFIX,
  indexEntry,
  KEY_PREFIX_PATTERN,
  Keys,
  LOST_TAG,
  MAX_ENVELOPE_CHARS,
  memberValue,
  parseIndexEntry,
  parseMemberValue,
  parsePeerIdField,
  RELAY_TAG,
  SCRIPTS,
  type ClaimMode,
  type ScriptArg,
} from './redis-layout.js';

export { DEFAULT_KEY_PREFIX, KEY_PREFIX_PATTERN } from './redis-layout.js';

/** HRANDFIELD and SET … GET arrived in Redis 6.2. */
const MIN_REDIS = [6, 2] as const;
const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
/** A command taking longer than this counts as failed: a join must not hang on a sick Redis. */
const DEFAULT_COMMAND_TIMEOUT_MS = 2_000;
const DEFAULT_RECONNECT_DELAY_MAX_MS = 2_000;
/** Dead nodes and their members one heartbeat's sweep handles at most (the rest wait a beat). */
const SWEEP_MAX_NODES = 16;
const SWEEP_MAX_ENTRIES = 1_000;
/**
 * A sample draws this many times the members wanted, plus two (the source and the asker), since
 * those two and unreadable entries are left out afterwards.
 */
const SAMPLE_OVERDRAW = 2;
/** Node records read per heartbeat for the global counts. */
const STATS_MAX_NODES = 1_024;

type StoreOperation =
  | 'join'
  | 'leave'
  | 'close'
  | 'heartbeat'
  | 'resync'
  | 'sourcePresent'
  | 'sample'
  | 'relay'
  | 'announce'
  | 'recent';
const WRITES: ReadonlySet<StoreOperation> = new Set(['join', 'leave', 'close', 'heartbeat', 'resync']);

/** What this process knows of each of its members: enough to restate it after an outage. */
interface LocalMember {
  readonly role: PeerRole;
  readonly ticketExpiresAtSec: number;
}

/** Splits off `count` '|'-separated header fields; the rest (a JSON frame) may contain '|'. */
function splitHeader(text: string, count: number): string[] | null {
  const parts: string[] = [];
  let start = 0;
  for (let i = 0; i < count; i++) {
    const bar = text.indexOf('|', start);
    if (bar < 0) return null;
    parts.push(text.slice(start, bar));
    start = bar + 1;
  }
  parts.push(text.slice(start));
  return parts;
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The URL without its password, for messages and logs. */
function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable URL)';
  }
}

/** [error, result] pairs of a pipeline, failing as a whole if any command failed. */
function results(replies: [Error | null, unknown][] | null): unknown[] {
  if (replies === null) throw new Error('pipeline was discarded');
  return replies.map(([error, value]) => {
    if (error !== null) throw error;
    return value;
  });
}

// ─────────────────────────────── the backend ───────────────────────────────

export interface RedisClusterOptions {
  /** redis://[user:password@]host:port[/db] (or rediss://). */
  readonly url: string;
  readonly handlers: ClusterHandlers;
  /** Prepended to every key and channel, so several deployments can share one Redis. */
  readonly keyPrefix?: string;
  readonly timing?: Partial<ClusterTiming>;
  readonly log?: Logger;
  /** Random by default; 16 lower-case hex digits. */
  readonly nodeId?: string;
  /** Random viewer ids; injectable so tests can force collisions. */
  readonly drawPeerId?: () => number;
  /** How long start() waits for Redis before failing. */
  readonly connectTimeoutMs?: number;
  readonly commandTimeoutMs?: number;
  /** Reconnect attempts back off linearly (100 ms per attempt) up to this. */
  readonly reconnectDelayMaxMs?: number;
}

/** Connects, checks Redis, subscribes and writes the first heartbeat; ClusterStartError if it cannot. */
export async function connectRedisCluster(options: RedisClusterOptions): Promise<RedisCluster> {
  const cluster = new RedisCluster(options);
  await cluster.start();
  return cluster;
}

export class RedisCluster implements Cluster {
  readonly nodeId: string;
  private readonly handlers: ClusterHandlers;
  private readonly keys: Keys;
  private readonly timing: ClusterTiming;
  private readonly log: Logger;
  private readonly draw: () => number;
  private readonly url: string;
  /** Commands. */
  private readonly redis: Redis;
  /** Subscriptions (a subscribed connection can run nothing else). */
  private readonly subscriber: Redis;
  /** This process's members: the truth the shared store is resynchronised from. */
  private readonly local = new Map<string, Map<PeerId, LocalMember>>();
  /** Recent announcements of local streams, served while Redis is unreachable. */
  private readonly recentCache = new Map<string, SignedAnnouncement[]>();
  private readonly counters = {
    relaysOut: 0,
    relaysIn: 0,
    announcementsOut: 0,
    announcementsIn: 0,
    badEntries: 0,
    membersLost: 0,
    storeErrors: 0,
  };
  private global: { members: number; nodes: number } | null = null;
  private started = false;
  private closed = false;
  private heartbeat: NodeJS.Timeout | null = null;
  private beating = false;
  private beats = 0;
  /** Set when the shared store may disagree with `local` (an outage, a failed write). */
  private needsResync = false;
  private resyncing: Promise<void> | null = null;
  private closing: Promise<void> | null = null;
  private wasReady = { commands: false, subscriber: false };
  /** ioredis reports a refused connection as "Connection is closed"; the socket error says why. */
  private lastConnectionError: string | null = null;

  constructor(options: RedisClusterOptions) {
    const prefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
    if (!KEY_PREFIX_PATTERN.test(prefix))
      throw new TypeError(`Redis key prefix must match ${String(KEY_PREFIX_PATTERN)}, got ${prefix}`);
    this.nodeId = options.nodeId ?? newNodeId();
    if (!NODE_ID_PATTERN.test(this.nodeId)) throw new TypeError(`bad node id ${this.nodeId}`);
    this.handlers = options.handlers;
    this.keys = new Keys(prefix);
    this.timing = resolveClusterTiming(options.timing);
    this.log = options.log ?? silentLogger;
    this.draw = options.drawPeerId ?? defaultDrawPeerId;
    this.url = redactUrl(options.url);
    const reconnectDelayMaxMs = options.reconnectDelayMaxMs ?? DEFAULT_RECONNECT_DELAY_MAX_MS;
    const redisOptions: RedisOptions = {
      lazyConnect: true,
      connectTimeout: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      commandTimeout: options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
      // Fail fast instead of queueing: every caller has a local-only fallback, and a queued join
      // or relay would only answer late.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      // No retries while starting (a wrong URL must fail start()); after that, keep reconnecting.
      retryStrategy: (attempt) =>
        this.started && !this.closed ? Math.min(attempt * 100, reconnectDelayMaxMs) : null,
      scripts: SCRIPTS,
    };
    this.redis = new Redis(options.url, { ...redisOptions, connectionName: `chunkycast-${this.nodeId}` });
    this.subscriber = new Redis(options.url, {
      ...redisOptions,
      connectionName: `chunkycast-${this.nodeId}-sub`,
    });
    this.watch(this.redis, 'commands');
    this.watch(this.subscriber, 'subscriber');
    this.subscriber.on('message', (channel: string, text: string) => {
      this.onChannelMessage(channel, text);
    });
  }

  /** Called once by connectRedisCluster. */
  async start(): Promise<void> {
    try {
      await Promise.all([this.redis.connect(), this.subscriber.connect()]);
      const info = await this.redis.info('server');
      const version = /redis_version:(\d+)\.(\d+)/.exec(info);
      const major = Number(version?.[1] ?? 0);
      const minor = Number(version?.[2] ?? 0);
      if (major < MIN_REDIS[0] || (major === MIN_REDIS[0] && minor < MIN_REDIS[1]))
        throw new Error(`Redis ${version?.[0] ?? 'of unknown version'} is too old; 6.2 or newer is needed`);
      await this.subscriber.subscribe(this.keys.relay(this.nodeId), this.keys.announceChannel);
      await this.beat();
    } catch (e) {
      this.closed = true;
      this.redis.disconnect();
      this.subscriber.disconnect();
      const cause = this.lastConnectionError === null ? '' : ` (${this.lastConnectionError})`;
      throw new ClusterStartError(`cannot use Redis at ${this.url}: ${errorMessage(e)}${cause}`);
    }
    this.started = true;
    this.heartbeat = setInterval(() => {
      this.tick();
    }, this.timing.heartbeatMs);
    this.heartbeat.unref();
    this.log('info', 'cluster node started', { nodeId: this.nodeId, redis: this.url });
  }

  private get connected(): boolean {
    return this.redis.status === 'ready';
  }

  async addMember(request: JoinRequest): Promise<JoinResult> {
    checkJoinRequest(request);
    const { stream, role, ticketExpiresAtSec } = request;
    const member: LocalMember = { role, ticketExpiresAtSec };
    // Written by the claims below: the recent list read with the last claim, or whether one went local.
    const state: { recent: unknown; offline: boolean } = { recent: null, offline: false };
    const claim = async (peerId: PeerId, takeoverUpToSec: number | null): Promise<ClaimOutcome> => {
      if (!state.offline && this.connected) {
        const mode = takeoverUpToSec === null ? 'fresh' : 'resume';
        try {
          const replies = results(
            await this.redis
              .pipeline()
              .chunkycastClaim(...this.claimArgs(stream, peerId, member, mode, takeoverUpToSec ?? 0))
              .lrange(this.keys.recent(stream), 0, -1)
              .exec(),
          );
          state.recent = replies[1];
          if (replies[0] === 1) return 'claimed';
          if (replies[0] === 2) return 'displaced';
          if (replies[0] === 0) return 'taken';
          throw new Error(`claim answered ${String(replies[0])}`);
        } catch (e) {
          this.storeFailed('join', e);
        }
      }
      // Unique among this process's members only, until the resync restates it.
      state.offline = true;
      this.needsResync = true;
      const holder = this.local.get(stream)?.get(peerId);
      if (holder === undefined) return 'claimed';
      return takeoverUpToSec === null || holder.ticketExpiresAtSec > takeoverUpToSec ? 'taken' : 'displaced';
    };
    const result = await runJoin(
      request,
      this.draw,
      (peerId) => this.local.get(stream)?.has(peerId) === true,
      claim,
    );
    if (!result.ok) return result;
    this.remember(stream, result.peerId, member);
    const announcements = state.offline
      ? (this.recentCache.get(stream)?.slice() ?? [])
      : this.readRecent(stream, state.recent);
    return { ...result, announcements };
  }

  async removeMember(stream: string, peerId: PeerId): Promise<void> {
    if (!this.forget(stream, peerId)) return;
    if (!this.connected) {
      this.needsResync = true;
      return;
    }
    try {
      await this.redis.chunkycastRelease(...this.releaseArgs(stream, peerId));
    } catch (e) {
      this.storeFailed('leave', e);
    }
  }

  async sourcePresent(stream: string, sourceId: PeerId): Promise<boolean> {
    checkStream(stream);
    checkPeerId('sourceId', sourceId);
    if (this.local.get(stream)?.get(sourceId)?.role === 'source') return true;
    if (!this.connected) return false;
    try {
      const entry = await this.redis.chunkycastOwner(
        this.keys.members(stream),
        String(sourceId),
        this.keys.nodePrefix,
      );
      return parseMemberValue(entry)?.role === 'source';
    } catch (e) {
      this.storeFailed('sourcePresent', e);
      return false;
    }
  }

  async sampleViewers(stream: string, count: number, exclude: PeerId | null): Promise<PeerId[]> {
    checkStream(stream);
    const want = clampSampleCount(count);
    if (want === 0) return [];
    if (!this.connected) return this.sampleLocally(stream, want, exclude);
    let raw: unknown;
    try {
      // Twice as many as wanted: the source, the asker and unreadable entries are left out afterwards.
      raw = await this.redis.chunkycastSample(
        this.keys.members(stream),
        this.keys.recent(stream),
        Math.min(SAMPLE_OVERDRAW * want + 2, SAMPLE_OVERDRAW * MAX_BOOTSTRAP_PEERS + 2),
        this.keys.nodePrefix,
      );
    } catch (e) {
      this.storeFailed('sample', e);
      return this.sampleLocally(stream, want, exclude);
    }
    if (!Array.isArray(raw)) {
      this.counters.badEntries++;
      return [];
    }
    const peers: PeerId[] = [];
    for (let i = 0; i + 1 < raw.length && peers.length < want; i += 2) {
      const peerId = parsePeerIdField(raw[i]);
      const entry = parseMemberValue(raw[i + 1]);
      if (peerId === null || entry === null) {
        this.counters.badEntries++;
        continue;
      }
      if (entry.role === 'viewer' && peerId !== exclude) peers.push(peerId);
    }
    return peers;
  }

  async deliver(stream: string, to: PeerId, message: ServerMessage): Promise<DeliverResult> {
    checkStream(stream);
    checkPeerId('to', to);
    if (!this.connected) return 'unavailable';
    const envelope = [RELAY_TAG, this.nodeId, stream, to, encodeTrackerMessage(message)].join('|');
    let code: unknown;
    try {
      code = await this.redis.chunkycastRoute(
        this.keys.members(stream),
        String(to),
        this.keys.nodePrefix,
        this.keys.relayPrefix,
        this.nodeId,
        envelope,
      );
    } catch (e) {
      this.storeFailed('relay', e);
      return 'unavailable';
    }
    switch (code) {
      case 1:
        this.counters.relaysOut++;
        return 'delivered';
      case 0:
      case -2:
        return 'unknownPeer';
      case -3:
        return 'unavailable';
      default:
        this.counters.badEntries++;
        return 'unknownPeer';
    }
  }

  async publishAnnouncement(announcement: SignedAnnouncement): Promise<void> {
    const stream = announcement.stream;
    checkStream(stream);
    this.cacheAnnouncement(announcement);
    if (!this.connected) return;
    const frame = encodeTrackerMessage({ type: 'announce', announcement });
    const recent = this.keys.recent(stream);
    try {
      results(
        await this.redis
          .multi()
          .rpush(recent, frame)
          .ltrim(recent, -MAX_RECENT_ANNOUNCEMENTS, -1)
          .pexpire(recent, this.timing.staleKeyTtlMs)
          .publish(this.keys.announceChannel, [ANNOUNCE_TAG, this.nodeId, frame].join('|'))
          .exec(),
      );
      this.counters.announcementsOut++;
    } catch (e) {
      this.storeFailed('announce', e);
    }
  }

  async recentAnnouncements(stream: string): Promise<readonly SignedAnnouncement[]> {
    checkStream(stream);
    if (!this.connected) return this.recentCache.get(stream)?.slice() ?? [];
    try {
      return this.readRecent(stream, await this.redis.lrange(this.keys.recent(stream), 0, -1));
    } catch (e) {
      this.storeFailed('recent', e);
      return this.recentCache.get(stream)?.slice() ?? [];
    }
  }

  stats(): ClusterStats {
    let localMembers = 0;
    for (const members of this.local.values()) localMembers += members.size;
    return {
      backend: 'redis',
      nodeId: this.nodeId,
      connected: this.connected,
      localMembers,
      localSwarms: this.local.size,
      globalMembers: this.global?.members ?? null,
      liveNodes: this.global?.nodes ?? null,
      ...this.counters,
    };
  }

  close(): Promise<void> {
    return (this.closing ??= this.shutDown());
  }

  /** Stops heartbeats and drops the connections without cleaning up, as a crash would (tests). */
  abandon(): void {
    this.stop();
    this.redis.disconnect();
    this.subscriber.disconnect();
  }

  private async shutDown(): Promise<void> {
    const wasConnected = this.started && !this.closed && this.connected;
    this.stop();
    if (wasConnected) {
      const pipeline = this.redis.pipeline();
      for (const [stream, members] of this.local)
        for (const peerId of members.keys()) pipeline.chunkycastRelease(...this.releaseArgs(stream, peerId));
      pipeline.del(this.keys.node(this.nodeId), this.keys.index(this.nodeId));
      pipeline.srem(this.keys.nodes, this.nodeId);
      try {
        results(await pipeline.exec());
      } catch (e) {
        // The sweep of other nodes removes what is left once the heartbeat expires.
        this.storeFailed('close', e);
      }
    }
    this.local.clear();
    this.recentCache.clear();
    await Promise.all([quit(this.redis), quit(this.subscriber)]);
    this.log('info', 'cluster node closed', { nodeId: this.nodeId });
  }

  private stop(): void {
    this.closed = true;
    if (this.heartbeat !== null) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }

  // ───────────── local bookkeeping ─────────────

  private remember(stream: string, peerId: PeerId, member: LocalMember): void {
    let members = this.local.get(stream);
    if (members === undefined) this.local.set(stream, (members = new Map<PeerId, LocalMember>()));
    members.set(peerId, member);
  }

  /** Forgets a member; true if it was here. The stream's cached announcements go with its last one. */
  private forget(stream: string, peerId: PeerId): boolean {
    const members = this.local.get(stream);
    if (members?.delete(peerId) !== true) return false;
    if (members.size === 0) {
      this.local.delete(stream);
      this.recentCache.delete(stream);
    }
    return true;
  }

  private sampleLocally(stream: string, want: number, exclude: PeerId | null): PeerId[] {
    const viewers: PeerId[] = [];
    for (const [peerId, member] of this.local.get(stream) ?? [])
      if (member.role === 'viewer' && peerId !== exclude) viewers.push(peerId);
    // Partial Fisher–Yates: the first `want` places get a uniform random choice.
    const take = Math.min(want, viewers.length);
    for (let i = 0; i < take; i++) {
      const j = i + randomInt(viewers.length - i);
      const picked = viewers[j] ?? 0;
      viewers[j] = viewers[i] ?? 0;
      viewers[i] = picked;
    }
    return viewers.slice(0, take);
  }

  private cacheAnnouncement(announcement: SignedAnnouncement): void {
    const stream = announcement.stream;
    if (!this.local.has(stream)) return;
    let list = this.recentCache.get(stream);
    if (list === undefined) this.recentCache.set(stream, (list = []));
    list.push(announcement);
    if (list.length > MAX_RECENT_ANNOUNCEMENTS) list.shift();
  }

  /** The stored `announce` frames, validated like any frame from the network; bad ones are dropped. */
  private readRecent(stream: string, raw: unknown): SignedAnnouncement[] {
    if (!Array.isArray(raw)) {
      this.counters.badEntries++;
      return [];
    }
    const announcements: SignedAnnouncement[] = [];
    for (const frame of raw.slice(-MAX_RECENT_ANNOUNCEMENTS)) {
      const decoded = typeof frame === 'string' ? decodeServerMessage(frame) : null;
      if (
        decoded?.ok === true &&
        decoded.message.type === 'announce' &&
        decoded.message.announcement.stream === stream
      )
        announcements.push(decoded.message.announcement);
      else this.counters.badEntries++;
    }
    return announcements;
  }

  private claimArgs(
    stream: string,
    peerId: PeerId,
    member: LocalMember,
    mode: ClaimMode,
    takeoverUpToSec: number,
  ): ScriptArg[] {
    return [
      this.keys.members(stream),
      this.keys.index(this.nodeId),
      String(peerId),
      memberValue(member.role, this.nodeId, member.ticketExpiresAtSec),
      this.keys.nodePrefix,
      indexEntry(stream, peerId),
      this.timing.staleKeyTtlMs,
      mode,
      takeoverUpToSec,
      this.keys.relayPrefix,
      this.nodeId,
      [LOST_TAG, this.nodeId, stream, peerId].join('|'),
    ];
  }

  private releaseArgs(stream: string, peerId: PeerId): ScriptArg[] {
    return [
      this.keys.members(stream),
      this.keys.index(this.nodeId),
      this.keys.recent(stream),
      String(peerId),
      this.nodeId,
      indexEntry(stream, peerId),
    ];
  }

  /**
   * A failed command: counted and logged; after a failed write the store may disagree with `local`,
   * so the next heartbeat restates (a failed read needs nothing: the caller fell back to local data).
   */
  private storeFailed(operation: StoreOperation, e: unknown): void {
    this.counters.storeErrors++;
    if (WRITES.has(operation)) this.needsResync = true;
    this.log('warn', 'Redis command failed; this operation fell back to this process only', {
      operation,
      error: errorMessage(e),
    });
  }

  // ───────────── heartbeat, sweep, resync ─────────────

  private tick(): void {
    if (this.beating || this.closed || !this.connected) return;
    this.beating = true;
    const work = this.needsResync ? this.resync() : this.beat();
    work
      .catch((e: unknown) => {
        this.storeFailed('heartbeat', e);
      })
      .finally(() => {
        this.beating = false;
      });
  }

  private nodeRecord(): string {
    const { localMembers, localSwarms } = this.stats();
    return JSON.stringify({ members: localMembers, swarms: localSwarms });
  }

  /** Restates liveness, refreshes the TTLs of what this node uses, sweeps dead nodes, reads counts. */
  private async beat(): Promise<void> {
    const pipeline = this.redis
      .pipeline()
      .set(this.keys.node(this.nodeId), this.nodeRecord(), 'PX', this.timing.nodeTtlMs, 'GET')
      .sadd(this.keys.nodes, this.nodeId)
      .pexpire(this.keys.nodes, this.timing.staleKeyTtlMs)
      .pexpire(this.keys.index(this.nodeId), this.timing.staleKeyTtlMs);
    for (const stream of this.local.keys())
      pipeline.pexpire(this.keys.members(stream), this.timing.staleKeyTtlMs);
    pipeline
      .chunkycastSweep(
        this.keys.nodes,
        this.keys.nodePrefix,
        this.keys.indexPrefix,
        this.keys.membersPrefix,
        this.keys.recentPrefix,
        SWEEP_MAX_NODES,
        SWEEP_MAX_ENTRIES,
      )
      .srandmember(this.keys.nodes, STATS_MAX_NODES);
    const replies = results(await pipeline.exec());
    const previous = replies[0];
    const swept = replies[replies.length - 2];
    const nodes = replies[replies.length - 1];
    if (typeof swept === 'number' && swept > 0)
      this.log('info', 'swept members of dead tracker processes', { swept });
    if (previous === null && this.beats > 0) {
      // Our record had expired: others may have swept or taken our members. Restate them.
      this.log('warn', 'this process was presumed dead by the cluster; restating its members', {
        nodeId: this.nodeId,
      });
      this.needsResync = true;
    }
    this.beats++;
    await this.readGlobalCounts(nodes);
  }

  private async readGlobalCounts(nodes: unknown): Promise<void> {
    if (!Array.isArray(nodes)) {
      this.counters.badEntries++;
      return;
    }
    const ids = nodes.filter((id): id is string => typeof id === 'string' && NODE_ID_PATTERN.test(id));
    this.counters.badEntries += nodes.length - ids.length;
    if (ids.length === 0) return;
    const records = await this.redis.mget(ids.map((id) => this.keys.node(id)));
    let members = 0;
    let live = 0;
    for (const record of records) {
      if (record === null) continue;
      const parsed = parseNodeRecord(record);
      if (parsed === null) {
        this.counters.badEntries++;
        continue;
      }
      live++;
      members += parsed.members;
    }
    this.global = { members, nodes: live };
  }

  /**
   * Makes the shared store agree with `local` again: heartbeat first (so this node counts as alive),
   * release what it still lists for this node but `local` no longer holds, restate every local
   * member. A member whose id another live node took meanwhile is lost (onMemberLost). Commands run
   * in order on one connection, so joins and leaves issued meanwhile land after these.
   */
  private resync(): Promise<void> {
    this.resyncing ??= this.restate().finally(() => {
      this.resyncing = null;
    });
    return this.resyncing;
  }

  private async restate(): Promise<void> {
    this.needsResync = false;
    try {
      const listed = await this.redis.smembers(this.keys.index(this.nodeId));
      const pipeline = this.redis
        .pipeline()
        .set(this.keys.node(this.nodeId), this.nodeRecord(), 'PX', this.timing.nodeTtlMs)
        .sadd(this.keys.nodes, this.nodeId)
        .pexpire(this.keys.nodes, this.timing.staleKeyTtlMs);
      for (const entry of listed) {
        const parsed = parseIndexEntry(entry);
        if (parsed === null) {
          this.counters.badEntries++;
          pipeline.srem(this.keys.index(this.nodeId), entry);
        } else if (this.local.get(parsed.stream)?.has(parsed.peerId) !== true)
          pipeline.chunkycastRelease(...this.releaseArgs(parsed.stream, parsed.peerId));
      }
      const restated: { stream: string; peerId: PeerId }[] = [];
      for (const [stream, members] of this.local)
        for (const [peerId, member] of members) {
          pipeline.chunkycastClaim(...this.claimArgs(stream, peerId, member, 'restate', 0));
          restated.push({ stream, peerId });
        }
      const replies = results(await pipeline.exec());
      const claims = replies.slice(replies.length - restated.length);
      restated.forEach(({ stream, peerId }, i) => {
        if (claims[i] === 1 || this.local.get(stream)?.has(peerId) !== true) return;
        this.log('warn', 'another tracker process took a member id while this one was cut off', {
          stream,
          peerId,
        });
        this.lose(stream, peerId, 'conflict');
      });
      this.beats++;
      this.log('info', 'cluster membership restated', { nodeId: this.nodeId, members: restated.length });
    } catch (e) {
      this.storeFailed('resync', e);
    }
  }

  // ───────────── connections and channels ─────────────

  private watch(connection: Redis, name: 'commands' | 'subscriber'): void {
    connection.on('error', (e: unknown) => {
      // ioredis reports every failed reconnect attempt; the state changes below are what matter.
      this.lastConnectionError = errorMessage(e);
      this.log('debug', 'Redis connection error', { connection: name, error: this.lastConnectionError });
    });
    connection.on('close', () => {
      if (!this.started || this.closed || !this.wasReady[name]) return;
      this.wasReady[name] = false;
      this.log(
        'warn',
        name === 'commands'
          ? 'Redis connection lost: serving this process only; relays to other processes answer unknownPeer'
          : 'Redis subscription lost: relays and announcements from other processes are missed until it is back',
        { redis: this.url },
      );
    });
    connection.on('ready', () => {
      const reconnected = this.started && !this.wasReady[name];
      this.wasReady[name] = true;
      if (!reconnected || this.closed) return;
      this.log('info', 'Redis connection restored', { connection: name, redis: this.url });
      // Restate either way: a lost-membership notice may have been missed while unsubscribed.
      this.needsResync = true;
      if (this.connected) void this.resync();
    });
  }

  private onChannelMessage(channel: string, text: string): void {
    if (text.length > MAX_ENVELOPE_CHARS) {
      this.counters.badEntries++;
      return;
    }
    if (channel === this.keys.announceChannel) this.onAnnouncement(text);
    else if (channel === this.keys.relay(this.nodeId)) {
      if (text.startsWith(`${LOST_TAG}|`)) this.onLost(text);
      else this.onRelay(text);
    } else this.counters.badEntries++;
  }

  private onRelay(text: string): void {
    const parts = splitHeader(text, 4);
    const [tag, from, stream, to, frame] = parts ?? [];
    const peerId = parsePeerIdField(to);
    const decoded = frame === undefined ? null : decodeServerMessage(frame);
    if (
      tag !== RELAY_TAG ||
      from === undefined ||
      !NODE_ID_PATTERN.test(from) ||
      stream === undefined ||
      !STREAM_ID_PATTERN.test(stream) ||
      peerId === null ||
      decoded?.ok !== true
    ) {
      this.counters.badEntries++;
      return;
    }
    this.counters.relaysIn++;
    this.safely(() => {
      this.handlers.onRemoteMessage(stream, peerId, decoded.message);
    });
  }

  /** Another process displaced one of our members (a resumed session there). */
  private onLost(text: string): void {
    const [, from, stream, to] = splitHeader(text, 3) ?? [];
    const peerId = parsePeerIdField(to);
    if (
      from === undefined ||
      !NODE_ID_PATTERN.test(from) ||
      stream === undefined ||
      !STREAM_ID_PATTERN.test(stream) ||
      peerId === null
    ) {
      this.counters.badEntries++;
      return;
    }
    this.lose(stream, peerId, 'replaced');
  }

  /** A member this process no longer holds: forget it, tidy our index entry, tell the server. */
  private lose(stream: string, peerId: PeerId, reason: MemberLossReason): void {
    if (!this.forget(stream, peerId)) return;
    this.counters.membersLost++;
    if (this.connected)
      // Only drops the index entry: the members hash names the new holder, which RELEASE leaves alone.
      this.redis.chunkycastRelease(...this.releaseArgs(stream, peerId)).catch((e: unknown) => {
        this.storeFailed('leave', e);
      });
    this.safely(() => {
      this.handlers.onMemberLost(stream, peerId, reason);
    });
  }

  private onAnnouncement(text: string): void {
    const [tag, from, frame] = splitHeader(text, 2) ?? [];
    if (from === this.nodeId) return;
    const decoded = frame === undefined ? null : decodeServerMessage(frame);
    if (
      tag !== ANNOUNCE_TAG ||
      from === undefined ||
      !NODE_ID_PATTERN.test(from) ||
      decoded?.ok !== true ||
      decoded.message.type !== 'announce'
    ) {
      this.counters.badEntries++;
      return;
    }
    const announcement = decoded.message.announcement;
    this.counters.announcementsIn++;
    this.cacheAnnouncement(announcement);
    this.safely(() => {
      this.handlers.onRemoteAnnouncement(announcement);
    });
  }

  /** A throwing handler costs one message, never the subscription. */
  private safely(call: () => void): void {
    try {
      call();
    } catch (e) {
      this.log('error', 'cluster handler fault', { error: errorMessage(e) });
    }
  }
}

function parseNodeRecord(record: string): { members: number } | null {
  let value: unknown;
  try {
    value = JSON.parse(record);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const members = (value as Record<string, unknown>).members;
  return typeof members === 'number' && Number.isInteger(members) && members >= 0 ? { members } : null;
}

async function quit(connection: Redis): Promise<void> {
  try {
    await connection.quit();
  } catch {
    connection.disconnect();
  }
}
