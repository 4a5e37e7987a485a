/**
 * A small internet out of Linux network namespaces, for the lab (`npm run lab`).
 *
 * The process that builds it must already be in its own loopback-only network namespace (the lab
 * re-runs itself under `unshare -n`): that namespace becomes the lab's *public segment*, a bridge
 * with the tracker, the origin, the true source and coturn on LAB_PUBLIC_IP. Every viewer gets a
 * *home* namespace with one Chromium; a home sits behind its own *router* namespace (nftables NAT)
 * or, for the public viewer, straight on the bridge. Nothing is connected to the machine's real
 * interfaces, so no packet can leave it.
 *
 * Addresses: the public segment uses 198.18.0.0/24 (RFC 2544's benchmarking range, never routed
 * on the internet: it looks public to Chromium and coturn, which treat RFC 1918 space as private);
 * home LANs use 10.<n>.0.0/24.
 *
 * NAT kinds (RFC 4787 terms):
 * - `port-preserving`: nftables `masquerade` keeps the source port where it can, so one inside
 *   address:port maps to the same outside port for every destination (endpoint-independent mapping);
 *   conntrack admits only replies from where a packet went (address-and-port-dependent filtering):
 *   two such homes reach each other by hole punching with STUN-learned (srflx) candidates.
 * - `symmetric`: `masquerade random,fully-random` gives every new destination its own random port,
 *   so a srflx candidate is useless to any peer but the STUN server: links to other NATed homes need
 *   TURN; links to public hosts still work directly (peer-reflexive candidates).
 * - `lan`: several homes on one LAN bridge behind one port-preserving router: they reach each other
 *   by host candidates.
 * - `public`: no NAT at all.
 *
 * Shaping: `tc` tbf on the home's interface (uplink) and on the router's side of it (downlink).
 * `netem` is missing from this kernel, so there is no emulated delay or loss: every link in the lab
 * has sub-millisecond latency, and the report says so.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';

export const LAB_PUBLIC_IP = '198.18.0.1';
const PUBLIC_PREFIX = '198.18.0';
const PUBLIC_BRIDGE = 'labpub0';
/** Namespaces of one lab run: `cclab<pid>-…`; a later run removes those of runs that died. */
const NS_PREFIX = 'cclab';

export const NAT_KINDS = ['port-preserving', 'symmetric', 'lan', 'public'] as const;
export type NatKind = (typeof NAT_KINDS)[number];

/** One home of a scenario: its NAT, its capped links, and the LAN it shares with others (`lan`). */
export interface HomeSpec {
  readonly name: string;
  readonly nat: NatKind;
  readonly uplinkKbps: number;
  readonly downlinkKbps: number;
  readonly lanGroup?: string;
}

/** A home as built: its namespace, its address on its LAN and the one the world sees. */
export interface Home extends HomeSpec {
  readonly namespace: string;
  readonly address: string;
  readonly publicAddress: string;
  /** The router's namespace, null for a public home. */
  readonly router: string | null;
}

export interface Lab {
  readonly tag: string;
  readonly homes: Home[];
  readonly namespaces: string[];
  /** veth ends made in this (the caller's) namespace: deleted first, see destroyLab. */
  readonly localLinks: string[];
  readonly publicIp: string;
  destroy(): void;
}

interface Router {
  readonly namespace: string;
  readonly wanIp: string;
  readonly lanPrefix: string;
  nextHost: number;
  ports: number;
}

export class LabError extends Error {
  override readonly name = 'LabError';
}

function run(
  command: string,
  args: readonly string[],
  { namespace, input }: { namespace?: string | undefined; input?: string } = {},
): string {
  const argv =
    namespace === undefined ? [command, ...args] : ['ip', 'netns', 'exec', namespace, command, ...args];
  const [file = command, ...rest] = argv;
  try {
    return execFileSync(file, rest, {
      encoding: 'utf8',
      stdio: ['pipe', 'pipe', 'pipe'],
      input,
    });
  } catch (error) {
    const failure = error as { stderr?: string | Buffer; message?: string };
    const stderr = (failure.stderr ?? '').toString().trim();
    throw new LabError(
      `lab network: \`${argv.join(' ')}\` failed: ${stderr || (failure.message ?? String(error))}`,
    );
  }
}

const ip = (args: readonly string[], namespace?: string): string =>
  run('ip', namespace === undefined ? args : ['-n', namespace, ...args]);

/** The tools the lab needs, each with the Debian package that has it. */
export function missingTools(): (readonly [string, string])[] {
  const need: (readonly [string, string])[] = [
    ['ip', 'iproute2'],
    ['tc', 'iproute2'],
    ['nft', 'nftables'],
    ['turnserver', 'coturn'],
    ['unshare', 'util-linux'],
  ];
  return need.filter(
    ([tool]) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0,
  );
}

/** Removes namespaces left by lab runs whose process is gone (a run killed by SIGKILL). */
export function removeStaleNamespaces(): string[] {
  if (!existsSync('/run/netns')) return [];
  const removed: string[] = [];
  for (const name of readdirSync('/run/netns')) {
    const m = new RegExp(`^${NS_PREFIX}(\\d+)-`).exec(name);
    if (m === null) continue;
    const pid = Number(m[1]);
    let alive = false;
    try {
      process.kill(pid, 0);
      alive = true;
    } catch {
      alive = false;
    }
    if (alive && pid !== process.pid) continue;
    spawnSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
    removed.push(name);
  }
  return removed;
}

/** tbf for `rateKbps` on `dev`: a burst of about 20 ms of traffic (at least two full frames), 200 ms of queue. */
function shape(dev: string, rateKbps: number, namespace: string | undefined): void {
  const burstBytes = Math.max(3200, Math.round((rateKbps * 1000) / 8 / 50));
  run(
    'tc',
    [
      'qdisc',
      'replace',
      'dev',
      dev,
      'root',
      'tbf',
      'rate',
      `${rateKbps}kbit`,
      'burst',
      String(burstBytes),
      'latency',
      '200ms',
    ],
    {
      namespace,
    },
  );
}

/**
 * Builds the lab for `homes` ([{ name, nat, uplinkKbps, downlinkKbps, lanGroup? }]) and returns
 * a handle: each home's namespace and address, a byte counter per home uplink, and `destroy()`.
 */
export function buildLab(homes: readonly HomeSpec[]): Lab {
  const missing = missingTools();
  if (missing.length > 0)
    throw new LabError(
      `lab network: missing ${missing.map(([t, p]) => `${t} (Debian ${p})`).join(', ')}: run \`npm run setup\``,
    );
  if (process.getuid?.() !== 0) throw new LabError('lab network: building namespaces needs root');
  const ifaces = Object.keys(ipLinks());
  if (ifaces.some((name) => name !== 'lo'))
    throw new LabError(
      `lab network: must run inside its own loopback-only network namespace (sees ${ifaces.join(', ')})`,
    );
  removeStaleNamespaces();
  const tag = `${NS_PREFIX}${process.pid}`;
  const namespaces: string[] = [];
  const localLinks: string[] = [];
  const lab: Lab = {
    tag,
    homes: [],
    namespaces,
    localLinks,
    publicIp: LAB_PUBLIC_IP,
    destroy: () => {
      destroyLab(lab);
    },
  };
  const addNs = (name: string): string => {
    ip(['netns', 'add', name]);
    namespaces.push(name);
    ip(['link', 'set', 'lo', 'up'], name);
    return name;
  };
  try {
    ip(['link', 'add', PUBLIC_BRIDGE, 'type', 'bridge']);
    ip(['addr', 'add', `${LAB_PUBLIC_IP}/24`, 'dev', PUBLIC_BRIDGE]);
    ip(['link', 'set', PUBLIC_BRIDGE, 'up']);
    /** Routers by LAN group (homes sharing one NAT). */
    const groupRouters = new Map<string, Router>();
    let wanHost = 10;
    let routerIndex = 0;
    const makeRouter = (nat: 'port-preserving' | 'symmetric'): Router => {
      routerIndex++;
      const router = addNs(`${tag}-r${routerIndex}`);
      const wanIp = `${PUBLIC_PREFIX}.${wanHost++}`;
      const outside = `lw${routerIndex}`;
      ip(['link', 'add', outside, 'type', 'veth', 'peer', 'name', 'wan', 'netns', router]);
      localLinks.push(outside);
      ip(['link', 'set', outside, 'master', PUBLIC_BRIDGE, 'up']);
      ip(['addr', 'add', `${wanIp}/24`, 'dev', 'wan'], router);
      ip(['link', 'set', 'wan', 'up'], router);
      ip(['link', 'add', 'lan', 'type', 'bridge'], router);
      const lanPrefix = `10.${routerIndex}.0`;
      ip(['addr', 'add', `${lanPrefix}.1/24`, 'dev', 'lan'], router);
      ip(['link', 'set', 'lan', 'up'], router);
      run('sysctl', ['-qw', 'net.ipv4.ip_forward=1'], { namespace: router });
      const masquerade = nat === 'symmetric' ? 'masquerade random,fully-random' : 'masquerade';
      run('nft', ['-f', '-'], {
        namespace: router,
        // The filter table is the home router's firewall: unsolicited packets from outside are
        // dropped. It matters for more than safety: dropped before conntrack confirms them, they
        // leave no entry behind, whereas an entry for a peer's early hole-punching packet (addressed
        // to the router itself) would clash with the mapping the viewer's own packet to that peer
        // needs a moment later, and masquerade would pick another port: a port-preserving NAT
        // would then act like a symmetric one for exactly the peers it should reach directly.
        input: `table ip nat {\n  chain postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n    oifname "wan" ${masquerade}\n  }\n}\ntable ip filter {\n  chain input {\n    type filter hook input priority filter; policy accept;\n    iifname "wan" ct state new drop\n  }\n}\n`,
      });
      return { namespace: router, wanIp, lanPrefix, nextHost: 2, ports: 0 };
    };
    homes.forEach((home, i) => {
      const ns = addNs(`${tag}-h${i + 1}`);
      let address: string;
      let gateway: string;
      let downDev: string;
      let downNs: string | undefined;
      let router: Router | undefined;
      if (home.nat === 'public') {
        address = `${PUBLIC_PREFIX}.${100 + i}`;
        gateway = LAB_PUBLIC_IP;
        downDev = `lp${i + 1}`;
        ip(['link', 'add', downDev, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
        localLinks.push(downDev);
        ip(['link', 'set', downDev, 'master', PUBLIC_BRIDGE, 'up']);
        ip(['addr', 'add', `${address}/24`, 'dev', 'eth0'], ns);
        downNs = undefined;
      } else {
        if (home.nat === 'lan') {
          const group = home.lanGroup ?? 'lan';
          router = groupRouters.get(group);
          if (router === undefined) {
            router = makeRouter('port-preserving');
            groupRouters.set(group, router);
          }
        } else router = makeRouter(home.nat);
        address = `${router.lanPrefix}.${router.nextHost++}`;
        gateway = `${router.lanPrefix}.1`;
        downDev = `p${++router.ports}`;
        downNs = router.namespace;
        ip(['link', 'add', downDev, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns], router.namespace);
        ip(['link', 'set', downDev, 'master', 'lan', 'up'], router.namespace);
        ip(['addr', 'add', `${address}/24`, 'dev', 'eth0'], ns);
      }
      ip(['link', 'set', 'eth0', 'up'], ns);
      ip(['route', 'add', 'default', 'via', gateway], ns);
      shape('eth0', home.uplinkKbps, ns);
      shape(downDev, home.downlinkKbps, downNs);
      lab.homes.push({
        ...home,
        namespace: ns,
        address,
        publicAddress: router === undefined ? address : router.wanIp,
        router: router?.namespace ?? null,
      });
    });
  } catch (error) {
    destroyLab(lab);
    throw error;
  }
  return lab;
}

/** The interfaces this namespace sees, by name. */
function ipLinks(): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const link of JSON.parse(ip(['-j', 'link', 'show'])) as { ifname: string }[]) out[link.ifname] = link;
  return out;
}

/**
 * Deletes the lab's namespaces and the public bridge. The veth ends in the caller's namespace are
 * deleted first, by name: deleting a namespace takes its veths' far ends with it only when the
 * kernel gets round to it, and until then they stay visible here (the e2e test after the lab's saw
 * them and refused to run outside a loopback-only namespace).
 */
export function destroyLab(lab: Pick<Lab, 'localLinks' | 'namespaces'>): void {
  for (const name of lab.localLinks.splice(0)) spawnSync('ip', ['link', 'del', name], { stdio: 'ignore' });
  for (const ns of lab.namespaces.splice(0).reverse())
    spawnSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
  spawnSync('ip', ['link', 'del', PUBLIC_BRIDGE], { stdio: 'ignore' });
}

/** One home's uplink counter: bytes sent, and when (ms) they were read. */
export interface UplinkReading {
  readonly bytes: number;
  readonly atMs: number;
}

/**
 * Bytes each home has sent on its uplink (its eth0's tx counter), all homes at once: one process
 * per home, in parallel (asynchronously, so sampling does not stall the harness). Each value is
 * `{ bytes, atMs }`, with `atMs` read by the same process a moment before the counter (`date`, then
 * the counter from sysfs): a time taken when the answer reaches us is late by however long the
 * process took to start and report, which on this busy 2-core machine varied by hundreds of ms and
 * made 1 s rates of a 0.5 Mbit/s tbf-shaped uplink read up to 168% of its cap. Null if the read failed.
 */
export async function readUplinkBytes(lab: Pick<Lab, 'homes'>): Promise<(UplinkReading | null)[]> {
  const readOne = (home: Home): Promise<UplinkReading | null> =>
    new Promise((resolve) => {
      execFile(
        'ip',
        [
          'netns',
          'exec',
          home.namespace,
          'sh',
          '-c',
          'date +%s%N; cat /sys/class/net/eth0/statistics/tx_bytes',
        ],
        (error, stdout) => {
          if (error) {
            resolve(null);
            return;
          }
          const [ns, bytes] = stdout.trim().split(/\s+/).map(Number);
          resolve(
            ns !== undefined && bytes !== undefined && Number.isFinite(ns) && Number.isFinite(bytes)
              ? { bytes, atMs: ns / 1e6 }
              : null,
          );
        },
      );
    });
  return Promise.all(lab.homes.map(readOne));
}
