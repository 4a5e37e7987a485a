/**
 * A small deterministic network for the engine's multi-node tests, on the simulator's network core
 * (`src/net/`: the same event queue, codec transit, links and rendezvous as `Simulation`).
 *
 * - Engines are held by id; virtual time only moves inside `runUntil`.
 * - One queue (time, then insertion order) holds messages, engine timers, bootstrap answers and
 *   scheduled callbacks, so everything happens in time order and ties are FIFO. Times are exact
 *   (real-valued), not rounded to whole milliseconds as in the simulator.
 * - Every message goes through `encode`/`decode` from '@chunkycast/wire', so the engine only ever
 *   sees what the wire can carry. A message that fails to decode throws: the test fails.
 * - Links are reliable and ordered (the thesis assumes TCP-like control, §4.4, experimental setup): a per-link latency
 *   function, plus FIFO per directed link even if the latency changes. No uplink limit, no loss
 *   model: a test drops messages with its own `drop` function.
 * - `requestBootstrap` is answered by the core's rendezvous with a random subset of the current
 *   members (`shuffle` sampling), chosen with the network's seed.
 * - Everything an engine does is recorded per node for assertions.
 */
import { EMPTY_BLOOM, MessageType, type Bloom128, type Message, type PeerId } from '@chunkycast/wire';
import {
  createRandom,
  Engine,
  type Action,
  type EngineEvent,
  type EngineInit,
  type ProtocolConfig,
  type Random,
  type Role,
} from '@chunkycast/engine';
import {
  configurationModel,
  Network as NetworkCore,
  NET_BOOTSTRAP,
  NET_DELIVER,
  NET_HOST_KINDS,
  netEvent,
  type NetEvent,
} from '../../src/net/index.js';

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

/** An engine's timer fires (stale unless it is still the one scheduled for that node). */
const EV_TIMER = NET_HOST_KINDS;
/** A callback scheduled with `at` (its number in `gen`). */
const EV_CALL = NET_HOST_KINDS + 1;

/** One-way latency when a test gives none (ms). */
const DEFAULT_LATENCY_MS = 50;
/** How long the rendezvous server takes to answer when a test gives no delay (ms). */
const DEFAULT_BOOTSTRAP_DELAY_MS = 50;
/** Fork labels of the network's random streams: the rendezvous's, and within it the graph's. */
const RENDEZVOUS_STREAM = 0xb007;
const GRAPH_STREAM = 0x9a9;

/** The undirected pair {a, b} (a closed transport stops both directions). */
function pairKey(a: PeerId, b: PeerId): string {
  return a < b ? `${a}:${b}` : `${b}:${a}`;
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
  private readonly core: NetworkCore;
  private readonly scheduledTimer = new Map<PeerId, number>();
  /** Callbacks scheduled with `at`, by number. */
  private readonly calls = new Map<number, () => void>();
  private nextCall = 0;
  private readonly closedPairs = new Set<string>();
  private readonly options: NetworkOptions;
  private published = 0;

  constructor(options: NetworkOptions) {
    this.options = options;
    this.sourceId = options.sourceId ?? 0;
    this.random = createRandom(options.seed).fork(RENDEZVOUS_STREAM);
    const lat = options.latency ?? DEFAULT_LATENCY_MS;
    const latency: LatencyFn = typeof lat === 'number' ? () => lat : lat;
    const bootstrapDelayMs = options.bootstrapDelayMs ?? DEFAULT_BOOTSTRAP_DELAY_MS;
    this.core = new NetworkCore({
      latencyMs: latency,
      time: 'real',
      fifoPerLink: true,
      // A closed transport, or the test's own drop rule, loses the message.
      loses: (from, to, message) =>
        this.closedPairs.has(pairKey(from, to)) ||
        this.options.drop?.(from, to, message, this.clock) === true,
      rendezvous: {
        sampling: 'shuffle',
        random: this.random,
        pool: () => this.members(),
        answerDelayMs: () => bootstrapDelayMs,
      },
    });
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
    const id = this.nextCall++;
    this.calls.set(id, fn);
    this.core.push(Math.max(time, this.clock), netEvent(EV_CALL, 0, 0, null, null, id));
  }

  /** Abrupt failure: the engine disappears with all its traffic, in flight or future. */
  kill(id: PeerId): void {
    this.engines.delete(id);
    this.scheduledTimer.delete(id);
    this.dead.add(id);
  }

  /**
   * The node stops running, as a page the browser freezes: what it already sent is still delivered
   * (unlike `kill`), nothing reaches it any more and none of its timers fire. Its links stay open:
   * the others notice only by its silence.
   */
  freeze(id: PeerId): void {
    this.engines.delete(id);
    this.scheduledTimer.delete(id);
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
    const queue = this.core.queue;
    for (;;) {
      const next = queue.peekTime();
      if (next === undefined || next > time) break;
      const ev = queue.pop();
      if (ev === undefined) break;
      this.clock = Math.max(this.clock, queue.nowMs);
      this.process(ev, queue.nowMs);
    }
    this.clock = Math.max(this.clock, time);
  }

  private process(ev: NetEvent, time: number): void {
    switch (ev.kind) {
      case EV_CALL: {
        const fn = this.calls.get(ev.gen);
        this.calls.delete(ev.gen);
        fn?.();
        return;
      }
      case EV_TIMER: {
        if (this.scheduledTimer.get(ev.node) !== time) return; // superseded
        this.scheduledTimer.delete(ev.node);
        const e = this.engines.get(ev.node);
        if (e === undefined) return;
        if (e.nextDeadline() <= this.clock) this.input(ev.node, { kind: 'timer' });
        else this.schedule(ev.node);
        return;
      }
      case NET_BOOTSTRAP:
        this.input(ev.node, { kind: 'bootstrap', peers: ev.peers ?? [] });
        return;
      case NET_DELIVER: {
        const to = ev.node;
        const decoded = this.dead.has(ev.from) || this.dead.has(to) ? null : this.core.delivered(ev);
        if (decoded === null) {
          this.droppedMessages++;
          return;
        }
        if (!decoded.ok) {
          throw new Error(
            `message ${ev.from}→${to} does not decode: ${decoded.error.kind} ${decoded.error.message}`,
          );
        }
        const message = decoded.message;
        this.messageCounts.set(message.type, (this.messageCounts.get(message.type) ?? 0) + 1);
        if (this.options.recordMessages !== false && this.engines.has(to))
          this.log(to).received.push({ time: this.clock, to: ev.from, message });
        const endpoint = this.endpoints.get(to);
        if (endpoint !== undefined) {
          endpoint(this.clock, ev.from, message);
          return;
        }
        this.input(to, { kind: 'message', from: ev.from, message });
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
    this.core.push(time, netEvent(EV_TIMER, id));
  }

  private transmit(from: PeerId, to: PeerId, message: Message, delayMs?: number): void {
    const transit = this.core.transit;
    const bytes = transit.encode(message);
    const outcome = this.core.carry(from, to, message, bytes, this.clock, {
      sizeBytes: transit.lastByteLength,
      droppable: false,
      lossy: true,
      ...(delayMs === undefined ? {} : { delayMs }),
    });
    if (outcome !== 'sent') this.droppedMessages++;
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
        case 'requestBootstrap':
          log.bootstrapRequests++;
          this.core.requestBootstrap(id, action.count, this.clock);
          break;
        case 'disconnect':
          log.disconnects.push({ time: this.clock, peer: action.peer });
          this.closedPairs.add(pairKey(id, action.peer));
          break;
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
  const graph = configurationModel(degrees, net.random.fork(GRAPH_STREAM), 'sweep');
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

/** A data packet as a scripted slice source sends it: the payload is `seq` as 4 bytes. */
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
