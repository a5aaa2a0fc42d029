// The frozen base's products on a GPU (LoRA training with `--device webgpu:0` or `cuda:N`): each frozen matrix
// becomes the initializer of one small ONNX Runtime session on the device, so its weights are uploaded once and
// stay in GPU memory for the whole job; a step sends only activations (x for the forward, dy for the backward)
// and reads back the product. LoRA, norms, attention and the optimizer stay where they are (TF.js; see
// docs/architecture.md for why and what the first GPU run has to measure).
//
// One graph per matrix computes both products, Y = X·Wᵀ and DX = DY·W, from separate inputs; a run asks for one
// of them and feeds the other's input as an empty [0, ·] tensor (ORT runs every node whatever is fetched).
// Runs are synchronous (the native binding, as ort-compute.ts), because TF.js kernels are.
import * as ort from 'onnxruntime-node';
import { DataType, GraphBuilder } from '../../src/runtime/onnx-proto.js';
import { ComputeGraph, floatTensor } from './ort-compute.js';
import type { FrozenMatrix } from './frozen-linear.js';

export class DeviceFrozenProducts {
  private readonly graphs = new WeakMap<Float32Array, ComputeGraph>();
  /** Bytes of frozen weights uploaded so far (what the device holds for this job). */
  residentBytes = 0;

  constructor(
    /** The device's name, for messages ("webgpu:0"). */
    readonly device: string,
    private readonly providers: ort.InferenceSession.ExecutionProviderConfig[],
  ) {}

  /** y [n, out] = x [n, in] · Wᵀ. */
  forward(x: Float32Array, n: number, w: FrozenMatrix, y: Float32Array): void {
    this.graphFor(w).run(
      { X: floatTensor(x, [n, w.cols]), DY: floatTensor(EMPTY, [0, w.rows]) },
      { Y: floatTensor(y, [n, w.rows]) },
    );
  }

  /** dx [n, in] = dy [n, out] · W. */
  backward(dy: Float32Array, n: number, w: FrozenMatrix, dx: Float32Array): void {
    this.graphFor(w).run(
      { X: floatTensor(EMPTY, [0, w.cols]), DY: floatTensor(dy, [n, w.rows]) },
      { DX: floatTensor(dx, [n, w.cols]) },
    );
  }

  /**
   * One vocabulary chunk [start, end) of a frozen LM head, fused with the log-softmax as head-logprobs.ts does it:
   * forward LSE (and E) [n, 1] from H [n, d]; backward DH [n, d] from H, LSE and NDY (see headBackwardGraph).
   */
  headForward(w: FrozenMatrix, start: number, end: number, h: Float32Array, n: number, lse: Float32Array, e: Float32Array | null): void {
    const outputs: Record<string, ort.Tensor> = { LSE_OUT: floatTensor(lse, [n, 1]) };
    if (e) outputs.E = floatTensor(e, [n, 1]);
    this.headGraph(w, start, end).run(
      { H: floatTensor(h, [n, w.cols]), HB: floatTensor(this.zeroRow(w.cols), [1, w.cols]), LSE: floatTensor(ZERO1, [1, 1]), NDY: floatTensor(ZERO1, [1, 1]) },
      outputs,
    );
  }

  headBackward(w: FrozenMatrix, start: number, end: number, h: Float32Array, n: number, lse: Float32Array, ndy: Float32Array, dh: Float32Array): void {
    this.headGraph(w, start, end).run(
      { H: floatTensor(this.zeroRow(w.cols), [1, w.cols]), HB: floatTensor(h, [n, w.cols]), LSE: floatTensor(lse, [n, 1]), NDY: floatTensor(ndy, [n, 1]) },
      { DH: floatTensor(dh, [n, w.cols]) },
    );
  }

  private readonly headGraphs = new WeakMap<Float32Array, Map<number, ComputeGraph>>();
  private zeros = new Float32Array(0);
  /** A zero row of d values: the input of the half of a head chunk's graph not asked for (see headChunkGraph). */
  private zeroRow(d: number): Float32Array {
    if (this.zeros.length !== d) this.zeros = new Float32Array(d);
    return this.zeros;
  }

  private headGraph(w: FrozenMatrix, start: number, end: number): ComputeGraph {
    let byChunk = this.headGraphs.get(w.data);
    if (!byChunk) this.headGraphs.set(w.data, (byChunk = new Map()));
    let g = byChunk.get(start);
    if (!g) {
      const chunk = w.data.subarray(start * w.cols, end * w.cols);
      g = ComputeGraph.load(headChunkGraph(chunk, end - start, w.cols), 1, this.providers);
      byChunk.set(start, g);
      this.residentBytes += chunk.byteLength;
    }
    return g;
  }

  /** The matrix's session, made on first use (the upload happens once, at session creation). */
  private graphFor(w: FrozenMatrix): ComputeGraph {
    let g = this.graphs.get(w.data);
    if (!g) {
      g = ComputeGraph.load(frozenProductGraph(w), 1, this.providers);
      this.graphs.set(w.data, g);
      this.residentBytes += w.data.byteLength;
    }
    return g;
  }
}

const EMPTY = new Float32Array(0);
const ZERO1 = new Float32Array(1);

function frozenProductGraph(w: FrozenMatrix): Uint8Array {
  const g = new GraphBuilder();
  g.input('X', DataType.FLOAT, ['n', w.cols]);
  g.input('DY', DataType.FLOAT, ['m', w.rows]);
  const weight = g.floats('W', [w.rows, w.cols], w.data);
  g.node('Gemm', ['X', weight], { outputs: ['Y'], attrs: { transB: 1 } });
  g.node('MatMul', ['DY', weight], { outputs: ['DX'] });
  g.output('Y', DataType.FLOAT, ['n', w.rows]);
  g.output('DX', DataType.FLOAT, ['m', w.cols]);
  return g.toModelBytes('hearth_frozen_products');
}

/**
 * headForwardGraph and headBackwardGraph (ort-compute.ts) over one resident chunk W [c, d], in one graph with
 * separate inputs (H for the forward, HB for the backward): ORT runs every node of a graph whatever is fetched,
 * so the half not asked for is fed one zero row (not an empty tensor: WebGPU's Softmax refuses a dispatch of 0),
 * about 1/n of the real work.
 */
function headChunkGraph(w: Float32Array, c: number, d: number): Uint8Array {
  const g = new GraphBuilder();
  const h = g.input('H', DataType.FLOAT, ['n', d]);
  const hb = g.input('HB', DataType.FLOAT, ['m', d]);
  const lse = g.input('LSE', DataType.FLOAT, ['m', 1]);
  const ndy = g.input('NDY', DataType.FLOAT, ['m', 1]);
  const weight = g.floats('W', [c, d], w);
  const x = g.op('Gemm', [h, weight], { transB: 1 });
  g.node('ReduceLogSumExp', [x], { outputs: ['LSE_OUT'], attrs: { axes: { ints: [1] }, keepdims: 1 } });
  g.node('ReduceSum', [g.op('Mul', [g.op('Softmax', [x], { axis: 1 }), x]), g.int64s([1])], { outputs: ['E'], attrs: { keepdims: 1 } });
  const grad = g.op('Mul', [g.op('Exp', [g.op('Sub', [g.op('Gemm', [hb, weight], { transB: 1 }), lse])]), ndy]);
  g.node('MatMul', [grad, weight], { outputs: ['DH'] });
  g.output('LSE_OUT', DataType.FLOAT, ['n', 1]);
  g.output('E', DataType.FLOAT, ['n', 1]);
  g.output('DH', DataType.FLOAT, ['m', d]);
  return g.toModelBytes('hearth_frozen_head_chunk');
}
