/**
 * Where a page's CPU goes: a V8 CPU profile (Chromium's `Profiler.stop`) summed by self time per
 * original source file and function, through the bundle's source maps, and grouped into the parts
 * of a viewer (hashing, codec, engine, SDK, data channel, player, browser). Issue 17.
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { SourceMapConsumer, type RawSourceMap } from 'source-map-js';

/** The parts of a V8 `.cpuprofile` read here (Chrome DevTools Protocol `Profiler.Profile`). */
export interface CpuProfile {
  readonly nodes: readonly {
    readonly id: number;
    readonly callFrame: {
      readonly functionName: string;
      readonly url: string;
      /** 0-based, as V8 gives them. */
      readonly lineNumber: number;
      readonly columnNumber: number;
    };
  }[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples?: readonly number[];
  /** µs between a sample and the one before it. */
  readonly timeDeltas?: readonly number[];
}

export interface ProfileRow {
  readonly name: string;
  readonly selfMs: number;
  /** Of all sampled time, idle included. */
  readonly share: number;
}

export interface ProfileSummary {
  readonly profiledMs: number;
  /** Sampled time not idle: what the page's main thread was busy with. */
  readonly busyMs: number;
  readonly categories: readonly ProfileRow[];
  readonly files: readonly ProfileRow[];
  readonly functions: readonly ProfileRow[];
  /** Frames of bundles whose source map was not found (their time is under the bundle's name). */
  readonly unmapped: readonly string[];
}

/** Scripts without a source map named in the Markdown (a Node profile has hundreds). */
const UNMAPPED_LISTED = 8;

/** A profile frame's origin: where it comes from in our sources or in a dependency. */
interface Origin {
  readonly file: string;
  readonly fn: string;
}

/**
 * The viewer's parts, first match wins, by original source path (after the source map) or V8's
 * pseudo-frames. Paths are matched as substrings so that both `../packages/wire/src/x.ts` and
 * `/abs/node_modules/hls.js/…` work.
 */
const CATEGORIES: readonly (readonly [string, (o: Origin) => boolean])[] = [
  ['idle', (o) => o.fn === '(idle)'],
  ['garbage collection', (o) => o.fn === '(garbage collector)'],
  ['browser (program: rendering, layout, native work outside JS)', (o) => o.fn === '(program)'],
  ['hashing (SHA-256 in JS)', (o) => o.file.includes('@noble/hashes')],
  [
    'signatures (Ed25519 in JS)',
    (o) => o.file.includes('@noble/curves') || o.file.includes('@noble/ed25519'),
  ],
  ['wire codec (packages/wire)', (o) => o.file.includes('packages/wire/')],
  ['engine (packages/engine)', (o) => o.file.includes('packages/engine/')],
  [
    'data channel glue (simple-peer, events, SDK transport)',
    (o) => /simple-peer|node_modules\/events\/|sdk\/src\/(transport|peer|rtc)/.test(o.file),
  ],
  ['player (hls.js)', (o) => o.file.includes('hls.js')],
  ['SDK (sdk/src)', (o) => o.file.includes('sdk/src/')],
  ['demo page', (o) => o.file.includes('demo/')],
  ['other dependencies', (o) => o.file.includes('node_modules/')],
  ['native functions (WebCrypto, DOM, typed arrays)', (o) => o.file === ''],
];

/**
 * Sums a profile's samples by self time. `mapFor(url)` gives a script's source map (or null);
 * `unmapped` lists bundles without one.
 */
export function summarizeProfile(
  profile: CpuProfile,
  mapFor: (url: string) => RawSourceMap | null,
  top = 25,
): ProfileSummary {
  const consumers = new Map<string, SourceMapConsumer | null>();
  const unmapped = new Set<string>();
  const originOf = new Map<number, Origin>();
  for (const node of profile.nodes) {
    const { url, functionName, lineNumber, columnNumber } = node.callFrame;
    if (url === '') {
      originOf.set(node.id, { file: '', fn: functionName === '' ? '(anonymous)' : functionName });
      continue;
    }
    let consumer = consumers.get(url);
    if (consumer === undefined) {
      const raw = mapFor(url);
      consumer = raw === null ? null : new SourceMapConsumer(raw);
      consumers.set(url, consumer);
      if (consumer === null) unmapped.add(url);
    }
    const pos = consumer?.originalPositionFor({ line: lineNumber + 1, column: columnNumber });
    const file = pos?.source ?? url;
    // A minified bundle keeps method names but renames functions: prefer the name in the map.
    const fn = pos?.name ?? (functionName === '' ? '(anonymous)' : functionName);
    originOf.set(node.id, { file, fn: pos?.line == null ? fn : `${fn} (line ${pos.line})` });
  }
  const selfUs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  // A sample's time is the gap to the next one (the last sample gets the profile's end).
  for (let i = 0; i < samples.length; i++) {
    const id = samples[i] as number;
    const next = i + 1 < deltas.length ? (deltas[i + 1] ?? 0) : 0;
    selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, next));
  }
  const byCategory = new Map<string, number>();
  const byFile = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let totalUs = 0;
  let idleUs = 0;
  for (const [id, us] of selfUs) {
    const o = originOf.get(id) ?? { file: '?', fn: '?' };
    totalUs += us;
    const category = CATEGORIES.find(([, test]) => test(o))?.[0] ?? 'other';
    if (category === 'idle') idleUs += us;
    byCategory.set(category, (byCategory.get(category) ?? 0) + us);
    // V8's pseudo-frames ((idle), (program), (garbage collector)) stand for themselves.
    const file = o.file !== '' ? shortPath(o.file) : o.fn.startsWith('(') ? o.fn : '(native)';
    byFile.set(file, (byFile.get(file) ?? 0) + us);
    const fn = `${o.fn} — ${file}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
  }
  const rows = (m: Map<string, number>, limit: number): ProfileRow[] =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([name, us]) => ({ name, selfMs: us / 1000, share: totalUs > 0 ? us / totalUs : 0 }));
  return {
    profiledMs: totalUs / 1000,
    busyMs: (totalUs - idleUs) / 1000,
    categories: rows(byCategory, Infinity),
    files: rows(byFile, top),
    functions: rows(byFunction, top),
    unmapped: [...unmapped],
  };
}

/** A source path from its package on: `node_modules/hls.js/…`, `packages/wire/src/…`, `sdk/src/…`. */
function shortPath(path: string): string {
  const nm = path.lastIndexOf('node_modules/');
  if (nm >= 0) return path.slice(nm);
  const ours = /(packages\/[^/]+\/src\/.*|sdk\/src\/.*|demo\/.*|tracker\/src\/.*)$/.exec(path);
  return ours?.[1] ?? path;
}

/**
 * Source maps of a Vite build on disk: a script URL `…/assets/x.js` maps to `dir/assets/x.js.map`
 * (null when there is none: the build ran without `sourcemap`).
 */
export function sourceMapsIn(distDir: string): (url: string) => RawSourceMap | null {
  return (url) => {
    let name: string;
    try {
      name = basename(new URL(url).pathname);
    } catch {
      return null;
    }
    const path = join(distDir, 'assets', `${name}.map`);
    if (!existsSync(path)) return null;
    return JSON.parse(readFileSync(path, 'utf8')) as RawSourceMap;
  };
}

/** The summary as Markdown: the parts, then the busiest files and functions. */
export function profileMarkdown(s: ProfileSummary, title: string): string {
  const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;
  const table = (head: string, rows: readonly ProfileRow[]): string[] => [
    `| ${head} | self ms | share |`,
    '|---|---:|---:|',
    ...rows.map((r) => `| ${r.name.replaceAll('|', '\\|')} | ${r.selfMs.toFixed(0)} | ${pct(r.share)} |`),
  ];
  return [
    `## ${title}`,
    '',
    `Profiled ${(s.profiledMs / 1000).toFixed(1)} s of the page's main thread, busy ${(s.busyMs / 1000).toFixed(1)} s ` +
      `(${pct(s.profiledMs > 0 ? s.busyMs / s.profiledMs : 0)}). Self time: each sample counts for the ` +
      'function running, not its callers. Workers and the GPU and network processes are not in it.',
    '',
    ...table('part', s.categories),
    '',
    ...table('source file', s.files),
    '',
    ...table('function', s.functions),
    ...(s.unmapped.length > 0
      ? [
          '',
          `Scripts without a source map (${s.unmapped.length}): ${s.unmapped.slice(0, UNMAPPED_LISTED).join(', ')}` +
            (s.unmapped.length > UNMAPPED_LISTED ? ', …' : ''),
        ]
      : []),
    '',
  ].join('\n');
}
