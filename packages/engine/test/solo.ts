/**
 * One engine driven entirely by hand: the test plays every peer. Messages go through the wire codec
 * both ways so crafted messages are ones a real peer could send, and the engine's own messages are
 * checked to encode.
 */
import { expect } from 'vitest';
import {
  bloomOr,
  decode,
  EMPTY_BLOOM,
  encode,
  ForcedReason,
  MessageType,
  RejectReason,
  SEQ_NONE,
  type AdvertMessage,
  type AdvertSliceEntry,
  type Bloom128,
  type Message,
  type PeerId,
} from '@chunkycast/wire';
import {
  bloomMaskFor,
  createRandom,
  Engine,
  type Action,
  type EngineEvent,
  type EngineInit,
} from '../src/index.js';

export interface TimedAction {
  readonly time: number;
  readonly action: Action;
}

export interface SliceAdvert {
  readonly receiving?: boolean;
  readonly isSliceSource?: boolean;
  readonly hops?: number;
  readonly offsetMs?: number | null;
  /** The sender's path estimate from the slice's root (AdvertSliceEntry.pathMs); default unknown. */
  readonly pathMs?: number | null;
  readonly filter?: Bloom128;
}

export interface AdvertSpec {
  readonly load: number;
  /** TL; default the midpoint of lower and upper. */
  readonly target?: number;
  readonly lower: number;
  readonly upper: number;
  readonly maxLoad: number;
  /** Per slice; slices not given are advertised as not receiving. */
  readonly slices?: Readonly<Record<number, SliceAdvert>>;
  /** Round-trip time the engine should measure from this advert (default 100 ms). */
  readonly rttMs?: number;
}

function roundTrip(message: Message): Message {
  const decoded = decode(encode(message));
  if (!decoded.ok) throw new Error(`does not round-trip: ${decoded.error.message}`);
  return decoded.message;
}

export class Solo {
  readonly engine: Engine;
  readonly log: TimedAction[] = [];
  now = 0;

  constructor(init: Omit<EngineInit, 'sourceId'> & { sourceId?: PeerId }, seed = 1) {
    this.engine = new Engine({ sourceId: 0, ...init }, createRandom(seed));
  }

  get slices(): number {
    return this.engine.config.protocol.slices;
  }

  private take(actions: readonly Action[]): Action[] {
    for (const action of actions) {
      if (action.kind === 'send') roundTrip(action.message);
      this.log.push({ time: this.now, action });
    }
    return [...actions];
  }

  /** Feed an input at the current time. */
  input(input: Parameters<Engine['handle']>[1]): Action[] {
    return this.take(this.engine.handle(this.now, input));
  }

  /** A message from `from`, through encode/decode. */
  feed(from: PeerId, message: Message): Action[] {
    return this.input({ kind: 'message', from, message: roundTrip(message) });
  }

  /** Move the clock to `time`, firing every engine deadline on the way. */
  advance(time: number): Action[] {
    const out: Action[] = [];
    for (;;) {
      const d = this.engine.nextDeadline();
      if (d > time) break;
      this.now = Math.max(this.now, d);
      out.push(...this.take(this.engine.handle(this.now, { kind: 'timer' })));
    }
    this.now = Math.max(this.now, time);
    return out;
  }

  /** Each of `children` asks us to be its parent on `slice` (a joiner's forced request, from its first packet). */
  takeChildren(children: readonly PeerId[], slice = 0): void {
    for (const c of children)
      this.feed(c, {
        type: MessageType.ForcedParentRequest,
        slice,
        reason: ForcedReason.Join,
        fromSeq: SEQ_NONE,
      });
  }

  /** Install links (both directions to each peer) and start. */
  startWith(neighbours: readonly PeerId[]): Action[] {
    const out = this.input({ kind: 'installLinks', out: neighbours, in: neighbours });
    out.push(...this.input({ kind: 'start' }));
    return out;
  }

  /** Log position, for "since" queries. */
  mark(): number {
    return this.log.length;
  }

  sends(since = 0): { time: number; to: PeerId; message: Message }[] {
    const out: { time: number; to: PeerId; message: Message }[] = [];
    for (const { time, action } of this.log.slice(since))
      if (action.kind === 'send') out.push({ time, to: action.to, message: action.message });
    return out;
  }

  sendsOf<T extends Message['type']>(
    type: T,
    since = 0,
  ): { time: number; to: PeerId; message: Extract<Message, { type: T }> }[] {
    return this.sends(since)
      .filter((s) => s.message.type === type)
      .map((s) => ({ time: s.time, to: s.to, message: s.message as Extract<Message, { type: T }> }));
  }

  events<T extends EngineEvent['type']>(
    type: T,
    since = 0,
  ): { time: number; event: Extract<EngineEvent, { type: T }> }[] {
    const out: { time: number; event: Extract<EngineEvent, { type: T }> }[] = [];
    for (const { time, action } of this.log.slice(since))
      if (action.kind === 'event' && action.event.type === type)
        out.push({ time, event: action.event as Extract<EngineEvent, { type: T }> });
    return out;
  }

  deliveries(since = 0): Extract<Action, { kind: 'deliver' }>[] {
    const out: Extract<Action, { kind: 'deliver' }>[] = [];
    for (const { action } of this.log.slice(since)) if (action.kind === 'deliver') out.push(action);
    return out;
  }

  /** The latest advert the engine sent to `peer`, if any. */
  lastAdvertTo(peer: PeerId): { time: number; message: AdvertMessage } | undefined {
    for (let i = this.log.length - 1; i >= 0; i--) {
      const r = this.log[i]!;
      if (r.action.kind === 'send' && r.action.to === peer && r.action.message.type === MessageType.Advert)
        return { time: r.time, message: r.action.message };
    }
    return undefined;
  }

  /**
   * A full advert from `peer`, echoing the engine's latest advert to it so the engine measures
   * `rttMs` (hold time = elapsed − rtt).
   */
  advertFrom(peer: PeerId, spec: AdvertSpec): AdvertMessage {
    const entries: AdvertSliceEntry[] = [];
    for (let s = 0; s < this.slices; s++) {
      const a = spec.slices?.[s];
      entries.push({
        slice: s,
        receiving: a?.receiving ?? false,
        isSliceSource: a?.isSliceSource ?? false,
        hops: a?.hops ?? 1,
        offsetMs: a?.offsetMs ?? null,
        pathMs: a?.pathMs ?? null,
        filter: a?.filter ?? EMPTY_BLOOM,
      });
    }
    const last = this.lastAdvertTo(peer);
    const rtt = spec.rttMs ?? 100;
    const hold = last === undefined ? 0 : Math.max(0, Math.round(this.now - last.time - rtt));
    return {
      type: MessageType.Advert,
      full: true,
      load: spec.load,
      targetLoad: spec.target ?? Math.round((spec.lower + spec.upper) / 2),
      lowerLatencyThreshold: spec.lower,
      upperLatencyThreshold: spec.upper,
      maxLoad: spec.maxLoad,
      sentAtMs: Math.floor(this.now),
      echoSentAtMs: last === undefined ? null : last.message.sentAtMs,
      echoHoldMs: last === undefined ? 0 : hold,
      entries,
    };
  }
}

export function dataMessage(
  slice: number,
  seq: number,
  bloom: Bloom128 = EMPTY_BLOOM,
  hops = 1,
): Extract<Message, { type: typeof MessageType.Data }> {
  const payload = new Uint8Array(4);
  new DataView(payload.buffer).setUint32(0, seq);
  return { type: MessageType.Data, slice, seq, bloom, hops, payload };
}

// A member with a parent, for tests of what a parent may send (loops.test.ts, hostile.test.ts).

export const N = 50; // the node under test
export const P = 101; // its parent
export const Q = 102; // an alternative
export const A = 103; // a neighbour downstream of N (N's mask is in its filter)
export const C = 104; // a child of N

/** TL 8, Lat2: LLT 7, ULT 9, ML 12. */
export function spec(load: number, slices: AdvertSpec['slices']): AdvertSpec {
  return { load, lower: 7, upper: 9, maxLoad: 12, slices };
}

export function accept(slice: number, handoffSeq = 0): Parameters<Solo['feed']>[1] {
  return {
    type: MessageType.SwitchReply,
    slice,
    handoffSeq,
    accepted: true,
    rejectReason: RejectReason.None,
    load: 5,
  };
}

/** N with parent P on slice 0 (packets 0..4 received, filter = P's mask) and a child C on slice 0. */
export function nodeWithParent(seed = 1): Solo {
  const solo = new Solo({ id: N, role: 'member', targetLoadSlices: 8 }, seed);
  solo.startWith([P, Q, A, C]);
  solo.advance(1000);
  solo.feed(P, solo.advertFrom(P, spec(5, { 0: { receiving: true, filter: bloomMaskFor(200) } })));
  const requests = solo.sendsOf(MessageType.ForcedParentRequest);
  expect(requests.map((r) => [r.to, r.message.slice])).toEqual([[P, 0]]);
  solo.feed(P, accept(0));
  for (let seq = 0; seq < 5; seq++) {
    solo.advance(solo.now + 100);
    solo.feed(P, dataMessage(0, seq, bloomOr(bloomMaskFor(200), bloomMaskFor(P)), 2));
  }
  solo.feed(C, { type: MessageType.ForcedParentRequest, slice: 0, reason: ForcedReason.Join, fromSeq: 5 });
  expect(solo.engine.children()[0]).toEqual([C]);
  solo.feed(Q, solo.advertFrom(Q, spec(5, { 0: { receiving: true, filter: bloomMaskFor(201) } })));
  expect(solo.engine.parents()[0]).toBe(P);
  expect(solo.deliveries().map((d) => d.seq)).toEqual([0, 1, 2, 3, 4]);
  return solo;
}
