// The viewer page: one <mesh-player> configured from the query string, its stats, and a picture of
// where this viewer sits in each of the 16 slice trees.
import { MeshPlayer } from '@chunkycast/sdk';
import type { MeshPlayerErrorDetail, MeshPlayerStats, SliceView } from '@chunkycast/sdk';
import { injectFaults, parseFaultInjection } from '@chunkycast/sdk/testing';
import {
  SLICES,
  byId,
  fillList,
  formatBytes,
  formatMs,
  formatPercent,
  formatRoutes,
  peerLabel,
  sliceColour,
  sliceLegend,
  svg,
} from './common.js';

declare global {
  interface Window {
    /** For tests and the console: the page's player. */
    chunkycast: { player: MeshPlayer };
  }
}

const MAX_ERRORS_SHOWN = 50;

function defaultTracker(): string {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${location.host}/ws`;
}

function createPlayer(params: URLSearchParams): MeshPlayer {
  const player = document.createElement('mesh-player');
  if (!(player instanceof MeshPlayer)) throw new Error('<mesh-player> is not defined');
  player.setAttribute('src', params.get('src') ?? '/live/live.m3u8');
  player.setAttribute('tracker', params.get('tracker') ?? defaultTracker());
  player.setAttribute('stream', params.get('stream') ?? 'live');
  const optional: readonly (readonly [string, string])[] = [
    ['targetLoad', 'target-load'],
    ['maxLoad', 'max-load'],
    // Upload: `?uploadCapacity=fixed` uses the loads as given (no measurement), `?maxUploadKbps=500`
    // caps what this viewer uploads.
    ['uploadCapacity', 'upload-capacity'],
    ['maxUploadKbps', 'max-upload-kbps'],
    // `?upload=off` never forwards; `auto` (the default) stops on cellular, Save-Data or a low battery.
    ['upload', 'upload'],
    // Repair: `?packetRepair=engine` runs the engine's deadline-aware packet repair, `segment` the
    // session's repair of whole segments (issue 14: both measured in one run, e.g. npm run swarm's
    // --packet-repair split).
    ['packetRepair', 'packet-repair'],
    ['liveSync', 'live-sync'],
    // `?lowLatency=` (any value): LL-HLS, when the origin publishes parts (tracker --ll-hls).
    ['lowLatency', 'low-latency'],
    ['publicKey', 'public-key'],
    // A viewer join token, when the tracker demands them (`chunkycast-tracker token`).
    ['token', 'token'],
    // STUN/TURN servers overriding the tracker's, as JSON (`?iceServers=[{"urls":"stun:…"}]`, URL-
    // encoded), and `?icePolicy=relay` to force every link through TURN.
    ['iceServers', 'ice-servers'],
    ['icePolicy', 'ice-transport-policy'],
  ];
  for (const [param, attribute] of optional) {
    const value = params.get(param);
    if (value !== null) player.setAttribute(attribute, value);
  }
  // For the end-to-end tests only, through the SDK's internal test hook (not an attribute):
  // ?fault=corrupt-forwarded makes this viewer a liar, forge-forwarded a sequence forger,
  // withhold-forwarded a withholder, and drop-received:0.05 loses 5% of the media arriving on each
  // of its data channels. Set before the player joins the page, so its first session has them.
  const fault = params.get('fault');
  const faults = parseFaultInjection(fault);
  if (faults === null)
    showError({
      code: 'config',
      message: `fault="${fault ?? ''}" is unknown (corrupt-forwarded, forge-forwarded, withhold-forwarded or drop-received:<0–1>); ignored`,
    });
  else if (faults !== undefined) injectFaults(player, faults);
  for (const flag of ['autoplay', 'muted', 'controls']) player.setAttribute(flag, '');
  return player;
}

/** Why the mesh is off, for people (MeshPlayerStats.meshOffReason). */
const MESH_OFF_REASONS: Readonly<Record<NonNullable<MeshPlayerStats['meshOffReason']>, string>> = {
  'no-webrtc': 'this browser has no WebRTC',
  'no-mse': 'this browser plays HLS itself',
  config: 'see the errors below',
};

function showStats(stats: MeshPlayerStats): void {
  byId('share-fill', HTMLDivElement).style.width = `${(stats.meshShare * 100).toFixed(1)}%`;
  byId('share-text', HTMLSpanElement).textContent = formatPercent(stats.meshShare);
  fillList(byId('stats', HTMLElement), [
    [
      'mesh',
      stats.meshEnabled
        ? stats.trackerConnected
          ? 'joined'
          : 'connecting…'
        : `off (origin only${stats.meshOffReason === null ? '' : `: ${MESH_OFF_REASONS[stats.meshOffReason]}`})`,
    ],
    ['peer id', stats.peerId === null ? '–' : peerLabel(stats.peerId)],
    ['from mesh', `${formatBytes(stats.bytesFromMesh)} · ${stats.segmentsFromMesh} segments`],
    [
      'from origin',
      `${formatBytes(stats.bytesFromOrigin)} · ${stats.segmentsFromOrigin} segments` +
        (stats.partsFromOrigin + stats.partsFromMesh > 0
          ? ` · parts ${stats.partsFromMesh} mesh / ${stats.partsFromOrigin} origin`
          : ''),
    ],
    ['uploaded', formatBytes(stats.uploadBytes)],
    ['peers', String(stats.peers)],
    ['routes', formatRoutes(stats.peersByRoute)],
    ['relayed (TURN)', formatBytes(stats.relayedBytes)],
    ['failed connections', String(stats.connectFailures)],
    ['load / TL (ML)', `${stats.load} / ${stats.targetLoad} (${stats.maxLoad})`],
    [
      'upload',
      `${stats.upload}${stats.receiveOnlyReasons.length > 0 ? `: receive-only (${stats.receiveOnlyReasons.join(', ')})` : ''}`,
    ],
    [
      'upload capacity',
      `${stats.uploadCapacityKbps === null ? '–' : `${stats.uploadCapacityKbps} kbit/s`} (${stats.uploadCapacitySource})`,
    ],
    ['stalls', `${stats.stalls} · ${formatMs(stats.stallMs)}`],
    ['live delay', formatMs(stats.liveDelayMs)],
    ['buffer ahead', formatMs(stats.bufferAheadMs)],
    ['verification failures', String(stats.verificationFailures)],
  ]);
  drawMyTrees(byId('trees', HTMLDivElement), stats.slices, stats.peerId);
}

const WIDTH = 760;
const HEIGHT = 250;
const PARENT_Y = 40;
const ME_Y = 125;
const CHILD_Y = 210;
const ME_LEFT = 140;
const PORT_SPACING = (WIDTH - 2 * ME_LEFT) / SLICES;

/** Evenly spread x positions for `count` nodes across the picture. */
function spread(count: number): (index: number) => number {
  return (index) => ((index + 0.5) * WIDTH) / Math.max(count, 1);
}

function curve(x1: number, y1: number, x2: number, y2: number, colour: string): SVGPathElement {
  const midY = (y1 + y2) / 2;
  return svg('path', {
    d: `M${x1},${y1} C${x1},${midY} ${x2},${midY} ${x2},${y2}`,
    fill: 'none',
    stroke: colour,
    'stroke-width': 2,
    opacity: 0.85,
  });
}

function peerNode(x: number, y: number, peerId: number): SVGGElement {
  const group = svg('g');
  group.append(svg('circle', { cx: x, cy: y, r: 13, class: 'node' }));
  group.append(svg('text', { x, y: y + 4, 'text-anchor': 'middle' }, peerLabel(peerId)));
  return group;
}

// Parents on top, this viewer in the middle with one port per slice, children below: the same
// peer serving several slices is drawn once, with one coloured edge per slice.
function drawMyTrees(container: HTMLElement, slices: readonly SliceView[], me: number | null): void {
  const picture = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img' });
  picture.append(svg('title', {}, 'parents and children of this viewer in each slice tree'));
  const parents = [...new Set(slices.flatMap((view) => (view.parent === null ? [] : [view.parent])))];
  const children = [...new Set(slices.flatMap((view) => view.children))];
  const parentX = spread(parents.length);
  const childX = spread(children.length);
  const portX = (slice: number): number => ME_LEFT + (slice + 0.5) * PORT_SPACING;

  const edges = svg('g');
  for (const view of slices) {
    const colour = sliceColour(view.slice);
    if (view.parent !== null) {
      edges.append(
        curve(parentX(parents.indexOf(view.parent)), PARENT_Y, portX(view.slice), ME_Y - 12, colour),
      );
    }
    for (const child of view.children) {
      edges.append(curve(portX(view.slice), ME_Y + 12, childX(children.indexOf(child)), CHILD_Y, colour));
    }
  }
  picture.append(edges);

  picture.append(
    svg('rect', {
      x: ME_LEFT - 6,
      y: ME_Y - 12,
      width: WIDTH - 2 * ME_LEFT + 12,
      height: 24,
      rx: 12,
      class: 'node me',
    }),
  );
  for (let slice = 0; slice < SLICES; slice++) {
    const view = slices.find((candidate) => candidate.slice === slice);
    const attached = view !== undefined && view.parent !== null;
    picture.append(
      svg('circle', {
        cx: portX(slice),
        cy: ME_Y,
        r: 6,
        fill: attached ? sliceColour(slice) : 'none',
        stroke: sliceColour(slice),
        'stroke-width': 2,
      }),
    );
  }
  picture.append(
    svg(
      'text',
      { x: ME_LEFT - 14, y: ME_Y + 4, 'text-anchor': 'end' },
      me === null ? 'me' : `me ${peerLabel(me)}`,
    ),
  );
  parents.forEach((peer, index) => {
    picture.append(peerNode(parentX(index), PARENT_Y, peer));
  });
  children.forEach((peer, index) => {
    picture.append(peerNode(childX(index), CHILD_Y, peer));
  });
  if (slices.length === 0) {
    picture.append(
      svg(
        'text',
        { x: WIDTH / 2, y: PARENT_Y, 'text-anchor': 'middle' },
        'not in any tree yet (origin only)',
      ),
    );
  }
  container.replaceChildren(picture, sliceLegend());
}

function showError(detail: MeshPlayerErrorDetail): void {
  const list = byId('errors', HTMLUListElement);
  if (list.querySelector('.muted') !== null) list.replaceChildren();
  const item = document.createElement('li');
  item.textContent = `${new Date().toLocaleTimeString()} [${detail.code}] ${detail.message}`;
  list.prepend(item);
  while (list.children.length > MAX_ERRORS_SHOWN) list.lastElementChild?.remove();
}

const player = createPlayer(new URLSearchParams(location.search));
player.addEventListener('stats', (event) => {
  if (event instanceof CustomEvent) showStats(event.detail as MeshPlayerStats);
});
player.addEventListener('error', (event) => {
  if (event instanceof CustomEvent) showError(event.detail as MeshPlayerErrorDetail);
});
byId('player-box', HTMLElement).append(player);
window.chunkycast = { player };
showStats(player.stats);
