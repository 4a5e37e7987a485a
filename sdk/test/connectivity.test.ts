// How a link connects, from getStats() reports shaped like Chrome's, Firefox's and node-datachannel's
// polyfill's (the rule for a link's route type is in connectivity.ts), and ICE servers adapted to
// node-datachannel.
import { describe, expect, it } from 'vitest';
import { forNodeDatachannel } from '@chunkycast/sdk/core';
import {
  candidateKindsWanted,
  candidateLineKind,
  candidateType,
  routeOf,
  selectedPairOf,
  selectedPairOfReport,
} from '../src/connectivity.js';
import type { RouteType } from '@chunkycast/wire';

describe('routeOf: the less direct end decides', () => {
  it('relay over prflx over srflx over host, either end; unknown when an end is', () => {
    const cases: [RouteType | null, RouteType | null, RouteType | null][] = [
      ['host', 'host', 'host'],
      ['host', 'srflx', 'srflx'],
      ['srflx', 'host', 'srflx'],
      ['srflx', 'prflx', 'prflx'],
      ['prflx', 'srflx', 'prflx'],
      ['host', 'prflx', 'prflx'],
      ['relay', 'host', 'relay'],
      ['srflx', 'relay', 'relay'],
      ['prflx', 'relay', 'relay'],
      ['relay', 'relay', 'relay'],
      [null, 'relay', null],
      ['host', null, null],
    ];
    for (const [local, remote, route] of cases)
      expect(routeOf(local, remote), `${local}/${remote}`).toBe(route);
  });

  it('reads candidate types, Firefox’s older spellings too', () => {
    expect(['host', 'srflx', 'prflx', 'relay'].map(candidateType)).toEqual([
      'host',
      'srflx',
      'prflx',
      'relay',
    ]);
    expect(['serverreflexive', 'peerreflexive', 'relayed'].map(candidateType)).toEqual([
      'srflx',
      'prflx',
      'relay',
    ]);
    expect([undefined, 7, 'mdns', ''].map(candidateType)).toEqual([null, null, null, null]);
  });
});

/** A Chrome-shaped report: a transport naming the selected pair, and a losing pair beside it. */
function chromeReport(local: string, remote: string): unknown[] {
  return [
    { id: 'T01', type: 'transport', selectedCandidatePairId: 'CPa_b', dtlsState: 'connected' },
    {
      id: 'CPa_b',
      type: 'candidate-pair',
      localCandidateId: 'Ia',
      remoteCandidateId: 'Ib',
      state: 'succeeded',
      nominated: true,
      currentRoundTripTime: 0.0423,
      bytesSent: 12_000,
      bytesReceived: 34_000,
    },
    // Nominated and succeeded too (an earlier choice), more bytes: the transport's word wins.
    {
      id: 'CPc_d',
      type: 'candidate-pair',
      localCandidateId: 'Ic',
      remoteCandidateId: 'Id',
      state: 'succeeded',
      nominated: true,
      currentRoundTripTime: 0.3,
      bytesSent: 99_000_000,
      bytesReceived: 0,
    },
    { id: 'Ia', type: 'local-candidate', candidateType: local, address: '192.0.2.1' },
    { id: 'Ib', type: 'remote-candidate', candidateType: remote, address: '198.51.100.7' },
    { id: 'Ic', type: 'local-candidate', candidateType: 'host' },
    { id: 'Id', type: 'remote-candidate', candidateType: 'host' },
    { id: 'D1', type: 'data-channel', bytesSent: 5 },
  ];
}

/** A report as a Map by id that counts full scans (values()), as RTCStatsReport would be read. */
class CountingReport extends Map<string, unknown> {
  scans = 0;
  constructor(stats: unknown[]) {
    super(stats.map((x) => [(x as { id: string }).id, x]));
  }
  override values(): MapIterator<unknown> {
    this.scans++;
    return super.values();
  }
}

describe('selectedPairOfReport', () => {
  it('scans a link’s first report, then looks the transport’s pair up by id', () => {
    const memo = { transportId: null as string | null };
    const first = new CountingReport(chromeReport('srflx', 'relay'));
    const scanned = selectedPairOfReport(first, memo);
    expect(memo.transportId).toBe('T01');
    expect(first.scans).toBe(1);
    const next = new CountingReport(chromeReport('srflx', 'relay'));
    expect(selectedPairOfReport(next, memo)).toEqual(scanned);
    expect(next.scans).toBe(0);
    expect(scanned).toEqual(selectedPairOf(chromeReport('srflx', 'relay')));
  });

  it('scans again when the remembered transport or its pair is gone', () => {
    const memo = { transportId: 'T09' as string | null };
    const report = new CountingReport(chromeReport('host', 'host'));
    expect(selectedPairOfReport(report, memo)?.route).toBe('host');
    expect(report.scans).toBe(1);
    expect(memo.transportId).toBe('T01');
    const noPair = new CountingReport(
      chromeReport('host', 'host').filter((x) => (x as { id: string }).id !== 'CPa_b'),
    );
    // The transport names a pair that is not there: a full scan, which finds the other nominated pair.
    expect(selectedPairOfReport(noPair, memo)?.bytesSent).toBe(99_000_000);
    expect(noPair.scans).toBe(1);
  });
});

describe('selectedPairOf', () => {
  it('takes the pair the transport selected (browser-shaped), rtt in ms from seconds', () => {
    expect(selectedPairOf(chromeReport('srflx', 'relay'))).toEqual({
      localCandidateType: 'srflx',
      remoteCandidateType: 'relay',
      route: 'relay',
      rttMs: 42.3,
      bytesSent: 12_000,
      bytesReceived: 34_000,
    });
    expect(selectedPairOf(chromeReport('host', 'prflx'))?.route).toBe('prflx');
    expect(selectedPairOf(chromeReport('host', 'host'))?.route).toBe('host');
  });

  it('without a transport: a pair marked selected (Firefox), else the busiest nominated succeeded one', () => {
    const firefox = [
      {
        id: 'p1',
        type: 'candidate-pair',
        localCandidateId: 'l1',
        remoteCandidateId: 'r1',
        state: 'succeeded',
      },
      {
        id: 'p2',
        type: 'candidate-pair',
        localCandidateId: 'l2',
        remoteCandidateId: 'r2',
        state: 'succeeded',
        nominated: true,
        selected: true,
      },
      { id: 'l1', type: 'local-candidate', candidateType: 'host' },
      { id: 'r1', type: 'remote-candidate', candidateType: 'host' },
      { id: 'l2', type: 'local-candidate', candidateType: 'relayed' },
      { id: 'r2', type: 'remote-candidate', candidateType: 'serverreflexive' },
    ];
    expect(selectedPairOf(firefox)).toMatchObject({
      localCandidateType: 'relay',
      remoteCandidateType: 'srflx',
      route: 'relay',
      rttMs: null,
      bytesSent: 0,
      bytesReceived: 0,
    });
    const noTransport = chromeReport('srflx', 'srflx').filter(
      (s) => (s as { type: string }).type !== 'transport',
    );
    // The earlier pair carried far more: it is the one in use as far as the stats can tell.
    expect(selectedPairOf(noTransport)).toMatchObject({ route: 'host', bytesSent: 99_000_000, rttMs: 300 });
  });

  it('node-datachannel’s polyfill: one succeeded pair, rtt already in ms, −1 when unknown', () => {
    const polyfill = (rtt: number): unknown[] => [
      { id: 'RTCIceCandidate_a', type: 'local-candidate', candidateType: 'host', ip: '127.0.0.1' },
      { id: 'RTCIceCandidate_b', type: 'remote-candidate', candidateType: 'prflx', ip: '127.0.0.1' },
      {
        id: 'RTCIceCandidatePair_a_b',
        type: 'candidate-pair',
        localCandidateId: 'RTCIceCandidate_a',
        remoteCandidateId: 'RTCIceCandidate_b',
        state: 'succeeded',
        nominated: true,
        bytesSent: 5,
        bytesReceived: 0,
        currentRoundTripTime: rtt,
      },
      { id: 'RTCTransport_0_1', type: 'transport', selectedCandidatePairId: 'RTCIceCandidatePair_a_b' },
      { id: 'P', type: 'peer-connection' },
    ];
    expect(selectedPairOf(polyfill(3), 'ms')).toMatchObject({ route: 'prflx', rttMs: 3, bytesSent: 5 });
    expect(selectedPairOf(polyfill(-1), 'ms')?.rttMs).toBeNull();
  });

  it('missing or broken fields: null without a pair, unknown ends and zero bytes otherwise', () => {
    expect(selectedPairOf([])).toBeNull();
    expect(
      selectedPairOf([null, 7, 'x', { type: 'transport' }, { id: 'c', type: 'local-candidate' }]),
    ).toBeNull();
    // Checks still running: nothing selected yet.
    expect(
      selectedPairOf([{ id: 'p', type: 'candidate-pair', state: 'in-progress', nominated: true }]),
    ).toBeNull();
    // The transport names a pair the report lacks, and no other pair qualifies.
    expect(selectedPairOf([{ id: 't', type: 'transport', selectedCandidatePairId: 'gone' }])).toBeNull();
    // Not connected yet in the polyfill: a pair with no candidate types (its ends are undefined).
    const bare = selectedPairOf([
      { id: 'l', type: 'local-candidate' },
      {
        id: 'p',
        type: 'candidate-pair',
        localCandidateId: 'l',
        remoteCandidateId: 'missing',
        state: 'succeeded',
        nominated: true,
        bytesSent: -4,
        bytesReceived: Number.NaN,
        currentRoundTripTime: 'soon',
      },
    ]);
    expect(bare).toEqual({
      localCandidateType: null,
      remoteCandidateType: null,
      route: null,
      rttMs: null,
      bytesSent: 0,
      bytesReceived: 0,
    });
  });
});

describe('forNodeDatachannel', () => {
  const config = (iceServers: unknown): Record<string, unknown> => ({ bindAddress: '127.0.0.1', iceServers });

  it('turns TURN URLs with credentials into node-datachannel servers, whatever the username holds', () => {
    const adapted = forNodeDatachannel(
      config([
        { urls: ['stun:stun.example.com:3478'] },
        {
          urls: [
            'turn:turn.example.com',
            'turn:198.51.100.9:3479?transport=tcp',
            'turns:[2001:db8::9]:443?transport=tcp',
            'stun:stun2.example.com',
            'stuns:stun3.example.com',
          ],
          username: '1700003600:42',
          credential: 'vEPNPSlFedzSDYuBLxP0Wv5kb5Y=',
        },
      ]),
    );
    expect(adapted.bindAddress).toBe('127.0.0.1');
    const servers = adapted.iceServers as { urls: unknown[]; username?: string }[];
    expect(servers).toHaveLength(2);
    expect(servers[0]).toEqual({ urls: ['stun:stun.example.com:3478'] });
    // No credentials of its own, so the polyfill passes its `urls` entries through untouched.
    expect(servers[1]?.username).toBeUndefined();
    const [udp, tcp, tls, stun, ...rest] = servers[1]?.urls ?? [];
    expect(rest).toEqual([]);
    const secret = { username: '1700003600:42', password: 'vEPNPSlFedzSDYuBLxP0Wv5kb5Y=' };
    expect(udp).toMatchObject({ hostname: 'turn.example.com', port: 3478, relayType: 'TurnUdp', ...secret });
    expect(tcp).toMatchObject({ hostname: '198.51.100.9', port: 3479, relayType: 'TurnTcp', ...secret });
    expect(tls).toMatchObject({ hostname: '2001:db8::9', port: 443, relayType: 'TurnTls', ...secret });
    // The polyfill checks every entry with new URL(): they read as plain URLs.
    expect([udp, tcp, tls].map((u) => new URL(String(u)).protocol)).toEqual(['turn:', 'turn:', 'turns:']);
    expect(String(udp)).toBe('turn:turn.example.com:3478');
    expect(stun).toBe('stun:stun2.example.com');
  });

  it('leaves servers without credentials and configurations without servers as they are', () => {
    expect(forNodeDatachannel({ bindAddress: 'x' })).toEqual({ bindAddress: 'x' });
    expect(forNodeDatachannel(config([{ urls: 'turn:a.example' }, null, { urls: ['stuns:b'] }]))).toEqual(
      config([{ urls: ['turn:a.example'] }]),
    );
  });
});

describe('when a whole offer or answer can go out before gathering ends', () => {
  it('wants a host candidate, and srflx or relay only for the servers configured', () => {
    expect([...candidateKindsWanted({})]).toEqual(['host']);
    expect([...candidateKindsWanted({ iceServers: [] })]).toEqual(['host']);
    expect([...candidateKindsWanted({ iceServers: [{ urls: 'stun:s.example:3478' }] })]).toEqual([
      'host',
      'srflx',
    ]);
    expect(
      [
        ...candidateKindsWanted({
          iceServers: [
            { urls: ['stun:s.example', 'turn:t.example?transport=udp'], username: 'u', credential: 'c' },
            { urls: 'turns:t.example:5349' },
          ],
        }),
      ].sort(),
    ).toEqual(['host', 'relay', 'srflx']);
    // Under the relay policy the browser surfaces nothing but relays.
    expect([
      ...candidateKindsWanted({ iceServers: [{ urls: 'turn:t.example' }], iceTransportPolicy: 'relay' }),
    ]).toEqual(['relay']);
    // Malformed entries are ignored, not thrown on.
    expect([
      ...candidateKindsWanted({ iceServers: [null, 7, { urls: [3, 'http://x'] }, { urls: 'stun:a' }] }),
    ]).toEqual(['host', 'srflx']);
    expect([...candidateKindsWanted({ iceServers: 'stun:a' })]).toEqual(['host']);
  });

  it('reads the transport and type of candidate lines as Chromium, Firefox and libjuice write them', () => {
    // Chromium's loopback UDP host candidate and the TCP one it gathers ~120 ms later.
    expect(
      candidateLineKind(
        'candidate:1640297521 1 udp 2122260223 127.0.0.1 56568 typ host generation 0 ufrag hSMY network-id 1',
      ),
    ).toEqual({ udp: true, type: 'host' });
    expect(
      candidateLineKind(
        'candidate:520820393 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active generation 0',
      ),
    ).toEqual({ udp: false, type: 'host' });
    // mDNS host names, Firefox's upper-case transport, an SDP attribute line.
    expect(candidateLineKind('candidate:0 1 UDP 2122252543 3c6e5b1a-9f.local 50123 typ host')).toEqual({
      udp: true,
      type: 'host',
    });
    expect(
      candidateLineKind(
        'a=candidate:2 1 UDP 1686052863 203.0.113.7 61000 typ srflx raddr 10.0.0.2 rport 5000',
      ),
    ).toEqual({ udp: true, type: 'srflx' });
    expect(
      candidateLineKind(
        'candidate:3 1 udp 41885439 198.51.100.1 49152 typ relay raddr 203.0.113.7 rport 61000',
      ),
    ).toEqual({ udp: true, type: 'relay' });
    for (const bad of [
      '',
      'candidate:',
      'candidate:1 1 udp x 1.2.3.4 5 typ host',
      'candidate:1 1 udp 1 a 5 typ weird',
    ])
      expect(candidateLineKind(bad)).toBeNull();
  });
});
