// MeshSession and ICE: which STUN/TURN servers each new RTCPeerConnection gets (the option, else the
// tracker's welcome and its renewals), what it reports about its links, and the failure event. The
// tracker is a fake socket; WebRTC is node-datachannel.
import { afterEach, describe, expect, it } from 'vitest';
import {
  MeshSession,
  type ConnectFailure,
  type MeshSessionOptions,
  type SessionHost,
} from '@chunkycast/sdk/core';
import type { IceConfig, PeerReport } from '@chunkycast/wire';
import { FakeClock, socketFactory, welcome, type FakeSocket } from './tracker-fakes.js';
import { until } from './until.js';

const sessions: MeshSession[] = [];
afterEach(() => {
  for (const s of sessions.splice(0)) s.close();
});

const TRACKER_ICE: IceConfig = {
  servers: [
    { urls: ['stun:stun.example.com:3478'] },
    { urls: ['turn:turn.example.com:3478'], username: '1700003600:7', credential: 'c2VjcmV0' },
  ],
  expiresAtMs: 1_700_003_600_000,
};

async function joined(
  options: Partial<MeshSessionOptions> = {},
  host: SessionHost = {},
  ice: IceConfig = TRACKER_ICE,
): Promise<{ session: MeshSession; socket: FakeSocket; rtcConfig: () => Record<string, unknown> }> {
  const clock = new FakeClock();
  const factory = socketFactory(clock);
  const session = MeshSession.connect(
    { tracker: 'ws://127.0.0.1:9/ws', stream: 'live', ...options },
    { createSocket: factory.create, clock, ...host },
  );
  sessions.push(session);
  const socket = factory.sockets[0];
  if (socket === undefined) throw new Error('no socket');
  socket.accept();
  socket.receive(welcome(7, null, false, { ice }));
  await session.ready;
  // What the session hands MeshNode for each new connection.
  const rtcConfig = (): Record<string, unknown> =>
    (session as unknown as { rtcConfig(): Record<string, unknown> }).rtcConfig();
  return { session, socket, rtcConfig };
}

describe('ICE servers of new connections', () => {
  it('are the welcome’s, then the latest renewal’s', async () => {
    const t = await joined({}, { rtcConfig: { bindAddress: '127.0.0.1', iceServers: [] } });
    expect(t.rtcConfig()).toEqual({ bindAddress: '127.0.0.1', iceServers: TRACKER_ICE.servers });
    const renewed: IceConfig = {
      servers: [{ urls: ['turn:turn.example.com:3478'], username: '1700006000:7', credential: 'bmV3' }],
      expiresAtMs: 1_700_006_000_000,
    };
    t.socket.receive({ type: 'ice', ice: renewed });
    expect(t.rtcConfig()).toEqual({ bindAddress: '127.0.0.1', iceServers: renewed.servers });
  });

  it('are the option’s when given, whatever the tracker sends; relay policy on request', async () => {
    const mine = [{ urls: ['stun:mine.example.com'] }];
    const t = await joined({ iceServers: mine, iceTransportPolicy: 'relay' });
    expect(t.rtcConfig()).toEqual({ iceServers: mine, iceTransportPolicy: 'relay' });
    t.socket.receive({ type: 'ice', ice: TRACKER_ICE });
    expect(t.rtcConfig().iceServers).toEqual(mine);
  });

  it('fall back to the host’s when the tracker has none', async () => {
    const hostServers = [{ urls: ['stun:127.0.0.1:3478'] }];
    const t = await joined(
      { iceTransportPolicy: 'all' },
      { rtcConfig: { iceServers: hostServers } },
      { servers: [], expiresAtMs: null },
    );
    expect(t.rtcConfig()).toEqual({ iceServers: hostServers });
  });
});

describe('connectivity', () => {
  it('reports links, failures and relayed bytes to the tracker, and fires connection-failed', async () => {
    const t = await joined({}, { rtcConfig: { bindAddress: '127.0.0.1', iceServers: [] } });
    const failures: ConnectFailure[] = [];
    t.session.addEventListener('connection-failed', (e) => {
      failures.push((e as CustomEvent<ConnectFailure>).detail);
    });
    expect(t.session.stats()).toMatchObject({
      peerLinks: [],
      peersByRoute: { host: 0, srflx: 0, prflx: 0, relay: 0 },
      relayedBytes: 0,
      connectFailures: 0,
    });
    // An offer libdatachannel cannot parse: the answering link fails before it opens.
    t.socket.receive({ type: 'signal', from: 42, data: { type: 'offer', sdp: 'v=0\r\nbroken', link: 5 } });
    await until(() => failures.length > 0, 5_000, 'the failed link to be reported');
    expect(failures[0]).toMatchObject({ peer: 42, reason: 'error', initiator: false });
    expect(failures[0]?.afterMs).toBeGreaterThanOrEqual(0);
    expect(t.session.stats().connectFailures).toBe(1);
    // The next periodic report (every 2 s) carries it.
    await until(() => t.socket.messages('report').length > 0, 5_000, 'a report');
    const report: PeerReport | undefined = t.socket.messages('report').at(-1)?.report;
    expect(report?.connectivity).toEqual({
      open: { host: 0, srflx: 0, prflx: 0, relay: 0 },
      connected: { host: 0, srflx: 0, prflx: 0, relay: 0 },
      failed: 1,
      relayedBytes: 0,
    });
  }, 15_000);
});
