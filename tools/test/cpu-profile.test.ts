import { SourceMapGenerator } from 'source-map-js';
import { describe, expect, it } from 'vitest';
import { profileMarkdown, summarizeProfile, type CpuProfile } from '../src/lib/cpu-profile.js';

const BUNDLE = 'http://127.0.0.1:8080/assets/index-abc.js';

/** A bundle whose line 1 is the wire codec's `decode`, line 2 the engine's `handle`, line 3 hls.js. */
function bundleMap(): ReturnType<SourceMapGenerator['toJSON']> {
  const gen = new SourceMapGenerator({ file: 'index-abc.js' });
  const add = (line: number, source: string, name: string): void => {
    gen.addMapping({
      generated: { line, column: 0 },
      original: { line: 10 * line, column: 0 },
      source,
      name,
    });
  };
  add(1, '../../packages/wire/src/codec.ts', 'decode');
  add(2, '../../packages/engine/src/engine.ts', 'handle');
  add(3, '../../node_modules/hls.js/dist/hls.mjs', 'onTick');
  return gen.toJSON();
}

const frame = (functionName: string, url = '', lineNumber = 0) => ({
  functionName,
  url,
  lineNumber,
  columnNumber: 0,
});

/** Samples 1 ms apart: each node id in `ids` is one sample (its time is the gap to the next). */
function profile(ids: number[]): CpuProfile {
  return {
    nodes: [
      { id: 1, callFrame: frame('(idle)') },
      { id: 2, callFrame: frame('a', BUNDLE, 0) },
      { id: 3, callFrame: frame('b', BUNDLE, 1) },
      { id: 4, callFrame: frame('c', BUNDLE, 2) },
      { id: 5, callFrame: frame('(garbage collector)') },
      { id: 6, callFrame: frame('x', 'http://127.0.0.1:8080/assets/other.js', 0) },
    ],
    startTime: 0,
    endTime: ids.length * 1000,
    samples: ids,
    timeDeltas: ids.map(() => 1000),
  };
}

describe('summarizeProfile', () => {
  it('sums self time by part, original file and function through the source map', () => {
    // The last sample has no successor, so it carries no time.
    const s = summarizeProfile(profile([1, 1, 2, 2, 2, 3, 4, 5, 6, 1]), (url) =>
      url === BUNDLE ? bundleMap() : null,
    );
    expect(s.profiledMs).toBe(9);
    expect(s.busyMs).toBe(7);
    const part = (name: string): number | undefined =>
      s.categories.find((c) => c.name.startsWith(name))?.selfMs;
    expect(part('idle')).toBe(2);
    expect(part('wire codec')).toBe(3);
    expect(part('engine')).toBe(1);
    expect(part('player')).toBe(1);
    expect(part('garbage collection')).toBe(1);
    expect(s.files[0]).toMatchObject({ name: 'packages/wire/src/codec.ts', selfMs: 3 });
    expect(s.functions.find((f) => f.name.startsWith('decode (line 10)'))?.selfMs).toBe(3);
    expect(s.unmapped).toEqual(['http://127.0.0.1:8080/assets/other.js']);
    expect(s.categories.reduce((a, c) => a + c.share, 0)).toBeCloseTo(1, 10);
    const md = profileMarkdown(s, 'viewer');
    expect(md).toContain('| wire codec (packages/wire) | 3 | 33.3% |');
    expect(md).toContain('Scripts without a source map (1)');
  });

  it('reads a profile with no samples as nothing busy', () => {
    const s = summarizeProfile({ nodes: [], startTime: 0, endTime: 0 }, () => null);
    expect(s).toMatchObject({ profiledMs: 0, busyMs: 0, categories: [], files: [], functions: [] });
  });
});
