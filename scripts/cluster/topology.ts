// The cluster test's network: Linux network namespaces joined by veth links on a bridge that lives in its own
// namespace. Test addresses only (10.77.<n>.0/24), no default route anywhere, nothing attached to the machine's own
// namespace, so no test traffic can reach the machine's real interfaces. Every name carries a per-run tag, and
// teardown deletes the namespaces (which deletes their links), so a run leaves nothing behind, even after a crash
// of the scenarios (the caller tears down in `finally` and on signals).
import { execFileSync } from 'node:child_process';

export interface Host {
  /** Role, and the last part of the namespace name: api, redis, w1, w2, client. */
  name: string;
  ns: string;
  ip: string;
  /** The bridge-side end of its link: set down to partition the host. */
  bridgePort: string;
}

export interface Topology {
  tag: string;
  bridgeNs: string;
  hosts: Record<string, Host>;
}

const run = (args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000 });

/** Why this machine cannot run the cluster test, or null when it can (root, `ip`, network namespaces, veth). */
export function whyNotSupported(): string | null {
  if (process.platform !== 'linux') return `network namespaces are Linux-only (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'creating network namespaces needs root';
  const probe = `hc-probe-${process.pid}`;
  try {
    execFileSync('ip', ['-V'], { stdio: 'ignore' });
  } catch {
    return 'the `ip` command (iproute2) is not installed';
  }
  try {
    run(['netns', 'add', probe]);
    run(['-n', probe, 'link', 'add', 'p0', 'type', 'veth', 'peer', 'name', 'p1']);
  } catch (err) {
    return `network namespaces or veth links are not available here: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`;
  } finally {
    try {
      run(['netns', 'del', probe]);
    } catch {
      /* never created */
    }
  }
  return null;
}

/**
 * Whether `tc qdisc … <kind>` works inside a namespace (netem, tbf and blackhole are kernel modules a machine may
 * lack; blackhole drops every packet a link sends, with the link still up).
 */
export function qdiscAvailable(kind: 'netem' | 'tbf' | 'blackhole'): boolean {
  const probe = `hc-qd-${process.pid}`;
  try {
    run(['netns', 'add', probe]);
    const args = kind === 'netem' ? ['delay', '10ms'] : kind === 'tbf' ? ['rate', '1mbit', 'burst', '32kbit', 'latency', '400ms'] : [];
    execFileSync('ip', ['netns', 'exec', probe, 'tc', 'qdisc', 'add', 'dev', 'lo', 'root', kind, ...args], { stdio: 'ignore', timeout: 10_000 });
    return true;
  } catch {
    return false;
  } finally {
    try {
      run(['netns', 'del', probe]);
    } catch {
      /* never created */
    }
  }
}

export function createTopology(names: string[], subnet = 77): Topology {
  const tag = (process.pid % 10_000).toString(36);
  const bridgeNs = `hc${tag}-br`;
  const hosts: Record<string, Host> = {};
  names.forEach((name, i) => (hosts[name] = { name, ns: `hc${tag}-${name}`, ip: `10.${subnet}.0.${i + 2}`, bridgePort: `b-${name}` }));
  const topo = { tag, bridgeNs, hosts };
  try {
    run(['netns', 'add', bridgeNs]);
    run(['-n', bridgeNs, 'link', 'add', 'br0', 'type', 'bridge']);
    run(['-n', bridgeNs, 'link', 'set', 'br0', 'up']);
    for (const h of Object.values(hosts)) {
      run(['netns', 'add', h.ns]);
      run(['-n', h.ns, 'link', 'set', 'lo', 'up']);
      run(['-n', bridgeNs, 'link', 'add', h.bridgePort, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', h.ns]);
      run(['-n', bridgeNs, 'link', 'set', h.bridgePort, 'master', 'br0', 'up']);
      run(['-n', h.ns, 'addr', 'add', `${h.ip}/24`, 'dev', 'eth0']);
      run(['-n', h.ns, 'link', 'set', 'eth0', 'up']);
    }
  } catch (err) {
    destroyTopology(topo);
    throw err;
  }
  return topo;
}

/** Delete every namespace of the run (their links go with them); never throws. */
export function destroyTopology(topo: Topology): void {
  for (const ns of [...Object.values(topo.hosts).map((h) => h.ns), topo.bridgeNs]) {
    try {
      run(['netns', 'del', ns]);
    } catch {
      /* not created, or already gone */
    }
  }
}

/** Cut (down) or restore (up) a host's only link. */
export function setLink(topo: Topology, host: string, state: 'up' | 'down'): void {
  run(['-n', topo.bridgeNs, 'link', 'set', topo.hosts[host].bridgePort, state]);
}

/** Shape a host's outgoing traffic with tc (tbf: a rate limit), or clear it. */
export function shapeLink(topo: Topology, host: string, args: string[] | null): void {
  const h = topo.hosts[host];
  const base = ['netns', 'exec', h.ns, 'tc', 'qdisc'];
  if (args) execFileSync('ip', [...base, 'replace', 'dev', 'eth0', 'root', ...args], { stdio: 'ignore', timeout: 10_000 });
  else {
    try {
      execFileSync('ip', [...base, 'del', 'dev', 'eth0', 'root'], { stdio: 'ignore', timeout: 10_000 });
    } catch {
      /* none set */
    }
  }
}

/** Shape the traffic into a host (the bridge side of its link, so downloads to it are slowed), or clear it. */
export function shapeInto(topo: Topology, host: string, args: string[] | null): void {
  const base = ['netns', 'exec', topo.bridgeNs, 'tc', 'qdisc'];
  const port = topo.hosts[host].bridgePort;
  if (args) execFileSync('ip', [...base, 'replace', 'dev', port, 'root', ...args], { stdio: 'ignore', timeout: 10_000 });
  else {
    try {
      execFileSync('ip', [...base, 'del', 'dev', port, 'root'], { stdio: 'ignore', timeout: 10_000 });
    } catch {
      /* none set */
    }
  }
}

/**
 * Drop every packet to and from a host silently, its link staying up (no carrier loss, no reset, no ICMP): a
 * blackhole qdisc on both ends of its link (the host's eth0 sends nothing, the bridge port delivers nothing to it).
 * This kernel has no netem and no tc actions (gact), so no `tc filter … action drop`; blackhole needs neither.
 */
export function silentDrop(topo: Topology, host: string, on: boolean): void {
  const h = topo.hosts[host];
  const ends: [string, string][] = [[h.ns, 'eth0'], [topo.bridgeNs, h.bridgePort]];
  for (const [ns, dev] of ends) {
    const args = ['netns', 'exec', ns, 'tc', 'qdisc', on ? 'replace' : 'del', 'dev', dev, 'root', ...(on ? ['blackhole'] : [])];
    try {
      execFileSync('ip', args, { stdio: 'ignore', timeout: 10_000 });
    } catch (err) {
      if (on) throw err; // nothing set: nothing to clear
    }
  }
}

/** Set a host's own interface (eth0, inside its namespace) down or up: its routes go with it while down. */
export function setOwnInterface(topo: Topology, host: string, state: 'up' | 'down'): void {
  run(['-n', topo.hosts[host].ns, 'link', 'set', 'eth0', state]);
}
