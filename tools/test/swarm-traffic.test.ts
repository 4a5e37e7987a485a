import { describe, expect, it } from 'vitest';
import { trafficBetween, trafficMarkdown, trafficSummary } from '../src/swarm/traffic.js';

const f = (sent: number, sentBytes: number, received: number, receivedBytes: number) => ({
  sent,
  sentBytes,
  received,
  receivedBytes,
});

describe('swarm traffic', () => {
  it('takes what changed between two samples, a type new in the second counting from zero', () => {
    const w = trafficBetween(
      {
        atMs: 1000,
        traffic: { data: f(10, 1000, 5, 500) },
        transportBytesSent: 2000,
        transportBytesReceived: 900,
      },
      {
        atMs: 3000,
        traffic: { data: f(30, 3000, 9, 900), advert: f(2, 40, 1, 20) },
        transportBytesSent: 4100,
        transportBytesReceived: 1500,
      },
    );
    expect(w).toEqual({
      seconds: 2,
      byType: { data: f(20, 2000, 4, 400), advert: f(2, 40, 1, 20) },
      transportBytesSent: 2100,
      transportBytesReceived: 600,
    });
    expect(trafficBetween({ atMs: 1000 }, { atMs: 3000 })).toBeNull();
    expect(trafficBetween({ atMs: 3000, traffic: {} }, { atMs: 3000, traffic: {} })).toBeNull();
  });

  it('averages per viewer per second over the viewers that counted, busiest type first', () => {
    const s = trafficSummary([
      {
        seconds: 10,
        byType: { data: f(100, 10_000, 50, 5000), advert: f(10, 200, 10, 200) },
        transportBytesSent: 11_000,
        transportBytesReceived: null,
      },
      null,
      {
        seconds: 30,
        byType: { data: f(300, 30_000, 150, 15_000) },
        transportBytesSent: null,
        transportBytesReceived: null,
      },
    ]);
    expect(s).not.toBeNull();
    expect(s?.viewers).toBe(2);
    expect(s?.byType.map((x) => x.type)).toEqual(['data', 'advert']);
    expect(s?.byType[0]).toEqual({ type: 'data', ...f(10, 1000, 5, 500) });
    expect(s?.byType[1]).toEqual({ type: 'advert', ...f(0.25, 5, 0.25, 5) });
    expect(s?.total).toEqual(f(10.25, 1005, 5.25, 505));
    expect(s?.transportBytesSent).toBe(1100); // only the viewer that read its transport
    expect(s?.transportBytesReceived).toBeNull();
    expect(trafficMarkdown(s)).toContain('| data | 10.0 | 1.00 | 5.0 | 0.50 |');
    expect(trafficSummary([null])).toBeNull();
    expect(trafficMarkdown(null)).toBe('');
  });
});
