import { describe, expect, it } from 'vitest';
import { costGoals, costReport, type CostRow, type CostRun } from '../src/bench-cost/report.js';

function row(viewers: number, arm: string, over: Partial<CostRow> = {}): CostRow {
  return {
    viewers,
    arm,
    rendererCpuPerViewerPct: 5,
    chromiumCpuPerViewerPct: 8,
    cpuByProcessTypePct: { renderer: 5 * viewers, 'utility:NetworkService': 1 },
    rendererMemPerViewerMB: 100,
    rendererFootprintPerViewerMB: 110,
    chromiumMemPerViewerMB: 120,
    jsHeapPerViewerMB: 4,
    droppedFrames: 0,
    totalFrames: 3600,
    stalls: 0,
    neverPlayed: 0,
    playingAtEnd: viewers,
    p2pShare: arm === 'mesh' ? 0.95 : null,
    streamCopiesFromOrigin: 1,
    trackerCpuPct: 5,
    sourceCpuPct: arm === 'mesh' ? 3.2 : null,
    sourceCpuPerSlicePct: arm === 'mesh' ? 0.2 : null,
    machineBusyPct: 100,
    windowS: 120,
    rendererThreads: null,
    networkServiceThreads: null,
    threadSampling: null,
    profile: null,
    rendererMemoryByPart: null,
    rendererMemoryAfterCollectionByPart: null,
    ...over,
  };
}

/** A run of these rows, as costReport takes it. */
function runOf(rows: readonly CostRow[], failures: CostRun['failures'] = []): CostRun {
  return {
    command: 'npm run bench:cost',
    durationS: 40,
    hideVideo: true,
    profileS: 0,
    environment: { node: 'v20', cpus: 2, cpuModel: 'x', memGiB: 8, kernel: 'Linux', startedAt: '' },
    elapsedS: 1,
    rows,
    failures,
  };
}

describe('bench:cost goals', () => {
  it('judge the mesh against plain hls.js at 8 and 16 viewers only', () => {
    const goals = costGoals([
      row(4, 'http'),
      row(4, 'mesh', { rendererCpuPerViewerPct: 50 }),
      row(8, 'http'),
      row(8, 'mesh', { rendererCpuPerViewerPct: 6, rendererMemPerViewerMB: 130 }),
      row(16, 'http', { droppedFrames: 3 }),
      row(16, 'mesh', { rendererCpuPerViewerPct: 6.5, stalls: 2, droppedFrames: 3 }),
    ]);
    expect(goals.map((g) => [g.viewers, g.met])).toEqual([
      [8, true], // 6 / 5 = 1.2
      [8, false], // memory 1.3
      [16, false], // 1.3
      [16, true],
      [16, false], // stalls
      [16, true], // dropped frames equal
    ]);
    expect(goals[0]?.measured).toBeCloseTo(1.2, 10);
  });

  it('say "not measured" when an arm failed, and write it in the report', () => {
    const rows = [row(8, 'http')];
    const goals = costGoals(rows);
    expect(goals.map((g) => g.met)).toEqual([null, null]);
    const run = runOf(rows, [{ viewers: 8, arm: 'mesh', error: 'boom' }]);
    const { markdown } = costReport(run);
    expect(markdown).toContain('not measured');
    expect(markdown).toContain('- mesh × 8: boom');
    expect(markdown).toContain('| 8 | http | 5.0 | 8.0 | 100 | 110 | 4.0 |');
    expect(markdown).toContain('Threads were not read.');
    expect(markdown).toContain('No memory dump was taken.');
  });
  it('share the tracker’s and the true source’s CPU out per viewer beside their totals', () => {
    const { markdown } = costReport(
      runOf([row(8, 'http', { trackerCpuPct: 4 }), row(8, 'mesh', { trackerCpuPct: 6, sourceCpuPct: 3.2 })]),
    );
    expect(markdown).toContain('| tracker CPU % (per viewer) | true source CPU % (per viewer, per slice) |');
    expect(markdown).toContain('| 4.0 (0.50) | — (—, —) | 100% |');
    expect(markdown).toContain('| 6.0 (0.75) | 3.2 (0.40, 0.20) | 100% |');
  });
  it('write the renderers’ memory by allocator per viewer count, http → mesh', () => {
    const parts = (v8: number, arrayBuffers: number, footprint: number): CostRow['rendererMemoryByPart'] => ({
      processes: 2,
      privateFootprintMiB: footprint,
      partsMiB: { v8, 'array buffers': arrayBuffers, malloc: 10 },
      otherMiB: footprint - v8 - arrayBuffers - 10,
      arrayBuffersInUseMiB: arrayBuffers / 2,
    });
    const { markdown } = costReport(
      runOf([
        row(2, 'http', {
          rendererMemoryByPart: parts(8, 1, 30),
          rendererMemoryAfterCollectionByPart: parts(7, 1, 28),
        }),
        row(2, 'mesh', { rendererMemoryByPart: parts(12, 3.5, 40) }),
        row(4, 'http'),
      ]),
    );
    expect(markdown).toContain('## Renderer memory by allocator, MiB per viewer');
    expect(markdown).toContain('| part | 2 viewers, http → mesh |');
    expect(markdown).toMatch(/\| v8: V8's heaps[^|]*\| 8\.0 → 12\.0 \|/);
    expect(markdown).toMatch(/\| array buffers: [^|]*\| 1\.0 → 3\.5 \|/);
    // Right below it, what live buffers occupy of it (not a part: the footprint's sum leaves it out).
    expect(markdown).toMatch(/\| array buffers: [^\n]*\n\| … of which live buffers [^|]*\| 0\.5 → 1\.8 \|/);
    expect(markdown).toContain('| **private footprint** | 30.0 → 40.0 |');
    // A part a dump did not report is shown as 0 by memoryByPart; here it is absent: a dash.
    expect(markdown).toMatch(/\| blink_gc: [^|]*\| — → — \|/);
    // After a collection only http's dump was taken: its table has the one trial.
    expect(markdown).toContain('| part | 2 viewers, http |');
    expect(markdown).toContain('| **private footprint** | 28.0 |');
  });
  it('write the thread table per viewer count, http → mesh, with how the threads were read', () => {
    const sampling = (unattributed: number, total: number): CostRow['threadSampling'] => ({
      windowS: 40,
      rendererUnattributedCpuPctPerViewer: unattributed,
      rendererProcessesCpuPctPerViewer: total,
      networkServiceUnattributedCpuPctPerViewer: 0,
      networkServiceProcessesCpuPctPerViewer: 0.5,
      threadsAtStart: 50,
      threadsAtEnd: 52,
      threadsAppeared: 3,
      threadsVanished: 1,
      threadsUnreadable: 0,
      processesGone: 0,
    });
    const rows = [
      row(2, 'http', {
        rendererThreads: [{ name: 'CrRendererMain', cpuPctPerViewer: 2.5 }],
        networkServiceThreads: [{ name: 'NetworkService', cpuPctPerViewer: 0.5 }],
        threadSampling: sampling(0, 2.5),
      }),
      row(2, 'mesh', {
        rendererThreads: [
          { name: 'CrRendererMain', cpuPctPerViewer: 4 },
          { name: 'WebRTC_Network', cpuPctPerViewer: 1.25 },
        ],
        networkServiceThreads: [{ name: 'NetworkService', cpuPctPerViewer: 0.5 }],
        threadSampling: sampling(0.05, 5.3),
      }),
    ];
    const { markdown } = costReport(runOf(rows));
    expect(markdown).toContain('## CPU by thread, % of one core per viewer');
    expect(markdown).toContain('| `WebRTC_Network` | 0.00 → 1.25 |');
    expect(markdown).toContain('| `NetworkService` | 0.50 → 0.50 |');
    expect(markdown).toContain('| threads that exited in the window | 0.00 → 0.05 |');
    expect(markdown).toContain('- mesh × 2: 50 → 52 threads over 40 s, 3 appeared, 1 vanished');
  });
});
