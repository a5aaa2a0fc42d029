// A worker host that cannot reach the API's artifact routes says why (worker/artifacts/fetch-error.ts).
import { describe, expect, it } from 'vitest';
import net from 'node:net';
import { describeFetchError, fetchFailureCause } from '../../worker/artifacts/fetch-error.js';

const fetchFailed = (cause: unknown) => Object.assign(new TypeError('fetch failed'), { cause });

describe('describeFetchError', () => {
  it('names a refused connection with its address and the HOST=0.0.0.0 hint (a real fetch to a closed loopback port)', async () => {
    const server = net.createServer();
    const port = await new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as net.AddressInfo).port)));
    await new Promise((r) => server.close(r));
    const url = `http://127.0.0.1:${port}/v1/worker/artifacts/manifest?x=1`;
    const err = await fetch(url).catch((e: unknown) => e);
    const text = describeFetchError(err, url);
    expect(text).toContain(`could not reach the API host at http://127.0.0.1:${port}: ECONNREFUSED`);
    expect(text).toContain('HOST=0.0.0.0');
  });

  it('unwraps DNS and TLS causes, and several addresses tried (AggregateError)', () => {
    const dns = fetchFailed(Object.assign(new Error('getaddrinfo ENOTFOUND api.example'), { code: 'ENOTFOUND' }));
    expect(describeFetchError(dns, 'http://api.example:8080/x')).toMatch(/^could not reach the API host at http:\/\/api\.example:8080: ENOTFOUND getaddrinfo ENOTFOUND api\.example \(the host name does not resolve/);
    const tls = fetchFailed(Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }));
    expect(describeFetchError(tls, 'https://api:8443/x')).toContain('NODE_EXTRA_CA_CERTS');
    const agg = fetchFailed(Object.assign(new AggregateError([Object.assign(new Error('connect ECONNREFUSED ::1:8080'), { code: 'ECONNREFUSED' }), Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8080'), { code: 'ECONNREFUSED' })]), { code: 'ECONNREFUSED' }));
    expect(fetchFailureCause(agg)).toEqual({ code: 'ECONNREFUSED', detail: 'ECONNREFUSED connect ECONNREFUSED ::1:8080; ECONNREFUSED connect ECONNREFUSED 127.0.0.1:8080' });
  });

  it('leaves an error without a cause as it is', () => {
    expect(describeFetchError(new Error('HTTP 500'), 'http://a/x')).toBe('HTTP 500');
  });
});
