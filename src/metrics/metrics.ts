// Prometheus metrics Hearth keeps: HTTP request counts and latency (measured by the API's metrics plugin),
// queue depth, tokens generated, batch sizes, training steps, worker heartbeats. Everything lives in
// Hearth's own prom-client Registry, served at GET /metrics (src/api/plugins/metrics.ts). Services and the
// queue update them here without knowing about HTTP:
//   hearthMetrics.tokensGenerated.inc({ model }, n);
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface HearthMetrics {
  registry: Registry;
  /** hearth_http_requests_total{method, route, status} */
  httpRequests: Counter<'method' | 'route' | 'status'>;
  /** hearth_http_request_duration_seconds{method, route, status} */
  httpRequestDuration: Histogram<'method' | 'route' | 'status'>;
  /** hearth_queue_depth{queue}: jobs waiting in a queue ("inference", "training"). */
  queueDepth: Gauge<'queue'>;
  /** hearth_tokens_generated_total{model}: completion tokens sent to clients. */
  tokensGenerated: Counter<'model'>;
  /** hearth_batch_size: sequences per forward step of an inference worker. */
  batchSize: Histogram<string>;
  /** hearth_prefill_chunk_tokens{worker, model}: prompt tokens the engine gave its latest step with decoding rows (HEARTH_PREFILL_CHUNK_TOKENS). */
  prefillChunkTokens: Gauge<'worker' | 'model'>;
  /** hearth_training_steps_total{model}: optimizer steps finished. */
  trainingSteps: Counter<'model'>;
  /** hearth_worker_last_seen_timestamp_seconds{kind, device, host}: unix time of the last heartbeat. */
  workerLastSeen: Gauge<'kind' | 'device' | 'host'>;
  /** hearth_artifact_bytes_served_total: artifact bytes sent to worker hosts (src/api/plugins/artifacts.ts). */
  artifactBytesServed: Counter<string>;
  /** hearth_artifact_refusals_total{reason}: artifact requests refused (no_credential, not_worker_credential, bad_path, bad_manifest, digest_mismatch). */
  artifactRefusals: Counter<'reason'>;
}

export interface CreateMetricsOptions {
  /** Default: a new Registry. */
  registry?: Registry;
  /** Also export Node's process metrics (CPU, memory, event loop lag) with the hearth_ prefix. */
  defaultMetrics?: boolean;
}

export function createMetrics(opts: CreateMetricsOptions = {}): HearthMetrics {
  const registry = opts.registry ?? new Registry();
  if (opts.defaultMetrics) collectDefaultMetrics({ register: registry, prefix: 'hearth_' });
  const registers = [registry];
  return {
    registry,
    httpRequests: new Counter({
      name: 'hearth_http_requests_total', help: 'HTTP requests answered', labelNames: ['method', 'route', 'status'], registers,
    }),
    httpRequestDuration: new Histogram({
      name: 'hearth_http_request_duration_seconds', help: 'Time from request received to response sent',
      labelNames: ['method', 'route', 'status'], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], registers,
    }),
    queueDepth: new Gauge({ name: 'hearth_queue_depth', help: 'Jobs waiting in a queue', labelNames: ['queue'], registers }),
    tokensGenerated: new Counter({
      name: 'hearth_tokens_generated_total', help: 'Completion tokens generated', labelNames: ['model'], registers,
    }),
    batchSize: new Histogram({
      name: 'hearth_batch_size', help: 'Sequences per inference forward step', buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256], registers,
    }),
    prefillChunkTokens: new Gauge({
      name: 'hearth_prefill_chunk_tokens', help: 'Prompt tokens an inference engine gave its latest step that also decodes (measured when HEARTH_PREFILL_CHUNK_TOKENS=auto)',
      labelNames: ['worker', 'model'], registers,
    }),
    trainingSteps: new Counter({
      name: 'hearth_training_steps_total', help: 'Training optimizer steps finished', labelNames: ['model'], registers,
    }),
    workerLastSeen: new Gauge({
      name: 'hearth_worker_last_seen_timestamp_seconds', help: 'Unix time of the last heartbeat of a worker',
      labelNames: ['kind', 'device', 'host'], registers,
    }),
    artifactBytesServed: new Counter({ name: 'hearth_artifact_bytes_served_total', help: 'Artifact bytes sent to worker hosts', registers }),
    artifactRefusals: new Counter({ name: 'hearth_artifact_refusals_total', help: 'Artifact requests refused, by reason', labelNames: ['reason'], registers }),
  };
}

/** The process-wide metrics the API serves; services update these. */
export const hearthMetrics: HearthMetrics = createMetrics({ defaultMetrics: true });

/** Call when a worker heartbeat arrives. */
export function recordHeartbeat(
  metrics: HearthMetrics,
  worker: { kind: string; device: string; host: string },
  atMs: number = Date.now(),
): void {
  metrics.workerLastSeen.set({ kind: worker.kind, device: worker.device, host: worker.host }, atMs / 1000);
}

const lastBatchCounts = new Map<string, Record<string, number>>();

/** Call with each inference worker heartbeat: observes the engine steps run since its previous one, and each model's mixed-step budget. */
export function recordEngineStats(
  metrics: HearthMetrics,
  workerId: string,
  batchSizeCounts: Record<string, number> | undefined,
  prefillChunkTokens: Record<string, number> = {},
): void {
  for (const [model, tokens] of Object.entries(prefillChunkTokens)) metrics.prefillChunkTokens.set({ worker: workerId, model }, tokens);
  if (!batchSizeCounts) return;
  const previous = lastBatchCounts.get(workerId) ?? {};
  for (const [size, total] of Object.entries(batchSizeCounts)) {
    const fresh = total - (previous[size] ?? 0);
    for (let i = 0; i < fresh; i++) metrics.batchSize.observe(Number(size));
  }
  lastBatchCounts.set(workerId, { ...batchSizeCounts });
}
