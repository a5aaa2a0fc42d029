// Two kernel fixes that make the TF.js wasm backend fast enough to train on
// (see shared/notes/tfjs-training-notes.md, "Pitfalls" 2 and 3):
//
// 1. BatchMatMul: the stock wasm kernel uses XNNPACK only for a plain 2-D `[M,K]x[K,N]` product.
//    Every backward GEMM (transposed operands) and every batched attention GEMM falls into a
//    scalar triple loop (~1-2 GFLOP/s). The replacement makes operands contiguous (a blocked JS
//    transpose, faster than the wasm Transpose kernel), folds `[...,M,K]x[K,N]` into one GEMM and loops over batches with
//    zero-copy views on the wasm heap, so every call takes the XNNPACK path.
// 2. UnsortedSegmentSum (the gradient of `gather`, i.e. of the embedding): missing on wasm, and
//    O(segments * rows) on cpu. Both get a plain scatter-add.
//
// 3. Identity: tfjs clones every tensor it keeps for the backward pass (engine
//    saveTensorsForBackwardMode -> clone -> Identity), and the wasm Identity copies the buffer,
//    doubling activation memory and adding a memcpy per op. Tensors are immutable, so the
//    replacement shares the buffer and bumps its reference count, as the cpu backend and the wasm
//    Reshape kernel do.
//
// 4. AdamW: ~13 elementwise ops (each a full pass and a new buffer) become one JS loop over the
//    buffers (optimizer.ts adamwUpdate), registered as the kernel HearthAdamW on wasm and cpu.
//
// These use wasm backend internals (dataIdMap, wasm.tfjs.disposeData, makeOutput with a memory
// offset), so tfjs must stay at exactly 4.22.x; test/unit/training-backend.test.ts checks the
// numbers against the cpu backend.
import * as tf from '@tensorflow/tfjs-core';
import { adamwUpdate, FUSED_ADAMW_KERNEL, type AdamWStep } from './optimizer.js';
import { batchMatMulShape, sizeOf } from './batch-matmul-shape.js';

/** The parts of BackendWasm (tfjs-backend-wasm 4.22) these kernels touch. */
interface WasmBackendInternals {
  incRef(dataId: object): void;
  dataIdMap: { get(dataId: object): { id: number; memoryOffset: number; shape: number[] }; delete(dataId: object): boolean };
  makeOutput(shape: number[], dtype: tf.DataType, memoryOffset?: number): tf.TensorInfo;
  disposeData(dataId: object): boolean;
  typedArrayFromHeap(t: tf.TensorInfo): Float32Array | Int32Array | Uint8Array;
  wasm: {
    cwrap(name: string, ret: null, args: string[]): (...args: unknown[]) => void;
    tfjs: { disposeData(id: number): void };
  };
}

interface CpuBackendInternals {
  data: { get(dataId: object): { values: ArrayLike<number> } };
  makeTensorInfo(shape: number[], dtype: tf.DataType, values: Float32Array): tf.TensorInfo;
}


/**
 * Kernels are registered process-wide, and a process may load this module more than once (test
 * runners re-import modules per file): patched kernels carry this mark so they are not wrapped twice.
 */
const PATCHED = Symbol.for('hearth.training.patchedKernel');
const isPatched = (k: tf.KernelConfig | undefined) => k !== undefined && PATCHED in k.kernelFunc;
function markPatched(kernelFunc: tf.KernelFunc): tf.KernelFunc {
  return Object.assign(kernelFunc, { [PATCHED]: true });
}
const shapeBytes = (shape: number[]) => new Uint8Array(new Int32Array(shape).buffer);

/**
 * [..., rows, cols] -> [..., cols, rows] into a new tensor, as a cache-blocked JS loop on the wasm
 * heap: 2-3x faster than the wasm Transpose kernel for the large matrices of the backward pass.
 */
function swapLastTwoDims(backend: WasmBackendInternals, x: tf.TensorInfo): tf.TensorInfo {
  const rank = x.shape.length;
  const rows = x.shape[rank - 2];
  const cols = x.shape[rank - 1];
  const outShape = [...x.shape.slice(0, -2), cols, rows];
  const out = backend.makeOutput(outShape, 'float32');
  // Views are taken after makeOutput: an allocation may grow (and detach) the wasm heap.
  const src = backend.typedArrayFromHeap(x) as Float32Array;
  const dst = backend.typedArrayFromHeap(out) as Float32Array;
  const block = 32;
  const matrix = rows * cols;
  for (let base = 0; base < src.length; base += matrix) {
    for (let r0 = 0; r0 < rows; r0 += block) {
      const r1 = Math.min(r0 + block, rows);
      for (let c0 = 0; c0 < cols; c0 += block) {
        const c1 = Math.min(c0 + block, cols);
        for (let r = r0; r < r1; r++) {
          const from = base + r * cols;
          for (let c = c0; c < c1; c++) dst[base + c * rows + r] = src[from + c];
        }
      }
    }
  }
  return out;
}

/** Replace the wasm BatchMatMul kernel; call once after `tf.setBackend('wasm')`. */
export function patchWasmBatchMatMul(): void {
  const original = tf.getKernel(tf.BatchMatMul, 'wasm');
  if (!original) throw new Error('wasm BatchMatMul kernel not registered; is tfjs-backend-wasm loaded?');
  if (isPatched(original)) return;
  const wasmBackend = tf.findBackend('wasm') as unknown as WasmBackendInternals;
  // The C++ entry point: (aId, aShape, aRank, bId, bShape, bRank, transposeA, transposeB, outId).
  const gemm = wasmBackend.wasm.cwrap(tf.BatchMatMul, null, [
    'number', 'array', 'number', 'number', 'array', 'number', 'number', 'number', 'number',
  ]);

  /** A [rows, cols] (or [1, rows, cols]) product of two contiguous operands, into `out`. */
  function gemm2d(backend: WasmBackendInternals, aId: number, bId: number, outId: number, m: number, k: number, n: number) {
    gemm(aId, shapeBytes([1, m, k]), 3, bId, shapeBytes([1, k, n]), 3, false, false, outId);
  }

  /** A tensor that aliases `length` floats of another tensor's memory, starting at element `offset`. */
  function view(backend: WasmBackendInternals, t: tf.TensorInfo, offset: number, shape: number[]) {
    const base = backend.dataIdMap.get(t.dataId).memoryOffset;
    return backend.makeOutput(shape, 'float32', base + offset * 4);
  }
  /** Forget a view without freeing its memory (it belongs to the viewed tensor). */
  function dropView(backend: WasmBackendInternals, v: tf.TensorInfo) {
    backend.wasm.tfjs.disposeData(backend.dataIdMap.get(v.dataId).id);
    backend.dataIdMap.delete(v.dataId);
  }

  const kernelFunc: tf.KernelFunc = (args) => {
    const backend = args.backend as unknown as WasmBackendInternals;
    const { a, b, transposeA, transposeB, batchA, batchB, batchShape, m, k, n, covered } = batchMatMulShape(args);
    if (!covered) return original.kernelFunc(args);

    const aC = transposeA ? swapLastTwoDims(backend, a) : a; // [..., m, k]
    const bC = transposeB ? swapLastTwoDims(backend, b) : b; // [..., k, n]
    const out = backend.makeOutput([...batchShape, m, n], 'float32');
    const id = (t: tf.TensorInfo) => backend.dataIdMap.get(t.dataId).id;

    if (batchB === 1) {
      // [batch*m, k] x [k, n]: one GEMM; the batch folds into the rows.
      // XNNPACK caches the packed B per tensor id, and a reshape shares its input's buffer id: the
      // same id used with another [k, n] would reuse a wrongly packed B. So B's own id (and its
      // cache entry) is used only in the buffer's original layout (last dim n), else a fresh view.
      const stored = backend.dataIdMap.get(bC.dataId).shape;
      if (stored[stored.length - 1] === n) {
        gemm2d(backend, id(aC), id(bC), id(out), batchA * m, k, n);
      } else {
        const bView = view(backend, bC, 0, [k, n]);
        gemm2d(backend, id(aC), id(bView), id(out), batchA * m, k, n);
        dropView(backend, bView);
      }
    } else {
      const batch = Math.max(batchA, batchB);
      for (let i = 0; i < batch; i++) {
        const aView = batchA === 1 ? null : view(backend, aC, i * m * k, [m, k]);
        const bView = view(backend, bC, i * k * n, [k, n]);
        const outView = view(backend, out, i * m * n, [m, n]);
        gemm2d(backend, aView ? id(aView) : id(aC), id(bView), id(outView), m, k, n);
        if (aView) dropView(backend, aView);
        dropView(backend, bView);
        dropView(backend, outView);
      }
    }
    if (aC !== a) backend.disposeData(aC.dataId);
    if (bC !== b) backend.disposeData(bC.dataId);
    return out;
  };

  tf.unregisterKernel(tf.BatchMatMul, 'wasm');
  tf.registerKernel({ kernelName: tf.BatchMatMul, backendName: 'wasm', kernelFunc: markPatched(kernelFunc) });
}

/** segment-sum of rows: out[segmentIds[i]] += x[i]; ids outside [0, numSegments) are dropped. */
function scatterAddRows(x: ArrayLike<number>, ids: ArrayLike<number>, out: Float32Array, rowSize: number, numSegments: number) {
  for (let i = 0; i < ids.length; i++) {
    const s = ids[i];
    if (s < 0 || s >= numSegments) continue;
    const o = s * rowSize;
    const xo = i * rowSize;
    for (let j = 0; j < rowSize; j++) out[o + j] += x[xo + j];
  }
}

function segmentSumShape(x: tf.TensorInfo, segmentIds: tf.TensorInfo, numSegments: number) {
  const rowShape = x.shape.slice(segmentIds.shape.length);
  return { outShape: [numSegments, ...rowShape], rowSize: sizeOf(rowShape) };
}

/** Register an UnsortedSegmentSum kernel on wasm (missing there) and replace the slow cpu one. */
export function registerSegmentSumKernels(): void {
  const wasmKernel: tf.KernelFunc = (args) => {
    const backend = args.backend as unknown as WasmBackendInternals;
    const { x, segmentIds } = args.inputs as { x: tf.TensorInfo; segmentIds: tf.TensorInfo };
    const { numSegments } = args.attrs as unknown as { numSegments: number };
    if (x.dtype !== 'float32') throw new Error(`UnsortedSegmentSum on wasm supports float32 only, got ${x.dtype}`);
    const { outShape, rowSize } = segmentSumShape(x, segmentIds, numSegments);
    const out = backend.makeOutput(outShape, 'float32');
    // Views are taken after makeOutput: an allocation may grow (and detach) the wasm heap.
    const outData = backend.typedArrayFromHeap(out) as Float32Array;
    outData.fill(0);
    scatterAddRows(backend.typedArrayFromHeap(x), backend.typedArrayFromHeap(segmentIds), outData, rowSize, numSegments);
    return out;
  };
  const cpuKernel: tf.KernelFunc = (args) => {
    const backend = args.backend as unknown as CpuBackendInternals;
    const { x, segmentIds } = args.inputs as { x: tf.TensorInfo; segmentIds: tf.TensorInfo };
    const { numSegments } = args.attrs as unknown as { numSegments: number };
    const { outShape, rowSize } = segmentSumShape(x, segmentIds, numSegments);
    const outData = new Float32Array(sizeOf(outShape));
    scatterAddRows(backend.data.get(x.dataId).values, backend.data.get(segmentIds.dataId).values, outData, rowSize, numSegments);
    return backend.makeTensorInfo(outShape, 'float32', outData);
  };
  for (const [backendName, kernelFunc] of [['wasm', wasmKernel], ['cpu', cpuKernel]] as const) {
    if (tf.getKernel(tf.UnsortedSegmentSum, backendName)) tf.unregisterKernel(tf.UnsortedSegmentSum, backendName);
    tf.registerKernel({ kernelName: tf.UnsortedSegmentSum, backendName, kernelFunc });
  }
}

/** Replace the wasm Identity kernel with one that shares the input buffer (see 3. above). */
export function patchWasmIdentity(): void {
  const original = tf.getKernel(tf.Identity, 'wasm');
  if (!original) throw new Error('wasm Identity kernel not registered');
  if (isPatched(original)) return;
  const kernelFunc: tf.KernelFunc = (args) => {
    const { x } = args.inputs as { x: tf.TensorInfo };
    if (x.dtype === 'string') return original.kernelFunc(args);
    (args.backend as unknown as WasmBackendInternals).incRef(x.dataId);
    return { dataId: x.dataId, shape: [...x.shape], dtype: x.dtype };
  };
  tf.unregisterKernel(tf.Identity, 'wasm');
  tf.registerKernel({ kernelName: tf.Identity, backendName: 'wasm', kernelFunc: markPatched(kernelFunc) });
}

/** Register the fused AdamW kernel (see 4. above) for the wasm and cpu backends. */
export function registerFusedAdamW(): void {
  const wasmKernel: tf.KernelFunc = (args) => {
    const backend = args.backend as unknown as WasmBackendInternals;
    const { param, grad, m, v } = args.inputs as Record<string, tf.TensorInfo>;
    const outs = [param, m, v].map((t) => backend.makeOutput([...t.shape], 'float32'));
    // Views are taken after all allocations: an allocation may grow (and detach) the wasm heap.
    const view = (t: tf.TensorInfo) => backend.typedArrayFromHeap(t) as Float32Array;
    adamwUpdate(view(param), view(grad), view(m), view(v), view(outs[0]), view(outs[1]), view(outs[2]), args.attrs as unknown as AdamWStep);
    return outs;
  };
  const cpuKernel: tf.KernelFunc = (args) => {
    const backend = args.backend as unknown as CpuBackendInternals;
    const { param, grad, m, v } = args.inputs as Record<string, tf.TensorInfo>;
    const values = (t: tf.TensorInfo) => backend.data.get(t.dataId).values;
    const size = sizeOf(param.shape);
    const [p2, m2, v2] = [0, 1, 2].map(() => new Float32Array(size));
    adamwUpdate(values(param), values(grad), values(m), values(v), p2, m2, v2, args.attrs as unknown as AdamWStep);
    return [p2, m2, v2].map((data) => backend.makeTensorInfo([...param.shape], 'float32', data));
  };
  for (const [backendName, kernelFunc] of [['wasm', wasmKernel], ['cpu', cpuKernel]] as const) {
    if (!tf.getKernel(FUSED_ADAMW_KERNEL, backendName)) tf.registerKernel({ kernelName: FUSED_ADAMW_KERNEL, backendName, kernelFunc });
  }
}
