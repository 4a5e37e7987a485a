import {
  MAX_LOAD_FIELD,
  ForcedReason,
  MessageType,
  type InstructionMessage,
  type LoadCandidate,
  type LoadReportMessage,
  type PeerId,
} from '@chunkycast/wire';
import { LatencyEstimate } from './config.js';
import { estimatedArrivalVia, expectedArrivalVia, type PhaseHost } from './phase-host.js';
import type { SliceState } from './state.js';

/** Load reports kept per decision round; more would only repeat the same candidates. */
const MAX_STORED_REPORTS = 64;
/**
 * A load switch may make a slice arrive later, but not by more than this (estimated like the latency
 * phase's gains; their noise is ±200 ms). Not in the thesis, which balances load regardless.
 */
const LOAD_SWITCH_MAX_PENALTY_MS = 600;
/** Candidates in one load report: enough choice for the parent, small on the wire. */
const REPORT_CANDIDATES = 4;

interface StoredReport {
  readonly child: PeerId;
  readonly slice: number;
  readonly candidates: readonly LoadCandidate[];
}

/**
 * The load phase (thesis §4.2, fine-tuning load), both sides. A child whose parent is above its TL
 * reports neighbours that could take it (`childReports`); the parent, once a round, tells one
 * reported child (several above ML) to move to the least loaded of them (`parentDecision`); the
 * child then asks that neighbour with a load switch request (`onInstruction`).
 */
export class LoadPhase {
  private reports: StoredReport[] = [];
  /** Children we told to move, by slice, and until when we wait for that switch (parentDecision). */
  private readonly instructedUntil = new Map<PeerId, Map<number, number>>();

  constructor(private readonly host: PhaseHost) {}

  private slice(s: number): SliceState {
    return this.host.slices[s] as SliceState;
  }

  /** A peer is gone: its reports and our instructions to it go with it. */
  forgetPeer(peer: PeerId): void {
    this.instructedUntil.delete(peer);
    this.reports = this.reports.filter((r) => r.child !== peer);
  }

  /** Instructions whose switch neither happened nor was refused in time are forgotten. */
  expireInstructions(): void {
    const now = this.host.now;
    for (const [peer, slices] of this.instructedUntil) {
      for (const [s, until] of slices) if (until <= now) slices.delete(s);
      if (slices.size === 0) this.instructedUntil.delete(peer);
    }
  }

  onLoadReport(from: PeerId, msg: LoadReportMessage): void {
    const entry = this.slice(msg.slice).children.get(from);
    if (entry?.untilSeq !== Infinity) return;
    this.reports = this.reports.filter((r) => !(r.child === from && r.slice === msg.slice));
    if (this.reports.length >= MAX_STORED_REPORTS) this.reports.shift();
    this.reports.push({ child: from, slice: msg.slice, candidates: msg.candidates });
  }

  onInstruction(from: PeerId, msg: InstructionMessage): void {
    const s = msg.slice;
    const st = this.slice(s);
    // One hand-off at a time per slice: a second would cut short the first one's old parent.
    if (st.parent !== from || st.pending !== null || st.oldParent !== null) return;
    const q = this.host.peers.get(msg.target);
    if (q === undefined || msg.target === this.host.id || !this.host.isNeighbour(msg.target)) return;
    if (!this.host.eligibleParent(q, msg.target, s, st)) return;
    if (q.load < q.targetLoad) {
      this.host.sendSwitchRequest(s, msg.target, q, from, 'load');
      return;
    }
    // A parent above its ML may send us to a neighbour at or above its TL but below its ULT, which a
    // load switch would refuse (it must raise an underloaded node): the parent cannot carry us, so
    // we leave it as a quitting parent's child does — a forced request for a hand-off one lead
    // ahead, refused only above ML or on a loop (thesis §4.2, initial tree construction and forced parent selection) — to a target that stays in range.
    const parent = this.host.peers.get(from);
    if (parent?.hasAdvert === true && parent.load > parent.maxLoad && q.load + 1 <= q.upperLatencyThreshold)
      this.host.sendForced(s, msg.target, ForcedReason.ParentQuit);
  }

  /** The load above which a member sheds children: its TL, or its ULT (loadShedAboveUlt). */
  private shedAbove(member: { readonly targetLoad: number; readonly upperLatencyThreshold: number }): number {
    return this.host.config.protocol.loadShedAboveUlt === 1
      ? member.upperLatencyThreshold
      : member.targetLoad;
  }

  /** Overloaded parent: pick one reported child among a set of good candidates (thesis §4.2, fine-tuning load). */
  parentDecision(): void {
    const reports = this.reports;
    this.reports = [];
    if (this.host.load <= this.shedAbove(this.host.config) || reports.length === 0) return;
    const overloaded = this.host.load > this.host.config.upperLatencyThreshold;
    // Above ML our children report neighbours below their ULT as well (childLoadReports).
    const overMax = this.host.load > this.host.config.maxLoad;
    const options: { child: PeerId; slice: number; candidate: LoadCandidate }[] = [];
    for (const r of reports) {
      if (this.slice(r.slice).children.get(r.child)?.untilSeq !== Infinity) continue;
      // A child we told to move is left alone until that switch is done or abandoned; above ML only
      // on that slice (its reports then name every slice, see childLoadReports).
      const instructed = this.instructedUntil.get(r.child);
      if (instructed !== undefined && (!overMax || instructed.has(r.slice))) continue;
      for (const c of r.candidates) {
        if (
          c.peer !== r.child &&
          c.peer !== this.host.id &&
          (overMax || c.load < (overloaded ? c.targetLoad : c.lowerLatencyThreshold))
        )
          options.push({ child: r.child, slice: r.slice, candidate: c });
      }
    }
    if (options.length === 0) return;
    // Most underloaded first (below LLT before merely below TL); then a random one of the best few,
    // so not every parent picks the same target.
    options.sort(
      (a, b) =>
        a.candidate.load -
        a.candidate.lowerLatencyThreshold -
        (b.candidate.load - b.candidate.lowerLatencyThreshold),
    );
    // One child per round, as in the thesis (thesis §4.2, fine-tuning load). Above ML — only after `setLoad` lowered
    // it, since admission never passes ML — our uplink cannot carry what we forward and every round
    // costs all our children late packets: move up to load − ML children at once, each to its own
    // target, so one target is not asked twice (the anti-implosion rule still picks among the best).
    let moves = Math.max(1, this.host.load - this.host.config.maxLoad);
    let remaining = options;
    while (moves > 0 && remaining.length > 0) {
      const pick =
        remaining[
          this.host.random.int(Math.min(this.host.config.protocol.candidateSetSize, remaining.length))
        ];
      if (pick === undefined) return;
      let instructed = this.instructedUntil.get(pick.child);
      if (instructed === undefined) {
        instructed = new Map();
        this.instructedUntil.set(pick.child, instructed);
      }
      instructed.set(pick.slice, this.host.now + this.host.config.protocol.requestTimeoutMs);
      this.host.send(pick.child, {
        type: MessageType.Instruction,
        slice: pick.slice,
        target: pick.candidate.peer,
        targetLoadSeen: Math.min(MAX_LOAD_FIELD, pick.candidate.load),
      });
      moves--;
      // And one move per slice: two children of one slice, each told to move into the other's
      // subtree (each loop-free as it saw it), made a loop and left the slice to nobody.
      if (moves > 0)
        remaining = remaining.filter(
          (o) => o.slice !== pick.slice && o.candidate.peer !== pick.candidate.peer,
        );
    }
  }

  /** Child side of the load phase (thesis §4.2, fine-tuning load): tell an overloaded parent who could take us. */
  childReports(): void {
    const reported = new Set<PeerId>();
    const neighbours = this.host.neighbours();
    const byPath = this.host.config.protocol.latencyEstimate === LatencyEstimate.Path;
    for (let s = 0; s < this.host.slices.length; s++) {
      const st = this.slice(s);
      const parentId = st.parent;
      if (parentId === null || st.isSliceSource || st.pending !== null || st.oldParent !== null) continue;
      const parent = this.host.peers.get(parentId);
      if (parent?.hasAdvert !== true || parent.load <= this.shedAbove(parent)) continue;
      // One report per parent per round (thesis §4.2, fine-tuning load), but one per slice to a parent above ML, which
      // moves up to load − ML children a round (parentLoadDecision): one report per child and round
      // let a root left with two or three children shed one slice per child every few seconds.
      if (reported.has(parentId) && parent.load <= parent.maxLoad) continue;
      // Above ULT, any neighbour below its TL may take us; between TL and ULT, only one below its LLT
      // (pulling it into its range while the parent stays in its own).
      const overloaded = parent.load > parent.upperLatencyThreshold;
      // Above ML (after `setLoad`: its uplink cannot carry what it forwards), also a neighbour at or
      // above its TL but below its ULT: it stays in its range. Seen: a member at TL 16 was the only
      // loop-free place for a child of a member at load 11, ML 8, which then stayed there for good.
      const overMax = parent.load > parent.maxLoad;
      let candidates: { candidate: LoadCandidate; arrival: number; relayed: boolean }[] = [];
      // Our own arrival now, as the candidates' is estimated: through our parent's path estimate,
      // or our measured offset once it has caught up with this parent (Infinity: not yet known).
      const ourArrival = byPath
        ? estimatedArrivalVia(this.host, parent, s)
        : st.offsetSettled()
          ? st.offsetMs
          : Infinity;
      for (const qId of neighbours) {
        if (qId === parentId) continue;
        const q = this.host.peers.get(qId);
        const room = overMax
          ? q?.upperLatencyThreshold
          : overloaded
            ? q?.targetLoad
            : q?.lowerLatencyThreshold;
        if (q === undefined || room === undefined || q.load >= room) continue;
        if (!this.host.eligibleParent(q, qId, s, st)) continue;
        if (ourArrival !== Infinity) {
          // Not a neighbour through which the slice would come far later than now: moving a whole
          // subtree several levels down stalls it for seconds (seen: 3 s) before the latency phase
          // can bring it back up. Arrival alone, without the relayed-link penalty: this guards
          // against delay, not cost.
          const via = estimatedArrivalVia(this.host, q, s);
          const bias = byPath ? 0 : this.host.offsets.neighbourBias(qId, q);
          if (via !== Infinity && via + bias - ourArrival > LOAD_SWITCH_MAX_PENALTY_MS) continue;
        }
        candidates.push({
          candidate: {
            peer: qId,
            load: q.load,
            lowerLatencyThreshold: q.lowerLatencyThreshold,
            targetLoad: q.targetLoad,
          },
          arrival: expectedArrivalVia(this.host, q, s),
          relayed: this.host.avoidLink(q),
        });
      }
      // The parent picks by load alone, so a relayed candidate is offered only when no direct one
      // is, and only to relieve a parent above ULT: balancing within the range is not worth a relay.
      if (!overloaded || candidates.some((c) => !c.relayed))
        candidates = candidates.filter((c) => !c.relayed);
      if (candidates.length === 0) continue;
      // Offer the underloaded (below TL) neighbours through which the slice would arrive earliest:
      // the parent then picks the least loaded of them (thesis §4.2, fine-tuning load), and load switches stop
      // deepening trees.
      // (Above ML, those below their TL first.)
      const full = (c: LoadCandidate): number => (c.load >= c.targetLoad ? 1 : 0);
      candidates.sort(
        (a, b) =>
          full(a.candidate) - full(b.candidate) ||
          a.arrival - b.arrival ||
          a.candidate.load - b.candidate.load,
      );
      reported.add(parentId);
      this.host.send(parentId, {
        type: MessageType.LoadReport,
        slice: s,
        candidates: candidates.slice(0, REPORT_CANDIDATES).map((c) => c.candidate),
      });
    }
  }
}
