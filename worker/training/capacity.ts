// Will a model fit? The wasm heap is capped at 4 GB and never shrinks, so a job that does not fit
// must be refused up front with a clear message, instead of aborting the wasm runtime mid-step.
import type { ModelConfig } from '../runtime/model-config.js';
import { countParameters } from './tensor-utils.js';

/** The wasm32 heap limit (getHeapMax() = 4294901760). */
export const WASM_HEAP_BYTES = 4_294_901_760;
/** Share of the heap the model's persistent tensors may take; the rest is activations and temporaries. */
const PERSISTENT_SHARE = 0.75;

/**
 * Bytes a job keeps for its whole duration: full fine-tuning holds weights, AdamW's two moments,
 * the accumulated gradients and their clipped copy (5 x 4 bytes per parameter); LoRA holds the
 * frozen base (4 bytes per parameter), a transposed copy of the LM head, and small adapters.
 */
export function persistentTrainingBytes(config: ModelConfig, mode: 'lora' | 'full'): number {
  const params = countParameters(config);
  return mode === 'full' ? params * 4 * 5 : (params + config.vocabSize * config.hiddenSize) * 4;
}

/** Throws a clear error when a wasm-backend job cannot fit in the heap. */
export function assertFitsWasmHeap(config: ModelConfig, mode: 'lora' | 'full'): void {
  const need = persistentTrainingBytes(config, mode);
  const budget = WASM_HEAP_BYTES * PERSISTENT_SHARE;
  if (need <= budget) return;
  const gb = (b: number) => (b / 1e9).toFixed(1);
  const hint = mode === 'full' ? '; use LoRA (mode "lora") for this model' : '; this model is too large to train on the wasm backend';
  throw new Error(
    `${mode === 'full' ? 'full fine-tuning' : 'LoRA training'} of a ${(countParameters(config) / 1e6).toFixed(0)}M-parameter model needs about ${gb(need)} GB of tensors, ` +
      `more than the wasm backend's ${gb(budget)} GB share of its 4 GB heap${hint}`,
  );
}

/**
 * An error from a training run, explained when the wasm runtime aborted (it then cannot be used
 * again in this process).
 */
export function explainTrainingError(err: unknown): Error {
  const message = err instanceof Error ? err.message : String(err);
  // A failed wasm allocation shows either as an abort or (when malloc's null result is written to)
  // as an out-of-bounds access inside the wasm backend.
  if (/^Aborted\(/.test(message) || (err instanceof Error && err.name === 'RuntimeError' && /Aborted|memory access out of bounds/.test(message))) {
    return new Error(
      'the TF.js wasm runtime aborted, most likely out of memory (its heap is capped at 4 GB); ' +
        'try a smaller micro-batch or LoRA. This process cannot train again and must be restarted.',
    );
  }
  return err instanceof Error ? err : new Error(message);
}
