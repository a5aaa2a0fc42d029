// Hands persisted training jobs to workers: at most one active job per model (each job continues from the
// previous checkpoint, so jobs of one model run in order), fairly between entities (src/domain/training-selection.ts:
// priority, per-entity cap, turns), as capacity allows.
// A job that cannot be handed over (a payload over the value budget, unparsable, or one whose hand-over crashed
// the process: see DispatchMarker) fails with its reason; listing and choosing jobs never reads a payload.
import { resolveKlReference } from '../domain/kl-reference.js';
import { rewardStdDevHistory } from '../domain/training-step-metrics.js';
import fs from 'node:fs';
import path from 'node:path';
import type { Store } from '../store/sqlite/store.js';
import type { TrainingJobRecord } from '../store/records.js';
import type { QueueAdapter } from './port.js';
import type { TrainingTask } from '../protocol/messages.js';
import type { BaseModelCatalog } from '../models/base-models.js';
import { clearUploadStaging } from '../protocol/artifact-manifest.js';
import { exceedsJsonBudget } from '../domain/json-budget.js';
import { MAX_JSON_DEPTH } from '../domain/json-depth.js';
import { DispatchMarker } from './dispatch-marker.js';
import { rlSettingsFromExperimentalConfig, type RlSettings } from '../protocol/rl-settings.js';
import { trainingPickOrder, type ActiveJob, type TrainingFairness } from '../domain/training-selection.js';

export class TrainingScheduler {
  /** Jobs handed to the adapter and not finished yet: job id → its model and entity. */
  private readonly active = new Map<string, ActiveJob>();
  /** Entity → the number of the start of its latest job (this process's count): entities take turns by it. */
  private readonly lastStarted = new Map<string, number>();
  private starts = 0;
  private pumping = false;
  private readonly marker: DispatchMarker;

  constructor(
    private readonly store: Store,
    private readonly adapter: QueueAdapter,
    private readonly catalog: BaseModelCatalog,
    private readonly home: string,
    private readonly checkpointsRoot: string,
    /** Sent with each task (TrainingTask.homeId). */
    private readonly homeId: string,
    private readonly fail: (jobId: string, message: string) => void,
    /** Most JSON values a stored payload may hold to be handed over (HEARTH_TRAINING_MAX_JSON_VALUES). */
    private readonly maxPayloadValues: number = Number.POSITIVE_INFINITY,
    private readonly fairness: TrainingFairness = { maxActivePerEntity: 0, priorities: new Map() },
    /**
     * Durable transports (Redis), which take every job at once: the live training workers (each runs one job at a
     * time). No more jobs are handed over than there are trainers, so the order of the transport's own FIFO queue
     * is never the order entities get trainers in: each free trainer's job is chosen here, fairly, when it frees.
     */
    private readonly trainers?: () => number,
  ) {
    this.marker = new DispatchMarker(home);
  }

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
    const crashed = this.marker.takeLeftOver();
    if (crashed && this.store.jobs.getById(crashed)?.status === 'queued') {
      this.fail(crashed, 'the server stopped while handing this job to a worker (its payload may be too large to hand over); it is not handed over again');
    }
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
        const job = this.store.jobs.getById(head.id); // its payload is read only below, once judged
        if (!job || job.status !== 'queued') continue;
        // Marked from before the payload is read until the hand-over's synchronous part (the payload's
        // serialisation) is done: a crash in between fails this job at the next start (adopt).
        this.marker.begin(job.id);
        let handover: Promise<void>;
        try {
          const task = this.payloadRefusal(job.id) ?? this.taskOrReason(job);
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
          handover = this.adapter.startTraining(task);
        } catch (err) {
          this.active.delete(job.id);
          this.fail(job.id, `could not hand the job to a worker: ${(err as Error).message}`);
          continue;
        } finally {
          this.marker.end();
        }
        try {
          await handover;
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

  /** Why a stored payload cannot be handed over, judged on its text before it is parsed; null when it can. */
  private payloadRefusal(jobId: string): string | null {
    const text = this.store.jobs.payloadText(jobId);
    if (text === null) return 'the job has no stored payload';
    const excess = exceedsJsonBudget(text, { maxValues: this.maxPayloadValues, maxDepth: MAX_JSON_DEPTH });
    if (excess?.limit === 'values') return `the job's payload holds more than ${excess.max} JSON values (twice HEARTH_TRAINING_MAX_JSON_VALUES): it cannot be handed to a worker`;
    if (excess?.limit === 'depth') return `the job's payload nests deeper than ${excess.max} levels: it cannot be handed to a worker`;
    return null;
  }

  /** taskFor, with a payload that does not parse as a reason rather than an exception. */
  private taskOrReason(job: TrainingJobRecord): TrainingTask | string {
    try {
      return this.taskFor(job);
    } catch (err) {
      if (err instanceof SyntaxError) return `the job's stored payload is not valid JSON (${err.message}): it cannot be handed to a worker`;
      throw err;
    }
  }

  private taskFor(job: TrainingJobRecord): TrainingTask | string {
    const model = this.store.models.getById(job.modelId);
    if (!model) return 'the model was deleted';
    const base = this.catalog.get(model.baseModel);
    if (!base) return `base model "${model.baseModel}" is no longer installed`;
    const latest = this.store.checkpoints.latest(model.id);
    const step = (latest?.step ?? 0) + 1;
    const outputDir = path.join(this.checkpointsRoot, model.id, `step-${step}`);
    const common = {
      jobId: job.id, entity: job.entity, modelId: model.id, baseModel: model.baseModel, baseModelDir: base.dir,
      step, outputDir, initCheckpointDir: latest?.path ?? null, home: this.home, homeId: this.homeId,
    };
    if (job.kind === 'sft') {
      fs.mkdirSync(path.dirname(outputDir), { recursive: true });
      return { ...common, kind: 'sft', payload: job.payload };
    }
    // RL: experimental_config becomes the trainer's settings here, once, and the checkpoints it names become folders.
    const experimental = job.payload.experimental_config ?? null;
    let rlSettings: RlSettings;
    try {
      rlSettings = rlSettingsFromExperimentalConfig(experimental);
    } catch (err) {
      return `experimental_config: ${(err as Error).message}`;
    }
    const klReference = resolveKlReference(experimental, this.store.checkpoints.all(model.id), latest?.step ?? 0);
    if ('error' in klReference) return klReference.error;
    fs.mkdirSync(path.dirname(outputDir), { recursive: true });
    return {
      ...common, kind: 'rl', payload: job.payload, rlSettings, klReferenceDir: klReference.dir,
      ...(rlSettings.scaleLearningRateByRewardStdDev ? { rewardStdDevHistory: rewardStdDevHistory(this.store.history.all(model.id)) } : {}),
    };
  }
}
