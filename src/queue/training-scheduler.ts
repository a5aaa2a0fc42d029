// Hands persisted training jobs to workers: at most one active job per model (each job continues from the
// previous checkpoint, so jobs of one model run in order), fairly between entities (src/domain/training-selection.ts:
// priority, per-entity cap, turns), as capacity allows.
import { resolveKlReference } from '../domain/kl-reference.js';
import { rewardStdDevHistory } from '../domain/training-step-metrics.js';
import fs from 'node:fs';
import path from 'node:path';
import type { Store } from '../store/sqlite/store.js';
import type { TrainingJobRecord } from '../store/records.js';
import type { QueueAdapter } from './port.js';
import type { TrainingTask } from './messages.js';
import type { BaseModelCatalog } from '../models/base-models.js';
import { clearUploadStaging } from '../artifacts/manifest.js';
import { trainingPickOrder, type ActiveJob, type TrainingFairness } from '../domain/training-selection.js';

export class TrainingScheduler {
  /** Jobs handed to the adapter and not finished yet: job id → its model and entity. */
  private readonly active = new Map<string, ActiveJob>();
  /** Entity → the number of the start of its latest job (this process's count): entities take turns by it. */
  private readonly lastStarted = new Map<string, number>();
  private starts = 0;
  private pumping = false;

  constructor(
    private readonly store: Store,
    private readonly adapter: QueueAdapter,
    private readonly catalog: BaseModelCatalog,
    private readonly home: string,
    private readonly checkpointsRoot: string,
    /** Sent with each task (TrainingTask.homeId). */
    private readonly homeId: string,
    private readonly fail: (jobId: string, message: string) => void,
    private readonly fairness: TrainingFairness = { maxActivePerEntity: 0, priorities: new Map() },
    /**
     * Durable transports (Redis), which take every job at once: the live training workers (each runs one job at a
     * time). No more jobs are handed over than there are trainers, so the order of the transport's own FIFO queue
     * is never the order entities get trainers in: each free trainer's job is chosen here, fairly, when it frees.
     */
    private readonly trainers?: () => number,
  ) {}

  isActive(jobId: string): boolean {
    return this.active.has(jobId);
  }

  activeJobs(): string[] {
    return [...this.active.keys()];
  }

  /**
   * Called at start, before the transport's reports are read: adopt the jobs an earlier API process left running, so
   * that no job of their models is handed out while their reports (which may end them) are being applied.
   */
  adopt(): void {
    for (const job of this.store.jobs.withStatus(['running'])) {
      if (this.adapter.durable) this.active.set(job.id, { modelId: job.modelId, entity: job.entity }); // its worker may still be on it; heartbeats tell
      else this.fail(job.id, 'the server restarted while this job was running');
    }
  }

  finished(jobId: string): void {
    if (this.active.delete(jobId)) void this.pump();
  }

  async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      const queued = this.store.jobs.queuedHeads().filter((head) => !this.active.has(head.id));
      for (const head of trainingPickOrder(queued, [...this.active.values()], this.lastStarted, this.fairness)) {
        if (!this.adapter.canStartTraining()) break;
        if (this.adapter.durable && this.trainers && this.active.size >= this.trainers()) break;
        const job = this.store.jobs.getById(head.id);
        if (!job || job.status !== 'queued') continue;
        const task = this.taskFor(job);
        if (typeof task === 'string') {
          this.fail(job.id, task);
          continue;
        }
        this.active.set(job.id, { modelId: job.modelId, entity: job.entity });
        this.lastStarted.set(job.entity, ++this.starts);
        // The step folder has no row (the step comes after the latest one): it is what a crash left between
        // the worker's rename and its report. Workers never overwrite a checkpoint, so clear it first.
        fs.rmSync(task.outputDir, { recursive: true, force: true });
        // Likewise an upload a worker host left unfinished for this step (cut, or its job failed meanwhile).
        clearUploadStaging(task.outputDir);
        try {
          await this.adapter.startTraining(task);
        } catch (err) {
          this.active.delete(job.id);
          this.fail(job.id, `could not hand the job to a worker: ${(err as Error).message}`);
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  /**
   * Jobs handed over but not started yet may have been lost by the transport (Redis restarted without its
   * data): hand them over again where the adapter can do that safely. Returns the ids queued again.
   */
  async resubmitQueued(): Promise<string[]> {
    if (!this.adapter.resubmitTraining) return [];
    const again: string[] = [];
    for (const jobId of this.activeJobs()) {
      const job = this.store.jobs.getById(jobId);
      if (job?.status !== 'queued') continue;
      const task = this.taskFor(job);
      if (typeof task !== 'string' && (await this.adapter.resubmitTraining(task))) again.push(jobId);
    }
    return again;
  }

  private taskFor(job: TrainingJobRecord): TrainingTask | string {
    const model = this.store.models.getById(job.modelId);
    if (!model) return 'the model was deleted';
    const base = this.catalog.get(model.baseModel);
    if (!base) return `base model "${model.baseModel}" is no longer installed`;
    const latest = this.store.checkpoints.latest(model.id);
    const step = (latest?.step ?? 0) + 1;
    const experimental = job.kind === 'rl' ? (job.payload as { experimental_config?: Record<string, unknown> | null }).experimental_config : null;
    const klReference = resolveKlReference(experimental, this.store.checkpoints.all(model.id), latest?.step ?? 0);
    if ('error' in klReference) return klReference.error;
    const outputDir = path.join(this.checkpointsRoot, model.id, `step-${step}`);
    fs.mkdirSync(path.dirname(outputDir), { recursive: true });
    return {
      jobId: job.id, kind: job.kind, entity: job.entity, modelId: model.id, baseModel: model.baseModel, baseModelDir: base.dir,
      payload: job.payload, step, outputDir, initCheckpointDir: latest?.path ?? null, klReferenceDir: klReference.dir, home: this.home, homeId: this.homeId,
      ...(experimental?.scale_learning_rate_by_reward_std_dev === true ? { rewardStdDevHistory: rewardStdDevHistory(this.store.history.all(model.id)) } : {}),
    };
  }
}
