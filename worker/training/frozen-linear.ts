// Frozen base weights kept outside the wasm heap (LoRA on the ONNX Runtime path).
//
// The wasm32 heap is capped at 4 GB; a 0.5B model's frozen base (1.98 GB f32) inside it leaves too
// little for a step's activations. So for LoRA the frozen matrices stay plain Float32Arrays in JS
// memory, in their Hugging Face layout [out, in] (the caller's arrays: no copy is made), and every
// product with them is a custom-gradient op on ONNX Runtime (MLAS) that reads the activation from
// the heap in place and the weight from JS memory:
//   forward   y  = x  @ W^T     FusedMatMul(transB = 1)
//   backward  dx = dy @ W       FusedMatMul
// No dW is ever formed: the weights are frozen. The embedding lookup is a row copy in JS.
import * as tf from '@tensorflow/tfjs-core';
import { floats, newOutput } from './heap-views.js';
import { floatTensor, matMulGraph } from './ort-compute.js';
import type { DeviceFrozenProducts } from './device-products.js';

/**
 * Where the frozen products run: null = ONNX Runtime on the CPU (MLAS, weights read from JS memory in place);
 * set by the training worker for a GPU device (device-products.ts: weights resident in GPU memory).
 */
let deviceProducts: DeviceFrozenProducts | null = null;
export function setFrozenProductsDevice(products: DeviceFrozenProducts | null): void {
  deviceProducts = products;
}
export function frozenProductsDevice(): DeviceFrozenProducts | null {
  return deviceProducts;
}

/** A frozen 2-D weight in the Hugging Face layout: `rows` x `cols` = [out, in] (or [vocab, d]). */
export interface FrozenMatrix {
  data: Float32Array;
  rows: number;
  cols: number;
}

/** y [n, out] = x [n, in] @ W^T for a frozen W [out, in], differentiable in x only. */
export function frozenLinear(x: tf.Tensor2D, w: FrozenMatrix): tf.Tensor2D {
  const [n, inDim] = x.shape;
  if (inDim !== w.cols) throw new Error(`frozenLinear: input [${x.shape}] does not match weight [${w.rows}, ${w.cols}]`);
  const flops = 2 * n * w.rows * w.cols;
  const op = tf.customGrad((...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
    const input = args[0] as tf.Tensor2D;
    const out = newOutput([n, w.rows]);
    if (n > 0) {
      // The output's view first: its allocation may grow the heap and detach older views.
      const y = out.fill();
      if (deviceProducts) deviceProducts.forward(floats(input), n, w, y);
      else matMulGraph(false, true, flops).run(
        { A: floatTensor(floats(input), [1, n, inDim]), B: floatTensor(w.data, [1, w.rows, w.cols]) },
        { Y: floatTensor(y, [1, n, w.rows]) },
      );
    }
    return {
      value: out.tensor(),
      gradFunc: (dy: tf.Tensor) => {
        const dxOut = newOutput([n, inDim]);
        if (n > 0) {
          const dx = dxOut.fill();
          if (deviceProducts) deviceProducts.backward(floats(dy), n, w, dx);
          else matMulGraph(false, false, flops).run(
            { A: floatTensor(floats(dy), [1, n, w.rows]), B: floatTensor(w.data, [1, w.rows, w.cols]) },
            { Y: floatTensor(dx, [1, n, inDim]) },
          );
        }
        return [dxOut.tensor()];
      },
    };
  });
  return op(x) as tf.Tensor2D;
}

/** Rows `ids` of a frozen table [vocab, d] as a new [ids.length, d] tensor (the embedding lookup). */
export function gatherFrozenRows(table: FrozenMatrix, ids: Int32Array): tf.Tensor2D {
  const d = table.cols;
  const out = new Float32Array(ids.length * d);
  ids.forEach((id, i) => {
    if (!(id >= 0 && id < table.rows)) throw new Error(`token id ${id} is outside the vocabulary (${table.rows})`);
    out.set(table.data.subarray(id * d, (id + 1) * d), i * d);
  });
  return tf.tensor2d(out, [ids.length, d]);
}
