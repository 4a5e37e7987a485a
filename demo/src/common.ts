// Small helpers both demo pages share: slice colours, number formatting, SVG elements.

/** M = 16 slices (Chunkyspread's default, and the SDK's). */
export const SLICES = 16;

const SVG_NS = 'http://www.w3.org/2000/svg';

/** One hue per slice, spread around the colour wheel so neighbouring slices differ. */
export function sliceColour(slice: number): string {
  return `hsl(${Math.round((slice * 360) / SLICES)}, 70%, 48%)`;
}

export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attributes: Record<string, string | number> = {},
  text?: string,
): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  if (bytes < 1024 * 1024 * 1024) return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  return `${(bytes / 1024 / 1024 / 1024).toFixed(2)} GiB`;
}

export function formatPercent(share: number): string {
  return `${(share * 100).toFixed(1)} %`;
}

export function formatMs(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return '–';
  return ms < 10_000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** Open links by route type, e.g. "host 3 · srflx 1 · relay 1" (types with none left out). */
export function formatRoutes(routes: Readonly<Record<string, number>>): string {
  const parts = Object.entries(routes)
    .filter(([, n]) => n > 0)
    .map(([route, n]) => `${route} ${n}`);
  return parts.length === 0 ? '–' : parts.join(' · ');
}

/** Fills a <dl> with term/value rows (replacing what was there). */
export function fillList(list: HTMLElement, rows: readonly (readonly [string, string])[]): void {
  const children: HTMLElement[] = [];
  for (const [term, value] of rows) {
    const dt = document.createElement('dt');
    dt.textContent = term;
    const dd = document.createElement('dd');
    dd.textContent = value;
    children.push(dt, dd);
  }
  list.replaceChildren(...children);
}

export function byId<T extends HTMLElement>(id: string, type: new () => T): T {
  const element = document.getElementById(id);
  if (!(element instanceof type)) throw new Error(`#${id} is missing from the page`);
  return element;
}

/** A short label for a peer id (the last digits are enough to tell a small swarm apart). */
export function peerLabel(peerId: number): string {
  return `#${peerId}`;
}

/** A colour/slice legend. */
export function sliceLegend(): HTMLElement {
  const legend = document.createElement('div');
  legend.className = 'legend';
  for (let slice = 0; slice < SLICES; slice++) {
    const item = document.createElement('span');
    item.style.setProperty('--slice', sliceColour(slice));
    item.textContent = String(slice);
    legend.append(item);
  }
  return legend;
}
