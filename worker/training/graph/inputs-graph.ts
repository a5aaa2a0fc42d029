// What a micro-batch's layers read besides their input, made on the device from token ids as one ONNX graph:
// the token embeddings (rows of the table as the model file stores it, dequantized there when it is stored in
// blocks), the additive attention mask from segment ids, and the RoPE tables passed through. One run per
// micro-batch; its outputs stay on the device for every layer's forward and backward (graph-engine.ts), so what
// crosses from the host is ids and the [M, hd] tables, not [M, d] activations or a [rows, T, T] mask.
//
// Inputs: ids int64 [M] (rows × length, flattened), segments int64 [rows, length], cos / sin [M, 1, hd], and for a
// float table `table` [vocab, d]: fed, not an initializer, so that the engine hands ONNX Runtime the base's own
// array on the CPU (no copy: a tied 0.5B's table is 545 MB) and a copy put on the device once elsewhere. A table
// stored in blocks is an initializer (the repacked blocks, which nothing else keeps).
// Outputs: x [M, d], mask [rows, 1, 1, length, length] (0 where key j is visible from query i: same segment,
// j ≤ i, within the sliding window; −1e9 elsewhere, as attention-mask.ts), cos_out / sin_out.
import type { ModelConfig } from '../../../src/runtime/model-config.js';
import { DataType, GraphBuilder } from '../../../src/runtime/onnx-proto.js';
import { FrozenMatrix, type FrozenMatrixData } from './frozen-matrix.js';

export const INPUTS_GRAPH_OUTPUTS = ['x', 'mask', 'cos_out', 'sin_out'];

export function buildInputsGraph(config: ModelConfig, embedding: FrozenMatrixData): Uint8Array {
  const { hiddenSize: D, headDim: hd, vocabSize: V } = config;
  if (embedding.N !== V || embedding.K !== D) throw new Error(`token embeddings are [${embedding.N}, ${embedding.K}], expected [${V}, ${D}]`);
  const g = new GraphBuilder();
  const ids = g.input('ids', DataType.INT64, ['M']);
  const segments = g.input('segments', DataType.INT64, ['rows', 'length']);
  const cos = g.input('cos', DataType.FLOAT, ['M', 1, hd]);
  const sin = g.input('sin', DataType.FLOAT, ['M', 1, hd]);
  if (embedding.kind === 'float') g.node('Gather', [g.input('table', DataType.FLOAT, [V, D]), ids], { outputs: ['x'], attrs: { axis: 0 } });
  else g.node('Identity', [new FrozenMatrix(g, 'model.embed_tokens', embedding).rows(g, ids)], { outputs: ['x'] });

  // mask[b, 0, 0, i, j]: segments[b, i] = segments[b, j], j ≤ i, and j > i − window. Compared as float32 (exact
  // below 2^24): WebGPU has no int64 comparisons, and ONNX Runtime would build the [rows, T, T] mask on the CPU.
  const segs = g.op('Cast', [segments], { to: DataType.FLOAT });
  const sameSegment = g.op('Equal', [g.op('Unsqueeze', [segs, g.int64s([1, 2, 4])]), g.op('Unsqueeze', [segs, g.int64s([1, 2, 3])])]);
  const length = g.op('Cast', [g.op('Squeeze', [g.op('Shape', [segments], { start: 1, end: 2 }), g.int64s([0])])], { to: DataType.FLOAT });
  const positions = g.op('Range', [g.scalarFloat(0), length, g.scalarFloat(1)]);
  const query = g.op('Unsqueeze', [positions, g.int64s([1])]); // [T, 1]
  const key = g.op('Unsqueeze', [positions, g.int64s([0])]); // [1, T]
  let visible = g.op('And', [sameSegment, g.op('LessOrEqual', [key, query])]);
  if (config.slidingWindow) visible = g.op('And', [visible, g.op('Greater', [key, g.op('Sub', [query, g.scalarFloat(config.slidingWindow)])])]);
  g.node('Where', [visible, g.scalarFloat(0), g.scalarFloat(-1e9)], { outputs: ['mask'] });

  g.node('Identity', [cos], { outputs: ['cos_out'] });
  g.node('Identity', [sin], { outputs: ['sin_out'] });
  g.output('x', DataType.FLOAT, ['M', D]);
  g.output('mask', DataType.FLOAT, ['rows', 1, 1, 'length', 'length']);
  g.output('cos_out', DataType.FLOAT, ['M', 1, hd]);
  g.output('sin_out', DataType.FLOAT, ['M', 1, hd]);
  return g.toModelBytes('hearth_train_inputs');
}
