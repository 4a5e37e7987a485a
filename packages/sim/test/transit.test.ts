import { describe, expect, it } from 'vitest';
import { encode, MessageType, type Message } from '@chunkycast/wire';
import { DEFAULT_RUN, runScenario, Transit } from '../src/index.js';

const heartbeat: Message = { type: MessageType.Heartbeat };
const leave: Message = { type: MessageType.TreeLeave, slice: 3, role: 1 };

describe('Transit', () => {
  it('encodes every message by default, and one in N when sampling, sizing the others as the encoder would', () => {
    const every = new Transit({ slab: true });
    for (let i = 0; i < 5; i++) expect(every.encode(leave)).not.toBeNull();
    expect([every.messages, every.encodedMessages]).toEqual([5, 5]);
    expect(every.lastByteLength).toBe(encode(leave).byteLength);

    const sampled = new Transit({ sampleEvery: 4 });
    const carried = Array.from({ length: 8 }, () => sampled.encode(heartbeat));
    expect(carried.map((b) => b !== null)).toEqual([false, false, false, true, false, false, false, true]);
    expect([sampled.messages, sampled.encodedMessages]).toEqual([8, 2]);
    sampled.encode(leave);
    expect(sampled.lastByteLength).toBe(encode(leave).byteLength);
    expect(() => new Transit({ sampleEvery: 0 })).toThrow(RangeError);
  });

  it('a sampled run gives the same figures as one where every message crosses the codec', () => {
    const run = (codecSampleEvery?: number) =>
      runScenario({
        ...DEFAULT_RUN,
        scenario: 'join',
        nodes: 80,
        durationS: 30,
        packetsPerSlicePerSecond: 1,
        ...(codecSampleEvery === undefined ? {} : { codecSampleEvery }),
      }).summary;
    const full = run();
    const sampled = run(16);
    expect(full.codec).toEqual({
      sampleEvery: 1,
      messages: full.codec.messages,
      encoded: full.codec.messages,
    });
    expect(sampled.codec.sampleEvery).toBe(16);
    expect(sampled.codec.encoded).toBe(Math.floor(sampled.codec.messages / 16));
    // The engines only ever send what the wire carries unchanged, so skipping the round trip for
    // most messages changes nothing but the count.
    const { codec: _fullCodec, wallSeconds: _fullWall, ...fullRest } = full;
    const { codec: _sampledCodec, wallSeconds: _sampledWall, ...sampledRest } = sampled;
    expect(sampledRest).toEqual(fullRest);
  });
});
