/**
 * Cutting a growing MPEG-TS segment into LL-HLS partial segments (RFC 8216bis §4.4.4.9): byte
 * ranges of the segment, each starting at a TS packet that starts a video PES, so a part never
 * splits a packet and a decoder can start a part on a frame boundary.
 *
 * The rule: a part is closed just before the frame that would make it longer than the part
 * target, judging a frame's length by the spacing of the frames before it. So every part lasts at
 * most PART-TARGET (§4.4.4.9: "MUST be less than or equal to the Part Target Duration") as long
 * as the frame rate is steady, including the segment's final part, which ends with the segment.
 */
import { ticksBetween, type VideoPesStart } from './ts-scanner.js';

export interface Part {
  /** Byte offset in the segment. */
  readonly offset: number;
  readonly length: number;
  /** Media time from this part's first frame to the next part's (or the segment's end). */
  readonly durationTicks: number;
  /** Starts with a random access point (EXT-X-PART INDEPENDENT=YES). */
  readonly independent: boolean;
}

interface OpenPart {
  readonly offset: number;
  readonly startTicks: number;
  readonly independent: boolean;
}

export class PartCutter {
  private readonly closed: Part[] = [];
  private open: OpenPart | null = null;
  private lastTicks: number | null = null;
  private frameTicks = 0;
  private overflowed = false;

  constructor(
    private readonly targetTicks: number,
    /** Parts one segment may have; beyond it the segment gets no parts (bounded memory). */
    private readonly maxParts: number,
  ) {}

  /** The parts closed so far (all of them once `finish` was called); empty after an overflow. */
  get parts(): readonly Part[] {
    return this.overflowed ? [] : this.closed;
  }

  get overflow(): boolean {
    return this.overflowed;
  }

  /** Where the next part (the one being filled) starts; null before the first frame. */
  get nextPartOffset(): number | null {
    return this.overflowed ? null : (this.open?.offset ?? null);
  }

  /** Takes the next video PES start; frames without a time cannot be placed and are skipped. */
  add(pes: VideoPesStart): void {
    if (this.overflowed || pes.timeTicks === null) return;
    const t = pes.timeTicks;
    if (this.open === null) {
      // The first part starts at byte 0: the PAT and PMT before the first frame belong to it.
      this.open = { offset: 0, startTicks: t, independent: pes.randomAccess };
      this.lastTicks = t;
      return;
    }
    if (this.lastTicks !== null) {
      const step = ticksBetween(this.lastTicks, t);
      // A step backwards (a 33-bit "negative" one) or a huge jump is not a frame length.
      if (step > 0 && step < this.targetTicks) this.frameTicks = step;
    }
    this.lastTicks = t;
    const elapsed = ticksBetween(this.open.startTicks, t);
    if (pes.offset > this.open.offset && elapsed > 0 && elapsed + this.frameTicks > this.targetTicks) {
      this.close(pes.offset, elapsed);
      this.open = { offset: pes.offset, startTicks: t, independent: pes.randomAccess };
    }
  }

  /** The segment is complete at `sizeBytes`: the part being filled becomes the last one. */
  finish(sizeBytes: number): void {
    if (this.open === null || this.overflowed || sizeBytes <= this.open.offset) return;
    const last = this.lastTicks ?? this.open.startTicks;
    this.close(sizeBytes, ticksBetween(this.open.startTicks, last) + this.frameTicks);
    this.open = null;
  }

  private close(end: number, durationTicks: number): void {
    const open = this.open;
    if (open === null) return;
    if (this.closed.length >= this.maxParts) {
      this.overflowed = true;
      this.closed.length = 0;
      return;
    }
    this.closed.push({
      offset: open.offset,
      length: end - open.offset,
      durationTicks,
      independent: open.independent,
    });
  }
}
