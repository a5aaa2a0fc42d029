// The HTTP side of Hearth's metrics: counts and times every request and serves GET /metrics.
// The metric objects themselves live in src/metrics/metrics.ts, where services and the queue update them.
//
// Usage (right after creating the app, so the hooks see every route):
//   registerMetrics(app);                       // process-wide `hearthMetrics`
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import crypto from 'node:crypto';
import { hearthMetrics, type HearthMetrics } from '../../metrics/metrics.js';
import { metricsWithoutTenants } from '../../metrics/tenant-free.js';

export interface RegisterMetricsOptions {
  /** Default '/metrics'. */
  path?: string;
  /**
   * Set: series labelled by tenant identifiers (model ids and names) are shown only to a scrape presenting
   * `key` as a Bearer token (HEARTH_METRICS_KEY); other scrapes, and all when `key` is null, see them merged
   * over those labels (src/metrics/tenant-free.ts). Unset: every series as it is (tests, embedding apps).
   */
  tenantDetail?: { key: string | null };
}

/** Whether the request presents `key` as its Bearer token (compared in constant time). */
function presentsKey(authorization: string | undefined, key: string): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(authorization ?? '');
  if (!m) return false;
  const given = crypto.createHash('sha256').update(m[1].trim()).digest();
  return crypto.timingSafeEqual(given, crypto.createHash('sha256').update(key).digest());
}

/**
 * Counts and times every request of `app` (hooks on the root instance reach all routes) and adds
 * the scrape route. Unmatched URLs are labelled route="unmatched", so random paths cannot create
 * unbounded label values.
 */
export function registerMetrics(app: FastifyInstance, metrics: HearthMetrics = hearthMetrics, opts: RegisterMetricsOptions = {}): void {
  app.addHook('onResponse', async (request, reply) => {
    const labels = {
      method: request.method,
      route: request.routeOptions.url ?? 'unmatched',
      status: String(reply.statusCode),
    };
    metrics.httpRequests.inc(labels);
    metrics.httpRequestDuration.observe(labels, reply.elapsedTime / 1000);
  });

  const detail = opts.tenantDetail;
  app.get(opts.path ?? '/metrics', { schema: { hide: true } }, async (request, reply) => {
    reply.header('content-type', metrics.registry.contentType);
    if (detail && !(detail.key && presentsKey(request.headers.authorization, detail.key))) return metricsWithoutTenants(metrics.registry);
    return metrics.registry.metrics();
  });
}

/** The same as a Fastify plugin, for `app.register(metricsPlugin, { metrics })`; fastify-plugin lifts
 * it out of encapsulation so its hooks apply to the whole app. */
export const metricsPlugin = fp<{ metrics?: HearthMetrics } & RegisterMetricsOptions>(
  async (app, opts) => registerMetrics(app, opts.metrics ?? hearthMetrics, opts),
  { name: 'hearth-metrics', fastify: '5.x' },
);
