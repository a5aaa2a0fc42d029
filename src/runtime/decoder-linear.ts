// The decoder's projections, y = input · Wᵀ, in the form GraphOptions.weightType asks for: 4-bit re-quantized
// (MatMulNBits), the file's own ggml blocks (decoder-quantized.ts), float16 between two Casts, or float32.
import { DataType, type GraphBuilder } from './onnx-proto.js';
import { q4BlockFor, quantizeQ4, type Q4Weights } from './q4.js';
import type { WeightSource } from './weight-source.js';
import type { GraphOptions } from './decoder-options.js';
import { ggmlRuns, nbitsMatMul, tensorKey } from './decoder-quantized.js';
import { concat, transpose } from './decoder-weights.js';

/**
 * y = input · Wᵀ for W in HF [out = N, in = K] layout. `parts` name the source tensors W stacks along N (fused
 * q|k|v, gate|up); `wOutIn` gives W as float32 (with any head padding). `output` names y when given.
 */
export type Linear = (name: string, input: string, wOutIn: () => Float32Array, N: number, K: number, parts: string[], output?: string) => string;

/**
 * The projections of one body. Per weightType: MatMulNBits on 4-bit re-quantized W ('q4'), on the file's own
 * blocks ('stored'; one node per run of parts with the same ggml type, outputs concatenated), or MatMul on Wᵀ.
 * With `headsPadded` (GQA with head_dim % 16 ≠ 0) the stored blocks do not hold the padded rows: float32 then.
 */
export function linearLayer(g: GraphBuilder, weights: WeightSource, opts: GraphOptions, headsPadded: boolean): Linear {
  return (name, input, wOutIn, N, K, parts, output) => {
    const block = opts.weightType === 'q4' ? q4BlockFor(K, opts.q4Block) : null;
    if (block !== null) {
      let q: Q4Weights | undefined;
      const quantized = () => (q ??= quantizeQ4(wOutIn(), N, K, block));
      const packed = g.initializer(name + '.q4', DataType.UINT8, [N, K / block, block / 2], () => quantized().packed);
      const scales = g.floats(name + '.q4_scales', [N * (K / block)], () => quantized().scales);
      return g.node('MatMulNBits', [input, packed, scales], {
        outputs: output ? [output] : 1, domain: 'com.microsoft', attrs: { K, N, bits: 4, block_size: block, accuracy_level: 4 },
      })[0];
    }
    const runs = (opts.weightType ?? 'stored') === 'stored' && !headsPadded ? ggmlRuns(parts.map((n) => weights.get(n)!), opts.half ?? false) : null;
    if (!runs) return g.node('MatMul', [input, g.floats(name + '_t', [K, N], () => transpose(wOutIn(), N, K))], { outputs: output ? [output] : 1 })[0];
    const ys = runs.map((run) => {
      if (run.type !== null) return nbitsMatMul(g, input, run.tensors, K, opts.nbitsAccuracy ?? 4);
      const n = run.tensors.reduce((a, t) => a + t.shape[0], 0);
      if (opts.half && run.tensors.every((t) => t.f16)) {
        const wT = g.halves(`f16.${run.tensors.map(tensorKey).join('+')}_t`, [K, n], () => transpose(concat(run.tensors.map((t) => t.f16!())), n, K));
        return g.op('Cast', [g.op('MatMul', [g.op('Cast', [input], { to: DataType.FLOAT16 }), wT])], { to: DataType.FLOAT });
      }
      return g.op('MatMul', [input, g.floats(`f32.${run.tensors.map(tensorKey).join('+')}_t`, [K, n], () => transpose(concat(run.tensors.map((t) => t.f32())), n, K))]);
    });
    const y = ys.length === 1 ? ys[0] : g.op('Concat', ys, { axis: -1 });
    return output ? g.node('Identity', [y], { outputs: [output] })[0] : y;
  };
}
