import { decode, encode, SlabAllocator, type DecodeResult, type Message } from '@chunkycast/wire';

/**
 * Codec transit: every message crosses the simulated network as the bytes `@chunkycast/wire`
 * encodes, and is decoded again on arrival, so an engine only ever sees what the wire can carry.
 */
export class Transit {
  private readonly slab: SlabAllocator | null;

  /**
   * `slab`: encode into shared slabs (thousands of engines send millions of messages; one
   * allocation per message would dominate a run), else each message gets its own buffer.
   */
  constructor(options: { readonly slab?: boolean } = {}) {
    this.slab = options.slab === true ? new SlabAllocator() : null;
  }

  encode(message: Message): Uint8Array {
    return this.slab === null ? encode(message) : encode(message, this.slab.allocate);
  }

  decode(bytes: Uint8Array): DecodeResult {
    return decode(bytes);
  }
}
