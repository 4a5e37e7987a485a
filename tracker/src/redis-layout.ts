/**
 * What the Redis cluster backend (redis-cluster.ts) keeps in Redis and how: the key layout, the
 * format of a member's entry, the envelopes on the channels, and the Lua scripts that read and
 * write them atomically. Every script reads a member's entry through one Lua function
 * (`member_owner`), and TypeScript through `parseMemberValue`: the entry's format is defined here
 * once.
 *
 * Key layout (P = keyPrefix, `chunkycast:` by default; ids are decimal u32, node ids 16 hex digits):
 *   P node:<node>           string  the node's heartbeat, {"members","swarms"} JSON, PX nodeTtlMs
 *   P nodes                 set     node ids seen, so dead ones can be swept (and then removed)
 *   P node-members:<node>   set     "<stream>/<peerId>" the node holds; the sweep's index
 *   P members:<stream>      hash    peerId → "<role>:<node>:<ticket expiry s>", role v (viewer) or
 *                                   s (source); the expiry decides whether a resume may displace it
 *   P recent:<stream>       list    the last MAX_RECENT_ANNOUNCEMENTS `announce` frames, oldest first
 * Channels: P relay:<node> (messages for that node's members), P announce (to every node).
 * Every key but the heartbeat carries PEXPIRE staleKeyTtlMs, refreshed while a live node uses it;
 * a members hash dies with its last field, and the recent list with it.
 */
import type { ClientContext, Result } from 'ioredis';
import { MAX_TRACKER_FRAME_BYTES, STREAM_ID_PATTERN, type PeerId, type PeerRole } from '@chunkycast/wire';
import { isPeerId } from './cluster.js';

export const DEFAULT_KEY_PREFIX = 'chunkycast:';
export const KEY_PREFIX_PATTERN = /^[A-Za-z0-9._:-]{0,64}$/;

/** Room for a channel envelope's header around the tracker frame it carries. */
const ENVELOPE_HEADER_CHARS = 256;
/** A relay or announcement envelope: a tracker frame plus a short header. */
export const MAX_ENVELOPE_CHARS = MAX_TRACKER_FRAME_BYTES + ENVELOPE_HEADER_CHARS;
/** `r1|<from node>|<stream>|<to peer>|<frame>`: a signal for a member of the node on that channel. */
export const RELAY_TAG = 'r1';
/** `a1|<from node>|<frame>`: an announcement, to every node. */
export const ANNOUNCE_TAG = 'a1';
/** `l1|<from node>|<stream>|<peer>`: the node on that channel lost this member to a resume elsewhere. */
export const LOST_TAG = 'l1';

/** A peer id as a hash field or index entry: decimal, no leading zero, at most 10 digits (u32). */
const DECIMAL_ID = /^[1-9][0-9]{0,9}$/;
/** A member's entry: role letter, holding node (16 hex digits), ticket expiry in whole seconds. */
const MEMBER_VALUE = /^([vs]):([0-9a-f]{16}):([0-9]{1,15})$/;

export class Keys {
  readonly nodes: string;
  readonly nodePrefix: string;
  readonly indexPrefix: string;
  readonly membersPrefix: string;
  readonly recentPrefix: string;
  readonly relayPrefix: string;
  readonly announceChannel: string;

  constructor(prefix: string) {
    this.nodes = `${prefix}nodes`;
    this.nodePrefix = `${prefix}node:`;
    this.indexPrefix = `${prefix}node-members:`;
    this.membersPrefix = `${prefix}members:`;
    this.recentPrefix = `${prefix}recent:`;
    this.relayPrefix = `${prefix}relay:`;
    this.announceChannel = `${prefix}announce`;
  }

  node(nodeId: string): string {
    return this.nodePrefix + nodeId;
  }

  index(nodeId: string): string {
    return this.indexPrefix + nodeId;
  }

  members(stream: string): string {
    return this.membersPrefix + stream;
  }

  recent(stream: string): string {
    return this.recentPrefix + stream;
  }

  relay(nodeId: string): string {
    return this.relayPrefix + nodeId;
  }
}

/** A member's entry in `P members:<stream>`. */
export function memberValue(role: PeerRole, nodeId: string, ticketExpiresAtSec: number): string {
  return `${role === 'source' ? 's' : 'v'}:${nodeId}:${ticketExpiresAtSec}`;
}

/** A member's entry read back, or null if it is not one. */
export function parseMemberValue(
  value: unknown,
): { role: PeerRole; nodeId: string; ticketExpiresAtSec: number } | null {
  const match = typeof value === 'string' ? MEMBER_VALUE.exec(value) : null;
  if (match?.[1] === undefined || match[2] === undefined || match[3] === undefined) return null;
  return {
    role: match[1] === 's' ? 'source' : 'viewer',
    nodeId: match[2],
    ticketExpiresAtSec: Number(match[3]),
  };
}

export function indexEntry(stream: string, peerId: PeerId): string {
  return `${stream}/${peerId}`;
}

export function parseIndexEntry(entry: string): { stream: string; peerId: PeerId } | null {
  const slash = entry.lastIndexOf('/');
  const stream = entry.slice(0, slash);
  const peerId = parsePeerIdField(entry.slice(slash + 1));
  if (slash < 0 || !STREAM_ID_PATTERN.test(stream) || peerId === null) return null;
  return { stream, peerId };
}

export function parsePeerIdField(field: unknown): PeerId | null {
  if (typeof field !== 'string' || !DECIMAL_ID.test(field)) return null;
  const id = Number(field);
  return isPeerId(id) ? id : null;
}

// ─────────────────────────────── Lua ───────────────────────────────

/**
 * The one reader of a member's entry in Lua, prepended to every script that needs it: the holding
 * node and the ticket expiry, or nil for an entry that is not one (the same shape as MEMBER_VALUE,
 * with the node id checked only as word characters: it is compared, never trusted).
 */
const MEMBER_OWNER_LUA = `
local function member_owner(value)
  return string.match(value, '^[vs]:(%w+):(%d+)$')
end
`;

/**
 * Claims a peer id. ARGV[6] is the mode: `fresh` takes only a free id (or a dead node's, or an
 * unreadable entry); `resume` also displaces a live holder whose ticket expires no later than
 * ARGV[7], telling its node on its relay channel (unless that is this node); `restate` (the resync
 * after an outage) accepts this node's own identical entry. Returns 1 claimed, 2 displaced, 0 taken.
 * KEYS: members, own index. ARGV: peerId, value, node key prefix, index entry, staleKeyTtlMs, mode,
 * takeover bound (s), relay channel prefix, own node id, lost envelope.
 */
const CLAIM_LUA = `
local current = redis.call('HGET', KEYS[1], ARGV[1])
local result = 1
if current and not (ARGV[6] == 'restate' and current == ARGV[2]) then
  local owner, expiry = member_owner(current)
  if owner and redis.call('EXISTS', ARGV[3] .. owner) == 1 then
    if ARGV[6] ~= 'resume' or tonumber(expiry) > tonumber(ARGV[7]) then return 0 end
    result = 2
    if owner ~= ARGV[9] then redis.call('PUBLISH', ARGV[8] .. owner, ARGV[10]) end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('SADD', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return result`;

/**
 * Releases a peer id if this node still holds it (another may have taken it over), and drops the
 * stream's recent announcements with its last member.
 * KEYS: members, own index, recent. ARGV: peerId, node id, index entry.
 */
const RELEASE_LUA = `
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current and member_owner(current) == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
redis.call('SREM', KEYS[2], ARGV[3])
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('DEL', KEYS[3]) end
return 1`;

/**
 * Up to ARGV[1] random members as a flat [peerId, value, …] list, leaving out (and deleting) those
 * of dead nodes. Unreadable entries are returned for the caller to count and skip.
 * KEYS: members, recent. ARGV: count, node key prefix.
 */
const SAMPLE_LUA = `
local picked = redis.call('HRANDFIELD', KEYS[1], ARGV[1], 'WITHVALUES')
local out = {}
local alive = {}
for i = 1, #picked, 2 do
  local field, value = picked[i], picked[i + 1]
  local owner = member_owner(value)
  local keep = true
  if owner then
    if alive[owner] == nil then alive[owner] = redis.call('EXISTS', ARGV[2] .. owner) == 1 end
    keep = alive[owner]
  end
  if keep then
    out[#out + 1] = field
    out[#out + 1] = value
  else
    redis.call('HDEL', KEYS[1], field)
  end
end
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('DEL', KEYS[2]) end
return out`;

/** The member's entry if a live node holds it, else nil. KEYS: members. ARGV: peerId, node key prefix. */
const OWNER_LUA = `
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return false end
local owner = member_owner(current)
if owner and redis.call('EXISTS', ARGV[2] .. owner) == 1 then return current end
return false`;

/**
 * Publishes a relay envelope to the node holding the target. Returns 1 sent, 0 no live holder,
 * -1 unreadable entry, -2 held by the caller itself, -3 the holder is not subscribed.
 * KEYS: members. ARGV: peerId, node key prefix, relay channel prefix, own node id, envelope.
 */
const ROUTE_LUA = `
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 0 end
local owner = member_owner(current)
if not owner then return -1 end
if owner == ARGV[4] then return -2 end
if redis.call('EXISTS', ARGV[2] .. owner) == 0 then return 0 end
if redis.call('PUBLISH', ARGV[3] .. owner, ARGV[5]) == 0 then return -3 end
return 1`;

/**
 * Removes the members of dead nodes through their index sets, a bounded amount per call; a dead
 * node leaves the node set once its index is empty. Returns the members removed.
 * KEYS: nodes. ARGV: node key prefix, index prefix, members prefix, recent prefix, max nodes,
 * max entries per node.
 */
const SWEEP_LUA = `
local removed = 0
local nodes = redis.call('SRANDMEMBER', KEYS[1], tonumber(ARGV[5]))
for _, node in ipairs(nodes) do
  if redis.call('EXISTS', ARGV[1] .. node) == 0 then
    local index = ARGV[2] .. node
    local entries = redis.call('SPOP', index, tonumber(ARGV[6]))
    for _, entry in ipairs(entries) do
      local stream, field = string.match(entry, '^([%w%._%-]+)/(%d+)$')
      if stream then
        local members = ARGV[3] .. stream
        local current = redis.call('HGET', members, field)
        if current and member_owner(current) == node then
          redis.call('HDEL', members, field)
          removed = removed + 1
          if redis.call('EXISTS', members) == 0 then redis.call('DEL', ARGV[4] .. stream) end
        end
      end
    end
    if redis.call('EXISTS', index) == 0 then redis.call('SREM', KEYS[1], node) end
  end
end
return removed`;

/** The scripts as ioredis `defineCommand`s (each carries the shared reader). */
export const SCRIPTS = {
  chunkycastClaim: { numberOfKeys: 2, lua: MEMBER_OWNER_LUA + CLAIM_LUA },
  chunkycastRelease: { numberOfKeys: 3, lua: MEMBER_OWNER_LUA + RELEASE_LUA },
  chunkycastSample: { numberOfKeys: 2, lua: MEMBER_OWNER_LUA + SAMPLE_LUA },
  chunkycastOwner: { numberOfKeys: 1, lua: MEMBER_OWNER_LUA + OWNER_LUA },
  chunkycastRoute: { numberOfKeys: 1, lua: MEMBER_OWNER_LUA + ROUTE_LUA },
  chunkycastSweep: { numberOfKeys: 1, lua: MEMBER_OWNER_LUA + SWEEP_LUA },
} as const;

/** How CLAIM_LUA may take an id: see there. */
export type ClaimMode = 'fresh' | 'resume' | 'restate';

export type ScriptArg = string | number;

// ioredis's documented way to type commands added with defineCommand (on clients and pipelines).
declare module 'ioredis' {
  interface RedisCommander<Context extends ClientContext = { type: 'default' }> {
    chunkycastClaim(...args: ScriptArg[]): Result<unknown, Context>;
    chunkycastRelease(...args: ScriptArg[]): Result<unknown, Context>;
    chunkycastSample(...args: ScriptArg[]): Result<unknown, Context>;
    chunkycastOwner(...args: ScriptArg[]): Result<unknown, Context>;
    chunkycastRoute(...args: ScriptArg[]): Result<unknown, Context>;
    chunkycastSweep(...args: ScriptArg[]): Result<unknown, Context>;
  }
}
