// What the broadcaster console reads from the tracker's debug endpoints, normalised. The endpoints
// are JSON for people and tests, so the reader is lenient: it takes the per-slice view either as
// `slices: [{slice, parent, children}]` (the SDK's SliceView) or as `parents[slice]` /
// `children[slice]` arrays, and ignores whatever else a report carries.
import { SLICES } from './common.js';

export interface MemberView {
  readonly peerId: number;
  readonly isSource: boolean;
  /** parents[slice]: this member's parent in that slice's tree (null: none, or not reported). */
  readonly parents: readonly (number | null)[];
  /** children[slice]: who this member forwards that slice to. */
  readonly children: readonly (readonly number[])[];
  readonly reported: boolean;
}

export interface SwarmView {
  readonly stream: string;
  readonly sourceId: number | null;
  readonly sourceConnected: boolean;
  /** Members other than the true source. */
  readonly viewers: readonly MemberView[];
  readonly source: MemberView | null;
  /** Segment announcements the tracker accepted from the true source, if it says. */
  readonly announcements: number | null;
}

export interface OriginView {
  /** Media bytes the origin served to the true source (its ingest). */
  readonly sourceBytes: number | null;
  /** Media bytes the origin served to viewers (fallback fetches). */
  readonly viewerBytes: number | null;
  readonly raw: unknown;
}

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const asNumber = (value: unknown): number | null =>
  typeof value === 'number' && Number.isFinite(value) ? value : null;
const asNumbers = (value: unknown): number[] =>
  Array.isArray(value) ? value.filter((item): item is number => asNumber(item) !== null) : [];

function field(object: Json, ...names: string[]): unknown {
  for (const name of names) if (name in object) return object[name];
  return undefined;
}

function readMember(raw: unknown, sourceId: number | null): MemberView | null {
  if (!isObject(raw)) return null;
  const peerId = asNumber(field(raw, 'peerId', 'id'));
  if (peerId === null) return null;
  const reportRaw = field(raw, 'report', 'stats');
  const report: Json = isObject(reportRaw) ? reportRaw : raw;
  const parents: (number | null)[] = Array.from({ length: SLICES }, () => null);
  const children: number[][] = Array.from({ length: SLICES }, () => []);
  let reported = false;
  const slices = field(report, 'slices');
  if (Array.isArray(slices)) {
    reported = true;
    slices.forEach((view: unknown, index) => {
      if (!isObject(view)) return;
      const slice = asNumber(view.slice) ?? index;
      if (slice < 0 || slice >= SLICES) return;
      parents[slice] = asNumber(view.parent);
      children[slice] = asNumbers(view.children);
    });
  }
  const parentList = field(report, 'parents');
  if (Array.isArray(parentList)) {
    reported = true;
    parentList.slice(0, SLICES).forEach((parent: unknown, slice) => (parents[slice] = asNumber(parent)));
  }
  const childList = field(report, 'children');
  if (Array.isArray(childList)) {
    reported = true;
    childList.slice(0, SLICES).forEach((list: unknown, slice) => {
      // A slice source list may give one child per slice rather than a list.
      const single = asNumber(list);
      children[slice] = single === null ? asNumbers(list) : [single];
    });
  }
  const role = field(raw, 'role', 'kind');
  const isSource =
    field(raw, 'isSource') === true || role === 'source' || (sourceId !== null && peerId === sourceId);
  return { peerId, isSource, parents, children, reported };
}

export function readSwarm(raw: unknown, stream: string): SwarmView {
  const body = isObject(raw) ? raw : {};
  const sourceId = asNumber(field(body, 'sourceId', 'source'));
  const list = field(body, 'members', 'peers', 'viewers');
  const members = (Array.isArray(list) ? list : [])
    .map((member: unknown) => readMember(member, sourceId))
    .filter((member): member is MemberView => member !== null);
  const sourceReport = readMember(field(body, 'sourceReport'), sourceId);
  const source =
    members.find((member) => member.isSource) ?? (sourceReport ? { ...sourceReport, isSource: true } : null);
  const connected = field(body, 'sourceConnected');
  return {
    stream: typeof body.stream === 'string' ? body.stream : stream,
    sourceId: sourceId ?? source?.peerId ?? null,
    sourceConnected: typeof connected === 'boolean' ? connected : source !== null,
    viewers: members.filter((member) => !member.isSource),
    source,
    announcements: asNumber(field(body, 'announcements')),
  };
}

export function readOrigin(raw: unknown): OriginView {
  const body = isObject(raw) ? raw : {};
  const media = field(body, 'mediaBytes', 'media');
  const nested = isObject(media) ? media : {};
  return {
    sourceBytes:
      asNumber(field(nested, 'source')) ?? asNumber(field(body, 'sourceMediaBytes', 'sourceBytes')),
    viewerBytes:
      asNumber(field(nested, 'viewers')) ?? asNumber(field(body, 'viewerMediaBytes', 'viewerBytes')),
    raw,
  };
}
