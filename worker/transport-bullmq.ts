// Redis mode: pull tasks from BullMQ, report through the installation's reports stream, hear cancellations
// on its control channel. Many `hearth worker` processes on many hosts share the queues.
import type { InferenceTask, TrainingTask, WorkerMessage } from '../src/protocol/messages.js';
import { controlChannel, REPORTS_MAXLEN, reportsStream, workerConnectionName } from '../src/protocol/redis-keys.js';
import { WorkerHost, type WorkerIdentity } from './host.js';
import type { Handlers } from './handlers.js';
import { ModelLoads } from './model-loads.js';
import { createLoadAwareWorker } from './job-locks.js';
import { Pulse } from './pulse.js';
import type { Redis } from 'ioredis';
import { acquireLiveness, releaseLiveness, watchedRedis } from '../src/protocol/redis-liveness.js';
import { withDeadline } from '../src/domain/deadline.js';

/** A whole number of milliseconds from the environment, at least 1000 (BullMQ locks); `fallback` when unset. */
function lockSetting(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const ms = Number(raw);
  if (!Number.isFinite(ms) || ms < 1000) throw new Error(`${name} must be a number of at least 1000, got "${raw}"`);
  return Math.floor(ms);
}

export interface BullmqWorkerOptions {
  identity: WorkerIdentity;
  handlers: Handlers;
  redisUrl: string;
  prefix?: string;
  heartbeatMs: number;
  log: (msg: string, level?: 'info' | 'warn' | 'error') => void;
  /** Inference requests taken at once (the engine batches them); training is always one at a time. */
  concurrency?: number;
  hostRef?: (host: WorkerHost) => void;
  /** Model loads the handlers announce (worker/model-loads.ts). */
  loads?: ModelLoads;
  /** HEARTH_LOAD_TIMEOUT (ms): how long a load holds its job's lock, and the pulse thread's stall limit. */
  loadTimeoutMs: number;
}

/** Longest a task taken from BullMQ waits for the reports connection to be back before it starts anyway. */
const REPORTS_READY_WAIT_MS = 10_000;

/** Resolves when `conn` is ready, or after `ms`. */
async function connected(conn: Redis, ms: number): Promise<void> {
  if (conn.status === 'ready') return;
  let onReady = () => {};
  await withDeadline(new Promise<void>((resolve) => conn.once('ready', (onReady = resolve))), ms, () => undefined);
  conn.off('ready', onReady);
}

/** Start serving; resolves to a function that stops taking work, finishes the current work and disconnects. */
export async function serveOverBullmq(opts: BullmqWorkerOptions): Promise<() => Promise<void>> {
  const prefix = opts.prefix ?? process.env.HEARTH_QUEUE_PREFIX ?? 'hearth';
  // Auto-pipelining sends the commands of one tick in one write: the engine reports a delta for every
  // running stream after each model step, and they leave together (as over IPC, see transport-ipc.ts).
  // Named, so that the API can see this process is still there while a model load keeps it from beating.
  // Every connection of this process to Redis (these two and BullMQ's) is watched: dropped and reconnected within
  // seconds when Redis stops answering (a partition that sends no reset), and one line says so (and one when back).
  const liveness = acquireLiveness(opts.redisUrl, opts.log);
  const redis = watchedRedis(opts.redisUrl, liveness, { maxRetriesPerRequest: null, enableAutoPipelining: true, connectionName: workerConnectionName(prefix, opts.identity.id) });
  const sub = watchedRedis(opts.redisUrl, liveness, { maxRetriesPerRequest: null });
  // ioredis reconnects by itself; without a listener each failed attempt prints a stack ("Unhandled error event").
  // The monitor logs the outage, once.
  for (const conn of [redis, sub]) conn.on('error', () => {});
  const stream = reportsStream(prefix);
  // One connection, commands in order: reports reach the stream in the order they were made.
  const report = async (msg: WorkerMessage) => {
    await redis.xadd(stream, 'MAXLEN', '~', String(REPORTS_MAXLEN), '*', 'm', JSON.stringify(msg));
  };
  const kind = opts.identity.kind;
  // BullMQ's job lock (HEARTH_JOB_LOCK_MS, default 30 s; stalled checks as often), held for HEARTH_LOAD_TIMEOUT while
  // a model load blocks this process (worker/job-locks.ts).
  const lockMs = lockSetting('HEARTH_JOB_LOCK_MS', 30_000);
  const loadLockMs = opts.loadTimeoutMs;
  // Heartbeats and lock renewals from a thread of their own while a stretch blocks this one (worker/pulse.ts); a
  // stretch whose compute stops moving for the load timeout is left to go silent.
  const pulse = Pulse.start({ kind: 'redis', url: opts.redisUrl, prefix, queue: kind, lockMs }, opts.heartbeatMs, loadLockMs, (m) => opts.log(m, 'warn'));
  const host = new WorkerHost(opts.identity, opts.handlers, report, opts.log, opts.loads, pulse);
  opts.hostRef?.(host);

  await sub.subscribe(controlChannel(prefix));
  sub.on('message', (_channel, raw) => {
    try {
      const msg = JSON.parse(raw) as { type: string; jobId?: string; requestId?: string };
      const id = msg.jobId ?? msg.requestId;
      if (id) host.cancel(id);
    } catch {
      /* not ours */
    }
  });

  const worker = createLoadAwareWorker(
    kind,
    async (job) => {
      // Reports travel on `redis`, and it is the connection the API looks for (CLIENT LIST) while a model load blocks
      // this process: after an outage BullMQ's connection may be back first, and a load started before `redis` is
      // would keep it from reconnecting (the API then takes the worker for dead). Bounded: past it, reports queue.
      await connected(redis, REPORTS_READY_WAIT_MS);
      if (kind === 'training') await host.runTraining(job.data as TrainingTask);
      else await host.runInference(job.data as InferenceTask);
    },
    {
      connection: { url: opts.redisUrl, maxRetriesPerRequest: null },
      prefix,
      concurrency: kind === 'training' ? 1 : (opts.concurrency ?? Number(process.env.HEARTH_WORKER_CONCURRENCY || 64)),
      lockDuration: lockMs,
      stalledInterval: lockMs,
      // A job whose worker died is failed, never run twice: the API already reported it failed.
      maxStalledCount: 0,
      // After a connection error BullMQ waits this long before fetching again (15 s by default): a worker must take
      // work again within seconds of a partition's end.
      runRetryDelay: 1000,
    },
    { loads: opts.loads ?? new ModelLoads(), loadLockMs, onLocksChanged: (locks) => pulse?.setLocks(locks) },
  );
  worker.on('error', (err) => opts.log(`bullmq worker error: ${err.message}`, 'warn'));

  const beat = () => void report(host.heartbeat()).catch((err: Error) => opts.log(`heartbeat failed: ${err.message}`, 'warn'));
  beat();
  const timer = setInterval(beat, opts.heartbeatMs);

  return async () => {
    clearInterval(timer);
    await worker.close(); // waits for the active jobs to finish
    await pulse?.stop();
    await sub.quit().catch(() => {});
    await redis.quit().catch(() => {});
    await releaseLiveness(liveness);
  };
}
