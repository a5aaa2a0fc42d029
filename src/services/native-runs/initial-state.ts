// N3's `initial_state` (docs/art.md, "Framings (decisions)"): a new run whose learner version 0 is a checkpoint this
// service made instead of the base model. The checkpoint is named by its id or by a served name, within the caller's entity;
// it must be a LoRA adapter over the run's base model with the spec's rank and target modules (the spec is what the
// run trains and what ART compares), and its files become the learner's step 0 (linked where the filesystem allows:
// src/runtime/checkpoint-files.ts): its adapter, and AdamW's moments when restore_optimizer. The run's jobs then
// continue from it as from any learner version, and deleting the run deletes its names for the files, never the
// checkpoint it came from.
import fs from 'node:fs';
import path from 'node:path';
import type { Store } from '../../store/sqlite/store.js';
import type { CheckpointRecord } from '../../store/records.js';
import { conflict, notFound, ValidationError } from '../../errors/domain-errors.js';
import { OPTIMIZER_STATE_FILE } from '../../runtime/optimizer-state.js';
import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, placeCheckpointFiles } from '../../runtime/checkpoint-files.js';
import { parseModelName } from '../model-names.js';
import { isHiddenModel } from '../hidden-models.js';
import { peftTargets } from './wire.js';
import type { N3InitialStateT } from '../../schemas/native-framings.js';

/** The checkpoint a new run starts from, and whether its moments come along. */
export interface InitialCheckpoint {
  checkpoint: CheckpointRecord & { path: string };
  restoreOptimizer: boolean;
}

type RunSpec = { base_model: string; lora_rank: number; lora_target_modules: string[] };

/**
 * The checkpoint `state` names for a new run of `spec` in `entity`, or null when it names the base weights (a served
 * name at step 0, or the latest of a model with no checkpoint yet: what inference would serve for it). 422 for an
 * artifact that is no served name, 404 for what this entity does not have, 409 for a checkpoint the run cannot
 * start from (another base, no adapter, another rank or targets, no moments to restore).
 */
export function findInitialCheckpoint(store: Store, entity: string, spec: RunSpec, state: N3InitialStateT): InitialCheckpoint | null {
  const { source } = state;
  let checkpoint: CheckpointRecord | null;
  let named: string;
  if (source.kind === 'service_checkpoint') {
    named = `checkpoint ${source.checkpoint_id}`;
    checkpoint = store.checkpoints.byId(source.checkpoint_id);
    const owner = checkpoint && store.models.getById(checkpoint.modelId);
    // Another entity's checkpoint is "not found", like a missing one.
    if (!checkpoint || !owner || owner.entity !== entity) throw notFound(`initial_state: ${named} not found`);
    if (owner.baseModel !== spec.base_model) throw conflict(`initial_state: ${named} is over base model ${owner.baseModel}, the spec's base_model is ${spec.base_model}`);
  } else {
    named = `artifact ${source.artifact}`;
    const ref = parseModelName(source.artifact.startsWith('wandb-artifact:') ? source.artifact : `wandb-artifact:///${source.artifact}`);
    if ('error' in ref || ref.kind !== 'trained') {
      const why = 'error' in ref ? ref.error : 'it names a base model (leave initial_state null to start from one)';
      throw new ValidationError([{ loc: ['body', 'initial_state', 'source', 'artifact'], msg: `not a served name <entity>/<project>/<name>[:step<N>|:v<N>|:latest]: ${why}`, type: 'value_error' }]);
    }
    const model = ref.entity === entity ? store.models.findByName(entity, ref.project, ref.name) : null;
    if (!model || isHiddenModel(model)) throw notFound(`initial_state: ${named} not found`);
    if (model.baseModel !== spec.base_model) throw conflict(`initial_state: ${named} is over base model ${model.baseModel}, the spec's base_model is ${spec.base_model}`);
    if (ref.step === 0) return null;
    checkpoint = ref.step === 'latest' ? store.checkpoints.latest(model.id) : store.checkpoints.byStep(model.id, ref.step);
    if (!checkpoint && ref.step === 'latest') return null;
    if (!checkpoint) throw notFound(`initial_state: ${named} not found (the model has no checkpoint at step ${ref.step})`);
  }
  const dir = checkpoint.path;
  if (!dir || !fs.existsSync(path.join(dir, ADAPTER_WEIGHTS_FILE)) || !fs.existsSync(path.join(dir, ADAPTER_CONFIG_FILE))) {
    throw conflict(`initial_state: ${named} holds no LoRA adapter (a run trains LoRA adapters; full weights cannot start one)`);
  }
  const config = JSON.parse(fs.readFileSync(path.join(dir, ADAPTER_CONFIG_FILE), 'utf8')) as { r?: unknown; target_modules?: unknown };
  const targets = Array.isArray(config.target_modules) ? config.target_modules.map(String).sort() : [];
  const wanted = peftTargets(spec.lora_target_modules).sort();
  if (config.r !== spec.lora_rank || targets.join(',') !== wanted.join(',')) {
    throw conflict(
      `initial_state: ${named} is a rank-${String(config.r)} adapter of ${targets.join(', ')}; the spec asks for rank ${spec.lora_rank} of ${wanted.join(', ')} ` +
      '(resolve with the checkpoint\'s rank and target modules)',
    );
  }
  if (state.restore_optimizer && !fs.existsSync(path.join(dir, OPTIMIZER_STATE_FILE))) {
    throw conflict(
      `initial_state: ${named} carries no optimizer moments (a publication holds the adapter only, and a run keeps the moments of its committed version alone): ` +
      'send restore_optimizer false to start a fresh AdamW',
    );
  }
  return { checkpoint: { ...checkpoint, path: dir }, restoreOptimizer: state.restore_optimizer };
}

/** Put the initial checkpoint's files in `dir` (the learner's step 0): the adapter, and the moments when restored. */
export function copyInitialCheckpoint(initial: InitialCheckpoint, dir: string): void {
  const files = [ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, ...(initial.restoreOptimizer ? [OPTIMIZER_STATE_FILE] : [])];
  placeCheckpointFiles(initial.checkpoint.path, dir, files);
}
