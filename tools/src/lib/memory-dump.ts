/**
 * Where a Chromium process's memory goes: a memory-infra dump (DevTools' `Tracing.requestMemoryDump`
 * in a trace of the `disabled-by-default-memory-infra` category), read into sizes by allocator per
 * process (issue 17: a mesh viewer's renderer holds ~13 MiB more than plain hls.js's, and its JS heap
 * explains only ~5 of them).
 *
 * The trace's process dumps are events with `ph: 'v'`, one per process, whose
 * `args.dumps.allocators` maps a slash-separated allocator path (`malloc`, `v8/main/heap`,
 * `partition_alloc/partitions/array_buffer`, …) to attributes; `size` is a hex string of bytes.
 * `args.dumps.process_totals.private_footprint_bytes` is the process's private footprint, Chromium's
 * own figure for what a process costs (on Linux its resident anonymous memory and swap, RssAnon +
 * VmSwap: lib/proc.ts reads the same from /proc). A process's allocators and its totals come as two
 * events. Processes are named by `process_name` metadata events (`Renderer`, `Browser`, …).
 */

/** The fields of a trace event read here. */
export interface TraceEvent {
  readonly ph: string;
  readonly pid: number;
  readonly name: string;
  readonly args?: unknown;
}

export interface ProcessMemory {
  readonly pid: number;
  /** From the trace's `process_name` metadata; `unknown` without one. */
  readonly processName: string;
  /** Chromium's private footprint of the process, MiB; null when the dump has none. */
  readonly privateFootprintMiB: number | null;
  /** Sizes by allocator part (MEMORY_PARTS' names), MiB. */
  readonly partsMiB: Readonly<Record<string, number>>;
  /**
   * Of the `array buffers` part, what live ArrayBuffers occupy (the partition's
   * `allocated_objects_size`), MiB; null when the dump does not say. The rest of that part is
   * slots PartitionAlloc keeps resident though their buffers were freed: a slot span holding even
   * one live buffer stays (seen in a bare page: 4000 buffers of 1200 bytes, three in four freed and
   * collected, left 1.2 MiB in use of 4.9 resident).
   */
  readonly arrayBuffersInUseMiB: number | null;
}

/** PartitionAlloc's partition of ArrayBuffer contents. */
export const ARRAY_BUFFER_PARTITION = 'partition_alloc/partitions/array_buffer';

/**
 * The parts a renderer's memory is reported in: allocator paths whose sizes do not overlap. The
 * dump's top level counts some memory twice (`blink_objects` is a view of `blink_gc`, `v8/main/malloc`
 * lies inside `malloc`, `shared_memory` is shared with other processes), so the parts are picked, not
 * summed over every path. `partition_alloc` is split: its `array_buffer` partition holds ArrayBuffer
 * contents (media, packets), its `buffer` partition Blink's strings and vectors.
 */
export const MEMORY_PARTS: readonly {
  readonly name: string;
  readonly path: string;
  readonly what: string;
}[] = [
  { name: 'v8', path: 'v8', what: "V8's heaps: JS objects, compiled code, the read-only space" },
  {
    name: 'array buffers',
    path: ARRAY_BUFFER_PARTITION,
    what: 'ArrayBuffer contents (media and packets)',
  },
  { name: 'blink buffers', path: 'partition_alloc/partitions/buffer', what: "Blink's strings and vectors" },
  {
    name: 'malloc',
    path: 'malloc',
    what: 'native allocations (WebRTC, media pipeline, IPC, everything C++ outside Blink)',
  },
  { name: 'blink_gc', path: 'blink_gc', what: "Oilpan: Blink's garbage-collected DOM and API objects" },
  { name: 'web_cache', path: 'web_cache', what: "the renderer's cache of scripts and styles" },
  { name: 'parkable_strings', path: 'parkable_strings', what: 'script sources Blink may compress' },
  { name: 'cc', path: 'cc', what: 'the compositor' },
];

function mib(bytes: number): number {
  return bytes / 1048576;
}

function hexBytes(value: unknown): number | null {
  if (typeof value !== 'string') return null;
  const n = Number.parseInt(value, 16);
  return Number.isFinite(n) ? n : null;
}

function record(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : null;
}

/**
 * The process dumps of a memory-infra trace, one per process with allocators (the last of a
 * process if the trace holds several; memoryDumpOf's trace holds one, and its events' ids do not
 * match the guid `Tracing.requestMemoryDump` returns, so they are not filtered by it).
 */
export function processMemoryFromTrace(events: readonly TraceEvent[]): ProcessMemory[] {
  const names = new Map<number, string>();
  for (const e of events) {
    const name = record(e.args)?.name;
    if (e.ph === 'M' && e.name === 'process_name' && typeof name === 'string') names.set(e.pid, name);
  }
  // A process's allocators and its totals come as two events: the footprint is joined in at the end.
  const allocatorsByPid = new Map<number, Pick<ProcessMemory, 'partsMiB' | 'arrayBuffersInUseMiB'>>();
  const footprintByPid = new Map<number, number>();
  for (const e of events) {
    if (e.ph !== 'v') continue;
    const dumps = record(record(e.args)?.dumps);
    const footprint = hexBytes(record(dumps?.process_totals)?.private_footprint_bytes);
    if (footprint !== null) footprintByPid.set(e.pid, mib(footprint));
    const allocators = record(dumps?.allocators);
    if (allocators === null) continue;
    const attribute = (path: string, name: string): number | null =>
      hexBytes(record(record(record(allocators[path])?.attrs)?.[name])?.value);
    const partsMiB: Record<string, number> = {};
    for (const part of MEMORY_PARTS) partsMiB[part.name] = mib(attribute(part.path, 'size') ?? 0);
    const inUse = attribute(ARRAY_BUFFER_PARTITION, 'allocated_objects_size');
    allocatorsByPid.set(e.pid, { partsMiB, arrayBuffersInUseMiB: inUse === null ? null : mib(inUse) });
  }
  return [...allocatorsByPid].map(([pid, allocators]) => ({
    pid,
    processName: names.get(pid) ?? 'unknown',
    privateFootprintMiB: footprintByPid.get(pid) ?? null,
    ...allocators,
  }));
}

export interface MemoryByPart {
  /** Processes summed. */
  readonly processes: number;
  /** Σ private footprints ÷ per, MiB (null if any process lacked one). */
  readonly privateFootprintMiB: number | null;
  /** Σ of each part ÷ per, MiB, in MEMORY_PARTS order. */
  readonly partsMiB: Readonly<Record<string, number>>;
  /** Σ arrayBuffersInUseMiB ÷ per (null if any process lacked it): within `array buffers`. */
  readonly arrayBuffersInUseMiB: number | null;
  /**
   * privateFootprintMiB − Σ parts: stacks, code pages and what no allocator reports, less what the
   * allocators have committed but is not resident (parts are committed sizes), so it may be negative.
   */
  readonly otherMiB: number | null;
}

/**
 * The processes named `processName`, summed and divided by `per` (the viewer count: the benchmark's
 * memory per viewer is all renderers ÷ viewers). Null when the dump has no such process.
 */
export function memoryByPart(
  processes: readonly ProcessMemory[],
  processName: string,
  per: number,
): MemoryByPart | null {
  const chosen = processes.filter((p) => p.processName === processName);
  if (chosen.length === 0 || per <= 0) return null;
  const partsMiB: Record<string, number> = {};
  for (const part of MEMORY_PARTS)
    partsMiB[part.name] = chosen.reduce((a, p) => a + (p.partsMiB[part.name] ?? 0), 0) / per;
  const sumPer = (values: readonly (number | null)[]): number | null =>
    values.every((v): v is number => v !== null) ? values.reduce((a, v) => a + v, 0) / per : null;
  const privateFootprintMiB = sumPer(chosen.map((p) => p.privateFootprintMiB));
  const partsTotal = Object.values(partsMiB).reduce((a, b) => a + b, 0);
  return {
    processes: chosen.length,
    privateFootprintMiB,
    partsMiB,
    arrayBuffersInUseMiB: sumPer(chosen.map((p) => p.arrayBuffersInUseMiB)),
    otherMiB: privateFootprintMiB === null ? null : privateFootprintMiB - partsTotal,
  };
}
