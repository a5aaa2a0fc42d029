// The frozen base's products on a GPU (LoRA training with `--device webgpu:0` or `cuda:N`): each frozen matrix
// becomes the initializer of one small ONNX Runtime session on the device, so its weights are uploaded once and
// stay in GPU memory for the whole job; a step sends only activations (x for the forward, dy for the backward)
// and reads back the product. LoRA, norms, attention and the optimizer stay where they are (TF.js; see
// docs/architecture.md for why and what the first GPU run has to measure).
//
// One graph per matrix computes both products, Y = X·Wᵀ and DX = DY·W; a run asks for one of them and ONNX
// Runtime executes only the nodes that output needs (the other input is fed as an empty [0, ·] tensor).
// Runs are synchronous (the native binding, as ort-compute.ts), because TF.js kernels are.
import * as ort from 'onnxruntime-node';
import { DataType, GraphBuilder } from '../runtime/onnx-proto.js';
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
