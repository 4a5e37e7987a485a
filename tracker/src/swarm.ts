/**
 * Swarm bookkeeping, free of sockets: who is in which stream, the peer-id space, random bootstrap
 * samples and the recent announcements. server.ts owns the connections and calls in here.
 */
import { randomInt } from 'node:crypto';
import { CutOffBook } from './cut-offs.js';
import {
  MAX_RECENT_ANNOUNCEMENTS,
  type PeerId,
  type PeerReport,
  type PeerRole,
  type ServerMessage,
  type SignedAnnouncement,
} from '@chunkycast/wire';

/** One joined connection as the swarm sees it. */
export interface Member {
  readonly peerId: PeerId;
  readonly role: PeerRole;
  readonly stream: string;
  readonly joinedAtMs: number;
  report: PeerReport | null;
  send(message: ServerMessage): void;
}

/** A random u32 peer id candidate; 0 is refused by the caller (it reads as "none" in too many places). */
export function randomPeerId(): PeerId {
  return randomInt(1, 0x1_0000_0000);
}

export class Swarm {
  /** The true source, while it is connected. */
  source: Member | null = null;
  private readonly viewers = new Map<PeerId, Member>();
  /** The same viewers as a dense array, so a bootstrap sample costs O(count), not O(swarm). */
  private readonly viewerIds: PeerId[] = [];
  private readonly viewerIndex = new Map<PeerId, number>();
  private readonly recent: SignedAnnouncement[] = [];
  private announcementCount = 0;
  /** Members' reports of peers they cut off, and the peers no new connection is signalled for. */
  readonly cutOffs: CutOffBook;

  constructor(
    readonly stream: string,
    /**
     * Known when the swarm is made (derived from the stream and the tracker secret), so viewers
     * joining before the source already know it, and a restarted tracker gives the same one.
     */
    readonly sourceId: PeerId,
    readonly createdAtMs: number,
    private readonly draw: () => number = randomPeerId,
    now: () => number = Date.now,
  ) {
    this.cutOffs = new CutOffBook(now, sourceId);
  }

  /**
   * A fresh viewer id: random rather than counted, so ids leak nothing about join order or swarm
   * size; never 0, never the source id, never a current viewer's. Ids are unique within a swarm,
   * which is all signalling needs (it never crosses swarms).
   */
  newViewerId(): PeerId {
    for (;;) {
      const id = this.draw();
      if (id !== 0 && id !== this.sourceId && !this.viewers.has(id)) return id;
    }
  }

  hasViewer(peerId: PeerId): boolean {
    return this.viewers.has(peerId);
  }

  get viewerCount(): number {
    return this.viewers.size;
  }

  get isEmpty(): boolean {
    return this.source === null && this.viewers.size === 0;
  }

  /** The caller makes sure the id is free (`newViewerId`, or `replace` for a taken one). */
  addViewer(member: Member): void {
    this.viewers.set(member.peerId, member);
    this.viewerIndex.set(member.peerId, this.viewerIds.length);
    this.viewerIds.push(member.peerId);
  }

  /**
   * Puts `member` in the place of whoever holds its peer id (the source's or a viewer's), keeping
   * the swarm's order and sample index; returns the member it displaced.
   */
  replace(member: Member): Member | undefined {
    if (member.role === 'source') {
      const old = this.source ?? undefined;
      this.source = member;
      return old;
    }
    const old = this.viewers.get(member.peerId);
    if (old === undefined) this.addViewer(member);
    else this.viewers.set(member.peerId, member);
    return old;
  }

  /** Removes a viewer or the source; true if it was here. */
  remove(peerId: PeerId): boolean {
    if (this.source?.peerId === peerId) {
      this.source = null;
      return true;
    }
    if (!this.viewers.delete(peerId)) return false;
    const index = this.viewerIndex.get(peerId);
    this.viewerIndex.delete(peerId);
    const last = this.viewerIds.pop();
    if (index !== undefined && last !== undefined && last !== peerId) {
      this.viewerIds[index] = last;
      this.viewerIndex.set(last, index);
    }
    return true;
  }

  /** A viewer, or the source if connected. */
  get(peerId: PeerId): Member | undefined {
    if (this.source?.peerId === peerId) return this.source;
    return this.viewers.get(peerId);
  }

  *members(): Iterable<Member> {
    if (this.source !== null) yield this.source;
    yield* this.viewers.values();
  }

  *viewerMembers(): Iterable<Member> {
    yield* this.viewers.values();
  }

  /**
   * Up to `count` distinct random viewers other than `exclude`. The source is never offered: it
   * feeds the slice roots over links it opens itself and never joins the random graph.
   */
  sampleViewers(
    count: number,
    exclude: PeerId | null,
    pick: (maxExclusive: number) => number = randomIndex,
  ): PeerId[] {
    const ids = this.viewerIds;
    const available = ids.length - (exclude !== null && this.viewerIndex.has(exclude) ? 1 : 0);
    const want = Math.min(count, available);
    if (want <= 0) return [];
    const chosen = new Set<PeerId>();
    if (want * 2 >= ids.length) {
      // Most of the swarm is wanted: one partial Fisher–Yates over a copy beats rejection sampling.
      const copy = ids.slice();
      for (let i = 0; i < copy.length && chosen.size < want; i++) {
        const j = i + pick(copy.length - i);
        const picked = copy[j] ?? 0;
        copy[j] = copy[i] ?? 0;
        copy[i] = picked;
        if (picked !== exclude) chosen.add(picked);
      }
    } else {
      // A small share of a large swarm: draw until enough distinct ids; expected draws < 2·want.
      while (chosen.size < want) {
        const id = ids[pick(ids.length)];
        if (id !== undefined && id !== exclude) chosen.add(id);
      }
    }
    return [...chosen];
  }

  addAnnouncement(a: SignedAnnouncement): void {
    this.recent.push(a);
    if (this.recent.length > MAX_RECENT_ANNOUNCEMENTS) this.recent.shift();
    this.announcementCount++;
  }

  /** Oldest first, at most MAX_RECENT_ANNOUNCEMENTS. */
  recentAnnouncements(): readonly SignedAnnouncement[] {
    return this.recent.slice();
  }

  get totalAnnouncements(): number {
    return this.announcementCount;
  }

  get lastAnnouncement(): SignedAnnouncement | null {
    return this.recent[this.recent.length - 1] ?? null;
  }
}

function randomIndex(maxExclusive: number): number {
  return randomInt(0, maxExclusive);
}

/** All swarms of one tracker. */
export class SwarmRegistry {
  private readonly swarms = new Map<string, Swarm>();

  constructor(
    /** The source id of a stream (deterministic: see tickets.ts `sourceIdFor`). */
    private readonly sourceIdOf: (stream: string) => PeerId,
    private readonly now: () => number = Date.now,
    private readonly draw: () => number = randomPeerId,
  ) {}

  get(stream: string): Swarm | undefined {
    return this.swarms.get(stream);
  }

  getOrCreate(stream: string): Swarm {
    let swarm = this.swarms.get(stream);
    if (swarm === undefined) {
      swarm = new Swarm(stream, this.sourceIdOf(stream), this.now(), this.draw, this.now);
      this.swarms.set(stream, swarm);
    }
    return swarm;
  }

  /**
   * Removes a member if it still holds its place (a member displaced by a resumed session no longer
   * does); drops the swarm once nobody is left.
   */
  leave(member: Member): void {
    const swarm = this.swarms.get(member.stream);
    if (swarm === undefined || swarm.get(member.peerId) !== member) return;
    swarm.remove(member.peerId);
    if (swarm.isEmpty) this.swarms.delete(swarm.stream);
  }

  get size(): number {
    return this.swarms.size;
  }

  all(): Iterable<Swarm> {
    return this.swarms.values();
  }
}
