import {
  MessageType,
  MAX_HOPS,
  bloomContains,
  bloomOr,
  type PeerId,
  type ProbeMessage,
} from '@chunkycast/wire';
import type { SliceState } from './state.js';
import type { SwitchHost } from './switching.js';
import { SILENT_PARENT_SHARE } from './trust.js';

/** What loop probes need from their member engine, beyond what switching does. */
export interface LoopHost extends SwitchHost {
  /** Leave the parent of slice `s`: the tree went round a loop through us. */
  leaveLoop(s: number): void;
  /** Leave `peer` as a parent wherever it is one and count `share` of a violation (trust.ts). */
  distrust(peer: PeerId, reason: string, share: number): void;
}

/**
 * Loop detection by probes (thesis §4.2, loop avoidance and detection): data detects a loop with its
 * first packet round it, but a slice that carries nothing (a silent parent, a hand-off that closed a
 * loop) needs a probe: sent down our subtree with our mask, passed on with each child's, it comes
 * back to us only round a loop. Also the safety net for a parent that says it receives but sends
 * us nothing.
 */
export class LoopProbes {
  constructor(private readonly host: LoopHost) {}

  private slice(s: number): SliceState {
    return this.host.slices[s] as SliceState;
  }

  onProbe(from: PeerId, msg: ProbeMessage): void {
    const st = this.slice(msg.slice);
    if (st.parent !== from) return;
    if (bloomContains(msg.bloom, this.host.mask)) {
      this.host.counters.loopsDetected++;
      this.host.emit({ type: 'loopDetected', slice: msg.slice, by: 'probe' });
      this.host.leaveLoop(msg.slice);
      return;
    }
    if (msg.probeId === st.lastProbeSeen || msg.hops >= MAX_HOPS) return;
    st.lastProbeSeen = msg.probeId;
    const probe: ProbeMessage = {
      type: MessageType.Probe,
      slice: msg.slice,
      probeId: msg.probeId,
      bloom: bloomOr(msg.bloom, this.host.mask),
      hops: msg.hops + 1,
    };
    for (const [child, entry] of st.children) if (entry.untilSeq === Infinity) this.host.send(child, probe);
  }

  /** No data from a parent for a while: send a probe down our subtree; if it comes back to us, there is a loop (thesis §4.2, loop avoidance and detection). */
  probeSilentSlices(): void {
    const after = this.host.config.protocol.probeAfterSilenceMs;
    for (let s = 0; s < this.host.slices.length; s++) {
      const st = this.slice(s);
      const parentId = st.parent;
      if (parentId !== null && !st.isSliceSource && st.pending === null) {
        // Safety net: our parent says it receives this slice but has sent us nothing for a while (it
        // lost track of us, e.g. a TreeLeave crossed a re-request). Find another parent.
        const parent = this.host.peers.get(parentId);
        const silentFor = this.host.now - Math.max(st.lastDataAt, st.parentSince);
        if (parent?.hasAdvert === true && parent.receiving(s) && silentFor > 2 * after) {
          // Saying it receives while sending us nothing is also what a withholder does: not
          // taken again for a while, and twice cuts it off.
          this.host.distrust(
            parentId,
            `parent silent ${Math.round(silentFor)} ms on slice ${s}`,
            SILENT_PARENT_SHARE,
          );
          continue;
        }
      }
      if (st.parent === null || st.isSliceSource || st.activeChildren === 0) continue;
      if (
        this.host.now - Math.max(st.lastDataAt, st.parentSince) < after ||
        this.host.now - st.lastProbeSentAt < after
      )
        continue;
      this.sendProbe(s);
    }
  }

  /** A probe down our subtree on slice `s`: it comes back to us only round a loop (thesis §4.2, loop avoidance and detection). */
  sendProbe(s: number): void {
    const st = this.slice(s);
    st.lastProbeSentAt = this.host.now;
    const probe: ProbeMessage = {
      type: MessageType.Probe,
      slice: s,
      probeId: this.host.random.nextU32(),
      bloom: this.host.mask,
      hops: 1,
    };
    for (const [child, entry] of st.children) if (entry.untilSeq === Infinity) this.host.send(child, probe);
  }
}
