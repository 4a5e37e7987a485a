// Fault injection is internal (`@chunkycast/sdk/testing`): <mesh-player> neither observes nor parses
// a `fault-injection` attribute any more, the public option types have no fault fields, and faults
// attached through the internal hook reach the node a session builds (and only through that hook).
import { afterEach, describe, expect, it } from 'vitest';
import { MeshSession, type MeshNode } from '@chunkycast/sdk/core';
import * as browserEntry from '@chunkycast/sdk';
import { MeshPlayer, parseAttributes } from '../src/player.js';
import { faultsOf, injectFaults, parseFaultInjection } from '../src/testing.js';
import { FakeClock, socketFactory, welcome } from './tracker-fakes.js';

const sessions: MeshSession[] = [];
afterEach(() => {
  for (const s of sessions.splice(0)) s.close();
});

describe('<mesh-player> and fault injection', () => {
  it('does not observe a fault-injection attribute', () => {
    expect(MeshPlayer.observedAttributes).not.toContain('fault-injection');
  });

  it('ignores a fault-injection attribute: no faults in the session options, no error either', () => {
    const attributes: Record<string, string> = {
      src: '/live/live.m3u8',
      tracker: 'ws://127.0.0.1:9/ws',
      stream: 'live',
      'fault-injection': 'corrupt-forwarded',
    };
    const parsed = parseAttributes((name) => attributes[name] ?? null);
    expect(parsed.errors).toEqual([]);
    expect(parsed.mesh).toEqual({ tracker: 'ws://127.0.0.1:9/ws', stream: 'live' });
    expect(faultsOf(parsed.mesh ?? {})).toEqual({});
  });

  it('the browser entry exports no fault parser', () => {
    expect(Object.keys(browserEntry)).not.toContain('parseFaultInjection');
  });
});

describe('the internal fault hook', () => {
  it('parses the demo viewer’s ?fault= values', () => {
    expect(parseFaultInjection(null)).toBeUndefined();
    expect(parseFaultInjection('')).toBeUndefined();
    expect(parseFaultInjection('corrupt-forwarded')).toEqual({ corruptForwardedData: true });
    expect(parseFaultInjection('forge-forwarded')).toEqual({ forgeForwardedSequences: true });
    expect(parseFaultInjection('withhold-forwarded')).toEqual({ withholdForwardedData: true });
    expect(parseFaultInjection('drop-received:0.05')).toEqual({ dropReceivedDataFraction: 0.05 });
    expect(parseFaultInjection('drop-received:1')).toEqual({ dropReceivedDataFraction: 1 });
    for (const bad of ['corrupt', 'drop-received:1.5', 'drop-received:-0.1', 'drop-received:'])
      expect(parseFaultInjection(bad), bad).toBeNull();
  });

  it('is not enumerable: a copy or JSON of the options carries no faults', () => {
    const options = injectFaults(
      { tracker: 'ws://127.0.0.1:9/ws', stream: 'live' },
      { withholdForwardedData: true },
    );
    expect(faultsOf(options)).toEqual({ withholdForwardedData: true });
    expect(Object.keys(options)).toEqual(['tracker', 'stream']);
    expect(faultsOf({ ...options })).toEqual({});
    expect(JSON.parse(JSON.stringify(options))).toEqual({ tracker: 'ws://127.0.0.1:9/ws', stream: 'live' });
  });

  it('passes a session’s faults to the node it builds, and none without them', async () => {
    const nodeFaults = async (faulty: boolean) => {
      const clock = new FakeClock();
      const factory = socketFactory(clock);
      const options = { tracker: 'ws://127.0.0.1:9/ws', stream: 'live' };
      const session = MeshSession.connect(
        faulty ? injectFaults(options, { forgeForwardedSequences: true }) : options,
        { createSocket: factory.create, clock },
      );
      sessions.push(session);
      const socket = factory.sockets.at(-1);
      if (socket === undefined) throw new Error('no socket');
      socket.accept();
      socket.receive(welcome(7, null, false));
      await session.ready;
      const node = (session as unknown as { node: MeshNode }).node;
      return faultsOf((node as unknown as { options: object }).options);
    };
    expect(await nodeFaults(true)).toEqual({ forgeForwardedSequences: true });
    expect(await nodeFaults(false)).toEqual({});
  });
});
