/**
 * A tiny deterministic in-memory network for the engine's unit tests.
 *
 * - Engines are held by id; virtual time only moves inside `runUntil`.
 * - One priority queue (time, then insertion order) holds messages, engine timers, bootstrap answers
 *   and scheduled callbacks, so everything happens in time order and ties are FIFO.
 * - Every message goes through `encode`/`decode` from '@chunkycast/wire', so the engine only ever
 *   sees what the wire can carry. A message that fails to decode throws: the test fails.
 * - Links are reliable and ordered (the thesis assumes TCP-like control, L3559–3602): a per-link
 *   latency function, plus FIFO per directed link even if the latency changes.
 * - `requestBootstrap` is answered with random current members, chosen with the network's seed.
 * - Everything an engine does is recorded per node for assertions.
 */
import { decode, encode, type Message, type PeerId } from '@chunkycast/wire';
import {
  createRandom,
  Engine,
  shuffleInPlace,
  type Action,
  type EngineEvent,
  type EngineInit,
  type ProtocolConfig,
  type Random,
  type Role,
} from '../src/index.js';

export interface Delivery {
  readonly time: number;
  readonly slice: number;
  readonly seq: number;
  readonly from: PeerId;
  readonly hops: number;
  readonly payload: Uint8Array;
}

export interface SentRecord {
  readonly time: number;
  readonly to: PeerId;
  readonly message: Message;
}

export interface EventRecord {
  readonly time: number;
  readonly event: EngineEvent;
}

export interface NodeLog {
  readonly deliveries: Delivery[];
  readonly events: EventRecord[];
  readonly sent: SentRecord[];
  readonly received: SentRecord[];
  readonly disconnects: { time: number; peer: PeerId }[];
  bootstrapRequests: number;
}

export type LatencyFn = (from: PeerId, to: PeerId) => number;
export type DropFn = (from: PeerId, to: PeerId, message: Message, now: number) => boolean;
/** A scripted peer: receives decoded messages; it may `net.inject` replies. */
export type EndpointFn = (now: number, from: PeerId, message: Message) => void;

export interface NetworkOptions {
  readonly seed: number;
  /** One-way latency, constant (ms) or per directed link. Default 50 ms. */
  readonly latency?: number | LatencyFn;
  /** Drop a message (lost on the wire) when this returns true. */
  readonly drop?: DropFn;
  /** Protocol overrides given to every engine. */
  readonly protocol?: Partial<ProtocolConfig>;
  readonly sourceId?: PeerId;
  /** Record every sent and received message (default true; big sampling runs turn it off). */
  readonly recordMessages?: boolean;
  /** Time the rendezvous server takes to answer. Default 50 ms. */
  readonly bootstrapDelayMs?: number;
  /** Keep a line per action (for determinism checks). */
  readonly trace?: boolean;
}

type QueueItem =
  | { kind: 'msg'; time: number; seq: number; from: PeerId; to: PeerId; bytes: Uint8Array }
  | { kind: 'timer'; time: number; seq: number; node: PeerId }
  | { kind: 'bootstrap'; time: number; seq: number; node: PeerId; peers: PeerId[] }
  | { kind: 'call'; time: number; seq: number; fn: () => void };

/** Binary min-heap on (time, seq). */
class Heap {
  private readonly items: QueueItem[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): QueueItem | undefined {
    return this.items[0];
  }

  private static less(a: QueueItem, b: QueueItem): boolean {
    return a.time < b.time || (a.time === b.time && a.seq < b.seq);
  }

  push(item: QueueItem): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!Heap.less(items[i]!, items[parent]!)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  pop(): QueueItem | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    items[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < items.length && Heap.less(items[l]!, items[m]!)) m = l;
      if (r < items.length && Heap.less(items[r]!, items[m]!)) m = r;
      if (m === i) break;
      [items[i], items[m]] = [items[m]!, items[i]!];
      i = m;
    }
    return top;
  }
}

function emptyLog(): NodeLog {
  return { deliveries: [], events: [], sent: [], received: [], disconnects: [], bootstrapRequests: 0 };
}

export interface AddOptions {
  readonly maxLoadSlices?: number;
  readonly protocol?: Partial<ProtocolConfig>;
}

export class Network {
  readonly engines = new Map<PeerId, Engine>();
  readonly logs = new Map<PeerId, NodeLog>();
  readonly sourceId: PeerId;
  readonly random: Random;
  /** Ids that were killed: their in-flight traffic is dropped. */
  readonly dead = new Set<PeerId>();
  readonly endpoints = new Map<PeerId, EndpointFn>();
  readonly trace: string[] = [];
  /** Messages delivered, by type. */
  readonly messageCounts = new Map<number, number>();
  droppedMessages = 0;
  private clock = 0;
  private seq = 0;
  private readonly queue = new Heap();
  private readonly scheduledTimer = new Map<PeerId, number>();
  private readonly linkLast = new Map<string, number>();
  private readonly closedPairs = new Set<string>();
  private readonly latency: LatencyFn;
  private readonly options: NetworkOptions;
  private published = 0;

  constructor(options: NetworkOptions) {
    this.options = options;
    this.sourceId = options.sourceId ?? 0;
    this.random = createRandom(options.seed).fork(0xb007);
    const lat = options.latency ?? 50;
    this.latency = typeof lat === 'number' ? () => lat : lat;
  }

  get now(): number {
    return this.clock;
  }

  /** Packets the publisher has fed to the source so far. */
  get publishedPackets(): number {
    return this.published;
  }

  engine(id: PeerId): Engine {
    const e = this.engines.get(id);
    if (e === undefined) throw new Error(`no engine ${id}`);
    return e;
  }

  log(id: PeerId): NodeLog {
    let l = this.logs.get(id);
    if (l === undefined) {
      l = emptyLog();
      this.logs.set(id, l);
    }
    return l;
  }

  /** Live (not stopped, not killed) members, in id order. */
  members(): PeerId[] {
    const out: PeerId[] = [];
    for (const [id, e] of this.engines) if (e.config.role === 'member' && !e.isStopped) out.push(id);
    return out.sort((a, b) => a - b);
  }

  /** Create an engine (not started). Its random stream is derived from the seed and its id. */
  add(id: PeerId, role: Role, targetLoadSlices: number, options: AddOptions = {}): Engine {
    if (this.engines.has(id) || this.dead.has(id)) throw new Error(`id ${id} already used`);
    const init: EngineInit = {
      id,
      role,
      sourceId: this.sourceId,
      targetLoadSlices,
      ...(options.maxLoadSlices === undefined ? {} : { maxLoadSlices: options.maxLoadSlices }),
      protocol: { ...this.options.protocol, ...options.protocol },
    };
    const engine = new Engine(init, createRandom(this.options.seed).fork(id + 1));
    this.engines.set(id, engine);
    this.log(id);
    return engine;
  }

  addSource(): Engine {
    return this.add(this.sourceId, 'source', 0);
  }

  /** Feed any input to an engine now and carry out its actions. */
  input(id: PeerId, input: Parameters<Engine['handle']>[1]): Action[] {
    const engine = this.engines.get(id);
    if (engine === undefined) return [];
    const actions = engine.handle(this.clock, input);
    this.apply(id, actions);
    return actions;
  }

  start(id: PeerId): void {
    this.input(id, { kind: 'start' });
  }

  installLinks(id: PeerId, out: readonly PeerId[], inbound: readonly PeerId[]): void {
    this.input(id, { kind: 'installLinks', out, in: inbound });
  }

  /** Add a member and start it: it joins by bootstrap and Swaplinks walks. */
  join(id: PeerId, targetLoadSlices: number, options: AddOptions = {}): Engine {
    const e = this.add(id, 'member', targetLoadSlices, options);
    this.start(id);
    return e;
  }

  /** Run `fn` at virtual time `time` (in order with everything else due then). */
  at(time: number, fn: () => void): void {
    this.queue.push({ kind: 'call', time: Math.max(time, this.clock), seq: this.seq++, fn });
  }

  /** Abrupt failure: the engine disappears with all its traffic, in flight or future. */
  kill(id: PeerId): void {
    this.engines.delete(id);
    this.scheduledTimer.delete(id);
    this.dead.add(id);
  }

  quit(id: PeerId, graceful: boolean): void {
    this.input(id, { kind: 'quit', graceful });
  }

  /** A scripted peer that is not an engine. */
  addEndpoint(id: PeerId, fn: EndpointFn): void {
    this.endpoints.set(id, fn);
  }

  /** Send a message from any id (a scripted peer) through the wire and the link latency. */
  inject(from: PeerId, to: PeerId, message: Message, delayMs?: number): void {
    this.transmit(from, to, message, delayMs);
  }

  /**
   * Feed `{kind:'publish'}` to the source every `1000/rate` ms from `from` until `until`. Payload:
   * the publish index as 4 bytes, so a delivery can be checked against its (slice, seq).
   */
  publisher(ratePerSecond: number, from: number, until = Infinity): void {
    const interval = 1000 / ratePerSecond;
    const step = (t: number): void => {
      if (t > until) return;
      this.at(t, () => {
        const index = this.published++;
        const payload = new Uint8Array(4);
        new DataView(payload.buffer).setUint32(0, index);
        this.input(this.sourceId, { kind: 'publish', payload });
        step(t + interval);
      });
    };
    step(from);
  }

  /** Process everything due up to and including `time`, then set the clock to `time`. */
  runUntil(time: number): void {
    for (;;) {
      const top = this.queue.peek();
      if (top === undefined || top.time > time) break;
      this.queue.pop();
      this.clock = Math.max(this.clock, top.time);
      this.process(top);
    }
    this.clock = Math.max(this.clock, time);
  }

  private process(item: QueueItem): void {
    switch (item.kind) {
      case 'call':
        item.fn();
        return;
      case 'timer': {
        if (this.scheduledTimer.get(item.node) !== item.time) return; // superseded
        this.scheduledTimer.delete(item.node);
        const e = this.engines.get(item.node);
        if (e === undefined) return;
        if (e.nextDeadline() <= this.clock) this.input(item.node, { kind: 'timer' });
        else this.schedule(item.node);
        return;
      }
      case 'bootstrap':
        this.input(item.node, { kind: 'bootstrap', peers: item.peers });
        return;
      case 'msg': {
        if (this.dead.has(item.from) || this.dead.has(item.to)) {
          this.droppedMessages++;
          return;
        }
        const decoded = decode(item.bytes);
        if (!decoded.ok) {
          throw new Error(
            `message ${item.from}→${item.to} does not decode: ${decoded.error.kind} ${decoded.error.message}`,
          );
        }
        const message = decoded.message;
        this.messageCounts.set(message.type, (this.messageCounts.get(message.type) ?? 0) + 1);
        if (this.options.recordMessages !== false && this.engines.has(item.to))
          this.log(item.to).received.push({ time: this.clock, to: item.from, message });
        const endpoint = this.endpoints.get(item.to);
        if (endpoint !== undefined) {
          endpoint(this.clock, item.from, message);
          return;
        }
        this.input(item.to, { kind: 'message', from: item.from, message });
        return;
      }
    }
  }

  private schedule(id: PeerId): void {
    const e = this.engines.get(id);
    if (e === undefined) return;
    const deadline = e.nextDeadline();
    if (deadline === Infinity) {
      this.scheduledTimer.delete(id);
      return;
    }
    const time = Math.max(deadline, this.clock);
    if (this.scheduledTimer.get(id) === time) return;
    this.scheduledTimer.set(id, time);
    this.queue.push({ kind: 'timer', time, seq: this.seq++, node: id });
  }

  private transmit(from: PeerId, to: PeerId, message: Message, delayMs?: number): void {
    const bytes = encode(message);
    const pair = from < to ? `${from}:${to}` : `${to}:${from}`;
    if (this.closedPairs.has(pair) || this.options.drop?.(from, to, message, this.clock) === true) {
      this.droppedMessages++;
      return;
    }
    const key = `${from}>${to}`;
    const time = Math.max(this.clock + (delayMs ?? this.latency(from, to)), this.linkLast.get(key) ?? 0);
    this.linkLast.set(key, time);
    this.queue.push({ kind: 'msg', time, seq: this.seq++, from, to, bytes });
  }

  private apply(id: PeerId, actions: readonly Action[]): void {
    const log = this.log(id);
    const record = this.options.recordMessages !== false;
    for (const action of actions) {
      if (this.options.trace === true) this.trace.push(`${this.clock} ${id} ${traceAction(action)}`);
      switch (action.kind) {
        case 'send':
          if (record) log.sent.push({ time: this.clock, to: action.to, message: action.message });
          this.transmit(id, action.to, action.message);
          break;
        case 'deliver':
          log.deliveries.push({
            time: this.clock,
            slice: action.slice,
            seq: action.seq,
            from: action.from,
            hops: action.hops,
            payload: action.payload,
          });
          break;
        case 'event':
          log.events.push({ time: this.clock, event: action.event });
          break;
        case 'requestBootstrap': {
          log.bootstrapRequests++;
          const candidates = this.members().filter((m) => m !== id);
          shuffleInPlace(candidates, this.random);
          this.queue.push({
            kind: 'bootstrap',
            time: this.clock + (this.options.bootstrapDelayMs ?? 50),
            seq: this.seq++,
            node: id,
            peers: candidates.slice(0, action.count),
          });
          break;
        }
        case 'disconnect': {
          log.disconnects.push({ time: this.clock, peer: action.peer });
          const pair = id < action.peer ? `${id}:${action.peer}` : `${action.peer}:${id}`;
          this.closedPairs.add(pair);
          break;
        }
      }
    }
    this.schedule(id);
  }

  // ───────────── queries used by many tests ─────────────

  /** Events of one type at one node. */
  events<T extends EngineEvent['type']>(
    id: PeerId,
    type: T,
  ): { time: number; event: Extract<EngineEvent, { type: T }> }[] {
    const out: { time: number; event: Extract<EngineEvent, { type: T }> }[] = [];
    for (const r of this.log(id).events) {
      if (r.event.type === type)
        out.push({ time: r.time, event: r.event as Extract<EngineEvent, { type: T }> });
    }
    return out;
  }

  /** Messages of one type sent by a node. */
  sentOf<T extends Message['type']>(
    id: PeerId,
    type: T,
  ): { time: number; to: PeerId; message: Extract<Message, { type: T }> }[] {
    const out: { time: number; to: PeerId; message: Extract<Message, { type: T }> }[] = [];
    for (const r of this.log(id).sent) {
      if (r.message.type === type)
        out.push({ time: r.time, to: r.to, message: r.message as Extract<Message, { type: T }> });
    }
    return out;
  }

  /** Whether the undirected Swaplinks graph over live members is connected. */
  connected(): boolean {
    const ids = this.members();
    if (ids.length === 0) return true;
    const live = new Set(ids);
    const seen = new Set<PeerId>([ids[0]!]);
    const stack = [ids[0]!];
    while (stack.length > 0) {
      const v = stack.pop()!;
      for (const w of this.engine(v).neighbours()) {
        if (live.has(w) && !seen.has(w)) {
          seen.add(w);
          stack.push(w);
        }
      }
    }
    return seen.size === ids.length;
  }
}

function traceAction(action: Action): string {
  return JSON.stringify(action, (_key, value: unknown) =>
    value instanceof Uint8Array ? Array.from(value) : value,
  );
}

// ───────────── graph and swarm builders ─────────────

/**
 * Configuration model for a directed multigraph: node v gets exactly `degree(v)` out-links and as
 * many in-links; stubs are paired at random, self-loops are swapped away. Repeats are multi-links.
 */
export function configurationModel(
  degrees: ReadonlyMap<PeerId, number>,
  random: Random,
): Map<PeerId, { out: PeerId[]; in: PeerId[] }> {
  const outStubs: PeerId[] = [];
  const inStubs: PeerId[] = [];
  for (const [id, d] of degrees) {
    for (let i = 0; i < d; i++) {
      outStubs.push(id);
      inStubs.push(id);
    }
  }
  shuffleInPlace(inStubs, random);
  const n = outStubs.length;
  for (let guard = 0; ; guard++) {
    let fixed = true;
    for (let i = 0; i < n; i++) {
      if (outStubs[i] !== inStubs[i]) continue;
      fixed = false;
      const j = random.int(n);
      if (outStubs[i] !== inStubs[j] && outStubs[j] !== inStubs[i]) {
        [inStubs[i], inStubs[j]] = [inStubs[j]!, inStubs[i]!];
      }
    }
    if (fixed) break;
    if (guard > 10_000) throw new Error('configurationModel: cannot remove self-loops');
  }
  const result = new Map<PeerId, { out: PeerId[]; in: PeerId[] }>();
  for (const id of degrees.keys()) result.set(id, { out: [], in: [] });
  for (let i = 0; i < n; i++) {
    const a = outStubs[i]!;
    const b = inStubs[i]!;
    result.get(a)!.out.push(b);
    result.get(b)!.in.push(a);
  }
  return result;
}

export interface SwarmOptions {
  readonly maxLoadSlices?: (id: PeerId, targetLoad: number) => number | undefined;
  /** When the true source starts (default at once). */
  readonly sourceStartAt?: number;
  /** Add the true source (default true). */
  readonly withSource?: boolean;
}

/**
 * The thesis's static scenario: members 1..n (TL `targetLoads[i-1]`) already linked by a random
 * multigraph with out = in = L everywhere (`installLinks`), all started now, plus the true source.
 */
export function prelinkedSwarm(
  net: Network,
  targetLoads: readonly number[],
  options: SwarmOptions = {},
): PeerId[] {
  const ids: PeerId[] = [];
  const degrees = new Map<PeerId, number>();
  targetLoads.forEach((tl, i) => {
    const id = i + 1;
    const max = options.maxLoadSlices?.(id, tl);
    const e = net.add(id, 'member', tl, max === undefined ? {} : { maxLoadSlices: max });
    ids.push(id);
    degrees.set(id, e.config.linksPerDirection);
  });
  const graph = configurationModel(degrees, net.random.fork(0x9a9));
  for (const id of ids) {
    const links = graph.get(id)!;
    net.installLinks(id, links.out, links.in);
  }
  for (const id of ids) net.start(id);
  if (options.withSource === false) return ids;
  net.addSource();
  net.at(options.sourceStartAt ?? net.now, () => {
    net.start(net.sourceId);
  });
  return ids;
}

/** Members join one by one through the rendezvous server, every `intervalMs` from `startAt`. */
export function joiningSwarm(
  net: Network,
  targetLoads: readonly number[],
  intervalMs: number,
  startAt = 0,
  firstId = 1,
): PeerId[] {
  const ids: PeerId[] = [];
  targetLoads.forEach((tl, i) => {
    const id = firstId + i;
    ids.push(id);
    net.at(startAt + i * intervalMs, () => {
      net.join(id, tl);
    });
  });
  return ids;
}

/** `n` target loads drawn uniformly from [lo, hi], adjusted by ±1 steps so they sum to `total` (if given). */
export function randomTargetLoads(
  n: number,
  lo: number,
  hi: number,
  random: Random,
  total?: number,
): number[] {
  const tls = Array.from({ length: n }, () => lo + random.int(hi - lo + 1));
  if (total !== undefined) {
    let sum = tls.reduce((a, b) => a + b, 0);
    while (sum !== total) {
      const i = random.int(n);
      const v = tls[i]!;
      if (sum < total && v < hi) {
        tls[i] = v + 1;
        sum++;
      } else if (sum > total && v > lo) {
        tls[i] = v - 1;
        sum--;
      }
    }
  }
  return tls;
}

// ───────────── stream checks ─────────────

/** Seq numbers delivered per slice by one node, with how often each was delivered. */
export function deliveryCounts(net: Network, id: PeerId, slices: number): Map<number, number>[] {
  const counts = Array.from({ length: slices }, () => new Map<number, number>());
  for (const d of net.log(id).deliveries) {
    const m = counts[d.slice]!;
    m.set(d.seq, (m.get(d.seq) ?? 0) + 1);
  }
  return counts;
}

/** The payload the publisher put in packet (slice, seq): index seq·M + slice. */
export function payloadIndex(payload: Uint8Array): number {
  return new DataView(payload.buffer, payload.byteOffset, payload.byteLength).getUint32(0);
}

export interface ChainResult {
  /** 'source': reached the true source; 'loop': came back to a node already on the chain; 'orphan': a node without parent (or gone). */
  readonly end: 'source' | 'loop' | 'orphan';
  readonly chain: PeerId[];
}

/** Follow `parents()` from `id` up `slice`'s tree to the true source. */
export function parentChain(net: Network, id: PeerId, slice: number): ChainResult {
  const chain: PeerId[] = [id];
  const seen = new Set<PeerId>([id]);
  let current = id;
  for (;;) {
    const e = net.engines.get(current);
    const parent = e === undefined || e.isStopped ? null : (e.parents()[slice] ?? null);
    if (parent === null) return { end: 'orphan', chain };
    chain.push(parent);
    if (parent === net.sourceId) return { end: 'source', chain };
    if (seen.has(parent)) return { end: 'loop', chain };
    seen.add(parent);
    current = parent;
  }
}
