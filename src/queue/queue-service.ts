// The API side of the queue, whichever adapter carries it: applies worker reports to the store in order,
// keeps the worker registry, schedules training, routes inference reports to its gateway (routes submit
// inference calls to `gateway` directly), and fails work whose worker vanished.
import type { Store } from '../store/sqlite/store.js';
import type { TrainingJobRecord } from '../store/records.js';
import type { QueueAdapter, QueueHealth, TrainingDispatcher, TrainingJobReports, WorkerDirectory, WorkerInfo } from './port.js';
import type { WorkerKind } from '../protocol/messages.js';
import type { WorkerMessage } from '../protocol/messages.js';
import { blockedBy, WorkerRegistry } from './worker-directory.js';
import { TrainingScheduler } from './training-scheduler.js';
import { InferenceGateway } from './inference-gateway.js';
import type { BaseModelCatalog } from '../models/base-models.js';
import { overCapacity } from '../errors/domain-errors.js';
import type { TrainingFairness } from '../domain/training-selection.js';
import { ensureHomeId } from '../protocol/artifact-manifest.js';
import { hearthMetrics, recordEngineStats, recordHeartbeat } from '../metrics/metrics.js';

export interface QueueServiceOptions {
  home: string;
  checkpointsRoot: string;
  heartbeatTimeoutMs: number;
  /** Silence allowed to a worker that announced a model load (it cannot beat while loading). Default: heartbeatTimeoutMs. */
  loadTimeoutMs?: number;
  maxQueuePerModel: number;
  maxTrainingQueuePerModel: number;
  /** Training between entities (src/domain/training-selection.ts) and the jobs one entity may have queued or running (0: no cap). */
  trainingFairness?: TrainingFairness & { maxJobsPerEntity: number };
  /** Per-entity inference limits (entity-admission.ts); none when absent. */
  inferenceEntityLimits?: { inFlight: number; queued: number };
  queueTimeoutMs: number;
  reconcileEveryMs?: number;
  /** Most JSON values a stored training payload may hold to be handed to a worker (HEARTH_TRAINING_MAX_JSON_VALUES). */
  maxTrainingPayloadValues?: number;
  log?: (msg: string) => void;
}

export class QueueService implements TrainingDispatcher, WorkerDirectory {
  readonly registry: WorkerRegistry;
  readonly gateway: InferenceGateway;
  private scheduler!: TrainingScheduler;
  private jobs!: TrainingJobReports;
  private timer: NodeJS.Timeout | null = null;
  private resubmitting = false;
  private checkingLoads = false;
  /** This API host's home id (src/protocol/artifact-manifest.ts): tells worker hosts whether they share its storage. */
  private readonly homeId: string;
  private readonly log: (msg: string) => void;

  constructor(
    readonly adapter: QueueAdapter,
    private readonly store: Store,
    private readonly catalog: BaseModelCatalog,
    private readonly opts: QueueServiceOptions,
  ) {
    this.registry = new WorkerRegistry(opts.heartbeatTimeoutMs, opts.loadTimeoutMs);
    this.homeId = ensureHomeId(opts.home);
    this.gateway = new InferenceGateway(adapter, opts.maxQueuePerModel, opts.queueTimeoutMs, { home: opts.home, homeId: this.homeId }, opts.inferenceEntityLimits);
    this.log = opts.log ?? ((m) => process.stderr.write(`${m}\n`));
  }

  /** Connect the service that owns job state (it needs us as its dispatcher, so this comes after). */
  async start(jobs: TrainingJobReports): Promise<void> {
    this.jobs = jobs;
    this.scheduler = new TrainingScheduler(this.store, this.adapter, this.catalog, this.opts.home, this.opts.checkpointsRoot, this.homeId, (id, msg) => {
      this.jobs.fail(id, msg);
      this.scheduler.finished(id);
    }, this.opts.maxTrainingPayloadValues, this.opts.trainingFairness, () => this.registry.live('training').length);
    this.scheduler.adopt();
    // Redis: resolves once the reports that arrived while no API ran are applied, so the jobs' states are current
    // before queued jobs are handed out and before the HTTP routes (checkpoint uploads among them) open.
    await this.adapter.start(
      (msg) => this.apply(msg),
      (workerId, reason, tasks) => this.workerExited(workerId, reason, tasks ?? []),
    );
    void this.scheduler.pump();
    this.timer = setInterval(() => this.reconcile(), this.opts.reconcileEveryMs ?? 1000);
    this.timer.unref();
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.adapter.close();
  }

  // ---- TrainingDispatcher ----

  admitTraining(modelId: string, entity: string): void {
    const queued = this.store.jobs.activeForModel(modelId).length;
    if (queued >= this.opts.maxTrainingQueuePerModel) {
      throw overCapacity(`Model ${modelId} already has ${queued} training jobs queued or running; retry later`, { retryAfterSec: 30 });
    }
    const limit = this.opts.trainingFairness?.maxJobsPerEntity ?? 0;
    const ofEntity = limit > 0 ? this.store.jobs.activeCountForEntity(entity) : 0;
    if (limit > 0 && ofEntity >= limit) {
      throw overCapacity(`Your entity already has ${ofEntity} training jobs queued or running (HEARTH_TRAINING_QUEUE_PER_ENTITY is ${limit}); retry later`, { retryAfterSec: 30 });
    }
  }

  async enqueueTraining(_job: TrainingJobRecord): Promise<void> {
    // The job is stored: answer now. Handing it over may wait on Redis (down, reconnecting), and the
    // scheduler fails the job itself if the hand-over fails.
    void this.scheduler.pump();
  }

  async cancelTraining(jobId: string): Promise<void> {
    if (this.scheduler.isActive(jobId)) await this.adapter.cancelTraining(jobId);
  }

  // ---- WorkerDirectory ----

  liveWorkers(kind?: WorkerKind): WorkerInfo[] {
    return this.registry.live(kind);
  }

  /** Workers of a kind started by the transport that have not reported yet (0 where it cannot tell). */
  startingWorkers(kind: WorkerKind): number {
    return this.adapter.startingWorkers?.(kind) ?? 0;
  }

  async health(_kind: WorkerKind): Promise<QueueHealth> {
    return this.adapter.health();
  }

  // ---- reports from workers ----

  apply(msg: WorkerMessage): void {
    switch (msg.type) {
      case 'heartbeat':
        this.registry.update(msg.worker as WorkerInfo);
        recordHeartbeat(hearthMetrics, msg.worker);
        recordEngineStats(hearthMetrics, msg.worker.id, msg.worker.stats?.batchSizeCounts, msg.worker.stats?.prefillChunkTokens);
        if (msg.worker.kind === 'training' && msg.worker.tasks.length === 0) void this.scheduler.pump();
        break;
      case 'training.started':
        this.jobs.markStarted(msg.jobId);
        break;
      case 'training.checkpoint':
        this.jobs.recordCheckpoint(msg.jobId, msg.step, msg.path);
        break;
      case 'training.event':
        this.jobs.recordEvent(msg.jobId, msg.event.type, msg.event.data, msg.seq);
        if (msg.event.type === 'training_ended' || msg.event.type === 'training_failed') this.scheduler.finished(msg.jobId);
        break;
      case 'inference.started':
        this.gateway.started(msg.requestId, msg.workerId);
        break;
      case 'inference.event':
        this.gateway.event(msg.requestId, msg.event, msg.workerMs);
        break;
    }
  }

  private workerExited(workerId: string, reason: string, tasks: string[]): void {
    const loading = blockedBy(this.registry.get(workerId));
    if (loading) reason = `${reason} while ${loading}`;
    this.registry.remove(workerId);
    for (const id of tasks) {
      if (this.scheduler.isActive(id)) {
        this.jobs.fail(id, `the training worker ${reason} while running this job`);
        this.scheduler.finished(id);
      }
    }
    const message = `the inference worker ${reason}${loading ? '' : ' while serving this request'}; retry`;
    this.gateway.workerGone(workerId, message);
    for (const id of tasks) this.gateway.event(id, { type: 'error', status: 503, message });
  }

  /**
   * A worker silent past the heartbeat timeout while loading a model may be loading or may have died there; where
   * the transport can tell (Redis: the worker's named connection), a closed connection fails its requests now
   * instead of after HEARTH_LOAD_TIMEOUT.
   */
  private checkSilentLoads(now: number): void {
    const ask = this.adapter.workerConnected?.bind(this.adapter);
    if (!ask || this.checkingLoads) return;
    const silent = this.registry.live(undefined, now).filter((w) => w.loading?.length && now - w.lastSeenMs > this.opts.heartbeatTimeoutMs);
    if (!silent.length) return;
    this.checkingLoads = true;
    void Promise.all(
      silent.map(async (w) => {
        if ((await ask(w.id)) !== false || this.registry.get(w.id)?.lastSeenMs !== w.lastSeenMs) return;
        const loading = blockedBy(w);
        this.log(`worker ${w.id} closed its connection while ${loading}`);
        this.registry.remove(w.id);
        for (const id of w.tasks.filter((t) => this.scheduler.isActive(t))) {
          this.jobs.fail(id, `the training worker's connection closed while it was ${loading} (the worker died)`);
          this.scheduler.finished(id);
        }
        this.gateway.workerGone(w.id, `the inference worker's connection closed while it was ${loading} (the worker died); retry`);
      }),
    )
      .catch((err: Error) => this.log(`could not check on workers loading a model: ${err.message}`))
      .finally(() => (this.checkingLoads = false));
  }

  /** Periodic: expire silent workers, fail the work they held, fail requests nobody picked up. */
  reconcile(now = Date.now()): void {
    for (const w of this.registry.takeExpired(now)) {
      const loading = blockedBy(w);
      this.log(`worker ${w.id} stopped sending heartbeats${loading ? ` while ${loading}` : ''}`);
      if (loading) this.gateway.workerGone(w.id, `the inference worker stopped sending heartbeats while ${loading}; retry`);
      // Embedded: the blocked child is killed and replaced (a hung worker would otherwise hold its slot until it died).
      this.adapter.workerDeclaredDead?.(w.id, `stopped sending heartbeats${loading ? ` while ${loading}` : ''} and was killed`);
    }
    for (const jobId of this.scheduler.activeJobs()) {
      const job = this.store.jobs.getById(jobId);
      if (!job) {
        this.scheduler.finished(jobId);
        continue;
      }
      if (job.status !== 'running' || this.registry.runnerOf(jobId, now)) continue;
      const since = Date.parse(job.startedAt ?? job.createdAt);
      if (now - since > this.opts.heartbeatTimeoutMs) {
        this.jobs.fail(jobId, 'the worker running this job stopped sending heartbeats');
        this.scheduler.finished(jobId);
      }
    }
    this.gateway.reap((id) => this.registry.isLive(id, now), now);
    this.checkSilentLoads(now);
    // Asks Redis, which may be slow or down: one pass at a time, never blocking the rest of reconcile.
    if (!this.resubmitting) {
      this.resubmitting = true;
      this.scheduler
        .resubmitQueued()
        .catch((err: Error) => this.log(`could not check queued training jobs: ${err.message}`))
        .finally(() => (this.resubmitting = false));
    }
  }
}
