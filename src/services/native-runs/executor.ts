// Executes a native run's operations on Hearth's trainer, one at a time per run in sequence_id order
// (docs/art.md "How Hearth executes them"):
// - a run's learner state is a hidden model (project `hearth-native-runs`) whose checkpoint N is learner
//   version N, so each optim_step is one ordinary training job of that model and can only land once;
// - forward_backward is a measuring SFT job (loss and token counts at the current weights, nothing written);
//   its inputs are kept, and optim_step runs one SFT optimizer step over the inputs of every forward_backward
//   since the last optim_step, which recomputes the same gradient from the same inputs and weights;
// - save_weights_for_sampler copies the learner's current adapter into the model named by the publication's
//   alias as its next checkpoint, which `/v1/chat/completions` then serves by name.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Store } from '../../store/sqlite/store.js';
import { nowIso, type ModelRecord, type NativeOperationRecord, type NativeRunRecord, type TrainingJobRecord } from '../../store/records.js';
import { notImplemented } from '../../errors/domain-errors.js';
import { pendingGradients } from './admission.js';
import { runLoraSeed } from './framing.js';
import { forwardBackwardResult, peftTargets, pick, sftRow, TERMINAL_OPERATION_STATUSES } from './wire.js';
import {
  admitRlBatch, isRlForwardBackward, measuresRl, rlForwardBackwardResult, rlJobData, rlOptimMetrics, rlOptimPayload, rlTokenInputs, type RlInputs, type RlTokenBatch,
} from './rl-batch.js';
import { forwardResult, NativeStates } from './state.js';
import { matrixTokenLogprobs, wantsTokenLogprobs } from './token-logprobs.js';
import { OPTIMIZER_STATE_FILE } from '../../runtime/optimizer-state.js';
import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, placeCheckpointFiles } from '../../runtime/checkpoint-files.js';
import type { ModelsService } from '../models.js';
import { isHiddenModel } from '../hidden-models.js';
import type { JobWork, TrainingJobsService } from '../training-jobs.js';
import { defaultLoraAlpha, type LoraRequest, type NativeOptimizer } from '../../protocol/training-task.js';
import type { TokenizedSftRow } from '../../protocol/token-sequences.js';
import type { ForwardBackwardBodyT, OptimStepBodyT, SaveWeightsForSamplerBodyT } from '../../schemas/native-training.js';
import { servedName } from '../../domain/served-names.js';

export class NativeExecutor {
  private readonly pumping = new Set<string>();
  private readonly pumpAgain = new Set<string>();
  private readonly states: NativeStates;

  constructor(
    private readonly store: Store,
    private readonly models: ModelsService,
    private readonly jobs: TrainingJobsService,
    private readonly dataRoot: string,
  ) {
    this.states = new NativeStates(store, models, dataRoot);
    jobs.onTerminal((job) => this.jobFinished(job));
  }

  /** After a restart: settle operations whose job ended meanwhile, redo interrupted copies, start what is next. */
  resume(): void {
    for (const run of this.store.nativeRuns.openRuns()) {
      for (const op of this.store.nativeRuns.ops(run.id)) {
        if (op.status !== 'running') continue;
        const job = op.jobId ? this.store.jobs.getById(op.jobId) : null;
        if (job && TERMINAL_OPERATION_STATUSES.has(job.status)) this.settle(op, job);
        // Stopped before its job existed (or a sampler copy, which has none): it starts again from the top.
        else if (!job) this.store.nativeRuns.updateOp(op.id, { status: 'admitted', executionStartedAt: null, jobId: null });
      }
      void this.pump(run.id);
    }
  }

  private jobFinished(job: TrainingJobRecord): void {
    const op = this.store.nativeRuns.opByJob(job.id);
    if (!op || op.status !== 'running') return;
    this.settle(op, job);
    void this.pump(op.runId);
  }

  /** Start the run's next operation once the one before it has finished (strict sequence order). */
  async pump(runId: string): Promise<void> {
    if (this.pumping.has(runId)) {
      this.pumpAgain.add(runId);
      return;
    }
    this.pumping.add(runId);
    try {
      do {
        this.pumpAgain.delete(runId);
        const run = this.store.nativeRuns.runById(runId);
        if (!run) return;
        const ops = this.store.nativeRuns.ops(runId);
        if (ops.some((o) => o.status === 'running')) continue;
        const next = ops.find((o) => o.status === 'admitted');
        if (!next) {
          if (run.status === 'closing') this.store.nativeRuns.updateRun(run.id, { status: 'closed' });
          continue;
        }
        await this.start(run, next, ops);
        this.pumpAgain.add(runId);
      } while (this.pumpAgain.has(runId));
    } finally {
      this.pumping.delete(runId);
    }
  }

  private async start(run: NativeRunRecord, op: NativeOperationRecord, ops: NativeOperationRecord[]): Promise<void> {
    this.store.nativeRuns.updateOp(op.id, { status: 'running', executionStartedAt: nowIso(), eventCursor: op.eventCursor + 1 });
    const running = this.store.nativeRuns.op(run.id, op.id)!;
    try {
      if (op.kind === 'forward_backward' || op.kind === 'forward') await this.startForwardBackward(run, running);
      else if (op.kind === 'optim_step') await this.startOptimStep(run, running, ops);
      else if (op.kind === 'save_weights_for_sampler') this.saveWeightsForSampler(run, running);
      else if (op.kind === 'save_state') this.saveState(run, running, ops);
      else if (op.kind === 'load_state') this.loadState(run, running, ops);
      else throw notImplemented(`${op.kind} is not implemented by this server`);
    } catch (err) {
      // A job that failed while being handed over has already settled its operation.
      const current = this.store.nativeRuns.op(run.id, op.id)!;
      if (current.status !== 'running') return;
      const message = err instanceof Error ? err.message : String(err);
      this.store.tx(() => this.finish(current, 'failed', { error: { message } }));
    }
  }

  /** Where an operation's training inputs are kept until an optim_step applies them (or they can no longer be). */
  private dataFile(op: NativeOperationRecord): string {
    return path.join(this.dataRoot, op.runId, `${op.sequenceId}-${op.id}.jsonl`);
  }

  dropInputs(op: NativeOperationRecord): void {
    fs.rmSync(this.dataFile(op), { force: true });
  }

  /**
   * AdamW's moments serve only the step after the committed version: an older version's go once a newer one is
   * committed. They are twice the adapter (an 8B at rank 8 on all seven projections: 84 MB of adapter, 168 MB of
   * moments a version), so a run of a thousand steps keeps 84 GB, not 252. Every older version is looked at, so what
   * a crash left between the commit and this is taken the next time.
   */
  private dropSupersededMoments(run: NativeRunRecord, committed: number): void {
    for (const c of this.store.checkpoints.all(run.learnerModelId)) {
      if (c.step < committed && c.path) fs.rmSync(path.join(c.path, OPTIMIZER_STATE_FILE), { force: true });
    }
  }

  /** The run's adapter; alpha is ART's and PEFT's habit, twice the rank. */
  private loraPayload(run: NativeRunRecord): LoraRequest {
    const spec = run.spec as { lora_rank: number; lora_target_modules: string[] };
    return { rank: spec.lora_rank, alpha: defaultLoraAlpha(spec.lora_rank), target_modules: peftTargets(spec.lora_target_modules), seed: runLoraSeed(run.spec) };
  }

  /** Keep an operation's training inputs (`text`) until an optim_step applies them; returns their file. */
  private keepInputs(op: NativeOperationRecord, text: string): string {
    const file = this.dataFile(op);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
    return file;
  }

  private async startForwardBackward(run: NativeRunRecord, op: NativeOperationRecord): Promise<void> {
    const command = op.command as unknown as ForwardBackwardBodyT;
    // N3's batches are stored translated (native-runs/framing.ts): RL token matrices as rl_tokens, SFT ones as sft_tokens.
    const batch = command.batch as ForwardBackwardBodyT['batch'] | RlTokenBatch | { kind: 'sft_tokens'; sequences: TokenizedSftRow[] };
    const rl = batch.kind === 'rl' ? admitRlBatch(batch, command.loss, (config) => this.jobs.unsupportedRlKeys(config))
      : batch.kind === 'rl_tokens' ? rlTokenInputs(batch, command.loss) : null;
    // N3's return_token_logprobs: the measuring job also reports every trained target's logprob (native-runs/token-logprobs.ts).
    const logprobs = wantsTokenLogprobs(op) ? { return_token_logprobs: true } : {};
    if (rl) {
      // A measuring RL job (the policy loss at the current weights, nothing written); the decoded inputs are kept.
      this.keepInputs(op, JSON.stringify(rl));
      await this.runJob(run, op, { kind: 'rl', payload: { ...rlJobData([rl]), forward_only: true, ...logprobs, lora: this.loraPayload(run), native_operation_id: op.id } });
      return;
    }
    // SFT rows: from ART's trajectories, or N3's pre-tokenized sequences, lines the worker reads as they are.
    const rows = batch.kind === 'sft_tokens' ? batch.sequences : batch.kind === 'sft' ? batch.trajectories.map((t) => sftRow(t, batch.assistant_turns)) : null;
    if (!rows) throw notImplemented('only sft and rl batches are executed');
    const file = this.keepInputs(op, rows.map((r) => JSON.stringify(r)).join('\n'));
    await this.runJob(run, op, {
      kind: 'sft',
      payload: {
        resolved_data_path: file, config: { batch_size: rows.length, learning_rate: 0 }, forward_only: true, ...logprobs, lora: this.loraPayload(run),
        native_operation_id: op.id,
      },
    });
  }

  /** A learner transition writes the learner's next checkpoint step: the learner must be at its parent version. */
  private requireLearnerAtParent(run: NativeRunRecord, op: NativeOperationRecord): void {
    const latest = this.store.checkpoints.latest(run.learnerModelId)?.step ?? 0;
    if (latest !== op.learnerParentVersion) {
      throw new Error(`the learner is at version ${latest}, not ${op.learnerParentVersion}: this ${op.kind} would not produce version ${op.reservedOutputLearnerVersion}`);
    }
  }

  private async startOptimStep(run: NativeRunRecord, op: NativeOperationRecord, ops: NativeOperationRecord[]): Promise<void> {
    const command = op.command as unknown as OptimStepBodyT;
    // An RL batch whose trajectories all have zero advantage still makes its step (unchanged weights), as a preview
    // RL job does: ART's train() always follows its RL forward_backward with an optim_step.
    const contributing = pendingGradients(ops.filter((o) => o.sequenceId < op.sequenceId)).filter(
      (o) => o.status === 'succeeded' && ((o.result as { produced_gradient?: boolean } | null)?.produced_gradient === true || isRlForwardBackward(o)),
    );
    if (contributing.length === 0) throw new Error('optim_step has no gradients to apply: every forward_backward since the last optim_step failed, was cancelled or had no trainable tokens');
    if (contributing.some(isRlForwardBackward)) return this.startRlOptimStep(run, op, command, contributing);
    const file = this.keepInputs(op, contributing.map((o) => fs.readFileSync(this.dataFile(o), 'utf8')).join('\n'));
    this.requireLearnerAtParent(run, op);
    await this.runJob(run, op, {
      kind: 'sft',
      payload: {
        // One optimizer step over all accumulated inputs, at the command's learning rate.
        resolved_data_path: file, config: { learning_rate: command.optimizer.learning_rate }, one_optimizer_step: true, lora: this.loraPayload(run),
        // AdamW with the command's settings, its moments carried from the parent version's checkpoint (fresh without one).
        optimizer: nativeOptimizer(command.optimizer),
        native_operation_id: op.id, contributing_operation_ids: contributing.map((o) => o.id),
      },
    });
  }

  /** One RL training job over the kept inputs of every contributing forward_backward (one learner version). */
  private async startRlOptimStep(run: NativeRunRecord, op: NativeOperationRecord, command: OptimStepBodyT, contributing: NativeOperationRecord[]): Promise<void> {
    if (!contributing.every(isRlForwardBackward)) throw new Error('optim_step cannot apply RL and SFT gradients in one step');
    const inputs = contributing.map((o) => JSON.parse(fs.readFileSync(this.dataFile(o), 'utf8')) as RlInputs);
    this.requireLearnerAtParent(run, op);
    await this.runJob(run, op, {
      kind: 'rl',
      payload: {
        ...rlOptimPayload(inputs, command.optimizer.learning_rate), lora: this.loraPayload(run),
        // ART's optim_step applies the accumulated gradient once: one Adam update, whatever the packing.
        optimizer: nativeOptimizer(command.optimizer), one_optimizer_step: true,
        native_operation_id: op.id, contributing_operation_ids: contributing.map((o) => o.id),
      },
    });
  }

  /** Hand the operation's work to a training job of the run's learner model; its id is stored with the operation first. */
  private async runJob(run: NativeRunRecord, op: NativeOperationRecord, work: JobWork): Promise<void> {
    const jobId = crypto.randomUUID();
    this.store.nativeRuns.updateOp(op.id, { jobId });
    const job = await this.jobs.createNative(run.entity, run.learnerModelId, work, jobId);
    // A job can fail while being handed over, before this operation followed it: settle it now.
    if (TERMINAL_OPERATION_STATUSES.has(job.status) || TERMINAL_OPERATION_STATUSES.has(this.store.jobs.getById(jobId)!.status)) {
      const current = this.store.nativeRuns.op(op.runId, op.id)!;
      if (current.status === 'running') this.settle(current, this.store.jobs.getById(jobId)!);
    }
  }

  /** Turn a finished job into its operation's outcome. */
  private settle(op: NativeOperationRecord, job: TrainingJobRecord): void {
    const events = this.store.events.all(job.id);
    // An RL optim_step's job makes one gradient step per packed sequence, none when no trajectory has an advantage.
    const rlOptim = op.kind === 'optim_step' && job.kind === 'rl';
    const step = rlOptim ? rlOptimMetrics(events) : (events.find((e) => e.type === 'gradient_step')?.data as Record<string, number> | undefined);
    if (job.status === 'cancelled' || (job.status !== 'succeeded' && op.cancelRequested)) {
      this.store.tx(() => this.finish(op, 'cancelled', { error: { message: 'cancelled while running' } }));
      return;
    }
    if (job.status !== 'succeeded' || !step) {
      const message = job.errorMessage ?? 'the training job ended without reporting a step';
      this.store.tx(() => this.finish(op, 'failed', { error: { message, training_job_id: job.id } }));
      return;
    }
    let tokenLogprobs = {};
    if (wantsTokenLogprobs(op)) {
      try {
        tokenLogprobs = { token_logprobs: matrixTokenLogprobs(op, (step as Record<string, unknown>).token_logprobs) };
      } catch (err) {
        this.store.tx(() => this.finish(op, 'failed', { error: { message: (err as Error).message, training_job_id: job.id } }));
        return;
      }
    }
    if (op.kind === 'forward_backward') {
      const result = isRlForwardBackward(op) ? rlForwardBackwardResult(op, step) : forwardBackwardResult(op, step);
      this.store.tx(() => this.finish(op, 'succeeded', { result: { ...result, ...tokenLogprobs } }));
      return;
    }
    if (op.kind === 'forward') {
      const measured = measuresRl(op) ? rlForwardBackwardResult(op, step) : forwardBackwardResult(op, step);
      this.store.tx(() => this.finish(op, 'succeeded', { result: { ...forwardResult(measured), ...tokenLogprobs } }));
      this.dropInputs(op);
      return;
    }
    const run = this.store.nativeRuns.runById(op.runId)!;
    const version = op.reservedOutputLearnerVersion!;
    const checkpoint = this.store.checkpoints.byStep(run.learnerModelId, version);
    if (!checkpoint) {
      this.store.tx(() => this.finish(op, 'failed', { error: { message: `the optimizer step wrote no checkpoint for learner version ${version}` } }));
      return;
    }
    const contributing = ((job.payload as { contributing_operation_ids?: string[] }).contributing_operation_ids ?? []);
    this.store.tx(() => {
      for (const id of contributing) this.store.nativeRuns.updateOp(id, { consumedBy: op.id });
      this.store.nativeRuns.updateRun(run.id, { committedLearnerVersion: version });
      this.finish(op, 'succeeded', {
        result: {
          operation_id: op.id, kind: 'optim_step', contributing_forward_backward_operation_ids: contributing,
          checkpoint: { run_id: run.id, learner_version: version, checkpoint_id: checkpoint.id },
          metrics: rlOptim ? step : pick(step, ['loss', 'grad_norm', 'learning_rate', 'num_tokens', 'num_trainable_tokens']),
        },
      });
    });
    // Applied inputs are in the learner's weights now: their files go (after the rows say so), as do older moments.
    const ops = this.store.nativeRuns.ops(run.id);
    for (const o of ops.filter((x) => x.id === op.id || contributing.includes(x.id))) this.dropInputs(o);
    this.dropSupersededMoments(run, version);
  }

  /**
   * A failed or cancelled optim_step leaves its reserved version unused: the projection goes back to the committed
   * version, so a client that counted on it is told ("divergent command") and a re-resolved one continues.
   */
  private resyncVersions(runId: string): void {
    const run = this.store.nativeRuns.runById(runId)!;
    const pending = this.store.nativeRuns.ops(runId).filter((o) => (o.kind === 'optim_step' || o.kind === 'load_state') && (o.status === 'admitted' || o.status === 'running'));
    if (pending.length === 0) this.store.nativeRuns.updateRun(runId, { projectedLearnerVersion: run.committedLearnerVersion });
  }

  private saveWeightsForSampler(run: NativeRunRecord, op: NativeOperationRecord): void {
    const command = op.command as unknown as SaveWeightsForSamplerBodyT;
    const version = run.committedLearnerVersion;
    const learner = this.store.checkpoints.byStep(run.learnerModelId, version);
    if (!learner?.path) throw new Error(`learner version ${version} has no saved weights`);
    const { mode, model_alias: alias } = command.publication;
    const checkpointRef = { run_id: run.id, learner_version: version, checkpoint_id: learner.id };
    const common = { operation_id: op.id, kind: 'save_sampler', checkpoint: checkpointRef, training_session_id: run.id, publication_metrics: {} };
    if (mode === 'none') {
      const model = this.store.models.getById(run.learnerModelId)!;
      this.store.tx(() => this.finish(op, 'succeeded', {
        result: { ...common, lora: servedName(run.entity, model.project, model.name, version), generation_id: learner.id, lora_bytes: folderBytes(learner.path!) },
      }));
      return;
    }
    const target = this.publicationTarget(run, alias!);
    const step = (this.store.checkpoints.latest(target.id)?.step ?? 0) + 1;
    const dir = path.join(this.models.modelCheckpointDir(target.id), `step-${step}`);
    fs.mkdirSync(path.dirname(dir), { recursive: true });
    // The adapter only: AdamW's moments belong to the run (a model trained on from here starts a fresh AdamW). Its
    // files are the learner version's own, linked where the filesystem allows (checkpoint-files.ts).
    placeCheckpointFiles(learner.path, dir, [ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE], { staging: `${dir}.staging-${op.id}` });
    const checkpointId = crypto.randomUUID();
    this.store.tx(() => {
      this.store.checkpoints.insert({ id: checkpointId, modelId: target.id, step, metrics: learner.metrics, path: dir, createdAt: nowIso() });
      this.finish(op, 'succeeded', {
        result: { ...common, lora: servedName(target.entity, target.project, target.name, step), generation_id: checkpointId, lora_bytes: folderBytes(dir) },
      });
    });
  }

  private saveState(run: NativeRunRecord, op: NativeOperationRecord, ops: NativeOperationRecord[]): void {
    this.states.saveState(run, op, (result) => this.store.tx(() => this.finish(op, 'succeeded', { result })));
    this.states.dropReplaced(op, ops);
  }

  /** The saved state becomes the reserved learner version: committed exactly when its checkpoint row is stored. */
  private loadState(run: NativeRunRecord, op: NativeOperationRecord, ops: NativeOperationRecord[]): void {
    this.requireLearnerAtParent(run, op);
    const dropped = pendingGradients(ops.filter((o) => o.sequenceId < op.sequenceId));
    const { checkpoint, result } = this.states.loadState(run, op, ops);
    this.store.tx(() => {
      this.store.checkpoints.insert(checkpoint);
      this.store.nativeRuns.updateRun(run.id, { committedLearnerVersion: checkpoint.step });
      this.finish(op, 'succeeded', { result });
    });
    for (const o of dropped) this.dropInputs(o);
    this.dropSupersededMoments(run, checkpoint.step);
  }

  /** The model a sampler checkpoint is published to: the entity's model named by the alias, over the run's base. */
  private publicationTarget(run: NativeRunRecord, alias: string): ModelRecord {
    const base = (run.spec as { base_model: string }).base_model;
    const named = this.store.models.listByEntity(run.entity).filter((m) => m.name === alias && !isHiddenModel(m) && m.baseModel === base);
    if (named.length === 0) {
      throw new Error(`no model named "${alias}" over ${base} is registered for entity ${run.entity}: register it (POST /v1/preview/models) before publishing to it`);
    }
    if (named.length > 1) throw new Error(`model alias "${alias}" names ${named.length} models (projects ${named.map((m) => m.project).join(', ')}); rename one`);
    return named[0];
  }

  finish(op: NativeOperationRecord, status: 'succeeded' | 'failed' | 'cancelled', outcome: { result?: Record<string, unknown>; error?: Record<string, unknown> }): void {
    this.store.nativeRuns.updateOp(op.id, {
      status, executionEndedAt: nowIso(), result: outcome.result ?? null, error: outcome.error ?? null, eventCursor: op.eventCursor + 1,
    });
    // A learner transition that did not happen (failed, cancelled, also before it started) leaves its reserved version unused.
    if (status !== 'succeeded' && (op.kind === 'optim_step' || op.kind === 'load_state')) this.resyncVersions(op.runId);
    // An RL batch without gradient is still applied by the optim_step ART sends after it (startOptimStep): kept.
    const noGradient = op.kind === 'forward_backward' && !isRlForwardBackward(op) && (outcome.result as { produced_gradient?: boolean } | undefined)?.produced_gradient === false;
    if (status !== 'succeeded' || noGradient) this.dropInputs(op);
  }
}

function folderBytes(dir: string): number {
  let total = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    total += entry.isDirectory() ? folderBytes(p) : fs.statSync(p).size;
  }
  return total;
}

/** AdamW's settings of an optim_step for its training job (the learning rate travels with the job's data). */
function nativeOptimizer(o: OptimStepBodyT['optimizer']): NativeOptimizer {
  return { beta1: o.beta1, beta2: o.beta2, eps: o.eps, weight_decay: o.weight_decay, grad_clip_norm: o.grad_clip_norm };
}
