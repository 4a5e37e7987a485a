/**
 * Introducing peers and relaying their WebRTC signalling: `bootstrap` samples, `signal` relays (to
 * a member here or, through the cluster, on another process), and members' `report`s, whose
 * cut-offs can ban a peer from new introductions and whose link counts feed the peer metrics.
 */
import type { ClientMessage, ConnectivityReport, PeerId, ServerMessage } from '@chunkycast/wire';
import { ConnectivityCounters } from '../connectivity.js';
import type { Member } from '../swarm.js';
import { Refusal, type Connection, type TrackerContext } from './context.js';
import type { Connections } from './connections.js';
import type { Joins } from './joins.js';

type Frame<T extends ClientMessage['type']> = Extract<ClientMessage, { type: T }>;

/** Peer ids are u32s from 1; 0 decodes but is never assigned, so no process holds it. */
const MIN_PEER_ID = 1;

export class Signalling {
  /** Peers' link counts by route, failures and relayed bytes, from their reports (aggregates only). */
  readonly connectivity = new ConnectivityCounters();
  /** Each member's last report that carried connectivity: the next one adds only what grew since. */
  private readonly lastConnectivity = new WeakMap<Member, ConnectivityReport>();

  constructor(
    private readonly context: TrackerContext,
    private readonly connections: Connections,
    private readonly joins: Joins,
  ) {}

  async bootstrap(conn: Connection, message: Frame<'bootstrap'>): Promise<void> {
    const { member, swarm } = this.joins.joined(conn);
    const exclude = member.role === 'source' ? null : member.peerId;
    // Viewers of every process; the source is never in a sample.
    const sampled = await this.context.cluster.sampleViewers(swarm.stream, message.count, exclude);
    // A peer its neighbours cut off is introduced to nobody (cut-offs.ts).
    const peers = sampled.filter((id) => !swarm.cutOffs.isBanned(id));
    this.connections.send(conn, { type: 'peers', peers });
  }

  async signal(conn: Connection, message: Frame<'signal'>): Promise<void> {
    const { member, swarm } = this.joins.joined(conn);
    const counters = this.context.counters;
    if (message.to === member.peerId) throw new Refusal('invalidField', 'cannot signal yourself');
    // No new connection to or from a peer that several members cut off (cut-offs.ts): its open
    // links stay, but it cannot walk on to fresh neighbours that pay for it again.
    const senderBanned = swarm.cutOffs.isBanned(member.peerId);
    if (senderBanned || swarm.cutOffs.isBanned(message.to)) {
      counters.signalsRefusedCutOff++;
      throw new Refusal(
        'forbidden',
        senderBanned
          ? 'members cut you off: no new connections are signalled for you'
          : `peer ${message.to} was cut off by its neighbours: no new connections to it`,
      );
    }
    const relayed = { type: 'signal', from: member.peerId, data: message.data } as const;
    // This process's own members first: the cluster routes only to other processes.
    const target = swarm.get(message.to);
    if (target !== undefined) target.send(relayed);
    else if (message.to < MIN_PEER_ID)
      throw new Refusal('unknownPeer', `peer ${message.to} is not in stream ${swarm.stream}`);
    else {
      const routed = await this.context.cluster.deliver(swarm.stream, message.to, relayed);
      if (routed !== 'delivered')
        throw new Refusal(
          'unknownPeer',
          routed === 'unavailable'
            ? `peer ${message.to} cannot be reached right now`
            : `peer ${message.to} is not in stream ${swarm.stream}`,
        );
    }
    counters.signalsRelayed++;
  }

  report(conn: Connection, message: Frame<'report'>): void {
    const { member, swarm } = this.joins.joined(conn);
    member.report = message.report;
    for (const peer of message.report.cutOff ?? [])
      if (swarm.cutOffs.report(member.peerId, peer)) {
        this.context.counters.peersBannedForCutOffs++;
        this.context.log('info', 'peer cut off by several members: no new connections signalled for it', {
          stream: swarm.stream,
          peerId: peer,
        });
      }
    const next = message.report.connectivity;
    if (next !== undefined) {
      this.connectivity.add(this.lastConnectivity.get(member), next, this.joins.resumedMembers.has(member));
      this.lastConnectivity.set(member, next);
    }
  }

  /** A signal another process relayed to one of this process's members. */
  onRemoteMessage(stream: string, to: PeerId, message: ServerMessage): void {
    const log = this.context.log;
    // Other processes only relay signals; anything else would let the store speak for the tracker.
    if (message.type !== 'signal') {
      log('warn', 'dropped a relayed message that is not a signal', { stream, type: message.type });
      return;
    }
    const target = this.context.registry.get(stream)?.get(to);
    if (target !== undefined) {
      target.send(message);
      return;
    }
    // Its join may still await the cluster (the id is claimed before the member is in the swarm).
    if (this.joins.pending.addSignal(stream, to, message)) return;
    // Left meanwhile; the sender's link attempt times out as with any vanished peer.
    log('debug', 'dropped a relayed signal for a member that is gone', { stream, peerId: to });
  }
}
