import type { Bloom128 } from './bloom.js';
import {
  HEADER_BYTES,
  MAX_MESSAGE_BYTES,
  MAX_REPAIR_PACKETS,
  MAX_REPORT_CANDIDATES,
  MAX_SLICES,
  MessageType,
  WIRE_VERSION,
  type AdvertSliceEntry,
  type ForcedReason,
  type LinkDirection,
  type LinkOp,
  type LoadCandidate,
  type Message,
  type RejectReason,
  type RepairNakReason,
  type SwitchReason,
  type TreeRole,
  type WalkPurpose,
} from './messages.js';
import { MAX_ANNOUNCEMENT_TEXT_BYTES, announcementText, validateAnnouncement } from './tracker.js';

/** Why a byte string is not a message. Each kind is a distinct, testable reason. */
export type DecodeErrorKind =
  | 'empty'
  | 'tooLarge'
  | 'unsupportedVersion'
  | 'unknownType'
  | 'truncated'
  | 'trailingBytes'
  | 'limitExceeded'
  | 'invalidValue';

export interface DecodeError {
  readonly kind: DecodeErrorKind;
  readonly message: string;
  /** Byte offset where decoding stopped. */
  readonly offset: number;
}

export type DecodeResult =
  { readonly ok: true; readonly message: Message } | { readonly ok: false; readonly error: DecodeError };

/** Thrown by `encode` when our own code hands it an impossible value: a programming error, not peer input. */
export class EncodeError extends TypeError {
  override readonly name = 'EncodeError';
}

const DATA_FIXED_BYTES = 1 + 4 + 16 + 1 + 4;
/** Largest data payload that still fits in one message. */
export const MAX_PAYLOAD_BYTES = MAX_MESSAGE_BYTES - HEADER_BYTES - DATA_FIXED_BYTES;
const ADVERT_FIXED_BYTES = 1 + 2 * 5 + 4 + 4 + 2 + 1;
const ADVERT_ENTRY_BYTES = 1 + 1 + 1 + 2 + 2 + 16;
const NO_ECHO_HOLD = 0xffff;
/** Bytes per String.fromCharCode call: it takes its arguments on the stack. */
const CHAR_CODE_CHUNK = 8192;
const OFFSET_MIN_MS = -32_767;
const OFFSET_MAX_MS = 32_767;
/** Encoded value of an unknown offset. */
const OFFSET_UNKNOWN = -32_768;
/** Largest path estimate sent (ms, u16); larger ones are sent as this (a path of a minute is lost anyway). */
const PATH_MAX_MS = 0xfffe;
/** Encoded value of an unknown path estimate. */
const PATH_UNKNOWN = 0xffff;

const ENUM_LIMITS = {
  switchReason: 1,
  rejectReason: 9,
  forcedReason: 5,
  treeRole: 1,
  walkPurpose: 3,
  linkOp: 1,
  linkDirection: 1,
  repairNakReason: 2,
} as const;

/** Encoded size of `message` in bytes, header included. */
export function encodedSize(message: Message): number {
  switch (message.type) {
    case MessageType.Data:
      return HEADER_BYTES + DATA_FIXED_BYTES + message.payload.byteLength;
    case MessageType.Probe:
      return HEADER_BYTES + 1 + 4 + 16 + 1;
    case MessageType.Advert:
      return HEADER_BYTES + ADVERT_FIXED_BYTES + ADVERT_ENTRY_BYTES * message.entries.length;
    case MessageType.LoadReport:
      return HEADER_BYTES + 1 + 1 + 10 * message.candidates.length;
    case MessageType.Instruction:
      return HEADER_BYTES + 1 + 4 + 2;
    case MessageType.SwitchRequest:
      return HEADER_BYTES + 1 + 1 + 4 + 2 + 2;
    case MessageType.SwitchReply:
      return HEADER_BYTES + 1 + 4 + 1 + 1 + 2;
    case MessageType.SwitchComplete:
      return HEADER_BYTES + 1 + 4 + 4;
    case MessageType.LatencyPermissionRequest:
      return HEADER_BYTES + 1 + 4 + 2;
    case MessageType.LatencyPermissionReply:
      return HEADER_BYTES + 1 + 4 + 1;
    case MessageType.Flood:
      return HEADER_BYTES + 1 + 4 + 16 + 1;
    case MessageType.ForcedParentRequest:
      return HEADER_BYTES + 1 + 1 + 4;
    case MessageType.Heartbeat:
      return HEADER_BYTES;
    case MessageType.Quit:
      return HEADER_BYTES + 2;
    case MessageType.TreeLeave:
      return HEADER_BYTES + 1 + 1;
    case MessageType.Walk:
      return HEADER_BYTES + 4 + 4 + 1 + 1;
    case MessageType.Link:
      return HEADER_BYTES + 1 + 1 + 4;
    case MessageType.Swap:
      return HEADER_BYTES + 4 + 4;
    case MessageType.SampleResult:
      return HEADER_BYTES + 4;
    case MessageType.SliceSourceAssign:
      return HEADER_BYTES + 1 + 4 + 1 + 1 + (message.peer === undefined ? 0 : 4);
    case MessageType.RepairRequest:
      return HEADER_BYTES + 4 + 4 + 2 + message.missing.byteLength;
    case MessageType.RepairData:
      return HEADER_BYTES + 4 + 4 + message.payload.byteLength;
    case MessageType.RepairNak:
      return HEADER_BYTES + 4 + 1;
    case MessageType.Announcement:
      return HEADER_BYTES + 4 + announcementText(message.announcement).length;
    case MessageType.PacketRepairRequest:
      return HEADER_BYTES + 1 + 4 + 4 + 4;
    case MessageType.PacketRepairData:
      return HEADER_BYTES + 1 + 4 + 4 + 1 + 4 + message.payload.byteLength;
    case MessageType.PacketRepairNak:
      return HEADER_BYTES + 1 + 4 + 4 + 4 + 1;
    default: {
      const unknown: { readonly type: unknown } = message;
      throw new EncodeError(`unknown message type ${String(unknown.type)}`);
    }
  }
}

/**
 * Little-endian writer over a Uint8Array. No DataView on purpose: touching `.buffer` of a small
 * typed array makes V8 move it off the heap, which dominated the simulator's profile.
 */
class Writer {
  offset = 0;
  constructor(readonly bytes: Uint8Array) {}
  private put8(value: number): void {
    this.bytes[this.offset++] = value & 0xff;
  }
  private put16(value: number): void {
    const b = this.bytes;
    const o = this.offset;
    b[o] = value & 0xff;
    b[o + 1] = (value >>> 8) & 0xff;
    this.offset = o + 2;
  }
  private put32(value: number): void {
    const b = this.bytes;
    const o = this.offset;
    b[o] = value & 0xff;
    b[o + 1] = (value >>> 8) & 0xff;
    b[o + 2] = (value >>> 16) & 0xff;
    b[o + 3] = (value >>> 24) & 0xff;
    this.offset = o + 4;
  }
  u8(value: number, field: string): void {
    if (!Number.isInteger(value) || value < 0 || value > 0xff)
      throw new EncodeError(`${field} must be a u8, got ${value}`);
    this.put8(value);
  }
  u16(value: number, field: string): void {
    if (!Number.isInteger(value) || value < 0 || value > 0xffff)
      throw new EncodeError(`${field} must be a u16, got ${value}`);
    this.put16(value);
  }
  i16(value: number): void {
    this.put16(value & 0xffff);
  }
  u32(value: number, field: string): void {
    if (!Number.isInteger(value) || value < 0 || value > 0xffff_ffff)
      throw new EncodeError(`${field} must be a u32, got ${value}`);
    this.put32(value);
  }
  /** An enum code the decoder accepts: 0..max. */
  enumValue(value: number, max: number, field: string): void {
    if (!Number.isInteger(value) || value < 0 || value > max)
      throw new EncodeError(`${field} must be in 0..${max}, got ${value}`);
    this.put8(value);
  }
  bool(value: boolean): void {
    this.put8(value ? 1 : 0);
  }
  slice(value: number): void {
    if (!Number.isInteger(value) || value < 0 || value >= MAX_SLICES)
      throw new EncodeError(`slice must be in 0..${MAX_SLICES - 1}, got ${value}`);
    this.put8(value);
  }
  bloom(value: Bloom128): void {
    this.u32(value[0], 'bloom[0]');
    this.u32(value[1], 'bloom[1]');
    this.u32(value[2], 'bloom[2]');
    this.u32(value[3], 'bloom[3]');
  }
  raw(value: Uint8Array): void {
    this.bytes.set(value, this.offset);
    this.offset += value.byteLength;
  }
  /** Text of ASCII characters only (the caller made it so), one byte each. */
  ascii(text: string): void {
    const b = this.bytes;
    let o = this.offset;
    for (let i = 0; i < text.length; i++) b[o++] = text.charCodeAt(i);
    this.offset = o;
  }
}

function newBuffer(size: number): Uint8Array {
  return new Uint8Array(size);
}

/**
 * Hands out zeroed views of large shared slabs. Each small `new Uint8Array` above 64 bytes costs V8
 * an off-heap allocation and a finaliser; a host that encodes millions of messages (the simulator)
 * passes `slab.allocate` to `encode` instead, and a browser copies its received payloads into slabs
 * (`decode`'s `allocatePayload`). A slab lives until every view into it is gone; a request larger
 * than a slab gets a buffer of its own.
 */
export class SlabAllocator {
  private slab: Uint8Array;
  private offset = 0;
  constructor(private readonly slabBytes = 1 << 20) {
    this.slab = new Uint8Array(slabBytes);
  }
  readonly allocate = (size: number): Uint8Array => {
    if (size > this.slabBytes) return new Uint8Array(size);
    if (this.offset + size > this.slabBytes) {
      this.slab = new Uint8Array(this.slabBytes);
      this.offset = 0;
    }
    const view = this.slab.subarray(this.offset, this.offset + size);
    this.offset += size;
    return view;
  };
}

/**
 * Encode one message. Throws `EncodeError` only for values our own code should never produce
 * (out-of-range integers or enum codes, too many entries, an oversized payload, an echo hold time
 * without an echo, an empty packet-repair bitmap).
 */
export function encode(message: Message, allocate: (size: number) => Uint8Array = newBuffer): Uint8Array {
  const size = encodedSize(message);
  if (size > MAX_MESSAGE_BYTES)
    throw new EncodeError(`message of ${size} bytes exceeds ${MAX_MESSAGE_BYTES}`);
  const buffer = allocate(size);
  if (buffer.length !== size) throw new EncodeError(`allocator returned ${buffer.length} bytes for ${size}`);
  const w = new Writer(buffer);
  w.u8(WIRE_VERSION, 'version');
  w.u8(message.type, 'type');
  switch (message.type) {
    case MessageType.Data:
      w.slice(message.slice);
      w.u32(message.seq, 'seq');
      w.bloom(message.bloom);
      w.u8(message.hops, 'hops');
      w.u32(message.payload.byteLength, 'payload length');
      w.raw(message.payload);
      break;
    case MessageType.Probe:
      w.slice(message.slice);
      w.u32(message.probeId, 'probeId');
      w.bloom(message.bloom);
      w.u8(message.hops, 'hops');
      break;
    case MessageType.Advert: {
      if (message.entries.length > MAX_SLICES)
        throw new EncodeError(`advert has ${message.entries.length} entries, max ${MAX_SLICES}`);
      const hasEcho = message.echoSentAtMs !== null;
      w.u8((message.full ? 1 : 0) | (hasEcho ? 2 : 0), 'advert flags');
      w.u16(message.load, 'load');
      w.u16(message.targetLoad, 'targetLoad');
      w.u16(message.lowerLatencyThreshold, 'lowerLatencyThreshold');
      w.u16(message.upperLatencyThreshold, 'upperLatencyThreshold');
      w.u16(message.maxLoad, 'maxLoad');
      w.u32(message.sentAtMs, 'sentAtMs');
      w.u32(message.echoSentAtMs ?? 0, 'echoSentAtMs');
      if (hasEcho && message.echoHoldMs >= NO_ECHO_HOLD)
        throw new EncodeError(`echoHoldMs must be < ${NO_ECHO_HOLD}`);
      // Not sent without an echo; the decoder reports 0, so anything else would not round trip.
      if (!hasEcho && message.echoHoldMs !== 0)
        throw new EncodeError(`echoHoldMs must be 0 without an echo, got ${message.echoHoldMs}`);
      w.u16(hasEcho ? message.echoHoldMs : NO_ECHO_HOLD, 'echoHoldMs');
      w.u8(message.entries.length, 'entry count');
      let previousSlice = -1;
      for (const entry of message.entries) {
        if (entry.slice <= previousSlice)
          throw new EncodeError('advert entries must be in strictly ascending slice order');
        previousSlice = entry.slice;
        w.slice(entry.slice);
        w.u8((entry.receiving ? 1 : 0) | (entry.isSliceSource ? 2 : 0), 'entry flags');
        w.u8(entry.hops, 'hops');
        if (entry.offsetMs === null) w.i16(OFFSET_UNKNOWN);
        else if (Number.isNaN(entry.offsetMs))
          throw new EncodeError('offsetMs must be a number or null, got NaN');
        else w.i16(Math.max(OFFSET_MIN_MS, Math.min(OFFSET_MAX_MS, Math.round(entry.offsetMs))));
        if (entry.pathMs === null) w.u16(PATH_UNKNOWN, 'pathMs');
        else if (Number.isNaN(entry.pathMs))
          throw new EncodeError('pathMs must be a number or null, got NaN');
        else w.u16(Math.max(0, Math.min(PATH_MAX_MS, Math.round(entry.pathMs))), 'pathMs');
        w.bloom(entry.filter);
      }
      break;
    }
    case MessageType.LoadReport:
      if (message.candidates.length < 1 || message.candidates.length > MAX_REPORT_CANDIDATES) {
        throw new EncodeError(
          `a load report carries 1..${MAX_REPORT_CANDIDATES} candidates, got ${message.candidates.length}`,
        );
      }
      w.slice(message.slice);
      w.u8(message.candidates.length, 'candidate count');
      for (const c of message.candidates) {
        w.u32(c.peer, 'candidate peer');
        w.u16(c.load, 'candidate load');
        w.u16(c.lowerLatencyThreshold, 'candidate LLT');
        w.u16(c.targetLoad, 'candidate TL');
      }
      break;
    case MessageType.Instruction:
      w.slice(message.slice);
      w.u32(message.target, 'target');
      w.u16(message.targetLoadSeen, 'targetLoadSeen');
      break;
    case MessageType.SwitchRequest:
      w.slice(message.slice);
      w.enumValue(message.reason, ENUM_LIMITS.switchReason, 'reason');
      w.u32(message.handoffSeq, 'handoffSeq');
      w.u16(message.targetLoadSeen, 'targetLoadSeen');
      w.u16(message.parentLoadSeen, 'parentLoadSeen');
      break;
    case MessageType.SwitchReply:
      if (message.accepted !== (message.rejectReason === 0))
        throw new EncodeError('an accepted reply has no reject reason, a rejection has one');
      w.slice(message.slice);
      w.u32(message.handoffSeq, 'handoffSeq');
      w.bool(message.accepted);
      w.enumValue(message.rejectReason, ENUM_LIMITS.rejectReason, 'rejectReason');
      w.u16(message.load, 'load');
      break;
    case MessageType.SwitchComplete:
      w.slice(message.slice);
      w.u32(message.handoffSeq, 'handoffSeq');
      w.u32(message.newParent, 'newParent');
      break;
    case MessageType.LatencyPermissionRequest:
      w.slice(message.slice);
      w.u32(message.target, 'target');
      w.u16(message.parentLoadSeen, 'parentLoadSeen');
      break;
    case MessageType.LatencyPermissionReply:
      w.slice(message.slice);
      w.u32(message.target, 'target');
      w.bool(message.granted);
      break;
    case MessageType.Flood:
      w.slice(message.slice);
      w.u32(message.epoch, 'epoch');
      w.bloom(message.bloom);
      w.u8(message.hops, 'hops');
      break;
    case MessageType.ForcedParentRequest:
      w.slice(message.slice);
      w.enumValue(message.reason, ENUM_LIMITS.forcedReason, 'reason');
      w.u32(message.fromSeq, 'fromSeq');
      break;
    case MessageType.Heartbeat:
      break;
    case MessageType.Quit:
      w.u16(message.lingerMs, 'lingerMs');
      break;
    case MessageType.TreeLeave:
      w.slice(message.slice);
      w.enumValue(message.role, ENUM_LIMITS.treeRole, 'role');
      break;
    case MessageType.Walk:
      w.u32(message.walkId, 'walkId');
      w.u32(message.origin, 'origin');
      w.enumValue(message.purpose, ENUM_LIMITS.walkPurpose, 'purpose');
      w.u8(message.ttl, 'ttl');
      break;
    case MessageType.Link:
      w.enumValue(message.op, ENUM_LIMITS.linkOp, 'op');
      w.enumValue(message.direction, ENUM_LIMITS.linkDirection, 'direction');
      w.u32(message.walkId, 'walkId');
      break;
    case MessageType.Swap:
      w.u32(message.walkId, 'walkId');
      w.u32(message.newTarget, 'newTarget');
      break;
    case MessageType.SampleResult:
      w.u32(message.walkId, 'walkId');
      break;
    case MessageType.SliceSourceAssign:
      w.slice(message.slice);
      w.u32(message.epoch, 'epoch');
      w.bool(message.assigned);
      w.bool(message.peer !== undefined);
      if (message.peer !== undefined) w.u32(message.peer, 'peer');
      break;
    case MessageType.RepairRequest:
      w.u32(message.requestId, 'requestId');
      w.u32(message.segment, 'segment');
      if (message.count < 1 || message.count > MAX_REPAIR_PACKETS)
        throw new EncodeError(`count ${message.count} is outside 1‥${MAX_REPAIR_PACKETS}`);
      if (message.missing.byteLength !== Math.ceil(message.count / 8))
        throw new EncodeError(
          `a bitmap of ${message.count} packets has ${Math.ceil(message.count / 8)} bytes`,
        );
      w.u16(message.count, 'count');
      w.raw(message.missing);
      break;
    case MessageType.RepairData:
      w.u32(message.requestId, 'requestId');
      w.u32(message.payload.byteLength, 'payload length');
      w.raw(message.payload);
      break;
    case MessageType.RepairNak:
      w.u32(message.requestId, 'requestId');
      w.enumValue(message.reason, ENUM_LIMITS.repairNakReason, 'reason');
      break;
    case MessageType.Announcement: {
      // The same checks as the decoder's, so whatever we send a peer accepts.
      const checked = validateAnnouncement(message.announcement);
      if (!checked.ok) throw new EncodeError(`announcement: ${checked.error.message}`);
      const text = announcementText(message.announcement);
      if (text.length > MAX_ANNOUNCEMENT_TEXT_BYTES)
        throw new EncodeError(`announcement of ${text.length} bytes exceeds ${MAX_ANNOUNCEMENT_TEXT_BYTES}`);
      w.u32(text.length, 'announcement length');
      w.ascii(text);
      break;
    }
    case MessageType.PacketRepairRequest:
      // An empty bitmap asks for nothing; the decoder refuses it, so never send one.
      if (message.wanted === 0)
        throw new EncodeError('a packet repair request must want at least one packet');
      w.slice(message.slice);
      w.u32(message.requestId, 'requestId');
      w.u32(message.baseSeq, 'baseSeq');
      w.u32(message.wanted, 'wanted');
      break;
    case MessageType.PacketRepairData:
      // The message-size check alone would allow more (this header is smaller than Data's), but
      // the decoder's readPayload refuses anything over MAX_PAYLOAD_BYTES.
      if (message.payload.byteLength > MAX_PAYLOAD_BYTES)
        throw new EncodeError(`payload of ${message.payload.byteLength} bytes exceeds ${MAX_PAYLOAD_BYTES}`);
      w.slice(message.slice);
      w.u32(message.requestId, 'requestId');
      w.u32(message.seq, 'seq');
      w.u8(message.hops, 'hops');
      w.u32(message.payload.byteLength, 'payload length');
      w.raw(message.payload);
      break;
    case MessageType.PacketRepairNak:
      // A NAK that refuses nothing says nothing; the decoder refuses it.
      if (message.unserved === 0)
        throw new EncodeError('a packet repair NAK must refuse at least one packet');
      w.slice(message.slice);
      w.u32(message.requestId, 'requestId');
      w.u32(message.baseSeq, 'baseSeq');
      w.u32(message.unserved, 'unserved');
      w.enumValue(message.reason, ENUM_LIMITS.repairNakReason, 'reason');
      break;
  }
  return w.bytes;
}

/**
 * Every decoded empty byte string is this one: it has no contents to change, so sharing it is safe,
 * and a host that keeps millions of empty payloads (the simulator's packets carry none) keeps no
 * buffer per packet (two allocations each; 650 per member were alive in a 500-member run).
 */
const NO_BYTES: Uint8Array = Object.freeze(new Uint8Array(0));

/** Internal control flow for `decode`; never escapes it. */
class DecodeFailure extends Error {
  constructor(
    readonly kind: DecodeErrorKind,
    message: string,
    readonly offset: number,
  ) {
    super(message);
  }
}

/** Bounded little-endian reader; every read checks the bytes that remain (no DataView, see Writer). */
class Reader {
  offset = 0;
  constructor(
    private readonly bytes: Uint8Array,
    /** Where payloads are copied to (decode's `allocatePayload`); null: a buffer of their own each. */
    private readonly allocatePayload: ((size: number) => Uint8Array) | null = null,
  ) {}
  private need(count: number, field: string): void {
    if (this.offset + count > this.bytes.length) {
      throw new DecodeFailure('truncated', `truncated while reading ${field}`, this.offset);
    }
  }
  private at32(o: number): number {
    const b = this.bytes;
    return ((b[o] ?? 0) | ((b[o + 1] ?? 0) << 8) | ((b[o + 2] ?? 0) << 16) | ((b[o + 3] ?? 0) << 24)) >>> 0;
  }
  u8(field: string): number {
    this.need(1, field);
    return this.bytes[this.offset++] ?? 0;
  }
  u16(field: string): number {
    this.need(2, field);
    const o = this.offset;
    this.offset = o + 2;
    return (this.bytes[o] ?? 0) | ((this.bytes[o + 1] ?? 0) << 8);
  }
  i16(field: string): number {
    const v = this.u16(field);
    return v >= 0x8000 ? v - 0x10000 : v;
  }
  u32(field: string): number {
    this.need(4, field);
    const o = this.offset;
    this.offset = o + 4;
    return this.at32(o);
  }
  bool(field: string): boolean {
    const v = this.u8(field);
    if (v > 1) throw new DecodeFailure('invalidValue', `${field} must be 0 or 1, got ${v}`, this.offset - 1);
    return v === 1;
  }
  enumValue(field: string, max: number): number {
    const v = this.u8(field);
    if (v > max)
      throw new DecodeFailure(
        'invalidValue',
        `${field} ${v} is not a known value (max ${max})`,
        this.offset - 1,
      );
    return v;
  }
  slice(): number {
    const v = this.u8('slice');
    if (v >= MAX_SLICES)
      throw new DecodeFailure('limitExceeded', `slice ${v} is not below ${MAX_SLICES}`, this.offset - 1);
    return v;
  }
  bloom(): Bloom128 {
    this.need(16, 'bloom filter');
    const o = this.offset;
    this.offset += 16;
    return [this.at32(o), this.at32(o + 4), this.at32(o + 8), this.at32(o + 12)];
  }
  bytesCopy(length: number, field: string): Uint8Array {
    this.need(length, field);
    if (length === 0) return NO_BYTES;
    const out = this.bytes.slice(this.offset, this.offset + length);
    this.offset += length;
    return out;
  }
  /** A payload's `length` bytes, copied where `allocatePayload` says (else as bytesCopy). */
  payloadCopy(length: number): Uint8Array {
    const allocate = this.allocatePayload;
    if (allocate === null || length === 0) return this.bytesCopy(length, 'payload');
    this.need(length, 'payload');
    const out = allocate(length);
    if (out.length !== length)
      throw new RangeError(`payload allocator returned ${out.length} bytes for ${length}`);
    out.set(this.bytes.subarray(this.offset, this.offset + length));
    this.offset += length;
    return out;
  }
  /** `length` bytes as text; every byte must be ASCII (announcementText escapes everything else). */
  ascii(length: number, field: string): string {
    this.need(length, field);
    const start = this.offset;
    const end = start + length;
    const bytes = this.bytes;
    // A plain loop, and the bytes handed over as they are: a viewer decodes every announcement once
    // per neighbour, and the per-byte callback and argument spread this replaced were 2% of a
    // 16-viewer page's main thread (issue 17's profile).
    for (let i = start; i < end; i++)
      if ((bytes[i] as number) >= 0x80)
        throw new DecodeFailure('invalidValue', `${field} has a byte outside ASCII`, i);
    this.offset = end;
    let text = '';
    for (let from = start; from < end; from += CHAR_CODE_CHUNK)
      text += String.fromCharCode.apply(
        null,
        bytes.subarray(from, Math.min(end, from + CHAR_CODE_CHUNK)) as unknown as number[],
      );
    return text;
  }
  get remaining(): number {
    return this.bytes.length - this.offset;
  }
}

/**
 * Decode one message. Never throws: any byte string yields either a message or a typed error.
 * Work is bounded by the input length (every count is checked against the bytes that remain).
 *
 * A payload (data, repair data) is copied out of `bytes`, into a buffer of its own or, with
 * `allocatePayload`, wherever that returns (exactly `size` bytes; a `SlabAllocator`'s `allocate`).
 * A browser keeps its packets' payloads for ~20 s, each then an allocation of its own that died
 * at a different time from its neighbours in the allocator: Chromium kept their freed slots
 * resident (issue 17). Slabs hold a few seconds of packets each and go back whole.
 */
export function decode(
  bytes: Uint8Array,
  allocatePayload: ((size: number) => Uint8Array) | null = null,
): DecodeResult {
  try {
    return { ok: true, message: decodeOrFail(bytes, allocatePayload) };
  } catch (failure) {
    if (failure instanceof DecodeFailure) {
      return { ok: false, error: { kind: failure.kind, message: failure.message, offset: failure.offset } };
    }
    // A bug in this decoder, not in the input: still report it as data rather than crash the host.
    return {
      ok: false,
      error: { kind: 'invalidValue', message: `decoder fault: ${String(failure)}`, offset: 0 },
    };
  }
}

function decodeOrFail(bytes: Uint8Array, allocatePayload: ((size: number) => Uint8Array) | null): Message {
  if (bytes.byteLength === 0) throw new DecodeFailure('empty', 'empty message', 0);
  if (bytes.byteLength > MAX_MESSAGE_BYTES) {
    throw new DecodeFailure(
      'tooLarge',
      `message of ${bytes.byteLength} bytes exceeds ${MAX_MESSAGE_BYTES}`,
      0,
    );
  }
  const r = new Reader(bytes, allocatePayload);
  const version = r.u8('version');
  if (version !== WIRE_VERSION)
    throw new DecodeFailure('unsupportedVersion', `wire version ${version} is not ${WIRE_VERSION}`, 0);
  const type = r.u8('type');
  const message = decodeBody(r, type);
  if (r.remaining !== 0)
    throw new DecodeFailure('trailingBytes', `${r.remaining} bytes after a complete message`, r.offset);
  return message;
}

/** A u32 length, bounded by MAX_PAYLOAD_BYTES, then that many bytes (copied). */
function readPayload(r: Reader): Uint8Array {
  const length = r.u32('payload length');
  if (length > MAX_PAYLOAD_BYTES)
    throw new DecodeFailure(
      'limitExceeded',
      `payload of ${length} bytes exceeds ${MAX_PAYLOAD_BYTES}`,
      r.offset - 4,
    );
  return r.payloadCopy(length);
}

/** A u32 packet bitmap (bit i = `baseSeq + i`) naming at least one packet: zero is not canonical. */
function nonZeroBitmap(r: Reader, field: string): number {
  const bitmap = r.u32(field);
  if (bitmap === 0) throw new DecodeFailure('invalidValue', `${field} names no packet`, r.offset - 4);
  return bitmap;
}

function decodeBody(r: Reader, type: number): Message {
  switch (type) {
    case MessageType.Data: {
      const slice = r.slice();
      const seq = r.u32('seq');
      const bloom = r.bloom();
      const hops = r.u8('hops');
      return { type, slice, seq, bloom, hops, payload: readPayload(r) };
    }
    case MessageType.Probe:
      return { type, slice: r.slice(), probeId: r.u32('probeId'), bloom: r.bloom(), hops: r.u8('hops') };
    case MessageType.Advert: {
      const flags = r.u8('advert flags');
      if (flags > 3) throw new DecodeFailure('invalidValue', `unknown advert flags ${flags}`, r.offset - 1);
      const load = r.u16('load');
      const targetLoad = r.u16('targetLoad');
      const lowerLatencyThreshold = r.u16('lowerLatencyThreshold');
      const upperLatencyThreshold = r.u16('upperLatencyThreshold');
      const maxLoad = r.u16('maxLoad');
      const sentAtMs = r.u32('sentAtMs');
      const hasEcho = (flags & 2) !== 0;
      const echoRaw = r.u32('echoSentAtMs');
      // Canonical form: without an echo the echo field is all zero (as `encode` writes it).
      if (!hasEcho && echoRaw !== 0)
        throw new DecodeFailure('invalidValue', 'advert without echo has a non-zero echo time', r.offset - 4);
      const echoHoldMs = r.u16('echoHoldMs');
      if (hasEcho === (echoHoldMs === NO_ECHO_HOLD))
        throw new DecodeFailure('invalidValue', 'advert echo flag and hold time disagree', r.offset - 2);
      const count = r.u8('entry count');
      if (count > MAX_SLICES)
        throw new DecodeFailure(
          'limitExceeded',
          `advert has ${count} entries, max ${MAX_SLICES}`,
          r.offset - 1,
        );
      if (r.remaining < count * ADVERT_ENTRY_BYTES)
        throw new DecodeFailure('truncated', `advert announces ${count} entries but is shorter`, r.offset);
      const entries: AdvertSliceEntry[] = [];
      let previousSlice = -1;
      for (let i = 0; i < count; i++) {
        const slice = r.slice();
        if (slice <= previousSlice)
          throw new DecodeFailure('invalidValue', 'advert entries out of order or repeated', r.offset - 1);
        previousSlice = slice;
        const entryFlags = r.u8('entry flags');
        if (entryFlags > 3)
          throw new DecodeFailure('invalidValue', `unknown entry flags ${entryFlags}`, r.offset - 1);
        const hops = r.u8('hops');
        const rawOffset = r.i16('offsetMs');
        const rawPath = r.u16('pathMs');
        const filter = r.bloom();
        entries.push({
          slice,
          receiving: (entryFlags & 1) !== 0,
          isSliceSource: (entryFlags & 2) !== 0,
          hops,
          offsetMs: rawOffset === OFFSET_UNKNOWN ? null : rawOffset,
          pathMs: rawPath === PATH_UNKNOWN ? null : rawPath,
          filter,
        });
      }
      return {
        type,
        full: (flags & 1) !== 0,
        load,
        targetLoad,
        lowerLatencyThreshold,
        upperLatencyThreshold,
        maxLoad,
        sentAtMs,
        echoSentAtMs: hasEcho ? echoRaw : null,
        echoHoldMs: hasEcho ? echoHoldMs : 0,
        entries,
      };
    }
    case MessageType.LoadReport: {
      const slice = r.slice();
      const count = r.u8('candidate count');
      if (count < 1 || count > MAX_REPORT_CANDIDATES) {
        throw new DecodeFailure(
          'limitExceeded',
          `load report with ${count} candidates (1..${MAX_REPORT_CANDIDATES})`,
          r.offset - 1,
        );
      }
      const candidates: LoadCandidate[] = [];
      for (let i = 0; i < count; i++) {
        candidates.push({
          peer: r.u32('candidate peer'),
          load: r.u16('candidate load'),
          lowerLatencyThreshold: r.u16('candidate LLT'),
          targetLoad: r.u16('candidate TL'),
        });
      }
      return { type, slice, candidates };
    }
    case MessageType.Instruction:
      return { type, slice: r.slice(), target: r.u32('target'), targetLoadSeen: r.u16('targetLoadSeen') };
    case MessageType.SwitchRequest:
      return {
        type,
        slice: r.slice(),
        reason: r.enumValue('reason', ENUM_LIMITS.switchReason) as SwitchReason,
        handoffSeq: r.u32('handoffSeq'),
        targetLoadSeen: r.u16('targetLoadSeen'),
        parentLoadSeen: r.u16('parentLoadSeen'),
      };
    case MessageType.SwitchReply: {
      const slice = r.slice();
      const handoffSeq = r.u32('handoffSeq');
      const accepted = r.bool('accepted');
      const rejectReason = r.enumValue('rejectReason', ENUM_LIMITS.rejectReason) as RejectReason;
      if (accepted !== (rejectReason === 0))
        throw new DecodeFailure(
          'invalidValue',
          'an accepted reply has no reject reason, a rejection has one',
          r.offset - 1,
        );
      return { type, slice, handoffSeq, accepted, rejectReason, load: r.u16('load') };
    }
    case MessageType.SwitchComplete:
      return { type, slice: r.slice(), handoffSeq: r.u32('handoffSeq'), newParent: r.u32('newParent') };
    case MessageType.LatencyPermissionRequest:
      return { type, slice: r.slice(), target: r.u32('target'), parentLoadSeen: r.u16('parentLoadSeen') };
    case MessageType.LatencyPermissionReply:
      return { type, slice: r.slice(), target: r.u32('target'), granted: r.bool('granted') };
    case MessageType.Flood:
      return { type, slice: r.slice(), epoch: r.u32('epoch'), bloom: r.bloom(), hops: r.u8('hops') };
    case MessageType.ForcedParentRequest:
      return {
        type,
        slice: r.slice(),
        reason: r.enumValue('reason', ENUM_LIMITS.forcedReason) as ForcedReason,
        fromSeq: r.u32('fromSeq'),
      };
    case MessageType.Heartbeat:
      return { type };
    case MessageType.Quit:
      return { type, lingerMs: r.u16('lingerMs') };
    case MessageType.TreeLeave:
      return { type, slice: r.slice(), role: r.enumValue('role', ENUM_LIMITS.treeRole) as TreeRole };
    case MessageType.Walk:
      return {
        type,
        walkId: r.u32('walkId'),
        origin: r.u32('origin'),
        purpose: r.enumValue('purpose', ENUM_LIMITS.walkPurpose) as WalkPurpose,
        ttl: r.u8('ttl'),
      };
    case MessageType.Link:
      return {
        type,
        op: r.enumValue('op', ENUM_LIMITS.linkOp) as LinkOp,
        direction: r.enumValue('direction', ENUM_LIMITS.linkDirection) as LinkDirection,
        walkId: r.u32('walkId'),
      };
    case MessageType.Swap:
      return { type, walkId: r.u32('walkId'), newTarget: r.u32('newTarget') };
    case MessageType.SampleResult:
      return { type, walkId: r.u32('walkId') };
    case MessageType.SliceSourceAssign: {
      const slice = r.slice();
      const epoch = r.u32('epoch');
      const assigned = r.bool('assigned');
      return r.bool('has peer')
        ? { type, slice, epoch, assigned, peer: r.u32('peer') }
        : { type, slice, epoch, assigned };
    }
    case MessageType.RepairRequest: {
      const requestId = r.u32('requestId');
      const segment = r.u32('segment');
      const count = r.u16('count');
      if (count < 1 || count > MAX_REPAIR_PACKETS)
        throw new DecodeFailure(
          'limitExceeded',
          `count ${count} is outside 1‥${MAX_REPAIR_PACKETS}`,
          r.offset - 2,
        );
      const missing = r.bytesCopy(Math.ceil(count / 8), 'missing');
      // Canonical: no bits past the last packet.
      const spare = (8 - (count % 8)) % 8;
      if (spare > 0 && (missing[missing.length - 1] ?? 0) >> (8 - spare) !== 0)
        throw new DecodeFailure('invalidValue', 'bits set past the last packet', r.offset - 1);
      return { type, requestId, segment, count, missing };
    }
    case MessageType.RepairData: {
      const requestId = r.u32('requestId');
      return { type, requestId, payload: readPayload(r) };
    }
    case MessageType.RepairNak:
      return {
        type,
        requestId: r.u32('requestId'),
        reason: r.enumValue('reason', ENUM_LIMITS.repairNakReason) as RepairNakReason,
      };
    case MessageType.Announcement: {
      const length = r.u32('announcement length');
      if (length > MAX_ANNOUNCEMENT_TEXT_BYTES)
        throw new DecodeFailure(
          'limitExceeded',
          `announcement of ${length} bytes exceeds ${MAX_ANNOUNCEMENT_TEXT_BYTES}`,
          r.offset - 4,
        );
      const start = r.offset;
      const text = r.ascii(length, 'announcement');
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new DecodeFailure('invalidValue', 'announcement is not JSON', start);
      }
      // Exactly the tracker frames' checks (one validator for both ways in).
      const checked = validateAnnouncement(parsed);
      if (!checked.ok)
        throw new DecodeFailure('invalidValue', `announcement: ${checked.error.message}`, start);
      if (announcementText(checked.message) !== text)
        throw new DecodeFailure('invalidValue', 'announcement is not in canonical form', start);
      return { type, announcement: checked.message };
    }
    case MessageType.PacketRepairRequest: {
      const slice = r.slice();
      const requestId = r.u32('requestId');
      const baseSeq = r.u32('baseSeq');
      const wanted = nonZeroBitmap(r, 'wanted');
      return { type, slice, requestId, baseSeq, wanted };
    }
    case MessageType.PacketRepairData: {
      const slice = r.slice();
      const requestId = r.u32('requestId');
      const seq = r.u32('seq');
      const hops = r.u8('hops');
      return { type, slice, requestId, seq, hops, payload: readPayload(r) };
    }
    case MessageType.PacketRepairNak: {
      const slice = r.slice();
      const requestId = r.u32('requestId');
      const baseSeq = r.u32('baseSeq');
      const unserved = nonZeroBitmap(r, 'unserved');
      const reason = r.enumValue('reason', ENUM_LIMITS.repairNakReason) as RepairNakReason;
      return { type, slice, requestId, baseSeq, unserved, reason };
    }
    default:
      throw new DecodeFailure('unknownType', `unknown message type ${type}`, 1);
  }
}
