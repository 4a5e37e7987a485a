import {
  decode,
  encode,
  encodedSize,
  SlabAllocator,
  type DecodeResult,
  type Message,
} from '@chunkycast/wire';

/**
 * Codec transit: every message crosses the simulated network as the bytes `@chunkycast/wire`
 * encodes, and is decoded again on arrival, so an engine only ever sees what the wire can carry.
 * (Decoding on arrival, not when sending, keeps the decoded message short-lived: a message object
 * that waited in flight would outlive a young-generation collection, and measured, doubled a run's
 * peak memory.)
 *
 * `sampleEvery` N > 1 (the largest runs only; the simulator reports it in its summary): one message
 * in N crosses the codec, and the others travel as the object the engine sent, their size still the
 * encoder's. An engine treats a received message as read-only, so sharing the sender's object is
 * safe; what such a run no longer checks is that every message the engines produce encodes.
 */
export class Transit {
  private readonly slab: SlabAllocator | null;
  /** One message in this many crosses the codec (1: every message). */
  readonly sampleEvery: number;
  private sinceSample = 0;
  /** Encoded size of the message of the last `encode` (bytes). */
  lastByteLength = 0;
  /** All messages given to `encode`, and those of them that were encoded. */
  messages = 0;
  encodedMessages = 0;

  /**
   * `slab`: encode into shared slabs (thousands of engines send millions of messages; one
   * allocation per message would dominate a run), else each message gets its own buffer.
   */
  constructor(options: { readonly slab?: boolean; readonly sampleEvery?: number } = {}) {
    this.slab = options.slab === true ? new SlabAllocator() : null;
    const every = options.sampleEvery ?? 1;
    if (!Number.isSafeInteger(every) || every < 1)
      throw new RangeError(`sampleEvery must be a whole number ≥ 1, got ${every}`);
    this.sampleEvery = every;
  }

  /**
   * The bytes `message` travels as, or null when sampling lets it travel as the object itself.
   * `lastByteLength` is its encoded size either way.
   */
  encode(message: Message): Uint8Array | null {
    this.messages++;
    if (this.sampleEvery > 1 && ++this.sinceSample < this.sampleEvery) {
      this.lastByteLength = encodedSize(message);
      return null;
    }
    this.sinceSample = 0;
    this.encodedMessages++;
    const bytes = this.slab === null ? encode(message) : encode(message, this.slab.allocate);
    this.lastByteLength = bytes.byteLength;
    return bytes;
  }

  decode(bytes: Uint8Array): DecodeResult {
    return decode(bytes);
  }
}
