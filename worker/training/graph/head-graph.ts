// The model's last norm, its LM head and the log-softmax at the targets as one ONNX graph, forward and backward
// under an If on `backward`, over vocabulary chunks: the [n, vocab] logits never exist whole (a chunk of
// VOCAB_CHUNK rows of the head at a time, dequantized there when the head is stored in blocks).
//
// Forward: logp = logit[target] − lse, entropy = lse − Σ softmax · logits.
// Backward: the loss reaches the head only through logp, so for row i dlogits = dlogp_i · (onehot(target_i) −
// softmax_i) and dn_i = dlogp_i · (W[target_i] − Σ_v softmax_iv · W_v). The second term, the softmax's expected
// row of W ([n, d]), is made by a forward that a backward follows (`save`), while its softmax is at hand: the
// backward is then the target rows of W and the norm's backward, and nothing of [n, vocab] is kept or computed
// again. The product softmax · W is the one the backward would otherwise do (the same FLOPs, moved): keeping the
// softmax instead cost the 20M RL micro-batch 131 MB out of and back into ONNX Runtime, and recomputing it a
// product with the largest matrix.
//
// Inputs: x [M, d] (the last layer's output, every token), rows int64 [n] (the trained rows, distinct), targets
// int64 [n], backward bool [], save bool [], dlogp [n, 1] and expected [n, d] (backward; [0, 1] and [0, d]
// otherwise). Outputs (all rank 2; [0, 0] where a branch makes none): logp, entropy (forward), expected_out
// [n, d] (forward with save), dx [M, d] (backward: zero at untrained rows). The rows are gathered and the
// gradient scattered in the graph, so x and dx stay on the device (graph-engine.ts).
import type { ModelConfig } from '../../../src/runtime/model-config.js';
import { DataType, GraphBuilder } from '../../../src/runtime/onnx-proto.js';
import { FrozenMatrix, frozenRows, type FrozenMatrixData } from './frozen-matrix.js';
import { rmsNorm, rmsNormBackward, rmsScale } from './rms-norm.js';
import { ifBranch, leafBranch, rootIf, type BranchOutputs } from './branches.js';

/** Vocabulary rows per chunk: 16,384 × 4,096 floats (an 8B head) is a 256 MB chunk. */
export const VOCAB_CHUNK = 16384;

export interface HeadGraphOptions {
  /** Vocabulary rows per chunk. */
  chunk?: number;
  /**
   * ONNX Runtime's fused LogSoftmax (one pass over a chunk's logits; the CPU's), or the same from ReduceMax, Exp,
   * ReduceSum and Log: ORT 1.30's WebGPU provider has no LogSoftmax kernel, and running it on the CPU would copy
   * every chunk's logits to the host and back.
   */
  fusedLogSoftmax?: boolean;
  /** The head's products by MatMulNBits where it is stored in blocks (frozen-matrix.ts; CPU providers). */
  nbitsForward?: boolean;
}

export function buildHeadGraph(config: ModelConfig, head: FrozenMatrixData, normWeight: Float32Array, { chunk = VOCAB_CHUNK, fusedLogSoftmax = true, nbitsForward = false }: HeadGraphOptions = {}): Uint8Array {
  const { hiddenSize: D, vocabSize: V, rmsNormEps: eps } = config;
  if (head.N !== V || head.K !== D) throw new Error(`LM head is [${head.N}, ${head.K}], expected [${V}, ${D}]`);
  const root = new GraphBuilder();
  const all = root.input('x', DataType.FLOAT, ['M', D]);
  const rows = root.input('rows', DataType.INT64, ['n']);
  const x = root.op('Gather', [all, rows], { axis: 0 });
  const targets = root.input('targets', DataType.INT64, ['n']);
  const backward = root.input('backward', DataType.BOOL, []);
  const save = root.input('save', DataType.BOOL, []);
  const dlogp = root.input('dlogp', DataType.FLOAT, ['bn', 1]);
  const expectedIn = root.input('expected', DataType.FLOAT, ['bn', D]);
  const wNorm = root.floats('model.norm.weight', [D], normWeight);
  const chunks: { from: number; matrix: FrozenMatrix; size: number }[] = [];
  for (let from = 0; from < V; from += chunk) {
    const to = Math.min(V, from + chunk);
    chunks.push({ from, size: to - from, matrix: new FrozenMatrix(root, `lm_head.${from}`, frozenRows(head, from, to), { nbitsForward }) });
  }
  /**
   * Where each target falls in a chunk: its clamped index [n, 1] (int64) and 1 where it is in the chunk, else 0
   * ([n, 1] float). O(n) per chunk, where a one-hot would cost a pass over [n, chunk].
   */
  const targetIn = (g: GraphBuilder, from: number, size: number) => {
    const local = g.op('Unsqueeze', [g.op('Sub', [targets, g.int64s([from], [])]), g.int64s([1])]);
    const inside = g.op('Cast', [g.op('And', [g.op('GreaterOrEqual', [local, g.int64s([0], [])]), g.op('Less', [local, g.int64s([size], [])])])], { to: DataType.FLOAT });
    return { index: g.op('Clip', [local, g.int64s([0], []), g.int64s([size - 1], [])]), inside };
  };
  const rowSum = (g: GraphBuilder, t: string) => g.op('ReduceSum', [t, g.int64s([1])], { keepdims: 1 });
  const sum = (g: GraphBuilder, ts: string[]) => ts.reduce((a, t) => g.op('Add', [a, t]));
  const outputs: BranchOutputs = { names: ['logp', 'entropy', 'expected_out', 'dx'], ranks: [2, 2, 2, 2] };

  const forward = (g: GraphBuilder, keep: boolean) => {
    const { y: n } = rmsNorm(g, x, wNorm, eps);
    // Per chunk: the log-softmax (fused where the provider has it), then exp and one weighted sum (the entropy's term).
    const lses: string[] = [], picked: string[] = [], expected: string[] = [], rowsOfW: string[] = [];
    const out = new Map<string, string>();
    const firstColumn = (t: string) => g.op('Slice', [t, g.int64s([0]), g.int64s([1]), g.int64s([1])]);
    chunks.forEach((c) => {
      const logits = c.matrix.forward(g, n);
      let logSoftmax: string, lse: string;
      if (fusedLogSoftmax) {
        logSoftmax = g.op('LogSoftmax', [logits], { axis: 1 }); // logits − lse_chunk
        lse = g.op('Sub', [firstColumn(logits), firstColumn(logSoftmax)]);
      } else {
        const max = g.op('ReduceMax', [logits], { axes: { ints: [1] }, keepdims: 1 });
        const shifted = g.op('Sub', [logits, max]);
        const logSum = g.op('Log', [rowSum(g, g.op('Exp', [shifted]))]);
        logSoftmax = g.op('Sub', [shifted, logSum]);
        lse = g.op('Add', [max, logSum]);
      }
      const probs = g.op('Exp', [logSoftmax]); // softmax within the chunk
      lses.push(lse);
      // The chunk's softmax times its rows of W ([n, d]), made here so that no [n, chunk] tensor outlives its chunk.
      if (keep) rowsOfW.push(c.matrix.backward(g, probs));
      // Σ softmax_chunk · logits = Σ softmax_chunk · logSoftmax + lse_chunk
      expected.push(g.op('Add', [rowSum(g, g.op('Mul', [probs, logSoftmax])), lse]));
      const t = targetIn(g, c.from, c.size);
      picked.push(g.op('Mul', [g.op('GatherElements', [logits, t.index], { axis: 1 }), t.inside]));
    });
    const lse = lses.length === 1 ? lses[0] : g.op('ReduceLogSumExp', [g.op('Concat', lses, { axis: 1 })], { axes: { ints: [1] }, keepdims: 1 });
    // A chunk's share of the whole softmax: exp(lse_chunk − lse).
    const shares = lses.map((l) => (lses.length === 1 ? null : g.op('Exp', [g.op('Sub', [l, lse])])));
    // Σ softmax · logits over the vocabulary = Σ_chunks share · E_chunk[logit].
    const mean = sum(g, expected.map((m, i) => (shares[i] ? g.op('Mul', [m, shares[i]!]) : m)));
    // Σ_v softmax_v · W_v = Σ_chunks share · (the chunk's softmax · its rows of W).
    if (keep) out.set('expected_out', sum(g, rowsOfW.map((e, i) => (shares[i] ? g.op('Mul', [e, shares[i]!]) : e))));
    out.set('logp', g.op('Sub', [sum(g, picked), lse]));
    out.set('entropy', g.op('Sub', [lse, mean]));
    return out;
  };

  // dn = dlogp · (W[target] − expected): each target's row from the chunk holding it.
  const backwardPass = (g: GraphBuilder) => {
    const r = rmsScale(g, x, eps);
    const targetRows = sum(g, chunks.map((c) => {
      const t = targetIn(g, c.from, c.size);
      return g.op('Mul', [c.matrix.rows(g, g.op('Squeeze', [t.index, g.int64s([1])])), t.inside]); // [n, d]
    }));
    const dSelected = rmsNormBackward(g, x, r, wNorm, g.op('Mul', [g.op('Sub', [targetRows, expectedIn]), dlogp]));
    const zeros = g.op('Expand', [g.scalarFloat(0), g.op('Shape', [all])]); // (WebGPU has no ConstantOfShape)
    return new Map([['dx', g.op('ScatterND', [zeros, g.op('Unsqueeze', [rows, g.int64s([1])]), dSelected])]]);
  };

  const forwardSaving = leafBranch(root, outputs, 'fs', (g) => forward(g, true));
  const forwardOnly = leafBranch(root, outputs, 'fp', (g) => forward(g, false));
  const backwardBranch = leafBranch(root, outputs, 'b', backwardPass);
  rootIf(root, outputs, backward, backwardBranch, ifBranch(root, outputs, 'f', save, forwardSaving, forwardOnly),
    (name) => [`${name}_0`, `${name}_1`]);
  return root.toModelBytes('hearth_train_head');
}
