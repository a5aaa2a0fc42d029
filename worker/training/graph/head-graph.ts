// The model's last norm, its LM head and the log-softmax at the targets as one ONNX graph, forward and backward
// under an If on `backward`, over vocabulary chunks: the [n, vocab] logits never exist whole (a chunk of
// VOCAB_CHUNK rows of the head at a time, dequantized there when the head is stored in blocks).
//
// Forward: logp = logit[target] − lse, entropy = lse − Σ softmax · logits, lse (kept for the backward).
// Backward (dlogp given): dlogits = dlogp · (onehot(target) − softmax), dn = Σ_chunks dlogits · W_chunk, then
// the norm's backward. The logits are computed again in the backward rather than kept: [n, vocab] floats (0.5B
// at 4,096 tokens: 2.5 GB) against one more product of the head.
//
// Inputs: x [n, d] (the last layer's output at the trained rows), targets int64 [n], backward bool [],
// lse [n, 1] and dlogp [n, 1] (backward; [0, 1] otherwise). Outputs (all rank 2): logp, entropy, lse [n, 1] in
// the forward ([0, 0] backward); dx [n, d] in the backward ([0, 0] forward).
import type { ModelConfig } from '../../../src/runtime/model-config.js';
import { DataType, GraphBuilder } from '../../../src/runtime/onnx-proto.js';
import { FrozenMatrix, frozenRows, type FrozenMatrixData } from './frozen-matrix.js';
import { rmsNorm, rmsNormBackward } from './rms-norm.js';

/** Vocabulary rows per chunk: 16,384 × 4,096 floats (an 8B head) is a 256 MB chunk. */
export const VOCAB_CHUNK = 16384;

export function buildHeadGraph(config: ModelConfig, head: FrozenMatrixData, normWeight: Float32Array, chunk = VOCAB_CHUNK): Uint8Array {
  const { hiddenSize: D, vocabSize: V, rmsNormEps: eps } = config;
  if (head.N !== V || head.K !== D) throw new Error(`LM head is [${head.N}, ${head.K}], expected [${V}, ${D}]`);
  const root = new GraphBuilder();
  const x = root.input('x', DataType.FLOAT, ['n', D]);
  const targets = root.input('targets', DataType.INT64, ['n']);
  const backward = root.input('backward', DataType.BOOL, []);
  const lseIn = root.input('lse', DataType.FLOAT, ['bn', 1]);
  const dlogp = root.input('dlogp', DataType.FLOAT, ['bn', 1]);
  const wNorm = root.floats('model.norm.weight', [D], normWeight);
  const chunks: { from: number; matrix: FrozenMatrix; size: number }[] = [];
  for (let from = 0; from < V; from += chunk) {
    const to = Math.min(V, from + chunk);
    chunks.push({ from, size: to - from, matrix: new FrozenMatrix(root, `lm_head.${from}`, frozenRows(head, from, to)) });
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

  const forwardBranch = root.subgraph();
  {
    const g = forwardBranch;
    const { y: n } = rmsNorm(g, x, wNorm, eps);
    // Per chunk, four passes over its [n, chunk] logits: max, exp, Σexp, Σexp·logit.
    const lses: string[] = [], picked: string[] = [], expected: string[] = [];
    for (const c of chunks) {
      const logits = c.matrix.forward(g, n);
      const max = g.op('ReduceMax', [logits], { axes: { ints: [1] }, keepdims: 1 });
      const e = g.op('Exp', [g.op('Sub', [logits, max])]);
      const total = rowSum(g, e);
      lses.push(g.op('Add', [max, g.op('Log', [total])]));
      expected.push(g.op('Div', [rowSum(g, g.op('Mul', [e, logits])), total])); // E_softmax(chunk)[logit]
      const t = targetIn(g, c.from, c.size);
      picked.push(g.op('Mul', [g.op('GatherElements', [logits, t.index], { axis: 1 }), t.inside]));
    }
    const lse = lses.length === 1 ? lses[0] : g.op('ReduceLogSumExp', [g.op('Concat', lses, { axis: 1 })], { axes: { ints: [1] }, keepdims: 1 });
    // Σ softmax · logits over the vocabulary = Σ_chunks exp(lse_chunk − lse) · E_chunk[logit].
    const mean = sum(g, expected.map((m, i) => g.op('Mul', [m, g.op('Exp', [g.op('Sub', [lses[i], lse])])])));
    g.node('Sub', [sum(g, picked), lse], { outputs: ['fwd_logp'] });
    g.node('Sub', [lse, mean], { outputs: ['fwd_entropy'] });
    g.node('Identity', [lse], { outputs: ['fwd_lse'] });
    g.node('Identity', [root.floats('empty', [0, 0], new Float32Array(0))], { outputs: ['fwd_dx'] });
    for (const name of ['fwd_logp', 'fwd_entropy', 'fwd_lse']) g.output(name, DataType.FLOAT, ['n', 1]);
    g.output('fwd_dx', DataType.FLOAT, [0, 0]);
  }

  const backwardBranch = root.subgraph();
  {
    const g = backwardBranch;
    const { y: n, r } = rmsNorm(g, x, wNorm, eps);
    // dlogits = dlogp · (onehot − softmax): the softmax part per chunk as a product, the one-hot part as the
    // target rows of W (gathered) times dlogp.
    const negDlogp = g.op('Neg', [dlogp]);
    const parts: string[] = [];
    for (const c of chunks) {
      const probs = g.op('Exp', [g.op('Sub', [c.matrix.forward(g, n), lseIn])]);
      parts.push(c.matrix.backward(g, g.op('Mul', [probs, negDlogp])));
      const t = targetIn(g, c.from, c.size);
      const rows = g.op('Gather', [c.matrix.matrix(g), g.op('Squeeze', [t.index, g.int64s([1])])], { axis: 0 }); // [n, d]
      parts.push(g.op('Mul', [rows, g.op('Mul', [dlogp, t.inside])]));
    }
    g.node('Identity', [rmsNormBackward(g, x, r, wNorm, sum(g, parts))], { outputs: ['bwd_dx'] });
    const empty = root.floats('empty', [0, 0], new Float32Array(0));
    for (const name of ['bwd_logp', 'bwd_entropy', 'bwd_lse']) g.node('Identity', [empty], { outputs: [name] });
    for (const name of ['bwd_logp', 'bwd_entropy', 'bwd_lse']) g.output(name, DataType.FLOAT, [0, 0]);
    g.output('bwd_dx', DataType.FLOAT, ['n', D]);
  }

  const outputs = ['logp', 'entropy', 'lse_out', 'dx'];
  root.node('If', [backward], { outputs, attrs: { then_branch: { graph: backwardBranch, name: 'backward' }, else_branch: { graph: forwardBranch, name: 'forward' } } });
  root.output('logp', DataType.FLOAT, ['lp_n', 'lp_1']);
  root.output('entropy', DataType.FLOAT, ['en_n', 'en_1']);
  root.output('lse_out', DataType.FLOAT, ['ls_n', 'ls_1']);
  root.output('dx', DataType.FLOAT, ['dx_n', 'dx_d']);
  return root.toModelBytes('hearth_train_head');
}
