/**
 * What a page's JS heap holds: a V8 heap snapshot (Chromium's `HeapProfiler.takeHeapSnapshot`)
 * summed by node kind, and its ArrayBuffer bytes by owner (issue 17: a mesh viewer's JS heap was
 * twice plain hls.js's, and the question is which of the SDK's stores hold it).
 *
 * The snapshot format (V8's `HeapSnapshotJSONSerializer`): flat `nodes` and `edges` arrays, each
 * record `meta.node_fields` / `meta.edge_fields` numbers long; a node's edges follow those of the
 * nodes before it, in order; an edge's `to_node` is an offset into `nodes`, and names are indices
 * into `strings` (an element edge's name is its index).
 */

/** The parts of a `.heapsnapshot` read here. */
export interface HeapSnapshotJson {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: readonly string[];
      readonly node_types: readonly [readonly string[], ...unknown[]];
      readonly edge_fields: readonly string[];
      readonly edge_types: readonly [readonly string[], ...unknown[]];
    };
  };
  readonly nodes: readonly number[];
  readonly edges: readonly number[];
  readonly strings: readonly string[];
}

export interface HeapRow {
  /** `type: name`, e.g. `object: Map` or `native: system / JSArrayBufferData`. */
  readonly name: string;
  readonly count: number;
  readonly selfBytes: number;
}

export interface HeapSummary {
  readonly nodes: number;
  /** Σ self sizes: the snapshot's total, what DevTools calls the heap's size. */
  readonly totalBytes: number;
  /** The largest kinds by self size (at most TOP_ROWS). */
  readonly byKind: readonly HeapRow[];
  /** ArrayBuffer backing stores, in bytes (counted in totalBytes too). */
  readonly arrayBufferBytes: number;
  /** Backing stores by the nearest retainer that is not a buffer, a view or a container (at most TOP_ROWS). */
  readonly arrayBuffersByOwner: readonly HeapRow[];
}

const TOP_ROWS = 25;
/** Retainers walked up from a backing store before its owner is called unknown. */
const MAX_OWNER_DEPTH = 6;
/**
 * Objects that hold buffers for someone else: the owner is further up. `(object elements)` and
 * friends are V8's internal arrays behind Arrays and Maps.
 */
const CONTAINERS = new Set([
  'ArrayBuffer',
  'SharedArrayBuffer',
  'Uint8Array',
  'Int8Array',
  'Uint16Array',
  'Int16Array',
  'Uint32Array',
  'Int32Array',
  'Float32Array',
  'Float64Array',
  'BigInt64Array',
  'BigUint64Array',
  'Uint8ClampedArray',
  'DataView',
  'Array',
  'Map',
  'Set',
  'Object',
]);

class FieldIndex {
  constructor(
    private readonly fields: readonly string[],
    private readonly what: string,
  ) {}
  of(name: string): number {
    const i = this.fields.indexOf(name);
    if (i < 0) throw new Error(`heap snapshot: no ${this.what} field "${name}"`);
    return i;
  }
}

/** Strings are named by their text, code by its source: those are summed by type alone. */
const UNNAMED_TYPES = new Set([
  'string',
  'concatenated string',
  'sliced string',
  'regexp',
  'number',
  'bigint',
]);
/** A kind's name is cut to this many characters (a closure's name can be long). */
const MAX_KIND_NAME = 80;

function kindOf(type: string, name: string): string {
  if (UNNAMED_TYPES.has(type)) return type;
  const oneLine = name.replace(/\s+/g, ' ');
  return `${type}: ${oneLine.length > MAX_KIND_NAME ? `${oneLine.slice(0, MAX_KIND_NAME)}…` : oneLine}`;
}

/** Sums a parsed heap snapshot. Throws on a snapshot without the fields it needs. */
export function summarizeHeapSnapshot(snap: HeapSnapshotJson): HeapSummary {
  const meta = snap.snapshot.meta;
  const nodeFields = new FieldIndex(meta.node_fields, 'node');
  const edgeFields = new FieldIndex(meta.edge_fields, 'edge');
  const nodeWidth = meta.node_fields.length;
  const edgeWidth = meta.edge_fields.length;
  const nodeTypes = meta.node_types[0];
  const edgeTypes = meta.edge_types[0];
  const typeAt = nodeFields.of('type');
  const nameAt = nodeFields.of('name');
  const sizeAt = nodeFields.of('self_size');
  const edgeCountAt = nodeFields.of('edge_count');
  const edgeTypeAt = edgeFields.of('type');
  const toAt = edgeFields.of('to_node');
  const weak = edgeTypes.indexOf('weak');
  const shortcut = edgeTypes.indexOf('shortcut');
  const { nodes, edges, strings } = snap;
  const count = Math.floor(nodes.length / nodeWidth);
  const nameOf = (n: number): string => strings[nodes[n * nodeWidth + nameAt] ?? -1] ?? '?';
  const typeOf = (n: number): string => nodeTypes[nodes[n * nodeWidth + typeAt] ?? -1] ?? '?';
  const sizeOf = (n: number): number => nodes[n * nodeWidth + sizeAt] ?? 0;

  // One strong retainer per node is enough to name an owner: the first one met.
  const retainer = new Int32Array(count).fill(-1);
  let edge = 0;
  for (let n = 0; n < count; n++) {
    const edgeCount = nodes[n * nodeWidth + edgeCountAt] ?? 0;
    for (let k = 0; k < edgeCount; k++, edge += edgeWidth) {
      const type = edges[edge + edgeTypeAt];
      if (type === weak || type === shortcut) continue;
      const to = Math.floor((edges[edge + toAt] ?? 0) / nodeWidth);
      if (to < count && retainer[to] === -1 && to !== n) retainer[to] = n;
    }
  }

  const kinds = new Map<string, { count: number; selfBytes: number }>();
  const owners = new Map<string, { count: number; selfBytes: number }>();
  let totalBytes = 0;
  let arrayBufferBytes = 0;
  const add = (map: typeof kinds, key: string, bytes: number): void => {
    const row = map.get(key);
    if (row === undefined) map.set(key, { count: 1, selfBytes: bytes });
    else {
      row.count++;
      row.selfBytes += bytes;
    }
  };
  for (let n = 0; n < count; n++) {
    const size = sizeOf(n);
    const name = nameOf(n);
    totalBytes += size;
    add(kinds, kindOf(typeOf(n), name), size);
    if (name !== 'system / JSArrayBufferData') continue;
    arrayBufferBytes += size;
    let owner = 'unknown';
    let at = retainer[n] ?? -1;
    for (let depth = 0; depth < MAX_OWNER_DEPTH && at >= 0; depth++) {
      const atName = nameOf(at);
      const atType = typeOf(at);
      if (atType === 'object' && !CONTAINERS.has(atName)) {
        owner = atName;
        break;
      }
      if (atType === 'closure' || atType === 'synthetic') {
        owner = `${atType}: ${atName}`;
        break;
      }
      at = retainer[at] ?? -1;
    }
    add(owners, owner, size);
  }
  const top = (map: typeof kinds): HeapRow[] =>
    [...map]
      .map(([name, row]) => ({ name, ...row }))
      .sort((a, b) => b.selfBytes - a.selfBytes || a.name.localeCompare(b.name))
      .slice(0, TOP_ROWS);
  return {
    nodes: count,
    totalBytes,
    byKind: top(kinds),
    arrayBufferBytes,
    arrayBuffersByOwner: top(owners),
  };
}

const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(2);

/** The summary as Markdown: totals, then the two tables. */
export function heapMarkdown(summary: HeapSummary, title: string): string {
  const rows = (list: readonly HeapRow[]): string =>
    list.map((r) => `| ${r.name.replace(/\|/g, '\\|')} | ${r.count} | ${mib(r.selfBytes)} |`).join('\n');
  return (
    `## ${title}\n\n` +
    `${summary.nodes} heap nodes, ${mib(summary.totalBytes)} MiB in all, of which ${mib(summary.arrayBufferBytes)} MiB ArrayBuffer contents.\n\n` +
    `| kind | count | MiB (self) |\n|---|---|---|\n${rows(summary.byKind)}\n\n` +
    `ArrayBuffer contents by the nearest retainer that is not a buffer, view or container:\n\n` +
    `| owner | buffers | MiB |\n|---|---|---|\n${rows(summary.arrayBuffersByOwner)}\n`
  );
}
