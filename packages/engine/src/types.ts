import type { Message, PeerId } from '@chunkycast/wire';

/** Everything a host can tell an engine. `now` travels beside it in `Engine.handle(now, input)`. */
export type Input =
  /** Begin: a member joins (asks for bootstrap peers unless links were installed); the source starts. */
  | { readonly kind: 'start' }
  /** The rendezvous server's answer to `requestBootstrap`: random current members (maybe none). */
  | { readonly kind: 'bootstrap'; readonly peers: readonly PeerId[] }
  /** A decoded message from a peer. */
  | { readonly kind: 'message'; readonly from: PeerId; readonly message: Message }
  /** `nextDeadline()` has been reached. */
  | { readonly kind: 'timer' }
  /** True source only: the next packet of the stream. */
  | { readonly kind: 'publish'; readonly payload: Uint8Array }
  /** Leave: gracefully (keep forwarding briefly) or abruptly. */
  | { readonly kind: 'quit'; readonly graceful: boolean }
  /** The host's transport to this peer is gone (closed data channel): treat it as failed now. */
  | { readonly kind: 'peerUnreachable'; readonly peer: PeerId }
  /**
   * Simulator only: start with these Swaplinks links already in place (a pre-built random graph, as
   * the thesis's static scenario does with its offline Swaplinks trace, L3587–3596). Repeats are
   * multi-links.
   */
  | { readonly kind: 'installLinks'; readonly out: readonly PeerId[]; readonly in: readonly PeerId[] };

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
  | { readonly type: 'stopped' };

/** Everything an engine asks its host to do. */
export type Action =
  | { readonly kind: 'send'; readonly to: PeerId; readonly message: Message }
  /** A new packet for the application (each (slice, seq) exactly once). */
  | {
      readonly kind: 'deliver';
      readonly slice: number;
      readonly seq: number;
      readonly hops: number;
      readonly from: PeerId;
      readonly payload: Uint8Array;
    }
  | { readonly kind: 'requestBootstrap'; readonly count: number }
  /** The host may close its transport to this peer. */
  | { readonly kind: 'disconnect'; readonly peer: PeerId }
  | { readonly kind: 'event'; readonly event: EngineEvent };
