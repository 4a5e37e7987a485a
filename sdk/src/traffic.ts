import { MESSAGE_TYPE_NAMES } from '@chunkycast/wire';
import type { TrafficOfType } from './types.js';

/** A message's type is one byte on the wire. */
const TYPE_SLOTS = 256;

/**
 * What a node's data channels carried, by message type, each way: messages and their encoded bytes
 * as written to and read from the channels (SCTP and DTLS framing, retransmissions and
 * acknowledgements are not in them: the links' transport totals are). Issue 17: which messages a
 * viewer's datagrams are, beside the media. Counting is an array increment per message.
 */
export class TrafficCounts {
  private readonly sentMessages = new Float64Array(TYPE_SLOTS);
  private readonly sentBytes = new Float64Array(TYPE_SLOTS);
  private readonly receivedMessages = new Float64Array(TYPE_SLOTS);
  private readonly receivedBytes = new Float64Array(TYPE_SLOTS);

  sent(type: number, bytes: number): void {
    const slot = type & (TYPE_SLOTS - 1);
    this.sentMessages[slot] = (this.sentMessages[slot] ?? 0) + 1;
    this.sentBytes[slot] = (this.sentBytes[slot] ?? 0) + bytes;
  }

  received(type: number, bytes: number): void {
    const slot = type & (TYPE_SLOTS - 1);
    this.receivedMessages[slot] = (this.receivedMessages[slot] ?? 0) + 1;
    this.receivedBytes[slot] = (this.receivedBytes[slot] ?? 0) + bytes;
  }

  /** Adds another node's counts (a session keeps those of the nodes it replaced). */
  add(other: TrafficCounts): void {
    for (let slot = 0; slot < TYPE_SLOTS; slot++) {
      this.sentMessages[slot] = (this.sentMessages[slot] ?? 0) + (other.sentMessages[slot] ?? 0);
      this.sentBytes[slot] = (this.sentBytes[slot] ?? 0) + (other.sentBytes[slot] ?? 0);
      this.receivedMessages[slot] = (this.receivedMessages[slot] ?? 0) + (other.receivedMessages[slot] ?? 0);
      this.receivedBytes[slot] = (this.receivedBytes[slot] ?? 0) + (other.receivedBytes[slot] ?? 0);
    }
  }

  /** The types that carried anything, by name (`data`, `advert`, …), with `others` added in. */
  byName(others?: TrafficCounts): Record<string, TrafficOfType> {
    if (others !== undefined) {
      const sum = new TrafficCounts();
      sum.add(this);
      sum.add(others);
      return sum.byName();
    }
    const out: Record<string, TrafficOfType> = {};
    for (let slot = 0; slot < TYPE_SLOTS; slot++) {
      const figures: TrafficOfType = {
        sent: this.sentMessages[slot] ?? 0,
        sentBytes: this.sentBytes[slot] ?? 0,
        received: this.receivedMessages[slot] ?? 0,
        receivedBytes: this.receivedBytes[slot] ?? 0,
      };
      if (figures.sent > 0 || figures.received > 0)
        out[(MESSAGE_TYPE_NAMES as Record<number, string | undefined>)[slot] ?? `type ${slot}`] = figures;
    }
    return out;
  }
}
