/**
 * Per-node uplinks: a node's messages leave one after another at its capacity, so a message waits
 * behind everything the node sent before it. A node without a rate set has an unlimited uplink.
 */
export class Uplinks {
  /** Indexed by node id (ids are small integers in every host). */
  private readonly bytesPerMs: number[] = [];
  private readonly freeAtMs: number[] = [];

  /**
   * `maxQueueMs`: a data packet that would wait longer than this behind the node's earlier traffic
   * is dropped at the tail instead (a browser's send buffer is not unbounded).
   */
  constructor(private readonly maxQueueMs: number) {}

  setRate(node: number, bytesPerMs: number): void {
    this.bytesPerMs[node] = bytesPerMs;
  }

  /** When the node's uplink has sent everything queued so far (≤ now: idle). */
  freeAt(node: number): number {
    return this.freeAtMs[node] ?? 0;
  }

  /** Bytes still queued in the node's uplink at `now`, as a data channel's bufferedAmount. */
  backlogBytes(node: number, now: number): number {
    return Math.max(0, this.freeAt(node) - now) * (this.bytesPerMs[node] ?? 0);
  }

  /**
   * Queue `sizeBytes` on the node's uplink at `now`: the time its last byte leaves, or null when
   * it is tail-dropped (`droppable` and the queue is longer than `maxQueueMs`).
   */
  depart(node: number, now: number, sizeBytes: number, droppable: boolean): number | null {
    const rate = this.bytesPerMs[node];
    if (rate === undefined) return now;
    const freeAt = this.freeAtMs[node] ?? 0;
    const start = freeAt > now ? freeAt : now;
    if (droppable && start - now > this.maxQueueMs) return null;
    const departure = start + sizeBytes / rate;
    this.freeAtMs[node] = departure;
    return departure;
  }
}
