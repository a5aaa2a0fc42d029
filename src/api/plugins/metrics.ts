// The HTTP side of Hearth's metrics: counts and times every request and serves GET /metrics.
// The metric objects themselves live in src/metrics/metrics.ts, where services and the queue update them.
//
// Usage (right after creating the app, so the hooks see every route):
//   registerMetrics(app);                       // process-wide `hearthMetrics`
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { hearthMetrics, type HearthMetrics } from '../../metrics/metrics.js';

export interface RegisterMetricsOptions {
  /** Default '/metrics'. */
  path?: string;
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

  app.get(opts.path ?? '/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });
}

/** The same as a Fastify plugin, for `app.register(metricsPlugin, { metrics })`; fastify-plugin lifts
 * it out of encapsulation so its hooks apply to the whole app. */
export const metricsPlugin = fp<{ metrics?: HearthMetrics } & RegisterMetricsOptions>(
  async (app, opts) => registerMetrics(app, opts.metrics ?? hearthMetrics, opts),
  { name: 'hearth-metrics', fastify: '5.x' },
);
