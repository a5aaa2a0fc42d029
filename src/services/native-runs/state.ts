// A native run's saved states, and the commands that are not training jobs of their own (docs/art.md "States"):
// - save_state names a snapshot of the committed learner version: its adapter and AdamW's moments, copied to
//   HEARTH_HOME/native-runs/states/{run}/{operation}/. The save_state operation row is the state's record (its
//   name, version, where its files are), so states survive a restart with the operations that made them.
// - load_state restores a saved state's adapter as learner version parent + 1 (a checkpoint of the learner, like an
//   optim_step's), with the saved moments when restore_optimizer, else none (the next optim_step starts a fresh
//   AdamW). Gradients pending before it are dropped: they were measured at weights the learner no longer has.
// - forward measures like forward_backward (the same measuring job) and keeps nothing.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Store } from '../../store/sqlite/store.js';
import { nowIso, type NativeOperationRecord, type NativeRunRecord } from '../../store/records.js';
import { decodeOptimizerState, encodeOptimizerState, freshOptimizerState, OPTIMIZER_STATE_FILE } from '../../runtime/optimizer-state.js';
import { decodeSafetensors } from '../../runtime/safetensors.js';
import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, placeCheckpointFiles } from '../../runtime/checkpoint-files.js';
import type { AdmissionRefusal, CommandInput } from './admission.js';
import type { ModelsService } from '../models.js';
import type { LoadStateBodyT, SaveStateBodyT } from '../../schemas/native-training.js';
import { servedName } from '../../domain/served-names.js';


const GONE: ReadonlySet<string> = new Set(['failed', 'cancelled']);

const stateName = (op: NativeOperationRecord) => (op.command as unknown as SaveStateBodyT).checkpoint_name;

/**
 * The save_state operation a reference names among `ops` (a state's name or its checkpoint_id, which is that
 * operation's id): the latest not failed or cancelled save_state of that name. A state replaced by a later save of
 * the same name (overwrite) is not found by its old id.
 */
export function findSavedState(ops: NativeOperationRecord[], ref: string): NativeOperationRecord | null {
  const saves = ops.filter((o) => o.kind === 'save_state' && !GONE.has(o.status));
  const byId = saves.find((o) => o.id === ref);
  const name = byId ? stateName(byId) : ref;
  const latest = saves.filter((o) => stateName(o) === name).sort((a, b) => b.sequenceId - a.sequenceId)[0] ?? null;
  return byId && latest !== byId ? null : latest;
}

/** Admission rules of save_state and load_state (native-runs/admission.ts asks; nothing is stored when refused). */
export function stateRefusal(ops: NativeOperationRecord[], input: CommandInput, parentVersion: number): AdmissionRefusal | null {
  if (input.kind === 'save_state') {
    if (parentVersion === 0) return { status: 409, message: 'save_state needs a trained learner version: learner version 0 is the base model (run an optim_step first)' };
    const name = input.state?.name ?? '';
    if (!input.state?.overwrite && findSavedState(ops, name)) {
      return { status: 409, message: `a state named ${JSON.stringify(name)} is already saved in this run (send overwrite: true to replace it); nothing was applied` };
    }
  }
  if (input.kind === 'load_state' && !findSavedState(ops, input.state?.ref ?? '')) {
    return { status: 404, message: `no saved state ${JSON.stringify(input.state?.ref)} in this run (save_state names one; a failed or cancelled save_state saved nothing); nothing was applied` };
  }
  return null;
}

/** A forward's result from what a forward_backward of its batch would answer, without the gradient (ART's ForwardResult). */
export function forwardResult(measured: Record<string, unknown>): Record<string, unknown> {
  const { produced_gradient: _dropped, ...rest } = measured;
  return { ...rest, kind: 'forward' };
}

function fileBytes(file: string): number {
  return fs.existsSync(file) ? fs.statSync(file).size : 0;
}

export class NativeStates {
  constructor(
    private readonly store: Store,
    private readonly models: ModelsService,
    private readonly dataRoot: string,
  ) {}

  /** Where a save_state operation keeps its state. */
  stateDir(op: NativeOperationRecord): string {
    return path.join(this.dataRoot, 'states', op.runId, op.id);
  }

  /** Relative to HEARTH_HOME, as results name it. */
  private shown(file: string): string {
    return path.relative(path.dirname(this.dataRoot), file).split(path.sep).join('/');
  }

  /** Copy the committed learner version into the state's folder; the caller finishes the operation with this result. */
  saveState(run: NativeRunRecord, op: NativeOperationRecord, finish: (result: Record<string, unknown>) => void): void {
    const version = run.committedLearnerVersion;
    const source = this.store.checkpoints.byStep(run.learnerModelId, version);
    if (!source?.path) throw new Error(`learner version ${version} has no saved weights`);
    const adapter = decodeSafetensors(fs.readFileSync(path.join(source.path, ADAPTER_WEIGHTS_FILE))).tensors;
    const optimizerFile = path.join(source.path, OPTIMIZER_STATE_FILE);
    // A version without moments (an older checkpoint, or one a load_state without optimizer made) saves fresh ones.
    const optimizer = fs.existsSync(optimizerFile) ? fs.readFileSync(optimizerFile) : encodeOptimizerState(freshOptimizerState());
    decodeOptimizerState(optimizer, adapter); // refuse to save a damaged state
    const dir = this.stateDir(op);
    placeCheckpointFiles(source.path, dir, [ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE], { written: { [OPTIMIZER_STATE_FILE]: optimizer } });
    finish({
      operation_id: op.id, kind: 'save_state', checkpoint: { run_id: run.id, learner_version: version, checkpoint_id: op.id },
      lora: this.shown(dir), training_session_id: run.id, generation_id: source.id,
      lora_bytes: fileBytes(path.join(dir, ADAPTER_WEIGHTS_FILE)) + fileBytes(path.join(dir, ADAPTER_CONFIG_FILE)),
      optimizer_state: this.shown(path.join(dir, OPTIMIZER_STATE_FILE)), optimizer_bytes: optimizer.length, metrics: source.metrics,
    });
  }

  /** After a save that replaced a state of the same name: the replaced one's files go. */
  dropReplaced(op: NativeOperationRecord, ops: NativeOperationRecord[]): void {
    for (const older of ops) {
      if (older.kind === 'save_state' && older.id !== op.id && older.sequenceId < op.sequenceId && stateName(older) === stateName(op)) {
        fs.rmSync(this.stateDir(older), { recursive: true, force: true });
      }
    }
  }

  /**
   * Write the saved state as the learner's checkpoint `reserved` (the caller checked the learner is at the parent
   * version) and return the checkpoint row and result; the caller stores both with the operation in one transaction,
   * so the version is committed exactly when its row exists.
   */
  loadState(run: NativeRunRecord, op: NativeOperationRecord, ops: NativeOperationRecord[]) {
    const command = op.command as unknown as LoadStateBodyT;
    const saved = findSavedState(ops.filter((o) => o.sequenceId < op.sequenceId), command.checkpoint);
    if (!saved || saved.status !== 'succeeded') throw new Error(`state ${JSON.stringify(command.checkpoint)} was not saved (its save_state did not succeed)`);
    const from = this.stateDir(saved);
    const adapter = decodeSafetensors(fs.readFileSync(path.join(from, ADAPTER_WEIGHTS_FILE))).tensors;
    const optimizer = command.restore_optimizer ? fs.readFileSync(path.join(from, OPTIMIZER_STATE_FILE)) : null;
    if (optimizer) decodeOptimizerState(optimizer, adapter); // a damaged state is refused before anything changes
    const version = op.reservedOutputLearnerVersion!;
    const dir = path.join(this.models.modelCheckpointDir(run.learnerModelId), `step-${version}`);
    // No row names this step (the learner is at the parent version): a folder there is what a crash left.
    placeCheckpointFiles(from, dir, [ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE], {
      written: optimizer ? { [OPTIMIZER_STATE_FILE]: optimizer } : {}, staging: path.join(path.dirname(dir), `.step-${version}.load-${op.id}`),
    });
    const learner = this.store.models.getById(run.learnerModelId)!;
    const checkpoint = {
      id: crypto.randomUUID(), modelId: learner.id, step: version,
      metrics: ((saved.result as { metrics?: Record<string, number> } | null)?.metrics ?? {}), path: dir, createdAt: nowIso(),
    };
    const result = {
      operation_id: op.id, kind: 'load_state', checkpoint: { run_id: run.id, learner_version: version, checkpoint_id: checkpoint.id },
      lora: servedName(run.entity, learner.project, learner.name, version), training_session_id: run.id, generation_id: checkpoint.id,
      lora_bytes: fileBytes(path.join(dir, ADAPTER_WEIGHTS_FILE)) + fileBytes(path.join(dir, ADAPTER_CONFIG_FILE)), optimizer_restored: optimizer !== null,
    };
    return { checkpoint, result };
  }
}
