import { MAX_MEDIA_PACKET_PAYLOAD_BYTES } from './media.js';
import type { PeerId } from './messages.js';

/**
 * The rendezvous protocol: JSON text frames over one WebSocket per peer. JSON (not the binary codec)
 * because it is low-rate control traffic that browsers' devtools and operators' logs should show as
 * it is; it is still only ever parsed here, bounded and validated, into typed messages.
 */

/** Largest frame a tracker accepts from a peer: an SDP offer with a data channel is ~0.5–3 KB. */
export const MAX_TRACKER_FRAME_BYTES = 64 * 1024;
/** Largest SDP relayed: generous for data-channel SDP (a few KB) yet bounds what one peer can make the tracker copy. */
export const MAX_SDP_BYTES = 16 * 1024;
export const MAX_CANDIDATE_BYTES = 1024;
/** Stream ids: 1–64 of [A-Za-z0-9._-], safe in URLs, logs and metric labels. */
export const STREAM_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
export const MAX_BOOTSTRAP_PEERS = 64;
export const MAX_URI_LENGTH = 1024;
export const MAX_RECENT_ANNOUNCEMENTS = 16;
export const MAX_KEY_LENGTH = 256;
/**
 * The tracker's WebSocket close code for a connection whose peer id another connection took over
 * with its resume ticket (4000–4999 are the application's). A peer that gets it must not take the
 * id back with the same ticket (the two would evict each other in turn): it rejoins as a new peer.
 */
export const CLOSE_REPLACED = 4000;
/** Join tokens and resume tickets are short opaque strings (base64url payload + "." + HMAC). */
export const MAX_TICKET_LENGTH = 512;
const TICKET_PATTERN = /^[A-Za-z0-9_.-]+$/;
/** Hex digits per packet hash in an announcement (16 bytes). */
export const PACKET_HASH_HEX = 32;
/**
 * Packets one announcement may list: 1024 × 32 hex digits stay under half the frame limit, and 1024
 * packets of 16 KiB cover a 16 MiB segment (a 2 s segment at 60 Mbit/s).
 */
export const MAX_ANNOUNCED_PACKETS = 1024;
/**
 * Largest frame a peer accepts from the tracker: a `welcome` carries up to MAX_RECENT_ANNOUNCEMENTS
 * announcements of up to MAX_ANNOUNCED_PACKETS packet hashes each (32 KiB of hex apiece), so it can
 * be far larger than anything a peer sends; still bounded (≈ 0.6 MB).
 */
export const MAX_SERVER_FRAME_CHARS =
  MAX_RECENT_ANNOUNCEMENTS * (MAX_ANNOUNCED_PACKETS * PACKET_HASH_HEX + 4096) + 4096;

export type PeerRole = 'viewer' | 'source';

/**
 * WebRTC signalling between two peers, relayed verbatim by the tracker. `link` names the sender's
 * RTCPeerConnection: when both peers dial at once, or one re-dials, candidates and answers of a
 * connection that was dropped are told apart from the live one's (applying them breaks it).
 */
export type SignalData =
  | { readonly type: 'offer' | 'answer'; readonly sdp: string; readonly link?: number }
  | {
      readonly type: 'candidate';
      readonly candidate: {
        readonly candidate: string;
        readonly sdpMLineIndex: number | null;
        readonly sdpMid: string | null;
      };
      readonly link?: number;
    };

/**
 * What the true source signs for each segment (product.md: `{sequence, uri, bytes, packets, sha256}`),
 * plus the stream, the segment's duration and when the packager finished it (for live-delay figures).
 */
export interface SegmentAnnouncement {
  readonly stream: string;
  /** Media sequence number of the segment. */
  readonly sequence: number;
  /** The segment's URI as the playlist names it. */
  readonly uri: string;
  readonly bytes: number;
  readonly packets: number;
  /**
   * Stream-wide number of the segment's first packet in the order the true source deals packets to
   * its slices: packet i travels on slice (firstPacket + i) mod D with sequence ⌊(firstPacket + i) / D⌋,
   * D the data slices. Signed, so that a relay cannot replay a genuine payload on another slice or
   * under another sequence number (issue 18; `packetPlace`).
   */
  readonly firstPacket: number;
  /** Lower-case hex SHA-256 of the segment's bytes. */
  readonly sha256: string;
  /**
   * Per-packet hashes, so a forged packet is caught on arrival rather than at segment end: for each
   * packet in order, the first 16 bytes of its SHA-256 as 32 lower-case hex digits (a 128-bit
   * truncation keeps second preimages at 2^128 work while 16 packets cost 512 characters).
   */
  readonly packetHashes: string;
  readonly durationMs: number;
  /** Unix ms at which the true source saw the segment finished (the packager's write time if known). */
  readonly publishedAtMs: number;
  /**
   * Present on a segment the true source cut while the packager was still writing it (issue 14):
   * every packet but the segment's last data packet holds exactly this many bytes, so packet i
   * covers [i·packetBytes, (i+1)·packetBytes) ∩ [0, bytes). Absent: the segment was cut whole, its
   * bytes spread evenly over `packets` (`planPackets`). Its packets travelled before this
   * announcement existed, each signed on its own (`SignedPacketFields`); this announcement, made when
   * the segment is complete, then covers them all like any other.
   */
  readonly packetBytes?: number;
}

/** Whether an announcement describes a segment cut while it was written (`packetBytes` is set). */
export function isProgressive(a: SegmentAnnouncement): boolean {
  return a.packetBytes !== undefined;
}

export interface SignedAnnouncement extends SegmentAnnouncement {
  /** Base64 Ed25519 signature over `announcementSigningBytes`. */
  readonly signature: string;
}

/** At most this many ICE servers in a welcome or an `ice` frame (browsers try every one). */
export const MAX_ICE_SERVERS = 8;
/** At most this many URLs per ICE server. */
export const MAX_ICE_URLS = 4;
/** Longest ICE server URL, username or credential. */
export const MAX_ICE_FIELD_LENGTH = 512;
/** `stun:`, `stuns:`, `turn:` or `turns:` URLs only (RFC 7064, RFC 7065), printable ASCII. */
export const ICE_URL_PATTERN = /^(stun|stuns|turn|turns):[\x21-\x7e]+$/;

/**
 * One STUN or TURN server as RTCPeerConnection takes it (`RTCIceServer`). TURN servers carry
 * short-lived credentials (the TURN REST API convention: username `<expiry unix s>:<peer id>`,
 * password base64(HMAC-SHA1(secret, username))).
 */
export interface IceServer {
  readonly urls: readonly string[];
  readonly username?: string;
  readonly credential?: string;
}

/** The ICE servers a tracker hands a peer, and when their credentials stop working. */
export interface IceConfig {
  readonly servers: readonly IceServer[];
  /** Unix ms after which TURN credentials are refused; null when nothing expires (STUN only, or none). */
  readonly expiresAtMs: number | null;
}

/** Route types of a WebRTC link, from its selected candidate pair (the less direct end decides). */
export type RouteType = 'host' | 'srflx' | 'prflx' | 'relay';
export const ROUTE_TYPES: readonly RouteType[] = ['host', 'srflx', 'prflx', 'relay'];
/** A count per route type. */
export type RouteCounts = Readonly<Record<RouteType, number>>;

/** A viewer's view of its connections, cumulative since it joined (the tracker keeps aggregates only). */
export interface ConnectivityReport {
  /** Links currently open, by route type (a link whose route is not known yet is not counted). */
  readonly open: RouteCounts;
  /** Links that connected since joining, by route type. */
  readonly connected: RouteCounts;
  /** Links given up before their channel opened (ICE failed or timed out), since joining. */
  readonly failed: number;
  /** Bytes sent and received over TURN-relayed links, since joining. */
  readonly relayedBytes: number;
}

/** A viewer's periodic view of itself, for the tracker's debug picture and the broadcaster page. */
export interface PeerReport {
  /** Parent per slice (null: none). */
  readonly parents: readonly (PeerId | null)[];
  /** Children per slice. */
  readonly children: readonly (readonly PeerId[])[];
  readonly meshBytes: number;
  readonly originBytes: number;
  readonly uploadBytes: number;
  readonly stalls: number;
  readonly playing: boolean;
  /** Connectivity (optional: older SDKs do not send it). */
  readonly connectivity?: ConnectivityReport;
  /**
   * Peers this member cut off for misbehaving since its last report (optional). The tracker stops
   * signalling new connections for a peer that REPORTS_TO_BAN distinct members cut off (issue 18).
   */
  readonly cutOff?: readonly PeerId[];
}

/** At most this many cut-off peers in one report (a member cuts off a few a minute at most). */
export const MAX_REPORT_CUT_OFFS = 64;
/**
 * Distinct members that must report a peer cut off before the tracker stops signalling new
 * connections for it (tracker `cut-offs.ts`; the simulator's rendezvous models the same). A member
 * that cuts a flooder off only closes its own link; Swaplinks hands the flooder fresh neighbours,
 * each of which pays for it again until it too cuts it off (1000 simulated members, 5% flooders,
 * 60 s: 5300 victim pairs, honest origin share 2.4%; with the ban, 1200 pairs and 0.008%,
 * docs/hostile.md). Three, so that one or two lying reporters cannot shut an honest viewer out; its
 * open links stay open in any case.
 */
export const REPORTS_TO_BAN = 3;

export type ClientMessage =
  | {
      readonly type: 'join';
      readonly stream: string;
      readonly role: PeerRole;
      /** The broadcaster key; required for the source role, ignored otherwise. */
      readonly key?: string;
      /** A viewer join token (HMAC over stream and expiry), required when the tracker demands one. */
      readonly token?: string;
      /**
       * The resume ticket of an earlier `welcome`: a peer that lost its WebSocket (or whose tracker
       * restarted) asks for its old peer id back, so its WebRTC links and its place in the trees,
       * which name it by that id, stay valid.
       */
      readonly resume?: string;
    }
  | { readonly type: 'bootstrap'; readonly count: number }
  | { readonly type: 'signal'; readonly to: PeerId; readonly data: SignalData }
  | { readonly type: 'announce'; readonly announcement: SignedAnnouncement }
  | { readonly type: 'report'; readonly report: PeerReport }
  | { readonly type: 'leave' };

export type TrackerErrorCode =
  | 'malformed'
  | 'tooLarge'
  | 'unknownType'
  | 'invalidField'
  | 'notJoined'
  | 'alreadyJoined'
  | 'badKey'
  | 'sourcePresent'
  | 'unknownPeer'
  | 'forbidden'
  | 'rateLimited'
  | 'shuttingDown'
  | 'badToken'
  | 'originNotAllowed'
  | 'tooManyConnections';

export type ServerMessage =
  | {
      readonly type: 'welcome';
      readonly peerId: PeerId;
      readonly sourceId: PeerId;
      readonly stream: string;
      /** Base64 raw Ed25519 public key of the broadcaster, if the tracker knows it. */
      readonly publicKey: string | null;
      /** The most recent announcements, oldest first, so a joiner can place packets at once. */
      readonly announcements: readonly SignedAnnouncement[];
      /** Present this in a later `join` to get this peer id back after a reconnect (opaque, expires). */
      readonly resume: string | null;
      /** True when a `resume` ticket was honoured and `peerId` is the peer's old id. */
      readonly resumed: boolean;
      /** STUN/TURN servers for this peer's RTCPeerConnections (empty: host candidates only). */
      readonly ice: IceConfig;
    }
  /** Fresh ICE servers (TURN credentials renewed before the old ones expire). */
  | { readonly type: 'ice'; readonly ice: IceConfig }
  | { readonly type: 'peers'; readonly peers: readonly PeerId[] }
  | { readonly type: 'signal'; readonly from: PeerId; readonly data: SignalData }
  | { readonly type: 'announce'; readonly announcement: SignedAnnouncement }
  | { readonly type: 'error'; readonly code: TrackerErrorCode; readonly message: string };

export interface TrackerDecodeError {
  readonly code: TrackerErrorCode;
  readonly message: string;
}

export type TrackerDecodeResult<T> =
  { readonly ok: true; readonly message: T } | { readonly ok: false; readonly error: TrackerDecodeError };

export function encodeTrackerMessage(message: ClientMessage | ServerMessage): string {
  return JSON.stringify(message);
}

/** The exact bytes the broadcaster signs: fixed field order, no signature. */
export function announcementSigningBytes(a: SegmentAnnouncement): Uint8Array {
  // A segment cut while written signs one more field under its own tag, so neither kind of
  // signature can be taken for the other; a whole segment signs exactly what it did before.
  const progressive = a.packetBytes === undefined ? [] : [a.packetBytes];
  const canonical = JSON.stringify([
    a.packetBytes === undefined ? 'chunkycast-segment-v3' : 'chunkycast-segment-v4',
    a.stream,
    a.sequence,
    a.uri,
    a.bytes,
    a.packets,
    a.firstPacket,
    a.sha256,
    a.packetHashes,
    a.durationMs,
    a.publishedAtMs,
    ...progressive,
  ]);
  return utf8(canonical);
}

/** UTF-8 bytes of a string (wire has no host APIs, TextEncoder included). Lone surrogates become U+FFFD. */
export function utf8(text: string): Uint8Array {
  const out: number[] = [];
  for (const ch of text) {
    let c = ch.codePointAt(0) ?? 0xfffd;
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return Uint8Array.from(out);
}

// ─────────────────────────────── decoding ───────────────────────────────

class Invalid extends Error {
  constructor(
    readonly code: TrackerErrorCode,
    message: string,
  ) {
    super(message);
  }
}

type Json = Record<string, unknown>;

/**
 * Frames are text; a host refuses binary frames before calling a decoder (as 'malformed'). The size
 * check counts UTF-16 units, at most 3 UTF-8 bytes each; what matters, not parsing megabytes, holds.
 */
function parseFrame(text: string, maxChars: number): Json {
  if (text.length > maxChars)
    throw new Invalid('tooLarge', `frame of ${text.length} characters exceeds ${maxChars}`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Invalid('malformed', 'frame is not JSON');
  }
  if (!isObject(value)) throw new Invalid('malformed', 'frame is not a JSON object');
  return value;
}

/**
 * The offending `type` for an error message, cut to 64 characters: the answer must stay within the
 * limits the other side decodes (1024-character messages), whatever length the sender chose.
 */
function describeType(type: unknown): string {
  if (typeof type !== 'string') return typeof type;
  return type.length > 64
    ? `${JSON.stringify(type.slice(0, 64))}… (${type.length} characters)`
    : JSON.stringify(type);
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(o: Json, key: string, max: number, pattern?: RegExp): string {
  const v = o[key];
  if (typeof v !== 'string') throw new Invalid('invalidField', `"${key}" must be a string`);
  if (v.length > max) throw new Invalid('invalidField', `"${key}" is longer than ${max}`);
  if (pattern !== undefined && !pattern.test(v))
    throw new Invalid('invalidField', `"${key}" does not match ${String(pattern)}`);
  return v;
}

function int(o: Json, key: string, min: number, max: number): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    throw new Invalid('invalidField', `"${key}" must be an integer in ${min}‥${max}`);
  return v;
}

function peerId(o: Json, key: string): PeerId {
  return int(o, key, 0, 0xffff_ffff);
}

function obj(o: Json, key: string): Json {
  const v = o[key];
  if (!isObject(v)) throw new Invalid('invalidField', `"${key}" must be an object`);
  return v;
}

function nullable<T>(o: Json, key: string, read: () => T): T | null {
  return o[key] === null || o[key] === undefined ? null : read();
}

function signal(o: Json): SignalData {
  const type = o.type;
  const link = o.link === undefined ? {} : { link: int(o, 'link', 0, 0xffff_ffff) };
  if (type === 'offer' || type === 'answer') return { type, sdp: str(o, 'sdp', MAX_SDP_BYTES), ...link };
  if (type === 'candidate') {
    const c = obj(o, 'candidate');
    return {
      type,
      ...link,
      candidate: {
        candidate: str(c, 'candidate', MAX_CANDIDATE_BYTES),
        sdpMLineIndex: nullable(c, 'sdpMLineIndex', () => int(c, 'sdpMLineIndex', 0, 255)),
        sdpMid: nullable(c, 'sdpMid', () => str(c, 'sdpMid', 64)),
      },
    };
  }
  throw new Invalid('invalidField', 'signal "type" must be offer, answer or candidate');
}

const HEX64 = /^[0-9a-f]{64}$/;
const HEX = /^[0-9a-f]*$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function packetHashes(o: Json): string {
  const hashes = str(o, 'packetHashes', MAX_ANNOUNCED_PACKETS * PACKET_HASH_HEX, HEX);
  if (hashes.length !== PACKET_HASH_HEX * (o.packets as number))
    throw new Invalid('invalidField', `"packetHashes" must hold ${PACKET_HASH_HEX} hex digits per packet`);
  return hashes;
}

/** `packetBytes` of a segment cut while written: its packets must hold its bytes. */
function progressiveFields(o: Json, bytes: number, packets: number): { packetBytes: number } | null {
  if (o.packetBytes === undefined) return null;
  const packetBytes = int(o, 'packetBytes', 1, MAX_MEDIA_PACKET_PAYLOAD_BYTES);
  if (bytes > packets * packetBytes)
    throw new Invalid('invalidField', '"packets" of "packetBytes" cannot hold "bytes"');
  return { packetBytes };
}

function announcement(o: Json): SignedAnnouncement {
  const bytes = int(o, 'bytes', 0, 64 * 1024 * 1024);
  const packets = int(o, 'packets', 1, MAX_ANNOUNCED_PACKETS);
  const progressive = progressiveFields(o, bytes, packets);
  return {
    stream: str(o, 'stream', 64, STREAM_ID_PATTERN),
    sequence: int(o, 'sequence', 0, 0xffff_ffff),
    uri: str(o, 'uri', MAX_URI_LENGTH),
    bytes,
    packets,
    firstPacket: int(o, 'firstPacket', 0, Number.MAX_SAFE_INTEGER),
    sha256: str(o, 'sha256', 64, HEX64),
    packetHashes: packetHashes(o),
    durationMs: int(o, 'durationMs', 0, 3_600_000),
    publishedAtMs: int(o, 'publishedAtMs', 0, Number.MAX_SAFE_INTEGER),
    ...(progressive ?? {}),
    signature: str(o, 'signature', 128, BASE64),
  };
}

/**
 * Checks an untrusted value as a signed announcement with exactly the checks a tracker frame's
 * `announce` gets (field types, lengths, patterns, MAX_ANNOUNCED_PACKETS, one packet hash per
 * packet), whichever way it came: a tracker frame or a peer message (`Announcement`). The signature
 * is only checked for shape here (wire has no crypto): verifying it is the receiver's job.
 */
export function validateAnnouncement(value: unknown): TrackerDecodeResult<SignedAnnouncement> {
  try {
    if (!isObject(value)) throw new Invalid('invalidField', 'an announcement is not an object');
    return { ok: true, message: announcement(value) };
  } catch (e) {
    if (e instanceof Invalid) return { ok: false, error: { code: e.code, message: e.message } };
    return { ok: false, error: { code: 'malformed', message: `decoder fault: ${String(e)}` } };
  }
}

/**
 * Longest `announcementText` of a valid announcement, with room to spare: 1024 packet hashes are
 * 32,768 characters, a 1024-unit URI escaped at worst 6,144, every other field and the keys < 600.
 */
export const MAX_ANNOUNCEMENT_TEXT_BYTES = MAX_TRACKER_FRAME_BYTES;

/** Every character JSON.stringify leaves outside ASCII (lone surrogates it escapes itself). */
const NON_ASCII = /[\u0080-\uffff]/g;

/**
 * The canonical text of a signed announcement outside a tracker frame (the peer message
 * `Announcement`): its eleven fields (twelve for a segment cut while written) in a fixed order as JSON, and every character outside ASCII
 * escaped as \uXXXX, so that one character is one byte and the text is its own UTF-8 encoding.
 * A decoder accepts a text only if it is exactly this for what it parsed (one encoding per value).
 */
export function announcementText(a: SignedAnnouncement): string {
  return JSON.stringify({
    stream: a.stream,
    sequence: a.sequence,
    uri: a.uri,
    bytes: a.bytes,
    packets: a.packets,
    firstPacket: a.firstPacket,
    sha256: a.sha256,
    packetHashes: a.packetHashes,
    durationMs: a.durationMs,
    publishedAtMs: a.publishedAtMs,
    ...(a.packetBytes === undefined ? {} : { packetBytes: a.packetBytes }),
    signature: a.signature,
  }).replace(NON_ASCII, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function routeCounts(o: Json, key: string): RouteCounts {
  const v = obj(o, key);
  return {
    host: int(v, 'host', 0, Number.MAX_SAFE_INTEGER),
    srflx: int(v, 'srflx', 0, Number.MAX_SAFE_INTEGER),
    prflx: int(v, 'prflx', 0, Number.MAX_SAFE_INTEGER),
    relay: int(v, 'relay', 0, Number.MAX_SAFE_INTEGER),
  };
}

function connectivity(o: Json): ConnectivityReport {
  return {
    open: routeCounts(o, 'open'),
    connected: routeCounts(o, 'connected'),
    failed: int(o, 'failed', 0, Number.MAX_SAFE_INTEGER),
    relayedBytes: int(o, 'relayedBytes', 0, Number.MAX_SAFE_INTEGER),
  };
}

/** Validates ICE servers: bounded counts and lengths, stun/turn URLs only, string credentials. */
function iceConfig(o: Json): IceConfig {
  const list = o.servers;
  if (!Array.isArray(list) || list.length > MAX_ICE_SERVERS)
    throw new Invalid('invalidField', `"servers" must be an array of at most ${MAX_ICE_SERVERS}`);
  const servers = list.map((server: unknown): IceServer => {
    if (!isObject(server)) throw new Invalid('invalidField', 'an ICE server is not an object');
    const urls = server.urls;
    if (!Array.isArray(urls) || urls.length < 1 || urls.length > MAX_ICE_URLS)
      throw new Invalid('invalidField', `"urls" must be an array of 1 to ${MAX_ICE_URLS}`);
    for (const u of urls)
      if (typeof u !== 'string' || u.length > MAX_ICE_FIELD_LENGTH || !ICE_URL_PATTERN.test(u))
        throw new Invalid('invalidField', '"urls" holds a URL that is not stun:, stuns:, turn: or turns:');
    return {
      urls: urls as string[],
      ...(server.username === undefined ? {} : { username: str(server, 'username', MAX_ICE_FIELD_LENGTH) }),
      ...(server.credential === undefined
        ? {}
        : { credential: str(server, 'credential', MAX_ICE_FIELD_LENGTH) }),
    };
  });
  const expiresAtMs = nullable(o, 'expiresAtMs', () => int(o, 'expiresAtMs', 0, Number.MAX_SAFE_INTEGER));
  return { servers, expiresAtMs };
}

/** Checks a list of ICE servers from outside the protocol (a page attribute, a config file). */
export function validateIceServers(value: unknown): TrackerDecodeResult<readonly IceServer[]> {
  try {
    return { ok: true, message: iceConfig({ servers: value, expiresAtMs: null }).servers };
  } catch (e) {
    if (e instanceof Invalid) return { ok: false, error: { code: e.code, message: e.message } };
    return { ok: false, error: { code: 'malformed', message: `decoder fault: ${String(e)}` } };
  }
}

const MAX_REPORT_SLICES = 64;
const MAX_REPORT_CHILDREN = 256;

/** A u32 peer id. */
function isId(v: unknown): v is PeerId {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffff_ffff;
}

function report(o: Json): PeerReport {
  const parents = o.parents;
  const children = o.children;
  if (!Array.isArray(parents) || parents.length > MAX_REPORT_SLICES)
    throw new Invalid('invalidField', `"parents" must be an array of at most ${MAX_REPORT_SLICES}`);
  if (!Array.isArray(children) || children.length > MAX_REPORT_SLICES)
    throw new Invalid('invalidField', `"children" must be an array of at most ${MAX_REPORT_SLICES}`);
  for (const p of parents)
    if (p !== null && !isId(p)) throw new Invalid('invalidField', '"parents" holds a non-id');
  for (const c of children)
    if (!Array.isArray(c) || c.length > MAX_REPORT_CHILDREN || !c.every(isId))
      throw new Invalid('invalidField', '"children" must hold arrays of ids');
  const playing = o.playing;
  if (typeof playing !== 'boolean') throw new Invalid('invalidField', '"playing" must be a boolean');
  return {
    parents: parents as (PeerId | null)[],
    children: children as PeerId[][],
    meshBytes: int(o, 'meshBytes', 0, Number.MAX_SAFE_INTEGER),
    originBytes: int(o, 'originBytes', 0, Number.MAX_SAFE_INTEGER),
    uploadBytes: int(o, 'uploadBytes', 0, Number.MAX_SAFE_INTEGER),
    stalls: int(o, 'stalls', 0, Number.MAX_SAFE_INTEGER),
    playing,
    ...(o.connectivity === undefined ? {} : { connectivity: connectivity(obj(o, 'connectivity')) }),
    ...(o.cutOff === undefined ? {} : { cutOff: cutOffList(o.cutOff) }),
  };
}

function cutOffList(value: unknown): PeerId[] {
  if (!Array.isArray(value) || value.length > MAX_REPORT_CUT_OFFS || !value.every(isId))
    throw new Invalid('invalidField', `"cutOff" must be an array of at most ${MAX_REPORT_CUT_OFFS} peer ids`);
  return value;
}

function decodeWith<T>(frame: string, maxChars: number, read: (o: Json) => T): TrackerDecodeResult<T> {
  try {
    return { ok: true, message: read(parseFrame(frame, maxChars)) };
  } catch (e) {
    if (e instanceof Invalid) return { ok: false, error: { code: e.code, message: e.message } };
    return { ok: false, error: { code: 'malformed', message: `decoder fault: ${String(e)}` } };
  }
}

/** Parses and validates a frame from a peer (tracker side). */
export function decodeClientMessage(frame: string): TrackerDecodeResult<ClientMessage> {
  return decodeWith(frame, MAX_TRACKER_FRAME_BYTES, (o): ClientMessage => {
    switch (o.type) {
      case 'join': {
        const role = o.role;
        if (role !== 'viewer' && role !== 'source')
          throw new Invalid('invalidField', '"role" must be viewer or source');
        const stream = str(o, 'stream', 64, STREAM_ID_PATTERN);
        return {
          type: 'join',
          stream,
          role,
          ...(o.key === undefined ? {} : { key: str(o, 'key', MAX_KEY_LENGTH) }),
          ...(o.token === undefined ? {} : { token: str(o, 'token', MAX_TICKET_LENGTH, TICKET_PATTERN) }),
          ...(o.resume === undefined ? {} : { resume: str(o, 'resume', MAX_TICKET_LENGTH, TICKET_PATTERN) }),
        };
      }
      case 'bootstrap':
        return { type: 'bootstrap', count: int(o, 'count', 1, MAX_BOOTSTRAP_PEERS) };
      case 'signal':
        return { type: 'signal', to: peerId(o, 'to'), data: signal(obj(o, 'data')) };
      case 'announce':
        return { type: 'announce', announcement: announcement(obj(o, 'announcement')) };
      case 'report':
        return { type: 'report', report: report(obj(o, 'report')) };
      case 'leave':
        return { type: 'leave' };
      default:
        throw new Invalid('unknownType', `unknown message type ${describeType(o.type)}`);
    }
  });
}

/** Every tracker error code (the decoder accepts only these; the tracker counts each). */
export const TRACKER_ERROR_CODES: readonly TrackerErrorCode[] = [
  'malformed',
  'tooLarge',
  'unknownType',
  'invalidField',
  'notJoined',
  'alreadyJoined',
  'badKey',
  'sourcePresent',
  'unknownPeer',
  'forbidden',
  'rateLimited',
  'shuttingDown',
  'badToken',
  'originNotAllowed',
  'tooManyConnections',
];

/** Parses and validates a frame from the tracker (peer side): a tracker is network input too. */
export function decodeServerMessage(frame: string): TrackerDecodeResult<ServerMessage> {
  return decodeWith(frame, MAX_SERVER_FRAME_CHARS, (o): ServerMessage => {
    switch (o.type) {
      case 'welcome': {
        const list = o.announcements;
        if (!Array.isArray(list) || list.length > MAX_RECENT_ANNOUNCEMENTS)
          throw new Invalid(
            'invalidField',
            `"announcements" must be an array of at most ${MAX_RECENT_ANNOUNCEMENTS}`,
          );
        return {
          type: 'welcome',
          peerId: peerId(o, 'peerId'),
          sourceId: peerId(o, 'sourceId'),
          stream: str(o, 'stream', 64, STREAM_ID_PATTERN),
          publicKey: nullable(o, 'publicKey', () => str(o, 'publicKey', 128, BASE64)),
          announcements: list.map((a) => {
            if (!isObject(a)) throw new Invalid('invalidField', 'an announcement is not an object');
            return announcement(a);
          }),
          resume: nullable(o, 'resume', () => str(o, 'resume', MAX_TICKET_LENGTH, TICKET_PATTERN)),
          resumed: o.resumed === true,
          // An older tracker sends no ICE servers: host candidates only, as before.
          ice: o.ice === undefined ? { servers: [], expiresAtMs: null } : iceConfig(obj(o, 'ice')),
        };
      }
      case 'ice':
        return { type: 'ice', ice: iceConfig(obj(o, 'ice')) };
      case 'peers': {
        const peers = o.peers;
        if (!Array.isArray(peers) || peers.length > MAX_BOOTSTRAP_PEERS)
          throw new Invalid('invalidField', `"peers" must be an array of at most ${MAX_BOOTSTRAP_PEERS}`);
        return {
          type: 'peers',
          peers: peers.map((p: unknown) => {
            if (typeof p !== 'number' || !Number.isInteger(p) || p < 0 || p > 0xffff_ffff)
              throw new Invalid('invalidField', '"peers" holds a non-id');
            return p;
          }),
        };
      }
      case 'signal':
        return { type: 'signal', from: peerId(o, 'from'), data: signal(obj(o, 'data')) };
      case 'announce':
        return { type: 'announce', announcement: announcement(obj(o, 'announcement')) };
      case 'error': {
        const code = o.code;
        if (typeof code !== 'string' || !(TRACKER_ERROR_CODES as readonly string[]).includes(code))
          throw new Invalid('invalidField', '"code" is not a known error code');
        return { type: 'error', code: code as TrackerErrorCode, message: str(o, 'message', 1024) };
      }
      default:
        throw new Invalid('unknownType', `unknown message type ${describeType(o.type)}`);
    }
  });
}
