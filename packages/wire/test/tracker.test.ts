/**
 * The rendezvous protocol's JSON codec: every message type round-trips, every decoder error code is
 * reachable with a clear message, and no input (random or a mutated valid frame) makes it throw.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  announcementSigningBytes,
  decodeClientMessage,
  decodeServerMessage,
  encodeTrackerMessage,
  MAX_BOOTSTRAP_PEERS,
  MAX_CANDIDATE_BYTES,
  MAX_KEY_LENGTH,
  MAX_RECENT_ANNOUNCEMENTS,
  MAX_ANNOUNCED_PACKETS,
  MAX_SERVER_FRAME_CHARS,
  MAX_SDP_BYTES,
  MAX_TRACKER_FRAME_BYTES,
  MAX_ICE_FIELD_LENGTH,
  MAX_ICE_SERVERS,
  MAX_ICE_URLS,
  ROUTE_TYPES,
  utf8,
  validateIceServers,
  type ClientMessage,
  type IceConfig,
  type ServerMessage,
  type SignedAnnouncement,
  type TrackerDecodeResult,
  type TrackerErrorCode,
} from '@chunkycast/wire';

const SEED = 20_250_301;

const announcement: SignedAnnouncement = {
  stream: 'live.main_1-a',
  sequence: 42,
  uri: 'seg42.ts?token=x',
  bytes: 123_456,
  packets: 100,
  firstPacket: 1600,
  sha256: '0123456789abcdef'.repeat(4),
  packetHashes: '0f'.repeat(16 * 100),
  durationMs: 2000,
  publishedAtMs: 1_700_000_000_123,
  signature: 'c2lnbmF0dXJl',
};

const report = {
  parents: [1, null, 0xffff_ffff],
  children: [[2, 3], [], [4]],
  meshBytes: 1,
  originBytes: 2,
  uploadBytes: 3,
  stalls: 4,
  playing: true,
};

const connectivity = {
  open: { host: 1, srflx: 2, prflx: 0, relay: 3 },
  connected: { host: 4, srflx: 5, prflx: 6, relay: Number.MAX_SAFE_INTEGER },
  failed: 7,
  relayedBytes: 123_456_789,
};

const ice: IceConfig = {
  servers: [
    { urls: ['stun:stun.example.com:3478', 'stun:[2001:db8::1]'] },
    {
      urls: ['turn:turn.example.com:3478?transport=udp', 'turns:turn.example.com:5349?transport=tcp'],
      username: '1700021600:5',
      credential: 'K2Jn3h7Gd6c9uS8yTqzXvA0bW1E=',
    },
  ],
  expiresAtMs: 1_700_021_600_000,
};

const clientMessages: ClientMessage[] = [
  { type: 'join', stream: 'live', role: 'viewer' },
  { type: 'join', stream: 'live', role: 'source', key: 'secret' },
  { type: 'bootstrap', count: 1 },
  { type: 'bootstrap', count: MAX_BOOTSTRAP_PEERS },
  { type: 'signal', to: 0xffff_ffff, data: { type: 'offer', sdp: 'v=0\r\n' } },
  { type: 'signal', to: 7, data: { type: 'answer', sdp: '' } },
  { type: 'signal', to: 7, data: { type: 'offer', sdp: 'v=0', link: 3 } },
  {
    type: 'signal',
    to: 7,
    data: { type: 'candidate', candidate: { candidate: 'candidate:1', sdpMLineIndex: 0, sdpMid: '0' } },
  },
  {
    type: 'signal',
    to: 7,
    data: { type: 'candidate', candidate: { candidate: '', sdpMLineIndex: null, sdpMid: null } },
  },
  { type: 'announce', announcement },
  { type: 'report', report },
  { type: 'report', report: { ...report, connectivity } },
  { type: 'leave' },
  { type: 'join', stream: 'live', role: 'viewer', token: '1700000000.abc_-', resume: 'eyJ9.sig' },
];

const serverMessages: ServerMessage[] = [
  {
    type: 'welcome',
    peerId: 5,
    sourceId: 9,
    stream: 'live',
    publicKey: 'AAAA',
    announcements: [announcement],
    resume: 'eyJwIjo1fQ.c2ln-_',
    resumed: true,
    ice,
  },
  {
    type: 'welcome',
    peerId: 5,
    sourceId: 9,
    stream: 'live',
    publicKey: null,
    announcements: [],
    resume: null,
    resumed: false,
    ice: { servers: [], expiresAtMs: null },
  },
  { type: 'ice', ice },
  { type: 'ice', ice: { servers: [{ urls: ['stun:127.0.0.1:3478'] }], expiresAtMs: null } },
  { type: 'peers', peers: [] },
  { type: 'peers', peers: [1, 2, 0xffff_ffff] },
  { type: 'signal', from: 3, data: { type: 'offer', sdp: 'v=0' } },
  { type: 'announce', announcement },
  { type: 'error', code: 'badKey', message: 'the broadcaster key is wrong' },
];

function failure<T>(result: TrackerDecodeResult<T>): { code: TrackerErrorCode; message: string } {
  if (result.ok) throw new Error(`decoded: ${JSON.stringify(result.message)}`);
  return result.error;
}

function clientError(frame: unknown): { code: TrackerErrorCode; message: string } {
  return failure(decodeClientMessage(typeof frame === 'string' ? frame : JSON.stringify(frame)));
}

describe('round trips', () => {
  it.each(clientMessages.map((m) => [m.type, m] as const))('client %s', (_type, message) => {
    const decoded = decodeClientMessage(encodeTrackerMessage(message));
    expect(decoded).toEqual({ ok: true, message });
  });
  it.each(serverMessages.map((m) => [m.type, m] as const))('server %s', (_type, message) => {
    const decoded = decodeServerMessage(encodeTrackerMessage(message));
    expect(decoded).toEqual({ ok: true, message });
  });
  it('drops unknown fields and a viewer join without a key', () => {
    expect(decodeClientMessage('{"type":"join","stream":"s","role":"viewer","extra":1}')).toEqual({
      ok: true,
      message: { type: 'join', stream: 's', role: 'viewer' },
    });
  });
});

describe('decoder errors', () => {
  it('malformed: not JSON, or JSON but not an object', () => {
    for (const frame of ['', '{', 'nul', '[]', '"join"', '42', 'null'])
      expect(clientError(frame).code, frame).toBe('malformed');
    expect(clientError('{').message).toBe('frame is not JSON');
    expect(clientError('[1]').message).toBe('frame is not a JSON object');
    expect(failure(decodeServerMessage('{')).code).toBe('malformed');
  });

  it('tooLarge: a frame over the limit, before any parsing', () => {
    const big = `{"type":"leave","pad":"${'x'.repeat(MAX_TRACKER_FRAME_BYTES)}"}`;
    const e = clientError(big);
    expect(e.code).toBe('tooLarge');
    expect(e.message).toContain(String(MAX_TRACKER_FRAME_BYTES));
    // The tracker's frames may be larger (a welcome carries announcements), yet bounded too.
    const bigger = `{"type":"leave","pad":"${'x'.repeat(MAX_SERVER_FRAME_CHARS)}"}`;
    expect(failure(decodeServerMessage(bigger)).code).toBe('tooLarge');
  });

  it('unknownType: a missing, non-string or unknown type', () => {
    expect(clientError({ type: 'teleport' })).toEqual({
      code: 'unknownType',
      message: 'unknown message type "teleport"',
    });
    expect(clientError({})).toEqual({ code: 'unknownType', message: 'unknown message type undefined' });
    expect(clientError({ type: 3 }).code).toBe('unknownType');
    // A server-only type from a client, and the reverse.
    expect(clientError({ type: 'welcome' }).code).toBe('unknownType');
    expect(failure(decodeServerMessage('{"type":"join"}')).code).toBe('unknownType');
  });

  it('invalidField: each field out of bounds, naming the field', () => {
    const cases: [unknown, string][] = [
      [{ type: 'join', stream: 'bad/id', role: 'viewer' }, '"stream"'],
      [{ type: 'join', stream: '', role: 'viewer' }, '"stream"'],
      [{ type: 'join', stream: 'x'.repeat(65), role: 'viewer' }, '"stream"'],
      [{ type: 'join', stream: 's', role: 'admin' }, '"role"'],
      [{ type: 'join', stream: 's', role: 'source', key: 5 }, '"key"'],
      [{ type: 'join', stream: 's', role: 'source', key: 'k'.repeat(MAX_KEY_LENGTH + 1) }, '"key"'],
      [{ type: 'bootstrap', count: 0 }, '"count"'],
      [{ type: 'bootstrap', count: MAX_BOOTSTRAP_PEERS + 1 }, '"count"'],
      [{ type: 'bootstrap', count: 1.5 }, '"count"'],
      [{ type: 'signal', to: -1, data: { type: 'offer', sdp: '' } }, '"to"'],
      [{ type: 'signal', to: 2 ** 32, data: { type: 'offer', sdp: '' } }, '"to"'],
      [{ type: 'signal', to: 1, data: 'offer' }, '"data"'],
      [{ type: 'signal', to: 1, data: { type: 'offer', sdp: 'x'.repeat(MAX_SDP_BYTES + 1) } }, '"sdp"'],
      [{ type: 'signal', to: 1, data: { type: 'bye' } }, 'signal "type"'],
      [{ type: 'signal', to: 1, data: { type: 'offer', sdp: '', link: -1 } }, '"link"'],
      [
        {
          type: 'signal',
          to: 1,
          data: { type: 'candidate', candidate: { candidate: 'c'.repeat(MAX_CANDIDATE_BYTES + 1) } },
        },
        '"candidate"',
      ],
      [
        {
          type: 'signal',
          to: 1,
          data: { type: 'candidate', candidate: { candidate: '', sdpMLineIndex: 256 } },
        },
        '"sdpMLineIndex"',
      ],
      [{ type: 'announce', announcement: { ...announcement, sha256: 'AB'.repeat(32) } }, '"sha256"'],
      [{ type: 'announce', announcement: { ...announcement, packets: 0 } }, '"packets"'],
      [{ type: 'announce', announcement: { ...announcement, signature: 'not base64!' } }, '"signature"'],
      [{ type: 'announce', announcement: null }, '"announcement"'],
      [{ type: 'report', report: { ...report, parents: 'x' } }, '"parents"'],
      [{ type: 'report', report: { ...report, parents: ['x'] } }, '"parents"'],
      [{ type: 'report', report: { ...report, children: [[1.5]] } }, '"children"'],
      [{ type: 'report', report: { ...report, playing: 1 } }, '"playing"'],
      [{ type: 'report', report: { ...report, stalls: -1 } }, '"stalls"'],
      [{ type: 'join', stream: 'live', role: 'viewer', token: 'a b' }, '"token"'],
      [{ type: 'join', stream: 'live', role: 'viewer', token: 7 }, '"token"'],
      [{ type: 'join', stream: 'live', role: 'viewer', resume: 'x'.repeat(513) }, '"resume"'],
    ];
    for (const [frame, field] of cases) {
      const e = clientError(frame);
      expect(e.code, JSON.stringify(frame).slice(0, 120)).toBe('invalidField');
      expect(e.message, JSON.stringify(frame).slice(0, 120)).toContain(field);
    }
    const tooMany = Array.from({ length: MAX_RECENT_ANNOUNCEMENTS + 1 }, () => announcement);
    const welcome = {
      type: 'welcome',
      peerId: 1,
      sourceId: 2,
      stream: 's',
      publicKey: null,
      announcements: tooMany,
    };
    expect(failure(decodeServerMessage(JSON.stringify(welcome))).message).toContain('"announcements"');
    expect(failure(decodeServerMessage('{"type":"error","code":"teapot","message":"x"}')).code).toBe(
      'invalidField',
    );
    expect(failure(decodeServerMessage('{"type":"peers","peers":[-1]}')).code).toBe('invalidField');
  });
});

describe('ICE servers', () => {
  const serverError = (frame: unknown): { code: TrackerErrorCode; message: string } =>
    failure(decodeServerMessage(JSON.stringify(frame)));
  const iceFrame = (servers: unknown, expiresAtMs: unknown = null): unknown => ({
    type: 'ice',
    ice: { servers, expiresAtMs },
  });
  const url = (n: number): string => `turn:turn${n}.example.com:3478`;

  it('a welcome from an older tracker (no "ice") means no servers, nothing expiring', () => {
    const older = { ...serverMessages[1], ice: undefined };
    const decoded = decodeServerMessage(JSON.stringify(older));
    expect(decoded.ok && decoded.message.type === 'welcome' && decoded.message.ice).toEqual({
      servers: [],
      expiresAtMs: null,
    });
  });

  it('takes the most servers of the most URLs with the longest fields', () => {
    const longest = 'x'.repeat(MAX_ICE_FIELD_LENGTH);
    const servers = Array.from({ length: MAX_ICE_SERVERS }, (_, i) => ({
      urls: Array.from({ length: MAX_ICE_URLS }, (_, j) =>
        `turn:${'h'.repeat(MAX_ICE_FIELD_LENGTH - 12)}${i}${j}`.slice(0, MAX_ICE_FIELD_LENGTH),
      ),
      username: longest,
      credential: longest,
    }));
    const decoded = decodeServerMessage(JSON.stringify(iceFrame(servers, 1)));
    expect(decoded).toEqual({ ok: true, message: { type: 'ice', ice: { servers, expiresAtMs: 1 } } });
  });

  it('refuses what RTCPeerConnection must never get, naming the field', () => {
    const cases: [unknown, string][] = [
      [{ type: 'ice' }, '"ice"'],
      [{ type: 'ice', ice: [] }, '"ice"'],
      [iceFrame('stun:a'), '"servers"'],
      [iceFrame(Array.from({ length: MAX_ICE_SERVERS + 1 }, (_, i) => ({ urls: [url(i)] }))), '"servers"'],
      [iceFrame(['stun:a']), 'ICE server'],
      [iceFrame([{ urls: 'stun:a' }]), '"urls"'],
      [iceFrame([{ urls: [] }]), '"urls"'],
      [iceFrame([{ urls: Array.from({ length: MAX_ICE_URLS + 1 }, (_, i) => url(i)) }]), '"urls"'],
      [iceFrame([{ urls: ['http://turn.example.com'] }]), 'stun:'],
      [iceFrame([{ urls: ['javascript:alert(1)'] }]), 'stun:'],
      [iceFrame([{ urls: ['stun:'] }]), 'stun:'],
      [iceFrame([{ urls: ['stun:a b'] }]), 'stun:'],
      [iceFrame([{ urls: [7] }]), 'stun:'],
      [iceFrame([{ urls: [`stun:${'a'.repeat(MAX_ICE_FIELD_LENGTH)}`] }]), 'stun:'],
      [iceFrame([{ urls: [url(1)], username: 'u'.repeat(MAX_ICE_FIELD_LENGTH + 1) }]), '"username"'],
      [iceFrame([{ urls: [url(1)], username: 5 }]), '"username"'],
      [iceFrame([{ urls: [url(1)], credential: 'c'.repeat(MAX_ICE_FIELD_LENGTH + 1) }]), '"credential"'],
      [iceFrame([{ urls: [url(1)], credential: { secret: 1 } }]), '"credential"'],
      [iceFrame([], -1), '"expiresAtMs"'],
      [iceFrame([], 1.5), '"expiresAtMs"'],
      [iceFrame([], '1700000000000'), '"expiresAtMs"'],
      [{ ...serverMessages[0], ice: { servers: [{ urls: ['ftp://x'] }], expiresAtMs: null } }, 'stun:'],
      [{ ...serverMessages[0], ice: 'none' }, '"ice"'],
    ];
    for (const [frame, field] of cases) {
      const e = serverError(frame);
      expect(e.code, JSON.stringify(frame).slice(0, 120)).toBe('invalidField');
      expect(e.message, JSON.stringify(frame).slice(0, 120)).toContain(field);
    }
  });

  it('validateIceServers checks a list from outside the protocol the same way, never throwing', () => {
    const servers = [{ urls: ['stun:stun.example.com'] }, { urls: [url(1)], username: 'u', credential: 'c' }];
    expect(validateIceServers(servers)).toEqual({ ok: true, message: servers });
    expect(validateIceServers([])).toEqual({ ok: true, message: [] });
    for (const bad of [
      null,
      'stun:a',
      {},
      [{ urls: ['https://example.com'] }],
      [{ urls: [url(1)], username: null }],
      Array.from({ length: MAX_ICE_SERVERS + 1 }, () => ({ urls: [url(1)] })),
    ]) {
      const result = validateIceServers(bad);
      expect(result.ok, JSON.stringify(bad)).toBe(false);
      if (!result.ok) expect(result.error.code).toBe('invalidField');
    }
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
        const result = validateIceServers(value);
        if (!result.ok) expect(result.error.message.startsWith('decoder fault')).toBe(false);
      }),
      { seed: SEED, numRuns: 1000 },
    );
  });
});

describe('connectivity in reports', () => {
  it('is optional (older SDKs send none) and counts every route type', () => {
    const decoded = decodeClientMessage(JSON.stringify({ type: 'report', report }));
    expect(decoded.ok && decoded.message.type === 'report' && decoded.message.report.connectivity).toBe(
      undefined,
    );
    expect(Object.keys(connectivity.open).sort()).toEqual([...ROUTE_TYPES].sort());
  });

  it('refuses counts that are not whole non-negative numbers, and missing route types', () => {
    const { relay: _relay, ...noRelay } = connectivity.open;
    const cases: [unknown, string][] = [
      [{ ...connectivity, open: noRelay }, '"relay"'],
      [{ ...connectivity, open: { ...connectivity.open, host: -1 } }, '"host"'],
      [{ ...connectivity, connected: { ...connectivity.connected, srflx: 1.5 } }, '"srflx"'],
      [{ ...connectivity, connected: null }, '"connected"'],
      [{ ...connectivity, failed: '3' }, '"failed"'],
      [{ ...connectivity, relayedBytes: Number.MAX_SAFE_INTEGER + 2 }, '"relayedBytes"'],
      ['all good', '"connectivity"'],
    ];
    for (const [value, field] of cases) {
      const e = clientError({ type: 'report', report: { ...report, connectivity: value } });
      expect(e.code, JSON.stringify(value)).toBe('invalidField');
      expect(e.message, JSON.stringify(value)).toContain(field);
    }
  });
});

describe('announcementSigningBytes', () => {
  it('is the UTF-8 of a fixed-order array without the signature', () => {
    const bytes = announcementSigningBytes({ ...announcement, uri: 'é😀' });
    const expected = JSON.stringify([
      'chunkycast-segment-v3',
      announcement.stream,
      announcement.sequence,
      'é😀',
      announcement.bytes,
      announcement.packets,
      announcement.firstPacket,
      announcement.sha256,
      announcement.packetHashes,
      announcement.durationMs,
      announcement.publishedAtMs,
    ]);
    expect(Buffer.from(bytes).toString('utf8')).toBe(expected);
    const resigned: SignedAnnouncement = { ...announcement, signature: 'other' };
    expect(announcementSigningBytes(resigned)).toEqual(announcementSigningBytes(announcement));
  });

  it('signs the packet size of a segment cut while written under its own tag', () => {
    const progressive = { ...announcement, packetBytes: 16_384 };
    const text = Buffer.from(announcementSigningBytes(progressive)).toString('utf8');
    const fields = JSON.parse(text) as unknown[];
    expect(fields[0]).toBe('chunkycast-segment-v4');
    expect(fields.at(-1)).toBe(16_384);
    expect(fields.slice(1, -1)).toEqual(
      (JSON.parse(Buffer.from(announcementSigningBytes(announcement)).toString('utf8')) as unknown[]).slice(
        1,
      ),
    );
  });

  it('utf8 agrees with TextEncoder on any string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 64 }), (s) => {
        expect(utf8(s)).toEqual(new TextEncoder().encode(s));
      }),
      { seed: SEED, numRuns: 500 },
    );
  });
});

describe('fuzz: decoding never throws', () => {
  const validFrames = [...clientMessages, ...serverMessages].map((m) => encodeTrackerMessage(m));

  function checkTyped(result: TrackerDecodeResult<unknown>): void {
    if (result.ok) expect(typeof result.message).toBe('object');
    else {
      expect(['malformed', 'tooLarge', 'unknownType', 'invalidField']).toContain(result.error.code);
      expect(result.error.message.startsWith('decoder fault')).toBe(false);
    }
  }

  it('on random strings', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (s) => {
        checkTyped(decodeClientMessage(s));
        checkTyped(decodeServerMessage(s));
      }),
      { seed: SEED, numRuns: 2000 },
    );
  });

  it('on arbitrary JSON values, alone and under a real type', () => {
    const types = fc.constantFrom(
      'join',
      'bootstrap',
      'signal',
      'announce',
      'report',
      'leave',
      'welcome',
      'ice',
      'peers',
      'error',
    );
    fc.assert(
      fc.property(
        types,
        fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 3 })),
        (type, fields) => {
          const frame = JSON.stringify({ ...fields, type });
          checkTyped(decodeClientMessage(frame));
          checkTyped(decodeServerMessage(frame));
        },
      ),
      { seed: SEED, numRuns: 2000 },
    );
  });

  it('on valid frames with characters changed, inserted, deleted or cut off', () => {
    const mutation = fc.oneof(
      fc.record({
        kind: fc.constant('set' as const),
        at: fc.nat(),
        ch: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
      }),
      fc.record({
        kind: fc.constant('insert' as const),
        at: fc.nat(),
        ch: fc.string({ unit: 'binary', minLength: 1, maxLength: 4 }),
      }),
      fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), ch: fc.constant('') }),
      fc.record({ kind: fc.constant('cut' as const), at: fc.nat(), ch: fc.constant('') }),
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...validFrames),
        fc.array(mutation, { minLength: 1, maxLength: 4 }),
        (frame, mutations) => {
          let s = frame;
          for (const m of mutations) {
            const at = m.at % (s.length + 1);
            if (m.kind === 'set') s = s.slice(0, at) + m.ch + s.slice(at + 1);
            else if (m.kind === 'insert') s = s.slice(0, at) + m.ch + s.slice(at);
            else if (m.kind === 'delete') s = s.slice(0, at) + s.slice(at + 1);
            else s = s.slice(0, at);
          }
          checkTyped(decodeClientMessage(s));
          checkTyped(decodeServerMessage(s));
        },
      ),
      { seed: SEED, numRuns: 3000 },
    );
  });

  it('on valid messages with one field replaced by any JSON value; what it accepts re-encodes the same', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...clientMessages),
        fc.nat(),
        fc.jsonValue({ maxDepth: 2 }),
        (message, pick, value) => {
          const object = JSON.parse(encodeTrackerMessage(message)) as Record<string, unknown>;
          const keys = Object.keys(object);
          const key = keys[pick % keys.length] ?? 'type';
          object[key] = value;
          const result = decodeClientMessage(JSON.stringify(object));
          checkTyped(result);
          if (result.ok) expect(decodeClientMessage(encodeTrackerMessage(result.message))).toEqual(result);
        },
      ),
      { seed: SEED, numRuns: 3000 },
    );
  });
});

describe('per-packet hashes in announcements', () => {
  it('must hold exactly 32 lower-case hex digits per packet', () => {
    const frame = (packetHashes: string, packets = announcement.packets): string =>
      JSON.stringify({ type: 'announce', announcement: { ...announcement, packets, packetHashes } });
    expect(decodeClientMessage(frame('0f'.repeat(16 * 100))).ok).toBe(true);
    for (const bad of [
      '0f'.repeat(16 * 99),
      '0f'.repeat(16 * 101),
      'AB'.repeat(16 * 100),
      'zz'.repeat(16 * 100),
    ]) {
      const r = decodeClientMessage(frame(bad));
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.code).toBe('invalidField');
    }
    const tooMany = decodeClientMessage(frame('0f'.repeat(16 * 1025), 1025));
    expect(tooMany.ok).toBe(false);
  });
});

describe('error messages stay decodable', () => {
  it('cuts a long unknown type so the answer fits the peer-side limits', () => {
    const e = clientError({ type: 'a'.repeat(2000) });
    expect(e.code).toBe('unknownType');
    expect(e.message.length).toBeLessThan(200);
    expect(e.message).toContain('2000 characters');
    const answer = decodeServerMessage(JSON.stringify({ type: 'error', code: e.code, message: e.message }));
    expect(answer.ok).toBe(true);
  });
});

describe('a welcome at its largest', () => {
  it('decodes with the most announcements of the most packets, and a larger frame is refused', () => {
    const biggest: SignedAnnouncement = {
      ...announcement,
      packets: MAX_ANNOUNCED_PACKETS,
      packetHashes: 'ab'.repeat(16 * MAX_ANNOUNCED_PACKETS),
      uri: 'u'.repeat(1024),
    };
    const welcome = {
      type: 'welcome',
      peerId: 1,
      sourceId: 2,
      stream: 's',
      publicKey: null,
      announcements: Array.from({ length: MAX_RECENT_ANNOUNCEMENTS }, () => biggest),
      resume: 'r'.repeat(512),
      resumed: false,
      // The largest ICE configuration too: the frame limit leaves room for it.
      ice: {
        servers: Array.from({ length: MAX_ICE_SERVERS }, () => ({
          urls: Array.from({ length: MAX_ICE_URLS }, () => `turn:${'h'.repeat(MAX_ICE_FIELD_LENGTH - 5)}`),
          username: 'u'.repeat(MAX_ICE_FIELD_LENGTH),
          credential: 'c'.repeat(MAX_ICE_FIELD_LENGTH),
        })),
        expiresAtMs: Number.MAX_SAFE_INTEGER,
      },
    };
    const frame = JSON.stringify(welcome);
    expect(frame.length).toBeGreaterThan(MAX_TRACKER_FRAME_BYTES);
    expect(decodeServerMessage(frame).ok).toBe(true);
    expect(failure(decodeServerMessage(frame + ' '.repeat(MAX_SERVER_FRAME_CHARS))).code).toBe('tooLarge');
  });
});
