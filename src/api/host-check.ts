// Which Host headers the API answers, against DNS rebinding: a web page on a name the attacker controls, once
// that name resolves to 127.0.0.1, could otherwise drive a loopback-bound Hearth from the victim's browser.
// The browser sends the attacker's name as Host, so names are checked; IP literals cannot be rebound and pass.
import net from 'node:net';

export interface HostPolicy {
  /** Names (lowercase, no port) accepted besides IP literals and loopback names; null: every Host is accepted. */
  names: ReadonlySet<string> | null;
}

const LOOPBACK_NAMES = ['localhost'];

function isLoopbackAddress(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * The policy for HEARTH_ALLOWED_HOSTS and HOST: '*' turns the check off; a list adds names to the loopback names
 * and HOST; unset, names are checked only while HOST is a loopback address (the default install, the one a
 * browser on the same machine can reach), so deployments listening on other addresses keep working unchanged.
 */
export function hostPolicyOf(allowedHosts: readonly string[] | null, listenHost: string): HostPolicy {
  if (allowedHosts?.includes('*')) return { names: null };
  if (allowedHosts === null && !isLoopbackAddress(listenHost.toLowerCase())) return { names: null };
  return { names: new Set([...LOOPBACK_NAMES, listenHost.toLowerCase(), ...(allowedHosts ?? [])]) };
}

/** The host name of a Host header: lowercase, without its port, brackets or trailing dot. */
export function hostNameOf(header: string): string {
  let host = header.trim().toLowerCase();
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    return end < 0 ? host : host.slice(1, end);
  }
  const colon = host.lastIndexOf(':');
  if (colon >= 0 && host.indexOf(':') === colon) host = host.slice(0, colon);
  return host.endsWith('.') ? host.slice(0, -1) : host;
}

/** Whether a request with this Host header (undefined: none sent, as HTTP/1.0 allows) is answered. */
export function hostAllowed(header: string | undefined, policy: HostPolicy): boolean {
  if (policy.names === null || header === undefined || header === '') return true;
  const name = hostNameOf(header);
  return net.isIP(name) !== 0 || name.endsWith('.localhost') || policy.names.has(name);
}
