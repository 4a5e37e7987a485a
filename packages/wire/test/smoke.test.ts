import { describe, expect, it } from 'vitest';
import { decode, encode, MessageType } from '@chunkycast/wire';

describe('smoke', () => {
  it('round trips a heartbeat', () => {
    const r = decode(encode({ type: MessageType.Heartbeat }));
    expect(r.ok).toBe(true);
  });
});
