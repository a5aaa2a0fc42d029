// ONNX Runtime as a synchronous compute library for the trainer: small graphs (one GEMM, the
// chunked LM head + log-softmax) run by MLAS on caller-owned memory.
//
// Why the native binding directly: TF.js kernels are synchronous, and onnxruntime-node's public
// `InferenceSession.run` is a Promise around a synchronous native call. The binding underneath
// (`onnxruntime-node/dist/binding.js`, the same object the public class wraps) runs synchronously,
// takes input tensors without copying (it reads the typed array's memory, wherever it lives: also a
// view on the TF.js wasm heap) and writes outputs into preallocated tensors passed as fetches.
// onnxruntime-node must stay at 1.30.x (test/unit/training-ort.test.ts checks the numbers).
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import * as ort from 'onnxruntime-node';
import { DataType, GraphBuilder } from '../../src/runtime/onnx-proto.js';

/** What the native binding's session offers (the graph engine's sessions use more of it: graph/graph-session.ts). */
export interface NativeSession {
  loadModel(buffer: ArrayBuffer, byteOffset: number, byteLength: number, options: object): void;
  /** Outputs as ort.Tensor (the binding builds them with onnxruntime-common's class: a device output has location 'gpu-buffer'). */
  run(feeds: Record<string, ort.Tensor>, fetches: Record<string, ort.Tensor | null>, options: object): Record<string, ort.Tensor>;
  readonly outputMetadata: { name: string }[];
  dispose(): void;
  endProfiling(): void;
}
interface NativeBinding {
  binding: { InferenceSession: new () => NativeSession };
  initOrt(): void;
}

let native: NativeBinding | null = null;
/** A new session of onnxruntime-node's native binding (loaded and initialised once per process). */
export function newNativeSession(): NativeSession {
  if (!native) {
    native = createRequire(import.meta.url)('onnxruntime-node/dist/binding.js') as NativeBinding;
    native.initOrt();
  }
  return new native.binding.InferenceSession();
}

/** Threads for the trainer's ONNX Runtime graphs: HEARTH_TRAIN_THREADS, else every core. */
export function trainingThreads(): number {
  const fromEnv = Number(process.env.HEARTH_TRAIN_THREADS);
  return Number.isInteger(fromEnv) && fromEnv > 0 ? fromEnv : availableParallelism();
}

/** A loaded graph whose `run` is synchronous and writes into the given output tensors. */
export class ComputeGraph {
  private constructor(private readonly session: NativeSession) {}

  /** `providers`: where it runs (default the CPU; device-products.ts puts frozen weights on a GPU). */
  static load(model: Uint8Array, threads = trainingThreads(), providers: ort.InferenceSession.ExecutionProviderConfig[] = ['cpu']): ComputeGraph {
    const session = newNativeSession();
    session.loadModel(model.buffer as ArrayBuffer, model.byteOffset, model.byteLength, {
      executionProviders: providers,
      logSeverityLevel: 3,
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
      // Spinning workers would burn the other cores between the trainer's (many, short) GEMMs and
      // slow every other process on a shared machine; waking them costs microseconds per call.
      extra: { session: { intra_op: { allow_spinning: '0' } } },
    });
    return new ComputeGraph(session);
  }

  /** Run; every output must be preallocated in `outputs` (its data is written in place). */
  run(inputs: Record<string, ort.Tensor>, outputs: Record<string, ort.Tensor>): void {
    this.session.run(inputs, outputs, {});
  }
}

/** A float32 ORT tensor over `data` (no copy). */
export function floatTensor(data: Float32Array, dims: number[]): ort.Tensor {
  return new ort.Tensor('float32', data, dims);
}

const cache = new Map<string, ComputeGraph>();
function cached(key: string, build: () => Uint8Array, threads = trainingThreads()): ComputeGraph {
  let g = cache.get(`${key}:${threads}`);
  if (!g) {
    g = ComputeGraph.load(build(), threads);
    cache.set(`${key}:${threads}`, g);
  }
  return g;
}

/**
 * Products below this many FLOPs run on one thread: waking the pool costs more than it saves
 * (LoRA's rank-8 products are ~2 MFLOP), and on a loaded machine every parallel call also waits
 * for its slowest thread to be scheduled.
 */
export const SINGLE_THREAD_FLOPS = 1 << 23;

/**
 * Y[b] = op(A[b]) @ op(B[b]) over rank-3 operands (a batch of 1 broadcasts), op = transpose when
 * asked: com.microsoft FusedMatMul, which MLAS runs with the transposes folded into packing.
 */
export function matMulGraph(transA: boolean, transB: boolean, flops = Infinity): ComputeGraph {
  const threads = flops < SINGLE_THREAD_FLOPS ? 1 : trainingThreads();
  return cached(`matmul:${transA}:${transB}`, () => {
    const g = new GraphBuilder();
    const a = g.input('A', DataType.FLOAT, ['a0', 'a1', 'a2']);
    const b = g.input('B', DataType.FLOAT, ['b0', 'b1', 'b2']);
    g.node('FusedMatMul', [a, b], { outputs: ['Y'], attrs: { transA: transA ? 1 : 0, transB: transB ? 1 : 0, alpha: { float: 1 } }, domain: 'com.microsoft' });
    g.output('Y', DataType.FLOAT, ['y0', 'y1', 'y2']);
    return g.toModelBytes('hearth_matmul');
  }, threads);
}

/**
 * Forward of one vocabulary chunk of the LM head: X = H [n, d] @ W [c, d]^T, then per row
 * LSE = logsumexp(X) and, with `entropy`, E = sum(softmax(X) * X) (both [n, 1]).
 */
export function headForwardGraph(entropy: boolean): ComputeGraph {
  return cached(`head-forward:${entropy}`, () => {
    const g = new GraphBuilder();
    const h = g.input('H', DataType.FLOAT, ['n', 'd']);
    const w = g.input('W', DataType.FLOAT, ['c', 'd']);
    const x = g.op('Gemm', [h, w], { transB: 1 });
    g.node('ReduceLogSumExp', [x], { outputs: ['LSE'], attrs: { axes: { ints: [1] }, keepdims: 1 } });
    g.output('LSE', DataType.FLOAT, ['n', 1]);
    if (entropy) {
      const px = g.op('Mul', [g.op('Softmax', [x], { axis: 1 }), x]);
      g.node('ReduceSum', [px, g.int64s([1])], { outputs: ['E'], attrs: { keepdims: 1 } });
      g.output('E', DataType.FLOAT, ['n', 1]);
    }
    return g.toModelBytes('hearth_head_forward');
  });
}

/**
 * Backward of one vocabulary chunk, without the one-hot term (the caller adds it, n rows):
 * G = exp(H W^T - LSE) * NDY (NDY = -dLoss/dlogprob, [n, 1]); DH = G @ W [n, d] and, with
 * `weightGrad`, DW = G^T @ H [c, d].
 */
export function headBackwardGraph(weightGrad: boolean): ComputeGraph {
  return cached(`head-backward:${weightGrad}`, () => {
    const g = new GraphBuilder();
    const h = g.input('H', DataType.FLOAT, ['n', 'd']);
    const w = g.input('W', DataType.FLOAT, ['c', 'd']);
    const lse = g.input('LSE', DataType.FLOAT, ['n', 1]);
    const ndy = g.input('NDY', DataType.FLOAT, ['n', 1]);
    const x = g.op('Gemm', [h, w], { transB: 1 });
    const grad = g.op('Mul', [g.op('Exp', [g.op('Sub', [x, lse])]), ndy]);
    g.node('MatMul', [grad, w], { outputs: ['DH'] });
    g.output('DH', DataType.FLOAT, ['n', 'd']);
    if (weightGrad) {
      g.node('Gemm', [grad, h], { outputs: ['DW'], attrs: { transA: 1 } });
      g.output('DW', DataType.FLOAT, ['c', 'd']);
    }
    return g.toModelBytes('hearth_head_backward');
  });
}
