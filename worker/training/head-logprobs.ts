// The LM head fused with the token log-softmax, on ONNX Runtime:
//   logprob_i = (h_i . W[t_i]) - logsumexp_v (h_i . W[v])      h [n, d], W [vocab, d]
// computed over vocabulary chunks of W's rows, so the [n, vocab] logits (64 MB per copy at
// 512 tokens x 32k, 300 MB at 512 x 152k) never exist as TF.js tensors: the forward keeps one
// logsumexp per row and chunk, the backward recomputes each chunk's logits (one extra head GEMM,
// cheaper than writing and re-reading them) and turns them into dh and dW at once:
//   dlogits = dy * (onehot - softmax);  dh = dlogits @ W;  dW = dlogits^T @ h.
// The -dy * softmax part runs in ONNX Runtime per chunk; the one-hot part touches one row of W
// per token and is added here. Same math as losses.ts tokenLogprobs on model.ts logits (the
// reference path, test/unit/training-ort.test.ts compares them).
// A frozen head may also be a FrozenMatrix outside the wasm heap (frozen-linear.ts): it is read in
// place the same way.
import * as tf from '@tensorflow/tfjs-core';
import { frozenProductsDevice, type FrozenMatrix } from './frozen-linear.js';
import { floats, newOutput } from './heap-views.js';
import { floatTensor, headBackwardGraph, headForwardGraph } from './ort-compute.js';

/**
 * Rows of W per chunk: a [512 x 4096] logits chunk is 8 MB, small enough to stay in cache while
 * ONNX Runtime reduces it; GEMMs with a 32k-wide output ran 3-10x slower than chunked ones here.
 */
export const HEAD_CHUNK_ROWS = 4096;

/** Chunk boundaries [start, end) over `rows`. */
function chunks(rows: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let start = 0; start < rows; start += HEAD_CHUNK_ROWS) out.push([start, Math.min(rows, start + HEAD_CHUNK_ROWS)]);
  return out;
}

interface ForwardResult {
  logprobs: Float32Array;
  lse: Float32Array;
  entropy: Float32Array | null;
}

function forward(h: Float32Array, w: Float32Array, n: number, d: number, vocab: number, targets: Int32Array, withEntropy: boolean, onDevice: FrozenMatrix | null): ForwardResult {
  const parts = chunks(vocab);
  const chunkLse = new Float32Array(parts.length * n);
  const chunkE = withEntropy ? new Float32Array(parts.length * n) : null;
  const graph = headForwardGraph(withEntropy);
  const hT = floatTensor(h, [n, d]);
  const device = onDevice ? frozenProductsDevice() : null;
  parts.forEach(([start, end], c) => {
    if (device) return device.headForward(onDevice!, start, end, h, n, chunkLse.subarray(c * n, (c + 1) * n), chunkE?.subarray(c * n, (c + 1) * n) ?? null);
    const outputs = { LSE: floatTensor(chunkLse.subarray(c * n, (c + 1) * n), [n, 1]) };
    if (chunkE) Object.assign(outputs, { E: floatTensor(chunkE.subarray(c * n, (c + 1) * n), [n, 1]) });
    graph.run({ H: hT, W: floatTensor(w.subarray(start * d, end * d), [end - start, d]) }, outputs);
  });
  const lse = new Float32Array(n);
  const logprobs = new Float32Array(n);
  const entropy = chunkE ? new Float32Array(n) : null;
  for (let i = 0; i < n; i++) {
    let max = -Infinity;
    for (let c = 0; c < parts.length; c++) max = Math.max(max, chunkLse[c * n + i]);
    let sum = 0;
    for (let c = 0; c < parts.length; c++) sum += Math.exp(chunkLse[c * n + i] - max);
    const rowLse = max + Math.log(sum);
    lse[i] = rowLse;
    let target = 0;
    const ho = i * d;
    const wo = targets[i] * d;
    for (let j = 0; j < d; j++) target += h[ho + j] * w[wo + j];
    logprobs[i] = target - rowLse;
    if (entropy && chunkE) {
      // sum_v p_v x_v = sum_c (share of chunk c) * (its own softmax-weighted mean logit)
      let mean = 0;
      for (let c = 0; c < parts.length; c++) mean += Math.exp(chunkLse[c * n + i] - rowLse) * chunkE[c * n + i];
      entropy[i] = rowLse - mean;
    }
  }
  return { logprobs, lse, entropy };
}

/**
 * logprob of each row's target under softmax(hidden @ head^T), [n], with gradients for hidden and
 * (when `headTrainable`) the head. `head` is [vocab, d] (model.ts keeps the head in that layout):
 * a tensor, or a frozen matrix outside the heap (then `headTrainable` must be false).
 */
export function headTokenLogprobs(
  hidden: tf.Tensor2D,
  head: tf.Tensor2D | FrozenMatrix,
  headTrainable: boolean,
  targets: Int32Array,
  onEntropy?: (entropy: Float32Array) => void,
): tf.Tensor1D {
  const [n, d] = hidden.shape;
  const external = !(head instanceof tf.Tensor);
  const [vocab, headD] = external ? [head.rows, head.cols] : head.shape;
  if (external && headTrainable) throw new Error('headTokenLogprobs: a head outside the heap is frozen');
  const headValues = () => (external ? head.data : floats(head));
  if (headD !== d) throw new Error(`headTokenLogprobs: hidden size ${d} but head [${vocab}, ${headD}]`);
  if (targets.length !== n) throw new Error(`headTokenLogprobs: ${targets.length} targets for ${n} rows`);
  for (const t of targets) if (t < 0 || t >= vocab) throw new Error(`target token ${t} is outside the vocabulary (${vocab})`);

  const op = tf.customGrad((...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
    const h = args[0] as tf.Tensor2D;
    const save = args[args.length - 1] as tf.GradSaveFunc;
    // A frozen head outside the heap runs on the training device, when the worker has one (device-products.ts).
    const onDevice = external && frozenProductsDevice() ? (head as FrozenMatrix) : null;
    const { logprobs, lse, entropy } = forward(floats(h), headValues(), n, d, vocab, targets, onEntropy !== undefined, onDevice);
    if (onEntropy && entropy) onEntropy(entropy);
    save([h]);
    return {
      value: tf.tensor1d(logprobs),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const dyValues = dy.dataSync() as Float32Array;
        const negDy = dyValues.map((x) => -x);
        const dhOut = newOutput([n, d]);
        const dwOut = headTrainable ? newOutput([vocab, d]) : null;
        // Views after every allocation (a wasm heap may grow and detach older views).
        const hv = floats(saved[0]);
        const wv = headValues();
        const dh = dhOut.fill();
        const dw = dwOut?.fill() ?? null;
        dh.fill(0);
        const chunkDh = new Float32Array(n * d);
        const graph = headBackwardGraph(dw !== null);
        const feeds = { H: floatTensor(hv, [n, d]), LSE: floatTensor(lse, [n, 1]), NDY: floatTensor(negDy, [n, 1]) };
        const device = onDevice ? frozenProductsDevice() : null;
        for (const [start, end] of chunks(vocab)) {
          if (device) {
            device.headBackward(onDevice!, start, end, hv, n, lse, negDy, chunkDh);
            for (let j = 0; j < chunkDh.length; j++) dh[j] += chunkDh[j];
            continue;
          }
          const outputs = { DH: floatTensor(chunkDh, [n, d]) };
          if (dw) Object.assign(outputs, { DW: floatTensor(dw.subarray(start * d, end * d), [end - start, d]) });
          graph.run({ ...feeds, W: floatTensor(wv.subarray(start * d, end * d), [end - start, d]) }, outputs);
          for (let j = 0; j < chunkDh.length; j++) dh[j] += chunkDh[j];
        }
        // The one-hot term: d logprob_i / d logit_{i, t_i} gets + dy_i.
        for (let i = 0; i < n; i++) {
          const g = dyValues[i];
          if (g === 0) continue;
          const ho = i * d;
          const wo = targets[i] * d;
          for (let j = 0; j < d; j++) {
            dh[ho + j] += g * wv[wo + j];
            if (dw) dw[wo + j] += g * hv[ho + j];
          }
        }
        return dwOut ? [dhOut.tensor(), dwOut.tensor()] : [dhOut.tensor()];
      },
    };
  });
  return (headTrainable ? op(hidden, head as tf.Tensor2D) : op(hidden)) as tf.Tensor1D;
}
