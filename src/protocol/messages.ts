// Messages between the API process and workers, defined once for both adapters (IPC and Redis).
// Workers never touch the store: everything they learn or produce travels as one of these.
import { z } from 'zod';
import { TrainingTask } from './training-task.js';
import { InferenceEvent } from './inference-events.js';

/** The training task's schema lives with the payloads it carries (training-task.ts). */
export { TrainingTask };

/** The two kinds of worker process: one runs the inference engine, the other the training engine. */
export type WorkerKind = 'inference' | 'training';

export const InferenceTask = z.object({
  requestId: z.string(),
  /**
   * `ping` answers at once (health checks, queue benchmark); `calibrate` measures the model's speed on the worker's device;
   * `embedding` answers /v1/embeddings; `chat_tokens` counts a chat body's prompt tokens without running it.
   */
  op: z.enum(['ping', 'chat', 'completion', 'embedding', 'chat_tokens', 'calibrate']),
  /** chat / completion / embedding / chat_tokens: the request body as the API's route parsed it (its schema's output; workers do not parse it again). */
  body: z.unknown(),
  /** What the API resolved from the request's model name. */
  model: z
    .object({ baseModel: z.string(), baseModelDir: z.string().nullable(), adapterDir: z.string().nullable(), name: z.string() })
    .nullable(),
  stream: z.boolean(),
  /**
   * The entity (tenant) the request is served for. The worker's scheduler shares its batch fairly between entities,
   * and shares cached prompt prefixes only within one entity, so no tenant can time another's prompts
   * (worker/inference/prefix-cache.ts). Absent: a scope of its own.
   */
  entity: z.string().optional(),
  /** The API host's HEARTH_HOME: the model's folders are under it (a worker host with its own home maps them). */
  home: z.string().optional(),
  /** As TrainingTask.homeId. */
  homeId: z.string().optional(),
});
export type InferenceTask = z.infer<typeof InferenceTask>;

export const WorkerInfoMsg = z.object({
  id: z.string(),
  kind: z.enum(['inference', 'training']),
  device: z.string(),
  host: z.string(),
  pid: z.number().int(),
  load: z.number(),
  lastSeenMs: z.number(),
  devices: z.unknown().optional(),
  /** Ids of the training jobs and inference requests in flight on this worker (lost-work detection). */
  tasks: z.array(z.string()).default([]),
  /** Running totals from the worker's engine (see worker/handlers.ts WorkerStats). */
  stats: z.object({ batchSizeCounts: z.record(z.string(), z.number()).optional(), prefillChunkTokens: z.record(z.string(), z.number()).optional(), loadedModels: z.array(z.string()).optional() }).optional(),
  /**
   * The worker has a pulse thread (worker/pulse.ts): its heartbeats keep coming while a load or a training step blocks
   * its main thread and makes progress, so the API allows it only HEARTH_HEARTBEAT_TIMEOUT of silence, whatever it
   * announced: a host lost mid-stretch is noticed within that.
   */
  pulse: z.boolean().optional(),
  /**
   * Models the worker is loading (announced before the load blocks its event loop; worker/model-loads.ts): the API
   * waits HEARTH_LOAD_TIMEOUT, not HEARTH_HEARTBEAT_TIMEOUT, for its next heartbeat.
   */
  loading: z.array(z.object({
    model: z.string(),
    sinceMs: z.number(),
    /**
     * A training step rather than a load (worker/training/step-announcements.ts): its number, and how long it is
     * expected to block (twice the last step's time). The API then allows max(HEARTH_HEARTBEAT_TIMEOUT, expectedMs)
     * of silence instead of HEARTH_LOAD_TIMEOUT.
     */
    step: z.number().int().positive().optional(),
    expectedMs: z.number().positive().optional(),
  })).optional(),
});

export const TrainingEventMsg = z.object({
  type: z.enum(['training_started', 'gradient_step', 'training_ended', 'training_failed']),
  data: z.record(z.string(), z.unknown()),
});

export const WorkerMessage = z.discriminatedUnion('type', [
  z.object({ type: z.literal('heartbeat'), worker: WorkerInfoMsg }),
  z.object({ type: z.literal('training.started'), jobId: z.string(), workerId: z.string() }),
  // seq: how many training.event reports the worker sent for this job before this one. A report read again after an
  // API restart (applied, not yet acknowledged) has a seq below the job's stored events and is dropped, not stored twice.
  z.object({ type: z.literal('training.event'), jobId: z.string(), event: TrainingEventMsg, seq: z.number().int().nonnegative().optional() }),
  z.object({ type: z.literal('training.checkpoint'), jobId: z.string(), step: z.number().int(), path: z.string() }),
  z.object({ type: z.literal('inference.started'), requestId: z.string(), workerId: z.string() }),
  // One event of the request's answer (inference-events.ts), as the worker's adapter emitted it. workerMs: ms from
  // the worker taking the request to this event, on a stream's first chunk and on a non-streamed result (the API
  // passes it on as the response's Server-Timing header).
  z.object({ type: z.literal('inference.event'), requestId: z.string(), event: InferenceEvent, workerMs: z.number().optional() }),
]);
export type WorkerMessage = z.infer<typeof WorkerMessage>;
/** A worker's report of one event of an inference request's answer. */
export type InferenceEventMessage = Extract<WorkerMessage, { type: 'inference.event' }>;

/**
 * Embedded mode only: a worker message too large for one IPC write (an inference result whose JSON passes
 * IPC_PIECE_CHARS, worker/transport-ipc.ts) crosses as consecutive pieces of its JSON text; the last has `last`.
 * The channel keeps order, so the API joins a request's pieces as they come and parses them once.
 */
export interface IpcPiece {
  type: 'ipc.piece';
  requestId: string;
  text: string;
  last: boolean;
}

/** Only the embedded adapter pushes work; BullMQ workers pull it from Redis. */
export type ApiToWorker =
  | { type: 'training.run'; task: TrainingTask }
  | { type: 'training.cancel'; jobId: string }
  | { type: 'inference.run'; task: InferenceTask }
  | { type: 'inference.cancel'; requestId: string }
  | { type: 'shutdown' };
