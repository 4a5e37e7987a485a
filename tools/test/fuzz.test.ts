/**
 * The tracker fuzzer (tools/src/fuzz/tracker-fuzz.ts), small: tens of thousands of random and mutated
 * frames against the built tracker as a child process on 127.0.0.1. Every undecodable frame must be
 * answered with exactly the code decodeClientMessage gives (or end in the close the limits call
 * for), the tracker must not crash, and every kind of frame must actually have been sent. The full
 * 1,000,000-frame run is `npm run fuzz:tracker`.
 */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createRandom } from '@chunkycast/engine';
import { decodeClientMessage, MAX_TRACKER_FRAME_BYTES, TRACKER_ERROR_CODES } from '@chunkycast/wire';
import { fromRoot } from '../src/lib/paths.js';
import { FRAME_CLASSES, runTrackerFuzz, type TrackerFuzzResult } from '../src/fuzz/tracker-fuzz.js';
import {
  FrameGenerator,
  judgeFrame,
  predictReply,
  TRACKER_WS_MAX_PAYLOAD_BYTES,
  type ConnectionState,
  type FuzzFrame,
} from '../src/fuzz/frames.js';

const trackerCli = fromRoot('tracker', 'dist', 'cli.js');

/** What a failing run says: enough to reproduce (seed, frame, expected vs got). */
function explain(result: TrackerFuzzResult): string {
  return JSON.stringify(
    {
      seed: result.seed,
      mismatchesByKind: result.mismatchesByKind,
      mismatchesByExpected: result.mismatchesByExpected,
      mismatchSamples: result.mismatchSamples.slice(0, 3),
      trackerExit: result.trackerExit,
      trackerErrorLines: result.trackerErrorLines.slice(0, 3),
    },
    null,
    2,
  );
}

describe('tracker fuzz oracle', () => {
  const text = (payload: string): FuzzFrame => ({ cls: 'valid', payload, binary: false });
  const padTo = (bytes: number): string => {
    const head = '{"type":"leave","pad":"';
    return `${head}${'a'.repeat(bytes - head.length - 2)}"}`;
  };

  it('judges frames as the tracker must: close, typed error, or a message', () => {
    expect(judgeFrame(text(padTo(TRACKER_WS_MAX_PAYLOAD_BYTES + 1)))).toEqual({ kind: 'close', code: 1009 });
    expect(judgeFrame(text(padTo(TRACKER_WS_MAX_PAYLOAD_BYTES)))).toMatchObject({
      kind: 'bad',
      code: 'tooLarge',
    });
    expect(judgeFrame(text(padTo(MAX_TRACKER_FRAME_BYTES + 1)))).toMatchObject({
      kind: 'bad',
      code: 'tooLarge',
    });
    expect(judgeFrame(text(padTo(MAX_TRACKER_FRAME_BYTES)))).toMatchObject({ kind: 'message' });
    expect(
      judgeFrame({ cls: 'binary', payload: Buffer.from('{"type":"leave"}'), binary: true }),
    ).toMatchObject({
      kind: 'bad',
      code: 'malformed',
    });
    expect(
      judgeFrame({ cls: 'invalidUtf8', payload: Buffer.from([0x7b, 0xff, 0x7d]), binary: false }),
    ).toEqual({
      kind: 'close',
      code: 1007,
    });
    // A lone surrogate travels as U+FFFD, which the stream pattern refuses.
    expect(judgeFrame(text('{"type":"join","stream":"a\uD800","role":"viewer"}'))).toMatchObject({
      kind: 'bad',
      code: 'invalidField',
    });
  });

  it('predicts the answers of decodable frames from the connection state', () => {
    const context = { broadcasterKey: 'key', verifyAnnouncement: () => true };
    const unjoined = (): ConnectionState => ({ joined: null, peerId: null });
    const viewer = (): ConnectionState => ({ joined: { stream: 's', role: 'viewer' }, peerId: 9 });
    const decode = (frame: string) => {
      const decoded = decodeClientMessage(frame);
      if (!decoded.ok) throw new Error(decoded.error.message);
      return decoded.message;
    };
    const join = decode('{"type":"join","stream":"s","role":"viewer"}');
    const state = unjoined();
    expect(predictReply(join, state, context).replies).toEqual(['welcome']);
    expect(state.joined).toEqual({ stream: 's', role: 'viewer' });
    expect(predictReply(join, state, context).replies).toEqual(['error:alreadyJoined']);
    const source = decode('{"type":"join","stream":"s","role":"source","key":"wrong"}');
    expect(predictReply(source, unjoined(), context).replies).toEqual(['error:badKey']);
    const signal = (to: number) => decode(`{"type":"signal","to":${to},"data":{"type":"offer","sdp":"x"}}`);
    expect(predictReply(signal(9), viewer(), context).replies).toEqual(['error:invalidField']);
    expect(predictReply(signal(0), viewer(), context)).toMatchObject({
      replies: ['error:unknownPeer'],
      optional: false,
    });
    expect(predictReply(signal(5), viewer(), context)).toMatchObject({
      replies: ['error:unknownPeer'],
      optional: true,
    });
    expect(predictReply(signal(5), unjoined(), context).replies).toEqual(['error:notJoined']);
    expect(predictReply(decode('{"type":"leave"}'), unjoined(), context).replies).toEqual([
      'error:notJoined',
    ]);
  });

  it('generates valid frames that decode, for every role and state', () => {
    for (const role of ['source', 'viewer', 'loner'] as const) {
      const generator = new FrameGenerator(createRandom(11), {
        role,
        homeStream: 'fuzz',
        broadcasterKey: 'key',
        sign: () => `${'A'.repeat(86)}==`,
        pickPeerId: (random) => random.nextU32(),
        resumeTicket: () => 'abc.def',
      });
      for (const state of [
        { joined: null, peerId: null },
        { joined: { stream: 'fuzz', role: 'viewer' }, peerId: 5 },
        { joined: { stream: 'fuzz', role: 'source' }, peerId: 7 },
      ] satisfies ConnectionState[])
        for (let i = 0; i < 3000; i++) {
          const frame = generator.next(state);
          if (frame.cls === 'valid') expect(judgeFrame(frame).kind, String(frame.payload)).toBe('message');
        }
    }
  });
});

describe('tracker fuzz (child-process tracker, loopback)', () => {
  it('has a built tracker to run', () => {
    // `npm test` builds first (pretest); alone: npx tsc -b.
    expect(existsSync(trackerCli), `${trackerCli} is missing: run npx tsc -b`).toBe(true);
  });

  it('answers 30,000 random and mutated frames exactly as the oracle says, without crashing', async () => {
    const frames = 30_000;
    const result = await runTrackerFuzz({
      frames,
      seed: 6,
      connections: 8,
      maxSeconds: 120,
      progressMs: 0,
      idleMs: 500,
      trackerCli,
    });

    expect(result.trackerCrashed, explain(result)).toBe(false);
    expect(result.trackerStoppedCleanly).toBe(true);
    expect(result.mismatches, explain(result)).toBe(0);
    expect(result.stoppedBy).toBe('frames');
    expect(result.framesSent).toBe(frames);
    expect(result.batchTimeouts).toBe(0);
    expect(result.trackerErrorLogs, explain(result)).toBe(0);
    expect(result.unexpectedDisconnectsByCode).toEqual({});

    // Every kind of frame went out, and a real share of them was undecodable.
    for (const cls of FRAME_CLASSES) expect(result.framesByClass[cls], cls).toBeGreaterThan(0);
    expect(result.badFrames).toBeGreaterThan(frames / 4);
    expect(result.decodableFrames).toBeGreaterThan(frames / 4);
    // Each bad frame is accounted for: its typed answer, a disconnect, or our own cut connection.
    expect(result.badFramesAnswered + result.badFramesAnsweredByDisconnect + result.badFramesCutByUs).toBe(
      result.badFrames,
    );

    // Only known codes, and the decoder's and the handler's refusals all seen.
    for (const code of Object.keys(result.errorsByCode))
      expect(TRACKER_ERROR_CODES as readonly string[]).toContain(code);
    for (const code of [
      'malformed',
      'tooLarge',
      'unknownType',
      'invalidField',
      'notJoined',
      'alreadyJoined',
      'unknownPeer',
      'forbidden',
    ])
      expect(result.errorsByCode[code], code).toBeGreaterThan(0);

    // Disconnects of each kind, each followed by a reconnect; sessions resumed with their tickets.
    for (const code of ['1007', '1008', '1009'])
      expect(result.disconnectsByCode[code], `close ${code}`).toBeGreaterThan(0);
    expect(result.reconnects).toBeGreaterThan(0);
    expect(result.resumesHonoured).toBeGreaterThan(0);
    // Members really talked: signals relayed between them, the source's announcements broadcast.
    expect(result.signalsReceived).toBeGreaterThan(0);
    expect(result.announcesReceived).toBeGreaterThan(0);

    // Every frame the tracker sent decodes with the peers' own decoder (an unknownType error once
    // echoed the whole `type`, making answers the SDK refused; the echo is now cut to 64 characters).
    expect(result.serverFrameViolationsByKind).toEqual({});

    // A loose sanity bound for a short run; the long run's report states the real one.
    expect(result.rssMBEnd).not.toBeNull();
    expect(result.rssGrowthMB ?? Infinity).toBeLessThan(128);
  });

  it('reports mismatches when the tracker does not do what the oracle expects', async () => {
    // The tracker closes after 30 bad frames while the oracle expects its default of 100.
    const result = await runTrackerFuzz({
      frames: 3_000,
      seed: 7,
      connections: 4,
      maxSeconds: 60,
      progressMs: 0,
      idleMs: 0,
      trackerCli,
      trackerEnv: { CHUNKYCAST_MAX_BAD_FRAMES: '30' },
    });
    expect(result.trackerCrashed).toBe(false);
    expect(result.mismatchesByKind.badFrameLimit ?? 0).toBeGreaterThan(0);
    expect(result.passed).toBe(false);
  });
});
