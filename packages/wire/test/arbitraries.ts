/**
 * fast-check arbitraries for every wire message, generating only values `encode` accepts and
 * `decode` reproduces exactly. Shared by the round-trip, fuzz and (later) engine tests.
 */
import fc from 'fast-check';
import {
  ForcedReason,
  LinkDirection,
  LinkOp,
  MAX_ANNOUNCED_PACKETS,
  MAX_MEDIA_PACKET_PAYLOAD_BYTES,
  MAX_REPAIR_PACKETS,
  MAX_URI_LENGTH,
  MAX_REPORT_CANDIDATES,
  MAX_SLICES,
  MessageType,
  RejectReason,
  RepairNakReason,
  SwitchReason,
  TreeRole,
  WalkPurpose,
  type AdvertMessage,
  type AdvertSliceEntry,
  type Bloom128,
  type DataMessage,
  type LoadCandidate,
  type LoadReportMessage,
  type Message,
  type SignedAnnouncement,
  type SwitchReplyMessage,
} from '@chunkycast/wire';

export type MessageTypeName = keyof typeof MessageType;
export type MessageOf<T extends MessageType> = Extract<Message, { readonly type: T }>;

export const u8 = (): fc.Arbitrary<number> => fc.integer({ min: 0, max: 0xff });
export const u16 = (): fc.Arbitrary<number> => fc.integer({ min: 0, max: 0xffff });
export const u32 = (): fc.Arbitrary<number> => fc.integer({ min: 0, max: 0xffff_ffff });
export const slice = (): fc.Arbitrary<number> => fc.integer({ min: 0, max: MAX_SLICES - 1 });
export const peerId = u32;
export const bloom128 = (): fc.Arbitrary<Bloom128> => fc.tuple(u32(), u32(), u32(), u32());
/** A packet-repair bitmap: any u32 but 0 (a request or NAK names at least one packet). */
export const packetBitmap = (): fc.Arbitrary<number> => fc.integer({ min: 1, max: 0xffff_ffff });
/** A valid advert offset: an integer the i16 field holds (−32768 is reserved for "unknown"), or null. */
export const offsetMs = (): fc.Arbitrary<number | null> =>
  fc.option(fc.integer({ min: -32_767, max: 32_767 }), { nil: null });

/** A valid advert path estimate: an integer the u16 field holds (65535 is reserved for "unknown"), or null. */
export const pathMs = (): fc.Arbitrary<number | null> =>
  fc.option(fc.integer({ min: 0, max: 0xfffe }), { nil: null });

/** `fc.record` with ordinary (not null-prototype) objects, so values compare like decoded ones. */
function record<T>(model: { [K in keyof T]: fc.Arbitrary<T[K]> }): fc.Arbitrary<T> {
  return fc.record(model, { noNullPrototype: true });
}

/** Every value of a `{ Name: code }` enum object. */
function enumOf<E extends Readonly<Record<string, number>>>(values: E): fc.Arbitrary<E[keyof E]> {
  return fc.constantFrom(...(Object.values(values) as E[keyof E][]));
}

export interface MessageArbitraryOptions {
  /** Largest data payload generated (default 4096 bytes). */
  readonly maxPayloadBytes?: number;
  /** Largest number of advert entries generated (default MAX_SLICES). */
  readonly maxAdvertEntries?: number;
}

const advertEntry = (): fc.Arbitrary<AdvertSliceEntry> =>
  record({
    slice: slice(),
    receiving: fc.boolean(),
    isSliceSource: fc.boolean(),
    hops: u8(),
    offsetMs: offsetMs(),
    pathMs: pathMs(),
    filter: bloom128(),
  });

const loadCandidate = (): fc.Arbitrary<LoadCandidate> =>
  record({ peer: peerId(), load: u16(), lowerLatencyThreshold: u16(), targetLoad: u16() });

/** No echo ⇒ hold time 0; an echo's hold time is below the 0xffff "no echo" marker. */
const advertEcho = (): fc.Arbitrary<Pick<AdvertMessage, 'echoSentAtMs' | 'echoHoldMs'>> =>
  fc.oneof(
    fc.constant({ echoSentAtMs: null, echoHoldMs: 0 }),
    record({ echoSentAtMs: u32(), echoHoldMs: fc.integer({ min: 0, max: 0xfffe }) }),
  );

/** Accepted ⇔ reject reason None. */
const switchReplyVerdict = (): fc.Arbitrary<Pick<SwitchReplyMessage, 'accepted' | 'rejectReason'>> =>
  fc.oneof(
    fc.constant({ accepted: true, rejectReason: RejectReason.None }),
    record({
      accepted: fc.constant(false),
      rejectReason: fc.constantFrom(
        ...Object.values(RejectReason).filter((r): r is Exclude<RejectReason, 0> => r !== RejectReason.None),
      ),
    }),
  );

const hexOfBytes = (bytes: number): fc.Arbitrary<string> =>
  fc.uint8Array({ minLength: bytes, maxLength: bytes }).map((b) => Buffer.from(b).toString('hex'));

/**
 * A signed announcement the tracker frames' validator accepts (the signature is random base64: wire
 * does not verify it). URIs mix ASCII with any code point, lone surrogates included, which the
 * canonical text escapes. `maxPackets` keeps the fuzzers' encodings short.
 */
export const signedAnnouncement = (maxPackets = 64, maxUriLength = 64): fc.Arbitrary<SignedAnnouncement> =>
  fc.integer({ min: 1, max: Math.min(maxPackets, MAX_ANNOUNCED_PACKETS) }).chain((packets) =>
    fc
      .record({
        stream: fc.stringMatching(/^[A-Za-z0-9._-]{1,64}$/),
        sequence: u32(),
        uri: fc
          .oneof(
            fc.string({ unit: 'binary-ascii', maxLength: Math.min(maxUriLength, MAX_URI_LENGTH) }),
            fc.string({ unit: 'binary', maxLength: Math.min(maxUriLength, MAX_URI_LENGTH) }),
          )
          .filter((uri) => uri.length <= MAX_URI_LENGTH),
        bytes: fc.integer({ min: 0, max: 64 * 1024 * 1024 }),
        packets: fc.constant(packets),
        firstPacket: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
        sha256: hexOfBytes(32),
        packetHashes: hexOfBytes(16 * packets),
        durationMs: fc.integer({ min: 0, max: 3_600_000 }),
        publishedAtMs: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
        signature: fc
          .uint8Array({ minLength: 1, maxLength: 96 })
          .map((b) => Buffer.from(b).toString('base64')),
        // A segment cut while written (issue 14) in one case of four: its packets hold its bytes.
        progressive: fc.option(
          fc.record({
            packetBytes: fc.integer({ min: 1, max: MAX_MEDIA_PACKET_PAYLOAD_BYTES }),
            fill: fc.double({ min: 0, max: 1, noNaN: true }),
          }),
          { freq: 3 },
        ),
      })
      .map(({ progressive, ...a }): SignedAnnouncement => {
        if (progressive === null) return a;
        const { packetBytes, fill } = progressive;
        const { signature, ...rest } = a;
        return { ...rest, bytes: Math.floor(fill * packets * packetBytes), packetBytes, signature };
      }),
  );

/** One arbitrary per message type, keyed by the type's name in `MessageType`. */
export function makeMessageArbitraries(options: MessageArbitraryOptions = {}): {
  readonly [K in MessageTypeName]: fc.Arbitrary<MessageOf<(typeof MessageType)[K]>>;
} {
  const maxPayloadBytes = options.maxPayloadBytes ?? 4096;
  const maxAdvertEntries = options.maxAdvertEntries ?? MAX_SLICES;
  return {
    Data: record({
      type: fc.constant(MessageType.Data),
      slice: slice(),
      seq: u32(),
      bloom: bloom128(),
      hops: u8(),
      payload: fc.uint8Array({ maxLength: maxPayloadBytes }),
    }) satisfies fc.Arbitrary<DataMessage>,
    Probe: record({
      type: fc.constant(MessageType.Probe),
      slice: slice(),
      probeId: u32(),
      bloom: bloom128(),
      hops: u8(),
    }),
    Advert: fc
      .tuple(
        record({
          type: fc.constant(MessageType.Advert),
          full: fc.boolean(),
          load: u16(),
          targetLoad: u16(),
          lowerLatencyThreshold: u16(),
          upperLatencyThreshold: u16(),
          maxLoad: u16(),
          sentAtMs: u32(),
        }),
        advertEcho(),
        fc.uniqueArray(advertEntry(), { selector: (e) => e.slice, maxLength: maxAdvertEntries }),
      )
      .map(([fields, echo, entries]): AdvertMessage => ({
        ...fields,
        ...echo,
        entries: [...entries].sort((a, b) => a.slice - b.slice),
      })),
    LoadReport: record({
      type: fc.constant(MessageType.LoadReport),
      slice: slice(),
      candidates: fc.array(loadCandidate(), { minLength: 1, maxLength: MAX_REPORT_CANDIDATES }),
    }) satisfies fc.Arbitrary<LoadReportMessage>,
    Instruction: record({
      type: fc.constant(MessageType.Instruction),
      slice: slice(),
      target: peerId(),
      targetLoadSeen: u16(),
    }),
    SwitchRequest: record({
      type: fc.constant(MessageType.SwitchRequest),
      slice: slice(),
      reason: enumOf(SwitchReason),
      handoffSeq: u32(),
      targetLoadSeen: u16(),
      parentLoadSeen: u16(),
    }),
    SwitchReply: fc
      .tuple(
        record({
          type: fc.constant(MessageType.SwitchReply),
          slice: slice(),
          handoffSeq: u32(),
          load: u16(),
        }),
        switchReplyVerdict(),
      )
      .map(([fields, verdict]): SwitchReplyMessage => ({ ...fields, ...verdict })),
    SwitchComplete: record({
      type: fc.constant(MessageType.SwitchComplete),
      slice: slice(),
      handoffSeq: u32(),
      newParent: peerId(),
    }),
    LatencyPermissionRequest: record({
      type: fc.constant(MessageType.LatencyPermissionRequest),
      slice: slice(),
      target: peerId(),
      parentLoadSeen: u16(),
    }),
    LatencyPermissionReply: record({
      type: fc.constant(MessageType.LatencyPermissionReply),
      slice: slice(),
      target: peerId(),
      granted: fc.boolean(),
    }),
    Flood: record({
      type: fc.constant(MessageType.Flood),
      slice: slice(),
      epoch: u32(),
      bloom: bloom128(),
      hops: u8(),
    }),
    ForcedParentRequest: record({
      type: fc.constant(MessageType.ForcedParentRequest),
      slice: slice(),
      reason: enumOf(ForcedReason),
      fromSeq: u32(),
    }),
    Heartbeat: record({ type: fc.constant(MessageType.Heartbeat) }),
    Quit: record({ type: fc.constant(MessageType.Quit), lingerMs: u16() }),
    TreeLeave: record({
      type: fc.constant(MessageType.TreeLeave),
      slice: slice(),
      role: enumOf(TreeRole),
    }),
    Walk: record({
      type: fc.constant(MessageType.Walk),
      walkId: u32(),
      origin: peerId(),
      purpose: enumOf(WalkPurpose),
      ttl: u8(),
    }),
    Link: record({
      type: fc.constant(MessageType.Link),
      op: enumOf(LinkOp),
      direction: enumOf(LinkDirection),
      walkId: u32(),
    }),
    Swap: record({ type: fc.constant(MessageType.Swap), walkId: u32(), newTarget: peerId() }),
    SampleResult: record({ type: fc.constant(MessageType.SampleResult), walkId: u32() }),
    SliceSourceAssign: fc.oneof(
      record({
        type: fc.constant(MessageType.SliceSourceAssign),
        slice: slice(),
        epoch: u32(),
        assigned: fc.boolean(),
      }),
      // A moved root: the new root learns its predecessor, the old one its successor.
      record({
        type: fc.constant(MessageType.SliceSourceAssign),
        slice: slice(),
        epoch: u32(),
        assigned: fc.boolean(),
        peer: peerId(),
      }),
    ),
    RepairRequest: fc
      .tuple(u32(), u32(), fc.integer({ min: 1, max: MAX_REPAIR_PACKETS }), fc.uint8Array({ maxLength: 512 }))
      .map(([requestId, segment, count, seedBytes]) => {
        // A canonical bitmap: ceil(count / 8) bytes, no bits past the last packet.
        const missing = new Uint8Array(Math.ceil(count / 8));
        missing.set(seedBytes.subarray(0, missing.length));
        const spare = (8 - (count % 8)) % 8;
        if (spare > 0) missing[missing.length - 1] = (missing[missing.length - 1] ?? 0) & (0xff >> spare);
        return { type: MessageType.RepairRequest, requestId, segment, count, missing } as const;
      }),
    RepairData: record({
      type: fc.constant(MessageType.RepairData),
      requestId: u32(),
      payload: fc.uint8Array({ maxLength: maxPayloadBytes }),
    }),
    RepairNak: record({
      type: fc.constant(MessageType.RepairNak),
      requestId: u32(),
      reason: enumOf(RepairNakReason),
    }),
    Announcement: record({
      type: fc.constant(MessageType.Announcement),
      // Small payload limits (the fuzzers') get small announcements: one packet, short URIs.
      announcement: signedAnnouncement(Math.max(1, Math.floor(maxPayloadBytes / 64)), maxPayloadBytes),
    }),
    PacketRepairRequest: record({
      type: fc.constant(MessageType.PacketRepairRequest),
      slice: slice(),
      requestId: u32(),
      baseSeq: u32(),
      wanted: packetBitmap(),
    }),
    PacketRepairData: record({
      type: fc.constant(MessageType.PacketRepairData),
      slice: slice(),
      requestId: u32(),
      seq: u32(),
      hops: u8(),
      payload: fc.uint8Array({ maxLength: maxPayloadBytes }),
    }),
    PacketRepairNak: record({
      type: fc.constant(MessageType.PacketRepairNak),
      slice: slice(),
      requestId: u32(),
      baseSeq: u32(),
      unserved: packetBitmap(),
      reason: enumOf(RepairNakReason),
    }),
  };
}

/** The default arbitraries: payloads up to 4 KiB, adverts with up to MAX_SLICES entries. */
export const messageArbitraries = makeMessageArbitraries();

/** Any message, every type equally likely. */
export function anyMessage(options: MessageArbitraryOptions = {}): fc.Arbitrary<Message> {
  const arbitraries: fc.Arbitrary<Message>[] = Object.values(makeMessageArbitraries(options));
  return fc.oneof(...arbitraries);
}
