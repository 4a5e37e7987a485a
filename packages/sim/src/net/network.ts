import type { DecodeResult, Message } from '@chunkycast/wire';
import { EventQueue } from './queue.js';
import { Rendezvous, type RendezvousOptions } from './rendezvous.js';
import { Transit } from './transit.js';
import { Uplinks } from './uplinks.js';

/**
 * One event of a simulated network. A single shape for every kind keeps the hot loop monomorphic;
 * the fields a kind does not use are 0 or null.
 */
export interface NetEvent {
  readonly kind: number;
  /** The node the event happens at. */
  readonly node: number;
  /** Sender of a message (NET_DELIVER); otherwise the host's. */
  readonly from: number;
  /** The encoded message (NET_DELIVER), or null when it travels as `message` (Transit's sampling). */
  readonly bytes: Uint8Array | null;
  /** Peers named by the rendezvous (NET_BOOTSTRAP); otherwise the host's. */
  readonly peers: number[] | null;
  /** The host's (a timer's generation, a callback's number). */
  readonly gen: number;
  /** A message not sampled for the codec, as the sender made it (NET_DELIVER; see Transit). */
  readonly message: Message | null;
}

/** A message arrives at `node` from `from`. */
export const NET_DELIVER = 0;
/** The rendezvous server's answer to `node`'s bootstrap request arrives, naming `peers`. */
export const NET_BOOTSTRAP = 1;
/** Hosts number their own kinds from here. */
export const NET_HOST_KINDS = 2;

export function netEvent(
  kind: number,
  node: number,
  from = 0,
  bytes: Uint8Array | null = null,
  peers: number[] | null = null,
  gen = 0,
  message: Message | null = null,
): NetEvent {
  return { kind, node, from, bytes, peers, gen, message };
}

export interface NetworkOptions {
  /** One-way latency of a directed link (ms). */
  readonly latencyMs: (from: number, to: number) => number;
  /**
   * `whole`: arrivals rounded up to whole milliseconds, in a time wheel (the simulator: tens of
   * millions of events); `real`: exact arrival times, in a heap (the engine tests).
   */
  readonly time: 'whole' | 'real';
  /**
   * Messages on one directed link arrive in the order they were sent even if the link's latency
   * changes (a reliable ordered transport, as the thesis's TCP control, §4.4, experimental setup). A fixed latency
   * per link keeps that order anyway.
   */
  readonly fifoPerLink: boolean;
  /** Encode into shared slabs (see Transit). */
  readonly slab?: boolean;
  /** One message in this many crosses the codec (default 1, every message; see Transit). */
  readonly codecSampleEvery?: number;
  /** Per-node uplink capacity: a data packet queued longer than this (ms) is dropped. */
  readonly uplinkMaxQueueMs?: number;
  /** Whether a message sent with `lossy` is lost on its link (drawn per message). */
  readonly loses?: (from: number, to: number, message: Message) => boolean;
  readonly rendezvous: RendezvousOptions;
}

/** What became of a message handed to the network. */
export type CarryOutcome = 'sent' | 'droppedUplink' | 'lost';

/**
 * The one network-simulation core shared by the simulator and the engine's multi-node tests: an
 * event queue ordered by (time, insertion), codec transit through `@chunkycast/wire`, links with
 * latency, optional per-link FIFO, per-node uplinks and loss, and the rendezvous server's
 * bootstrap answers. The hosts own the engines and every event kind beyond messages and bootstraps.
 */
export class Network {
  readonly queue: EventQueue<NetEvent>;
  readonly transit: Transit;
  readonly uplinks: Uplinks | null;
  readonly rendezvous: Rendezvous;
  private readonly whole: boolean;
  /** Per directed link: arrival time of its last message (only with `fifoPerLink`). */
  private readonly linkLastMs = new Map<string, number>();

  constructor(private readonly options: NetworkOptions) {
    this.whole = options.time === 'whole';
    this.queue = new EventQueue<NetEvent>({ realTimes: !this.whole });
    this.transit = new Transit({
      slab: options.slab ?? false,
      ...(options.codecSampleEvery === undefined ? {} : { sampleEvery: options.codecSampleEvery }),
    });
    this.uplinks = options.uplinkMaxQueueMs === undefined ? null : new Uplinks(options.uplinkMaxQueueMs);
    this.rendezvous = new Rendezvous(options.rendezvous);
  }

  latencyMs(from: number, to: number): number {
    return this.options.latencyMs(from, to);
  }

  /** When something leaving `from` at `departureMs` reaches `to` (whole ms: rounded up). */
  arrivalMs(from: number, to: number, departureMs: number): number {
    const t = departureMs + this.options.latencyMs(from, to);
    return this.whole ? Math.ceil(t) : t;
  }

  push(timeMs: number, event: NetEvent): void {
    this.queue.push(timeMs, event);
  }

  /**
   * Carry a message from `from` to `to`, sent at `now`, as `bytes` (null: as `message` itself, not
   * sampled for the codec; see Transit): through the sender's uplink
   * (`sizeBytes` charged; a `droppable` packet may be tail-dropped), the link's loss (when
   * `lossy`), then its latency (`delayMs` instead, for a scripted peer's message).
   */
  carry(
    from: number,
    to: number,
    message: Message,
    bytes: Uint8Array | null,
    now: number,
    send: {
      readonly sizeBytes: number;
      readonly droppable: boolean;
      readonly lossy: boolean;
      readonly delayMs?: number;
    },
  ): CarryOutcome {
    let departure = now;
    if (this.uplinks !== null) {
      const d = this.uplinks.depart(from, now, send.sizeBytes, send.droppable);
      if (d === null) return 'droppedUplink';
      departure = d;
    }
    const loses = this.options.loses;
    if (send.lossy && loses !== undefined && loses(from, to, message)) return 'lost';
    let arrival = send.delayMs === undefined ? this.arrivalMs(from, to, departure) : departure + send.delayMs;
    if (this.options.fifoPerLink) {
      const key = `${from}>${to}`;
      arrival = Math.max(arrival, this.linkLastMs.get(key) ?? 0);
      this.linkLastMs.set(key, arrival);
    }
    this.queue.push(
      arrival,
      netEvent(NET_DELIVER, to, from, bytes, null, 0, bytes === null ? message : null),
    );
    return 'sent';
  }

  /** The message a NET_DELIVER event carries: decoded from its bytes, or as sent when not sampled. */
  delivered(ev: NetEvent): DecodeResult | null {
    if (ev.bytes !== null) return this.transit.decode(ev.bytes);
    return ev.message === null ? null : { ok: true, message: ev.message };
  }

  /** `requester` asks the rendezvous server for `count` peers at `now`; its answer is an event. */
  requestBootstrap(requester: number, count: number, now: number): void {
    const { peers, atMs } = this.rendezvous.answer(requester, count, now);
    this.queue.push(atMs, netEvent(NET_BOOTSTRAP, requester, 0, null, peers));
  }
}
