import { describe, expect, it } from 'vitest';
import { REPORTS_TO_BAN } from '@chunkycast/wire';
import { BAN_MS, CutOffBook } from '../src/cut-offs.js';

describe('CutOffBook', () => {
  it(`bans a peer once ${REPORTS_TO_BAN} distinct members report it, and not before`, () => {
    const clock = { now: 1_000 };
    const book = new CutOffBook(() => clock.now);
    expect(book.report(1, 99)).toBe(false);
    expect(book.report(1, 99)).toBe(false); // the same reporter counts once
    expect(book.report(99, 99)).toBe(false); // nor does the peer itself
    expect(book.report(2, 99)).toBe(false);
    expect(book.isBanned(99)).toBe(false);
    expect(book.report(3, 99)).toBe(true);
    expect(book.isBanned(99)).toBe(true);
    expect(book.report(4, 99)).toBe(false); // already banned: no second ban
    expect(book.bannedCount).toBe(1);
    expect(book.isBanned(1)).toBe(false);
  });

  it('forgets a ban, and reports short of one, after BAN_MS', () => {
    const clock = { now: 0 };
    const book = new CutOffBook(() => clock.now);
    for (const reporter of [1, 2, 3]) book.report(reporter, 50);
    book.report(1, 60);
    book.report(2, 60);
    clock.now = BAN_MS - 1;
    expect(book.isBanned(50)).toBe(true);
    clock.now = BAN_MS;
    expect(book.isBanned(50)).toBe(false);
    // The two old reports of 60 expired too: one more does not ban it.
    expect(book.report(3, 60)).toBe(false);
    expect(book.isBanned(60)).toBe(false);
  });
});
