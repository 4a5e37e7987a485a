import { describe, expect, it } from 'vitest';
import { heapMarkdown, summarizeHeapSnapshot, type HeapSnapshotJson } from '../src/lib/heap-snapshot.js';

const NODE_FIELDS = ['type', 'name', 'id', 'self_size', 'edge_count'];
const EDGE_FIELDS = ['type', 'name_or_index', 'to_node'];
const NODE_TYPES = [
  'hidden',
  'array',
  'string',
  'object',
  'code',
  'closure',
  'regexp',
  'number',
  'native',
  'synthetic',
];
const EDGE_TYPES = ['context', 'element', 'property', 'internal', 'hidden', 'shortcut', 'weak'];

interface TestNode {
  readonly type: string;
  readonly name: string;
  readonly size: number;
  /** [edge type, target node index] */
  readonly edges: readonly (readonly [string, number])[];
}

/** A snapshot in V8's layout from a list of nodes (edges in node order, to_node as offsets). */
function snapshotOf(list: readonly TestNode[]): HeapSnapshotJson {
  const strings: string[] = [''];
  const str = (s: string): number => {
    const at = strings.indexOf(s);
    if (at >= 0) return at;
    strings.push(s);
    return strings.length - 1;
  };
  const nodes: number[] = [];
  const edges: number[] = [];
  list.forEach((n, i) => {
    nodes.push(NODE_TYPES.indexOf(n.type), str(n.name), i + 1, n.size, n.edges.length);
    for (const [type, to] of n.edges) edges.push(EDGE_TYPES.indexOf(type), str('e'), to * NODE_FIELDS.length);
  });
  return {
    snapshot: {
      meta: {
        node_fields: NODE_FIELDS,
        node_types: [NODE_TYPES],
        edge_fields: EDGE_FIELDS,
        edge_types: [EDGE_TYPES],
      },
    },
    nodes,
    edges,
    strings,
  };
}

describe('heap snapshot summary', () => {
  // 0 root → 2 SegmentStore → 3 Map → 4 Uint8Array → 5 ArrayBuffer → 6 backing store (1000 bytes)
  //        → 7 SliceState → 8 Uint8Array → 9 ArrayBuffer → 10 backing store (300 bytes)
  // and 1 WeakThing, met first, holds 10 by a weak edge only: not its owner.
  const snap = snapshotOf([
    {
      type: 'synthetic',
      name: '(GC roots)',
      size: 0,
      edges: [
        ['element', 1],
        ['element', 2],
        ['element', 7],
      ],
    },
    { type: 'object', name: 'WeakThing', size: 8, edges: [['weak', 10]] },
    { type: 'object', name: 'SegmentStore', size: 40, edges: [['property', 3]] },
    { type: 'object', name: 'Map', size: 32, edges: [['internal', 4]] },
    { type: 'object', name: 'Uint8Array', size: 24, edges: [['internal', 5]] },
    { type: 'object', name: 'ArrayBuffer', size: 16, edges: [['internal', 6]] },
    { type: 'native', name: 'system / JSArrayBufferData', size: 1000, edges: [] },
    { type: 'object', name: 'SliceState', size: 80, edges: [['property', 8]] },
    { type: 'object', name: 'Uint8Array', size: 24, edges: [['internal', 9]] },
    { type: 'object', name: 'ArrayBuffer', size: 16, edges: [['internal', 10]] },
    { type: 'native', name: 'system / JSArrayBufferData', size: 300, edges: [] },
  ]);

  it('sums self sizes by kind and names the owner of each buffer past views and containers', () => {
    const summary = summarizeHeapSnapshot(snap);
    expect(summary.nodes).toBe(11);
    expect(summary.totalBytes).toBe(1540);
    expect(summary.arrayBufferBytes).toBe(1300);
    expect(summary.byKind[0]).toEqual({
      name: 'native: system / JSArrayBufferData',
      count: 2,
      selfBytes: 1300,
    });
    expect(summary.byKind.find((r) => r.name === 'object: Uint8Array')).toEqual({
      name: 'object: Uint8Array',
      count: 2,
      selfBytes: 48,
    });
    expect(summary.arrayBuffersByOwner).toEqual([
      { name: 'SegmentStore', count: 1, selfBytes: 1000 },
      { name: 'SliceState', count: 1, selfBytes: 300 },
    ]);
    const md = heapMarkdown(summary, 'v0');
    expect(md).toContain('| SegmentStore | 1 | 0.00 |');
    expect(md).toContain('11 heap nodes');
  });

  it('sums strings by type, not by their text, and cuts long names', () => {
    const summary = summarizeHeapSnapshot(
      snapshotOf([
        { type: 'string', name: 'const a = 1;\nconst b = 2;', size: 30, edges: [] },
        { type: 'string', name: 'hello', size: 10, edges: [] },
        { type: 'closure', name: `${'x'.repeat(100)}\n  y`, size: 8, edges: [] },
      ]),
    );
    expect(summary.byKind).toEqual([
      { name: 'string', count: 2, selfBytes: 40 },
      { name: `closure: ${'x'.repeat(80)}…`, count: 1, selfBytes: 8 },
    ]);
  });

  it('says which field a snapshot lacks', () => {
    const broken = { ...snap, snapshot: { meta: { ...snap.snapshot.meta, node_fields: ['type', 'name'] } } };
    expect(() => summarizeHeapSnapshot(broken)).toThrow(/no node field "self_size"/);
  });
});
