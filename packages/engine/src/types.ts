import type { Message, PeerId } from '@chunkycast/wire';

/** Everything a host can tell an engine. `now` travels beside it in `Engine.handle(now, input)`. */
export type Input =
  /** Begin: a member joins (asks for bootstrap peers unless links were installed); the source starts. */
  | { readonly kind: 'start' }
  /** The rendezvous server's answer to `requestBootstrap`: random current members (maybe none). */
  | { readonly kind: 'bootstrap'; readonly peers: readonly PeerId[] }
  /**
   * Where the stream is, from someone trusted (the rendezvous server, the broadcaster's signed
   * announcement): the true source's next sequence on any slice. Until our own slices flow, the
   * sequence window judges by it; without it a forged first packet passed unjudged, and our
   * children blamed us for forwarding it.
   */
  | { readonly kind: 'liveSequence'; readonly seq: number }
  /** A decoded message from a peer. */
  | { readonly kind: 'message'; readonly from: PeerId; readonly message: Message }
  /** `nextDeadline()` has been reached. */
  | { readonly kind: 'timer' }
  /**
   * True source only: the next packet of the stream. `packet` (optional) is its stream-wide number
   * when the host numbers packets itself (a signed announcement names them: wire `packetPlace`): it
   * may skip numbers never published (a segment dropped while the tracker was away), never go back.
   */
  | { readonly kind: 'publish'; readonly payload: Uint8Array; readonly packet?: number }
  /** Leave: gracefully (keep forwarding briefly) or abruptly. */
  | { readonly kind: 'quit'; readonly graceful: boolean }
  /** The host's transport to this peer is gone (closed data channel): treat it as failed now. */
  | { readonly kind: 'peerUnreachable'; readonly peer: PeerId }
  /**
   * Simulator only: start with these Swaplinks links already in place (a pre-built random graph, as
   * the thesis's static scenario does with its offline Swaplinks trace, thesis §4.4, experimental setup). Repeats are
   * multi-links.
   */
  | { readonly kind: 'installLinks'; readonly out: readonly PeerId[]; readonly in: readonly PeerId[] }
  /**
   * The application's playback clock, which turns packets into deadlines: packet `seq` of `slice`
   * plays at `zeroAtMs + (seq + slice / M) · packetIntervalMs` (host time), and nothing before
   * `fromMs` is needed. Until a host gives one, the engine repairs nothing. Again to move it.
   */
  | {
      readonly kind: 'playout';
      readonly zeroAtMs: number;
      readonly packetIntervalMs: number;
      readonly fromMs: number;
      /**
       * Measured round trip of an origin fetch, if the host knows it: the last resort is then left
       * until 1.5 × this + 200 ms before the deadline (capped by `originLeadMs`), which leaves the
       * mesh more time. Without it, `originLeadMs`.
       */
      readonly originRttMs?: number;
    }
  /**
   * The host needs stream-wide packets [firstPacket, firstPacket + packets) by `atMs` (packet n is
   * `seq · D + slice`, wire `packetPlace`): a player that takes a segment only whole needs its first
   * packet when it needs its last, which a linear `playout` clock cannot say. Those packets' repair
   * deadline becomes `atMs`, never later than the clock's own (the clock still decides which packets
   * are past needing). The newest few spans are kept; a span given again replaces its deadline.
   */
  | {
      readonly kind: 'deadline';
      readonly firstPacket: number;
      readonly packets: number;
      readonly atMs: number;
    }
  /** A packet the host fetched from the origin after a `fetchOrigin` action. */
  | {
      readonly kind: 'originPacket';
      readonly slice: number;
      readonly seq: number;
      readonly payload: Uint8Array;
    }
  /**
   * How the host's transport to `peer` is routed: `relayed` when it goes through a relay (a TURN
   * server), which costs the broadcaster bandwidth and adds a detour. Again whenever it changes. The
   * engine prefers direct links for tree edges (`relayedLinkPenaltyMs`) but never refuses a relayed
   * one. Kept until `peerUnreachable` for the peer (the link is gone) or the engine cuts it off;
   * links never reported are direct. Members only; the true source ignores it.
   */
  | { readonly kind: 'linkRoute'; readonly peer: PeerId; readonly relayed: boolean }
  /** Bytes queued but unsent on the transport to `peer` (a data channel's bufferedAmount). */
  | { readonly kind: 'transportBacklog'; readonly peer: PeerId; readonly bytes: number }
  /**
   * True source only: the audience's recent loss (packets found missing on their trees ÷ packets
   * due), which switches real parity on and off (`parityOnLossFraction`).
   */
  | { readonly kind: 'measuredLoss'; readonly fraction: number }
  /**
   * Members only: new TL and ML in slices (the host measured what its uplink carries). LLT and ULT
   * follow as at construction, the next adverts carry them, and a load above the new thresholds is
   * shed by the load phase, never by dropping children. ML = 0 makes the member receive-only: it
   * hands back any slice it roots. ML defaults to `maxLoadFactor`·TL. Bad values throw ConfigError,
   * and so does the true source, whose load is M slices by definition.
   */
  | { readonly kind: 'setLoad'; readonly targetLoadSlices: number; readonly maxLoadSlices?: number }
  /**
   * Members only: hand every child over now, for a host about to stop running for a while (a page
   * being frozen, or one whose timers a hidden tab throttles so much that the load phase, which runs
   * on them, would move its children too slowly). Each active child is told we leave it (TreeLeave,
   * role parent) and finds a new parent at once by forced selection (thesis §4.2, forced parent
   * selection); children still draining after a switch are dropped. The parents we take from are
   * kept. With ML > 0 new children may come again: a host that wants none sets ML 0 first.
   */
  | { readonly kind: 'releaseChildren' };

/** How a packet reached this node. */
export type DeliveryPath = 'tree' | 'repair' | 'origin' | 'parity';

/** A packet handed to the application (each (slice, seq) exactly once). */
export interface DeliveredPacket {
  readonly slice: number;
  readonly seq: number;
  readonly hops: number;
  readonly from: PeerId;
  readonly payload: Uint8Array;
  readonly via: DeliveryPath;
  /** When the engine first counted it missing (repair, parity and origin), else null. */
  readonly missingSinceMs: number | null;
}

export type SwitchKind = 'load' | 'latency' | 'forced';

/** Observable happenings, for stats, debugging and the simulator's measurements. */
export type EngineEvent =
  | {
      readonly type: 'parentChanged';
      readonly slice: number;
      readonly parent: PeerId | null;
      readonly previous: PeerId | null;
      readonly switchKind: SwitchKind | 'lost';
    }
  | { readonly type: 'loopDetected'; readonly slice: number; readonly by: 'data' | 'probe' }
  | { readonly type: 'neighbourUp'; readonly peer: PeerId }
  | {
      readonly type: 'neighbourDown';
      readonly peer: PeerId;
      readonly reason: 'failed' | 'quit' | 'unlinked' | 'cutOff';
    }
  | {
      readonly type: 'sliceSource';
      readonly slice: number;
      readonly epoch: number;
      readonly assigned: boolean;
    }
  | { readonly type: 'protocolViolation'; readonly peer: PeerId; readonly reason: string }
  | {
      readonly type: 'switchRejected';
      readonly slice: number;
      readonly by: PeerId;
      readonly rejectReason: number;
    }
  | { readonly type: 'parity'; readonly active: boolean }
  | { readonly type: 'stopped' };

/** Everything an engine asks its host to do. */
export type Action =
  | { readonly kind: 'send'; readonly to: PeerId; readonly message: Message }
  /** A new packet for the application. */
  | ({ readonly kind: 'deliver' } & DeliveredPacket)
  /** Last resort: fetch these packets of `slice` from the origin and hand them back as `originPacket`. */
  | { readonly kind: 'fetchOrigin'; readonly slice: number; readonly seqs: readonly number[] }
  | { readonly kind: 'requestBootstrap'; readonly count: number }
  /** The host may close its transport to this peer. */
  | { readonly kind: 'disconnect'; readonly peer: PeerId }
  | { readonly kind: 'event'; readonly event: EngineEvent };

/** Counters a host can read for stats; never reset. */
export interface EngineCounters {
  packetsDelivered: number;
  duplicatePackets: number;
  latePackets: number;
  strayPackets: number;
  /** Data packets with a sequence beyond the window (SEQ_WINDOW_SLACK): dropped, a violation each. */
  forgedSequences: number;
  /** Slices whose highest sequence turned out forged (set before the window could judge it): reset. */
  poisonedSlices: number;
  /** Tree copies a sender sent us again outside REPLAY_GRACE_MS: dropped, a violation each. */
  replayedPackets: number;
  /** Requests beyond a peer's bucket (REQUEST_LIMITS): dropped, a violation each. */
  requestsThrottled: number;
  /** Parents left for withholding (audit, silence) or for closing loops, and not taken again for a while. */
  parentsDistrusted: number;
  /** Members: times we told the true source a slice starves. True source: roots replaced for it. */
  starvedSliceNotices: number;
  rootsReplacedForStarving: number;
  /** True source: slice roots moved to a member rooting fewer (rootSpreadIntervalMs). */
  rootsSpread: number;
  loopsDetected: number;
  switchesLoad: number;
  switchesLatency: number;
  switchesForced: number;
  switchRejections: number;
  /** Time of the last completed load or latency switch (the thesis's convergence time, thesis §4.4, time to convergence (Fig. 4.5)). */
  lastOptimisingSwitchAt: number;
}
