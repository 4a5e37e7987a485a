import { bloomMaskFor, type Random } from '@chunkycast/engine';
import {
  ForcedReason,
  MessageType,
  bloomOr,
  type DataMessage,
  type Message,
  type PeerId,
} from '@chunkycast/wire';

/**
 * A red team for the simulator (issue 18 §2). A hostile member runs the honest engine (it joins,
 * advertises and takes children like anyone) and lies in what it sends: the simulator rewrites or
 * drops its outgoing messages, as a modified client would. What it does to honest members is
 * recorded as harm, so the summary can say how long each attacker could go on.
 */
export const ADVERSARY_KINDS = [
  /** Forwards every data packet under its sequence + 10⁶ (the attack that silenced subtrees). */
  'seq-forger',
  /** Forwards honestly and sends each child, with every packet, a copy of an older one again. */
  'replayer',
  /** Accepts children and forwards nothing, repairs included. */
  'withholder',
  /** Forwards about half of what it owes its children. */
  'selective',
  /** Advertises no load at all, to attract children, then forwards nothing. */
  'load-liar',
  /** Floods every neighbour with parent and repair requests. */
  'switch-spammer',
  /** Puts each child's own mask into the Bloom filter of what it forwards: a loop, as far as the child can tell. */
  'bloom-liar',
] as const;
export type AdversaryKind = (typeof ADVERSARY_KINDS)[number];

export interface AdversarySpec {
  readonly kind: AdversaryKind;
  /** Fraction of the members of this kind (0 < f < 1). */
  readonly fraction: number;
}

/** Requests a switch-spammer sends each neighbour per second (REQUEST_RATE_PER_S allows 32). */
export const SPAM_PER_NEIGHBOUR_PER_S = 50;
/** Sequence offset of a seq-forger's packets. */
export const FORGED_SEQ_OFFSET = 1_000_000;
/** Older packets a replayer keeps per child to send again. */
const REPLAY_HISTORY = 16;

export class AdversaryParseError extends Error {
  override readonly name = 'AdversaryParseError';
}

/**
 * `KIND:FRACTION[,KIND:FRACTION]`, or `all:FRACTION` for every kind at that fraction each. The
 * fractions together must leave honest members (sum < 0.5).
 */
export function parseAdversaries(text: string): AdversarySpec[] {
  const specs: AdversarySpec[] = [];
  for (const part of text.split(',')) {
    const [name, value, extra] = part.trim().split(':');
    if (name === undefined || value === undefined || extra !== undefined || name === '')
      throw new AdversaryParseError(`--adversaries: "${part}" is not KIND:FRACTION`);
    const fraction = Number(value);
    if (!Number.isFinite(fraction) || fraction <= 0 || fraction >= 1)
      throw new AdversaryParseError(`--adversaries: fraction of ${name} must be in (0, 1), got "${value}"`);
    const kinds: readonly AdversaryKind[] =
      name === 'all' ? ADVERSARY_KINDS : isAdversaryKind(name) ? [name] : [];
    if (kinds.length === 0)
      throw new AdversaryParseError(
        `--adversaries: unknown kind "${name}" (kinds: ${ADVERSARY_KINDS.join(', ')}, or all)`,
      );
    for (const kind of kinds) {
      if (specs.some((s) => s.kind === kind))
        throw new AdversaryParseError(`--adversaries: ${kind} given twice`);
      specs.push({ kind, fraction });
    }
  }
  const total = specs.reduce((sum, s) => sum + s.fraction, 0);
  if (total >= 0.5)
    throw new AdversaryParseError(`--adversaries: the fractions add up to ${total}; keep them under 0.5`);
  return specs;
}

export function isAdversaryKind(name: string): name is AdversaryKind {
  return (ADVERSARY_KINDS as readonly string[]).includes(name);
}

/**
 * Harm more than this apart is two episodes: the member left the attacker (or it left the member's
 * trees) and met it again later, a new exposure, which the member had no grounds to refuse.
 */
export const HARM_EPISODE_GAP_MS = 5000;

/** What one attacker did to one honest member. */
export interface HarmSpan {
  first: number;
  last: number;
  acts: number;
  /** Start of the current episode, the longest episode so far and all episodes together (ms). */
  episodeStart: number;
  longestEpisodeMs: number;
  exposureMs: number;
}

/** One hostile member's lies; `rewrite` turns what its engine sends into what it really sends. */
export class Adversary {
  /** Honest members harmed, with when. */
  readonly victims = new Map<PeerId, HarmSpan>();
  private readonly history = new Map<PeerId, DataMessage[]>();

  constructor(
    readonly id: PeerId,
    readonly kind: AdversaryKind,
    private readonly random: Random,
  ) {}

  /**
   * The messages really sent in place of `message` to `to`; `harm` is called for each lie (a
   * rewritten, extra or withheld tree packet, a spam request); the host decides whether it reached
   * an honest member that still listens.
   */
  rewrite(to: PeerId, message: Message, harm: () => void): readonly Message[] {
    switch (this.kind) {
      case 'seq-forger':
        if (message.type !== MessageType.Data || message.seq + FORGED_SEQ_OFFSET > 0xffff_ffff)
          return [message];
        harm();
        return [{ ...message, seq: message.seq + FORGED_SEQ_OFFSET }];
      case 'replayer': {
        if (message.type !== MessageType.Data) return [message];
        let past = this.history.get(to);
        if (past === undefined) this.history.set(to, (past = []));
        const old = past.length >= 4 ? past[this.random.int(past.length - 2)] : undefined;
        past.push(message);
        if (past.length > REPLAY_HISTORY) past.shift();
        if (old === undefined) return [message];
        harm();
        return [message, old];
      }
      case 'withholder':
        // Repair replies are withheld too, but only tree packets count as harm: a helper that does
        // not answer costs a timeout, and the repair module leaves it alone for a while.
        if (message.type === MessageType.Data) harm();
        if (message.type === MessageType.Data || message.type === MessageType.PacketRepairData) return [];
        return [message];
      case 'selective':
        if (message.type === MessageType.Data && this.random.nextFloat() < 0.5) {
          harm();
          return [];
        }
        return [message];
      case 'load-liar':
        if (message.type === MessageType.Advert) return [{ ...message, load: 0 }];
        if (message.type === MessageType.Data) harm();
        if (message.type === MessageType.Data || message.type === MessageType.PacketRepairData) return [];
        return [message];
      case 'switch-spammer':
        return [message];
      case 'bloom-liar':
        if (message.type !== MessageType.Data) return [message];
        harm();
        return [{ ...message, bloom: bloomOr(message.bloom, bloomMaskFor(to)) }];
    }
  }

  /** A switch-spammer's flood for one second to one neighbour (empty for other kinds). */
  spam(slices: number): Message[] {
    if (this.kind !== 'switch-spammer') return [];
    const out: Message[] = [];
    for (let i = 0; i < SPAM_PER_NEIGHBOUR_PER_S; i++) {
      const slice = this.random.int(slices);
      out.push(
        i % 2 === 0
          ? { type: MessageType.ForcedParentRequest, slice, reason: ForcedReason.ParentLost, fromSeq: 0 }
          : {
              type: MessageType.PacketRepairRequest,
              slice,
              requestId: this.random.nextU32(),
              baseSeq: this.random.int(1000),
              wanted: 0xffff,
            },
      );
    }
    return out;
  }

  recordHarm(victim: PeerId, now: number): void {
    const span = this.victims.get(victim);
    if (span === undefined) {
      this.victims.set(victim, {
        first: now,
        last: now,
        acts: 1,
        episodeStart: now,
        longestEpisodeMs: 0,
        exposureMs: 0,
      });
      return;
    }
    if (now - span.last > HARM_EPISODE_GAP_MS) {
      span.exposureMs += span.last - span.episodeStart;
      span.episodeStart = now;
    }
    span.last = now;
    span.acts++;
    span.longestEpisodeMs = Math.max(span.longestEpisodeMs, now - span.episodeStart);
  }
}

/** Per attacker kind: how far its members got, judged by the honest members they harmed. */
export interface AdversaryKindSummary {
  readonly kind: AdversaryKind;
  readonly attackers: number;
  /** Attackers that harmed anyone at all. */
  readonly attackersHarming: number;
  /** (attacker, honest member) pairs with any harm. */
  readonly victimPairs: number;
  /**
   * Per pair, the longest episode of harm (from a harmful message until the member stopped taking
   * them, episodes split by HARM_EPISODE_GAP_MS), s: how long the member put up with it once met.
   */
  readonly harmSeconds: { readonly p50: number; readonly p95: number; readonly max: number };
  /** Per pair, all episodes together, s. */
  readonly exposureSeconds: { readonly p50: number; readonly p95: number; readonly max: number };
  /** Pairs with more than one episode (the member met the attacker again later). */
  readonly pairsWithSeveralEpisodes: number;
  /** Attackers all of whose episodes with every victim ended within 30 s. */
  readonly attackersStoppedWithin30sFraction: number;
  /** Attackers still harming somebody in the run's last 5 s. */
  readonly attackersHarmingAtEnd: number;
  /** Pairs in which the honest member cut the attacker off, and how long after its first harm, s. */
  readonly pairsCutOffFraction: number;
  readonly cutOffSeconds: { readonly p50: number; readonly p95: number; readonly max: number };
}

export interface AdversarySummary {
  readonly kinds: readonly AdversaryKindSummary[];
  /** Honest members cut off by honest members: (pairs, distinct members). Goal: none. */
  readonly honestCutOffPairs: number;
  readonly honestMembersCutOff: number;
  /** Violations honest members reported against honest peers, by reason. */
  readonly honestAccusations: Readonly<Record<string, number>>;
}

function spread(values: number[]): { p50: number; p95: number; max: number } {
  if (values.length === 0) return { p50: 0, p95: 0, max: 0 };
  values.sort((a, b) => a - b);
  const at = (q: number): number =>
    values[Math.min(values.length - 1, Math.max(0, Math.ceil(q * values.length) - 1))] ?? 0;
  const r = (x: number): number => Math.round(x * 10) / 10;
  return { p50: r(at(0.5)), p95: r(at(0.95)), max: r(values[values.length - 1] ?? 0) };
}

export function summarizeAdversaries(
  members: readonly { readonly id: number; readonly hostile: Adversary | null }[],
  cutOffs: readonly { readonly by: number; readonly peer: number; readonly at: number }[],
  accusations: ReadonlyMap<string, number>,
  endMs: number,
): AdversarySummary {
  const hostileIds = new Set<number>();
  for (const m of members) if (m.hostile !== null) hostileIds.add(m.id);
  const cutAt = new Map<string, number>();
  const honestCut = new Set<number>();
  let honestCutOffPairs = 0;
  for (const c of cutOffs) {
    if (hostileIds.has(c.peer)) {
      const k = `${c.peer}:${c.by}`;
      if (!cutAt.has(k)) cutAt.set(k, c.at);
    } else if (c.peer !== 0) {
      honestCutOffPairs++;
      honestCut.add(c.peer);
    }
  }
  const kinds: AdversaryKindSummary[] = [];
  for (const kind of ADVERSARY_KINDS) {
    const attackers = members.filter((m) => m.hostile?.kind === kind);
    if (attackers.length === 0) continue;
    const harm: number[] = [];
    const exposure: number[] = [];
    let several = 0;
    const cut: number[] = [];
    let pairs = 0;
    let pairsCut = 0;
    let harming = 0;
    let stopped = 0;
    let atEnd = 0;
    for (const a of attackers) {
      const victims = a.hostile?.victims;
      if (victims === undefined || victims.size === 0) continue;
      harming++;
      let worst = 0;
      let last = -Infinity;
      for (const [victim, span] of victims) {
        pairs++;
        const seconds = span.longestEpisodeMs / 1000;
        harm.push(seconds);
        exposure.push((span.exposureMs + span.last - span.episodeStart) / 1000);
        if (span.episodeStart > span.first) several++;
        worst = Math.max(worst, seconds);
        last = Math.max(last, span.last);
        const at = cutAt.get(`${a.id}:${victim}`);
        if (at !== undefined) {
          pairsCut++;
          cut.push(Math.max(0, at - span.first) / 1000);
        }
      }
      if (worst <= 30) stopped++;
      if (last >= endMs - 5000) atEnd++;
    }
    kinds.push({
      kind,
      attackers: attackers.length,
      attackersHarming: harming,
      victimPairs: pairs,
      harmSeconds: spread(harm),
      exposureSeconds: spread(exposure),
      pairsWithSeveralEpisodes: several,
      attackersStoppedWithin30sFraction: harming === 0 ? 1 : Math.round((stopped / harming) * 1e4) / 1e4,
      attackersHarmingAtEnd: atEnd,
      pairsCutOffFraction: pairs === 0 ? 0 : Math.round((pairsCut / pairs) * 1e4) / 1e4,
      cutOffSeconds: spread(cut),
    });
  }
  return {
    kinds,
    honestCutOffPairs,
    honestMembersCutOff: honestCut.size,
    honestAccusations: Object.fromEntries([...accusations].sort((a, b) => b[1] - a[1])),
  };
}

/** What the rendezvous's ban (REPORTS_TO_BAN members cut a peer off) did in a run. */
export interface BanSummary {
  readonly enabled: boolean;
  /** Hostile and honest members banned (an honest one banned is collateral). */
  readonly hostileBanned: number;
  readonly honestBanned: number;
  /** Seconds from the start of the run to each hostile member's ban. */
  readonly secondsToBan: { readonly p50: number; readonly p95: number; readonly max: number } | null;
  /** Messages dropped because they needed a new connection to or from a banned peer. */
  readonly messagesRefused: number;
}

export function summarizeBans(
  result: {
    readonly members: readonly { readonly id: number; readonly hostile: Adversary | null }[];
    readonly bannedAtRendezvous: ReadonlyMap<number, number>;
    readonly messagesRefusedBan: number;
  },
  enabled: boolean,
): BanSummary {
  const hostile = new Set<number>();
  for (const m of result.members) if (m.hostile !== null) hostile.add(m.id);
  const seconds: number[] = [];
  let honestBanned = 0;
  for (const [peer, at] of result.bannedAtRendezvous) {
    if (hostile.has(peer)) seconds.push(at / 1000);
    else honestBanned++;
  }
  seconds.sort((a, b) => a - b);
  const at = (q: number): number =>
    Math.round((seconds[Math.min(seconds.length - 1, Math.floor(q * seconds.length))] ?? 0) * 10) / 10;
  return {
    enabled,
    hostileBanned: seconds.length,
    honestBanned,
    secondsToBan: seconds.length === 0 ? null : { p50: at(0.5), p95: at(0.95), max: at(1) },
    messagesRefused: result.messagesRefusedBan,
  };
}
