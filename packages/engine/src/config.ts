import { MAX_SLICES, type PeerId } from '@chunkycast/wire';

/** How the latency phase estimates arrival through a neighbour (ProtocolConfig.latencyEstimate). */
export const LatencyEstimate = { Offset: 0, Path: 1 } as const;
export type LatencyEstimate = (typeof LatencyEstimate)[keyof typeof LatencyEstimate];

/**
 * Protocol parameters. Line numbers (L…) point into the thesis (shared/seeds/003_…txt, Chapter 4).
 * Where the thesis leaves a value open, the reason for our choice is written beside it, and the
 * simulator can override it (`npm run sim -- --set name=value`) to show its effect
 * (docs/reproduction.md, "Choices the thesis leaves open").
 */
export interface ProtocolConfig {
  /** M, slices per stream. Default 16 (thesis §4.2, overview: "gave a satisfactory load control as well as an acceptable overhead"). */
  readonly slices: number;
  /** MND, the smallest Swaplinks degree. 8 (thesis §4.2, parameters: "as far as we know, this value is universally appropriate"). */
  readonly minNodeDegree: number;
  /** MinL, the expected smallest target load in slices (thesis §4.2, parameters). 4 = the smallest TL of the thesis's population (thesis §4.4, experimental setup). */
  readonly minLoadSlices: number;
  /**
   * Half-width of the LLT–ULT range as a fraction of TL. Lat2 = 2·TL/16 = 0.125 (thesis §4.4, experimental setup);
   * Lat0 = 0, i.e. LLT = ULT = TL (thesis §4.4, experimental setup).
   */
  readonly latencyRangeFraction: number;
  /** ML as a multiple of TL when the host gives no maximum: 1.5 (thesis §4.4, experimental setup). */
  readonly maxLoadFactor: number;
  /** Heartbeat (and advertisement) period: 1 s (thesis §4.4, experimental setup). */
  readonly heartbeatMs: number;
  /** A peer silent this long is declared failed: 4 s (thesis §4.4, experimental setup). */
  readonly failureTimeoutMs: number;
  /**
   * A slice source heartbeats the true source this often, and the true source gives a root up after
   * `rootFailureTimeoutMs` of silence. Not in the thesis, which has one heartbeat (1 s) and timeout
   * (4 s) for every peer: a root's failure starves its whole tree (1/M of every member's stream)
   * until the true source replaces it and the new root's tree is flooded, so waiting the full 4 s
   * there set the 90th percentile of recovery after a failure burst (5000 members: 4.8–6.0 s from
   * detection, against a goal of 5 s). Sixteen roots beating twice as often as the others cost the
   * true source 16 messages a second more. 1.5 s is three beats of 500 ms, the thesis's ratio of
   * timeout to heartbeat less one: a root is fed by the true source itself, one hop, so its beats
   * are not queued behind a tree's worth of relaying.
   */
  readonly rootHeartbeatMs: number;
  /** Never longer than failureTimeoutMs in effect (the true source uses the smaller of the two). */
  readonly rootFailureTimeoutMs: number;
  /** Parent-switch decisions are made every second (thesis §4.4, experimental setup). */
  readonly decisionIntervalMs: number;
  /**
   * Swaplinks walk length (hops). Not in the thesis (Swaplinks is ref. [66]). A random graph of
   * degree ≥ 8 mixes in about log₈ N ≈ 4 steps at N = 5000; 6 leaves margin while keeping a join
   * to ~6 one-way latencies (≈2.4 s at the thesis's 400 ms median).
   */
  readonly walkLength: number;
  /** A walk not answered within this time is presumed lost (a node on its path failed) and retried. */
  readonly walkTimeoutMs: number;
  /**
   * Latency-switch margin in ms: switch only when the expected gain beats it (thesis §4.2, fine-tuning latency: "a certain
   * margin", value not given). 100 ms = a quarter of the thesis's median network latency: a smaller
   * margin chased noise (more switches, never settling), a larger one gave up latency (the sweep is
   * in docs/reproduction.md).
   */
  readonly latencySwitchMarginMs: number;
  /**
   * Not in the thesis, whose links are all direct. A link the host reports as relayed (`linkRoute`
   * input: a WebRTC link through a TURN server, the only path between two viewers behind symmetric
   * NATs) counts as this much extra arrival time wherever parents are compared: a neighbour's
   * expected arrival through it (latency phase, load-report candidate order), and our current
   * parent's over it (latency phase). Forced requests and flood choices take a relayed neighbour
   * only when no direct one qualifies. A relayed link is never refused: a viewer whose only
   * neighbours are relayed still gets every slice. 0 turns the preference off.
   *
   * Why 400 ms: on the internet a TURN detour adds about one extra hop of round trip (tens to
   * hundreds of ms; the measured RTT includes it, so the latency phase already sees that part), and
   * every byte crosses the broadcaster's relay twice, a cost beyond delay. 400 ms is the thesis's
   * median one-way latency (thesis §4.4, experimental setup), about one tree level: a direct parent is preferred even one
   * level deeper. It must exceed `latencySwitchMarginMs` (100) so that a child leaves a relayed
   * parent for a direct neighbour of similar arrival (gain ≈ 400 > 100) and takes a relayed one
   * only if it gets the slice over 500 ms earlier; and it must stay well under a second, so that a
   * child does not leave a relayed parent for direct ones whose slice comes seconds later (it leaves
   * only for one at most 300 ms later). The load phase's limit on how much later a candidate may
   * deliver (600 ms) looks at arrival alone, without the penalty.
   */
  readonly relayedLinkPenaltyMs: number;
  /**
   * Weight of the newest block in the moving average of relative slice arrival offsets (thesis §4.2, fine-tuning latency:
   * "calculated as a moving average", window not given). 0.2 ≈ a window of 5 blocks: smooths one
   * late packet, follows a parent change within a few seconds.
   */
  readonly offsetSmoothing: number;
  /**
   * After a latency switch of a slice, that slice is left alone for this long, doubling with each
   * further latency switch of it (not in the thesis). Made for the relative-offset estimate, which is
   * noisy (about a fifth of switches made the slice later in our measurements): there it roughly
   * halves the rate by the end of a run but does not end the latency phase. With path estimates it
   * neither helps nor hurts measurably (1 s and 5 s ended static 1000-member runs within a second of
   * each other); kept at 5 s (docs/reproduction.md, "Convergence").
   */
  readonly latencyBackoffMs: number;
  /**
   * How a slice's arrival through a neighbour is estimated where parents are compared (latency
   * phase, load-report candidates). Both need no clock sync.
   * - `LatencyEstimate.Offset` (0), the thesis's (§4.2, fine-tuning latency): our measured relative
   *   offset of the slice against the neighbour's advertised one plus half the round trip. The two
   *   offsets are relative to two different means, off by hundreds of ms wherever the neighbour
   *   feeds us no slice to measure the difference; about a fifth of switches made a slice later, and
   *   the phase never ended (docs/reproduction.md, "Convergence").
   * - `LatencyEstimate.Path` (1, the default; issue 16): each member advertises, per slice, its
   *   parent's advertised path estimate plus half the round trip to that parent (0 at the root):
   *   the link delays down its branch. The neighbour's estimate plus half our round trip to it is
   *   compared with our parent's plus half ours to it: like with like, so a latency switch lowers
   *   the switcher's and its subtree's estimates by more than the margin and raises no one's (the
   *   phase can end: see latencyPhaseEnds for what else keeps it going). Latency at 5000 members,
   *   p90 max / avg: static 5.37 / 3.75 against 5.43 / 3.82 with offsets. It does not see queueing
   *   or processing in the parents (the offsets do); the thesis names path length as the
   *   alternative metric (its §4.2), and this is path length weighted by delay.
   */
  readonly latencyEstimate: LatencyEstimate;
  /**
   * 1: a latency phase that ends by itself (issue 16; not in the thesis). A latency switch fills its
   * target only to its TL (thesis: ULT), and a parent counts a permission it granted until the child
   * leaves (thesis: one decision a round, so a parent granted again before the first child had
   * gone and fell below its LLT). Either alone kept the load and latency phases trading children to
   * the end of a run: 50 load and 150 latency switches a second at 1000 members. With both and path
   * estimates the static run's switching ends (1000 members: 105 s) and its latency improves
   * (5000 members, seeds 1 and 2: p90 maximum 5.16 and 5.19 against 5.43 before), but joiners find
   * less room: `join` at 5000 members got p90 maximum / average 6.41 / 4.72 against 6.04 / 4.24.
   * 0, the default: the thesis's rules, switching to the end, the better latency where members join
   * (docs/reproduction.md, "Convergence").
   */
  readonly latencyPhaseEnds: number;
  /**
   * Hysteresis of the latency phase (issue 16; not in the thesis): a slice that made k latency
   * switches needs a gain of latencySwitchMarginMs × latencyMarginGrowth^k for the next. The thesis's
   * simulator computed latencies; here offsets are measured from packets, and about a fifth of
   * switches made a slice later (docs/reproduction.md, "Convergence"), so a fixed margin is beaten by
   * noise now and then for ever: the phase never settled. With a growing margin each slice's chance
   * of a noise-driven switch falls geometrically with its switches, so the phase ends, while a real
   * gain, which is large (a median 689 ms predicted at 1000 members), still gets through. 1 keeps
   * the margin fixed (the thesis), the default: see latencyWindowMs for why all three are off.
   */
  readonly latencyMarginGrowth: number;
  /**
   * A slice's latency phase runs for this long after it was last placed in its tree by a forced
   * choice (joining, a flood, a lost parent), then stops until the next one (issue 16; not in the
   * thesis). 0: no limit, the default. Why a window: see latencyMarginGrowth; switches kept coming
   * at a steady rate long after loads settled, most of them a slice's first or second, which a
   * growing margin alone does not stop. Why off: with 40 s, 2 and 4 (latencySwitchesInFlight) the
   * static runs at 5000 members settled (last switch 60.6–73.8 s, seeds 1–3, against 119 s) but
   * their p90 maximum latency rose 27–36%, and the join run neither settled (joiners' forced
   * switches reopen windows to the end) nor kept its latency (+69%): docs/reproduction.md,
   * "Convergence". With path estimates (issue 16, later): 50 s, 4 in flight and a 2 s back-off
   * ended a static 5000-member run at 64 s but left p90 maximum latency 6.5% above the same run
   * without a window (5.49 against 5.16), and at 1000 members in `join`, where the graph keeps
   * changing under the trees, it was 8.14 against 5.37. It stays off, for `--set` experiments.
   */
  readonly latencyWindowMs: number;
  /**
   * 1: a member's new Swaplinks neighbour opens the latency window of every slice of it again
   * (latencyWindowMs then counts from the later of the slice's placement and the newest neighbour;
   * issue 16, not in the thesis). Why: with a window counted from placement alone, `join` at 5000
   * members kept its latency only with a window too long for `static` to end by 60 s. Joiners change
   * the graph under trees that were placed long before, and the members around them are the ones
   * with new parents to consider; in `static` the graph stays as installed, so its windows close as
   * before. With loadShedAboveUlt, latencyTriggers, 4 in flight and a 50 s window, at 5000 members,
   * seeds 1–3: `static` ends by 55–56 s and `join` by 106–116 s, `join`'s p90 latency within −3% to
   * +2% of the default's, `static`'s maximum 1.4–3.8% worse (docs/reproduction.md, "A window that
   * follows the neighbourhood"). 0, the default: off.
   */
  readonly latencyWindowFromNeighbours: number;
  /**
   * Latency switches a member may have in flight at once, on distinct slices with distinct parents
   * and targets (the thesis does not say; one at a time was this engine's rule before issue 16).
   * With a latency phase that ends (latencyWindowMs), one at a time found too little of the latency
   * a phase without end found in 120 s. Default 1 (off), with latencyWindowMs. 8 and 16 did no
   * better than 4 at 5000 members (docs/reproduction.md, "The option set's knobs").
   */
  readonly latencySwitchesInFlight: number;
  /**
   * 1: the latency phase reacts to room as it appears rather than once a round (issue 16; not in
   * the thesis). A member whose load falls to where a latency switch could fill it (below its TL with
   * latencyPhaseEnds, its ULT without) adverts at once instead of at its next round, and a member whose
   * neighbour's advert shows such room runs its latency phase at once. Why: after the load phase,
   * nearly every latency switch goes to a parent that has just lost a child (91-99% of them between
   * 10 and 70 s at 1000 members): the room a switch frees is what the next one takes, a chain in
   * which each step waited for an advert and a round (about a second of a ~3 s step). Measured with
   * latencyPhaseEnds and 4 in flight, it ends static runs sooner (1000 members: last switch 107 →
   * 91 s) but not by 60 s; 0, the default: off (docs/reproduction.md, "Latency switches follow the
   * room").
   */
  readonly latencyTriggers: number;
  /**
   * 1: the thesis's load phase (§4.2, fine-tuning load: "an overloaded parent (above the parent's
   * ULT)"): a parent sheds children only above its ULT, and no load switch moves a child between
   * members inside their LLT–ULT ranges. 0, the default: a parent above its TL also moves a child to
   * a neighbour below its LLT, which fills members below their range sooner; with latency switches
   * that fill a target to its ULT the two phases trade children to the end of a run (see
   * latencyPhaseEnds). With 1 the latency phase runs down by itself: at 5000 members, with
   * latencyTriggers, 4 switches in flight and a 60 s window, `join` ends switching by 111–112 s
   * and `static` by 65–74 s (seeds 1–3; the default switches to the end), but 82–87% of members
   * end inside LLT–ULT against 97%, and `join`'s average latency is 3–5% worse
   * (docs/reproduction.md, "The thesis's load rule"). Issue 16, part 2; off by default.
   */
  readonly loadShedAboveUlt: number;
  /**
   * Anti-implosion set size: a parent picks at random among this many best candidates, not the
   * single best (thesis §4.2, fine-tuning latency, size not given). 3 spreads simultaneous requests over 3 targets while
   * staying near the best.
   */
  readonly candidateSetSize: number;
  /**
   * How far ahead (ms of stream) a switch's hand-off sequence number lies (thesis §4.2, fine-tuning load, not given).
   * A switch needs request → accept → completion, three one-way trips; at the thesis's 650 ms
   * maximum latency that is < 2 s, so with a 2 s lead the old parent usually stops exactly where the
   * new one starts: no loss, no duplicates.
   */
  readonly handoffLeadMs: number;
  /**
   * "Changed significantly" abort rule (thesis §4.2, fine-tuning load, not given): a latency switch is refused when
   * the target's load has risen by more than this many slices since the child decided.
   */
  readonly switchAbortLoadDelta: number;
  /**
   * After the first flooded packet of a new tree, wait this long for more before choosing a parent
   * (thesis §4.2, initial tree construction and forced parent selection "shortly after", not given). Only senders at the fewest hops qualify, and those are
   * heard first, so a short wait suffices, and a shorter wait shortens recovery after a failure burst
   * (measured in docs/reproduction.md).
   */
  readonly floodCollectMs: number;
  /** Packets per slice kept for hand-offs and for a new child that lost its parent. */
  readonly resendWindowPackets: number;
  /**
   * Packets per slice the ring keeps at least (it keeps max(this, resendWindowPackets)): for dedupe,
   * repair and hand-offs. Not from the thesis: a count, so a host whose packets are long in time (a
   * browser's ~14 KB packets are 2 s of stream per slice) keeps fewer, or it holds minutes of stream.
   */
  readonly minRingPackets: number;
  /**
   * A ring slot lets go of its packet's bytes this long after the packet arrived (the slot still
   * dedupes it); 0 keeps them as long as the slot (the simulator's default, whose packets are empty).
   * Not from the thesis: a ring sized in packets spans a time that depends on the stream's rate, so a
   * host with slow slices bounds the memory by age (issue 17).
   */
  readonly ringPayloadMaxAgeMs: number;
  /** A graceful leaver keeps forwarding this long (thesis §4.2, overview "briefly"): hand-off lead plus a round trip. */
  readonly quitLingerMs: number;
  /** A parent that has sent nothing on a slice for this long makes its node probe its subtree for loops (thesis §4.2, loop avoidance and detection). */
  readonly probeAfterSilenceMs: number;
  /** A neighbour is "receiving" a slice if a packet arrived within this time. */
  readonly receivingTimeoutMs: number;
  /** A switch or forced request without an answer is abandoned after this long. */
  readonly requestTimeoutMs: number;
  /** Every advert is a delta except one full advert per neighbour this often (and on every new link). */
  readonly fullAdvertIntervalMs: number;
  /**
   * Relative offsets are re-advertised only when they move by at least this much. Queueing jitter
   * moves a smoothed offset by a few ms every block; 20 ms (half the latency margin) keeps adverts
   * small while no decision sees an offset staler than the margin could matter.
   */
  readonly offsetAdvertStepMs: number;
  /** A peer that rejected our request for a slice is not asked again for that slice for this long. */
  readonly rejectBackoffMs: number;
  /** A peer that commits this many protocol violations is cut off. */
  readonly maxViolationsPerPeer: number;
  /** Bootstrap peers asked of the rendezvous server when joining. */
  readonly bootstrapPeers: number;
  /**
   * Repair from neighbours (not in Chunkyspread, which has none; after Bullet's recovery from peers
   * and CREW's several helpers, shared/briefs/bullet-and-bullet-prime.md). Helpers one round of
   * missing packets is split across; 0 turns repair off. 3: a helper that is itself missing the
   * packet, busy or gone costs one NAK or timeout, not the round.
   */
  readonly repairHelpers: number;
  /**
   * A packet counts as missing this long after it was expected (its slice's measured lag behind
   * the playout clock). Not from the papers. Parent changes (load and latency switches, which never
   * stop in our runs) move a slice's arrival by hundreds of ms, and a packet that is merely late
   * then draws repair copies it will not need: a short grace multiplied the repair upload without
   * saving a deadline (docs/reproduction.md), while 1200 ms still leaves 5 s − 1.2 s − the origin
   * lead for two or three repair attempts.
   */
  readonly repairGraceMs: number;
  /** A repair request unanswered this long (or 2·RTT + 100 ms if shorter) goes to another helper. */
  readonly repairTimeoutMs: number;
  /**
   * How long a parent's Pending answer is trusted before other neighbours are asked: about one
   * repair round above us plus the hop down (the parent's own repair may fail too). 1 s: the
   * median repair took 0.8 s in our runs; waiting longer saves duplicate repairs in deep subtrees
   * at the price of later ones (docs/reproduction.md).
   */
  readonly repairPendingWaitMs: number;
  /**
   * Last resort: a packet still missing this close to its playback deadline is fetched from the
   * origin (HTTP Range in the browser). One origin round trip at the thesis's 650 ms maximum
   * latency plus a repair's worth of margin.
   */
  readonly originLeadMs: number;
  /**
   * The true source moves one slice root at most this often from the member rooting the most slices
   * to a spare member rooting at least two fewer (source.ts, spreadRoots); 0 never moves a root.
   * Not in the thesis: its population is present before the stream starts, so its true source's M
   * neighbours are distinct random members from the first packet (§4.2, slice sources). A swarm
   * that grows viewer by viewer has one member when the stream starts, which then roots every slice
   * for as long as it stays: its uplink carries the whole stream M times over its target. Each move
   * re-floods one tree (its old root finds a parent in it like a member that lost one, and keeps
   * its subtree), so moves are spaced: 2 s is two decision rounds, time for the flood and the old
   * root's forced switch to settle before the next tree is disturbed.
   */
  readonly rootSpreadIntervalMs: number;
  /**
   * A slice root (fed by the true source) takes a missing packet from the origin this long after it
   * found it missing, not only at the origin lead: nobody else can have a packet lost on the tree's
   * first hop, and the copy it fetches flows down to everyone. 0 (at once) in the simulator, whose
   * source is on time; a live source's pace jitters, and a packet merely late then cost an origin
   * fetch per root (SDK: LIVE_PROTOCOL). Not from the papers.
   */
  readonly rootOriginWaitMs: number;
  /**
   * A helper's repair upload is capped at this fraction of its TL (in slice-equivalents of packet
   * rate, at least one slice); requests beyond it get BUSY. Repair is a fraction of a stream's loss;
   * half of TL keeps the total under ML = 1.5·TL (thesis §4.4, experimental setup) while serving bursts of requests
   * after a failure (a quarter left many requests BUSY under loss).
   */
  readonly repairUploadShare: number;
  /** A helper whose transport to the requester holds more than this unsent replies BUSY (browser: bufferedAmount). */
  readonly repairBacklogLimitBytes: number;
  /** Repair packets in flight to one helper at most (requester-side window). */
  readonly repairWindowPackets: number;
  /** How often missing packets are looked for and requests sent. */
  readonly repairScanMs: number;
  /**
   * 1: the last of the `slices` is a parity slice (XOR over each stripe of the others, see
   * parity.ts), so M data slices need `slices` = M + 1. 0: none (Chunkyspread as published).
   */
  readonly paritySlices: number;
  /**
   * The true source sends real parity once the measured loss (packets members found missing on
   * their trees) reaches this, and empty parity packets again after it has stayed at or below
   * `parityOffLossFraction` for `parityOffHoldMs`. 1%: below it repair alone kept every deadline in
   * our runs at a fraction of parity's 1/M upload; 0 = always on.
   */
  readonly parityOnLossFraction: number;
  readonly parityOffLossFraction: number;
  readonly parityOffHoldMs: number;
}

export const DEFAULT_PROTOCOL: ProtocolConfig = Object.freeze({
  slices: 16,
  minNodeDegree: 8,
  minLoadSlices: 4,
  latencyRangeFraction: 2 / 16,
  maxLoadFactor: 1.5,
  heartbeatMs: 1000,
  failureTimeoutMs: 4000,
  rootHeartbeatMs: 500,
  rootFailureTimeoutMs: 1500,
  decisionIntervalMs: 1000,
  walkLength: 6,
  walkTimeoutMs: 8000,
  latencySwitchMarginMs: 100,
  relayedLinkPenaltyMs: 400,
  offsetSmoothing: 0.2,
  candidateSetSize: 3,
  latencyBackoffMs: 5000,
  latencyEstimate: LatencyEstimate.Path,
  latencyPhaseEnds: 0,
  latencyMarginGrowth: 1,
  latencyWindowMs: 0,
  latencyWindowFromNeighbours: 0,
  latencySwitchesInFlight: 1,
  latencyTriggers: 0,
  loadShedAboveUlt: 0,
  handoffLeadMs: 2000,
  switchAbortLoadDelta: 1,
  floodCollectMs: 100,
  resendWindowPackets: 48,
  minRingPackets: 64,
  ringPayloadMaxAgeMs: 0,
  quitLingerMs: 3000,
  probeAfterSilenceMs: 2500,
  receivingTimeoutMs: 3000,
  requestTimeoutMs: 3000,
  fullAdvertIntervalMs: 10_000,
  offsetAdvertStepMs: 20,
  rejectBackoffMs: 5000,
  maxViolationsPerPeer: 20,
  bootstrapPeers: 4,
  repairHelpers: 3,
  repairGraceMs: 1200,
  repairTimeoutMs: 1500,
  repairPendingWaitMs: 1000,
  originLeadMs: 1500,
  rootOriginWaitMs: 0,
  rootSpreadIntervalMs: 2000,
  repairUploadShare: 0.5,
  repairBacklogLimitBytes: 256 * 1024,
  repairWindowPackets: 32,
  repairScanMs: 100,
  paritySlices: 0,
  parityOnLossFraction: 0.01,
  parityOffLossFraction: 0.003,
  parityOffHoldMs: 20_000,
});

export type Role = 'member' | 'source';

/** What a host passes to create one engine. Loads are in slices; the host converts from kbps. */
export interface EngineInit {
  readonly id: PeerId;
  readonly role: Role;
  /** The true source's id (members need it to recognise slice-source data). */
  readonly sourceId: PeerId;
  /** TL in slices (ignored for the true source). */
  readonly targetLoadSlices: number;
  /** ML in slices; default `maxLoadFactor`·TL. */
  readonly maxLoadSlices?: number;
  readonly protocol?: Partial<ProtocolConfig>;
}

export class ConfigError extends RangeError {
  override readonly name = 'ConfigError';
}

export interface Thresholds {
  readonly lower: number;
  readonly upper: number;
}

/**
 * LLT and ULT for a target load (thesis §4.2, overview, thesis §4.4, experimental setup): TL ∓ fraction·TL, ULT rounded up and
 * LLT rounded down (Lat2: TL = 16 gives 14 and 18).
 */
export function latencyThresholds(targetLoadSlices: number, rangeFraction: number): Thresholds {
  const half = targetLoadSlices * rangeFraction;
  // The epsilon keeps exact products (16 · 0.125 = 2) from rounding outward through float error.
  return {
    lower: Math.max(0, Math.floor(targetLoadSlices - half + 1e-9)),
    upper: Math.max(0, Math.ceil(targetLoadSlices + half - 1e-9)),
  };
}

/**
 * Swaplinks node degree. The thesis prints ND = min[8, (TL/MinL)·MND] (thesis §4.2, parameters), but its own
 * text says degree grows with TL and MND is the *smallest* degree, and that TL < MinL gives MND;
 * `min` would cap every node at 8. We therefore use max(MND, (TL/MinL)·MND).
 */
export function nodeDegree(targetLoadSlices: number, minLoadSlices: number, minNodeDegree: number): number {
  return Math.max(minNodeDegree, Math.round((targetLoadSlices / minLoadSlices) * minNodeDegree));
}

/**
 * Swaplinks keeps |out| = |in| = L per node; a node's neighbours are the union, so L = ⌈ND/2⌉ gives
 * about ND neighbours (the thesis's population has degrees 8–50 for TL 4–28, thesis §4.4, experimental setup).
 */
export function linksPerDirection(degree: number): number {
  return Math.ceil(degree / 2);
}

export interface ResolvedConfig extends LoadConfig {
  readonly id: PeerId;
  readonly role: Role;
  readonly sourceId: PeerId;
  readonly protocol: ProtocolConfig;
  /** Swaplinks degree, from the TL given at construction (`setLoad` leaves it: see Engine.setLoad). */
  readonly degree: number;
  readonly linksPerDirection: number;
  /** Slices that carry the stream (all but the parity slice). */
  readonly dataSlices: number;
}

/** The load part of a resolved configuration: what `setLoad` may change while the engine runs. */
export interface LoadConfig {
  readonly targetLoad: number;
  readonly maxLoad: number;
  readonly lowerLatencyThreshold: number;
  readonly upperLatencyThreshold: number;
}

/**
 * TL, ML, LLT and ULT from a target and an optional maximum load (slices), validated: integers in
 * 0‥0xfff0 (the wire's u16 load fields, with room for the repair share), ML ≥ TL, ML defaulting to
 * `maxLoadFactor`·TL (thesis §4.4, experimental setup). ULT never exceeds ML. TL = ML = 0 is a receive-only member.
 */
export function resolveLoadConfig(
  targetLoadSlices: number,
  maxLoadSlices: number | undefined,
  protocol: ProtocolConfig,
): LoadConfig {
  checkInteger('targetLoadSlices', targetLoadSlices, 0, 0xfff0);
  const maxLoad = maxLoadSlices ?? Math.floor(targetLoadSlices * protocol.maxLoadFactor);
  checkInteger('maxLoadSlices', maxLoad, 0, 0xfff0);
  if (maxLoad < targetLoadSlices)
    throw new ConfigError(
      `maxLoadSlices (${maxLoad}) must be at least targetLoadSlices (${targetLoadSlices})`,
    );
  const thresholds = latencyThresholds(targetLoadSlices, protocol.latencyRangeFraction);
  const upper = Math.min(thresholds.upper, maxLoad);
  return {
    targetLoad: targetLoadSlices,
    maxLoad,
    lowerLatencyThreshold: Math.min(thresholds.lower, upper),
    upperLatencyThreshold: upper,
  };
}

function checkInteger(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer in [${min}, ${max}], got ${value}`);
  }
}

function checkNumber(name: string, value: number, min: number, max: number): void {
  if (!Number.isFinite(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be a number in [${min}, ${max}], got ${value}`);
  }
}

/** Merge defaults and validate in one place; every bad value gets a message naming it. */
export function resolveConfig(init: EngineInit): ResolvedConfig {
  const protocol: ProtocolConfig = { ...DEFAULT_PROTOCOL, ...init.protocol };
  checkInteger('id', init.id, 0, 0xffff_ffff);
  checkInteger('sourceId', init.sourceId, 0, 0xffff_ffff);
  const role: string = init.role; // hosts may pass unchecked JSON
  if (role !== 'member' && role !== 'source') throw new ConfigError(`role must be "member" or "source"`);
  if (init.role === 'member' && init.id === init.sourceId)
    throw new ConfigError('a member cannot have the true source id');
  checkInteger('slices', protocol.slices, 1, MAX_SLICES);
  checkInteger('minNodeDegree', protocol.minNodeDegree, 1, 1000);
  checkNumber('minLoadSlices', protocol.minLoadSlices, 0.01, 10_000);
  checkNumber('latencyRangeFraction', protocol.latencyRangeFraction, 0, 1);
  checkNumber('maxLoadFactor', protocol.maxLoadFactor, 1, 100);
  for (const key of [
    'heartbeatMs',
    'failureTimeoutMs',
    'rootHeartbeatMs',
    'rootFailureTimeoutMs',
    'decisionIntervalMs',
    'walkTimeoutMs',
    'handoffLeadMs',
    'floodCollectMs',
    'quitLingerMs',
    'probeAfterSilenceMs',
    'receivingTimeoutMs',
    'requestTimeoutMs',
    'fullAdvertIntervalMs',
    'rejectBackoffMs',
    'latencyBackoffMs',
  ] as const) {
    checkInteger(key, protocol[key], 1, 3_600_000);
  }
  if (protocol.failureTimeoutMs <= protocol.heartbeatMs) {
    throw new ConfigError(
      'failureTimeoutMs must exceed heartbeatMs, or every peer would time out between heartbeats',
    );
  }
  if (protocol.rootFailureTimeoutMs <= protocol.rootHeartbeatMs) {
    throw new ConfigError(
      'rootFailureTimeoutMs must exceed rootHeartbeatMs, or every slice source would time out between heartbeats',
    );
  }
  checkInteger('quitLingerMs', protocol.quitLingerMs, 1, 0xfffe);
  checkInteger('walkLength', protocol.walkLength, 1, 64);
  checkNumber('latencySwitchMarginMs', protocol.latencySwitchMarginMs, 0, 60_000);
  checkNumber('relayedLinkPenaltyMs', protocol.relayedLinkPenaltyMs, 0, 60_000);
  checkNumber('offsetSmoothing', protocol.offsetSmoothing, 0.001, 1);
  checkNumber('latencyMarginGrowth', protocol.latencyMarginGrowth, 1, 16);
  checkInteger('latencyWindowMs', protocol.latencyWindowMs, 0, 3_600_000);
  checkInteger('latencyWindowFromNeighbours', protocol.latencyWindowFromNeighbours, 0, 1);
  checkInteger('latencyEstimate', protocol.latencyEstimate, LatencyEstimate.Offset, LatencyEstimate.Path);
  checkInteger('latencyPhaseEnds', protocol.latencyPhaseEnds, 0, 1);
  checkInteger('latencySwitchesInFlight', protocol.latencySwitchesInFlight, 1, 64);
  checkInteger('latencyTriggers', protocol.latencyTriggers, 0, 1);
  checkInteger('loadShedAboveUlt', protocol.loadShedAboveUlt, 0, 1);
  checkInteger('candidateSetSize', protocol.candidateSetSize, 1, 64);
  checkInteger('switchAbortLoadDelta', protocol.switchAbortLoadDelta, 0, 1000);
  checkInteger('resendWindowPackets', protocol.resendWindowPackets, 1, 4096);
  checkInteger('minRingPackets', protocol.minRingPackets, 1, 4096);
  checkInteger('ringPayloadMaxAgeMs', protocol.ringPayloadMaxAgeMs, 0, 3_600_000);
  checkNumber('offsetAdvertStepMs', protocol.offsetAdvertStepMs, 0, 10_000);
  checkInteger('maxViolationsPerPeer', protocol.maxViolationsPerPeer, 1, 1_000_000);
  checkInteger('bootstrapPeers', protocol.bootstrapPeers, 1, 64);
  checkInteger('repairHelpers', protocol.repairHelpers, 0, 16);
  checkInteger('repairGraceMs', protocol.repairGraceMs, 0, 60_000);
  checkInteger('repairTimeoutMs', protocol.repairTimeoutMs, 1, 60_000);
  checkInteger('repairPendingWaitMs', protocol.repairPendingWaitMs, 0, 60_000);
  checkInteger('originLeadMs', protocol.originLeadMs, 0, 60_000);
  checkInteger('rootOriginWaitMs', protocol.rootOriginWaitMs, 0, 60_000);
  checkInteger('rootSpreadIntervalMs', protocol.rootSpreadIntervalMs, 0, 3_600_000);
  checkNumber('repairUploadShare', protocol.repairUploadShare, 0, 10);
  checkInteger('repairBacklogLimitBytes', protocol.repairBacklogLimitBytes, 0, 1 << 30);
  checkInteger('repairWindowPackets', protocol.repairWindowPackets, 1, 4096);
  checkInteger('repairScanMs', protocol.repairScanMs, 1, 60_000);
  checkInteger('paritySlices', protocol.paritySlices, 0, 1);
  if (protocol.slices - protocol.paritySlices < 1)
    throw new ConfigError('slices must exceed paritySlices: at least one slice carries data');
  checkNumber('parityOnLossFraction', protocol.parityOnLossFraction, 0, 1);
  checkNumber('parityOffLossFraction', protocol.parityOffLossFraction, 0, 1);
  if (protocol.parityOffLossFraction > protocol.parityOnLossFraction)
    throw new ConfigError('parityOffLossFraction must not exceed parityOnLossFraction');
  checkInteger('parityOffHoldMs', protocol.parityOffHoldMs, 0, 3_600_000);

  const targetLoad = init.role === 'source' ? protocol.slices : init.targetLoadSlices;
  const loads = resolveLoadConfig(targetLoad, init.maxLoadSlices, protocol);
  const degree = nodeDegree(targetLoad, protocol.minLoadSlices, protocol.minNodeDegree);
  return {
    id: init.id,
    role: init.role,
    sourceId: init.sourceId,
    protocol,
    ...loads,
    degree,
    linksPerDirection: linksPerDirection(degree),
    dataSlices: protocol.slices - protocol.paritySlices,
  };
}
