/**
 * The lab's report: DIR/report.md (the table) and DIR/links.svg (who connected to whom, coloured
 * by route type), from result.json's object.
 */
import type { LabResult } from './run.js';

export const ROUTE_COLOURS: Readonly<Record<string, string>> = {
  host: '#2e7d32',
  srflx: '#1565c0',
  prflx: '#6a1b9a',
  relay: '#ef6c00',
  unknown: '#9e9e9e',
};

const XML_ENTITIES: Readonly<Record<string, string>> = {
  '<': '&lt;',
  '>': '&gt;',
  '&': '&amp;',
  '"': '&quot;',
  "'": '&#39;',
};
const escapeXml = (s: string): string => s.replace(/[<>&"']/g, (c) => XML_ENTITIES[c] ?? c);

/** Viewers on a circle around the true source; one line per link, coloured by its route type. */
export function linksSvg(result: LabResult): string {
  const width = 720;
  const height = 560;
  const cx = 330;
  const cy = 280;
  const radius = 210;
  const pos = new Map([['source', { x: cx, y: cy }]]);
  result.viewers.forEach((v, i) => {
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / result.viewers.length;
    pos.set(v.name, { x: cx + radius * Math.cos(angle), y: cy + radius * Math.sin(angle) });
  });
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="12" y="20" font-size="14">${escapeXml(`lab: ${result.scenario} — peer links made during the run, by route type`)}</text>`,
  ];
  for (const e of result.edges) {
    const a = pos.get(e.a);
    const b = pos.get(e.b);
    if (a === undefined || b === undefined) continue;
    const colour = ROUTE_COLOURS[e.route] ?? ROUTE_COLOURS.unknown ?? 'grey';
    const dash = e.route === 'relay' ? ' stroke-dasharray="6 4"' : '';
    parts.push(
      `<line x1="${a.x.toFixed(1)}" y1="${a.y.toFixed(1)}" x2="${b.x.toFixed(1)}" y2="${b.y.toFixed(1)}" stroke="${colour}" stroke-width="2.5"${dash}><title>${escapeXml(`${e.a} – ${e.b}: ${e.route}`)}</title></line>`,
    );
  }
  const node = (name: string, label: string, sub: string, fill: string): void => {
    const p = pos.get(name);
    if (p === undefined) return;
    parts.push(
      `<circle cx="${p.x.toFixed(1)}" cy="${p.y.toFixed(1)}" r="22" fill="${fill}" stroke="#333"/>`,
      `<text x="${p.x.toFixed(1)}" y="${(p.y + 4).toFixed(1)}" text-anchor="middle" font-weight="bold">${escapeXml(label)}</text>`,
      `<text x="${p.x.toFixed(1)}" y="${(p.y + 36).toFixed(1)}" text-anchor="middle" fill="#333">${escapeXml(sub)}</text>`,
    );
  };
  node('source', 'S', 'true source (public)', '#fff59d');
  const natFill: Readonly<Record<string, string>> = {
    'port-preserving': '#bbdefb',
    symmetric: '#ffcdd2',
    lan: '#c8e6c9',
    public: '#fff9c4',
  };
  for (const v of result.viewers)
    node(v.name, v.name, `${v.nat}, ${(v.uplinkKbps / 1000).toFixed(1)} Mbit/s up`, natFill[v.nat] ?? '#eee');
  let y = height - 20 - 18 * Object.keys(ROUTE_COLOURS).length;
  for (const [route, colour] of Object.entries(ROUTE_COLOURS)) {
    parts.push(
      `<line x1="${width - 150}" y1="${y}" x2="${width - 110}" y2="${y}" stroke="${colour}" stroke-width="3"${route === 'relay' ? ' stroke-dasharray="6 4"' : ''}/>`,
      `<text x="${width - 100}" y="${y + 4}">${route}</text>`,
    );
    y += 18;
  }
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

type Figure = number | null | undefined;
const pct = (x: Figure): string => (x === null || x === undefined ? '—' : `${(100 * x).toFixed(1)}%`);
const ms = (x: Figure): string =>
  x === null || x === undefined ? '—' : x >= 10_000 ? `${(x / 1000).toFixed(1)} s` : `${Math.round(x)} ms`;
const kib = (x: Figure): string => (x === null || x === undefined ? '—' : `${(x / 1024).toFixed(0)} KiB`);
const num = (x: Figure, d = 2): string => (x === null || x === undefined ? '—' : x.toFixed(d));

/** Goals of the issue for `mixed` (and what the other scenarios are compared by). */
export function goals(result: LabResult): [string, boolean, string][] {
  if (result.scenario !== 'mixed') return [];
  return [
    ['mesh share ≥ 90%', result.meshShare >= 0.9, pct(result.meshShare)],
    [
      '≤ 1.3 stream copies from the origin',
      result.streamCopiesFromOrigin !== null && result.streamCopiesFromOrigin <= 1.3,
      num(result.streamCopiesFromOrigin),
    ],
    ['0 stalls', result.stalls === 0, String(result.stalls)],
    [
      'every viewer linked to ≥ 3 peers (minimum over the second half)',
      result.minPeers >= 3,
      String(result.minPeers),
    ],
    [
      'symmetric-NAT viewers reach the mesh through TURN',
      result.symmetricViewersViaRelay === result.symmetricViewers,
      `${result.symmetricViewersViaRelay} of ${result.symmetricViewers}`,
    ],
    [
      'TURN-relayed bytes ≤ 15% of mesh bytes',
      (result.relayedShareOfMesh ?? 0) <= 0.15,
      pct(result.relayedShareOfMesh),
    ],
    [
      'no viewer above 90% of its uplink cap for more than 2 s',
      result.viewersSaturatedOver2s.length === 0,
      result.viewersSaturatedOver2s.length === 0 ? 'none' : result.viewersSaturatedOver2s.join(', '),
    ],
  ];
}

export function reportMarkdown(result: LabResult): string {
  const g = goals(result);
  const rows = result.viewers.map((v) => {
    const routes = ['host', 'srflx', 'prflx', 'relay']
      .map((r): [string, number] => [r, v.links.filter((l) => l.route === r).length])
      .filter(([, n]) => n > 0)
      .map(([r, n]) => `${r} ${n}`)
      .join(', ');
    return `| ${v.name} | ${v.nat} | ${(v.uplinkKbps / 1000).toFixed(1)} | ${v.peers} (min ${v.peersMinSecondHalf}) | ${routes || '—'} | ${pct(v.meshShare)} | ${v.stalls ?? '—'}${v.stallsAtS.length > 0 ? ` (at ${v.stallsAtS.map((t) => `${t} s`).join(', ')})` : ''} | ${kib(v.mediaUploadBytes)} | ${kib(v.uplinkBytes)} | ${(v.peakUploadKbps1s / 1000).toFixed(2)} (${pct(v.peakUploadShareOfCap)}) | ${ms(v.longestAbove90PctMs)} | ${v.uploadCapacityKbps === null ? '—' : (v.uploadCapacityKbps / 1000).toFixed(2)} | ${v.targetLoad ?? '—'}/${v.maxLoad ?? '—'} | ${v.load ?? '—'} | ${ms(v.startupMs)} |`;
  });
  return `# Lab: ${result.scenario}

${result.description}. ${result.durationS} s after the last viewer opened; capacity ${result.capacity === 'fixed' ? 'fixed by attributes' : 'measured'}; ICE servers: ${result.ice}.
Network: every viewer in its own network namespace with its own Chromium, behind its own nftables NAT
router (or on the public segment ${result.network.publicSegment}); uplinks and downlinks capped with \`tc tbf\`.
**No delay or loss is emulated** (\`netem\` is not in this kernel): every link has sub-millisecond latency.

| figure | value |
|---|---|
| mesh share (Σ mesh bytes ÷ Σ media bytes, viewers) | ${pct(result.meshShare)} |
| … over the second half of the window | ${pct(result.meshShareSecondHalf)} |
| stream copies from the origin (true source's ingest included) | ${num(result.streamCopiesFromOrigin)} |
| … of which to viewers | ${num(result.streamCopiesFromOriginToViewers)} |
| stalls (total time) | ${result.stalls} (${ms(result.stallMs)}) |
| startup p50 / p95 (page open → playing) | ${ms(result.startupMsP50)} / ${ms(result.startupMsP95)} |
| live delay p95 | ${ms(result.liveDelayMsP95)} |
| TURN-relayed bytes (share of mesh bytes) | ${kib(result.relayedBytes)} (${pct(result.relayedShareOfMesh)}) |
| TURN allocations (coturn) | ${result.turnAllocations} |
| fewest peers of any viewer (second half) | ${result.minPeers} |
| symmetric-NAT viewers with a relayed link | ${result.symmetricViewersViaRelay} of ${result.symmetricViewers} |
| viewers above 90% of their uplink for > 2 s | ${result.viewersSaturatedOver2s.length === 0 ? 'none' : result.viewersSaturatedOver2s.join(', ')} |
${
  g.length === 0
    ? ''
    : `
## Goals

| goal | met | measured |
|---|---|---|
${g.map(([what, ok, value]) => `| ${what} | ${ok ? 'yes' : '**no**'} | ${value} |`).join('\n')}
`
}
## Viewers

| viewer | NAT | uplink Mbit/s | peers (at the end) | links made, by route | mesh share | stalls | media uploaded | uplink bytes | peak 1 s upload Mbit/s (of cap) | longest > 90% of cap | capacity Mbit/s | TL/ML | load | startup |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}

![who connected to whom](links.svg)

Links by route type: \`host\` (both ends' own addresses: the same LAN, or a public host), \`srflx\`
(an address a STUN server saw: hole punching through NATs), \`prflx\` (an address learnt from a
connectivity check: a NATed viewer reaching a public one), \`relay\` (through coturn). A link's type is
the less direct of its two ends' candidate types.

Tracker metrics at the end (aggregates):

\`\`\`
${result.metrics.join('\n') || '(none)'}
\`\`\`
`;
}
