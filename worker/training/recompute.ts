// Activation recomputation ("gradient checkpointing") for one block of the network.
//
// TF.js keeps every tensor an op saves for its gradient until the backward pass: for a 0.5B model
// at 512 tokens that is ~230 MB per decoder layer (the [tokens, 4864] SwiGLU terms and LoRA
// products, three [heads * tokens, tokens] attention score tensors), 5.6 GB over 24 layers, more
// than the 4 GB wasm heap. A recomputed block saves only its input: its forward runs without
// recording, and its backward runs the forward again under a fresh gradient tape and
// differentiates it there. One more forward per block in exchange for one block's activations.
import * as tf from '@tensorflow/tfjs-core';

/** The parts of the TF.js engine (tfjs-core 4.22) this file touches. */
interface EngineInternals {
  state: { activeTape: unknown };
  gradients(f: () => tf.Tensor, xs: tf.Tensor[], dy?: tf.Tensor, allowNoGradients?: boolean): { value: tf.Tensor; grads: Array<tf.Tensor | undefined> };
}

/**
 * `block(x, constants)` whose gradients (for x and `variables`, the trainable variables the block
 * reads) are computed by running it again in the backward pass. `constants` are tensors the block
 * reads that have no gradient (masks, rotary tables): they are kept for the recomputation.
 */
export function recomputedInBackward(
  block: (x: tf.Tensor, constants: tf.Tensor[]) => tf.Tensor,
  x: tf.Tensor,
  constants: tf.Tensor[],
  variables: tf.Variable[],
): tf.Tensor {
  const op = tf.customGrad((...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
    const save = args[args.length - 1] as tf.GradSaveFunc;
    const input = args[0] as tf.Tensor;
    save([input, ...constants]);
    // A custom-gradient forward runs with the tape off and inside a tidy: nothing in it is kept.
    const value = block(input, constants);
    return {
      value,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [savedInput, ...savedConstants] = saved;
        const engine = tf.engine() as unknown as EngineInternals;
        // engine.gradients starts a new tape when none is being recorded (true during a backward
        // pass) by replacing `activeTape`, and clears it when done; the outer backward pass still
        // needs its own tape afterwards (it disposes the saved tensors listed there), so restore it.
        const outerTape = engine.state.activeTape;
        try {
          const xs = [savedInput, ...variables];
          const { value: again, grads } = engine.gradients(() => block(savedInput, savedConstants), xs, dy, true);
          again.dispose();
          return xs.map((t, i) => grads[i] ?? tf.zerosLike(t));
        } finally {
          engine.state.activeTape = outerTape;
        }
      },
    };
  });
  return op(x, ...variables);
}
