// The broadcaster console: polls the tracker's debug endpoints and draws the whole swarm.
import { SLICES, byId, fillList, formatBytes, formatPercent, peerLabel, sliceColour, svg } from './common.js';
import { readOrigin, readSwarm } from './swarm.js';
import type { MemberView, OriginView, SwarmView } from './swarm.js';

const POLL_INTERVAL_MS = 2000;
/** A poll slower than this is abandoned: the next one will try again. */
const POLL_TIMEOUT_MS = 1800;

const stream = new URLSearchParams(location.search).get('stream') ?? 'live';

const KEY_STORAGE = 'chunkycast-broadcaster-key';

/**
 * The tracker's /debug/* views need the broadcaster key. It comes in the URL fragment (`#key=…`,
 * never sent to any server), is kept for this tab only, and is taken out of the address bar so it
 * does not end up in a screenshot or a shared link.
 */
function broadcasterKey(): string | null {
  const fromFragment = new URLSearchParams(location.hash.slice(1)).get('key');
  if (fromFragment !== null && fromFragment !== '') {
    sessionStorage.setItem(KEY_STORAGE, fromFragment);
    history.replaceState(null, '', location.pathname + location.search);
    return fromFragment;
  }
  return sessionStorage.getItem(KEY_STORAGE);
}

const key = broadcasterKey();

async function getJson(path: string): Promise<unknown> {
  const response = await fetch(path, {
    signal: AbortSignal.timeout(POLL_TIMEOUT_MS),
    cache: 'no-store',
    headers: key === null ? {} : { Authorization: `Bearer ${key}` },
  });
  if (response.status === 401)
    throw new Error(
      key === null
        ? 'the tracker wants the broadcaster key: open this page as broadcaster.html#key=<broadcaster key>'
        : 'the tracker refused this broadcaster key',
    );
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return (await response.json()) as unknown;
}

function showSwarm(swarm: SwarmView): void {
  byId('stream-name', HTMLSpanElement).textContent = swarm.stream;
  const attached = swarm.viewers.map((viewer) => viewer.parents.filter((parent) => parent !== null).length);
  const complete = attached.filter((count) => count === SLICES).length;
  fillList(byId('swarm', HTMLElement), [
    ['viewers', String(swarm.viewers.length)],
    [
      'true source',
      swarm.sourceConnected
        ? `connected ${swarm.sourceId === null ? '' : peerLabel(swarm.sourceId)}`
        : 'not connected',
    ],
    ['in all 16 trees', `${complete} of ${swarm.viewers.length}`],
    ['reports', `${swarm.viewers.filter((viewer) => viewer.reported).length} of ${swarm.viewers.length}`],
    ['segments announced', swarm.announcements === null ? '–' : String(swarm.announcements)],
  ]);

  const sliceSources = byId('slice-sources', HTMLDivElement);
  const cells: HTMLElement[] = [];
  for (let slice = 0; slice < SLICES; slice++) {
    const cell = document.createElement('div');
    cell.style.setProperty('--slice', sliceColour(slice));
    const children = swarm.source?.children[slice] ?? [];
    cell.textContent = `${slice}: ${children.length === 0 ? '–' : children.map(peerLabel).join(' ')}`;
    cells.push(cell);
  }
  sliceSources.replaceChildren(...cells);

  const trees = byId('trees', HTMLDivElement);
  const panels: Element[] = [];
  for (let slice = 0; slice < SLICES; slice++) panels.push(drawTree(swarm, slice));
  trees.replaceChildren(...panels);
}

const TREE_WIDTH = 240;
const TREE_LEVEL_HEIGHT = 34;
const TREE_TOP = 24;
const MIN_LABEL_SPACING = 30;

/** One slice's tree, laid out by depth from the true source; members with no parent go last. */
function drawTree(swarm: SwarmView, slice: number): SVGSVGElement {
  const rootId = swarm.sourceId;
  const childrenOf = new Map<number, number[]>();
  for (const member of swarm.viewers) {
    const parent = member.parents[slice] ?? null;
    if (parent === null) continue;
    const siblings = childrenOf.get(parent) ?? [];
    siblings.push(member.peerId);
    childrenOf.set(parent, siblings);
  }
  // Breadth-first from the source; `placed` guards against a loop in stale reports.
  const levels: number[][] = [];
  const placed = new Set<number>();
  let frontier = rootId === null ? [] : [rootId];
  while (frontier.length > 0) {
    levels.push(frontier);
    for (const id of frontier) placed.add(id);
    frontier = frontier.flatMap((id) => (childrenOf.get(id) ?? []).filter((child) => !placed.has(child)));
  }
  const orphans = swarm.viewers.map((member) => member.peerId).filter((id) => !placed.has(id));
  if (orphans.length > 0) levels.push(orphans);

  const height = TREE_TOP + Math.max(levels.length, 1) * TREE_LEVEL_HEIGHT;
  const position = new Map<number, { x: number; y: number }>();
  levels.forEach((level, depth) => {
    level.forEach((id, index) => {
      position.set(id, {
        x: ((index + 0.5) * TREE_WIDTH) / level.length,
        y: TREE_TOP + depth * TREE_LEVEL_HEIGHT + 6,
      });
    });
  });

  const colour = sliceColour(slice);
  const picture = svg('svg', { viewBox: `0 0 ${TREE_WIDTH} ${height}`, role: 'img' });
  picture.append(
    svg('rect', { x: 0.5, y: 0.5, width: TREE_WIDTH - 1, height: height - 1, rx: 6, class: 'frame' }),
  );
  picture.append(svg('text', { x: 8, y: 15, fill: colour }, `slice ${slice}`));
  for (const member of swarm.viewers) {
    const parent = member.parents[slice] ?? null;
    const from = parent === null ? undefined : position.get(parent);
    const to = position.get(member.peerId);
    if (from === undefined || to === undefined || !placed.has(member.peerId)) continue;
    picture.append(
      svg('line', { x1: from.x, y1: from.y, x2: to.x, y2: to.y, stroke: colour, 'stroke-width': 2 }),
    );
  }
  const orphanSet = new Set(orphans);
  const levelWidth = new Map<number, number>();
  for (const level of levels) for (const id of level) levelWidth.set(id, level.length);
  for (const [id, { x, y }] of position) {
    const kind = id === rootId ? 'node source' : orphanSet.has(id) ? 'node orphan' : 'node';
    picture.append(svg('circle', { cx: x, cy: y, r: 5, class: kind }));
    // Labels only where they fit; a crowded level is still readable as a shape.
    if (TREE_WIDTH / (levelWidth.get(id) ?? 1) >= MIN_LABEL_SPACING) {
      picture.append(svg('text', { x, y: y + 16, 'text-anchor': 'middle', 'font-size': 9 }, peerLabel(id)));
    }
  }
  return picture;
}

function showOrigin(origin: OriginView): void {
  const source = origin.sourceBytes ?? 0;
  const viewers = origin.viewerBytes ?? 0;
  const total = source + viewers;
  const bars = byId('origin-bars', HTMLDivElement);
  const sourceBar = document.createElement('div');
  sourceBar.className = 'source';
  sourceBar.style.width = total === 0 ? '0' : `${(source / total) * 100}%`;
  const viewerBar = document.createElement('div');
  viewerBar.className = 'viewers';
  viewerBar.style.width = total === 0 ? '0' : `${(viewers / total) * 100}%`;
  bars.replaceChildren(sourceBar, viewerBar);
  fillList(byId('origin', HTMLElement), [
    ['to the true source', origin.sourceBytes === null ? '–' : formatBytes(source)],
    ['to viewers (fallback)', origin.viewerBytes === null ? '–' : formatBytes(viewers)],
    ['viewers’ share', total === 0 ? '–' : formatPercent(viewers / total)],
  ]);
}

function describe(members: readonly MemberView[]): string {
  return `${members.length} member${members.length === 1 ? '' : 's'}`;
}

async function poll(): Promise<void> {
  const status = byId('status', HTMLParagraphElement);
  const [swarm, origin] = await Promise.allSettled([
    getJson(`./debug/swarm/${encodeURIComponent(stream)}`),
    getJson('./debug/origin'),
  ]);
  const problems: string[] = [];
  if (swarm.status === 'fulfilled') {
    const view = readSwarm(swarm.value, stream);
    showSwarm(view);
    problems.push(`swarm: ${describe(view.viewers)}`);
  } else problems.push(`swarm poll failed: ${String(swarm.reason)}`);
  if (origin.status === 'fulfilled') showOrigin(readOrigin(origin.value));
  else problems.push(`origin poll failed: ${String(origin.reason)}`);
  status.textContent = `${new Date().toLocaleTimeString()} · ${problems.join(' · ')}`;
}

function loop(): void {
  poll()
    .catch((error: unknown) => {
      byId('status', HTMLParagraphElement).textContent = `poll failed: ${String(error)}`;
    })
    .finally(() => {
      setTimeout(loop, POLL_INTERVAL_MS);
    });
}

loop();
