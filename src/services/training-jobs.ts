// Training jobs: creation (validated, persisted, handed to the queue), status, and the ordered event log
// that ART's client polls. The API process is the only writer; workers report through the queue.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Store } from '../store/sqlite/store.js';
import { nowIso, TERMINAL_STATUSES, type TrainingEventType, type TrainingJobRecord } from '../store/records.js';
import { conflict, invalid, notFound, notImplemented } from '../errors/domain-errors.js';
import { toPage } from './pagination.js';
import { trainStepMetrics } from '../domain/training-step-metrics.js';
import { hearthMetrics } from '../metrics/metrics.js';
import type { ModelsService } from './models.js';
import type { CreateSFTTrainingJobBody, CreateTrainingJobBody } from '../protocol/training.js';
import type { TrainingDispatcher, TrainingJobReports } from '../queue/port.js';
import type { ExperimentalTrainingConfigT } from '../protocol/training.js';
import type { RlTrainingPayload, SftTrainingPayload } from '../protocol/training-task.js';

/** What a job trains: its kind and the payload its task carries to the worker. */
export type JobWork = { kind: 'rl'; payload: RlTrainingPayload } | { kind: 'sft'; payload: SftTrainingPayload };

/** Checks that belong to the training engine (config keys it implements, data URLs it can read). */
export interface TrainingPolicy {
  unsupportedRlKeys(config: Record<string, unknown>): string[];
  unsupportedSftKeys(config: Record<string, unknown>): string[];
  /** Why an RL job's experimental_config has no settings the trainer can run (a value out of range), or null. */
  rlSettingsProblem(config: ExperimentalTrainingConfigT | null): string | null;
  /** A file the workers can read for an SFT data URL, or why there is none. */
  resolveSftData(entity: string, url: string): Promise<{ path: string } | { error: string }>;
}

const jobDetail = (j: TrainingJobRecord) => ({
  id: j.id,
  status: j.status,
  kind: j.kind,
  model_id: j.modelId,
  created_at: j.createdAt,
  started_at: j.startedAt,
  finished_at: j.finishedAt,
  training_start: j.startedAt,
  training_end: j.finishedAt,
  error_message: j.errorMessage,
});

export class TrainingJobsService implements TrainingJobReports {
  /** Called after a job's terminal event is stored (native runs follow the jobs that execute their operations). */
  private readonly terminalListeners: ((job: TrainingJobRecord) => void)[] = [];

  constructor(
    private readonly store: Store,
    private readonly models: ModelsService,
    private readonly dispatcher: TrainingDispatcher | null,
    private readonly policy: TrainingPolicy | null,
  ) {}

  private requireEngine(): { dispatcher: TrainingDispatcher; policy: TrainingPolicy } {
    if (!this.dispatcher || !this.policy) {
      throw notImplemented('Training is not available on this server: no training engine is configured (see docs/architecture.md)');
    }
    return { dispatcher: this.dispatcher, policy: this.policy };
  }

  async createRl(entity: string, body: CreateTrainingJobBody) {
    const model = this.models.require(entity, body.model_id);
    const { dispatcher, policy } = this.requireEngine();
    const unsupported = policy.unsupportedRlKeys(body.experimental_config ?? {});
    if (unsupported.length) throw invalid(`experimental_config keys not implemented by this server: ${unsupported.join(', ')}`);
    const settingsProblem = policy.rlSettingsProblem(body.experimental_config ?? null);
    if (settingsProblem) throw invalid(settingsProblem);
    dispatcher.admitTraining(model.id, entity);
    return this.enqueue(dispatcher, entity, model.id, { kind: 'rl', payload: body }, null);
  }

  async createSft(entity: string, body: CreateSFTTrainingJobBody) {
    const model = this.models.require(entity, body.model_id);
    const { dispatcher, policy } = this.requireEngine();
    const unsupported = policy.unsupportedSftKeys(body.experimental_config ?? {});
    if (unsupported.length) throw invalid(`experimental_config keys not implemented for SFT: ${unsupported.join(', ')}`);
    const data = await policy.resolveSftData(entity, body.training_data_url);
    if ('error' in data) throw invalid(data.error);
    // The hosted service answers a repeated create (same model, same data) with the existing job.
    const dedupKey = crypto.createHash('sha256').update(JSON.stringify([body.training_data_url, body.config ?? null])).digest('hex');
    const existing = this.store.jobs.findByDedupKey(model.id, dedupKey);
    if (existing && existing.status !== 'failed' && existing.status !== 'cancelled') return { id: existing.id };
    dispatcher.admitTraining(model.id, entity);
    return this.enqueue(dispatcher, entity, model.id, { kind: 'sft', payload: { ...body, resolved_data_path: data.path } }, dedupKey);
  }

  /**
   * An SFT job a native run's operation executes on its learner model (services/native-runs/runs.ts): the payload is
   * built by that service (data file written, config and LoRA from the run), not by a client. The caller picks
   * the job id and stores it with its operation first, so a crash between the two cannot leave a job nobody follows.
   */
  async createNative(entity: string, modelId: string, work: JobWork, jobId: string): Promise<TrainingJobRecord> {
    const { dispatcher } = this.requireEngine();
    await this.enqueue(dispatcher, entity, modelId, work, null, jobId);
    return this.store.jobs.getById(jobId)!;
  }

  /** experimental_config keys set but not implemented by the engine (none without an engine: its jobs answer 501). */
  unsupportedRlKeys(config: Record<string, unknown>): string[] {
    return this.policy?.unsupportedRlKeys(config) ?? [];
  }

  onTerminal(listener: (job: TrainingJobRecord) => void): void {
    this.terminalListeners.push(listener);
  }

  private async enqueue(dispatcher: TrainingDispatcher, entity: string, modelId: string, work: JobWork, dedupKey: string | null, id: string = crypto.randomUUID()) {
    const job: TrainingJobRecord = {
      id, entity, modelId, ...work, status: 'queued', dedupKey,
      errorMessage: null, createdAt: nowIso(), startedAt: null, finishedAt: null,
    };
    this.store.jobs.insert(job);
    try {
      await dispatcher.enqueueTraining(job);
    } catch (err) {
      this.fail(job.id, `could not enqueue the job: ${(err as Error).message}`);
      throw err;
    }
    return { id: job.id };
  }

  require(entity: string, jobId: string): TrainingJobRecord {
    const j = this.store.jobs.get(entity, jobId);
    if (!j) throw notFound(`Training job ${jobId} not found`);
    return j;
  }

  get(entity: string, jobId: string) {
    return jobDetail(this.require(entity, jobId));
  }

  events(entity: string, jobId: string, q: { after?: string; limit: number }) {
    const job = this.require(entity, jobId);
    let afterSeq: number | null = null;
    if (q.after) {
      afterSeq = this.store.events.seqOf(job.id, q.after);
      if (afterSeq === null) return { object: 'list' as const, data: [], first_id: '', last_id: '', has_more: false };
    }
    const rows = this.store.events.page(job.id, afterSeq, q.limit + 1);
    return toPage(rows, q.limit, (e) => ({ id: e.id, type: e.type, data: e.data }));
  }

  async cancel(entity: string, jobId: string) {
    const job = this.require(entity, jobId);
    if (TERMINAL_STATUSES.includes(job.status)) throw conflict(`Training job ${jobId} already ${job.status}`);
    await this.dispatcher?.cancelTraining(job.id);
    // Not yet picked up by a worker: nobody else will write its terminal event.
    if (this.store.jobs.getById(job.id)?.status === 'queued') {
      this.recordEvent(job.id, 'training_failed', { error_message: 'cancelled by the user before it started', cancelled: true });
    }
    return jobDetail(this.store.jobs.getById(job.id)!);
  }

  // ---- reports from workers (through the queue) ----

  markStarted(jobId: string): boolean {
    return this.store.jobs.markRunning(jobId, nowIso());
  }

  /**
   * Store one event from a worker, keeping the order ART relies on: nothing after a terminal event,
   * and a terminal event also finishes the job (one transaction). `seq`, the worker's number of this report
   * (src/protocol/messages.ts), below the number of events stored for the job: a report applied before and read again
   * (the API was killed between storing it and acknowledging it to Redis); dropped, so no step is stored twice.
   */
  recordEvent(jobId: string, type: TrainingEventType, data: Record<string, unknown>, seq?: number): boolean {
    const stored = this.store.tx(() => {
      const job = this.store.jobs.getById(jobId);
      if (!job || this.store.events.hasTerminal(jobId)) return false;
      if (seq !== undefined && seq < this.store.events.count(jobId)) return false;
      if (job.status === 'queued') this.store.jobs.markRunning(jobId, nowIso());
      this.store.events.append({ id: crypto.randomUUID(), jobId, type, data, createdAt: nowIso() });
      if (type === 'gradient_step') hearthMetrics.trainingSteps.inc({ model: job.modelId });
      if (type === 'training_ended') this.store.jobs.finish(jobId, 'succeeded', nowIso(), null);
      if (type === 'training_failed') {
        const cancelled = data.cancelled === true;
        this.store.jobs.finish(jobId, cancelled ? 'cancelled' : 'failed', nowIso(), String(data.error_message ?? 'training failed'));
      }
      return true;
    });
    if (stored && (type === 'training_ended' || type === 'training_failed')) {
      const job = this.store.jobs.getById(jobId)!;
      for (const listener of this.terminalListeners) listener(job);
    }
    return stored;
  }

  fail(jobId: string, message: string): boolean {
    return this.recordEvent(jobId, 'training_failed', { error_message: message });
  }

  /**
   * A worker finished writing a checkpoint folder: list it now, before the job's `training_ended` is stored,
   * because ART reads the new step right after that event.
   */
  recordCheckpoint(jobId: string, step: number, dir: string): boolean {
    const job = this.store.jobs.getById(jobId);
    if (!job || TERMINAL_STATUSES.includes(job.status)) return false;
    const root = path.resolve(this.models.modelCheckpointDir(job.modelId));
    const resolved = path.resolve(dir);
    if (!resolved.startsWith(root + path.sep) || !fs.existsSync(resolved)) {
      this.fail(jobId, `worker reported a checkpoint outside the model's folder or missing: ${dir}`);
      return false;
    }
    const existing = this.store.checkpoints.byStep(job.modelId, step);
    // The same report read again after an API restart (stored, not yet acknowledged): already listed.
    if (existing?.path && path.resolve(existing.path) === resolved) return true;
    if (existing) {
      this.fail(jobId, `checkpoint step ${step} already exists for this model`);
      return false;
    }
    // The job's averaged step metrics go with its checkpoint and into the model's history, as ART's
    // LocalBackend logs them at the new step.
    const metrics = trainStepMetrics(this.store.events.all(jobId));
    this.store.tx(() => {
      this.store.checkpoints.insert({ id: crypto.randomUUID(), modelId: job.modelId, step, metrics, path: resolved, createdAt: nowIso() });
      this.store.history.append(job.modelId, step, 'train', metrics);
    });
    return true;
  }
}
