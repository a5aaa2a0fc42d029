// The queue port: how the API hands work to workers and hears back from them.
// Two adapters implement it: embedded (child processes fed over IPC, jobs kept in SQLite) and
// BullMQ (Redis queues shared by workers on many hosts). The worker code is the same for both.
import type { InferenceTask, TrainingTask, WorkerKind, WorkerMessage } from '../protocol/messages.js';
import type { TrainingEventType, TrainingJobRecord } from '../store/records.js';

export interface WorkerInfo {
  id: string;
  kind: WorkerKind;
  device: string;
  host: string;
  pid: number;
  /** Jobs or sequences in flight. */
  load: number;
  lastSeenMs: number;
  /** Devices the worker detected (src/hardware), as reported in its heartbeat. */
  devices?: unknown;
  /** Training job ids and inference request ids in flight there. */
  tasks: string[];
  stats?: { batchSizeCounts?: Record<string, number>; prefillChunkTokens?: Record<string, number>; loadedModels?: string[] };
  /**
   * Models being loaded, as the worker announced before the load (worker/model-loads.ts); an entry with `step` is a
   * long training step of that model, expected to block about `expectedMs`.
   */
  loading?: { model: string; sinceMs: number; step?: number; expectedMs?: number }[];
  /** The worker's heartbeats continue through its blocking stretches (worker/pulse.ts): only the heartbeat timeout applies. */
  pulse?: boolean;
}

export interface QueueHealth {
  ok: boolean;
  error: string | null;
  durationMs: number;
}

export interface WorkerDirectory {
  /** Workers that sent a heartbeat within the timeout. */
  liveWorkers(kind?: WorkerKind): WorkerInfo[];
  health(kind: WorkerKind): Promise<QueueHealth>;
}

/** What the training jobs service needs from the queue: hand over a persisted job, ask a running one to stop. */
export interface TrainingDispatcher {
  /** Throw (429) when the model's training queue, or the entity's, is full. */
  admitTraining(modelId: string, entity: string): void;
  enqueueTraining(job: TrainingJobRecord): Promise<void>;
  cancelTraining(jobId: string): Promise<void>;
}

/**
 * What the queue tells the owner of training job state about the work it handed out (TrainingJobsService in
 * src/services implements it). Each returns whether the report was applied (false: unknown job, or already over).
 */
export interface TrainingJobReports {
  markStarted(jobId: string): boolean;
  /** `seq`: the worker's number of the report (messages.ts); one below the job's stored events is a repeat, dropped. */
  recordEvent(jobId: string, type: TrainingEventType, data: Record<string, unknown>, seq?: number): boolean;
  recordCheckpoint(jobId: string, step: number, dir: string): boolean;
  fail(jobId: string, message: string): boolean;
}

/** What the API needs from a transport to workers. Implemented by EmbeddedQueue and BullmqQueue. */
export interface QueueAdapter {
  readonly name: 'embedded' | 'bullmq';
  /** Dispatched work survives an API restart (Redis) or dies with the API's child workers (embedded). */
  readonly durable: boolean;
  /**
   * Start delivering worker messages to `sink`; `onWorkerExit` fires when a worker is known dead at once,
   * with the tasks it had been handed (embedded mode knows them; Redis mode relies on heartbeats).
   */
  start(sink: (msg: WorkerMessage) => void, onWorkerExit: (workerId: string, reason: string, tasks?: string[]) => void): Promise<void>;
  /** A training task can be handed over now (embedded: an idle training worker exists; Redis: always). */
  canStartTraining(): boolean;
  startTraining(task: TrainingTask): Promise<void>;
  /**
   * Hand a task over again if the transport lost it (Redis restarted without persistence); resolves true when
   * it did. Only for transports where that is safe and cannot run a job twice (BullMQ: same job id).
   */
  resubmitTraining?(task: TrainingTask): Promise<boolean>;
  cancelTraining(jobId: string): Promise<void>;
  startInference(task: InferenceTask): Promise<void>;
  cancelInference(requestId: string): Promise<void>;
  /**
   * Whether a worker's own connection to the transport is still open (Redis: its named client in CLIENT LIST);
   * null when it cannot be told. Asked only about workers silent while loading a model. Embedded mode has no
   * need: a child's exit is heard at once.
   */
  workerConnected?(workerId: string): Promise<boolean | null>;
  /**
   * The API has declared this worker dead (silent past its heartbeat timeout; its work is failed). A transport that
   * owns its workers (embedded: child processes) kills it, so a blocked process does not keep its slot, and starts
   * a new one; the exit reports its tasks through `onWorkerExit` as any exit does. Redis workers are not the API's
   * to kill: left out there.
   */
  workerDeclaredDead?(workerId: string, reason: string): void;
  /**
   * Workers of a kind that were started and have not reported yet (embedded: children before their first
   * heartbeat). Transports that do not start workers (Redis) leave it out: they cannot know of one.
   */
  startingWorkers?(kind: WorkerKind): number;
  /**
   * False while the transport is known to be unreachable (Redis: the connection is down and reconnecting). New
   * inference requests are then refused at once with 503 and Retry-After instead of waiting for it (and running,
   * later, for a client that gave up).
   */
  reachable?(): boolean;
  /** The transport itself answers (Redis PING; embedded: always). */
  health(): Promise<QueueHealth>;
  close(): Promise<void>;
}
