// The trainer's GEMMs on ONNX Runtime (MLAS) instead of the wasm backend's XNNPACK.
//
// The wasm backend's BatchMatMul kernel is wrapped: when the ONNX Runtime path is on, the product
// runs as one FusedMatMul over views of the wasm heap (inputs read in place, the output written
// straight into a fresh wasm tensor: no copies), multi-threaded. MLAS reaches 4-6x the
// single-threaded wasm SIMD GEMM on the trainer's shapes (docs/benchmarks.md). Off, or for shapes
// it does not cover, the call goes to the kernel it wraps (wasm-kernels.ts), the reference path.
import * as tf from '@tensorflow/tfjs-core';
import { floatTensor, matMulGraph } from './ort-compute.js';
import { batchMatMulShape, sizeOf } from './batch-matmul-shape.js';

/** The parts of BackendWasm (tfjs-backend-wasm 4.22) this kernel touches. */
interface WasmBackendInternals {
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  typedArrayFromHeap(t: tf.TensorInfo): Float32Array | Int32Array | Uint8Array;
}

const PATCHED = Symbol.for('hearth.training.ortBatchMatMul');

/**
 * Process-wide switch. Kept on globalThis: kernels are registered once per process, but a test
 * runner may load this module several times, and every copy must flip the same switch.
 */
const state = ((globalThis as Record<symbol, unknown>)[Symbol.for('hearth.training.ortGemmState')] ??= { enabled: false }) as { enabled: boolean };

/**
 * Route the trainer's GEMMs (the wasm matMul kernel and the fused LM head + log-softmax of
 * head-logprobs.ts) to ONNX Runtime (true), or to the reference path (false). Process-wide.
 */
export function setOnnxRuntimeCompute(on: boolean): void {
  state.enabled = on;
}
export function onnxRuntimeCompute(): boolean {
  return state.enabled;
}

/** Wrap the wasm BatchMatMul kernel (call after wasm-kernels.ts patchWasmBatchMatMul). */
export function registerOrtBatchMatMul(): void {
  const previous = tf.getKernel(tf.BatchMatMul, 'wasm');
  if (!previous) throw new Error('wasm BatchMatMul kernel not registered; is tfjs-backend-wasm loaded?');
  if (PATCHED in previous.kernelFunc) return;

  const kernelFunc: tf.KernelFunc = (args) => {
    const { a, b, transposeA, transposeB, batchA, batchB, batchShape, m, k, n, covered } = batchMatMulShape(args);
    if (!state.enabled || !covered || sizeOf(a.shape) === 0 || sizeOf(b.shape) === 0) return previous.kernelFunc(args);

    const backend = args.backend as unknown as WasmBackendInternals;
    const [ra, ca] = a.shape.slice(-2);
    const [rb, cb] = b.shape.slice(-2);
    const out = backend.makeOutput([...batchShape, m, n], 'float32');
    // [batch*m, k] x [k, n]: with one B, A's batch folds into the rows (one larger GEMM).
    const fold = batchB === 1 && !transposeA;
    const aDims = fold ? [1, batchA * m, k] : [batchA, ra, ca];
    const outDims = fold ? [1, batchA * m, n] : [Math.max(batchA, batchB), m, n];
    // Views are taken after makeOutput: an allocation may grow (and detach) the wasm heap.
    const view = (t: tf.TensorInfo) => backend.typedArrayFromHeap(t) as Float32Array;
    matMulGraph(transposeA, transposeB, 2 * outDims[0] * outDims[1] * outDims[2] * k).run(
      { A: floatTensor(view(a), aDims), B: floatTensor(view(b), [batchB, rb, cb]) },
      { Y: floatTensor(view(out), outDims) },
    );
    return out;
  };
  tf.unregisterKernel(tf.BatchMatMul, 'wasm');
  tf.registerKernel({ kernelName: tf.BatchMatMul, backendName: 'wasm', kernelFunc: Object.assign(kernelFunc, { [PATCHED]: true }) });
}
