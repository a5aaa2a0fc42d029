// Reading and writing TF.js float32 tensors in place, for the kernels that hand tensor memory to
// ONNX Runtime (head-logprobs.ts, frozen-linear.ts). On the wasm backend a tensor's values are a
// view of the wasm heap: no copy in or out. Elsewhere (cpu) they are copied.
import * as tf from '@tensorflow/tfjs-core';

/** The parts of BackendWasm (tfjs-backend-wasm 4.22) used to read and write tensors in place. */
interface WasmBackendInternals {
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  typedArrayFromHeap(t: tf.TensorInfo): Float32Array | Int32Array | Uint8Array;
}

const onWasm = () => tf.getBackend() === 'wasm';
const wasm = () => tf.backend() as unknown as WasmBackendInternals;

/**
 * The values of a float32 tensor: a view of the wasm heap (valid until the next allocation, which
 * may grow the heap and detach it), else a copy.
 */
export function floats(t: tf.Tensor): Float32Array {
  if (onWasm()) return wasm().typedArrayFromHeap({ dataId: t.dataId, shape: t.shape, dtype: 'float32' }) as Float32Array;
  return t.dataSync() as Float32Array;
}

/**
 * A new float32 tensor to be filled in place: on wasm written straight into the heap. Call `fill()`
 * for the memory to write (after every other allocation of the kernel), then `tensor()` once.
 */
export function newOutput(shape: number[]): { fill: () => Float32Array; tensor: () => tf.Tensor } {
  if (onWasm()) {
    const info = wasm().makeOutput(shape, 'float32');
    return { fill: () => wasm().typedArrayFromHeap(info) as Float32Array, tensor: () => tf.engine().makeTensorFromTensorInfo(info) };
  }
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  return { fill: () => data, tensor: () => tf.tensor(data, shape) };
}
