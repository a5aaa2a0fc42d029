// Native training runs (`/v1/training/runs…`, ART's RemoteTrainingClient), as the API sees them: runs resolved
// by name and spec, commands admitted in sequence_id order and idempotent by request_id (native-runs/admission.ts),
// operations read, cancelled and their results released, runs deleted; native-runs/executor.ts runs them on Hearth's trainer.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Store } from '../../store/sqlite/store.js';
import { nowIso, type ModelRecord, type NativeOperationKind, type NativeOperationRecord, type NativeRunRecord } from '../../store/records.js';
import { conflict, invalid, notFound, notImplemented } from '../../errors/domain-errors.js';
import { admit, canonicalJson, commandFingerprint, pendingGradients } from './admission.js';
import { accumulationConflict, admitRlBatch } from './rl-batch.js';
import { NativeExecutor } from './executor.js';
import { copyInitialCheckpoint, type InitialCheckpoint } from './initial-state.js';
import { LEARNER_PROJECT } from '../hidden-models.js';
import { operationResponse, peftTargets, runResponse, TERMINAL_OPERATION_STATUSES } from './wire.js';
import type { BaseModelCatalog } from '../../models/base-models.js';
import type { ModelsService } from '../models.js';
import type { TrainingJobsService } from '../training-jobs.js';
import type { ForwardBackwardBodyT, ResolveRunBodyT, SaveWeightsForSamplerBodyT } from '../../schemas/native-training.js';

export class NativeRunsService {
  private readonly executor: NativeExecutor;

  constructor(
    private readonly store: Store,
    private readonly models: ModelsService,
    private readonly catalog: BaseModelCatalog,
    private readonly jobs: TrainingJobsService,
    private readonly dataRoot: string,
  ) {
    this.executor = new NativeExecutor(store, models, jobs, dataRoot);
  }

  /** At start: settle what a restart interrupted and start each run's next operation. */
  resume(): void {
    this.executor.resume();
  }

  // ---- runs ----

  /**
   * The run named `body.run_name`, made when there is none; a new run's learner version 0 is `initial` (N3's
   * initial_state, native-runs/initial-state.ts) when given, else the base model.
   */
  resolve(entity: string, body: ResolveRunBodyT, initial: InitialCheckpoint | null = null) {
    const spec = body.spec as Record<string, unknown>;
    const existing = this.store.nativeRuns.runByName(entity, body.run_name);
    if (existing) {
      if (canonicalJson(existing.spec) !== canonicalJson(spec)) {
        throw conflict(`training run "${body.run_name}" exists with another spec (${canonicalJson(existing.spec)}); nothing was changed`);
      }
      // ART's backend.close() closes the run at the end of every script; the next script resolves the same name
      // and must find it open (ART refuses a run that is not), so a closed run reopens where it stopped.
      if (existing.status === 'closing') throw conflict(`training run "${body.run_name}" is closing (an operation is finishing); resolve it again shortly`);
      if (existing.status === 'closed') this.store.nativeRuns.updateRun(existing.id, { status: 'open' });
      return runResponse(this.store.nativeRuns.runById(existing.id)!);
    }
    if (!this.catalog.get(body.spec.base_model)) {
      throw notFound(`Base model "${body.spec.base_model}" is not installed on this server (import it with "hearth models import")`);
    }
    peftTargets(body.spec.lora_target_modules);
    const id = crypto.randomUUID();
    const learner: ModelRecord = {
      id: crypto.randomUUID(), entity, project: LEARNER_PROJECT, name: id, baseModel: body.spec.base_model, runId: id, createdAt: nowIso(),
    };
    const run: NativeRunRecord = {
      id, entity, runName: body.run_name, spec, status: 'open', learnerModelId: learner.id, nextSequenceId: 0,
      projectedLearnerVersion: 0, committedLearnerVersion: 0, createdAt: nowIso(),
    };
    // The initial checkpoint's files first: its row, with the run's, says they are complete.
    const start = initial && { id: crypto.randomUUID(), modelId: learner.id, step: 0, metrics: initial.checkpoint.metrics, path: path.join(this.models.modelCheckpointDir(learner.id), 'step-0'), createdAt: nowIso() };
    if (start) copyInitialCheckpoint(initial, start.path);
    try {
      this.store.tx(() => {
        this.store.models.insert(learner);
        this.store.nativeRuns.insertRun(run);
        if (start) this.store.checkpoints.insert(start);
      });
    } catch (err) {
      // The rows could not be stored, so no row names the copy: it goes.
      if (start) fs.rmSync(path.dirname(start.path), { recursive: true, force: true });
      throw err;
    }
    return runResponse(run);
  }

  private requireRun(entity: string, runId: string): NativeRunRecord {
    const run = this.store.nativeRuns.run(entity, runId);
    if (!run) throw notFound(`Training run ${runId} not found`);
    return run;
  }

  get(entity: string, runId: string) {
    return runResponse(this.requireRun(entity, runId));
  }

  /** Commands not started are cancelled, a running one finishes, then the run is closed; it takes no more commands. */
  close(entity: string, runId: string) {
    const run = this.requireRun(entity, runId);
    if (run.status === 'open') {
      this.store.tx(() => {
        for (const op of this.store.nativeRuns.ops(run.id)) {
          if (op.status === 'admitted') this.executor.finish(op, 'cancelled', { error: { message: 'the run was closed before this operation started' } });
        }
        this.store.nativeRuns.updateRun(run.id, { status: 'closing' });
      });
      void this.executor.pump(run.id);
    }
    return runResponse(this.store.nativeRuns.runById(run.id)!);
  }

  /**
   * Delete a run with everything only it holds (docs/art.md "Deleting a run"): its rows (operations, results,
   * framing), its learner model with every learner version and the training jobs that made them, kept inputs and
   * saved states. What it published lives in the user's own model and stays. Refused (409, nothing deleted) while an
   * operation is admitted or running, or the learner has a training job in flight.
   */
  delete(entity: string, runId: string) {
    const run = this.requireRun(entity, runId);
    this.requireDeletable(run);
    return this.remove(run);
  }

  /**
   * Before `model` is deleted (ART's backend.delete): the runs that published into it and nowhere else are its
   * training history and go with it; all or none (409 naming the busy run). Returns how many went.
   */
  deleteRunsPublishingOnlyInto(model: ModelRecord): number {
    const prefix = `${model.entity}/${model.project}/${model.name}:step`;
    const servedByModel = (lora: string) => lora.startsWith(prefix) && /^\d+$/.test(lora.slice(prefix.length));
    const runs = this.store.nativeRuns.runsOf(model.entity).filter((run) => {
      const published = this.store.nativeRuns.ops(run.id)
        .filter((o) => o.kind === 'save_weights_for_sampler' && o.status === 'succeeded' && (o.command as { publication?: { mode?: string } }).publication?.mode !== 'none')
        .map((o) => String((o.result as { lora?: unknown } | null)?.lora ?? ''));
      return published.length > 0 && published.every(servedByModel);
    });
    for (const run of runs) this.requireDeletable(run);
    for (const run of runs) this.remove(run);
    return runs.length;
  }

  private requireDeletable(run: NativeRunRecord): void {
    const busy = this.store.nativeRuns.ops(run.id).filter((o) => o.status === 'admitted' || o.status === 'running');
    if (busy.length > 0 || run.status === 'closing') {
      throw conflict(`Training run ${run.id} has ${busy.length} operation(s) admitted or running (sequence_id ${busy.map((o) => o.sequenceId).join(', ') || 'none'}${run.status === 'closing' ? ', and is closing' : ''}); cancel them or wait for them to finish, then delete it. Nothing was deleted.`);
    }
    const activeJobs = this.store.jobs.activeForModel(run.learnerModelId).length;
    if (activeJobs > 0) throw conflict(`Training run ${run.id}'s learner has ${activeJobs} training job(s) in flight; retry once they have ended. Nothing was deleted.`);
  }

  private remove(run: NativeRunRecord) {
    const versions = this.store.checkpoints.all(run.learnerModelId).length;
    const states = this.store.nativeRuns.ops(run.id).filter((o) => o.kind === 'save_state' && o.status === 'succeeded').length;
    // The learner's row cascades to the run (native_runs.learner_model_id), its operations and framing, and the
    // learner's checkpoint rows and jobs. Rows go first: a crash before the files go leaves only orphan folders.
    this.store.models.delete(run.learnerModelId);
    for (const dir of [this.models.modelCheckpointDir(run.learnerModelId), path.join(this.dataRoot, run.id), path.join(this.dataRoot, 'states', run.id)]) {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    return { run_id: run.id, deleted: true as const, deleted_learner_versions: versions, deleted_states: states };
  }

  // ---- commands ----

  /**
   * `framing`: a command another client framing sent, already translated to `body` (native-runs/framing.ts): its
   * fingerprint is the sent body's, its batch kind and any refusal come from the translation.
   */
  submit(
    entity: string, runId: string, kind: NativeOperationKind, body: { request_id: string; sequence_id: number } & Record<string, unknown>,
    framing: { fingerprint: string; batchKind?: string; unsupported?: string } | null = null,
  ) {
    const run = this.requireRun(entity, runId);
    const ops = this.store.nativeRuns.ops(run.id);
    const measures = kind === 'forward_backward' || kind === 'forward';
    const batchKind = measures ? (framing?.batchKind ?? String((body.batch as { kind?: unknown } | undefined)?.kind)) : undefined;
    const fingerprint = framing?.fingerprint ?? commandFingerprint(body);
    const state = kind === 'save_state' ? { name: String(body.checkpoint_name), overwrite: body.overwrite === true } : kind === 'load_state' ? { ref: String(body.checkpoint) } : undefined;
    const decision = admit(run, ops, { kind, requestId: body.request_id, sequenceId: body.sequence_id, fingerprint, batchKind, state, unsupported: framing?.unsupported });
    if (decision.type === 'replay') return operationResponse(decision.op);
    if (decision.type === 'refuse') {
      const { status, message } = decision.refusal;
      throw status === 501 ? notImplemented(message) : status === 404 ? notFound(message) : conflict(message, { code: 'command_refused' });
    }
    // A forward keeps no gradient: there is nothing pending for it to mix with.
    if (measures) this.checkForwardBackward(body as unknown as ForwardBackwardBodyT, kind === 'forward' ? [] : ops);
    if (kind === 'save_weights_for_sampler') this.checkPublication(body as unknown as SaveWeightsForSamplerBodyT);
    const op: NativeOperationRecord = {
      id: crypto.randomUUID(), runId: run.id, requestId: body.request_id, fingerprint, sequenceId: body.sequence_id,
      kind, command: body, status: 'admitted', learnerParentVersion: decision.learnerParentVersion,
      reservedOutputLearnerVersion: decision.reservedOutputLearnerVersion, admittedAt: nowIso(), executionStartedAt: null,
      executionEndedAt: null, cancelRequested: false, eventCursor: 0, jobId: null, consumedBy: null, result: null, resultReleased: false, error: null,
    };
    this.store.tx(() => {
      this.store.nativeRuns.insertOp(op);
      this.store.nativeRuns.updateRun(run.id, {
        nextSequenceId: run.nextSequenceId + 1,
        ...(op.reservedOutputLearnerVersion !== null ? { projectedLearnerVersion: op.reservedOutputLearnerVersion } : {}),
      });
    });
    void this.executor.pump(run.id);
    return operationResponse(this.store.nativeRuns.op(run.id, op.id)!);
  }

  private checkForwardBackward(body: ForwardBackwardBodyT, ops: NativeOperationRecord[]): void {
    if (body.retain_packed_input) {
      throw notImplemented('retain_packed_input is not implemented by this server (no packed-input captures: packed_input_capture is always null)');
    }
    // Decoded here so that a malformed bundle is refused (422) before anything is stored; the executor decodes again.
    if (body.batch.kind === 'rl') admitRlBatch(body.batch, body.loss, (config) => this.jobs.unsupportedRlKeys(config));
    const mixed = accumulationConflict(pendingGradients(ops), body);
    if (mixed) throw notImplemented(mixed);
    if (body.batch.kind !== 'sft') return;
    if (body.loss.name !== 'cross_entropy') throw invalid(`sft batches take the cross_entropy loss, not ${JSON.stringify(body.loss.name)}`);
  }

  private checkPublication(body: SaveWeightsForSamplerBodyT): void {
    const { mode, model_alias: alias } = body.publication;
    if ((mode === 'none') !== (alias == null)) throw invalid('publication.model_alias is required exactly when publication.mode is not "none"');
    // Why each is refused: docs/art.md "Sampler weights".
    if (mode === 'merged_weights') {
      throw notImplemented('publication mode "merged_weights" is not implemented by this server: its inference serves a base model plus a LoRA adapter, not per-checkpoint full weights; "versioned_lora" serves the same outputs (the adapter applied at inference equals it merged, up to rounding)');
    }
    if (mode === 'external_lora') {
      throw notImplemented('publication mode "external_lora" is not implemented by this server: the publication names no destination to export the adapter to (only mode and model_alias); use "versioned_lora": the published checkpoint is a PEFT adapter folder on the server (HEARTH_HOME/checkpoints/{model_id}/step-{N})');
    }
  }

  // ---- operations ----

  private requireOp(entity: string, runId: string, operationId: string): NativeOperationRecord {
    const run = this.requireRun(entity, runId);
    const op = this.store.nativeRuns.op(run.id, operationId);
    if (!op) throw notFound(`Operation ${operationId} not found in training run ${runId}`);
    return op;
  }

  operation(entity: string, runId: string, operationId: string) {
    return operationResponse(this.requireOp(entity, runId, operationId));
  }

  /**
   * Not started: cancelled, nothing applied. Running: its job is stopped and it ends cancelled (an optim_step whose
   * job already wrote its checkpoint ends succeeded). Finished: only `cancel_requested` is set; a succeeded
   * forward_backward not yet applied by an optim_step is then left out of it (ART cancels the ones without gradient).
   */
  async cancel(entity: string, runId: string, operationId: string) {
    const op = this.requireOp(entity, runId, operationId);
    if (op.status === 'admitted') {
      this.store.tx(() => this.executor.finish(op, 'cancelled', { error: { message: 'cancelled before it started' } }));
      void this.executor.pump(op.runId);
    } else {
      this.store.nativeRuns.updateOp(op.id, { cancelRequested: true, eventCursor: op.eventCursor + 1 });
      if (op.status === 'succeeded' && op.kind === 'forward_backward' && op.consumedBy === null) this.executor.dropInputs(op);
      // The job may have just finished (409): its outcome then stands.
      if (op.status === 'running' && op.jobId) await this.jobs.cancel(entity, op.jobId).catch(() => undefined);
    }
    return operationResponse(this.store.nativeRuns.op(op.runId, op.id)!);
  }

  result(entity: string, runId: string, operationId: string) {
    const op = this.requireOp(entity, runId, operationId);
    if (op.status !== 'succeeded') throw conflict(`Operation ${operationId} is ${op.status}; only a succeeded operation has a result`);
    if (op.resultReleased || op.result === null) throw notFound(`The result of operation ${operationId} was released`);
    return { operation_id: op.id, kind: op.kind, result: op.result };
  }

  /** Drop the kept result (idempotent: releasing again with the same request_id answers the same). */
  release(entity: string, runId: string, operationId: string, requestId: string) {
    const op = this.requireOp(entity, runId, operationId);
    if (!TERMINAL_OPERATION_STATUSES.has(op.status)) throw conflict(`Operation ${operationId} is ${op.status}; its result can be released once it has finished`);
    if (op.status === 'succeeded' && !op.resultReleased) this.store.nativeRuns.updateOp(op.id, { resultReleased: true, eventCursor: op.eventCursor + 1 });
    return { operation_id: op.id, request_id: requestId, released: true as const };
  }
}
