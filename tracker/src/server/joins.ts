/**
 * Joining a stream and leaving it: the broadcaster key or join token, resume tickets, the id the
 * cluster grants, the welcome, and a member's place given up (it left, a resumed session took its
 * id here, or another tracker process did).
 */
import { timingSafeEqual } from 'node:crypto';
import { WebSocket } from 'ws';
import {
  CLOSE_REPLACED,
  MAX_RECENT_ANNOUNCEMENTS,
  type ClientMessage,
  type PeerId,
  type ServerMessage,
  type SignedAnnouncement,
} from '@chunkycast/wire';
import type { JoinResult, MemberLossReason } from '../cluster.js';
import { iceConfigFor, type IceSettings } from '../ice.js';
import type { Member, Swarm } from '../swarm.js';
import {
  makeResumeTicket,
  readResumeTicket,
  sourceIdFor,
  verifyJoinToken,
  type ResumeClaim,
} from '../tickets.js';
import { Refusal, type Connection, type TrackerContext } from './context.js';
import type { Connections } from './connections.js';
import type { IceRenewals } from './ice-renewal.js';
import { sha256 } from './digest.js';

type JoinMessage = Extract<ClientMessage, { type: 'join' }>;

/** Signals kept for one join in flight; an honest joiner is offered a link or two in that time. */
const MAX_PENDING_SIGNALS = 16;
const MS_PER_S = 1000;

/** What reaches a stream while a join into it awaits the cluster. */
interface PendingJoin {
  /** Oldest first, at most MAX_RECENT_ANNOUNCEMENTS. */
  readonly announcements: SignedAnnouncement[];
  readonly signals: { readonly to: PeerId; readonly message: ServerMessage }[];
}

/** Announcements are equal if they sign the same segment bytes under the same sequence. */
function announcementKey(a: SignedAnnouncement): string {
  return `${a.sequence}/${a.sha256}`;
}

/**
 * Joins awaiting the cluster, by stream. What is fanned out to the stream meanwhile would miss the
 * joiner (it is not in the swarm yet, and the recent list it gets may predate it), so it is
 * collected here and handed over once the joiner is in.
 */
export class PendingJoins {
  private readonly byStream = new Map<string, Set<PendingJoin>>();

  /** Collects for one join into `stream` while `claim` runs. */
  async collecting<T>(stream: string, claim: () => Promise<T>): Promise<{ result: T; pending: PendingJoin }> {
    const pending: PendingJoin = { announcements: [], signals: [] };
    let waiting = this.byStream.get(stream);
    if (waiting === undefined) this.byStream.set(stream, (waiting = new Set()));
    waiting.add(pending);
    try {
      return { result: await claim(), pending };
    } finally {
      waiting.delete(pending);
      if (waiting.size === 0 && this.byStream.get(stream) === waiting) this.byStream.delete(stream);
    }
  }

  /** Keeps an announcement for every join into its stream in flight. */
  addAnnouncement(a: SignedAnnouncement): void {
    for (const pending of this.byStream.get(a.stream) ?? []) {
      pending.announcements.push(a);
      if (pending.announcements.length > MAX_RECENT_ANNOUNCEMENTS) pending.announcements.shift();
    }
  }

  /** Keeps a relayed signal for joins into `stream` in flight; false if there are none. */
  addSignal(stream: string, to: PeerId, message: ServerMessage): boolean {
    const waiting = this.byStream.get(stream);
    if (waiting === undefined) return false;
    for (const pending of waiting)
      if (pending.signals.length < MAX_PENDING_SIGNALS) pending.signals.push({ to, message });
    return true;
  }
}

export interface JoinSettings {
  /** HMAC key of resume tickets and source ids. */
  readonly trackerSecret: string | Buffer;
  /** Digest of the broadcaster key (see `sha256`). */
  readonly keyDigest: Buffer;
  readonly joinSecret: string | null;
  readonly ticketTtlS: number;
  /** Base64 raw Ed25519 public key handed to viewers, or null. */
  readonly publicKeyBase64: string | null;
  readonly ice: IceSettings;
}

export class Joins {
  readonly pending = new PendingJoins();
  /** A member's connection, to close it when a resumed session takes its id. */
  private readonly connectionOf = new WeakMap<Member, Connection>();
  /**
   * Expiry (unix s) of the resume ticket in a member's welcome. The cluster holds the same value: a
   * resume presenting an older ticket for the same id does not displace the member (it is a stale
   * copy of the session, not its heir).
   */
  private readonly ticketExpiry = new WeakMap<Member, number>();
  /** Members that resumed a session: their first report is a baseline (see ConnectivityCounters.add). */
  readonly resumedMembers = new WeakSet<Member>();

  constructor(
    private readonly context: TrackerContext,
    private readonly connections: Connections,
    private readonly iceRenewals: IceRenewals,
    private readonly settings: JoinSettings,
  ) {}

  async join(conn: Connection, message: JoinMessage): Promise<void> {
    const { now, cluster, registry, counters, log } = this.context;
    if (conn.member !== null) throw new Refusal('alreadyJoined', `already joined ${conn.member.stream}`);
    if (message.role === 'source') this.checkBroadcasterKey(conn, message);
    else this.checkJoinToken(message);
    const claim = this.resumeClaim(message);
    const stream = message.stream;
    const ticketExpiresAtSec = Math.floor(now() / MS_PER_S) + this.settings.ticketTtlS;

    // The cluster decides the id (across every process): the source's fixed one, the ticket's, or a
    // fresh one; a holder is displaced only by a ticket at least as new as its own (cluster.ts).
    const { result, pending } = await this.pending.collecting<JoinResult>(stream, () =>
      cluster.addMember({
        stream,
        role: message.role,
        sourceId: sourceIdFor(this.settings.trackerSecret, stream),
        ticketExpiresAtSec,
        ...(claim === null
          ? {}
          : { resume: { peerId: claim.peerId, ticketExpiresAtSec: claim.expiresAtSec } }),
      }),
    );
    if (!result.ok) {
      if (claim !== null) counters.resumes.conflict++;
      throw new Refusal('sourcePresent', `stream ${stream} already has a source`);
    }
    if (result.outcome !== 'new') counters.resumes[result.outcome]++;

    const swarm = registry.getOrCreate(stream);
    const member = this.makeMember(conn, result.peerId, message.role, swarm.stream, ticketExpiresAtSec);
    // A local holder of the id gave way (most likely this peer's own earlier connection); a holder
    // on another process is told by the cluster (onMemberLost).
    const holder = swarm.get(result.peerId);
    if (holder !== undefined) this.displace(holder);
    swarm.replace(member);
    conn.member = member;
    // The socket may have closed (or the tracker begun closing) while the claim was in flight; its
    // 'close' handler saw no member then, so the claim is released here.
    if (conn.socket.readyState !== WebSocket.OPEN) {
      this.leave(conn);
      return;
    }
    counters.joins++;
    const resumed = result.outcome === 'resumed' || result.outcome === 'replaced';
    if (resumed) this.resumedMembers.add(member);
    log(member.role === 'source' ? 'info' : 'debug', `${member.role} joined`, {
      stream: swarm.stream,
      peerId: member.peerId,
      resumed,
      viewers: swarm.viewerCount,
      remote: conn.remote,
    });
    this.welcome(conn, member, swarm, resumed, result.announcements);
    // What reached the stream while the claim was in flight, in arrival order.
    if (member.role === 'viewer') {
      const known = new Set(result.announcements.map(announcementKey));
      for (const a of pending.announcements)
        if (!known.has(announcementKey(a))) member.send({ type: 'announce', announcement: a });
    }
    for (const signal of pending.signals) if (signal.to === member.peerId) member.send(signal.message);
  }

  leave(conn: Connection): void {
    const { registry, cluster, log } = this.context;
    const member = conn.member;
    if (member === null) return;
    conn.member = null;
    // A displaced member no longer holds its place: its id is its successor's now, in the cluster too.
    const holdsPlace = registry.get(member.stream)?.get(member.peerId) === member;
    registry.leave(member);
    // On shutdown cluster.close() releases every member of this process at once.
    if (holdsPlace && !this.context.closing())
      cluster.removeMember(member.stream, member.peerId).catch((e: unknown) => {
        log('warn', 'releasing a member in the cluster failed', { peerId: member.peerId, error: e });
      });
    log(member.role === 'source' ? 'info' : 'debug', `${member.role} left`, {
      stream: member.stream,
      peerId: member.peerId,
    });
  }

  /** The member and swarm of a joined connection; `notJoined` otherwise. */
  joined(conn: Connection): { member: Member; swarm: Swarm } {
    const member = conn.member;
    const swarm = member === null ? undefined : this.context.registry.get(member.stream);
    if (member === null || swarm === undefined) throw new Refusal('notJoined', 'join a stream first');
    return { member, swarm };
  }

  /** Another process now holds this member's id: the member's connection goes (it may resume). */
  onMemberLost(stream: string, peerId: PeerId, reason: MemberLossReason): void {
    const holder = this.context.registry.get(stream)?.get(peerId);
    if (holder === undefined) return;
    // No removeMember: the cluster has already given the id to its new holder.
    this.context.registry.leave(holder);
    const conn = this.connectionOf.get(holder);
    if (conn === undefined || conn.member !== holder) return;
    conn.member = null;
    this.context.log('info', 'another tracker process took over a member', {
      stream,
      peerId,
      reason,
      remote: conn.remote,
    });
    this.connections.disconnect(
      conn,
      CLOSE_REPLACED,
      reason === 'replaced' ? 'replaced by a resumed session' : 'peer id taken by another tracker process',
      'replaced',
    );
  }

  private welcome(
    conn: Connection,
    member: Member,
    swarm: Swarm,
    resumed: boolean,
    announcements: readonly SignedAnnouncement[],
  ): void {
    const iceConfig = iceConfigFor(this.settings.ice, member.peerId, this.context.now());
    this.connections.send(conn, {
      type: 'welcome',
      peerId: member.peerId,
      sourceId: swarm.sourceId,
      stream: swarm.stream,
      publicKey: this.settings.publicKeyBase64,
      announcements,
      resume: makeResumeTicket(this.settings.trackerSecret, {
        stream: swarm.stream,
        peerId: member.peerId,
        role: member.role,
        expiresAtSec: this.ticketExpiry.get(member) ?? 0,
      }),
      resumed,
      ice: iceConfig,
    });
    // A fresh welcome (a rejoin, a resume) restarts the renewal clock of this connection.
    this.iceRenewals.schedule(conn, iceConfig.expiresAtMs);
  }

  private makeMember(
    conn: Connection,
    peerId: PeerId,
    role: Member['role'],
    stream: string,
    ticketExpiresAtSec: number,
  ): Member {
    const member: Member = {
      peerId,
      role,
      stream,
      joinedAtMs: this.context.now(),
      report: null,
      send: (message) => {
        this.connections.send(conn, message);
      },
    };
    this.connectionOf.set(member, conn);
    this.ticketExpiry.set(member, ticketExpiresAtSec);
    return member;
  }

  /**
   * The claim of a resume ticket presented in `join`, if it is valid for this stream and role. A bad
   * ticket is no error (the peer simply gets a fresh id), only counted.
   */
  private resumeClaim(message: JoinMessage): ResumeClaim | null {
    if (message.resume === undefined) return null;
    const { resumes } = this.context.counters;
    const check = readResumeTicket(this.settings.trackerSecret, message.resume, this.context.now());
    if (!check.ok) {
      resumes[check.problem === 'expired' ? 'expired' : 'invalid']++;
      return null;
    }
    const claim = check.claim;
    const sourceId = sourceIdFor(this.settings.trackerSecret, message.stream);
    const idFitsRole = message.role === 'source' ? claim.peerId === sourceId : claim.peerId !== sourceId;
    if (claim.stream !== message.stream || claim.role !== message.role || !idFitsRole) {
      resumes.mismatch++;
      return null;
    }
    return claim;
  }

  /** A resumed session takes `old`'s place: `old`'s connection loses its membership and is closed. */
  private displace(old: Member): void {
    const conn = this.connectionOf.get(old);
    if (conn === undefined) return;
    conn.member = null;
    this.context.log('info', 'a resumed session replaces a connection', {
      stream: old.stream,
      peerId: old.peerId,
      role: old.role,
      remote: conn.remote,
    });
    this.connections.disconnect(conn, CLOSE_REPLACED, 'replaced by a resumed session', 'replaced');
  }

  private checkBroadcasterKey(conn: Connection, message: JoinMessage): void {
    if (message.key === undefined) throw new Refusal('badKey', 'joining as source needs the broadcaster key');
    if (!timingSafeEqual(sha256(message.key), this.settings.keyDigest)) {
      this.context.log('warn', 'source join with a wrong broadcaster key', {
        remote: conn.remote,
        stream: message.stream,
      });
      throw new Refusal('badKey', 'the broadcaster key is wrong');
    }
  }

  private checkJoinToken(message: JoinMessage): void {
    const joinSecret = this.settings.joinSecret;
    if (joinSecret === null) return;
    if (message.token === undefined)
      throw new Refusal(
        'badToken',
        `stream ${message.stream} needs a join token from the broadcaster's site`,
      );
    const check = verifyJoinToken(joinSecret, message.stream, message.token, this.context.now());
    if (!check.ok)
      throw new Refusal(
        'badToken',
        check.problem === 'expired'
          ? 'the join token has expired; get a fresh one from the broadcaster\u2019s site'
          : `the join token is not valid for stream ${message.stream}`,
      );
  }
}
