/**
 * The packager's media playlist in, the LL-HLS media playlist out (RFC 8216bis), and the blocking
 * playlist reload rules (§6.2.5.2). Pure functions: no files, no clock.
 */
import type { Part } from './parts.js';
import { TICKS_PER_SECOND } from './ts-scanner.js';

/** Bounds of --part-target-ms: under 100 ms a part is a frame or two (a request each for no gain); over 2 s it is no longer low latency. */
export const DEFAULT_PART_TARGET_MS = 500;
export const MIN_PART_TARGET_MS = 100;
export const MAX_PART_TARGET_MS = 2000;

/** Tags that describe the whole media playlist (§4.4.3, §4.4.2) rather than the next segment. */
const PLAYLIST_TAGS = new Set([
  '#EXT-X-VERSION',
  '#EXT-X-TARGETDURATION',
  '#EXT-X-MEDIA-SEQUENCE',
  '#EXT-X-DISCONTINUITY-SEQUENCE',
  '#EXT-X-PLAYLIST-TYPE',
  '#EXT-X-I-FRAMES-ONLY',
  '#EXT-X-INDEPENDENT-SEGMENTS',
  '#EXT-X-START',
  '#EXT-X-ALLOW-CACHE',
]);

/**
 * §8 "Protocol Version Compatibility": the BYTERANGE attribute of EXT-X-PART (like EXT-X-BYTERANGE)
 * needs version 4 or more; nothing else added here raises it.
 */
export const LL_HLS_MIN_VERSION = 4;
/**
 * §4.4.3.8: PART-HOLD-BACK "MUST be at least twice the Part Target Duration" and "SHOULD be at
 * least three times"; three it is.
 */
export const PART_HOLD_BACK_PARTS = 3;
/** §4.4.4.9: parts older than three target durations from the end may (and here do) leave. */
export const PART_WINDOW_TARGET_DURATIONS = 3;

export interface PackagerSegment {
  /** Tags between the previous URI and this one (EXTINF, DISCONTINUITY, PROGRAM-DATE-TIME, …). */
  readonly tags: readonly string[];
  readonly uri: string;
  readonly durationS: number;
  readonly msn: number;
}

export interface PackagerPlaylist {
  readonly version: number | null;
  /** Playlist-wide tags other than EXT-X-VERSION, in their order. */
  readonly headerTags: readonly string[];
  readonly targetDurationS: number;
  readonly mediaSequence: number;
  readonly segments: readonly PackagerSegment[];
  /** Tags after the last URI (other than ENDLIST), e.g. a DISCONTINUITY for the next segment. */
  readonly trailingTags: readonly string[];
  readonly endList: boolean;
  /** Already an LL-HLS playlist (a real LL-HLS packager): served unchanged. */
  readonly lowLatency: boolean;
  /** Parts after the last segment's URI, for blocking reload on an unchanged LL-HLS playlist. */
  readonly trailingParts: number;
}

export class PlaylistParseError extends Error {
  override readonly name = 'PlaylistParseError';
}

/** Parses a media playlist; throws PlaylistParseError for one this module cannot extend. */
export function parsePackagerPlaylist(text: string): PackagerPlaylist {
  const lines = text.split(/\r?\n/).map((l) => l.trim());
  const first = lines.findIndex((l) => l !== '');
  if (first < 0 || lines[first] !== '#EXTM3U') throw new PlaylistParseError('no #EXTM3U');
  let version: number | null = null;
  let targetDurationS: number | null = null;
  let mediaSequence = 0;
  let endList = false;
  let lowLatency = false;
  let trailingParts = 0;
  const headerTags: string[] = [];
  const segments: PackagerSegment[] = [];
  let pending: string[] = [];
  let durationS: number | null = null;
  for (const line of lines.slice(first + 1)) {
    if (line === '') continue;
    if (line.startsWith('#EXT-X-STREAM-INF') || line.startsWith('#EXT-X-MEDIA:'))
      throw new PlaylistParseError('a multivariant playlist');
    if (line.startsWith('#EXT-X-PART') || line.startsWith('#EXT-X-PRELOAD-HINT')) lowLatency = true;
    if (line.startsWith('#EXT-X-PART:')) trailingParts++;
    if (!line.startsWith('#')) {
      if (durationS === null) throw new PlaylistParseError(`URI ${JSON.stringify(line)} without #EXTINF`);
      segments.push({ tags: pending, uri: line, durationS, msn: mediaSequence + segments.length });
      pending = [];
      durationS = null;
      trailingParts = 0;
      continue;
    }
    const name = line.split(':', 1)[0] ?? line;
    if (name === '#EXT-X-ENDLIST') {
      endList = true;
      continue;
    }
    if (PLAYLIST_TAGS.has(name)) {
      const value = line.slice(name.length + 1);
      if (name === '#EXT-X-VERSION') {
        version = parseIntStrict(value, name);
        continue;
      }
      if (name === '#EXT-X-TARGETDURATION') targetDurationS = parseIntStrict(value, name);
      if (name === '#EXT-X-MEDIA-SEQUENCE') {
        if (segments.length > 0) throw new PlaylistParseError('#EXT-X-MEDIA-SEQUENCE after a segment');
        mediaSequence = parseIntStrict(value, name);
      }
      headerTags.push(line);
      continue;
    }
    if (name === '#EXTINF') {
      const d = Number(line.slice('#EXTINF:'.length).split(',', 1)[0]);
      if (!Number.isFinite(d) || d < 0) throw new PlaylistParseError(`bad ${line}`);
      durationS = d;
    }
    pending.push(line);
  }
  if (targetDurationS === null) throw new PlaylistParseError('no #EXT-X-TARGETDURATION');
  return {
    version,
    headerTags,
    targetDurationS,
    mediaSequence,
    segments,
    trailingTags: pending,
    endList,
    lowLatency,
    trailingParts,
  };
}

function parseIntStrict(value: string, name: string): number {
  if (!/^\d{1,15}$/.test(value)) throw new PlaylistParseError(`bad ${name}:${value}`);
  return Number(value);
}

/**
 * The packager's next segment name: the last URI with its trailing number incremented, keeping any
 * zero padding (live12.ts → live13.ts, seg009.ts → seg010.ts). Null for a URI this origin cannot
 * map to a file of its own directory (absolute, with a query, or without a number).
 */
export function predictNextUri(lastUri: string): string | null {
  if (/[?#:\\]/.test(lastUri) || lastUri.startsWith('/')) return null;
  // Only files inside the packager's directory are read, never `../` ones.
  if (lastUri.split('/').some((s) => s === '..' || s === '.' || s === '')) return null;
  const m = /^(.*?)(\d+)(\D*)$/.exec(lastUri);
  if (m === null) return null;
  const [, prefix = '', digits = '', suffix = ''] = m;
  if (digits.length > 15) return null;
  const next = String(Number(digits) + 1).padStart(digits.length, '0');
  return `${prefix}${next}${suffix}`;
}

export interface SegmentParts {
  readonly parts: readonly Part[];
}

export interface InProgressSegment {
  readonly uri: string;
  readonly parts: readonly Part[];
  /** Where the next part will start (the preload hint); null when no hint can be given. */
  readonly nextPartOffset: number | null;
}

export interface RenderInput {
  readonly playlist: PackagerPlaylist;
  readonly partTargetMs: number;
  /** Parts of listed segments, by URI. */
  readonly partsByUri: ReadonlyMap<string, readonly Part[]>;
  readonly inProgress: InProgressSegment | null;
}

export function formatSeconds(ticks: number): string {
  // Five decimals: exact for 90 kHz multiples of 0.00001 s, and never rounds a duration at or
  // under the part target (a multiple of 1 ms) to above it.
  return (Math.floor((ticks / TICKS_PER_SECOND) * 100_000) / 100_000).toFixed(5);
}

function partLine(uri: string, part: Part): string {
  return (
    `#EXT-X-PART:DURATION=${formatSeconds(part.durationTicks)},URI=${JSON.stringify(uri)},` +
    `BYTERANGE="${part.length}@${part.offset}"${part.independent ? ',INDEPENDENT=YES' : ''}`
  );
}

/** The LL-HLS view of a plain packager's playlist. */
export function renderLowLatencyPlaylist(input: RenderInput): string {
  const { playlist, partTargetMs, partsByUri } = input;
  const partTargetS = partTargetMs / 1000;
  const inProgress = playlist.endList ? null : input.inProgress;
  const out: string[] = ['#EXTM3U'];
  out.push(`#EXT-X-VERSION:${Math.max(playlist.version ?? 1, LL_HLS_MIN_VERSION)}`);
  out.push(...playlist.headerTags);
  out.push(
    `#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=${(PART_HOLD_BACK_PARTS * partTargetS).toFixed(3)}`,
  );
  out.push(`#EXT-X-PART-INF:PART-TARGET=${partTargetS.toFixed(3)}`);
  // Distance of each segment's start from the playlist's end decides whether its parts are listed.
  const inProgressS = (inProgress?.parts ?? []).reduce((s, p) => s + p.durationTicks, 0) / TICKS_PER_SECOND;
  let fromEndS = inProgressS + playlist.segments.reduce((s, seg) => s + seg.durationS, 0);
  const windowS = PART_WINDOW_TARGET_DURATIONS * playlist.targetDurationS;
  for (const segment of playlist.segments) {
    const parts = fromEndS <= windowS ? (partsByUri.get(segment.uri) ?? []) : [];
    fromEndS -= segment.durationS;
    const extinf = segment.tags.findIndex((t) => t.startsWith('#EXTINF'));
    const before = extinf < 0 ? segment.tags : segment.tags.slice(0, extinf);
    const after = extinf < 0 ? [] : segment.tags.slice(extinf);
    out.push(...before, ...parts.map((p) => partLine(segment.uri, p)), ...after, segment.uri);
  }
  out.push(...playlist.trailingTags);
  if (inProgress !== null) {
    out.push(...inProgress.parts.map((p) => partLine(inProgress.uri, p)));
    if (inProgress.nextPartOffset !== null)
      out.push(
        `#EXT-X-PRELOAD-HINT:TYPE=PART,URI=${JSON.stringify(inProgress.uri)},BYTERANGE-START=${inProgress.nextPartOffset}`,
      );
  }
  if (playlist.endList) out.push('#EXT-X-ENDLIST');
  return `${out.join('\n')}\n`;
}

/** `_HLS_msn`/`_HLS_part` of a playlist request (§6.2.5.2); other query parameters are ignored. */
export type DeliveryDirective =
  | { readonly kind: 'none' }
  | { readonly kind: 'bad'; readonly reason: string }
  | { readonly kind: 'block'; readonly msn: number; readonly part: number | null };

export function parseDeliveryDirective(query: string): DeliveryDirective {
  let params: URLSearchParams;
  try {
    params = new URLSearchParams(query);
  } catch {
    return { kind: 'none' };
  }
  const msnText = params.get('_HLS_msn');
  const partText = params.get('_HLS_part');
  if (msnText === null) {
    // §6.2.5.2: "_HLS_part ... without _HLS_msn" is a bad request.
    return partText === null ? { kind: 'none' } : { kind: 'bad', reason: '_HLS_part without _HLS_msn' };
  }
  if (!/^\d{1,15}$/.test(msnText)) return { kind: 'bad', reason: 'bad _HLS_msn' };
  if (partText !== null && !/^\d{1,9}$/.test(partText)) return { kind: 'bad', reason: 'bad _HLS_part' };
  return { kind: 'block', msn: Number(msnText), part: partText === null ? null : Number(partText) };
}

/** What a playlist holds, as far as blocking reload cares. */
export interface DeliveryState {
  /** Media sequence number of the last complete segment listed (mediaSequence - 1 if none). */
  readonly lastMsn: number;
  /** Parts listed of the segment after it (the one being written). */
  readonly partsAfter: number;
  readonly partTargetMs: number;
}

/** §6.2.5.2: the Advance Part Limit, in parts. */
export function advancePartLimit(partTargetMs: number): number {
  return partTargetMs < 1000 ? Math.floor(3000 / partTargetMs) : 3;
}

export type DeliveryDecision = 'ready' | 'wait' | 'too-far';

/**
 * Whether a blocked request can be answered now. §6.2.5.2: an `_HLS_msn` more than two past the
 * last segment, or an `_HLS_part` more than the Advance Part Limit past the last part, gets 400.
 */
export function deliveryDecision(state: DeliveryState, msn: number, part: number | null): DeliveryDecision {
  if (msn <= state.lastMsn) return 'ready';
  if (msn > state.lastMsn + 2) return 'too-far';
  if (part === null) return 'wait';
  if (msn === state.lastMsn + 1) {
    if (part < state.partsAfter) return 'ready';
    return part - (state.partsAfter - 1) > advancePartLimit(state.partTargetMs) ? 'too-far' : 'wait';
  }
  // msn = lastMsn + 2: the parts of the segment in between are still to come as well.
  return part >= advancePartLimit(state.partTargetMs) ? 'too-far' : 'wait';
}
