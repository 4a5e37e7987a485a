// `setLoad`: a member's TL and ML change while it runs (its host measured what its uplink carries,
// issue 12). The load above the new thresholds must leave through the load phase — hand-offs at a
// future packet, no child dropped — and the new ML must hold for every new child.
import { describe, expect, it } from 'vitest';
import { ForcedReason, MessageType, RejectReason } from '@chunkycast/wire';
import { ConfigError } from '../src/index.js';
import { dataMessage, Solo } from './solo.js';

describe('setLoad on one engine', () => {
  it('refuses bad values with a ConfigError naming them, and keeps its loads', () => {
    const solo = new Solo({ id: 7, role: 'member', targetLoadSlices: 8 });
    solo.startWith([3, 4]);
    for (const [tl, ml, name] of [
      [-1, 4, 'targetLoadSlices'],
      [2.5, 4, 'targetLoadSlices'],
      [Number.NaN, 4, 'targetLoadSlices'],
      [4, 2, 'maxLoadSlices (2) must be at least'],
      [4, 0x10000, 'maxLoadSlices'],
    ] as const) {
      expect(() => solo.input({ kind: 'setLoad', targetLoadSlices: tl, maxLoadSlices: ml })).toThrow(
        ConfigError,
      );
      expect(() => solo.input({ kind: 'setLoad', targetLoadSlices: tl, maxLoadSlices: ml })).toThrow(name);
    }
    expect([solo.engine.config.targetLoad, solo.engine.config.maxLoad]).toEqual([8, 12]);
  });

  it('the true source refuses it', () => {
    const solo = new Solo({ id: 0, role: 'source', targetLoadSlices: 16 });
    solo.input({ kind: 'start' });
    expect(() => solo.input({ kind: 'setLoad', targetLoadSlices: 4 })).toThrow(ConfigError);
    expect(solo.engine.config.targetLoad).toBe(16);
  });

  it('keeps the degree, defaults ML to 1.5·TL, and changes nothing when the loads are the same', () => {
    const solo = new Solo({ id: 7, role: 'member', targetLoadSlices: 16 });
    solo.startWith([3, 4]);
    const degree = solo.engine.config.degree;
    solo.input({ kind: 'setLoad', targetLoadSlices: 6 });
    expect(solo.engine.config).toMatchObject({ targetLoad: 6, maxLoad: 9, degree });
    const mark = solo.mark();
    expect(solo.input({ kind: 'setLoad', targetLoadSlices: 6, maxLoadSlices: 9 })).toEqual([]);
    expect(solo.sends(mark)).toEqual([]);
  });

  it('refuses a forced request above the new ML and accepts one below it', () => {
    const solo = new Solo({ id: 7, role: 'member', targetLoadSlices: 8 });
    solo.startWith([3, 4, 5]);
    solo.feed(0, { type: MessageType.SliceSourceAssign, slice: 0, epoch: 1, assigned: true });
    solo.feed(0, dataMessage(0, 0, undefined, 0));
    solo.feed(3, { type: MessageType.ForcedParentRequest, slice: 0, reason: ForcedReason.Join, fromSeq: 0 });
    expect(solo.engine.currentLoad).toBe(1);
    solo.input({ kind: 'setLoad', targetLoadSlices: 1, maxLoadSlices: 1 });
    const mark = solo.mark();
    solo.feed(4, { type: MessageType.ForcedParentRequest, slice: 0, reason: ForcedReason.Join, fromSeq: 0 });
    const replies = solo.sendsOf(MessageType.SwitchReply, mark);
    expect(replies.map((r) => [r.to, r.message.accepted, r.message.rejectReason])).toEqual([
      [4, false, RejectReason.OverMaxLoad],
    ]);
    solo.input({ kind: 'setLoad', targetLoadSlices: 2, maxLoadSlices: 2 });
    const mark2 = solo.mark();
    solo.feed(5, { type: MessageType.ForcedParentRequest, slice: 0, reason: ForcedReason.Join, fromSeq: 0 });
    expect(solo.sendsOf(MessageType.SwitchReply, mark2).map((r) => r.message.accepted)).toEqual([true]);
    expect(solo.engine.currentLoad).toBe(2);
  });

  it('a receive-only member serves no repair', () => {
    const solo = new Solo({ id: 7, role: 'member', targetLoadSlices: 8 });
    solo.startWith([3, 4]);
    solo.feed(0, { type: MessageType.SliceSourceAssign, slice: 0, epoch: 1, assigned: true });
    for (let seq = 0; seq < 4; seq++) solo.feed(0, dataMessage(0, seq, undefined, 0));
    const ask = (): number[] => {
      const mark = solo.mark();
      solo.feed(3, {
        type: MessageType.PacketRepairRequest,
        slice: 0,
        requestId: 1,
        baseSeq: 0,
        wanted: 0b11,
      });
      return solo.sends(mark).map((s) => s.message.type);
    };
    expect(ask()).toContain(MessageType.PacketRepairData);
    solo.input({ kind: 'setLoad', targetLoadSlices: 0, maxLoadSlices: 0 });
    const after = ask();
    expect(after).not.toContain(MessageType.PacketRepairData);
    expect(after).toContain(MessageType.PacketRepairNak);
  });
});
