/**
 * Catch-up to the live position outside low-latency mode.
 *
 * hls.js adjusts the playback rate towards its target latency only in lowLatencyMode
 * (`maxLiveSyncPlaybackRate`). At the default position (three segments behind) nothing brings a
 * player back once it has fallen behind: a stall adds its length to the live delay for good, and on
 * a busy machine Chromium's playback ran slower than real time without a stall, to 12–22 s behind
 * live at p95 against a 6 s target (docs/browsers.md, the 3 + 3 and 4 + 4 swarms). `<mesh-player>`
 * therefore does the same outside LL mode, with hysteresis, since outside LL the estimate of the
 * live edge moves by up to a segment between playlist reloads.
 */

/** Start catching up once this far behind the target latency, s: above the edge estimate's noise. */
export const CATCH_UP_START_S = 1;
/** Stop once back within this of the target, s. */
export const CATCH_UP_STOP_S = 0.25;
/**
 * Only with this much buffered, s (hls.js's own condition in LL mode): faster playback must not
 * run the buffer dry and trade drift for a stall.
 */
export const CATCH_UP_MIN_BUFFER_S = 1;
/**
 * Further behind than this, s, the viewer is taken to be watching back on purpose (paused or sought
 * back with the controls), and is left there.
 */
export const CATCH_UP_MAX_BEHIND_S = 30;

export interface CatchUpInput {
  /** hls.js's estimate of the distance to the live edge, s (`hls.latency`); 0 before a playlist. */
  readonly latencyS: number;
  /** The position hls.js holds, s (`hls.targetLatency`); null before a playlist. */
  readonly targetLatencyS: number | null;
  /** Media buffered ahead of the playhead, s. */
  readonly bufferAheadS: number;
  /** The rate while catching up (1 turns catch-up off). */
  readonly maxRate: number;
  /** The video's playback rate now. */
  readonly currentRate: number;
}

/**
 * The playback rate a live player should have now: `maxRate` while more than CATCH_UP_START_S
 * behind its target (and still so after starting, until within CATCH_UP_STOP_S), 1 otherwise.
 * Null: leave the rate alone (not a rate this controller set, or nothing known yet).
 */
export function liveCatchUpRate(input: CatchUpInput): number | null {
  const { latencyS, targetLatencyS, bufferAheadS, maxRate, currentRate } = input;
  // A rate someone else chose (the page, the viewer) is theirs to keep.
  if (currentRate !== 1 && currentRate !== maxRate) return null;
  if (targetLatencyS === null || !(latencyS > 0) || maxRate <= 1) return currentRate === 1 ? null : 1;
  const behindS = latencyS - targetLatencyS;
  const catchingUp = currentRate === maxRate;
  const wanted =
    bufferAheadS > CATCH_UP_MIN_BUFFER_S &&
    behindS < CATCH_UP_MAX_BEHIND_S &&
    behindS > (catchingUp ? CATCH_UP_STOP_S : CATCH_UP_START_S);
  const rate = wanted ? maxRate : 1;
  return rate === currentRate ? null : rate;
}
