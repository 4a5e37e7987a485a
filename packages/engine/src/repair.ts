import {
  MAX_HOPS,
  MessageType,
  PACKET_REPAIR_SPAN,
  RepairNakReason,
  bitCount32,
  type Bloom128,
  type Message,
  type PacketRepairDataMessage,
  type PacketRepairNakMessage,
  type PacketRepairRequestMessage,
  type PeerId,
} from '@chunkycast/wire';
import type { ProtocolConfig } from './config.js';
import type { Random } from './random.js';
import type { PeerState, SliceState } from './state.js';
import type { DeliveredPacket, DeliveryPath } from './types.js';

/** A packet that came other than down the tree, already remembered in the slice's ring. */
export interface FilledPacket extends DeliveredPacket {
  /** When it was first counted missing. */
  readonly missingSinceMs: number;
}

/** What the repair layer needs from its engine: tree state, peers, and the way out. */
export interface RepairHost {
  readonly protocol: ProtocolConfig;
  readonly id: PeerId;
  readonly sourceId: PeerId;
  readonly targetLoad: number;
  /** ML in slices; 0 (receive-only) serves no repair: such an uplink cannot carry one slice. */
  readonly maxLoad: number;
  /** Slices carrying the stream (the parity slice, if any, is not repaired). */
  readonly dataSlices: number;
  readonly random: Random;
  slice(s: number): SliceState;
  peer(id: PeerId): PeerState | undefined;
  /** Neighbours in the Swaplinks graph (the candidates for helping). */
  neighbours(): Iterable<PeerId>;
  maskOf(peer: PeerId): Bloom128;
  send(to: PeerId, message: Message): void;
  /** Hand a newly held packet to the application and down the slice's tree. */
  accept(packet: FilledPacket): void;
  fetchOrigin(s: number, seqs: number[]): void;
  /** A packet has just been found missing (the parity slice may already hold what rebuilds it). */
  missing(s: number, seq: number): void;
}

export interface RepairCounters {
  /** Packets found missing on their tree. */
  packetsMissing: number;
  repairRequestsSent: number;
  repairPacketsRequested: number;
  repairPacketsReceived: number;
  /** Repair data for a packet we were not chasing from that peer: dropped. */
  repairPacketsUnsolicited: number;
  /** Repair or origin copies of a packet that was already held. */
  duplicatesRepaired: number;
  repairNaksNotHeld: number;
  repairNaksBusy: number;
  repairNaksPending: number;
  repairTimeouts: number;
  /** Packets sent to others as a helper, and refused for lack of budget or transport room. */
  repairPacketsServed: number;
  repairPacketsRefusedBusy: number;
  originPacketsRequested: number;
  /** Of those: a helper (or a Pending parent) was still being waited for; no helper was ever found. */
  originWhileAsking: number;
  originNeverAsked: number;
  originPacketsReceived: number;
  /** Missing packets whose deadline passed before any copy came. */
  packetsExpired: number;
  /** Packets rebuilt from the parity slice, and parity payloads that did not fit their stripe. */
  parityRecovered: number;
  parityErrors: number;
  /**
   * Packets filled by repair, parity or the origin whose tree copy came after all: they were late,
   * not lost. Measured loss (what switches parity) leaves them out.
   */
  falseAlarms: number;
}

interface Missing {
  readonly slice: number;
  readonly seq: number;
  /** Repair deadline: the clock's play time, or earlier once the host gives a span (setDeadline). */
  deadline: number;
  readonly detectedAt: number;
  helper: PeerId | null;
  askedAt: number;
  /** The helper said Pending (it chases the packet itself): wait for it until then. */
  waitUntil: number;
  requestId: number;
  /** Helpers that answered NAK or timed out for this packet. */
  tried: PeerId[];
  fromOrigin: boolean;
}

interface Playout {
  readonly zeroAtMs: number;
  readonly packetIntervalMs: number;
  readonly fromMs: number;
  readonly originRttMs?: number;
}

/** A host's deadline for a run of stream-wide packets [first, end) (Input 'deadline'). */
interface DeadlineSpan {
  readonly first: number;
  readonly end: number;
  readonly atMs: number;
}

/**
 * Host deadline spans kept, newest by deadline: a player asks for a segment a few segments ahead of
 * its playhead at most (hls.js buffers about three), so 16 covers every segment still awaited. Not
 * from the papers: their playout is linear.
 */
const MAX_DEADLINE_SPANS = 16;

/** Weight of a new lag sample: follows a parent change within a few packets, smooths jitter. */
const LAG_SMOOTHING = 0.2;
/** A helper that said BUSY is left alone this long. */
const BUSY_BACKOFF_MS = 1000;
/** Window of the helper's served-packets rate (for the load it adds and for its cap). */
const SERVE_WINDOW_MS = 2000;
/** Distinct helpers tried for one packet before it waits for the origin. */
const MAX_TRIES_PER_PACKET = 6;

/** One number per (slice, sequence): slices are fewer than 256 (MAX_SLICES is 64). */
const key = (s: number, seq: number): number => seq * 256 + s;
/** One slice's packet interval while neither the playout clock nor the slice has measured it. */
const UNKNOWN_PACKET_INTERVAL_MS = 1000;
/**
 * A parent is asked for repair only while it sent something within this many packet intervals
 * (plus the repair grace): a parent silent longer has lost the slice itself.
 */
const PARENT_SILENT_INTERVALS = 2;
/**
 * The origin is asked this far ahead of a deadline at most: one and a half of its round trips plus
 * this margin for the server's own time (below `originLeadMs` on a fast origin).
 */
const ORIGIN_RTT_FACTOR = 1.5;
const ORIGIN_MARGIN_MS = 200;
/** A helper that has not answered within two of its round trips plus this margin is given up on. */
const HELPER_RTT_FACTOR = 2;
const HELPER_MARGIN_MS = 100;
/** Request ids run 1…2³²−2 and wrap (0 and 2³²−1 are never used). */
const MAX_REQUEST_ID = 0xffff_fffe;

/**
 * Deadline-aware repair (Bullet / CREW ideas on Chunkyspread trees), requester and helper sides.
 *
 * Requester: every `repairScanMs`, each slice's packets whose expected arrival (the playout clock
 * plus the slice's measured lag) is `repairGraceMs` past are checked against the ring; those absent
 * are missing. Missing packets are requested earliest deadline first, split across up to
 * `repairHelpers` neighbours that receive the slice and are not downstream of us or of the parent
 * that failed (their advertised Bloom filters hold neither mask), fewest in flight per helper.
 * NAK or timeout moves a packet to the next helper; within `originLeadMs` of its deadline it is
 * fetched from the origin instead. A repaired packet goes to the application and on down the tree.
 * A packet's deadline is its play time on the clock, or earlier where the host said a run of packets
 * is needed all at once (`setDeadline`: a player that takes segments whole).
 *
 * Helper: serves what its ring holds, as long as its repair rate stays under
 * `repairUploadShare`·TL slices and the transport to the requester is not backed up; otherwise BUSY.
 */
export class Repairer {
  readonly counters: RepairCounters = {
    packetsMissing: 0,
    repairRequestsSent: 0,
    repairPacketsRequested: 0,
    repairPacketsReceived: 0,
    repairPacketsUnsolicited: 0,
    duplicatesRepaired: 0,
    repairNaksNotHeld: 0,
    repairNaksBusy: 0,
    repairNaksPending: 0,
    repairTimeouts: 0,
    repairPacketsServed: 0,
    repairPacketsRefusedBusy: 0,
    originPacketsRequested: 0,
    originWhileAsking: 0,
    originNeverAsked: 0,
    originPacketsReceived: 0,
    packetsExpired: 0,
    parityRecovered: 0,
    parityErrors: 0,
    falseAlarms: 0,
  };
  private playout: Playout | null = null;
  private spans: DeadlineSpan[] = [];
  private nextScanAt = Infinity;
  /** `repairHelpers > 0`, read once: the protocol never changes, and `enabled` is asked per packet. */
  private readonly helpersAllowed: boolean;
  private readonly scanFrom: number[];
  private readonly lagMs: Float64Array;
  private readonly missing = new Map<number, Missing>();
  private readonly inFlight = new Map<PeerId, number>();
  private readonly busyUntil = new Map<PeerId, number>();
  private readonly backlogBytes = new Map<PeerId, number>();
  private nextRequestId = 1;
  /** Packets filled other than by the tree, until their deadline: to recognise a late tree copy. */
  private readonly filled = new Map<number, number>();
  /** Served packet times in the last SERVE_WINDOW_MS (ring of timestamps, oldest first). */
  private served: number[] = [];

  constructor(private readonly host: RepairHost) {
    this.helpersAllowed = host.protocol.repairHelpers > 0;
    const slices = host.dataSlices;
    this.scanFrom = new Array<number>(slices).fill(-1);
    this.lagMs = new Float64Array(slices).fill(Number.NaN);
  }

  get enabled(): boolean {
    return this.helpersAllowed && this.playout !== null;
  }

  nextDeadline(): number {
    return this.enabled ? this.nextScanAt : Infinity;
  }

  /** Whether `seq` of slice `s` is overdue and being chased (only such packets are rebuilt from parity). */
  isMissing(s: number, seq: number): boolean {
    return this.missing.has(key(s, seq));
  }

  /** Missing packets being chased now (for tests and stats). */
  get missingCount(): number {
    return this.missing.size;
  }

  /** Repair upload as slice-equivalents (packets per second ÷ one slice's packet rate), rounded up. */
  loadSlices(now: number): number {
    this.trimServed(now);
    if (this.served.length === 0) return 0;
    const perSecond = (this.served.length * 1000) / SERVE_WINDOW_MS;
    return Math.ceil(perSecond / (1000 / this.packetIntervalMs()));
  }

  /** One slice's packet interval: the playout clock's, else the measured one (1 s if unknown). */
  private packetIntervalMs(): number {
    if (this.playout !== null) return this.playout.packetIntervalMs;
    const measured = this.host.slice(0).seqIntervalMs;
    return Number.isNaN(measured) ? UNKNOWN_PACKET_INTERVAL_MS : measured;
  }

  setPlayout(now: number, playout: Playout): void {
    if (
      !(playout.packetIntervalMs > 0) ||
      !Number.isFinite(playout.zeroAtMs) ||
      !Number.isFinite(playout.fromMs)
    )
      throw new RangeError('playout needs a finite zeroAtMs and fromMs and a positive packetIntervalMs');
    const previous = this.playout;
    this.playout = playout;
    const slices = this.host.dataSlices;
    // A clock moved (a host re-anchors it on each deadline it learns) moves deadlines, not the trees:
    // each slice's lag is carried over so that its packets' expected arrival stays where it was,
    // measured at the newest packet held (where the next ones will be judged).
    if (previous !== null)
      for (let s = 0; s < slices; s++) {
        const lag = this.lagMs[s] ?? Number.NaN;
        if (Number.isNaN(lag)) continue;
        const seq = Math.max(0, this.host.slice(s).highestSeq);
        const shift = this.playTimeOn(previous, s, seq) - this.playTimeOn(playout, s, seq);
        this.lagMs[s] = lag + shift;
      }
    for (let s = 0; s < slices; s++) {
      const first = this.firstSeqPlayingAt(s, playout.fromMs);
      this.scanFrom[s] = Math.max(this.scanFrom[s] ?? -1, first);
      // Seed the lag from the newest packet held, so the first scan does not ask for everything.
      const st = this.host.slice(s);
      if (st.highestSeq >= 0 && Number.isNaN(this.lagMs[s] ?? Number.NaN)) {
        const at = st.arrivedAt(st.highestSeq);
        if (at > -Infinity) this.lagMs[s] = at - this.playTime(s, st.highestSeq);
      }
    }
    if (this.nextScanAt === Infinity) this.nextScanAt = now;
  }

  /**
   * The host needs packets [firstPacket, firstPacket + packets) by `atMs` (Input 'deadline'): their
   * deadline becomes the earlier of that and the clock's. Packets already missing take it at once.
   */
  setDeadline(firstPacket: number, packets: number, atMs: number): void {
    if (
      !Number.isSafeInteger(firstPacket) ||
      firstPacket < 0 ||
      !Number.isSafeInteger(packets) ||
      packets <= 0
    )
      throw new RangeError('a deadline span needs a whole firstPacket ≥ 0 and a whole packets > 0');
    if (!Number.isFinite(atMs)) throw new RangeError('a deadline span needs a finite atMs');
    const span: DeadlineSpan = { first: firstPacket, end: firstPacket + packets, atMs };
    const kept = this.spans.filter((x) => x.end <= span.first || x.first >= span.end);
    kept.push(span);
    if (kept.length > MAX_DEADLINE_SPANS) {
      kept.sort((a, b) => b.atMs - a.atMs);
      kept.length = MAX_DEADLINE_SPANS;
    }
    this.spans = kept;
    if (this.playout === null) return;
    const d = this.host.dataSlices;
    for (const m of this.missing.values()) {
      const n = m.seq * d + m.slice;
      if (n >= span.first && n < span.end)
        m.deadline = this.deadlineOf(m.slice, m.seq, this.playTime(m.slice, m.seq));
    }
  }

  setBacklog(peer: PeerId, bytes: number): void {
    if (Number.isFinite(bytes) && bytes >= 0) this.backlogBytes.set(peer, bytes);
  }

  /** A packet arrived by the tree: learn the slice's lag; a copy we were chasing is no longer needed. */
  onTreePacket(now: number, s: number, seq: number): void {
    if (this.playout === null) return;
    const sample = now - this.playTime(s, seq);
    const lag = this.lagMs[s] ?? Number.NaN;
    this.lagMs[s] = Number.isNaN(lag) ? sample : lag + LAG_SMOOTHING * (sample - lag);
    this.settle(s, seq);
  }

  /** The tree brought a packet we already held: if we had filled it, it was late, not lost. */
  onTreeDuplicate(s: number, seq: number): void {
    if (this.filled.delete(key(s, seq))) this.counters.falseAlarms++;
  }

  /**
   * The first packet of slice `s` that plays `settleMs` or more after our playback starts: before
   * that nobody repairs (a parent that lacks a packet then cannot make up for it). Infinity without
   * a playout clock.
   */
  firstSeqRepairedAfter(s: number, settleMs: number): number {
    if (this.playout === null) return Infinity;
    return this.firstSeqPlayingAt(s, this.playout.fromMs + settleMs);
  }

  /** The stream's packet interval per slice, from the playout clock (null without one). */
  playoutPacketIntervalMs(): number | null {
    return this.playout === null ? null : this.playout.packetIntervalMs;
  }

  /** A slice's sequence was forged and is forgotten (trust.ts): start its lag and scan afresh. */
  forgetSlice(s: number): void {
    if (s >= this.scanFrom.length) return;
    this.lagMs[s] = Number.NaN;
    this.scanFrom[s] = -1;
    for (const [k, m] of this.missing) {
      if (m.slice !== s) continue;
      this.missing.delete(k);
      this.releaseHelper(m);
    }
  }

  forgetPeer(peer: PeerId): void {
    this.inFlight.delete(peer);
    this.busyUntil.delete(peer);
    this.backlogBytes.delete(peer);
    for (const m of this.missing.values()) if (m.helper === peer) m.helper = null;
  }

  // ───────────────────────────── requester ─────────────────────────────

  tick(now: number): void {
    if (!this.enabled || now < this.nextScanAt) return;
    const p = this.host.protocol;
    this.nextScanAt = now + p.repairScanMs;
    this.scan(now);
    for (const [k, deadline] of this.filled) if (deadline < now) this.filled.delete(k);
    const dueForOrigin = new Map<number, number[]>();
    const toAsk: Missing[] = [];
    for (const [k, m] of this.missing) {
      if (m.deadline <= now) {
        this.missing.delete(k);
        this.releaseHelper(m);
        this.counters.packetsExpired++;
        continue;
      }
      if (m.fromOrigin) continue;
      // The origin check comes first: a helper still thinking must not hold up the last resort.
      // A slice source (fed by the true source) asks the origin at once: a packet lost on the
      // tree's first hop is missing in the whole tree, no neighbour can have it, and the copy
      // it fetches flows down to everyone in time.
      if (m.deadline - now <= this.originLeadMs || this.rootAsksOrigin(now, m)) {
        if (m.helper !== null) this.counters.originWhileAsking++;
        else if (m.tried.length === 0) this.counters.originNeverAsked++;
        this.releaseHelper(m);
        m.fromOrigin = true;
        let list = dueForOrigin.get(m.slice);
        if (list === undefined) dueForOrigin.set(m.slice, (list = []));
        list.push(m.seq);
        continue;
      }
      if (m.helper !== null) {
        if (now - m.askedAt < this.timeoutFor(m.helper) || now < m.waitUntil) continue;
        this.counters.repairTimeouts++;
        // No answer: the link to it is probably in a loss burst (or it is swamped); leave it alone
        // for a while for every packet, not just this one.
        if (m.waitUntil === -Infinity) this.busyUntil.set(m.helper, now + BUSY_BACKOFF_MS);
        m.tried.push(m.helper);
        this.releaseHelper(m);
        m.waitUntil = -Infinity;
      }
      if (m.tried.length < MAX_TRIES_PER_PACKET) toAsk.push(m);
    }
    for (const [s, seqs] of dueForOrigin) {
      seqs.sort((a, b) => a - b);
      this.counters.originPacketsRequested += seqs.length;
      this.host.fetchOrigin(s, seqs);
    }
    if (toAsk.length > 0) this.request(now, toAsk);
  }

  private scan(now: number): void {
    const p = this.host.protocol;
    const slices = this.host.dataSlices;
    let fallbackLag = Number.NaN;
    for (let s = 0; s < slices; s++) {
      const lag = this.lagMs[s] ?? Number.NaN;
      if (!Number.isNaN(lag) && (Number.isNaN(fallbackLag) || lag > fallbackLag)) fallbackLag = lag;
    }
    // No slice has told us its lag yet: nothing can be judged late.
    if (Number.isNaN(fallbackLag)) return;
    for (let s = 0; s < slices; s++) {
      const st = this.host.slice(s);
      const own = this.lagMs[s] ?? Number.NaN;
      const lag = Number.isNaN(own) ? fallbackLag : own;
      let seq = this.scanFrom[s] ?? 0;
      // The ring bounds how far back a packet can still be remembered, and a packet whose play
      // time has passed is not needed any more (this also bounds the loop after a long pause).
      if (st.highestSeq >= 0) seq = Math.max(seq, st.highestSeq - st.ringSize + 1);
      seq = Math.max(seq, this.firstSeqPlayingAt(s, now));
      for (;;) {
        const play = this.playTime(s, seq);
        const deadline = this.deadlineOf(s, seq, play);
        // Missing once overdue on its own path, or in any case when the deadline draws near (a path
        // that drifted later than the buffer would otherwise never be caught in time).
        if (now < Math.min(play + lag + p.repairGraceMs, deadline - 2 * this.originLeadMs)) break;
        if (!st.holds(seq) && deadline > now && !this.missing.has(key(s, seq))) {
          this.counters.packetsMissing++;
          this.missing.set(key(s, seq), {
            slice: s,
            seq,
            deadline,
            detectedAt: now,
            helper: null,
            askedAt: -Infinity,
            waitUntil: -Infinity,
            requestId: 0,
            tried: [],
            fromOrigin: false,
          });
          this.host.missing(s, seq);
        }
        seq++;
      }
      this.scanFrom[s] = seq;
    }
  }

  /** Earliest deadline first, spread over the helpers of each slice, a bounded window per helper. */
  private request(now: number, toAsk: Missing[]): void {
    const p = this.host.protocol;
    toAsk.sort((a, b) => a.deadline - b.deadline || a.slice - b.slice);
    const helpersBySlice = new Map<number, PeerId[]>();
    // A packet dealt before we rooted its slice has helpers of its own (see helpersFor).
    const helpersBeforeRootBySlice = new Map<number, PeerId[]>();
    const cursor = new Map<number, number>();
    const batches = new Map<PeerId, Map<number, Missing[]>>();
    for (const m of toAsk) {
      let chosen: PeerId | null = this.parentToAsk(now, m.slice, m);
      const beforeRoot = this.dealtBeforeWeRooted(m);
      const helpersOf = beforeRoot ? helpersBeforeRootBySlice : helpersBySlice;
      let helpers = helpersOf.get(m.slice);
      if (chosen === null && helpers === undefined)
        helpersOf.set(m.slice, (helpers = this.helpersFor(now, m.slice, beforeRoot)));
      if (chosen === null && (helpers === undefined || helpers.length === 0)) continue;
      if (chosen === null && helpers !== undefined) {
        // This packet's best `repairHelpers` among those it has not tried yet, in turn: a round
        // is split across them, and a NAK or timeout brings in the next best.
        const fit = helpers.filter((h) => !m.tried.includes(h)).slice(0, p.repairHelpers);
        const start = cursor.get(m.slice) ?? 0;
        for (let i = 0; i < fit.length; i++) {
          const h = fit[(start + i) % fit.length] ?? 0;
          if ((this.inFlight.get(h) ?? 0) >= p.repairWindowPackets) continue;
          chosen = h;
          cursor.set(m.slice, start + i + 1);
          break;
        }
      }
      if (chosen === null) continue;
      m.helper = chosen;
      m.askedAt = now;
      this.inFlight.set(chosen, (this.inFlight.get(chosen) ?? 0) + 1);
      let bySlice = batches.get(chosen);
      if (bySlice === undefined) batches.set(chosen, (bySlice = new Map<number, Missing[]>()));
      let list = bySlice.get(m.slice);
      if (list === undefined) bySlice.set(m.slice, (list = []));
      list.push(m);
    }
    for (const [helper, bySlice] of batches) {
      for (const [s, list] of bySlice) {
        list.sort((a, b) => a.seq - b.seq);
        let i = 0;
        while (i < list.length) {
          const base = list[i]?.seq ?? 0;
          let wanted = 0;
          const requestId = this.nextRequestId;
          this.nextRequestId = this.nextRequestId >= MAX_REQUEST_ID ? 1 : this.nextRequestId + 1;
          while (i < list.length) {
            const m = list[i] as Missing;
            const bit = m.seq - base;
            if (bit >= PACKET_REPAIR_SPAN) break;
            wanted = (wanted | (1 << bit)) >>> 0;
            m.requestId = requestId;
            i++;
          }
          this.counters.repairRequestsSent++;
          this.counters.repairPacketsRequested += bitCount32(wanted);
          const msg: PacketRepairRequestMessage = {
            type: MessageType.PacketRepairRequest,
            slice: s,
            requestId,
            baseSeq: base,
            wanted,
          };
          this.host.send(helper, msg);
        }
      }
    }
  }

  /**
   * Neighbours that can help on slice `s`, best first: they receive the slice, did not advertise our
   * mask (not downstream of us) nor, when our parent has gone quiet, the parent's (not below the
   * failure); never the true source, whose uplink is the stream's. The current parent is asked too
   * while it still sends: a lost packet on a working link is most likely still in its ring.
   * `beforeRoot`: a packet dealt before we rooted the slice went down the tree before us, so the
   * members now below us may hold it (a new root has nobody else to ask).
   */
  private helpersFor(now: number, s: number, beforeRoot = false): PeerId[] {
    const h = this.host;
    const st = h.slice(s);
    const myMask = beforeRoot ? null : h.maskOf(h.id);
    // Below our parent (its other children's subtrees) is where a loss above our parent also hit;
    // the parent itself is asked first on its own (parentToAsk).
    const parentMask = st.parent !== null ? h.maskOf(st.parent) : null;
    const scored: { peer: PeerId; shared: number; offset: number; tie: number }[] = [];
    const consider = (peer: PeerId): void => {
      if (peer === h.sourceId || peer === h.id) return;
      if ((this.busyUntil.get(peer) ?? -Infinity) > now) return;
      const ps = h.peer(peer);
      if (ps === undefined || !ps.hasAdvert || !ps.receiving(s)) return;
      if (myMask !== null && ps.filterContains(s, myMask)) return;
      if (parentMask !== null && (peer === st.parent || ps.filterContains(s, parentMask))) return;
      const offset = ps.sliceOffsets[s] ?? Number.NaN;
      const rtt = Number.isNaN(ps.rttMs) ? 0 : ps.rttMs;
      scored.push({
        peer,
        shared: ps.sharedFilterBits(s, st.filter),
        offset: Number.isNaN(offset) ? Infinity : offset + rtt / 2,
        tie: h.random.nextFloat(),
      });
    };
    for (const n of h.neighbours()) if (n !== st.parent) consider(n);
    // The ones holding the packet soonest first (the advertised arrival offset plus the way here):
    // asked right after we miss it, a neighbour further down its own tree does not have it yet.
    scored.sort((a, b) => a.offset - b.offset || a.shared - b.shared || a.tie - b.tie);
    return scored.map((x) => x.peer);
  }

  /**
   * While the parent still sends, a missing packet is asked of the parent alone first: a loss on our
   * own link is still in its ring, and a loss above it is one it is chasing itself (it answers
   * Pending and passes the copy down the tree), so a whole subtree does not ask the mesh at once.
   */
  private parentToAsk(now: number, s: number, m: Missing): PeerId | null {
    const st = this.host.slice(s);
    const parent = st.parent;
    if (parent === null || parent === this.host.sourceId || m.tried.includes(parent)) return null;
    if (
      now - st.lastDataAt >
      (this.playout?.packetIntervalMs ?? UNKNOWN_PACKET_INTERVAL_MS) * PARENT_SILENT_INTERVALS +
        this.host.protocol.repairGraceMs
    )
      return null;
    if ((this.busyUntil.get(parent) ?? -Infinity) > now) return null;
    return parent;
  }

  onRepairData(now: number, from: PeerId, msg: PacketRepairDataMessage): void {
    const k = key(msg.slice, msg.seq);
    const m = this.missing.get(k);
    // Only packets we are chasing, from a helper we asked: anything else is unsolicited (a late
    // answer after the tree copy came, or a peer pushing bytes we never requested) and dropped.
    if (m === undefined || (m.helper !== from && !m.tried.includes(from))) {
      this.counters.repairPacketsUnsolicited++;
      return;
    }
    if (m.helper === from) this.releaseHelper(m);
    this.counters.repairPacketsReceived++;
    this.deliver(now, msg.slice, msg.seq, msg.hops, from, msg.payload, 'repair');
  }

  /** A packet rebuilt from the parity slice. */
  onParityRecovered(now: number, s: number, seq: number, payload: Uint8Array): void {
    this.counters.parityRecovered++;
    this.deliver(now, s, seq, 0, this.host.id, payload, 'parity');
  }

  onOriginPacket(now: number, s: number, seq: number, payload: Uint8Array): void {
    this.counters.originPacketsReceived++;
    this.deliver(now, s, seq, 0, this.host.sourceId, payload, 'origin');
  }

  private deliver(
    now: number,
    s: number,
    seq: number,
    hops: number,
    from: PeerId,
    payload: Uint8Array,
    via: DeliveryPath,
  ): void {
    const k = key(s, seq);
    const m = this.missing.get(k);
    const st = this.host.slice(s);
    if (!st.remember(seq, payload, now)) {
      // Already held (the tree copy won the race), or older than the ring remembers.
      this.counters.duplicatesRepaired++;
      return;
    }
    if (seq > st.highestSeq) {
      st.highestSeq = seq;
      st.highestSeqAt = now;
      st.highestSeqFrom = -1;
    }
    this.missing.delete(k);
    if (m !== undefined) this.filled.set(k, m.deadline);
    this.host.accept({ slice: s, seq, hops, from, payload, via, missingSinceMs: m?.detectedAt ?? now });
  }

  onRepairNak(now: number, from: PeerId, msg: PacketRepairNakMessage): void {
    if (msg.reason === RepairNakReason.Busy) {
      this.counters.repairNaksBusy++;
      this.busyUntil.set(from, now + BUSY_BACKOFF_MS);
    } else if (msg.reason === RepairNakReason.Pending) this.counters.repairNaksPending++;
    else this.counters.repairNaksNotHeld++;
    let retry = false;
    for (let bit = 0; bit < PACKET_REPAIR_SPAN; bit++) {
      if (((msg.unserved >>> bit) & 1) === 0) continue;
      const m = this.missing.get(key(msg.slice, msg.baseSeq + bit));
      if (m === undefined || m.helper !== from) continue;
      // Pending helps only from our parent: the copy it is chasing comes down to us. Anyone else
      // chasing it is no better than one that does not hold it.
      if (msg.reason === RepairNakReason.Pending && from === this.host.slice(msg.slice).parent) {
        // It will come down the tree (repaired or fetched from the origin above us); our own
        // origin fetch stays the backstop.
        m.waitUntil = Math.min(m.deadline - this.originLeadMs, now + this.host.protocol.repairPendingWaitMs);
        continue;
      }
      m.tried.push(from);
      this.releaseHelper(m);
      retry = true;
    }
    // Ask the next helper at once rather than on the next scan: the deadline is running.
    if (retry) this.nextScanAt = now;
  }

  private settle(s: number, seq: number): void {
    const m = this.missing.get(key(s, seq));
    if (m === undefined) return;
    this.missing.delete(key(s, seq));
    this.releaseHelper(m);
  }

  private releaseHelper(m: Missing): void {
    if (m.helper === null) return;
    const count = this.inFlight.get(m.helper) ?? 0;
    if (count <= 1) this.inFlight.delete(m.helper);
    else this.inFlight.set(m.helper, count - 1);
    m.helper = null;
  }

  /**
   * A slice root takes its missing packet from the origin `rootOriginWaitMs` after finding it
   * missing: nobody else can have a packet lost on the tree's first hop. Not one dealt before it
   * rooted the slice (a joiner made root, a replacement root): that one went down the tree before
   * it, and the tree's members may hold it.
   */
  private rootAsksOrigin(now: number, m: Missing): boolean {
    const st = this.host.slice(m.slice);
    const root = st.isSliceSource ? !this.dealtBeforeWeRooted(m) : st.parent === this.host.sourceId;
    return root && now - m.detectedAt >= this.host.protocol.rootOriginWaitMs;
  }

  /** We root the packet's slice, and the true source dealt the packet before it made us root. */
  private dealtBeforeWeRooted(m: Missing): boolean {
    const st = this.host.slice(m.slice);
    return st.isSliceSource && m.seq < st.rootFromSeq;
  }

  /** How close to its deadline a missing packet goes to the origin (see Input 'playout'). */
  private get originLeadMs(): number {
    const configured = this.host.protocol.originLeadMs;
    const rtt = this.playout?.originRttMs;
    if (rtt === undefined || !Number.isFinite(rtt) || rtt < 0) return configured;
    return Math.min(configured, ORIGIN_RTT_FACTOR * rtt + ORIGIN_MARGIN_MS);
  }

  private timeoutFor(helper: PeerId): number {
    const rtt = this.host.peer(helper)?.rttMs ?? Number.NaN;
    const p = this.host.protocol;
    return Number.isNaN(rtt)
      ? p.repairTimeoutMs
      : Math.min(p.repairTimeoutMs, HELPER_RTT_FACTOR * rtt + HELPER_MARGIN_MS);
  }

  private playTime(s: number, seq: number): number {
    return this.playTimeOn(this.playout as Playout, s, seq);
  }

  private playTimeOn(pl: Playout, s: number, seq: number): number {
    return pl.zeroAtMs + (seq + s / this.host.dataSlices) * pl.packetIntervalMs;
  }

  /**
   * A packet's repair deadline: its play time on the clock, or a host span's earlier deadline. Never
   * later than the clock's, so the clock alone can still tell which packets are past needing.
   */
  private deadlineOf(s: number, seq: number, play: number): number {
    if (this.spans.length === 0) return play;
    const n = seq * this.host.dataSlices + s;
    for (const span of this.spans) if (n >= span.first && n < span.end) return Math.min(play, span.atMs);
    return play;
  }

  private firstSeqPlayingAt(s: number, atMs: number): number {
    const pl = this.playout as Playout;
    const x = (atMs - pl.zeroAtMs) / pl.packetIntervalMs - s / this.host.dataSlices;
    return Math.max(0, Math.ceil(x - 1e-9));
  }

  // ───────────────────────────── helper ─────────────────────────────

  onRepairRequest(now: number, from: PeerId, msg: PacketRepairRequestMessage): void {
    const h = this.host;
    const st = h.slice(msg.slice);
    const capPerWindow = this.servingCap();
    this.trimServed(now);
    const backedUp = (this.backlogBytes.get(from) ?? 0) > h.protocol.repairBacklogLimitBytes;
    let notHeld = 0;
    let pending = 0;
    let busy = 0;
    for (let bit = 0; bit < PACKET_REPAIR_SPAN; bit++) {
      if (((msg.wanted >>> bit) & 1) === 0) continue;
      const seq = msg.baseSeq + bit;
      const payload = st.payloadOf(seq);
      if (payload === undefined) {
        if (this.missing.has(key(msg.slice, seq))) pending = (pending | (1 << bit)) >>> 0;
        else notHeld = (notHeld | (1 << bit)) >>> 0;
        continue;
      }
      if (backedUp || this.served.length >= capPerWindow) {
        busy = (busy | (1 << bit)) >>> 0;
        this.counters.repairPacketsRefusedBusy++;
        continue;
      }
      this.served.push(now);
      this.counters.repairPacketsServed++;
      h.send(from, {
        type: MessageType.PacketRepairData,
        slice: msg.slice,
        requestId: msg.requestId,
        seq,
        hops: Math.min(MAX_HOPS, st.hops),
        payload,
      });
    }
    if (busy !== 0)
      h.send(from, {
        type: MessageType.PacketRepairNak,
        slice: msg.slice,
        requestId: msg.requestId,
        baseSeq: msg.baseSeq,
        unserved: busy,
        reason: RepairNakReason.Busy,
      });
    if (pending !== 0)
      h.send(from, {
        type: MessageType.PacketRepairNak,
        slice: msg.slice,
        requestId: msg.requestId,
        baseSeq: msg.baseSeq,
        unserved: pending,
        reason: RepairNakReason.Pending,
      });
    if (notHeld !== 0)
      h.send(from, {
        type: MessageType.PacketRepairNak,
        slice: msg.slice,
        requestId: msg.requestId,
        baseSeq: msg.baseSeq,
        unserved: notHeld,
        reason: RepairNakReason.NotHeld,
      });
  }

  /**
   * Packets this node may serve per SERVE_WINDOW_MS: repairUploadShare·TL slices, at least one;
   * none for a receive-only member (ML = 0), whose host found its uplink cannot carry one slice.
   */
  private servingCap(): number {
    const h = this.host;
    if (h.maxLoad === 0) return 0;
    const interval = this.packetIntervalMs();
    const slices = Math.max(1, h.protocol.repairUploadShare * h.targetLoad);
    return Math.max(1, Math.floor((slices * SERVE_WINDOW_MS) / Math.max(1, interval)));
  }

  private trimServed(now: number): void {
    let drop = 0;
    while (drop < this.served.length && (this.served[drop] ?? 0) <= now - SERVE_WINDOW_MS) drop++;
    if (drop > 0) this.served = this.served.slice(drop);
  }
}
