// Everything configurable, read once from the environment (documented in docs/configuration.md).
import path from 'node:path';
import { normalizeDeviceRequest } from '../domain/device-name.js';
import { parseEntityPriorities } from '../domain/training-selection.js';

export interface Config {
  host: string;
  port: number;
  /** State directory: hearth.db, models/, checkpoints/, datasets/. */
  home: string;
  /** Largest accepted request body in bytes (RL bodies carry a logprob per token: large). */
  bodyLimit: number;
  /** Body limit of the training uploads (RL jobs with ART's trajectories, SFT datasets): larger than bodyLimit. */
  trainingBodyLimit: number;
  /** Requests per key per minute; 0 disables the limit. */
  rateLimitPerMinute: number;
  /** Most JSON values a request body may hold (src/domain/json-budget.ts): bounds the memory a parse takes. */
  maxJsonValues: number;
  /** The same for the training uploads (RL jobs: a logprob object per completion token). */
  trainingMaxJsonValues: number;
  /** Requests a minute one client address may present an unknown or revoked API key before it gets 429; 0: no limit. */
  authFailuresPerMinute: number;
  /** HEARTH_METRICS_KEY: /metrics shows per-model series only to a request presenting it; null: never. */
  metricsKey: string | null;
  /**
   * HEARTH_ALLOWED_HOSTS: the names a request's Host header may carry (besides IP literals), against DNS rebinding.
   * null: the default (loopback names and HOST, checked only while HOST is a loopback address); ['*']: no check.
   */
  allowedHosts: string[] | null;
  /** Largest file a worker host may upload through /v1/worker/artifacts/file, in bytes. */
  workerUploadLimit: number;
  /** Redis for the BullMQ queue; null = embedded queue. */
  redisUrl: string | null;
  /** A key accepted in addition to the stored ones (automation), for `apiKeyEntity`. */
  apiKey: string | null;
  apiKeyEntity: string;
  /** Seconds without a heartbeat after which a worker is considered gone. */
  heartbeatTimeoutSec: number;
  /**
   * Seconds without a heartbeat allowed to a worker whose last heartbeat announced a model load: a load blocks
   * the worker's event loop (graph build, ONNX Runtime session creation), so it cannot beat until the load ends.
   */
  loadTimeoutSec: number;
  logLevel: string;
  /** Embedded mode: workers `hearth serve` starts, as kind:device pairs ("inference:cpu,training:cpu"; devices as in src/domain/device-name.ts, "auto" included). */
  workers: { kind: 'inference' | 'training'; device: string }[];
  /**
   * HEARTH_REQUIRED_WORKERS: the worker kinds /v1/system-check requires a live worker of ("inference,training", or
   * "none"). Default: the kinds of `workers` in embedded mode; inference alone with Redis (worker hosts join on
   * their own, and an inference-only cluster is a healthy one).
   */
  requiredWorkers: ('inference' | 'training')[];
  /** Redis key prefix of this installation's queues and streams. */
  queuePrefix: string;
  /** In-flight inference requests per model before 429. */
  maxQueuePerModel: number;
  /** Inference requests of one entity handed to workers at once (more wait, in order, for one of these slots). */
  inferenceInFlightPerEntity: number;
  /** Inference requests of one entity waiting for one of its in-flight slots before 429. */
  inferenceQueuePerEntity: number;
  /** Training jobs one entity may have running at once (HEARTH_TRAINING_ACTIVE_PER_ENTITY; 0: no cap). */
  trainingActivePerEntity: number;
  /** Training jobs one entity may have queued or running, across its models, before 429 (0: no cap). */
  trainingQueuePerEntity: number;
  /** Entity → training priority (higher first; unnamed entities 0). */
  trainingEntityPriority: Map<string, number>;
  /** Bytes one entity may store in datasets, Weave tables and Weave objects together (0: no quota). */
  storageQuotaBytes: number;
  /** Queued training jobs per model before 429. */
  maxTrainingQueuePerModel: number;
  /** Seconds a request may wait for a worker to pick it up before it fails with 503. */
  queueTimeoutSec: number;
  /** On SIGTERM, seconds running training jobs (embedded workers) get to finish before they are cancelled. */
  shutdownGraceSec: number;
  /** Folders whose files SFT jobs may name as file:// training data (empty: file:// only for uploaded datasets). */
  dataDirs: string[];
  /**
   * HEARTH_WORKER_TOKEN: the worker credential. Worker hosts without the API host's files fetch artifacts and upload
   * checkpoints with it (src/api/plugins/artifacts.ts); it opens no other route. null: those routes are off.
   */
  workerToken: string | null;
  /** What inference workers compute with (HEARTH_WEIGHTS; read by the workers, checked here so serve fails fast). */
  servedWeights: ServedWeights;
}

export type ServedWeights = 'stored' | 'f32' | 'q4';

/**
 * HEARTH_WEIGHTS: stored (default: as the model's files hold them, GGUF blocks quantized, float tensors as
 * float32), f32 (everything dequantized) or q4 (projections re-quantized to 4 bits when a model loads).
 */
export function parseServedWeights(value: string | undefined): ServedWeights {
  if (value === undefined || value === '' || value === 'stored') return 'stored';
  if (value === 'f32' || value === 'q4') return value;
  throw new Error(`HEARTH_WEIGHTS must be stored, f32 or q4, got "${value}"`);
}

export function parseWorkers(spec: string): Config['workers'] {
  if (spec.trim() === '' || spec.trim() === 'none') return [];
  return spec.split(',').map((part) => {
    const item = part.trim();
    const colon = item.indexOf(':');
    const kind = colon < 0 ? item : item.slice(0, colon);
    const device = colon < 0 ? 'cpu' : item.slice(colon + 1);
    if (kind !== 'inference' && kind !== 'training') throw new Error(`HEARTH_WORKERS: unknown worker kind "${kind}" in "${spec}" (use inference:cpu,training:cpu)`);
    try {
      return { kind, device: normalizeDeviceRequest(device) };
    } catch (err) {
      throw new Error(`HEARTH_WORKERS: ${(err as Error).message} in "${spec}"`);
    }
  });
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got "${raw}"`);
  return Math.floor(n);
}

/**
 * The largest body a JSON route can take: bodies are read into one string, and V8 caps a string at
 * 2^29 − 24 characters (a UTF-8 byte is at most one character, so this many bytes always fit).
 */
export const MAX_STRING_BODY_BYTES = 2 ** 29 - 24;

/**
 * ART sends every completion token back with its logprob object (~85 B a token): 64 MiB held ~700k tokens
 * per train(); 256 MiB holds ~2.8M. Bounded by what one string can hold.
 */
function trainingBodyLimitOf(env: NodeJS.ProcessEnv): number {
  const limit = int(env, 'HEARTH_TRAINING_BODY_LIMIT', 256 * 1024 * 1024);
  if (limit > MAX_STRING_BODY_BYTES) {
    throw new Error(`HEARTH_TRAINING_BODY_LIMIT must be at most ${MAX_STRING_BODY_BYTES} bytes (the longest string Node.js can hold), got ${limit}`);
  }
  return limit;
}

/** HEARTH_WORKER_TOKEN: at least 32 characters, and not a user's key (a worker credential is no API key). */
export function workerTokenOf(env: NodeJS.ProcessEnv): string | null {
  const token = env.HEARTH_WORKER_TOKEN;
  if (!token) return null;
  if (token.length < 32) throw new Error('HEARTH_WORKER_TOKEN must be at least 32 characters (e.g. `openssl rand -hex 32`)');
  if (token === env.HEARTH_API_KEY) throw new Error('HEARTH_WORKER_TOKEN must differ from HEARTH_API_KEY: a worker credential opens no user route');
  return token;
}

/** HEARTH_REQUIRED_WORKERS (see Config.requiredWorkers). */
export function parseRequiredWorkers(env: NodeJS.ProcessEnv): ('inference' | 'training')[] {
  const raw = env.HEARTH_REQUIRED_WORKERS?.trim();
  if (!raw) return env.REDIS_URL ? ['inference'] : [...new Set(parseWorkers(env.HEARTH_WORKERS ?? 'inference:cpu,training:cpu').map((w) => w.kind))];
  if (raw === 'none') return [];
  const kinds = raw.split(',').map((k) => k.trim()).filter(Boolean);
  for (const k of kinds) if (k !== 'inference' && k !== 'training') throw new Error(`HEARTH_REQUIRED_WORKERS: unknown worker kind "${k}" in "${raw}" (use inference, training, both comma-separated, or none)`);
  return [...new Set(kinds)] as ('inference' | 'training')[];
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return {
    host: env.HOST || '127.0.0.1',
    port: int(env, 'PORT', 8080),
    home: path.resolve(env.HEARTH_HOME || './.hearth'),
    bodyLimit: int(env, 'HEARTH_BODY_LIMIT', 64 * 1024 * 1024),
    trainingBodyLimit: trainingBodyLimitOf(env),
    rateLimitPerMinute: int(env, 'HEARTH_RATE_LIMIT', 6000),
    maxJsonValues: int(env, 'HEARTH_MAX_JSON_VALUES', 2_000_000),
    trainingMaxJsonValues: int(env, 'HEARTH_TRAINING_MAX_JSON_VALUES', 8_000_000),
    authFailuresPerMinute: int(env, 'HEARTH_AUTH_FAILURE_LIMIT', 60),
    metricsKey: env.HEARTH_METRICS_KEY || null,
    allowedHosts: env.HEARTH_ALLOWED_HOSTS ? env.HEARTH_ALLOWED_HOSTS.split(',').map((h) => h.trim().toLowerCase()).filter(Boolean) : null,
    workerUploadLimit: int(env, 'HEARTH_WORKER_UPLOAD_LIMIT', 64 * 1024 ** 3),
    redisUrl: env.REDIS_URL || null,
    apiKey: env.HEARTH_API_KEY || null,
    apiKeyEntity: env.HEARTH_ENTITY || 'local',
    heartbeatTimeoutSec: int(env, 'HEARTH_HEARTBEAT_TIMEOUT', 15),
    // 1.1B Q4_0 took 12 s cold on a quiet machine and 47 s under load 12; an 8B file holds ~7× the weights.
    loadTimeoutSec: int(env, 'HEARTH_LOAD_TIMEOUT', 600),
    logLevel: env.LOG_LEVEL || 'info',
    workers: parseWorkers(env.HEARTH_WORKERS ?? 'inference:cpu,training:cpu'),
    requiredWorkers: parseRequiredWorkers(env),
    queuePrefix: env.HEARTH_QUEUE_PREFIX || 'hearth',
    maxQueuePerModel: int(env, 'HEARTH_MAX_QUEUE_PER_MODEL', 256),
    inferenceInFlightPerEntity: Math.max(1, int(env, 'HEARTH_INFERENCE_INFLIGHT_PER_ENTITY', 32)),
    inferenceQueuePerEntity: int(env, 'HEARTH_INFERENCE_QUEUE_PER_ENTITY', 64),
    maxTrainingQueuePerModel: int(env, 'HEARTH_MAX_TRAINING_QUEUE_PER_MODEL', 16),
    storageQuotaBytes: int(env, 'HEARTH_STORAGE_QUOTA_BYTES', 10 * 1024 ** 3),
    trainingActivePerEntity: int(env, 'HEARTH_TRAINING_ACTIVE_PER_ENTITY', 0),
    trainingQueuePerEntity: int(env, 'HEARTH_TRAINING_QUEUE_PER_ENTITY', 32),
    trainingEntityPriority: parseEntityPriorities(env.HEARTH_TRAINING_ENTITY_PRIORITY),
    queueTimeoutSec: int(env, 'HEARTH_QUEUE_TIMEOUT', 120),
    shutdownGraceSec: int(env, 'HEARTH_SHUTDOWN_GRACE', 60),
    dataDirs: (env.HEARTH_DATA_DIRS ?? '').split(':').filter(Boolean).map((d) => path.resolve(d)),
    servedWeights: parseServedWeights(env.HEARTH_WEIGHTS),
    workerToken: workerTokenOf(env),
  };
}

export const dbPath = (home: string) => path.join(home, 'hearth.db');
export const checkpointsDir = (home: string) => path.join(home, 'checkpoints');
export const modelsDir = (home: string) => path.join(home, 'models');
export const datasetsDir = (home: string) => path.join(home, 'datasets');
