// A whole (non-trickle) offer or answer goes out once it holds the candidates that can connect, not
// when ICE gathering ends (mesh-node.ts, sendDescriptionWhenUsable): driven here with a fake peer
// connection and fake timers, as simple-peer's internals see it.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type SimplePeer from '@thaunknown/simple-peer/lite.js';
import { sendDescriptionWhenUsable } from '../src/mesh-node.js';

class FakePc extends EventTarget {
  iceGatheringState = 'gathering';
  candidate(line: string | null): void {
    const event = new Event('icecandidate') as Event & { candidate: { candidate: string } | null };
    event.candidate = line === null ? null : { candidate: line };
    this.dispatchEvent(event);
  }
  complete(): void {
    this.iceGatheringState = 'complete';
    this.dispatchEvent(new Event('icegatheringstatechange'));
  }
}

const UDP_HOST = 'candidate:1 1 udp 2122260223 127.0.0.1 56568 typ host generation 0';
const TCP_HOST = 'candidate:2 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active generation 0';
const SRFLX = 'candidate:3 1 udp 1686052607 203.0.113.7 61000 typ srflx raddr 10.0.0.2 rport 5000';
const RELAY = 'candidate:4 1 udp 41885439 198.51.100.1 49152 typ relay raddr 203.0.113.7 rport 61000';

function fakePeer(): { peer: SimplePeer; pc: FakePc; ends: () => number } {
  const pc = new FakePc();
  let ends = 0;
  const peer = {
    _pc: pc,
    _onIceCandidate(event: { candidate: unknown }) {
      if (event.candidate === null) ends++;
    },
  } as unknown as SimplePeer;
  return { peer, pc, ends: () => ends };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('sendDescriptionWhenUsable', () => {
  it('without ICE servers: ends gathering shortly after the first UDP host candidate, once', () => {
    vi.useFakeTimers();
    const { peer, pc, ends } = fakePeer();
    sendDescriptionWhenUsable(peer, {}, true);
    pc.candidate(TCP_HOST);
    vi.advanceTimersByTime(1000);
    expect(ends()).toBe(0); // a TCP candidate alone connects to nobody
    pc.candidate(UDP_HOST);
    vi.advanceTimersByTime(14);
    expect(ends()).toBe(0); // siblings on other interfaces get a moment
    vi.advanceTimersByTime(1);
    expect(ends()).toBe(1);
    // Gathering's real end, and more candidates, do not end it twice.
    pc.candidate(UDP_HOST);
    pc.complete();
    vi.advanceTimersByTime(1000);
    expect(ends()).toBe(1);
  });

  it('with STUN and TURN servers: waits for a srflx and a relay candidate too', () => {
    vi.useFakeTimers();
    const { peer, pc, ends } = fakePeer();
    sendDescriptionWhenUsable(
      peer,
      {
        iceServers: [{ urls: 'stun:s.example' }, { urls: 'turn:t.example', username: 'u', credential: 'c' }],
      },
      true,
    );
    pc.candidate(UDP_HOST);
    pc.candidate(SRFLX);
    vi.advanceTimersByTime(1000);
    expect(ends()).toBe(0);
    pc.candidate(RELAY);
    vi.advanceTimersByTime(15);
    expect(ends()).toBe(1);
  });

  it('under the relay policy a relay candidate is enough', () => {
    vi.useFakeTimers();
    const { peer, pc, ends } = fakePeer();
    sendDescriptionWhenUsable(
      peer,
      { iceServers: [{ urls: 'turn:t.example' }], iceTransportPolicy: 'relay' },
      true,
    );
    pc.candidate(RELAY);
    vi.advanceTimersByTime(15);
    expect(ends()).toBe(1);
  });

  it('ends at gathering complete when the wanted candidates never come, and only then without early ends (node-datachannel)', () => {
    vi.useFakeTimers();
    const stun = fakePeer();
    sendDescriptionWhenUsable(stun.peer, { iceServers: [{ urls: 'stun:s.example' }] }, true);
    stun.pc.candidate(UDP_HOST); // a public host: the browser drops the srflx equal to it
    vi.advanceTimersByTime(1000);
    expect(stun.ends()).toBe(0);
    stun.pc.complete();
    expect(stun.ends()).toBe(1);
    const native = fakePeer();
    sendDescriptionWhenUsable(native.peer, {}, false);
    native.pc.candidate(UDP_HOST);
    vi.advanceTimersByTime(1000);
    expect(native.ends()).toBe(0);
    native.pc.complete();
    expect(native.ends()).toBe(1);
  });

  it('ignores malformed candidates', () => {
    vi.useFakeTimers();
    const { peer, pc, ends } = fakePeer();
    sendDescriptionWhenUsable(peer, {}, true);
    pc.candidate('candidate:garbage');
    pc.candidate('');
    pc.candidate(null);
    vi.advanceTimersByTime(1000);
    expect(ends()).toBe(0);
  });
});
