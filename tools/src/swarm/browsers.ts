/**
 * A swarm of several browsers (`npm run swarm -- --browsers chromium:4,firefox:4`): which browser
 * each viewer runs in, and the media each browser-pair direction carried, from the viewers' own
 * per-link counts.
 */
import { UsageError } from '../lib/args.js';
import { BROWSER_NAMES, type BrowserName } from '../viewers/browser.js';
import type { ViewerSnapshot } from '../viewers/snapshot.js';

export interface BrowserCount {
  readonly browser: BrowserName;
  readonly viewers: number;
}

/** Parses `chromium:4,firefox:4` (a name alone means one viewer); throws UsageError on anything else. */
export function parseBrowserMix(spec: string): BrowserCount[] {
  const out: BrowserCount[] = [];
  for (const part of spec.split(',')) {
    const [name = '', countText = '1', ...rest] = part.trim().split(':');
    const browser = BROWSER_NAMES.find((b) => b === name);
    if (browser === undefined || rest.length > 0)
      throw new UsageError(
        `--browsers: "${part}" is not BROWSER[:COUNT] with BROWSER one of ${BROWSER_NAMES.join(', ')}`,
      );
    if (out.some((c) => c.browser === browser)) throw new UsageError(`--browsers: ${browser} is named twice`);
    const viewers = Number(countText);
    if (!Number.isInteger(viewers) || viewers < 1 || viewers > 64)
      throw new UsageError(
        `--browsers: the count of ${browser} must be a whole number 1‥64, got "${countText}"`,
      );
    out.push({ browser, viewers });
  }
  return out;
}

/**
 * The browser of each viewer, in opening order: the kinds taken in turn (c, f, c, f, …) so that
 * every kind joins from the start and the early trees mix them.
 */
export function interleave(mix: readonly BrowserCount[]): BrowserName[] {
  const left = mix.map((c) => ({ ...c }));
  const order: BrowserName[] = [];
  while (left.some((c) => c.viewers > 0))
    for (const c of left)
      if (c.viewers > 0) {
        order.push(c.browser);
        c.viewers--;
      }
  return order;
}

/** The sender of media a viewer did not get from another viewer: the tracker's true source. */
export const SOURCE = 'source';

/**
 * Media bytes carried per direction (`firefox→chromium`, `source→firefox`…), from every viewer's
 * per-link `mediaBytesReceived`. A link's count only grows while it lives, so each (receiver,
 * sender) link counts at its largest sample; the senders are told apart by the peer ids the
 * viewers reported: their own (by browser) and the true source's (`source`). Any other id (a
 * viewer's from before it rejoined) counts as `unknown`.
 */
export function bytesByDirection(
  series: readonly (readonly ViewerSnapshot[])[],
  browsers: readonly BrowserName[],
): Record<string, number> {
  const browserOfPeer = new Map<string, BrowserName>();
  let sourceId: string | null = null;
  series.forEach((samples, i) => {
    const browser = browsers[i];
    for (const s of samples) {
      const id = s.stats?.peerId;
      if (browser !== undefined && id !== null && id !== undefined) browserOfPeer.set(String(id), browser);
      const source = s.stats?.sourceId;
      if (source !== null && source !== undefined) sourceId = String(source);
    }
  });
  const out: Record<string, number> = {};
  series.forEach((samples, i) => {
    const receiver = browsers[i];
    if (receiver === undefined) return;
    const largest = new Map<string, number>();
    for (const s of samples)
      for (const link of s.stats?.peerLinks ?? []) {
        const bytes = link.mediaBytesReceived ?? 0;
        const key = String(link.peer);
        if (bytes > (largest.get(key) ?? 0)) largest.set(key, bytes);
      }
    for (const [peer, bytes] of largest) {
      const sender = peer === sourceId ? SOURCE : (browserOfPeer.get(peer) ?? 'unknown');
      const direction = `${sender}→${receiver}`;
      out[direction] = (out[direction] ?? 0) + bytes;
    }
  });
  return out;
}

/** The viewer-to-viewer directions a mix must show media on: every ordered pair of its browsers. */
export function crossDirections(mix: readonly BrowserCount[]): string[] {
  const out: string[] = [];
  for (const a of mix)
    for (const b of mix) if (a.browser !== b.browser) out.push(`${a.browser}→${b.browser}`);
  return out;
}
