import { describe, expect, it } from 'vitest';
import { MessageType } from '@chunkycast/wire';
import { TrafficCounts } from '../src/traffic.js';

describe('TrafficCounts', () => {
  it('counts messages and bytes by type each way, names the types, and leaves out those that carried nothing', () => {
    const t = new TrafficCounts();
    t.sent(MessageType.Data, 1000);
    t.sent(MessageType.Data, 500);
    t.received(MessageType.Advert, 40);
    t.received(200, 7); // a type the wire does not define keeps its number
    expect(t.byName()).toEqual({
      data: { sent: 2, sentBytes: 1500, received: 0, receivedBytes: 0 },
      advert: { sent: 0, sentBytes: 0, received: 1, receivedBytes: 40 },
      'type 200': { sent: 0, sentBytes: 0, received: 1, receivedBytes: 7 },
    });
  });

  it('adds the counts of a replaced node, and shows another set added in without changing either', () => {
    const retired = new TrafficCounts();
    retired.sent(MessageType.Heartbeat, 3);
    const current = new TrafficCounts();
    current.sent(MessageType.Heartbeat, 4);
    current.received(MessageType.Data, 10);
    expect(current.byName(retired)).toEqual({
      data: { sent: 0, sentBytes: 0, received: 1, receivedBytes: 10 },
      heartbeat: { sent: 2, sentBytes: 7, received: 0, receivedBytes: 0 },
    });
    expect(current.byName().heartbeat).toEqual({ sent: 1, sentBytes: 4, received: 0, receivedBytes: 0 });
    retired.add(current);
    expect(retired.byName().heartbeat).toEqual({ sent: 2, sentBytes: 7, received: 0, receivedBytes: 0 });
    expect(retired.byName().data).toEqual({ sent: 0, sentBytes: 0, received: 1, receivedBytes: 10 });
  });
});
