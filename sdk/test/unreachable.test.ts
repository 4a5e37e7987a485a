import { describe, expect, it } from 'vitest';
import { unreachable } from '../src/unreachable.js';

describe('unreachable', () => {
  it('throws, naming what was not handled, for a value the types did not foresee', () => {
    const action = { kind: 'teleport' } as never;
    expect(() => unreachable(action, 'engine action')).toThrow('unhandled engine action: teleport');
    const message = { type: 'gossip' } as never;
    expect(() => unreachable(message, 'tracker message')).toThrow('unhandled tracker message: gossip');
    expect(() => unreachable('odd' as never, 'outcome')).toThrow('unhandled outcome: odd');
  });
});
