// Resolve an inference model name, within the caller's entity, to what a worker loads:
// base weights and, for a trained checkpoint, the LoRA adapter folder on top of them.
import type { Store } from '../store/sqlite/store.js';
import type { BaseModelCatalog } from '../models/base-models.js';
import { parseModelName } from './model-names.js';
import { notFound } from '../errors/domain-errors.js';
import { isHiddenModel } from './hidden-models.js';
import type { InferenceTask } from '../protocol/messages.js';

/** OpenAI's code for an unknown model, which its SDKs and clients test for. */
const MODEL_NOT_FOUND = { code: 'model_not_found', param: 'model' };

export type ResolvedModel = NonNullable<InferenceTask['model']>;

export function resolveModel(store: Store, catalog: BaseModelCatalog, entity: string, name: string): ResolvedModel {
  const ref = parseModelName(name);
  if ('error' in ref) throw notFound(`The model \`${name}\` does not exist: ${ref.error}`, MODEL_NOT_FOUND);
  if (ref.kind === 'base') {
    const base = catalog.get(ref.id);
    if (!base) throw notFound(`The model \`${name}\` does not exist on this server`, MODEL_NOT_FOUND);
    return { baseModel: base.id, baseModelDir: base.dir, adapterDir: null, name };
  }
  // Another entity's model is "not found", like a missing one.
  const model = ref.entity === entity ? store.models.findByName(entity, ref.project, ref.name) : null;
  // A native run's learner is internal: its runs publish what they serve with save_weights_for_sampler.
  if (!model || isHiddenModel(model)) throw notFound(`The model \`${name}\` does not exist`, MODEL_NOT_FOUND);
  const base = catalog.get(model.baseModel);
  if (!base) throw notFound(`The base model \`${model.baseModel}\` of \`${name}\` is no longer installed`, MODEL_NOT_FOUND);
  // A model with no trained checkpoint serves its base weights (step 0): ART's first rollouts come first.
  if (ref.step === 0) return { baseModel: base.id, baseModelDir: base.dir, adapterDir: null, name };
  const checkpoint = ref.step === 'latest' ? store.checkpoints.latest(model.id) : store.checkpoints.byStep(model.id, ref.step);
  if (!checkpoint && ref.step !== 'latest') throw notFound(`The model \`${name}\` has no checkpoint at step ${ref.step}`, MODEL_NOT_FOUND);
  return { baseModel: base.id, baseModelDir: base.dir, adapterDir: checkpoint?.path ?? null, name };
}
