// `upload-capacity` and `max-upload-kbps`: the player's attribute parsing, the session's option
// checks, and a session whose loads come from its cap.
import { afterEach, describe, expect, it } from 'vitest';
import { parseMaxUploadKbps, parseUploadCapacity } from '../src/player.js';
import { MeshError, MeshSession } from '@chunkycast/sdk/core';
import { resolveUploadCapacity } from '../src/session.js';
import type { SignedAnnouncement } from '@chunkycast/wire';
import { FakeClock, socketFactory, welcome } from './tracker-fakes.js';
import { until } from './until.js';

describe('<mesh-player> upload attributes', () => {
  it('upload-capacity is measured or fixed; anything else is reported and measured is used', () => {
    const errors: string[] = [];
    expect(parseUploadCapacity(null, errors)).toBeUndefined();
    expect(parseUploadCapacity('', errors)).toBeUndefined();
    expect(parseUploadCapacity('measured', errors)).toBe('measured');
    expect(parseUploadCapacity(' fixed ', errors)).toBe('fixed');
    expect(errors).toEqual([]);
    expect(parseUploadCapacity('auto', errors)).toBeUndefined();
    expect(errors).toEqual(['upload-capacity="auto" must be measured or fixed; using measured']);
  });

  it('max-upload-kbps is a number of kbit/s ≥ 0; a bad one turns the mesh off, saying why', () => {
    const errors: string[] = [];
    expect(parseMaxUploadKbps(null, errors)).toBeUndefined();
    expect(parseMaxUploadKbps('  ', errors)).toBeUndefined();
    expect(parseMaxUploadKbps('500', errors)).toBe(500);
    expect(parseMaxUploadKbps('0', errors)).toBe(0);
    expect(parseMaxUploadKbps('1.5e3', errors)).toBe(1500);
    expect(errors).toEqual([]);
    for (const bad of ['-1', 'fast', 'Infinity', '1e12', '500kbps']) {
      const e: string[] = [];
      expect(parseMaxUploadKbps(bad, e), bad).toBeNull();
      expect(e, bad).toHaveLength(1);
      expect(e[0], bad).toMatch(
        /^max-upload-kbps=".*" is not a number of kbit\/s .*playing from the origin only$/,
      );
    }
  });
});

describe('MeshSession upload options', () => {
  it('defaults to measured without a cap, and refuses bad values with a config error', () => {
    const base = { tracker: 'ws://127.0.0.1:9/ws', stream: 'live' };
    expect(resolveUploadCapacity(base)).toEqual({ mode: 'measured', maxUploadKbps: null });
    expect(resolveUploadCapacity({ ...base, uploadCapacity: 'fixed', maxUploadKbps: 800 })).toEqual({
      mode: 'fixed',
      maxUploadKbps: 800,
    });
    const bad = [
      { ...base, maxUploadKbps: -5 },
      { ...base, maxUploadKbps: Number.NaN },
      { ...base, uploadCapacity: 'auto' as 'fixed' },
    ];
    for (const options of bad) {
      expect(() => resolveUploadCapacity(options)).toThrow(MeshError);
      expect(() => MeshSession.connect(options)).toThrow(/maxUploadKbps|uploadCapacity/);
    }
  });
});

const sessions: MeshSession[] = [];
afterEach(() => {
  for (const s of sessions.splice(0)) s.close();
});

/** An announced 2 s segment of 250,000 bytes: a 1000 kbit/s stream, 62.5 kbit/s per slice. */
function announcement(sequence: number): SignedAnnouncement {
  return {
    stream: 'live',
    sequence,
    uri: `seg${sequence}.ts`,
    bytes: 250_000,
    packets: 16,
    firstPacket: 0,
    sha256: '0'.repeat(64),
    packetHashes: '0'.repeat(32 * 16),
    durationMs: 2000,
    publishedAtMs: 1000 + sequence * 2000,
    signature: 'AAAA',
  };
}

async function session(options: { maxUploadKbps?: number; uploadCapacity?: 'measured' | 'fixed' }) {
  const clock = new FakeClock();
  const factory = socketFactory(clock);
  const s = MeshSession.connect(
    { tracker: 'ws://127.0.0.1:9/ws', stream: 'live', ...options },
    { createSocket: factory.create, clock },
  );
  sessions.push(s);
  const socket = factory.sockets.at(-1)!;
  socket.accept();
  socket.receive(welcome(7, 'ticket', false, { announcements: [announcement(1), announcement(2)] }));
  await s.ready;
  return s;
}

describe('a session with max-upload-kbps', () => {
  it('sets its loads from the cap as soon as it knows the stream bitrate, and says so in its stats', async () => {
    const s = await session({ maxUploadKbps: 300 });
    // 300 kbit/s = 4.49 slices of 62.5 plus 7% of headers: TL ⌊0.65 · 4.49⌋ = 2, ML ⌊0.8 · 4.49⌋ = 3.
    await until(() => s.stats().targetLoad === 2, 5000, 'the capped loads');
    expect(s.stats()).toMatchObject({
      targetLoad: 2,
      maxLoad: 3,
      uploadCapacityKbps: 300,
      uploadCapacitySource: 'capped',
    });
  });

  it('fixed without a cap keeps the declared loads and reports no capacity', async () => {
    const s = await session({ uploadCapacity: 'fixed' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(s.stats()).toMatchObject({
      targetLoad: 16,
      maxLoad: 24,
      uploadCapacityKbps: null,
      uploadCapacitySource: 'fixed',
    });
  });

  it('a cap of 0 makes a receive-only viewer', async () => {
    const s = await session({ maxUploadKbps: 0 });
    await until(() => s.stats().maxLoad === 0, 5000, 'receive-only');
    expect(s.stats()).toMatchObject({ targetLoad: 0, uploadCapacitySource: 'capped', uploadCapacityKbps: 0 });
  });
});
