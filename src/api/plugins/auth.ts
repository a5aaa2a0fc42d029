// Authentication (Bearer everywhere, Basic `api:<key>` on table routes, `x-api-key` on Anthropic routes) and per-key
// rate limiting.
// Runs before body parsing, so a bad key costs no JSON parse.
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { AuthMode } from '../route.js';
import { HttpError } from '../errors.js';
import type { ApiKeys } from '../../services/api-keys.js';
import { FailureLimiter, RateLimiter } from '../rate-limit.js';

function presentedKey(request: FastifyRequest, allowBasic: boolean, allowApiKeyHeader = false): string | null {
  if (allowApiKeyHeader) {
    const given = request.headers['x-api-key'];
    const key = Array.isArray(given) ? given[0] : given;
    if (key?.trim()) return key.trim();
  }
  const header = request.headers.authorization;
  if (!header) return null;
  const [scheme, value] = header.split(/\s+/, 2);
  if (!value) return null;
  if (scheme.toLowerCase() === 'bearer') return value.trim();
  if (allowBasic && scheme.toLowerCase() === 'basic') {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return null;
    // The Weave client sends user "api"; accept any user name, the password is the key.
    return decoded.slice(colon + 1);
  }
  return null;
}

/**
 * Adds `request.auth` and returns the onRequest hook of each authentication mode, for the routes to take
 * (registerRoutes): each route knows its mode when it is registered, so no request looks it up, and routes
 * without authentication run no hook at all.
 */
export function registerAuth(
  app: FastifyInstance,
  keys: ApiKeys,
  perMinute: number,
  /** Unknown keys a client address may present a minute (HEARTH_AUTH_FAILURE_LIMIT); 0: no limit. */
  failuresPerMinute = 0,
): (mode: AuthMode) => onRequestHookHandler | undefined {
  const limiter = new RateLimiter(perMinute);
  const failures = new FailureLimiter(failuresPerMinute);
  app.decorateRequest('auth', null);

  function authenticate(request: FastifyRequest, reply: FastifyReply, allowBasic: boolean, allowApiKeyHeader = false): void {
    const challenge = allowBasic ? 'Basic realm="hearth", Bearer' : 'Bearer';
    const key = presentedKey(request, allowBasic, allowApiKeyHeader);
    const how = allowApiKeyHeader ? '"x-api-key: <key>" or "Authorization: Bearer <key>"' : '"Authorization: Bearer <key>"';
    if (!key) throw new HttpError(401, `Missing API key: send ${how}`, { 'www-authenticate': challenge });
    // Guessing keys: an address that presented too many unknown keys waits before any key of it is looked at.
    const waitSec = failures.blockedForSec(request.ip);
    if (waitSec > 0) {
      throw new HttpError(429, 'Too many requests with an invalid API key from this address', { 'retry-after': String(waitSec) }, 'rate_limit_exceeded');
    }
    const digest = keys.digestOf(key);
    const entity = keys.authenticate(key, digest);
    if (!entity) {
      failures.recordFailure(request.ip);
      throw new HttpError(401, 'Invalid or revoked API key', { 'www-authenticate': challenge }, 'invalid_api_key');
    }
    const keyId = digest.hex.slice(0, 12);
    request.auth = { entity, keyId };
    const take = limiter.take(keyId);
    if (!take.allowed) {
      reply.header('retry-after', String(take.retryAfterSec));
      throw new HttpError(429, 'Rate limit reached for this API key', { 'retry-after': String(take.retryAfterSec) }, 'rate_limit_exceeded');
    }
  }

  // Callback hooks rather than async ones: no promise and microtask hop on every request's way in.
  const hook = (allowBasic: boolean, allowApiKeyHeader = false): onRequestHookHandler => (request, reply, done) => {
    try {
      authenticate(request, reply, allowBasic, allowApiKeyHeader);
      done();
    } catch (err) {
      done(err as Error);
    }
  };
  const hooks: Record<AuthMode, onRequestHookHandler | undefined> = { bearer: hook(false), 'basic-or-bearer': hook(true), 'api-key-or-bearer': hook(false, true), none: undefined };
  return (mode) => hooks[mode];
}
