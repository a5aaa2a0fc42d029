// One optimizer step: gradients summed over micro-batches (gradient accumulation), global-norm
// clipping, AdamW update: in TF.js, or on the graph engine's device (graph/device-adamw.ts). Losses
// are weighted sums, so summing micro-batch gradients gives the gradient of the whole step's loss.
import * as tf from '@tensorflow/tfjs-core';
import type { MicroBatch } from './data.js';
import { clipByGlobalNorm, type AdamW } from './optimizer.js';
import { computeProgressed } from '../../src/runtime/compute-progress.js';
import { faultDelayBlocking } from '../../src/runtime/fault-points.js';
import { DeviceAdamW } from './graph/device-adamw.js';
import { trimFreedMemory } from './graph/freed-memory.js';

/** Builds the scalar loss of one micro-batch (inside the gradient tape). */
export type MicroBatchLoss = (mb: MicroBatch) => tf.Scalar;

export interface StepOutcome {
  /** Sum over micro-batches of the loss values (= the step's loss). */
  loss: number;
  /** Global gradient norm before clipping. */
  gradNorm: number;
}

export interface StepOptions {
  learningRate: number;
  maxGradNorm: number;
  /**
   * Awaited between two micro-batches (outside the gradient tape): the loop yields to the worker's event loop there,
   * so a cancel that arrived meanwhile stops the step (by throwing) instead of waiting for its end: an 8B step of
   * eight micro-batches on a CPU is a quarter of an hour.
   */
  betweenMicroBatches?: () => Promise<void>;
}

/**
 * Run `each` on every micro-batch in order, one at a time: `between` is awaited between two (outside any gradient
 * tape: the loop yields there and may stop by throwing), and each one counts as compute progress for the worker's
 * pulse thread (worker/pulse.ts). The fault point `training-micro-batch` is reached before each.
 */
export async function forEachMicroBatch(batches: MicroBatch[], between: (() => Promise<void>) | undefined, each: (mb: MicroBatch) => void): Promise<void> {
  for (const [i, mb] of batches.entries()) {
    if (i > 0) await between?.();
    faultDelayBlocking('training-micro-batch');
    each(mb);
    computeProgressed();
    trimFreedMemory(); // what the micro-batch freed goes back to the kernel (graph/freed-memory.ts says why)
  }
}

/** TF.js's engine state that a throwing tf.variableGrads leaves behind (tfjs-core's engine.ts, `gradients`). */
interface TapeState {
  state: { activeTape: { saved?: tf.Tensor[] }[] | null; gradientDepth: number };
}

/**
 * tf.variableGrads, leaving nothing behind when `f` or the backward throws (a cancel that stops a micro-batch
 * between two ONNX Runtime runs: src/runtime/compute-cancel.ts). TF.js ends its tape then but keeps the forward's
 * value and the tensors its ops saved for the backward (it frees those only after a backward that completes), for
 * the life of the worker: the enclosing tidy frees the value, and the saved tensors are freed here as TF.js frees
 * them after a backward.
 */
function variableGradsOrNothing(f: () => tf.Scalar, vars: tf.Variable[]): { value: tf.Scalar; grads: tf.NamedTensorMap } {
  return tf.tidy(() => {
    try {
      return tf.variableGrads(f, vars);
    } catch (err) {
      const engine = tf.engine() as unknown as TapeState;
      if (engine.state.gradientDepth === 0 && engine.state.activeTape) {
        for (const node of engine.state.activeTape) for (const t of node.saved ?? []) t.dispose();
        engine.state.activeTape = null;
      }
      throw err;
    }
  });
}

export async function optimizerStep(optimizer: AdamW | DeviceAdamW, batches: MicroBatch[], lossOf: MicroBatchLoss, opts: StepOptions): Promise<StepOutcome> {
  if (optimizer instanceof DeviceAdamW) return deviceOptimizerStep(optimizer, batches, lossOf, opts);
  const vars = optimizer.variables;
  let summed: tf.Tensor[] | null = null;
  let loss = 0;
  try {
    await forEachMicroBatch(batches, opts.betweenMicroBatches, (mb) => {
      const { value, grads } = variableGradsOrNothing(() => lossOf(mb), vars);
      loss += value.dataSync()[0];
      value.dispose();
      const ordered = vars.map((v) => {
        const g = grads[v.name];
        if (!g) throw new Error(`no gradient for variable ${v.name}`);
        return g;
      });
      if (summed === null) {
        summed = ordered;
      } else {
        const previous: tf.Tensor[] = summed;
        summed = previous.map((acc, j) => tf.add(acc, ordered[j]));
        tf.dispose(previous);
        tf.dispose(ordered);
      }
    });
  } catch (err) {
    if (summed) tf.dispose(summed); // a cancelled or failed step leaves no gradients behind
    throw err;
  }
  if (summed === null) throw new Error('optimizer step without micro-batches');
  const { grads: clipped, norm } = clipByGlobalNorm(summed, opts.maxGradNorm);
  optimizer.apply(clipped, opts.learningRate);
  tf.dispose(summed);
  if (clipped !== summed) tf.dispose(clipped);
  return { loss, gradNorm: norm };
}

/**
 * The same step with the optimizer on the graph engine's device (graph/device-adamw.ts): the tape differentiates
 * the optimizer's anchor, each micro-batch's custom gradient adds the adapters' gradients to the optimizer's sum
 * there, and the clipping and update run there too.
 */
async function deviceOptimizerStep(optimizer: DeviceAdamW, batches: MicroBatch[], lossOf: MicroBatchLoss, opts: StepOptions): Promise<StepOutcome> {
  if (batches.length === 0) throw new Error('optimizer step without micro-batches');
  let loss = 0;
  try {
    await forEachMicroBatch(batches, opts.betweenMicroBatches, (mb) => {
      const { value, grads } = variableGradsOrNothing(() => lossOf(mb), [optimizer.anchor]);
      loss += value.dataSync()[0];
      tf.dispose([value, ...Object.values(grads)]);
    });
    return { loss, gradNorm: optimizer.step(opts.learningRate, opts.maxGradNorm).gradNorm };
  } finally {
    optimizer.discardGradients(); // after a failed micro-batch; empty after a step
  }
}
