/**
 * The frames of the tracker fuzzer (tracker-fuzz.ts): seeded generators of valid and broken rendezvous
 * frames, the oracle that says what the tracker must do with each (`judgeFrame`), and the model of
 * one connection's protocol state that predicts the answers to the frames that do decode
 * (`predictReply`).
 */
import { isUtf8 } from 'node:buffer';
import type { Random } from '@chunkycast/engine';
import {
  decodeClientMessage,
  MAX_ANNOUNCED_PACKETS,
  MAX_BOOTSTRAP_PEERS,
  MAX_TICKET_LENGTH,
  MAX_TRACKER_FRAME_BYTES,
  PACKET_HASH_HEX,
  type ClientMessage,
  type PeerRole,
  type SegmentAnnouncement,
  type SignedAnnouncement,
  type TrackerErrorCode,
} from '@chunkycast/wire';

// ─────────────────────────────── what the tracker must do ───────────────────────────────

/** The tracker's `ws` closes the connection (1009) on frames over this (the tracker's WS_MAX_PAYLOAD_BYTES). */
export const TRACKER_WS_MAX_PAYLOAD_BYTES = 4 * MAX_TRACKER_FRAME_BYTES;
/** Over this many bytes the tracker answers tooLarge without decoding (≤ 3 UTF-8 bytes per UTF-16 unit). */
const TRACKER_UNDECODED_LIMIT_BYTES = 3 * MAX_TRACKER_FRAME_BYTES;
/** Close codes: a text frame that is not UTF-8, too many bad frames, a frame over the payload limit. */
export const CLOSE_INVALID_UTF8 = 1007;
export const CLOSE_TOO_MANY_BAD_FRAMES = 1008;
export const CLOSE_TOO_BIG = 1009;

/** What the tracker must do with one frame. */
export type Verdict =
  /** `ws` itself closes the connection before the tracker sees the frame. */
  | { readonly kind: 'close'; readonly code: number }
  /** Undecodable: an `error` frame with exactly this code (and counts towards the bad-frame limit). */
  | { readonly kind: 'bad'; readonly code: TrackerErrorCode; readonly message: string }
  /** Decodes: handled as this message (see predictReply). */
  | { readonly kind: 'message'; readonly message: ClientMessage };

const ANY_SURROGATE = /[\uD800-\uDFFF]/;

/**
 * The oracle: runs a frame through the same checks as the tracker, in the same order (payload limit,
 * UTF-8, binary, byte pre-check, then `decodeClientMessage` on the text as the tracker receives it).
 */
export function judgeFrame(frame: FuzzFrame): Verdict {
  const payload = frame.payload;
  const bytes = typeof payload === 'string' ? Buffer.byteLength(payload, 'utf8') : payload.length;
  if (bytes > TRACKER_WS_MAX_PAYLOAD_BYTES) return { kind: 'close', code: CLOSE_TOO_BIG };
  if (frame.binary)
    return {
      kind: 'bad',
      code: 'malformed',
      message: 'binary frames are not accepted; send JSON text frames',
    };
  let text: string;
  if (typeof payload === 'string')
    // On the wire a string is UTF-8, where a lone surrogate becomes U+FFFD: judge what arrives.
    text = ANY_SURROGATE.test(payload) ? Buffer.from(payload, 'utf8').toString('utf8') : payload;
  else {
    if (!isUtf8(payload)) return { kind: 'close', code: CLOSE_INVALID_UTF8 };
    text = payload.toString('utf8');
  }
  if (bytes > TRACKER_UNDECODED_LIMIT_BYTES)
    return {
      kind: 'bad',
      code: 'tooLarge',
      message: `frame of ${bytes} bytes exceeds ${MAX_TRACKER_FRAME_BYTES}`,
    };
  const decoded = decodeClientMessage(text);
  return decoded.ok
    ? { kind: 'message', message: decoded.message }
    : { kind: 'bad', code: decoded.error.code, message: decoded.error.message };
}

/** A reply the tracker sends to the frame's own connection (signals and announcements are not replies). */
export type ReplyKind = 'welcome' | 'peers' | `error:${TrackerErrorCode}`;

/** What the tracker may answer to a frame that decodes. */
export interface Prediction {
  /** Replies it may send (empty: none). */
  readonly replies: readonly ReplyKind[];
  /** It may also send nothing. */
  readonly optional: boolean;
  /**
   * The outcome changes the connection's state in a way only the reply tells (a source join may meet
   * a source still present): nothing more is generated on this connection until it arrives.
   */
  readonly barrier: boolean;
  /** For joins: what a `welcome` makes of the connection. */
  readonly joins: { readonly stream: string; readonly role: PeerRole } | null;
}

/** One connection's protocol state as the fuzzer predicts it. */
export interface ConnectionState {
  joined: { readonly stream: string; readonly role: PeerRole } | null;
  /** Own peer id once a `welcome` named it (null before, and after leaving). */
  peerId: number | null;
}

export interface PredictionContext {
  readonly broadcasterKey: string;
  /** Whether the tracker's key accepts this announcement's signature. */
  verifyAnnouncement(a: SignedAnnouncement): boolean;
}

const NO_REPLY: Prediction = { replies: [], optional: true, barrier: false, joins: null };

function exactly(reply: ReplyKind): Prediction {
  return { replies: [reply], optional: false, barrier: false, joins: null };
}

/**
 * The tracker's answer to a decoded message on a connection in `state`, following server.ts's
 * handling; updates `state` with the outcomes that are certain. The one uncertainty left is a signal's
 * target, which other connections may have taken away (relayed, or `unknownPeer`).
 */
export function predictReply(
  message: ClientMessage,
  state: ConnectionState,
  context: PredictionContext,
): Prediction {
  const joined = state.joined;
  if (message.type === 'join') {
    if (joined !== null) return exactly('error:alreadyJoined');
    const joins = { stream: message.stream, role: message.role };
    if (message.role === 'source') {
      if (message.key !== context.broadcasterKey) return exactly('error:badKey');
      return { replies: ['welcome', 'error:sourcePresent'], optional: false, barrier: true, joins };
    }
    // A token or a resume ticket may be refused (badToken) by a tracker that checks them.
    if (message.token !== undefined || message.resume !== undefined)
      return { replies: ['welcome', 'error:badToken'], optional: false, barrier: true, joins };
    state.joined = joins;
    state.peerId = null;
    return { replies: ['welcome'], optional: false, barrier: false, joins };
  }
  if (joined === null) return exactly('error:notJoined');
  switch (message.type) {
    case 'bootstrap':
      return exactly('peers');
    case 'signal':
      if (message.to === state.peerId) return exactly('error:invalidField');
      // Peer ids are never 0 (tracker README), so no member can hold it.
      if (message.to === 0) return exactly('error:unknownPeer');
      return { replies: ['error:unknownPeer'], optional: true, barrier: false, joins: null };
    case 'announce': {
      if (joined.role !== 'source') return exactly('error:forbidden');
      const a = message.announcement;
      if (a.stream !== joined.stream || !context.verifyAnnouncement(a)) return exactly('error:invalidField');
      return NO_REPLY;
    }
    case 'report':
      return NO_REPLY;
    case 'leave':
      state.joined = null;
      state.peerId = null;
      return NO_REPLY;
  }
}

// ─────────────────────────────── frames ───────────────────────────────

/** Every kind of frame the generator makes; the test checks each was sent. */
export const FRAME_CLASSES = [
  'valid',
  'wrongType',
  'outOfRange',
  'hugeString',
  'removedField',
  'extraField',
  'unknownType',
  'truncated',
  'randomText',
  'nonObject',
  'invalidUtf8',
  'deepNesting',
  'hugeArray',
  'unicode',
  'oversized',
  'overLimit',
  'binary',
] as const;
export type FrameClass = (typeof FRAME_CLASSES)[number];

/**
 * Relative frequencies. Frames that end the connection (overLimit, most invalidUtf8) are rare so
 * connections live long enough to build state; large frames (oversized, deep, huge) are rare because
 * each costs tens or hundreds of KB on both sides.
 */
const CLASS_WEIGHTS: Readonly<Record<FrameClass, number>> = {
  valid: 36,
  wrongType: 8,
  outOfRange: 7,
  hugeString: 2.5,
  removedField: 6,
  extraField: 6,
  unknownType: 4,
  truncated: 7,
  randomText: 4,
  nonObject: 3,
  invalidUtf8: 0.5,
  deepNesting: 1.5,
  hugeArray: 1.5,
  unicode: 6,
  oversized: 0.5,
  overLimit: 0.08,
  binary: 2,
};

export interface FuzzFrame {
  readonly cls: FrameClass;
  /** Text frames are strings, or raw bytes sent with the text opcode (which need not be UTF-8). */
  readonly payload: string | Buffer;
  readonly binary: boolean;
}

type Json = null | boolean | number | string | Json[] | JsonObject;
interface JsonObject {
  [key: string]: Json;
}

/** Where a value sits, so a mutation can replace or remove it. */
interface Slot {
  readonly holder: JsonObject | Json[];
  readonly key: string | number;
  readonly value: Json;
}

/** Stands for raw JSON text spliced in after stringifying (numbers JSON.stringify cannot write, deep nesting). */
const RAW_MARK = '\u0001raw\u0001';
const RAW_MARK_JSON = JSON.stringify(RAW_MARK);

function stringifyWithRaw(value: Json, raw: string): string {
  return JSON.stringify(value).replace(RAW_MARK_JSON, () => raw);
}

function pick<T>(random: Random, items: readonly T[]): T {
  return items[random.int(items.length)] as T;
}

function chance(random: Random, p: number): boolean {
  return random.nextFloat() < p;
}

/** Integer in [min, max], log-uniformly: small sizes often, huge ones sometimes. */
function logUniform(random: Random, min: number, max: number): number {
  return Math.floor(Math.exp(Math.log(min) + random.nextFloat() * (Math.log(max + 1) - Math.log(min))));
}

const HEX_DIGITS = '0123456789abcdef';
const ALPHABETS = {
  ascii: Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join(''),
  hex: HEX_DIGITS,
  base64: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/',
  ticket: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-',
  jsonish: '{}[]":,\\ 0123456789.eE-+truefalsnul\t\n',
  /** Multi-byte, invisible, direction-changing, non-characters and lone surrogates. */
  unicode: [
    'é',
    '中',
    '😀',
    '\u0000',
    '\u0007',
    '\u2028',
    '\u2029',
    '\uFEFF',
    '\u202E',
    '\u200B',
    '\u0301',
    '\uFFFD',
    '\uFFFE',
    '\uFFFF',
    '\uD800',
    '\uDBFF',
    '\uDC00',
    '\uDFFF',
    'ｊ',
    'о',
    '٣',
    '"',
    '\\',
    'a',
  ],
  /** Three UTF-8 bytes per UTF-16 unit: the most bytes a frame of a given length can have. */
  wide: '中文字節ひらがなカタカナ한국어',
} as const;
type AlphabetName = keyof typeof ALPHABETS;

/** Long random strings are slices of one precomputed filler per alphabet (generating 100 KB per frame costs). */
const FILLER_UNITS = 128 * 1024;
const fillers = new Map<AlphabetName, string>();

function filler(name: AlphabetName): string {
  let text = fillers.get(name);
  if (text === undefined) {
    const alphabet = ALPHABETS[name];
    const parts: string[] = [];
    // A fixed LCG: the filler is the same in every run, so frames stay reproducible by seed.
    let x = 0x2545f491;
    let units = 0;
    while (units < FILLER_UNITS) {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      const ch = alphabet[(x >>> 8) % alphabet.length] ?? 'a';
      parts.push(ch);
      units += ch.length;
    }
    text = parts.join('');
    fillers.set(name, text);
  }
  return text;
}

function randomString(random: Random, length: number, alphabet: AlphabetName): string {
  if (length <= 0) return '';
  const source = filler(alphabet);
  if (length >= source.length) return source.repeat(Math.ceil(length / source.length)).slice(0, length);
  const start = random.int(source.length - length);
  return source.slice(start, start + length);
}

function hex(random: Random, digits: number): string {
  return randomString(random, digits, 'hex');
}

function collectSlots(value: Json, out: Slot[], depth: number): void {
  if (depth > 5 || value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (let i = 0; i < Math.min(value.length, 8); i++) {
      const item = value[i] as Json;
      out.push({ holder: value, key: i, value: item });
      collectSlots(item, out, depth + 1);
    }
    return;
  }
  for (const [key, item] of Object.entries(value)) {
    out.push({ holder: value, key, value: item });
    collectSlots(item, out, depth + 1);
  }
}

function setSlot(slot: Slot, value: Json): void {
  if (Array.isArray(slot.holder)) slot.holder[slot.key as number] = value;
  else slot.holder[slot.key as string] = value;
}

function removeSlot(slot: Slot): void {
  if (Array.isArray(slot.holder)) slot.holder.splice(slot.key as number, 1);
  else Reflect.deleteProperty(slot.holder, slot.key);
}

/** What one connection is for: the stream's true source, a viewer, or a peer that mostly never joins. */
export type ConnectionRole = 'source' | 'viewer' | 'loner';

export interface GeneratorContext {
  readonly role: ConnectionRole;
  /** The stream this connection joins. */
  readonly homeStream: string;
  readonly broadcasterKey: string;
  /** Signs an announcement with the key the tracker was started with. */
  sign(a: SegmentAnnouncement): string;
  /** A peer id to signal: mostly live members, sometimes stale or made-up ids. */
  pickPeerId(random: Random): number;
  /** The resume ticket of this connection's latest welcome (kept across reconnects), if any. */
  resumeTicket(): string | null;
}

const CUMULATIVE_WEIGHTS: readonly (readonly [FrameClass, number])[] = (() => {
  let sum = 0;
  return FRAME_CLASSES.map((cls) => {
    sum += CLASS_WEIGHTS[cls];
    return [cls, sum] as const;
  });
})();
const TOTAL_WEIGHT = CUMULATIVE_WEIGHTS[CUMULATIVE_WEIGHTS.length - 1]?.[1] ?? 1;

/** Seeded frame source for one connection: the same seed and replies give the same frames. */
export class FrameGenerator {
  private sequence = 0;

  constructor(
    private readonly random: Random,
    private readonly context: GeneratorContext,
  ) {}

  /**
   * The first frame of a connection: join as what it is for (null: a loner starts unjoined), half
   * the time with the ticket of the last session, as a peer reconnecting after a drop does.
   */
  opening(): string | null {
    if (this.context.role === 'loner') return null;
    const message = this.homeJoin();
    const ticket = this.context.resumeTicket();
    if (ticket !== null && chance(this.random, 0.5)) message.resume = ticket;
    return JSON.stringify(message);
  }

  private homeJoin(): JsonObject {
    const c = this.context;
    return c.role === 'source'
      ? { type: 'join', stream: c.homeStream, role: 'source', key: c.broadcasterKey }
      : { type: 'join', stream: c.homeStream, role: 'viewer' };
  }

  /** A frame that always gets an answer (peers or notJoined) and never counts as bad: ends a batch. */
  sentinel(): string {
    return JSON.stringify({ type: 'bootstrap', count: 1 + this.random.int(MAX_BOOTSTRAP_PEERS) });
  }

  next(state: ConnectionState): FuzzFrame {
    const r = this.random;
    const x = r.nextFloat() * TOTAL_WEIGHT;
    const cls = CUMULATIVE_WEIGHTS.find(([, upTo]) => x < upTo)?.[0] ?? 'valid';
    const text = (payload: string): FuzzFrame => ({ cls, payload, binary: false });
    // Mutations start from a valid message, half the time one that fits the state (so it gets far
    // into the handler once the field is fixed), half the time any type with any parameters.
    const base = (): JsonObject => this.message(state, chance(r, 0.5));
    switch (cls) {
      case 'valid':
        return text(JSON.stringify(this.message(state, chance(r, 0.85))));
      case 'wrongType':
        return text(this.mutateSlot(base(), (slot) => this.wrongType(slot.value)));
      case 'outOfRange':
        return text(this.outOfRange(base()));
      case 'hugeString':
        return text(
          this.mutateSlot(base(), () =>
            randomString(r, logUniform(r, 100, 70_000), pick(r, ['ascii', 'hex', 'base64', 'wide'] as const)),
          ),
        );
      case 'removedField':
        return text(this.removeField(base()));
      case 'extraField':
        return text(this.extraField(base()));
      case 'unknownType':
        return text(this.unknownType(base()));
      case 'truncated': {
        const full = JSON.stringify(base());
        return text(full.slice(0, r.int(full.length)));
      }
      case 'randomText':
        return text(
          randomString(r, logUniform(r, 1, 5000) - 1, pick(r, ['ascii', 'jsonish', 'unicode'] as const)),
        );
      case 'nonObject':
        return text(this.nonObject(state));
      case 'invalidUtf8':
        return { cls, payload: this.invalidUtf8(state), binary: false };
      case 'deepNesting':
        return text(this.deepNesting(base()));
      case 'hugeArray':
        return text(this.hugeArray(base()));
      case 'unicode':
        return text(this.unicode(base()));
      case 'oversized':
        return text(this.padded(base(), this.oversizedUnits(), chance(r, 0.3)));
      case 'overLimit':
        return text(this.overLimit(base()));
      case 'binary':
        return { cls, payload: this.binaryPayload(state), binary: true };
    }
  }

  // ───────────── valid messages ─────────────

  /** A valid message: one that fits the state (a plausible peer's next step), or any type at all. */
  private message(state: ConnectionState, fitting: boolean): JsonObject {
    const r = this.random;
    const c = this.context;
    if (!fitting) {
      // Leaves are rarer: each one undoes a join, and members that stay are what signals reach.
      const x = r.nextFloat();
      const type =
        x < 0.96
          ? pick(r, ['join', 'bootstrap', 'signal', 'signal', 'announce', 'report'] as const)
          : ('leave' as const);
      return this.messageOfType(type, state);
    }
    if (state.joined === null) {
      if (c.role === 'loner' && chance(r, 0.7))
        return this.messageOfType(
          pick(r, ['bootstrap', 'signal', 'report', 'leave', 'announce'] as const),
          state,
        );
      return c.role === 'loner' ? this.join('viewer', this.randomStream()) : this.homeJoin();
    }
    const x = r.nextFloat();
    if (state.joined.role === 'source') {
      if (x < 0.45) return this.announce(state, true);
      if (x < 0.72) return this.signal(state);
      if (x < 0.82) return this.bootstrap();
      if (x < 0.95) return this.report();
      if (x < 0.99) return this.join('source', c.homeStream);
      return { type: 'leave' };
    }
    if (x < 0.4) return this.signal(state);
    if (x < 0.65) return this.report();
    if (x < 0.82) return this.bootstrap();
    if (x < 0.9) return this.announce(state, true);
    if (x < 0.98) return this.join('viewer', c.homeStream);
    return { type: 'leave' };
  }

  private messageOfType(
    type: 'join' | 'bootstrap' | 'signal' | 'announce' | 'report' | 'leave',
    state: ConnectionState,
  ): JsonObject {
    const r = this.random;
    switch (type) {
      case 'join':
        return this.join(
          chance(r, 0.3) ? 'source' : 'viewer',
          chance(r, 0.5) ? this.context.homeStream : this.randomStream(),
        );
      case 'bootstrap':
        return this.bootstrap();
      case 'signal':
        return this.signal(state);
      case 'announce':
        return this.announce(state, chance(r, 0.7));
      case 'report':
        return this.report();
      case 'leave':
        return { type: 'leave' };
    }
  }

  private randomStream(): string {
    const r = this.random;
    return chance(r, 0.5) ? `fuzz-${r.int(8)}` : randomString(r, 1 + r.int(64), 'ticket');
  }

  private join(role: PeerRole, stream: string): JsonObject {
    const r = this.random;
    const c = this.context;
    const message: JsonObject = { type: 'join', stream, role };
    if (role === 'source') {
      // The right key only from the source connection, or rarely (stealing a stream that lost its source).
      const right = c.role === 'source' ? chance(r, 0.9) : chance(r, 0.05);
      const x = r.nextFloat();
      if (right) message.key = c.broadcasterKey;
      else if (x < 0.7) message.key = randomString(r, 1 + r.int(256), 'ascii');
    } else if (chance(r, 0.1)) message.key = randomString(r, r.int(257), 'ascii');
    if (chance(r, 0.05)) message.token = randomString(r, 1 + r.int(MAX_TICKET_LENGTH), 'ticket');
    if (chance(r, 0.08)) message.resume = this.resumeTicket();
    return message;
  }

  /** A resume ticket: this connection's real one, one slightly off, or made up. */
  private resumeTicket(): string {
    const r = this.random;
    const real = this.context.resumeTicket();
    const x = r.nextFloat();
    if (real === null || x < 0.2) return randomString(r, 1 + r.int(MAX_TICKET_LENGTH), 'ticket');
    if (x < 0.5) return real;
    const at = r.int(real.length);
    const changed = pick(r, ['A', 'z', '0', '.', '-', '_']);
    if (x < 0.7) return real.slice(0, at) + changed + real.slice(at + 1);
    if (x < 0.8) return real.slice(0, Math.max(1, at));
    if (x < 0.9) return (real + randomString(r, 1 + r.int(40), 'ticket')).slice(0, MAX_TICKET_LENGTH);
    // Its parts swapped: well-formed pieces that do not belong together.
    return real.split('.').reverse().join('.');
  }

  private bootstrap(): JsonObject {
    return { type: 'bootstrap', count: 1 + this.random.int(MAX_BOOTSTRAP_PEERS) };
  }

  private signal(state: ConnectionState): JsonObject {
    const r = this.random;
    // Now and then to itself (refused as invalidField).
    const to = state.peerId !== null && chance(r, 0.03) ? state.peerId : this.context.pickPeerId(r);
    const link: JsonObject = chance(r, 0.5) ? { link: r.nextU32() } : {};
    const kind = pick(r, ['offer', 'answer', 'candidate'] as const);
    if (kind === 'candidate')
      return {
        type: 'signal',
        to,
        data: {
          type: 'candidate',
          ...link,
          candidate: {
            candidate: `candidate:${r.nextU32()} 1 udp ${r.nextU32()} 127.0.0.1 ${1024 + r.int(60000)} typ host`,
            sdpMLineIndex: chance(r, 0.2) ? null : r.int(256),
            sdpMid: chance(r, 0.2) ? null : String(r.int(4)),
          },
        },
      };
    return { type: 'signal', to, data: { type: kind, sdp: this.sdp(), ...link } };
  }

  private sdp(): string {
    const r = this.random;
    const lines = [
      'v=0',
      `o=- ${r.nextU32()}${r.nextU32()} 2 IN IP4 127.0.0.1`,
      's=-',
      't=0 0',
      'a=group:BUNDLE 0',
      'm=application 9 UDP/DTLS/SCTP webrtc-datachannel',
      'c=IN IP4 0.0.0.0',
      `a=ice-ufrag:${randomString(r, 4, 'ticket')}`,
      `a=ice-pwd:${randomString(r, 24, 'ticket')}`,
      `a=fingerprint:sha-256 ${hex(r, 64).toUpperCase()}`,
      'a=setup:actpass',
      'a=mid:0',
      'a=sctp-port:5000',
    ];
    // Some with a pile of candidates: SDP sizes from ~0.4 KB to a few KB.
    for (let i = r.int(12); i > 0; i--)
      lines.push(`a=candidate:${r.nextU32()} 1 udp ${r.nextU32()} 127.0.0.1 ${1024 + r.int(60000)} typ host`);
    return lines.join('\r\n') + '\r\n';
  }

  private announce(state: ConnectionState, signed: boolean): JsonObject {
    const r = this.random;
    const packets = 1 + (chance(r, 0.05) ? r.int(MAX_ANNOUNCED_PACKETS) : r.int(8));
    const sequence = this.sequence++;
    const a: SegmentAnnouncement = {
      stream: state.joined?.stream ?? this.context.homeStream,
      sequence,
      uri: `seg${sequence}.ts`,
      bytes: r.int(64 * 1024 * 1024 + 1),
      packets,
      firstPacket: sequence * 16,
      sha256: hex(r, 64),
      packetHashes: hex(r, PACKET_HASH_HEX * packets),
      durationMs: r.int(3_600_001),
      publishedAtMs: 1_700_000_000_000 + sequence * 2000,
    };
    const signature = signed ? this.context.sign(a) : randomString(r, 88, 'base64').slice(0, 86) + '==';
    return { type: 'announce', announcement: { ...a, signature } };
  }

  private report(): JsonObject {
    const r = this.random;
    const slices = r.int(17);
    const id = (): number => this.context.pickPeerId(r);
    return {
      type: 'report',
      report: {
        parents: Array.from({ length: slices }, () => (chance(r, 0.3) ? null : id())),
        children: Array.from({ length: slices }, () => Array.from({ length: r.int(4) }, id)),
        meshBytes: r.nextU32(),
        originBytes: r.nextU32(),
        uploadBytes: r.nextU32(),
        stalls: r.int(10),
        playing: chance(r, 0.5),
        // Half carry connectivity (older SDKs send none), which the tracker sums into its metrics.
        ...(chance(r, 0.5)
          ? {
              connectivity: {
                open: { host: r.int(8), srflx: r.int(8), prflx: r.int(8), relay: r.int(8) },
                connected: { host: r.int(64), srflx: r.int(64), prflx: r.int(64), relay: r.int(64) },
                failed: r.int(64),
                relayedBytes: r.nextU32(),
              },
            }
          : {}),
      },
    };
  }

  // ───────────── mutations ─────────────

  /** Replaces one value, anywhere in the message (the type included), with what `make` returns. */
  private mutateSlot(message: JsonObject, make: (slot: Slot) => Json): string {
    const slots: Slot[] = [];
    collectSlots(message, slots, 0);
    const slot = pick(this.random, slots);
    setSlot(slot, make(slot));
    return JSON.stringify(message);
  }

  private wrongType(value: Json): Json {
    const r = this.random;
    if (typeof value === 'number') return pick(r, [String(value), true, null, [], {}, ''] as Json[]);
    if (typeof value === 'string') return pick(r, [value.length, true, null, [value], {}, 0] as Json[]);
    if (typeof value === 'boolean') return pick(r, [String(value), 1, 0, null] as Json[]);
    if (value === null) return pick(r, [0, '', {}, false, 'null'] as Json[]);
    if (Array.isArray(value)) return pick(r, [{}, 'x', 3, null, true] as Json[]);
    return pick(r, [[], 'x', 0, null, [value]] as Json[]);
  }

  /** A number out of its range (or not an integer, or not finite), or a string off its pattern. */
  private outOfRange(message: JsonObject): string {
    const r = this.random;
    const slots: Slot[] = [];
    collectSlots(message, slots, 0);
    const numbers = slots.filter((s) => typeof s.value === 'number');
    const strings = slots.filter((s) => typeof s.value === 'string' && s.key !== 'type');
    if (numbers.length > 0 && (strings.length === 0 || chance(r, 0.6))) {
      const slot = pick(r, numbers);
      // Text JSON.stringify cannot write: infinities, exponents, -0, long fractions.
      if (chance(r, 0.25)) {
        setSlot(slot, RAW_MARK);
        return stringifyWithRaw(
          message,
          pick(r, ['1e400', '-1e400', '-0', '1e2', '4294967296.5', '0.1e1', '9'.repeat(400)]),
        );
      }
      setSlot(
        slot,
        pick(r, [
          -1,
          -0.5,
          0.5,
          2 ** 32,
          2 ** 32 + 1,
          2 ** 53,
          2 ** 53 + 2,
          -(2 ** 31),
          1e21,
          65,
          257,
          1025,
          0,
          3_600_001,
          64 * 1024 * 1024 + 1,
        ]),
      );
      return JSON.stringify(message);
    }
    if (strings.length === 0) return JSON.stringify(message);
    const slot = pick(r, strings);
    setSlot(
      slot,
      pick(r, [
        '',
        ' ',
        'x'.repeat(65),
        'x'.repeat(257),
        'x'.repeat(1025),
        'ABC!',
        '../etc',
        'G'.repeat(64),
        '0'.repeat(63),
        '=====',
        'a b',
        'a\nb',
        'x'.repeat(16 * 1024 + 1),
        '.'.repeat(MAX_TICKET_LENGTH + 1),
      ]),
    );
    return JSON.stringify(message);
  }

  private removeField(message: JsonObject): string {
    const slots: Slot[] = [];
    collectSlots(message, slots, 0);
    // Several at once sometimes: a frame missing half its fields.
    for (let n = 1 + this.random.int(3); n > 0 && slots.length > 0; n--) {
      const i = this.random.int(slots.length);
      const slot = slots[i] as Slot;
      removeSlot(slot);
      slots.splice(i, 1);
    }
    return JSON.stringify(message);
  }

  private extraField(message: JsonObject): string {
    const r = this.random;
    const slots: Slot[] = [];
    collectSlots(message, slots, 0);
    const objects = [message, ...slots.map((s) => s.value).filter((v): v is JsonObject => isJsonObject(v))];
    const target = pick(r, objects);
    for (let n = 1 + r.int(4); n > 0; n--) {
      const name = pick(r, [
        'extra',
        'constructor',
        'toString',
        'hasOwnProperty',
        'valueOf',
        'then',
        randomString(r, 1 + r.int(20), 'ascii'),
      ]);
      target[name] = pick(r, [1, 'x', null, true, [], {}, { nested: [1, 2, 3] }] as Json[]);
    }
    const text = JSON.stringify(message);
    // Keys an object literal cannot carry: "__proto__", and a duplicate (JSON.parse keeps the last).
    if (chance(r, 0.3) && text.endsWith('}')) {
      const extra = pick(r, [
        '"__proto__":{"type":"leave"}',
        '"type":"leave"',
        '"type":"join"',
        '"count":0',
        '"__proto__":null',
      ]);
      return `${text.slice(0, -1)}${text.length > 2 ? ',' : ''}${extra}}`;
    }
    return text;
  }

  private unknownType(message: JsonObject): string {
    const r = this.random;
    const x = r.nextFloat();
    if (x < 0.15) Reflect.deleteProperty(message, 'type');
    else if (x < 0.2) message.type = randomString(r, logUniform(r, 1000, 60_000), 'ascii');
    else
      message.type = pick(r, [
        '',
        'JOIN',
        'join ',
        ' join',
        'welcome',
        'error',
        'peers',
        'Leave',
        'announcement',
        'signals',
        '__proto__',
        'constructor',
        0,
        1,
        null,
        true,
        [],
        {},
        ['join'],
      ] as Json[]);
    return JSON.stringify(message);
  }

  private nonObject(state: ConnectionState): string {
    const r = this.random;
    const valid = JSON.stringify(this.message(state, true));
    return pick(r, [
      'null',
      'true',
      '0',
      '-1',
      '1e400',
      '""',
      '[]',
      '{}',
      ' ',
      '',
      `[${valid}]`,
      JSON.stringify(valid),
      `${valid}${valid}`,
      `${valid} x`,
      `\uFEFF${valid}`,
      `  ${valid}\n`,
      String(r.nextU32()),
    ]);
  }

  private invalidUtf8(state: ConnectionState): Buffer {
    const r = this.random;
    const valid = Buffer.from(JSON.stringify(this.message(state, true)), 'utf8');
    const x = r.nextFloat();
    if (x < 0.35) {
      const bytes = Buffer.alloc(logUniform(r, 1, 3000));
      for (let i = 0; i < bytes.length; i++) bytes[i] = r.int(256);
      return bytes;
    }
    if (x < 0.55) {
      const bytes = Buffer.from(valid);
      bytes[r.int(bytes.length)] = pick(r, [0xff, 0xfe, 0xc0, 0xc1, 0x80, 0xbf, 0xf5]);
      return bytes;
    }
    const at = r.int(valid.length);
    // Encoded surrogates, overlong forms, a truncated sequence, code points past U+10FFFF.
    const bad = pick(r, [
      [0xed, 0xa0, 0x80],
      [0xc0, 0xaf],
      [0xe0, 0x80, 0xaf],
      [0xe4, 0xb8],
      [0xf4, 0x90, 0x80, 0x80],
      [0xf8, 0x88, 0x80, 0x80, 0x80],
    ]);
    // Some that are fine after all: the oracle must tell them apart too.
    if (x > 0.9)
      return Buffer.concat([valid.subarray(0, at), Buffer.from('é中😀', 'utf8'), valid.subarray(at)]);
    return Buffer.concat([valid.subarray(0, at), Buffer.from(bad), valid.subarray(at)]);
  }

  private deepNesting(message: JsonObject): string {
    const r = this.random;
    const depth = logUniform(r, 2, 40_000);
    const x = r.nextFloat();
    if (x < 0.2) return '['.repeat(depth) + ']'.repeat(depth);
    if (x < 0.35) return '{"a":'.repeat(depth) + '0' + '}'.repeat(depth);
    // Unbalanced: runs off the end.
    if (x < 0.45) return '['.repeat(depth);
    const nested = chance(r, 0.5)
      ? '['.repeat(depth) + ']'.repeat(depth)
      : '{"type":'.repeat(depth) + '"join"' + '}'.repeat(depth);
    return this.spliceRaw(message, nested);
  }

  private hugeArray(message: JsonObject): string {
    const r = this.random;
    const count = logUniform(r, 10, 40_000);
    const element = pick(r, [
      '0',
      'null',
      '4294967295',
      '4294967296',
      '"x"',
      '[]',
      '{}',
      '[1,2]',
      '-1',
      '1.5',
    ]);
    let raw = `[${Array<string>(count).fill(element).join(',')}]`;
    if (chance(r, 0.3)) raw = `[${Array<string>(count).fill(`[${element}]`).join(',')}]`;
    if (chance(r, 0.1)) return raw;
    return this.spliceRaw(message, raw);
  }

  /** Puts raw JSON text in place of a value: mostly where arrays belong (report, announcement). */
  private spliceRaw(message: JsonObject, raw: string): string {
    const r = this.random;
    const slots: Slot[] = [];
    collectSlots(message, slots, 0);
    const arrays = slots.filter((s) => Array.isArray(s.value));
    const slot = arrays.length > 0 && chance(r, 0.6) ? pick(r, arrays) : pick(r, slots);
    setSlot(slot, RAW_MARK);
    return stringifyWithRaw(message, raw);
  }

  private unicode(message: JsonObject): string {
    const r = this.random;
    const slots: Slot[] = [];
    collectSlots(message, slots, 0);
    const strings = slots.filter((s) => typeof s.value === 'string');
    const x = r.nextFloat();
    if (x < 0.4 && strings.length > 0) {
      const slot = pick(r, strings);
      const mixed = randomString(r, 1 + r.int(200), 'unicode');
      setSlot(slot, chance(r, 0.3) && typeof slot.value === 'string' ? slot.value + mixed : mixed);
      return JSON.stringify(message);
    }
    if (x < 0.6 && strings.length > 0) {
      // Escaped lone surrogates and NULs in the JSON text itself: JSON.parse makes real ones.
      const slot = pick(r, strings);
      setSlot(slot, RAW_MARK);
      const value = typeof slot.value === 'string' ? JSON.stringify(slot.value).slice(1, -1) : '';
      return stringifyWithRaw(
        message,
        `"${value}${pick(r, ['\\ud800', '\\udfff', '\\ud83d', '\\u0000', '\\uffff', '\\ud800\\ud800'])}"`,
      );
    }
    if (x < 0.8) {
      // Look-alike type names: Cyrillic о, full-width, a BOM, a NUL, combining marks.
      message.type = pick(r, [
        'jоin',
        'ｊｏｉｎ',
        '\uFEFFjoin',
        'join\u0000',
        'leave\u0301',
        'signal\u200B',
        'bootstrap\uD800',
      ]);
      return JSON.stringify(message);
    }
    // Look-alike or unpaired-surrogate field names: the real field is then missing.
    const keyed = slots.filter((s) => typeof s.key === 'string' && s.key !== 'type');
    if (keyed.length === 0) return JSON.stringify(message);
    const slot = pick(r, keyed);
    const name = String(slot.key);
    removeSlot(slot);
    const holder = slot.holder as JsonObject;
    holder[
      pick(r, [
        name.replace(/e/g, 'е'),
        `${name}\uD800`,
        `\uFEFF${name}`,
        name.toUpperCase(),
        `${name}\u0000`,
      ])
    ] = slot.value;
    return JSON.stringify(message);
  }

  /** Frame lengths over the 64 KiB limit but under the 256 KiB payload limit, and the exact boundaries. */
  private oversizedUnits(): number {
    const r = this.random;
    const x = r.nextFloat();
    if (x < 0.2) return MAX_TRACKER_FRAME_BYTES + pick(r, [-1, 0, 1]);
    return MAX_TRACKER_FRAME_BYTES + 1 + r.int(2 * MAX_TRACKER_FRAME_BYTES);
  }

  /**
   * The message with a filler field making it exactly `units` UTF-16 units long: of characters JSON
   * does not escape, so the boundaries are exact; ASCII (a byte each) or wide (three bytes each, at
   * most 87 000 of them so the frame stays under the payload limit).
   */
  private padded(message: JsonObject, units: number, wide: boolean): string {
    message.pad = '';
    const overhead = JSON.stringify(message).length;
    const length = Math.max(0, (wide ? Math.min(units, 87_000) : units) - overhead);
    message.pad = randomString(this.random, length, wide ? 'wide' : 'ticket');
    return JSON.stringify(message);
  }

  /** Past the payload limit `ws` enforces (and exactly at it, which must still be answered). */
  private overLimit(message: JsonObject): string {
    const r = this.random;
    const bytes = chance(r, 0.2)
      ? TRACKER_WS_MAX_PAYLOAD_BYTES + pick(r, [0, 1])
      : TRACKER_WS_MAX_PAYLOAD_BYTES + 1 + r.int(TRACKER_WS_MAX_PAYLOAD_BYTES);
    return this.padded(message, bytes, false);
  }

  private binaryPayload(state: ConnectionState): Buffer {
    const r = this.random;
    const x = r.nextFloat();
    if (x < 0.5) return Buffer.from(JSON.stringify(this.message(state, true)), 'utf8');
    if (x < 0.9) {
      const bytes = Buffer.alloc(logUniform(r, 1, 4000));
      for (let i = 0; i < bytes.length; i++) bytes[i] = r.int(256);
      return bytes;
    }
    return Buffer.alloc(0);
  }
}

function isJsonObject(value: Json): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
