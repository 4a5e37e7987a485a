/**
 * Segment announcements: the true source's, checked against the broadcaster's signature and fanned
 * out to this process's viewers and to the other tracker processes; and those of other processes,
 * checked again before any viewer here sees them.
 */
import { announcementSigningBytes, type SignedAnnouncement } from '@chunkycast/wire';
import type { Swarm } from '../swarm.js';
import { Refusal, type Connection, type TrackerContext } from './context.js';
import type { Joins } from './joins.js';

/** Bytes of an Ed25519 signature. */
const ED25519_SIGNATURE_BYTES = 64;
/**
 * Announcements from other processes awaiting their signature check. A source announces about one
 * a second per stream, so this is only reached by a flood through the store, which is then cut.
 */
const MAX_QUEUED_REMOTE_ANNOUNCEMENTS = 1024;

export class Announcements {
  /** Remote announcements are re-verified one after another on this chain, keeping their order. */
  private remoteChain: Promise<void> = Promise.resolve();
  private remoteQueued = 0;

  constructor(
    private readonly context: TrackerContext,
    private readonly joins: Joins,
    /** The broadcaster's public key; null: announcements are relayed unchecked. */
    private readonly verifyKey: CryptoKey | null,
  ) {}

  /** An `announce` frame from a connection: only the stream's true source may, with a valid signature. */
  async announce(conn: Connection, a: SignedAnnouncement): Promise<void> {
    const { member, swarm } = this.joins.joined(conn);
    if (member.role !== 'source') throw new Refusal('forbidden', 'only the true source announces segments');
    if (a.stream !== swarm.stream)
      throw new Refusal('invalidField', `announcement is for stream ${a.stream}, not ${swarm.stream}`);
    if (!(await this.verifies(a)))
      throw new Refusal('invalidField', 'announcement signature does not verify');
    // The source may have left (or been replaced) while the signature was being checked.
    if (swarm.source !== member) return;
    this.context.counters.announcements++;
    this.fanOut(swarm, a);
    await this.context.cluster.publishAnnouncement(a);
  }

  /**
   * An announcement another process accepted. Redis is network input, so the signature is checked
   * again before any viewer here sees it; the checks run one after another to keep the order.
   */
  onRemoteAnnouncement(a: SignedAnnouncement): void {
    const { log, counters, registry } = this.context;
    if (this.remoteQueued >= MAX_QUEUED_REMOTE_ANNOUNCEMENTS) {
      log('warn', 'dropped an announcement from another process: too many awaiting verification', {
        stream: a.stream,
        sequence: a.sequence,
      });
      return;
    }
    this.remoteQueued++;
    this.remoteChain = this.remoteChain
      .then(async () => {
        if (!(await this.verifies(a))) {
          counters.remoteAnnouncementsRejected++;
          log('warn', 'dropped an announcement from another process: its signature does not verify', {
            stream: a.stream,
            sequence: a.sequence,
          });
          return;
        }
        this.fanOut(registry.get(a.stream), a);
      })
      .catch((e: unknown) => {
        counters.handlerFaults++;
        log('error', 'handler fault on a remote announcement', { error: e });
      })
      .finally(() => {
        this.remoteQueued--;
      });
  }

  /** Whether the announcement carries the broadcaster's signature (always true without a key). */
  private async verifies(a: SignedAnnouncement): Promise<boolean> {
    if (this.verifyKey === null) return true;
    const signature = Buffer.from(a.signature, 'base64');
    return (
      signature.length === ED25519_SIGNATURE_BYTES &&
      crypto.subtle.verify('Ed25519', this.verifyKey, signature, new Uint8Array(announcementSigningBytes(a)))
    );
  }

  /** Gives an accepted announcement to this process's viewers of its stream (and to joins in flight). */
  private fanOut(swarm: Swarm | undefined, a: SignedAnnouncement): void {
    this.joins.pending.addAnnouncement(a);
    if (swarm === undefined) return;
    swarm.addAnnouncement(a);
    for (const viewer of swarm.viewerMembers()) viewer.send({ type: 'announce', announcement: a });
  }
}
