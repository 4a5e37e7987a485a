/** How `npm run bench:tracker` spreads a point's sessions over swarms and generator processes. */
import type { BenchPoint } from './options.js';

/** Sessions one generator process takes at most (its open files are capped like the tracker's). */
export const SESSIONS_PER_CLIENT = 12_000;
/** Open files a Node process uses besides its sockets (stdio, epoll, pipes, …), with margin. */
export const FD_OVERHEAD = 64;
/** Further descriptors a generator keeps free of sessions, below its limit. */
const CLIENT_FD_MARGIN = 200;
/** A generator takes at least this many sessions, whatever its open-files limit says. */
const MIN_SESSIONS_PER_CLIENT = 1000;

export interface GeneratorPlan {
  /** `stream:peers` of each swarm it runs. */
  readonly swarms: string[];
  peers: number;
}

/** Splits P peers into swarms of about swarmSize and the swarms over K generator processes. */
export function plan(
  point: BenchPoint,
  clientFdLimit: number,
  clientProcs: number | null,
): { swarmCount: number; clients: GeneratorPlan[] } {
  const swarmCount = Math.ceil(point.peers / point.swarmSize);
  const perClient = Math.max(
    MIN_SESSIONS_PER_CLIENT,
    Math.min(SESSIONS_PER_CLIENT, clientFdLimit - FD_OVERHEAD - CLIENT_FD_MARGIN),
  );
  const wanted = clientProcs ?? Math.ceil(point.peers / perClient);
  const clientCount = Math.max(1, Math.min(wanted, swarmCount));
  const clients: GeneratorPlan[] = Array.from({ length: clientCount }, () => ({ swarms: [], peers: 0 }));
  for (let j = 0; j < swarmCount; j++) {
    const peers = Math.floor(point.peers / swarmCount) + (j < point.peers % swarmCount ? 1 : 0);
    const c = clients[j % clientCount];
    if (c === undefined) continue;
    c.swarms.push(`bench-${j}:${peers}`);
    c.peers += peers;
  }
  return { swarmCount, clients };
}
