// Log-probabilities of trained targets, the quantity every loss here starts from.
import * as tf from '@tensorflow/tfjs-core';
import { microBatches, trainedPositions, type MicroBatch, type TrainSequence } from './data.js';
import { readAndDispose } from './losses.js';
import type { LlamaModel } from './model.js';
import { GraphLoraModel } from './graph/graph-model.js';

/** A model the loop trains: today's TF.js decoder, or the ONNX Runtime graph engine (LoRA). */
export type TrainingModel = LlamaModel | GraphLoraModel;

/**
 * log p(target) at the given rows only. The LM head is the largest GEMM at a big vocabulary,
 * and prompt positions need no logits, so they are dropped before it.
 */
export function logprobsAt(model: TrainingModel, mb: MicroBatch, at: { index: Int32Array; targets: Int32Array }, training: boolean, onEntropy?: (entropy: Float32Array) => void): tf.Tensor1D {
  if (model instanceof GraphLoraModel) return model.logprobsAt(mb, at, training, onEntropy);
  const hidden = model.hidden(mb.batch, training);
  const selected = at.index.length === mb.trainable.length ? hidden : (tf.gather(hidden, tf.tensor1d(at.index, 'int32')) as tf.Tensor2D);
  return model.tokenLogprobs(selected, at.targets, onEntropy);
}

/**
 * Per-sequence logprobs of the trained targets (index t holds ids[t + 1]; NaN where not trained),
 * without gradients.
 */
export function sequenceLogprobs(model: TrainingModel, sequences: TrainSequence[], tokenBudget: number): Float32Array[] {
  const out: Float32Array[] = sequences.map((s) => new Float32Array(s.ids.length - 1).fill(NaN));
  for (const mb of microBatches(sequences, sequences.map((_, i) => i), tokenBudget)) {
    if (mb.numTrainableTokens === 0) continue;
    const at = trainedPositions(mb);
    const lp = readAndDispose(tf.tidy(() => logprobsAt(model, mb, at, false)));
    at.index.forEach((_, j) => (out[at.sequenceIndex[j]][at.positionInSequence[j]] = lp[j]));
  }
  return out;
}
