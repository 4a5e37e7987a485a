import { MAX_MESSAGE_BYTES } from '@chunkycast/wire';
import { describe, expect, it } from 'vitest';
import { sendLimitOf } from '../src/mesh-node.js';

/** A simple-peer stand-in whose RTCPeerConnection has the given SCTP transport. */
const peerWith = (sctp: unknown): unknown => ({ _pc: { sctp } });

describe('sendLimitOf (issue 15: browsers negotiate different SCTP message sizes)', () => {
  it("takes the link's negotiated max-message-size when it is below the wire's bound", () => {
    // Firefox assumes 64 KiB of a peer whose SDP says nothing; Safari has offered 64 KiB.
    expect(sendLimitOf(peerWith({ maxMessageSize: 65_536 }))).toBe(65_536);
    expect(sendLimitOf(peerWith({ maxMessageSize: 100_000.5 }))).toBe(100_000);
  });
  it("never goes above the wire's MAX_MESSAGE_BYTES (Firefox offers 1 GiB)", () => {
    expect(sendLimitOf(peerWith({ maxMessageSize: 1_073_741_823 }))).toBe(MAX_MESSAGE_BYTES);
    expect(sendLimitOf(peerWith({ maxMessageSize: Number.POSITIVE_INFINITY }))).toBe(MAX_MESSAGE_BYTES);
  });
  it("falls back to the wire's bound when the size is unknown or means no limit", () => {
    expect(sendLimitOf(peerWith(null))).toBe(MAX_MESSAGE_BYTES); // before the transport exists
    expect(sendLimitOf(peerWith({}))).toBe(MAX_MESSAGE_BYTES);
    expect(sendLimitOf(peerWith({ maxMessageSize: 0 }))).toBe(MAX_MESSAGE_BYTES); // RFC 8841: 0 = no limit
    expect(sendLimitOf(peerWith({ maxMessageSize: '65536' }))).toBe(MAX_MESSAGE_BYTES);
    expect(sendLimitOf({})).toBe(MAX_MESSAGE_BYTES); // node-datachannel's peer: no _pc.sctp
    expect(sendLimitOf(null)).toBe(MAX_MESSAGE_BYTES);
  });
});
