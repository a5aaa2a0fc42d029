// Why a fetch to the API host failed, in words an operator can act on. Node's fetch (undici) rejects with
// "TypeError: fetch failed" and keeps the reason in `cause` (an Error with a code: ECONNREFUSED, ENOTFOUND,
// UND_ERR_CONNECT_TIMEOUT, CERT_HAS_EXPIRED, …; an AggregateError when several addresses were tried): without it, a
// worker host that cannot reach the API's artifact routes said only "fetch failed" (issue #43).

type WithCause = { message?: string; code?: string; cause?: unknown; errors?: unknown[] };

const HINTS: Record<string, string> = {
  ECONNREFUSED: 'nothing listens there: does the API host listen on an address this host can reach (HOST=0.0.0.0, not the default 127.0.0.1), and does HEARTH_API_URL name its port?',
  ENOTFOUND: 'the host name does not resolve from this host: check HEARTH_API_URL',
  EAI_AGAIN: 'the host name could not be resolved now (DNS): check HEARTH_API_URL and this host\'s resolver',
  EHOSTUNREACH: 'no route to the API host from this host',
  ENETUNREACH: 'no route to the API host\'s network from this host',
  ETIMEDOUT: 'the API host did not answer: a firewall, or a wrong address in HEARTH_API_URL',
  UND_ERR_CONNECT_TIMEOUT: 'the API host did not answer: a firewall, or a wrong address in HEARTH_API_URL',
  ECONNRESET: 'the connection was reset (the API host restarting, or a proxy in between)',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'TLS: the API host\'s certificate is self-signed; give this host its CA (NODE_EXTRA_CA_CERTS)',
  SELF_SIGNED_CERT_IN_CHAIN: 'TLS: the API host\'s certificate chain is not trusted here; give this host its CA (NODE_EXTRA_CA_CERTS)',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS: the API host\'s certificate chain is incomplete or not trusted here (NODE_EXTRA_CA_CERTS)',
  CERT_HAS_EXPIRED: 'TLS: the API host\'s certificate has expired',
  ERR_TLS_CERT_ALTNAME_INVALID: 'TLS: the certificate does not name the host in HEARTH_API_URL',
  EPROTO: 'TLS: the handshake failed (https to a plain-HTTP port?)',
};

/** The innermost causes' codes and messages (pure): "ECONNREFUSED connect ECONNREFUSED 10.0.0.2:8080". */
export function fetchFailureCause(err: unknown): { code: string | null; detail: string } {
  let e = err as WithCause | undefined;
  const seen = new Set<unknown>();
  // Bounded: a cause chain is short; the set stops a cycle.
  for (let depth = 0; e && e.cause && !seen.has(e.cause) && depth < 8; depth++) {
    seen.add(e);
    e = e.cause as WithCause;
  }
  const leaves = e?.errors?.length ? (e.errors as WithCause[]) : e ? [e] : [];
  const code = leaves.map((l) => l.code).find(Boolean) ?? null;
  const detail = [...new Set(leaves.map((l) => [l.code, l.message].filter(Boolean).join(' ')))].join('; ') || String((err as WithCause)?.message ?? err);
  return { code, detail };
}

/** "could not reach <origin>: <cause> (<hint>)" for a failed fetch; the error's own message for anything else. */
export function describeFetchError(err: unknown, url: string): string {
  const message = String((err as WithCause)?.message ?? err);
  if (!(err as WithCause)?.cause) return message;
  const { code, detail } = fetchFailureCause(err);
  let origin = url;
  try {
    origin = new URL(url).origin;
  } catch {
    /* keep it whole */
  }
  const hint = code ? HINTS[code] : undefined;
  return `could not reach the API host at ${origin}: ${detail}${hint ? ` (${hint})` : ''}`;
}
