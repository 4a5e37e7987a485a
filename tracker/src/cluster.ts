/**
 * The cluster layer: what several tracker processes must agree on to act as one tracker. Each
 * process keeps its own connections (server.ts, swarm.ts); a Cluster backend shares only ids and
 * routes: who holds which peer id in which stream, whether a stream's source is connected anywhere,
 * random bootstrap samples over every process, relaying a message to the process holding its
 * target, and fanning announcements out. Two backends implement it:
 *
 * - `MemoryCluster` (here): processes are nodes attached to one in-process `MemoryHub`. With a
 *   single node it is the default single-process tracker; with several it is the contract the Redis
 *   backend is tested against.
 * - `RedisCluster` (redis-cluster.ts): processes share a Redis server (REDIS_URL).
 *
 * Liveness is the same in both: a node restates that it is alive every `heartbeatMs`; a node not
 * heard from for `nodeTtlMs` is dead, its members are no longer offered or relayed to, and they are
 * swept away.
 */
import { randomBytes, randomInt } from 'node:crypto';
import {
  MAX_BOOTSTRAP_PEERS,
  STREAM_ID_PATTERN,
  type PeerId,
  type PeerRole,
  type ServerMessage,
  type SignedAnnouncement,
} from '@chunkycast/wire';
import { Swarm, type Member } from './swarm.js';

export interface ClusterTiming {
  /** How often a process restates that it is alive (and sweeps dead processes' members). */
  readonly heartbeatMs: number;
  /** A process not heard from for this long is dead: its members are no longer offered or relayed to. */
  readonly nodeTtlMs: number;
  /**
   * The longest any shared record outlives the last process that refreshed it, so nothing grows
   * without bound even if every process dies at once.
   */
  readonly staleKeyTtlMs: number;
}

/**
 * A crashed process's members stop being offered at most `nodeTtlMs` (15 s) after its last
 * heartbeat and are swept within one more heartbeat; three heartbeats per TTL ride out a lost one.
 */
export const DEFAULT_CLUSTER_TIMING: ClusterTiming = {
  heartbeatMs: 5_000,
  nodeTtlMs: 15_000,
  staleKeyTtlMs: 10 * 60_000,
};

/** Merges and checks timing: a TTL shorter than two heartbeats would declare live processes dead. */
export function resolveClusterTiming(partial: Partial<ClusterTiming> = {}): ClusterTiming {
  const timing = { ...DEFAULT_CLUSTER_TIMING, ...partial };
  for (const [name, value] of Object.entries(timing))
    if (!Number.isInteger(value) || value <= 0)
      throw new RangeError(`cluster timing ${name} must be a positive integer of ms, got ${String(value)}`);
  if (timing.nodeTtlMs < 2 * timing.heartbeatMs)
    throw new RangeError(
      `cluster nodeTtlMs (${timing.nodeTtlMs}) must be at least twice heartbeatMs (${timing.heartbeatMs})`,
    );
  if (timing.staleKeyTtlMs < 2 * timing.nodeTtlMs)
    throw new RangeError(
      `cluster staleKeyTtlMs (${timing.staleKeyTtlMs}) must be at least twice nodeTtlMs (${timing.nodeTtlMs})`,
    );
  return timing;
}

/**
 * Why a process loses one of its members to another: `replaced`, a resumed session (a peer that
 * reconnected elsewhere with its resume ticket) took the id over; `conflict`, another process took
 * the id while this one was cut off from the cluster and presumed dead.
 */
export type MemberLossReason = 'replaced' | 'conflict';

/** What a process hands the cluster so the cluster can reach its connections. */
export interface ClusterHandlers {
  /** Another process relayed `message` to `to`, a member of this process (if it is still here). */
  onRemoteMessage(stream: string, to: PeerId, message: ServerMessage): void;
  /** Another process accepted this announcement; give it to this process's viewers of its stream. */
  onRemoteAnnouncement(announcement: SignedAnnouncement): void;
  /**
   * Another process now holds this member's id: close the member's connection (without calling
   * removeMember; the cluster has already forgotten it). Never called for a takeover by this same
   * process: the server displaces its own holder itself.
   */
  onMemberLost(stream: string, peerId: PeerId, reason: MemberLossReason): void;
}

/** A verified resume ticket presented in `join`. */
export interface ResumeRequest {
  readonly peerId: PeerId;
  /** The ticket's expiry (unix s): it may displace a holder whose own ticket expires no later. */
  readonly ticketExpiresAtSec: number;
}

export interface JoinRequest {
  readonly stream: string;
  readonly role: PeerRole;
  /** The stream's source id (the server derives it from its secret); the source claims exactly it. */
  readonly sourceId: PeerId;
  /**
   * Expiry (unix s) of the resume ticket this member's welcome will carry. A later resume whose
   * ticket expires no earlier may displace it (most likely its own session, reconnected).
   */
  readonly ticketExpiresAtSec: number;
  readonly resume?: ResumeRequest;
}

/**
 * new: a fresh id (or the source id, free). resumed: the ticket's id, free. replaced: the ticket's
 * id, taken from a holder whose ticket was no newer (the holder's process is told, or, if it is
 * this one, the server displaces its own holder). conflict: a newer session holds the ticket's id,
 * so this viewer got a fresh one.
 */
export type JoinOutcome = 'new' | 'resumed' | 'replaced' | 'conflict';

export type JoinResult =
  | {
      readonly ok: true;
      readonly peerId: PeerId;
      readonly outcome: JoinOutcome;
      /** The stream's recent announcements, oldest first, for the welcome. */
      readonly announcements: readonly SignedAnnouncement[];
    }
  | {
      readonly ok: false;
      /** Another live source holds the stream (and no ticket entitles this one to replace it). */
      readonly reason: 'sourcePresent';
    };

/**
 * delivered: handed to the process holding the target (not an end-to-end acknowledgement).
 * unknownPeer: no live process holds the target. unavailable: the cluster cannot route right now
 * (Redis unreachable, or the holder is not listening); the server answers it as unknownPeer.
 */
export type DeliverResult = 'delivered' | 'unknownPeer' | 'unavailable';

export interface ClusterStats {
  readonly backend: 'memory' | 'redis';
  readonly nodeId: string;
  /** False while the shared store is unreachable (always true in memory). */
  readonly connected: boolean;
  readonly localMembers: number;
  readonly localSwarms: number;
  /** Members over all live processes, as of the last heartbeat; null until known. */
  readonly globalMembers: number | null;
  /** Live processes, as of the last heartbeat; null until known. */
  readonly liveNodes: number | null;
  readonly relaysOut: number;
  readonly relaysIn: number;
  readonly announcementsOut: number;
  readonly announcementsIn: number;
  /** Malformed records read back from the shared store or its channels, dropped. */
  readonly badEntries: number;
  /** Local members whose id another process took (onMemberLost), either reason. */
  readonly membersLost: number;
  /** Shared-store commands that failed (the operation fell back to local-only behaviour). */
  readonly storeErrors: number;
}

/**
 * The interface server.ts talks to. Calls for one member come from the process that holds it.
 * Promises never reject for store trouble: operations degrade to local-only behaviour (documented
 * per backend) and count `storeErrors`. Bad arguments throw TypeError.
 */
export interface Cluster {
  readonly nodeId: string;
  /** Claims a peer id for a new member of this process (a viewer's random id or the source id). */
  addMember(request: JoinRequest): Promise<JoinResult>;
  /** Releases a member of this process; unknown ids are ignored. */
  removeMember(stream: string, peerId: PeerId): Promise<void>;
  /** Whether a live process holds the stream's source. */
  sourcePresent(stream: string, sourceId: PeerId): Promise<boolean>;
  /** Up to `count` distinct random viewers of the stream on any live process, never `exclude`. */
  sampleViewers(stream: string, count: number, exclude: PeerId | null): Promise<PeerId[]>;
  /** Routes a message to a member held by another process (call only when `to` is not local). */
  deliver(stream: string, to: PeerId, message: ServerMessage): Promise<DeliverResult>;
  /**
   * Records an accepted announcement as the stream's latest and sends it to every other process
   * (this process delivers to its own viewers itself).
   */
  publishAnnouncement(announcement: SignedAnnouncement): Promise<void>;
  /** The stream's recent announcements, oldest first, at most MAX_RECENT_ANNOUNCEMENTS. */
  recentAnnouncements(stream: string): Promise<readonly SignedAnnouncement[]>;
  stats(): ClusterStats;
  /** Releases this process's members and its liveness record, then disconnects. Idempotent. */
  close(): Promise<void>;
}

/** Thrown by a backend that cannot start (the CLI exits 2 with the message). */
export class ClusterStartError extends Error {
  override readonly name = 'ClusterStartError';
}

/** Draws after which a viewer id allocation gives up: with 2^32 ids, hitting this means a bug. */
export const MAX_PEER_ID_DRAWS = 32;
const MAX_PEER_ID = 0xffff_ffff;

/** A node id is this many random bytes, written as twice as many hex digits (NODE_ID_PATTERN). */
const NODE_ID_BYTES = 8;

export function newNodeId(): string {
  return randomBytes(NODE_ID_BYTES).toString('hex');
}

/** A node id as backends write them: 16 lower-case hex digits. */
export const NODE_ID_PATTERN = /^[0-9a-f]{16}$/;

export function defaultDrawPeerId(): PeerId {
  return randomInt(1, MAX_PEER_ID + 1);
}

export function isPeerId(value: unknown): value is PeerId {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 && value <= MAX_PEER_ID;
}

/** Argument checks shared by the backends: a bad call is a server bug, so it throws TypeError. */
export function checkStream(stream: string): void {
  if (!STREAM_ID_PATTERN.test(stream)) throw new TypeError(`bad stream id ${JSON.stringify(stream)}`);
}

export function checkPeerId(name: string, value: PeerId): void {
  if (!isPeerId(value))
    throw new TypeError(`${name} must be a peer id in 1‥${MAX_PEER_ID}, got ${String(value)}`);
}

/** Unix seconds, as resume tickets carry them. */
function checkSeconds(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0)
    throw new TypeError(`${name} must be unix seconds, got ${value}`);
}

export function checkJoinRequest(request: JoinRequest): void {
  checkStream(request.stream);
  checkPeerId('sourceId', request.sourceId);
  const role: string = request.role;
  if (role !== 'viewer' && role !== 'source') throw new TypeError(`bad role ${role}`);
  checkSeconds('ticketExpiresAtSec', request.ticketExpiresAtSec);
  const resume = request.resume;
  if (resume === undefined) return;
  checkPeerId('resume.peerId', resume.peerId);
  checkSeconds('resume.ticketExpiresAtSec', resume.ticketExpiresAtSec);
  // The server checks a ticket's id against the role (tickets.ts); a mismatch here is a bug.
  if ((request.role === 'source') !== (resume.peerId === request.sourceId))
    throw new TypeError(`resume id ${resume.peerId} does not fit role ${request.role}`);
}

/** The bootstrap count, clamped to what the protocol allows. */
export function clampSampleCount(count: number): number {
  if (!Number.isInteger(count) || count < 0) throw new TypeError(`bad sample count ${count}`);
  return Math.min(count, MAX_BOOTSTRAP_PEERS);
}

/**
 * One atomic attempt at an id. `claimed`: it was free (or its holder's process is dead). `displaced`:
 * a live holder gave way to a resume ticket at least as new as its own. `taken`: it stays with its holder.
 */
export type ClaimOutcome = 'claimed' | 'displaced' | 'taken';

/**
 * @param takeoverUpToSec a resume ticket's expiry: a live holder whose own ticket expires no later
 *   gives way; null: only a free id will do.
 */
export type ClaimAttempt = (
  peerId: PeerId,
  takeoverUpToSec: number | null,
) => Promise<ClaimOutcome> | ClaimOutcome;

/**
 * The join rules both backends share (and server.ts had for one process): the source claims its
 * fixed id, displacing a holder only with a ticket at least as new; a resuming viewer gets its id
 * back on the same terms, else a fresh one (`conflict`); fresh ids are random draws that skip 0, the
 * source id and ids `locallyTaken` already knows are in use.
 */
export async function runJoin(
  request: JoinRequest,
  draw: () => number,
  locallyTaken: (peerId: PeerId) => boolean,
  claim: ClaimAttempt,
): Promise<{ ok: true; peerId: PeerId; outcome: JoinOutcome } | { ok: false; reason: 'sourcePresent' }> {
  const resume = request.resume;
  if (request.role === 'source') {
    const claimed = await claim(request.sourceId, resume?.ticketExpiresAtSec ?? null);
    if (claimed === 'taken') return { ok: false, reason: 'sourcePresent' };
    const outcome = resume === undefined ? 'new' : claimed === 'displaced' ? 'replaced' : 'resumed';
    return { ok: true, peerId: request.sourceId, outcome };
  }
  let outcome: JoinOutcome = 'new';
  if (resume !== undefined) {
    const claimed = await claim(resume.peerId, resume.ticketExpiresAtSec);
    if (claimed !== 'taken')
      return { ok: true, peerId: resume.peerId, outcome: claimed === 'displaced' ? 'replaced' : 'resumed' };
    outcome = 'conflict';
  }
  for (let i = 0; i < MAX_PEER_ID_DRAWS; i++) {
    const peerId = draw();
    if (!isPeerId(peerId) || peerId === request.sourceId || locallyTaken(peerId)) continue;
    if ((await claim(peerId, null)) !== 'taken') return { ok: true, peerId, outcome };
  }
  throw new Error(`no free peer id after ${MAX_PEER_ID_DRAWS} draws; is the id source broken?`);
}

// ─────────────────────────────── in memory ───────────────────────────────

interface HubNode {
  readonly nodeId: string;
  readonly handlers: ClusterHandlers;
  lastBeatMs: number;
  /** This node's members by stream: what goes when it dies or closes. */
  readonly streams: Map<string, Set<PeerId>>;
  membersLost: number;
}

interface Holder {
  readonly nodeId: string;
  readonly ticketExpiresAtSec: number;
}

interface HubStream {
  /** swarm.ts's bookkeeping (dense sampling, recent announcements) over placeholder members. */
  readonly swarm: Swarm;
  /** Who holds each id, the source's included. */
  readonly holders: Map<PeerId, Holder>;
}

export interface MemoryHubOptions {
  readonly timing?: Partial<ClusterTiming>;
  /** Clock for liveness; Date.now by default. */
  readonly now?: () => number;
}

/**
 * The shared state of in-memory nodes, as Redis is for RedisCluster. Every call first sweeps nodes
 * whose last heartbeat is older than nodeTtlMs, so a dead node's members are never offered.
 */
export class MemoryHub {
  readonly timing: ClusterTiming;
  private readonly now: () => number;
  private readonly nodes = new Map<string, HubNode>();
  private readonly streams = new Map<string, HubStream>();

  constructor(options: MemoryHubOptions = {}) {
    this.timing = resolveClusterTiming(options.timing);
    this.now = options.now ?? Date.now;
  }

  attach(nodeId: string, handlers: ClusterHandlers): void {
    if (this.nodes.has(nodeId)) throw new TypeError(`node ${nodeId} is already attached`);
    this.nodes.set(nodeId, { nodeId, handlers, lastBeatMs: this.now(), streams: new Map(), membersLost: 0 });
  }

  /** A heartbeat; false once the node was presumed dead and swept (or detached). */
  beat(nodeId: string): boolean {
    return this.enter(nodeId) !== undefined;
  }

  /** Removes a node and all its members (a graceful close, or the sweep of a dead one). */
  detach(nodeId: string): void {
    const node = this.nodes.get(nodeId);
    if (node === undefined) return;
    this.nodes.delete(nodeId);
    for (const [stream, ids] of node.streams) for (const id of ids) this.drop(stream, id, nodeId);
  }

  async join(nodeId: string, request: JoinRequest, draw: () => number): Promise<JoinResult> {
    if (this.enter(nodeId) === undefined)
      throw new Error(`cluster node ${nodeId} is closed or was presumed dead`);
    const { stream, role } = request;
    const result = await runJoin(
      request,
      draw,
      (peerId) => this.streams.get(stream)?.holders.has(peerId) === true,
      (peerId, takeoverUpToSec) => this.claim(nodeId, request, peerId, takeoverUpToSec),
    );
    if (!result.ok) return result;
    const entry = this.streams.get(stream);
    if (entry === undefined) throw new Error('a claimed stream vanished');
    const placeholder = placeholderMember(stream, result.peerId, role);
    if (role === 'source') entry.swarm.source = placeholder;
    // A displaced viewer's place is kept as it is: only the holder changed, not the member.
    else if (entry.swarm.get(result.peerId) === undefined) entry.swarm.addViewer(placeholder);
    return { ...result, announcements: entry.swarm.recentAnnouncements() };
  }

  leave(nodeId: string, stream: string, peerId: PeerId): void {
    const node = this.nodes.get(nodeId);
    const ids = node?.streams.get(stream);
    if (node === undefined || ids?.delete(peerId) !== true) return;
    if (ids.size === 0) node.streams.delete(stream);
    this.drop(stream, peerId, nodeId);
  }

  sourcePresent(nodeId: string, stream: string, sourceId: PeerId): boolean {
    this.enter(nodeId);
    return this.streams.get(stream)?.holders.has(sourceId) === true;
  }

  sample(nodeId: string, stream: string, count: number, exclude: PeerId | null): PeerId[] {
    this.enter(nodeId);
    return this.streams.get(stream)?.swarm.sampleViewers(count, exclude) ?? [];
  }

  /** Hands the message to the holder's handler on a later turn, as a pub/sub message would arrive. */
  deliver(fromNodeId: string, stream: string, to: PeerId, message: ServerMessage): DeliverResult {
    this.enter(fromNodeId);
    const holder = this.streams.get(stream)?.holders.get(to);
    const target = holder === undefined ? undefined : this.nodes.get(holder.nodeId);
    if (target === undefined || target.nodeId === fromNodeId) return 'unknownPeer';
    setImmediate(() => {
      target.handlers.onRemoteMessage(stream, to, message);
    });
    return 'delivered';
  }

  /** Records the announcement and hands it to every other node on a later turn; returns how many. */
  announce(fromNodeId: string, announcement: SignedAnnouncement): number {
    this.enter(fromNodeId);
    this.streams.get(announcement.stream)?.swarm.addAnnouncement(announcement);
    let sent = 0;
    for (const node of this.nodes.values()) {
      if (node.nodeId === fromNodeId) continue;
      sent++;
      setImmediate(() => {
        node.handlers.onRemoteAnnouncement(announcement);
      });
    }
    return sent;
  }

  recent(nodeId: string, stream: string): readonly SignedAnnouncement[] {
    this.enter(nodeId);
    return this.streams.get(stream)?.swarm.recentAnnouncements() ?? [];
  }

  get liveNodes(): number {
    return this.nodes.size;
  }

  get globalMembers(): number {
    let members = 0;
    for (const entry of this.streams.values()) members += entry.holders.size;
    return members;
  }

  localCounts(nodeId: string): { members: number; swarms: number; lost: number } {
    const node = this.nodes.get(nodeId);
    let members = 0;
    for (const ids of node?.streams.values() ?? []) members += ids.size;
    return { members, swarms: node?.streams.size ?? 0, lost: node?.membersLost ?? 0 };
  }

  /** One atomic claim (see ClaimOutcome); a displaced holder on another node is told on a later turn. */
  private claim(
    nodeId: string,
    request: JoinRequest,
    peerId: PeerId,
    takeoverUpToSec: number | null,
  ): ClaimOutcome {
    const node = this.nodes.get(nodeId);
    if (node === undefined) throw new Error(`cluster node ${nodeId} is closed or was presumed dead`);
    const { stream } = request;
    let entry = this.streams.get(stream);
    const holder = entry?.holders.get(peerId);
    if (holder !== undefined && (takeoverUpToSec === null || holder.ticketExpiresAtSec > takeoverUpToSec))
      return 'taken';
    entry ??= this.createStream(stream, request.sourceId);
    entry.holders.set(peerId, { nodeId, ticketExpiresAtSec: request.ticketExpiresAtSec });
    let ids = node.streams.get(stream);
    if (ids === undefined) node.streams.set(stream, (ids = new Set()));
    ids.add(peerId);
    if (holder === undefined) return 'claimed';
    const loser = this.nodes.get(holder.nodeId);
    if (loser !== undefined && loser !== node) {
      const loserIds = loser.streams.get(stream);
      loserIds?.delete(peerId);
      if (loserIds?.size === 0) loser.streams.delete(stream);
      loser.membersLost++;
      setImmediate(() => {
        loser.handlers.onMemberLost(stream, peerId, 'replaced');
      });
    }
    return 'displaced';
  }

  /**
   * Every call counts as a heartbeat of its caller, which is then spared by the sweep: a process
   * whose timer was held up (a long synchronous stretch) must never sweep itself away.
   */
  private enter(nodeId: string): HubNode | undefined {
    const node = this.nodes.get(nodeId);
    if (node !== undefined) node.lastBeatMs = this.now();
    this.sweep();
    return node;
  }

  private createStream(stream: string, sourceId: PeerId): HubStream {
    const entry: HubStream = { swarm: new Swarm(stream, sourceId, this.now()), holders: new Map() };
    this.streams.set(stream, entry);
    return entry;
  }

  /** Drops one member; the stream and its recent announcements go with the last one (as swarm.ts does). */
  private drop(stream: string, peerId: PeerId, nodeId: string): void {
    const entry = this.streams.get(stream);
    if (entry?.holders.get(peerId)?.nodeId !== nodeId) return;
    entry.holders.delete(peerId);
    entry.swarm.remove(peerId);
    if (entry.holders.size === 0) this.streams.delete(stream);
  }

  private sweep(): void {
    const deadline = this.now() - this.timing.nodeTtlMs;
    for (const node of [...this.nodes.values()]) if (node.lastBeatMs < deadline) this.detach(node.nodeId);
  }
}

/** Runs `work` now; its result or its throw (a TypeError for a bad argument) becomes a promise. */
function settle<T>(work: () => T | Promise<T>): Promise<T> {
  try {
    return Promise.resolve(work());
  } catch (e) {
    return Promise.reject(e instanceof Error ? e : new Error(String(e)));
  }
}

function placeholderMember(stream: string, peerId: PeerId, role: PeerRole): Member {
  return { peerId, role, stream, joinedAtMs: 0, report: null, send: () => undefined };
}

export interface MemoryClusterOptions {
  readonly handlers: ClusterHandlers;
  /** Shared with other nodes to model several processes; a fresh private hub by default. */
  readonly hub?: MemoryHub;
  /** Timing of a private hub (ignored when `hub` is given: the hub's timing rules). */
  readonly timing?: Partial<ClusterTiming>;
  readonly nodeId?: string;
  /** Random viewer ids; injectable so tests can force collisions. */
  readonly drawPeerId?: () => number;
}

/** The default backend: one process (or, sharing a hub, several in one test). */
export class MemoryCluster implements Cluster {
  readonly nodeId: string;
  private readonly hub: MemoryHub;
  private readonly draw: () => number;
  private readonly heartbeat: NodeJS.Timeout;
  private closed = false;
  private readonly counters = { relaysOut: 0, relaysIn: 0, announcementsOut: 0, announcementsIn: 0 };

  constructor(options: MemoryClusterOptions) {
    this.nodeId = options.nodeId ?? newNodeId();
    this.hub = options.hub ?? new MemoryHub({ timing: options.timing ?? {} });
    this.draw = options.drawPeerId ?? defaultDrawPeerId;
    const handlers = options.handlers;
    this.hub.attach(this.nodeId, {
      onRemoteMessage: (stream, to, message) => {
        this.counters.relaysIn++;
        handlers.onRemoteMessage(stream, to, message);
      },
      onRemoteAnnouncement: (announcement) => {
        this.counters.announcementsIn++;
        handlers.onRemoteAnnouncement(announcement);
      },
      onMemberLost: (stream, peerId, reason) => {
        handlers.onMemberLost(stream, peerId, reason);
      },
    });
    this.heartbeat = setInterval(() => {
      this.hub.beat(this.nodeId);
    }, this.hub.timing.heartbeatMs);
    this.heartbeat.unref();
  }

  addMember(request: JoinRequest): Promise<JoinResult> {
    return settle(() => {
      checkJoinRequest(request);
      return this.hub.join(this.nodeId, request, this.draw);
    });
  }

  removeMember(stream: string, peerId: PeerId): Promise<void> {
    return settle(() => {
      this.hub.leave(this.nodeId, stream, peerId);
    });
  }

  sourcePresent(stream: string, sourceId: PeerId): Promise<boolean> {
    return settle(() => {
      checkStream(stream);
      checkPeerId('sourceId', sourceId);
      return this.hub.sourcePresent(this.nodeId, stream, sourceId);
    });
  }

  sampleViewers(stream: string, count: number, exclude: PeerId | null): Promise<PeerId[]> {
    return settle(() => {
      checkStream(stream);
      return this.hub.sample(this.nodeId, stream, clampSampleCount(count), exclude);
    });
  }

  deliver(stream: string, to: PeerId, message: ServerMessage): Promise<DeliverResult> {
    return settle(() => {
      checkStream(stream);
      checkPeerId('to', to);
      const result = this.hub.deliver(this.nodeId, stream, to, message);
      if (result === 'delivered') this.counters.relaysOut++;
      return result;
    });
  }

  publishAnnouncement(announcement: SignedAnnouncement): Promise<void> {
    return settle(() => {
      checkStream(announcement.stream);
      this.counters.announcementsOut += this.hub.announce(this.nodeId, announcement);
    });
  }

  recentAnnouncements(stream: string): Promise<readonly SignedAnnouncement[]> {
    return settle(() => {
      checkStream(stream);
      return this.hub.recent(this.nodeId, stream);
    });
  }

  stats(): ClusterStats {
    const local = this.hub.localCounts(this.nodeId);
    return {
      backend: 'memory',
      nodeId: this.nodeId,
      connected: !this.closed,
      localMembers: local.members,
      localSwarms: local.swarms,
      globalMembers: this.hub.globalMembers,
      liveNodes: this.hub.liveNodes,
      ...this.counters,
      badEntries: 0,
      membersLost: local.lost,
      storeErrors: 0,
    };
  }

  close(): Promise<void> {
    this.closed = true;
    clearInterval(this.heartbeat);
    this.hub.detach(this.nodeId);
    return Promise.resolve();
  }

  /** Stops heartbeats and leaves its members behind, as a crashed process would (tests). */
  abandon(): void {
    this.closed = true;
    clearInterval(this.heartbeat);
  }
}
