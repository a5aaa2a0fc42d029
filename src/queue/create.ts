// Pick the queue adapter from the config: BullMQ when REDIS_URL is set, else embedded child workers.
import type { Config } from '../config/config.js';
import { checkpointsDir } from '../config/config.js';
import type { Store } from '../store/sqlite/store.js';
import type { BaseModelCatalog } from '../models/base-models.js';
import { EmbeddedQueue } from './embedded.js';
import { QueueService } from './queue-service.js';

export async function createQueue(
  config: Config,
  store: Store,
  catalog: BaseModelCatalog,
  hooks: { log?: (m: string) => void; workerEnv?: NodeJS.ProcessEnv } = {},
): Promise<QueueService> {
  let adapter;
  if (config.redisUrl) {
    const { BullmqQueue } = await import('./bullmq.js');
    adapter = new BullmqQueue({ redisUrl: config.redisUrl, prefix: config.queuePrefix, log: hooks.log });
  } else {
    // The workers time their stretches by the API's settings: step announcements by the heartbeat timeout, the pulse
    // thread's stall limit by the load timeout (worker/training/step-announcements.ts, worker/pulse.ts).
    const timing = { HEARTH_HEARTBEAT_TIMEOUT: String(config.heartbeatTimeoutSec), HEARTH_LOAD_TIMEOUT: String(config.loadTimeoutSec) };
    adapter = new EmbeddedQueue({ workers: config.workers, env: { HEARTH_HOME: config.home, ...timing, ...hooks.workerEnv }, log: hooks.log, shutdownGraceMs: config.shutdownGraceSec * 1000 });
  }
  return new QueueService(adapter, store, catalog, {
    home: config.home,
    checkpointsRoot: checkpointsDir(config.home),
    heartbeatTimeoutMs: config.heartbeatTimeoutSec * 1000,
    loadTimeoutMs: config.loadTimeoutSec * 1000,
    maxQueuePerModel: config.maxQueuePerModel,
    maxTrainingQueuePerModel: config.maxTrainingQueuePerModel,
    trainingFairness: { maxActivePerEntity: config.trainingActivePerEntity, maxJobsPerEntity: config.trainingQueuePerEntity, priorities: config.trainingEntityPriority },
    inferenceEntityLimits: { inFlight: config.inferenceInFlightPerEntity, queued: config.inferenceQueuePerEntity },
    queueTimeoutMs: config.queueTimeoutSec * 1000,
    // Validation adds defaults to what the client sent, and native runs build their jobs' payloads: twice the
    // intake budget still refuses the payloads that exhausted the heap (22M values) before the budget existed.
    maxTrainingPayloadValues: 2 * config.trainingMaxJsonValues,
    log: hooks.log,
  });
}
