/**
 * RFC 8216bis rules an LL-HLS media playlist must keep, as a checker for the tests: returns the
 * list of violations (empty when the playlist is fine). Written from the specification, not from
 * the renderer, so the two can disagree.
 */

export interface CheckedPart {
  readonly uri: string;
  readonly durationS: number;
  readonly length: number;
  readonly offset: number;
  readonly independent: boolean;
}

export interface CheckedPlaylist {
  readonly version: number;
  readonly targetDurationS: number;
  readonly mediaSequence: number;
  readonly partTargetS: number | null;
  readonly partHoldBackS: number | null;
  readonly canBlockReload: boolean;
  /** Segments in order, each with the parts listed before it. */
  readonly segments: readonly { uri: string; durationS: number; msn: number; parts: CheckedPart[] }[];
  /** Parts after the last segment (the one being written). */
  readonly trailingParts: readonly CheckedPart[];
  readonly hints: readonly { type: string; uri: string; start: number | null }[];
  readonly endList: boolean;
}

function attributes(list: string): Map<string, string> {
  const out = new Map<string, string>();
  const re = /([A-Z0-9-]+)=("[^"]*"|[^,]*)/g;
  for (let m = re.exec(list); m !== null; m = re.exec(list)) {
    const value = m[2] ?? '';
    out.set(m[1] ?? '', value.startsWith('"') ? value.slice(1, -1) : value);
  }
  return out;
}

export function parseForCheck(text: string): { playlist: CheckedPlaylist; problems: string[] } {
  const problems: string[] = [];
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines[0] !== '#EXTM3U') problems.push('first line is not #EXTM3U');
  let version = 1;
  let targetDurationS = NaN;
  let mediaSequence = 0;
  let partTargetS: number | null = null;
  let partHoldBackS: number | null = null;
  let canBlockReload = false;
  let endList = false;
  const segments: { uri: string; durationS: number; msn: number; parts: CheckedPart[] }[] = [];
  let parts: CheckedPart[] = [];
  let extinf: number | null = null;
  const hints: { type: string; uri: string; start: number | null }[] = [];
  let partAfterHint = false;
  for (const line of lines.slice(1)) {
    const [tag = '', rest = ''] = line.startsWith('#')
      ? [line.split(':', 1)[0], line.slice(line.indexOf(':') + 1)]
      : [];
    if (!line.startsWith('#')) {
      if (extinf === null) problems.push(`URI ${line} without EXTINF`);
      segments.push({ uri: line, durationS: extinf ?? 0, msn: mediaSequence + segments.length, parts });
      parts = [];
      extinf = null;
      continue;
    }
    if (tag === '#EXT-X-VERSION') version = Number(rest);
    else if (tag === '#EXT-X-TARGETDURATION') targetDurationS = Number(rest);
    else if (tag === '#EXT-X-MEDIA-SEQUENCE') mediaSequence = Number(rest);
    else if (tag === '#EXT-X-ENDLIST') endList = true;
    else if (tag === '#EXTINF') extinf = Number(rest.split(',')[0]);
    else if (tag === '#EXT-X-PART-INF') partTargetS = Number(attributes(rest).get('PART-TARGET'));
    else if (tag === '#EXT-X-SERVER-CONTROL') {
      const a = attributes(rest);
      canBlockReload = a.get('CAN-BLOCK-RELOAD') === 'YES';
      const hold = a.get('PART-HOLD-BACK');
      partHoldBackS = hold === undefined ? null : Number(hold);
    } else if (tag === '#EXT-X-PART') {
      if (hints.length > 0) partAfterHint = true;
      const a = attributes(rest);
      const [length = NaN, offset = NaN] = (a.get('BYTERANGE') ?? '').split('@').map(Number);
      parts.push({
        uri: a.get('URI') ?? '',
        durationS: Number(a.get('DURATION')),
        length,
        offset,
        independent: a.get('INDEPENDENT') === 'YES',
      });
    } else if (tag === '#EXT-X-PRELOAD-HINT') {
      const a = attributes(rest);
      const start = a.get('BYTERANGE-START');
      hints.push({
        type: a.get('TYPE') ?? '',
        uri: a.get('URI') ?? '',
        start: start === undefined ? null : Number(start),
      });
    }
  }
  if (partAfterHint) problems.push('EXT-X-PART after EXT-X-PRELOAD-HINT');
  return {
    playlist: {
      version,
      targetDurationS,
      mediaSequence,
      partTargetS,
      partHoldBackS,
      canBlockReload,
      segments,
      trailingParts: parts,
      hints,
      endList,
    },
    problems,
  };
}

/**
 * The rules. `sizes` gives the final size of segment files known to be complete, to check that a
 * complete segment's parts cover it exactly.
 */
export function checkLowLatencyPlaylist(text: string, sizes?: ReadonlyMap<string, number>): string[] {
  const { playlist: p, problems } = parseForCheck(text);
  if (!Number.isInteger(p.targetDurationS)) problems.push('EXT-X-TARGETDURATION missing or not an integer');
  // RFC 8216bis §4.4.3.1: each EXTINF, rounded to the nearest integer, ≤ the target duration.
  for (const s of p.segments)
    if (Math.round(s.durationS) > p.targetDurationS)
      problems.push(`EXTINF ${s.durationS} of ${s.uri} > target`);
  const allParts = [...p.segments.flatMap((s) => s.parts), ...p.trailingParts];
  const anyByteRange = allParts.length > 0 || p.hints.some((h) => h.start !== null);
  if (allParts.length > 0 || p.hints.length > 0) {
    // §4.4.3.7: EXT-X-PART-INF is REQUIRED if the playlist contains EXT-X-PART.
    if (p.partTargetS === null || !(p.partTargetS > 0)) problems.push('parts without EXT-X-PART-INF');
    // §4.4.3.8: PART-HOLD-BACK is REQUIRED with PART-INF and at least twice the part target.
    if (p.partHoldBackS === null) problems.push('no PART-HOLD-BACK');
    else if (p.partTargetS !== null && p.partHoldBackS < 2 * p.partTargetS)
      problems.push(`PART-HOLD-BACK ${p.partHoldBackS} < 2 × PART-TARGET ${p.partTargetS}`);
  }
  // §8: BYTERANGE needs protocol version 4 or later.
  if (anyByteRange && p.version < 4) problems.push(`EXT-X-VERSION ${p.version} < 4 with byte ranges`);
  // §4.4.4.9: each part's duration ≤ the part target.
  for (const part of allParts)
    if (p.partTargetS !== null && part.durationS > p.partTargetS)
      problems.push(`part of ${part.uri}@${part.offset} lasts ${part.durationS} > ${p.partTargetS}`);
  // §4.4.4.9: and at least 85% of it, except an INDEPENDENT=YES part and a segment's final part.
  const notFinal = [...p.segments.flatMap((s) => s.parts.slice(0, -1)), ...p.trailingParts];
  for (const part of notFinal)
    if (p.partTargetS !== null && !part.independent && part.durationS < 0.85 * p.partTargetS)
      problems.push(`part of ${part.uri}@${part.offset} lasts ${part.durationS} < 85% of ${p.partTargetS}`);
  // Byte ranges of one segment's parts: contiguous from 0, and covering a complete segment.
  const groups: { uri: string; parts: readonly CheckedPart[]; complete: boolean }[] = [
    ...p.segments
      .filter((s) => s.parts.length > 0)
      .map((s) => ({ uri: s.uri, parts: s.parts, complete: true })),
    ...(p.trailingParts.length > 0
      ? [{ uri: p.trailingParts[0]?.uri ?? '', parts: p.trailingParts, complete: false }]
      : []),
  ];
  for (const g of groups) {
    let next = 0;
    for (const part of g.parts) {
      if (part.uri !== g.uri) problems.push(`part URI ${part.uri} listed with segment ${g.uri}`);
      if (part.offset !== next) problems.push(`part of ${g.uri} at ${part.offset}, expected ${next}`);
      if (!(part.length > 0)) problems.push(`empty part of ${g.uri}`);
      next = part.offset + part.length;
    }
    const size = sizes?.get(g.uri);
    if (g.complete && size !== undefined && next !== size)
      problems.push(`parts of ${g.uri} cover ${next} bytes of ${size}`);
  }
  // §4.4.5.3: at most one preload hint per TYPE, and for parts it follows the last part.
  const types = p.hints.map((h) => h.type);
  if (new Set(types).size !== types.length) problems.push('two EXT-X-PRELOAD-HINTs of one TYPE');
  for (const h of p.hints.filter((x) => x.type === 'PART')) {
    const last = p.trailingParts.at(-1);
    const expected = last === undefined ? 0 : last.offset + last.length;
    if (h.start !== null && (last === undefined || last.uri === h.uri) && h.start !== expected)
      problems.push(`preload hint starts at ${h.start}, the next part at ${expected}`);
  }
  if (p.endList && p.hints.length > 0) problems.push('preload hint in an ended playlist');
  // §4.4.4.9: parts only in the last three target durations (by where each segment starts).
  let fromEnd =
    p.trailingParts.reduce((s, x) => s + x.durationS, 0) + p.segments.reduce((s, x) => s + x.durationS, 0);
  for (const s of p.segments) {
    if (s.parts.length > 0 && fromEnd > 3 * p.targetDurationS + 1e-6)
      problems.push(`parts of ${s.uri}, which starts ${fromEnd.toFixed(3)} s from the end`);
    fromEnd -= s.durationS;
  }
  // §4.4.3.8: CAN-BLOCK-RELOAD=YES is REQUIRED with parts.
  if (allParts.length > 0 && !p.canBlockReload) problems.push('parts without CAN-BLOCK-RELOAD=YES');
  return problems;
}
