// The network lab's short scenario (`smoke`): four Chromium viewers, each in its own network
// namespace — behind a port-preserving NAT on a thin 0.5 Mbit/s uplink, behind a port-preserving
// NAT, behind a symmetric NAT, and on the public segment — with coturn for STUN and TURN. Runs
// inside `npm run e2e`'s loopback-only namespace; the lab's namespaces hang off it, so nothing leaves
// the machine. `npm run lab -- --scenario NAME` runs the long scenarios and writes their reports.
import { afterAll, describe, expect, test } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { root } from './src/harness.js';
import { linksSvg, reportMarkdown } from '../tools/src/lab/report.js';
import { runLab, type LabResult } from '../tools/src/lab/run.js';

const DURATION_S = 60;
/** The mesh's share of the media over the run's second half (see the assertion). */
const MIN_MESH_SHARE_SECOND_HALF = 0.7;
const isRoot = process.getuid?.() === 0;

describe('network lab', () => {
  let result: LabResult | null = null;
  afterAll(() => {
    if (result === null) return;
    // Kept for a look after a CI run (out/ is ignored by git).
    const dir = join(root, 'out', 'lab-smoke-test');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'result.json'), `${JSON.stringify(result, null, 2)}\n`);
    writeFileSync(join(dir, 'report.md'), reportMarkdown(result));
    writeFileSync(join(dir, 'links.svg'), linksSvg(result));
  });

  // Namespaces, NAT and shaping need root (CI runs as root on this machine kind); without it the
  // test fails with the reason rather than pretending to pass.
  test(
    'viewers behind NATs and thin uplinks share the stream through STUN and TURN',
    async () => {
      expect(isRoot, 'the network lab needs root (ip netns, nft, tc)').toBe(true);
      const run = await runLab({
        scenarioName: 'smoke',
        durationS: DURATION_S,
        progress: (line) => {
          process.stderr.write(`lab: ${line}\n`);
        },
      });
      result = run.result;
      const r = result;
      const brief = JSON.stringify(
        r.viewers.map((v) => ({
          v: v.name,
          nat: v.nat,
          peers: v.peers,
          routes: v.links.map((l) => `${l.peerName}:${l.route}`).join(' '),
          share: v.meshShare,
          load: v.load,
          stalls: v.stalls,
          stallsAtS: v.stallsAtS,
          peakKbps: v.peakUploadKbps1s,
          capKbps: v.uplinkKbps,
          over90Ms: v.longestAbove90PctMs,
          capacityKbps: v.uploadCapacityKbps,
          tl: v.targetLoad,
          ml: v.maxLoad,
        })),
      );
      process.stderr.write(
        `lab smoke: mesh ${(100 * r.meshShare).toFixed(1)}% (second half ${(100 * (r.meshShareSecondHalf ?? 0)).toFixed(1)}%), origin ${r.streamCopiesFromOrigin?.toFixed(2)} copies, ` +
          `stalls ${r.stalls}, relayed ${(r.relayedBytes / 1024).toFixed(0)} KiB, min peers ${r.minPeers}\n${brief}\n`,
      );
      expect(r.trackerHealth.ice?.warning ?? null, 'the tracker hands out STUN and TURN').toBeNull();
      expect(r.neverPlayed, brief).toBe(0);
      expect(r.stalls, brief).toBe(0);
      // The symmetric-NAT viewer cannot hole-punch to the NATed ones: it reaches them through TURN.
      const symmetric = r.viewers.find((v) => v.nat === 'symmetric');
      expect(
        symmetric?.links.some((l) => l.route === 'relay'),
        brief,
      ).toBe(true);
      // The viewers behind port-preserving NATs reach each other by hole punching (srflx).
      const punched = r.viewers.filter((v) => v.nat === 'port-preserving');
      expect(
        punched.some((v) =>
          v.links.some((l) => l.route === 'srflx' && punched.some((p) => p.name === l.peerName)),
        ),
        brief,
      ).toBe(true);
      // Every viewer is in the mesh with more than the true source.
      expect(r.minPeers, brief).toBeGreaterThanOrEqual(2);
      // Past the first half-minute (trees built, the thin uplink measured) the mesh carries most of
      // the media. (Measured on this machine: 78–80% over the whole minute, 100% over its second
      // half; the bound leaves room for a slower CI machine.)
      expect(r.meshShareSecondHalf, brief).toBeGreaterThanOrEqual(MIN_MESH_SHARE_SECOND_HALF);
      // The thin uplink is measured, and its loads follow: TL and ML below the declared 16/24, and
      // its load down from its peak (children moved away through the load phase).
      const thin = r.viewers.find((v) => v.uplinkKbps <= 500);
      expect(thin?.uploadCapacitySource, brief).toBe('measured');
      expect(thin?.uploadCapacityKbps ?? Infinity, brief).toBeLessThanOrEqual(1.5 * (thin?.uplinkKbps ?? 0));
      expect(thin?.maxLoad ?? Infinity, brief).toBeLessThan(16);
      const peakLoad = Math.max(...(thin?.timeline ?? []).map((p) => p.load ?? 0));
      expect(thin?.load ?? Infinity, brief).toBeLessThan(peakLoad);
    },
    (DURATION_S + 150) * 1000,
  );
});
