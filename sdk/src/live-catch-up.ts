/**
 * The live position outside low-latency mode: a margin one segment behind, and catch-up.
 *
 * hls.js adjusts the playback rate towards its target latency only in lowLatencyMode
 * (`maxLiveSyncPlaybackRate`). At the default position (three segments behind) nothing brings a
 * player back once it has fallen behind: a stall adds its length to the live delay for good, and on
 * a busy machine Chromium's playback ran slower than real time without a stall, to 12–22 s behind
 * live at p95 against a 6 s target (docs/browsers.md, the 3 + 3 and 4 + 4 swarms). `<mesh-player>`
 * therefore does the same outside LL mode, with hysteresis, since outside LL the estimate of the
 * live edge moves by up to a segment between playlist reloads.
 */

/**
 * Least distance from the live edge beyond one target duration, ms (`<mesh-player live-margin-ms>`).
 * One segment behind (`live-sync="1"`) hls.js starts at the first byte of the newest segment listed.
 * When the next one is listed the player has left what remains of that segment: how long it had been
 * listed when the playlist was loaded, plus the start-up time, a few hundred ms when the first load
 * comes just after a listing. Every later segment must be whole in the player within that margin, and
 * one the mesh completes later (a packet repaired from the origin, a loaded machine) is a stall: 1–3
 * a run at 8 viewers, `low`, 180 s (docs/results/low-latency/n8-low-playlist-in-step*), as many as
 * plain hls.js's, whose margin is its start-up time alone. The live delay the margin adds is paid from
 * what reloads in step with the mesh saved (p95 3.04–3.45 s against plain hls.js's 4.17–4.18 s there).
 *
 * The player still starts one segment behind and builds the margin by playing at MARGIN_BUILD_RATE
 * after its first frame: starting the margin further back starts in the segment before, which the
 * player then needs too, before any link is up, so from the origin (8 viewers at `live-sync="1.25"`:
 * two start-up segments each from the origin, 1.18 stream copies against 1.10, startup p95 1.43 s).
 */
export const DEFAULT_LIVE_MARGIN_MS = 500;
/** The largest `live-margin-ms`: a margin is a fraction of a segment, not a position. */
export const MAX_LIVE_MARGIN_MS = 10_000;
/**
 * The playback rate while building the margin (audio pitch kept, as browsers do by default): 500 ms
 * in 10 s. dash.js's live catch-up slows playback the same way to rebuild a low buffer.
 */
export const MARGIN_BUILD_RATE = 0.95;
/** Slow down once this far ahead of the target latency, s; back to 1 within SLOW_DOWN_STOP_S of it. */
export const SLOW_DOWN_START_S = 0.3;
export const SLOW_DOWN_STOP_S = 0.1;

/**
 * hls.js's target latency for a player `liveSyncSegments` behind the edge outside LL mode, s: at
 * least one target duration plus `liveMarginMs` (see DEFAULT_LIVE_MARGIN_MS). Null when hls.js's own,
 * `liveSyncSegments` × the target duration, is already that far back.
 */
export function liveSyncWithMarginS(
  liveSyncSegments: number,
  targetDurationS: number,
  liveMarginMs: number,
): number | null {
  if (!(targetDurationS > 0) || !(liveMarginMs > 0)) return null;
  const ownS = liveSyncSegments * targetDurationS;
  const floorS = targetDurationS + liveMarginMs / 1000;
  return floorS > ownS ? floorS : null;
}

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
  /** The rate while ahead of the target, building a live margin (1, the default, turns it off). */
  readonly minRate?: number;
  /**
   * Whether the target includes a margin to build (live-sync closer than a target duration plus the
   * margin). Without one, a `minRate` set before is still this controller's, and is ended.
   */
  readonly buildMargin?: boolean;
  /** The video's playback rate now. */
  readonly currentRate: number;
}

/**
 * The playback rate a live player should have now: `maxRate` while more than CATCH_UP_START_S
 * behind its target (and still so after starting, until within CATCH_UP_STOP_S), `minRate` while
 * more than SLOW_DOWN_START_S ahead of it (until within SLOW_DOWN_STOP_S), 1 otherwise.
 * Null: leave the rate alone (not a rate this controller set, or nothing known yet).
 */
export function liveCatchUpRate(input: CatchUpInput): number | null {
  const { latencyS, targetLatencyS, bufferAheadS, maxRate, currentRate } = input;
  const minRate = input.minRate ?? 1;
  // A rate someone else chose (the page, the viewer) is theirs to keep.
  if (currentRate !== 1 && currentRate !== maxRate && currentRate !== minRate) return null;
  if (targetLatencyS === null || !(latencyS > 0)) return currentRate === 1 ? null : 1;
  const behindS = latencyS - targetLatencyS;
  let rate = 1;
  if (maxRate > 1) {
    const catchingUp = currentRate === maxRate;
    if (
      bufferAheadS > CATCH_UP_MIN_BUFFER_S &&
      behindS < CATCH_UP_MAX_BEHIND_S &&
      behindS > (catchingUp ? CATCH_UP_STOP_S : CATCH_UP_START_S)
    )
      rate = maxRate;
  }
  // Slower playback never drains the buffer: no condition on it.
  if (
    rate === 1 &&
    minRate < 1 &&
    input.buildMargin === true &&
    -behindS > (currentRate === minRate ? SLOW_DOWN_STOP_S : SLOW_DOWN_START_S)
  )
    rate = minRate;
  return rate === currentRate ? null : rate;
}
