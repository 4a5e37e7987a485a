// Per-packet cost of the SDK's packet check: `inspectPacket` on full-size media packets, the work a
// viewer does for every packet a neighbour sends before the engine may forward it (decode the media
// header, look up the segment's announcement, check the packet's place, SHA-256 the payload and
// compare its first 16 bytes with the announced ones).
//
// Run after `npx tsc -b` (it measures the built output, as the browser and the true source run it):
//   npx vite-node sdk/test/bench/packet-hash.ts [--packets N] [--rounds R]
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import { SegmentStore, inspectPacket } from '@chunkycast/sdk/core';
import {
  MAX_MEDIA_PACKET_PAYLOAD_BYTES,
  PACKET_HASH_HEX,
  encodeMediaPacket,
  packetPlace,
  type SignedAnnouncement,
} from '@chunkycast/wire';

const { values } = parseArgs({
  options: {
    packets: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '400' },
  },
});
/** Packets per segment: 16 × 16 KiB is a 2 s segment of a ~1 Mbit/s stream, the SDK's test stream. */
const packetCount = Number(values.packets);
/** Times every packet of the segment is checked; the first round is warm-up and not counted. */
const rounds = Number(values.rounds);
const DATA_SLICES = 16;
const SEQUENCE = 7;

const payloads = Array.from({ length: packetCount }, (_, index) => {
  const bytes = new Uint8Array(MAX_MEDIA_PACKET_PAYLOAD_BYTES);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31 + index * 7) & 0xff;
  return bytes;
});
const announcement: SignedAnnouncement = {
  stream: 'live',
  sequence: SEQUENCE,
  uri: `seg${SEQUENCE}.ts`,
  bytes: packetCount * MAX_MEDIA_PACKET_PAYLOAD_BYTES,
  packets: packetCount,
  firstPacket: 0,
  sha256: '0'.repeat(64),
  packetHashes: payloads
    .map((p) => createHash('sha256').update(p).digest('hex').slice(0, PACKET_HASH_HEX))
    .join(''),
  durationMs: 2000,
  publishedAtMs: 0,
  signature: 'AAAA',
};
// No broadcaster key: the announcement is placed unverified (its signature is not what is measured).
const store = new SegmentStore({ stream: 'live', publicKey: null, now: () => performance.now() });
if (!(await store.announce(announcement))) throw new Error('the announcement was not placed');
const packets = payloads.map((bytes, index) => ({
  payload: encodeMediaPacket({ segment: SEQUENCE, index, count: packetCount, bytes }),
  place: { ...packetPlace(announcement.firstPacket, index, DATA_SLICES), dataSlices: DATA_SLICES },
}));

let checked = 0;
let startedAt = 0;
for (let round = 0; round < rounds; round++) {
  if (round === 1) startedAt = performance.now();
  for (const { payload, place } of packets) {
    if (inspectPacket(store, payload, place) !== 'accept') throw new Error('a genuine packet was refused');
    if (round > 0) checked++;
  }
}
const elapsedMs = performance.now() - startedAt;
const nsPerPacket = (elapsedMs * 1e6) / checked;
const megabytesPerSecond = (checked * MAX_MEDIA_PACKET_PAYLOAD_BYTES) / 1e6 / (elapsedMs / 1000);
console.log(
  JSON.stringify({
    packets: checked,
    payloadBytes: MAX_MEDIA_PACKET_PAYLOAD_BYTES,
    nsPerPacket: Math.round(nsPerPacket),
    megabytesPerSecond: Math.round(megabytesPerSecond * 10) / 10,
  }),
);
store.close();
