import { describe, expect, it } from 'vitest';
import { memoryByPart, processMemoryFromTrace, type TraceEvent } from '../src/lib/memory-dump.js';

const MIB = 1048576;
const hex = (mib: number): string => Math.round(mib * MIB).toString(16);
const size = (mib: number): { attrs: { size: { type: string; units: string; value: string } } } => ({
  attrs: { size: { type: 'scalar', units: 'bytes', value: hex(mib) } },
});

/** A process's dump as Chromium writes it: one event with allocators, one with its totals. */
function dump(pid: number, allocators: Record<string, unknown>, footprintMiB: number | null): TraceEvent[] {
  return [
    { ph: 'v', pid, name: 'periodic_interval', args: { dumps: { allocators, level_of_detail: 'detailed' } } },
    ...(footprintMiB === null
      ? []
      : [
          {
            ph: 'v',
            pid,
            name: 'periodic_interval',
            args: { dumps: { process_totals: { private_footprint_bytes: hex(footprintMiB) } } },
          },
        ]),
  ];
}

describe('memory-infra dumps', () => {
  const events: TraceEvent[] = [
    { ph: 'M', pid: 1, name: 'process_name', args: { name: 'Browser' } },
    { ph: 'M', pid: 2, name: 'process_name', args: { name: 'Renderer' } },
    { ph: 'M', pid: 3, name: 'process_name', args: { name: 'Renderer' } },
    { ph: 'X', pid: 2, name: 'MemoryDumpManager::InvokeOnMemoryDump' },
    ...dump(1, { malloc: size(30) }, 40),
    ...dump(
      2,
      {
        v8: size(6),
        'v8/main/malloc': size(1), // inside malloc: not a part of its own
        malloc: size(10),
        'partition_alloc/partitions/array_buffer': {
          attrs: {
            size: { type: 'scalar', units: 'bytes', value: hex(3) },
            allocated_objects_size: { type: 'scalar', units: 'bytes', value: hex(1.25) },
          },
        },
        'partition_alloc/partitions/buffer': size(1),
        blink_gc: size(2),
        blink_objects: size(2), // a view of blink_gc
        shared_memory: size(5), // shared with other processes
      },
      30,
    ),
    ...dump(
      3,
      {
        v8: size(4),
        malloc: size(8),
        'partition_alloc/partitions/array_buffer': {
          attrs: {
            size: { type: 'scalar', units: 'bytes', value: hex(1) },
            allocated_objects_size: { type: 'scalar', units: 'bytes', value: hex(0.75) },
          },
        },
      },
      20,
    ),
  ];

  it('read each process once, by name, with its parts and private footprint', () => {
    const processes = processMemoryFromTrace(events);
    expect(processes.map((p) => [p.pid, p.processName, p.privateFootprintMiB])).toEqual([
      [1, 'Browser', 40],
      [2, 'Renderer', 30],
      [3, 'Renderer', 20],
    ]);
    const renderer = processes[1];
    expect(renderer?.partsMiB).toMatchObject({
      v8: 6,
      'array buffers': 3,
      'blink buffers': 1,
      malloc: 10,
      blink_gc: 2,
      web_cache: 0,
    });
    expect(renderer?.arrayBuffersInUseMiB).toBe(1.25);
    expect(processes[0]?.arrayBuffersInUseMiB).toBeNull(); // no array buffer partition
  });

  it('sum the renderers per viewer without counting views or shared memory twice', () => {
    const m = memoryByPart(processMemoryFromTrace(events), 'Renderer', 2);
    expect(m?.processes).toBe(2);
    expect(m?.privateFootprintMiB).toBe(25);
    expect(m?.partsMiB.v8).toBe(5);
    expect(m?.partsMiB.malloc).toBe(9);
    expect(m?.partsMiB['array buffers']).toBe(2);
    // 25 − (5 + 2 + 0.5 + 9 + 1) = 7.5
    expect(m?.otherMiB).toBeCloseTo(7.5, 10);
    // Live buffers sit within the array buffers part: (1.25 + 0.75) / 2, not in the parts' sum.
    expect(m?.arrayBuffersInUseMiB).toBe(1);
    expect(memoryByPart(processMemoryFromTrace(events), 'GPU Process', 2)).toBeNull();
  });

  it('leave the footprint unknown when a process has no totals, and skip malformed events', () => {
    const odd: TraceEvent[] = [
      { ph: 'M', pid: 4, name: 'process_name', args: { name: 'Renderer' } },
      ...dump(4, { malloc: size(2), v8: { attrs: { size: { value: 12 } } } }, null),
      { ph: 'v', pid: 5, name: 'periodic_interval', args: 'not an object' },
      { ph: 'v', pid: 6, name: 'periodic_interval' },
    ];
    const processes = processMemoryFromTrace(odd);
    expect(processes).toHaveLength(1);
    expect(processes[0]?.partsMiB.v8).toBe(0);
    const m = memoryByPart(processes, 'Renderer', 1);
    expect(m?.privateFootprintMiB).toBeNull();
    expect(m?.otherMiB).toBeNull();
    expect(m?.arrayBuffersInUseMiB).toBeNull();
    expect(m?.partsMiB.malloc).toBe(2);
  });
});
