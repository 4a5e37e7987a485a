import { describe, expect, it } from 'vitest';
import { percentile, mean, round } from '../src/lib/stats.js';
import { UsageError, choiceOption, numberOption } from '../src/lib/args.js';
import { descendantsOf, processStat, rssKb } from '../src/lib/proc.js';
import { exitCodeOf, run } from '../src/lib/process.js';

describe('stats', () => {
  it('percentile is nearest rank over finite values', () => {
    expect(percentile([5, 1, 4, 2, 3], 50)).toBe(3);
    expect(percentile([1, 2, 3, 4], 50)).toBe(2);
    expect(percentile([1, 2, 3, 4], 95)).toBe(4);
    expect(percentile([1, 2, 3, 4], 0)).toBe(1);
    expect(percentile([null, undefined, Number.NaN, 7], 50)).toBe(7);
    expect(percentile([], 50)).toBeNull();
    expect(() => percentile([1], 101)).toThrow(RangeError);
  });
  it('mean and round', () => {
    expect(mean([1, 2, null, 6])).toBe(3);
    expect(mean([])).toBeNull();
    expect(round(1.23456, 2)).toBe(1.23);
    expect(round(null, 2)).toBeNull();
  });
});

describe('args', () => {
  it('numberOption checks range and integers, naming the flag', () => {
    expect(numberOption('viewers', undefined, 6)).toBe(6);
    expect(numberOption('viewers', '8', 6, { min: 1, integer: true })).toBe(8);
    expect(() => numberOption('viewers', '0', 6, { min: 1 })).toThrow(/--viewers needs a number ≥ 1/);
    expect(() => numberOption('viewers', '2.5', 6, { integer: true })).toThrow(UsageError);
    expect(() => numberOption('viewers', '', 6)).toThrow(UsageError);
    expect(() => numberOption('loss', '2', 0, { min: 0, max: 1 })).toThrow(/in \[0, 1\]/);
  });
  it('choiceOption', () => {
    expect(choiceOption('group', undefined, ['thesis', 'all'], 'thesis')).toBe('thesis');
    expect(choiceOption('group', 'all', ['thesis', 'all'], 'thesis')).toBe('all');
    expect(() => choiceOption('group', 'x', ['thesis', 'all'], 'thesis')).toThrow(/thesis, all/);
  });
});

describe('proc and process', () => {
  it('reads this process and sees a child among its descendants', async () => {
    const self = processStat(process.pid);
    expect(self?.parentPid).toBe(process.ppid);
    expect(self?.cpuSeconds).toBeGreaterThan(0);
    expect(rssKb(process.pid)).toBeGreaterThan(1000);
    expect(processStat(2 ** 22 + 1)).toBeNull();
    const exit = await run('sh', ['-c', 'exit 3'], { stdio: 'ignore' });
    expect(exitCodeOf(exit)).toBe(3);
    expect(descendantsOf(process.pid)).not.toContain(process.pid);
  });
});
