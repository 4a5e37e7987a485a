import { describe, expect, it } from 'vitest';
import { Solo } from './solo.js';

describe('determinism', () => {
  it('one engine given the same inputs and seed acts identically', () => {
    const script = (seed: number): string => {
      const solo = new Solo({ id: 5, role: 'member', targetLoadSlices: 12 }, seed);
      solo.startWith([6, 7, 8, 9]);
      solo.advance(10_000);
      return JSON.stringify(solo.log);
    };
    expect(script(1)).toBe(script(1));
    expect(script(1)).not.toBe(script(2));
  });
});
