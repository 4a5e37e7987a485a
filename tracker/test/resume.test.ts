/**
 * Resume tickets: a peer that lost its WebSocket, or whose tracker restarted, gets its old peer id
 * back, so its WebRTC links and its place in the trees (which name it by that id) stay valid.
 */
import { describe, expect, it } from 'vitest';
import { createTracker, makeResumeTicket, sourceIdFor } from '@chunkycast/tracker';
import { cleanUpAfterEach, connect, eventually, KEY, start, track, within } from './ws-client.js';

cleanUpAfterEach();

const OFFER = { type: 'offer', sdp: 'v=0\r\n' } as const;

describe('resume tickets', () => {
  it('come with every welcome and give a reconnecting viewer its id back', async () => {
    const tracker = await start();
    const first = await connect(tracker);
    const welcome = await first.join('live');
    expect(welcome.resumed).toBe(false);
    expect(welcome.resume).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    first.close();
    await eventually(() => tracker.debugSwarm('live') === null, 'the first connection left');

    const again = await connect(tracker);
    const back = await again.join('live', 'viewer', { resume: welcome.resume });
    expect(back.peerId).toBe(welcome.peerId);
    expect(back.resumed).toBe(true);
    expect(back.resume).not.toBeNull();
    expect(tracker.metrics().resumes.resumed).toBe(1);
  });

  it('replace a connection the tracker still thinks alive, which is closed with 4000', async () => {
    const tracker = await start();
    const peer = await connect(tracker);
    const other = await connect(tracker);
    const welcome = await peer.join('live');
    const otherId = (await other.join('live')).peerId;

    // The old socket is still open (its death not noticed yet) when the peer comes back.
    const heir = await connect(tracker);
    const back = await heir.join('live', 'viewer', { resume: welcome.resume });
    expect(back).toMatchObject({ peerId: welcome.peerId, resumed: true });
    expect(await within(peer.closed, 'old connection closed')).toEqual({
      code: 4000,
      reason: 'replaced by a resumed session',
    });
    // Signals for that id now reach the heir, also after the old socket's close was processed.
    other.send({ type: 'signal', to: welcome.peerId, data: OFFER });
    expect(await heir.next('signal')).toEqual({ type: 'signal', from: otherId, data: OFFER });
    expect(
      tracker
        .debugSwarm('live')
        ?.members.map((m) => m.peerId)
        .sort(),
    ).toEqual([welcome.peerId, otherId].sort());
    const m = tracker.metrics();
    expect(m.resumes.replaced).toBe(1);
    expect(m.disconnects.replaced).toBe(1);
    expect(m.sessions).toBe(2);
  });

  it('are not an error when invalid, expired or for another stream: the peer gets a fresh id', async () => {
    let nowMs = 1_800_000_000_000;
    const tracker = await start({ resumeTicketTtlS: 60, now: () => nowMs });
    const a = await connect(tracker);
    const welcome = await a.join('live');
    const ticket = welcome.resume ?? '';
    a.send({ type: 'leave' });

    const cases: [string, string, string][] = [
      ['garbage', 'not-a-ticket', 'invalid'],
      ['tampered', `${ticket.slice(0, -2)}${ticket.endsWith('AA') ? 'BB' : 'AA'}`, 'invalid'],
      [
        'signed elsewhere',
        makeResumeTicket('another-tracker-secret', {
          stream: 'live',
          peerId: welcome.peerId,
          role: 'viewer',
          expiresAtSec: nowMs / 1000 + 60,
        }),
        'invalid',
      ],
    ];
    for (const [name, resume, outcome] of cases) {
      const c = await connect(tracker);
      const w = await c.join('live', 'viewer', { resume });
      expect(w.resumed, name).toBe(false);
      expect(w.peerId, name).not.toBe(welcome.peerId);
      expect(tracker.metrics().resumes[outcome as 'invalid'], name).toBeGreaterThan(0);
    }
    const elsewhere = await connect(tracker);
    expect((await elsewhere.join('other', 'viewer', { resume: ticket })).resumed).toBe(false);
    expect(tracker.metrics().resumes.mismatch).toBe(1);

    nowMs += 60_000;
    const late = await connect(tracker);
    const w = await late.join('live', 'viewer', { resume: ticket });
    expect(w).toMatchObject({ resumed: false });
    expect(w.peerId).not.toBe(welcome.peerId);
    expect(tracker.metrics().resumes).toMatchObject({ invalid: 3, mismatch: 1, expired: 1, resumed: 0 });
  });

  it('do not let a stale copy of a session take the id from its newer holder', async () => {
    let nowMs = 1_800_000_000_000;
    const tracker = await start({ now: () => nowMs });
    const original = await connect(tracker);
    const welcome = await original.join('live');
    nowMs += 5_000;
    // The peer resumes (its new ticket expires later than the old one)…
    const heir = await connect(tracker);
    const back = await heir.join('live', 'viewer', { resume: welcome.resume });
    expect(back.resumed).toBe(true);
    await within(original.closed, 'original replaced');
    // …and a clone still holding the first ticket gets a fresh id instead of the heir's.
    const clone = await connect(tracker);
    const cloned = await clone.join('live', 'viewer', { resume: welcome.resume });
    expect(cloned.resumed).toBe(false);
    expect(cloned.peerId).not.toBe(welcome.peerId);
    expect(tracker.metrics().resumes).toMatchObject({ replaced: 1, conflict: 1 });
    expect(await heir.bootstrap()).toEqual([cloned.peerId]);
  });

  it('let a new source connection with the source’s ticket replace the old one', async () => {
    const tracker = await start();
    const viewer = await connect(tracker);
    const { sourceId } = await viewer.join('live');
    const source = await connect(tracker);
    const welcome = await source.join('live', 'source', KEY);
    expect(welcome.peerId).toBe(sourceId);

    const intruder = await connect(tracker);
    intruder.send(intruder.joinFrame('live', 'source', { key: KEY }));
    await intruder.error('sourcePresent');
    // A viewer's ticket does not make a source.
    const viewerTicket = (await (await connect(tracker)).join('live')).resume;
    intruder.send(intruder.joinFrame('live', 'source', { key: KEY, resume: viewerTicket }));
    await intruder.error('sourcePresent');
    // The ticket does not replace the broadcaster key either.
    intruder.send(intruder.joinFrame('live', 'source', { resume: welcome.resume }));
    await intruder.error('badKey');

    const heir = await connect(tracker);
    const back = await heir.join('live', 'source', { key: KEY, resume: welcome.resume });
    expect(back).toMatchObject({ peerId: sourceId, resumed: true });
    expect((await within(source.closed, 'old source replaced')).code).toBe(4000);
    viewer.send({ type: 'signal', to: sourceId, data: OFFER });
    expect((await heir.next('signal')).data).toEqual(OFFER);
    expect(tracker.metrics().resumes).toMatchObject({ replaced: 1, mismatch: 1 });
  });
});

describe('a tracker restart', () => {
  it('honours tickets of the earlier run and gives the same source id, with the same broadcaster key', async () => {
    const first = await start();
    const viewer = await connect(first);
    const welcome = await viewer.join('live');
    const source = await connect(first);
    const sourceWelcome = await source.join('live', 'source', KEY);
    expect(sourceWelcome.peerId).toBe(welcome.sourceId);
    await first.close();
    expect((await within(viewer.closed, 'closed by the restart')).code).toBe(1012);

    const second = await start();
    // A viewer coming back before the source already knows the same source id.
    const returning = await connect(second);
    const back = await returning.join('live', 'viewer', { resume: welcome.resume });
    expect(back).toMatchObject({ peerId: welcome.peerId, sourceId: welcome.sourceId, resumed: true });
    const sourceBack = await connect(second);
    expect(await sourceBack.join('live', 'source', { key: KEY, resume: sourceWelcome.resume })).toMatchObject(
      {
        peerId: welcome.sourceId,
        resumed: true,
      },
    );

    // Another broadcaster key: a stranger to those tickets, and another source id.
    const stranger = await start({ broadcasterKey: 'another-broadcaster-key' });
    const c = await connect(stranger);
    const w = await c.join('live', 'viewer', { resume: welcome.resume });
    expect(w.resumed).toBe(false);
    expect(w.sourceId).not.toBe(welcome.sourceId);
    expect(stranger.metrics().resumes.invalid).toBe(1);
  });

  it('with the same tracker secret honours the tickets whatever the broadcaster key', async () => {
    const trackerSecret = 'shared-tracker-secret-0123';
    const first = await start({ trackerSecret, broadcasterKey: 'key-one-0123456789' });
    const welcome = await (await connect(first)).join('live');
    expect(welcome.sourceId).toBe(sourceIdFor(trackerSecret, 'live'));
    const second = track(
      await createTracker({
        host: '127.0.0.1',
        port: 0,
        broadcasterKey: 'key-two-0123456789',
        trackerSecret,
      }),
    );
    const back = await (await connect(second)).join('live', 'viewer', { resume: welcome.resume });
    expect(back).toMatchObject({ peerId: welcome.peerId, sourceId: welcome.sourceId, resumed: true });
  });
});
