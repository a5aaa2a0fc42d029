// Will a job fit? The wasm heap is capped at 4 GB and never shrinks, so a job that does not fit
// must be refused up front with a clear message, instead of aborting the wasm runtime mid-step.
//
// What lives in the heap: full fine-tuning keeps weights, AdamW moments and gradients there. LoRA on
// the ONNX Runtime path keeps its frozen base outside (frozen-linear.ts): only norms, biases and
// adapters are in the heap, the base's 2-D weights are plain JS memory (bounded by the machine's
// RAM instead). Either way a step's saved activations must fit beside them; when they would not,
// enough decoder layers are recomputed in the backward pass (recompute.ts) to make them fit.
import { totalmem } from 'node:os';
import type { ModelConfig } from '../../src/runtime/model-config.js';
import { countParameters, expectedWeightShapes } from './tensor-utils.js';

/** The wasm32 heap limit (getHeapMax() = 4294901760). */
export const WASM_HEAP_BYTES = 4_294_901_760;
/** Share of the heap the model's persistent tensors may take; the rest is activations and temporaries. */
const PERSISTENT_SHARE = 0.75;
/** Share of the heap a step may use in all (the rest absorbs allocator fragmentation). */
const USABLE_SHARE = 0.9;

/** Where a LoRA job's frozen 2-D weights are: TF.js tensors in the heap, or JS memory outside it. */
export type FrozenPlacement = 'heap' | 'outside-heap';
export type TrainingMode = 'lora' | 'full';

/** Parameters in 2-D weights (Linear layers, embedding, untied head): what a frozen base keeps outside the heap. */
export function matrixParameters(config: ModelConfig): number {
  let n = 0;
  for (const shape of expectedWeightShapes(config).values()) if (shape.length === 2) n += shape[0] * shape[1];
  return n;
}

/**
 * Heap bytes a job keeps for its whole duration: full fine-tuning holds weights, AdamW's two
 * moments, the accumulated gradients and their clipped copy (5 x 4 bytes per parameter); LoRA with
 * the base in the heap holds it (4 bytes per parameter), a transposed copy of the LM head, and
 * small adapters; LoRA with the base outside holds only norms and biases (and the adapters).
 * Adapters are not counted (rank 8 on every projection is ~1% of the base).
 */
export function persistentTrainingBytes(config: ModelConfig, mode: TrainingMode, frozen: FrozenPlacement = 'heap'): number {
  const params = countParameters(config);
  if (mode === 'full') return params * 4 * 5;
  if (frozen === 'outside-heap') return (params - matrixParameters(config)) * 4;
  return (params + config.vocabSize * config.hiddenSize) * 4;
}

/**
 * Bytes one decoder layer's forward keeps for the backward pass at `rows` x `length` tokens: an
 * estimate fitted to TF.js 4.22 with LoRA on every projection (at Qwen2.5-0.5B's widths, 1 x 128
 * keeps 56 MB per layer and 1 x 256 keeps 123 MB; test/unit/training-capacity.test.ts checks it):
 * per token about 24 [d]-wide and 16 [ffn]-wide tensors (projection inputs and outputs, norms,
 * rotary terms, LoRA products, the SwiGLU terms; an add saves both its inputs), and six
 * [heads, length, length] attention tensors per row.
 */
export function layerActivationBytes(config: ModelConfig, rows: number, length: number): number {
  const tokens = rows * length;
  return 4 * (tokens * (24 * config.hiddenSize + 16 * config.intermediateSize) + 6 * rows * config.numHeads * length * length);
}

/** Bytes a training forward keeps for its backward when no layer is recomputed. */
export function savedActivationBytes(config: ModelConfig, rows: number, length: number): number {
  return config.numLayers * layerActivationBytes(config, rows, length);
}

/**
 * Bytes of saved activations a step may keep without recomputing: a third of what the heap has
 * left beside the persistent tensors. Saved tensors are only freed when the whole backward pass
 * ends, so the backward's gradients and temporaries, a recomputed layer and the allocator's
 * fragmentation come on top: at 0.5B x 512 tokens, keeping six layers (1.75 GB by
 * layerActivationBytes) grew the heap to 3.0 GB, too close to its 4.29 GB cap for a whole job.
 */
export function recomputeBudgetBytes(config: ModelConfig, mode: TrainingMode, frozen: FrozenPlacement): number {
  return Math.max(0, (WASM_HEAP_BYTES * USABLE_SHARE - persistentTrainingBytes(config, mode, frozen)) / 3);
}

/**
 * How many decoder layers a step at `rows` x `length` recomputes in its backward pass: the fewest
 * that bring the other layers' saved activations under recomputeBudgetBytes (each recomputed layer
 * costs one more forward of that layer).
 */
export function recomputedLayerCount(config: ModelConfig, mode: TrainingMode, frozen: FrozenPlacement, rows: number, length: number): number {
  const perLayer = layerActivationBytes(config, rows, length);
  const over = savedActivationBytes(config, rows, length) - recomputeBudgetBytes(config, mode, frozen);
  return over <= 0 ? 0 : Math.min(config.numLayers, Math.ceil(over / perLayer));
}

const gb = (b: number) => (b / 1e9).toFixed(1);

/**
 * Throws a clear error when a wasm-backend job cannot fit: its persistent tensors in the heap, a
 * micro-batch of `microBatchTokens` in one row with its layers recomputed beside them (and, unless
 * the LM head is the fused ONNX Runtime op, its [tokens, vocab] logits: the reference path holds
 * about five copies at the backward's peak), and (base outside the heap) the frozen base plus a
 * full heap in the machine's memory.
 */
export function assertFitsWasmHeap(
  config: ModelConfig,
  mode: TrainingMode,
  opts: { frozen?: FrozenPlacement; microBatchTokens?: number; fusedHead?: boolean; totalMemoryBytes?: number } = {},
): void {
  const frozen = mode === 'lora' ? (opts.frozen ?? 'heap') : 'heap';
  const what = `${mode === 'full' ? 'full fine-tuning' : 'LoRA training'} of a ${(countParameters(config) / 1e6).toFixed(0)}M-parameter model`;
  const persistent = persistentTrainingBytes(config, mode, frozen);
  const budget = WASM_HEAP_BYTES * PERSISTENT_SHARE;
  if (persistent > budget) {
    const hint = mode === 'full' ? '; use LoRA (mode "lora") for this model' : '; this model is too large to train on the wasm backend';
    throw new Error(`${what} needs about ${gb(persistent)} GB of tensors, more than the wasm backend's ${gb(budget)} GB share of its 4 GB heap${hint}`);
  }
  if (opts.microBatchTokens !== undefined) {
    const tokens = opts.microBatchTokens;
    // Recomputed: every layer's input, plus one layer's activations and its backward's temporaries.
    const logits = opts.fusedHead ? 0 : 5 * tokens * config.vocabSize * 4;
    const step = config.numLayers * tokens * config.hiddenSize * 4 + 3 * layerActivationBytes(config, 1, tokens) + logits;
    if (persistent + step > WASM_HEAP_BYTES * USABLE_SHARE) {
      throw new Error(
        `${what} at ${tokens} tokens per micro-batch needs about ${gb(persistent + step)} GB of the wasm backend's 4 GB heap ` +
          `even with its layers recomputed; use a smaller micro-batch or shorter sequences`,
      );
    }
  }
  if (frozen === 'outside-heap') {
    const machine = opts.totalMemoryBytes ?? totalmem();
    const need = matrixParameters(config) * 4 + WASM_HEAP_BYTES;
    if (need > machine) {
      throw new Error(
        `${what} needs about ${gb(need)} GB of memory (its frozen base in f32 and the wasm backend's 4 GB heap), ` +
          `more than this machine's ${gb(machine)} GB`,
      );
    }
  }
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
