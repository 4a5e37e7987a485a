/** A stand-in packager for the live tests: writes a segment every SEGMENT_MS and the playlist after it, as ffmpeg does. */
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const SEGMENT_MS = 500;
export const SEGMENT_BYTES = 120_000;
const LIST_SIZE = 8;

export class FakePackager {
  readonly segments = new Map<number, Uint8Array>();
  private next = 0;
  private timer: ReturnType<typeof setInterval> | null = null;
  constructor(private readonly dir: string) {}

  start(): void {
    this.write();
    this.timer = setInterval(() => {
      this.write();
    }, SEGMENT_MS);
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
  }

  private write(): void {
    const seq = this.next++;
    const bytes = new Uint8Array(SEGMENT_BYTES);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 13 + seq * 101) & 0xff;
    this.segments.set(seq, bytes);
    writeFileSync(join(this.dir, `seg${seq}.ts`), bytes);
    const first = Math.max(0, seq - LIST_SIZE + 1);
    const lines = [
      '#EXTM3U',
      '#EXT-X-VERSION:3',
      '#EXT-X-TARGETDURATION:1',
      `#EXT-X-MEDIA-SEQUENCE:${first}`,
    ];
    for (let s = first; s <= seq; s++) lines.push(`#EXTINF:${SEGMENT_MS / 1000},`, `seg${s}.ts`);
    writeFileSync(join(this.dir, 'live.m3u8.tmp'), `${lines.join('\n')}\n`);
    // Rename is atomic: the tracker never serves half a playlist.
    renameSync(join(this.dir, 'live.m3u8.tmp'), join(this.dir, 'live.m3u8'));
  }
}

/**
 * Where two byte arrays first differ, or null when they are equal, in one native comparison.
 * vitest's toEqual walks a 120 kB array element by element: 0.4 s each, 13 of a live test's 28 s
 * in a profile, on the one event loop that also runs the tracker, the true source and the viewers
 * whose timing the test measures (under load, the viewers missed their deadlines and the test
 * failed on the origin's share).
 */
export function byteMismatch(
  actual: Uint8Array | null | undefined,
  expected: Uint8Array | undefined,
): string | null {
  if (actual === null || actual === undefined || expected === undefined)
    return `expected ${expected === undefined ? 'no bytes' : `${expected.length} bytes`}, got ${actual === null || actual === undefined ? String(actual) : `${actual.length} bytes`}`;
  const view = (x: Uint8Array): Buffer => Buffer.from(x.buffer, x.byteOffset, x.byteLength);
  if (view(actual).equals(view(expected))) return null;
  if (actual.length !== expected.length) return `length ${actual.length}, expected ${expected.length}`;
  const at = actual.findIndex((b, i) => b !== expected[i]);
  return `byte ${at} is ${actual[at]}, expected ${expected[at]}`;
}

/**
 * Waits at least `minMs` for the trees to form, and then until every session has a parent for every
 * slice (at most `maxMs` in all): the live tests measure the mesh once it has formed. Formation took
 * 1–4 s, but under a full run's worker start-up a viewer sometimes had parents for 3 slices after
 * 4 s and the window measured that instead. A swarm that never forms still fails, on the checks of
 * every slice's parent that follow.
 */
export async function afterTreesForm(
  sessions: readonly { stats(): { readonly slices: readonly { readonly parent: unknown }[] } }[],
  { minMs, maxMs }: { minMs: number; maxMs: number },
): Promise<void> {
  const until = Date.now() + maxMs;
  await new Promise((r) => setTimeout(r, minMs));
  while (
    Date.now() < until &&
    !sessions.every((s) => s.stats().slices.every((slice) => slice.parent !== null))
  )
    await new Promise((r) => setTimeout(r, 250));
}
