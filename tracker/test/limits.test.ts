import { describe, expect, it } from 'vitest';
import { addressKey, AddressCounts, TokenBucket } from '@chunkycast/tracker';

describe('TokenBucket', () => {
  it('passes a burst, then the sustained rate, in virtual time', () => {
    const bucket = new TokenBucket(20, 100, 0);
    let passed = 0;
    for (let i = 0; i < 150; i++) if (bucket.take(0)) passed++;
    expect(passed).toBe(100);
    expect(bucket.overflow).toBe(50);
    // 20 per second: one token every 50 ms.
    expect(bucket.take(49)).toBe(false);
    expect(bucket.take(50)).toBe(true);
    expect(bucket.take(50)).toBe(false);
    let inOneSecond = 0;
    for (let t = 51; t <= 1050; t++) if (bucket.take(t)) inOneSecond++;
    expect(inOneSecond).toBe(20);
  });

  it('forgets past overflow once it has refilled completely', () => {
    const bucket = new TokenBucket(10, 5, 0);
    for (let i = 0; i < 8; i++) bucket.take(0);
    expect(bucket.overflow).toBe(3);
    expect(bucket.take(400)).toBe(true); // 4 tokens back: not full, the overflow stays
    expect(bucket.overflow).toBe(3);
    expect(bucket.take(5_000)).toBe(true);
    expect(bucket.overflow).toBe(0);
  });

  it('treats a clock that steps back as no time passing', () => {
    const bucket = new TokenBucket(1, 1, 10_000);
    expect(bucket.take(10_000)).toBe(true);
    expect(bucket.take(0)).toBe(false);
    expect(bucket.take(10_999)).toBe(false);
    expect(bucket.take(11_000)).toBe(true);
  });

  it('refuses nonsense settings', () => {
    expect(() => new TokenBucket(0, 5, 0)).toThrow(RangeError);
    expect(() => new TokenBucket(5, 0.5, 0)).toThrow(RangeError);
  });
});

describe('AddressCounts', () => {
  it('admits up to the limit per key, 0 meaning none, and frees on remove', () => {
    const counts = new AddressCounts();
    expect(counts.tryAdd('a', 2)).toBe(true);
    expect(counts.tryAdd('a', 2)).toBe(true);
    expect(counts.tryAdd('a', 2)).toBe(false);
    expect(counts.tryAdd('b', 2)).toBe(true);
    counts.remove('a');
    expect(counts.tryAdd('a', 2)).toBe(true);
    for (let i = 0; i < 10; i++) expect(counts.tryAdd('c', 0)).toBe(true);
    expect(counts.count('c')).toBe(10);
    for (let i = 0; i < 10; i++) counts.remove('c');
    expect(counts.count('c')).toBe(0);
    expect(counts.size).toBe(2);
  });
});

describe('addressKey', () => {
  it('keys IPv4 by address and IPv6 by /64', () => {
    expect(addressKey('127.0.0.1')).toBe('127.0.0.1');
    expect(addressKey('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(addressKey('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:DB8:1:2::9')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:0db8:0001:0002:ffff::1')).toBe('2001:db8:1:2::/64');
    expect(addressKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('2001:db8:1:3::1')).not.toBe(addressKey('2001:db8:1:2::1'));
  });

  it('keeps unparseable input as its own key', () => {
    expect(addressKey(undefined)).toBe('?');
    expect(addressKey('zz::zz')).toBe('zz::zz');
    expect(addressKey('1::2::3')).toBe('1::2::3');
    expect(addressKey('1:2:3')).toBe('1:2:3');
  });
});
