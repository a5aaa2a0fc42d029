// One decoder layer of a LoRA training step as an ONNX graph: the forward pass, and the backward pass with the
// layer's forward recomputed inside it, under an If on the `backward` input. Both branches read the same
// initializers (the frozen weights exist once per layer). Hand-derived backward of every op: RMSNorm, RoPE, the
// attention softmax (GQA without repeating K/V), SwiGLU, the LoRA terms; the base's matrices get no gradient.
//
// Two ways through the backward, chosen per layer and run by the engine (`save`):
// - saved: the forward also returns what the backward reads (the norms' scales, q/k/v, attention probabilities and
//   context, the residual h, gate and up, x·A of each adapter) and the backward takes them back, making the rest
//   again with elementwise passes: a step costs ~2 forwards, as PyTorch's;
// - recomputed: the forward returns only y, and the backward runs the layer's forward again first: a step keeps
//   one [M, d] input per layer (0.5B at 4,096 tokens: 350 MB, where the saved activations would be 22 GB: the
//   attention probabilities alone are rows·heads·T² floats) for one more forward of the layer.
//
// Inputs: x [M, d] (rows × length tokens, flattened), bt int64 [2] = [rows, length], cos / sin [M, 1, hd],
// mask [rows, 1, 1, length, length] (additive), lora_scale [] (alpha / rank, 0 = adapters off), per adapted
// projection lora.<target>.a [in, r] and .b [r, out] (A and B transposed, as lora.ts keeps them), backward
// bool [], save bool [], dy [M, d] (backward; [0, d] otherwise), saved.<name> (backward with save; empty of the
// same rank otherwise: savedTensors lists them).
// Outputs: out [M, d] (y forward, dx backward), grad.<target>.a / .b (backward; [0, 0] forward) and
// saved_out.<name> (forward with save; empty otherwise).
import type { ModelConfig } from '../../../src/runtime/model-config.js';
import { DataType, GraphBuilder } from '../../../src/runtime/onnx-proto.js';
import type { LoraTarget } from '../lora.js';
import { FrozenMatrix, type FrozenMatrixData } from './frozen-matrix.js';
import { rmsNorm, rmsNormBackward, rmsNormed } from './rms-norm.js';
import { rotary, rotaryBackward } from './rotary.js';
import { ifBranch, leafBranch, rootIf, type BranchOutputs } from './branches.js';

/** What one layer's graph is built from: its frozen tensors by HF name (within the layer) and the adapted targets. */
export interface LayerWeights {
  /** `self_attn.q_proj` … `mlp.down_proj` → the frozen [out, in] matrix. */
  matrices: Map<string, FrozenMatrixData>;
  /** Norm weights and biases by name within the layer (`input_layernorm.weight`, `self_attn.q_proj.bias`, …). */
  vectors: Map<string, Float32Array>;
}

const PROJECTIONS: { path: string; target: LoraTarget }[] = [
  { path: 'self_attn.q_proj', target: 'q_proj' }, { path: 'self_attn.k_proj', target: 'k_proj' },
  { path: 'self_attn.v_proj', target: 'v_proj' }, { path: 'self_attn.o_proj', target: 'o_proj' },
  { path: 'mlp.gate_proj', target: 'gate_proj' }, { path: 'mlp.up_proj', target: 'up_proj' }, { path: 'mlp.down_proj', target: 'down_proj' },
];

/** The graph's names for an adapted projection's factors and their gradients. */
export const loraInput = (target: LoraTarget, factor: 'a' | 'b') => `lora.${target}.${factor}`;
export const loraGradOutput = (target: LoraTarget, factor: 'a' | 'b') => `grad.${target}.${factor}`;

/** What the forward keeps for the backward (names in the branch that computed them, or of the saved inputs). */
interface Saved {
  x: string; r1: string; n1: string; q3: string; k3: string; rq: string | null; rk: string | null;
  q5: string; k5: string; v5: string; probs: string; context: string; h: string; r2: string; n2: string;
  gate: string; up: string; sigGate: string; act: string;
  /** x·A of each adapted projection (its input is one of the above). */
  xa: Map<LoraTarget, string>;
}

/** The activations a saving forward returns, with their ranks (the engine feeds empties of these ranks). */
export function savedTensors(config: ModelConfig, targets: readonly LoraTarget[]): { name: string; rank: number }[] {
  // Not kept (the backward makes them again from what is, a few elementwise passes): the norms' outputs n1 and n2,
  // σ(gate) and the SwiGLU product, 17 of a 20M layer's 45 MB at 2,032 tokens, so a budget keeps more layers. The
  // step's time did not move (20M RL micro-batch forward + backward 725 against 738 ms).
  const list: [string, number][] = [['r1', 2], ['q5', 5], ['k5', 5], ['v5', 5], ['probs', 5], ['context', 2], ['h', 2], ['r2', 2], ['gate', 2], ['up', 2]];
  if (config.qkNorm) list.push(['q3', 3], ['k3', 3], ['rq', 3], ['rk', 3]);
  for (const t of targets) list.push([`xa.${t}`, 2]);
  return list.map(([name, rank]) => ({ name, rank }));
}

function savedRecord(s: Saved, targets: readonly LoraTarget[]): Map<string, string> {
  const m = new Map<string, string>(Object.entries({ r1: s.r1, q5: s.q5, k5: s.k5, v5: s.v5, probs: s.probs, context: s.context, h: s.h, r2: s.r2, gate: s.gate, up: s.up }));
  if (s.rq && s.rk) { m.set('q3', s.q3); m.set('k3', s.k3); m.set('rq', s.rq); m.set('rk', s.rk); }
  for (const t of targets) m.set(`xa.${t}`, s.xa.get(t)!);
  return m;
}

/** `nbitsForward`: block-stored matrices' forward products by MatMulNBits (frozen-matrix.ts; CPU providers). */
export function buildLayerGraph(config: ModelConfig, weights: LayerWeights, targets: readonly LoraTarget[], opts: { nbitsForward?: boolean } = {}): Uint8Array {
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, headDim: hd, rmsNormEps: eps } = config;
  const rep = H / KV;
  const root = new GraphBuilder();
  const x = root.input('x', DataType.FLOAT, ['M', D]);
  const bt = root.input('bt', DataType.INT64, [2]);
  const cos = root.input('cos', DataType.FLOAT, ['M', 1, hd]);
  const sin = root.input('sin', DataType.FLOAT, ['M', 1, hd]);
  const mask = root.input('mask', DataType.FLOAT, ['rows', 1, 1, 'length', 'length']);
  const scale = root.input('lora_scale', DataType.FLOAT, []);
  const backward = root.input('backward', DataType.BOOL, []);
  const save = root.input('save', DataType.BOOL, []);
  const dyIn = root.input('dy', DataType.FLOAT, ['dM', D]);
  const savedList = savedTensors(config, targets);
  const savedInputs = new Map(savedList.map(({ name, rank }) => [name, root.input(`saved.${name}`, DataType.FLOAT, Array.from({ length: rank }, (_, i) => `saved_${name}_${i}`))]));
  const adapted = new Set(targets);
  const factors = new Map<LoraTarget, { a: string; b: string }>();
  for (const { target } of PROJECTIONS) {
    if (!adapted.has(target)) continue;
    factors.set(target, { a: root.input(loraInput(target, 'a'), DataType.FLOAT, [`${target}_in`, 'rank']), b: root.input(loraInput(target, 'b'), DataType.FLOAT, ['rank', `${target}_out`]) });
  }
  const matrices = new Map(PROJECTIONS.map(({ path, target }) => {
    const m = weights.matrices.get(path);
    if (!m) throw new Error(`layer weights lack ${path}`);
    return [target, new FrozenMatrix(root, path, m, opts)] as const;
  }));
  const vector = (name: string) => {
    const v = weights.vectors.get(name);
    return v ? root.floats(name, [v.length], v) : null;
  };
  const needVector = (name: string) => vector(name) ?? (() => { throw new Error(`layer weights lack ${name}`); })();
  const bias = new Map(PROJECTIONS.map(({ path, target }) => [target, vector(`${path}.bias`)]));
  const wIn = needVector('input_layernorm.weight');
  const wPost = needVector('post_attention_layernorm.weight');
  const qNorm = config.qkNorm ? needVector('self_attn.q_norm.weight') : null;
  const kNorm = config.qkNorm ? needVector('self_attn.k_norm.weight') : null;
  const invSqrtHd = 1 / Math.sqrt(hd);

  // Shapes built from bt = [rows, length].
  const shape = (g: GraphBuilder, tail: number[]) => g.op('Concat', [bt, g.int64s(tail)], { axis: 0 });

  /** y = x·Wᵀ (+ bias) (+ scale · (x·A)·B); records x·A for the backward. */
  const project = (g: GraphBuilder, target: LoraTarget, input: string, xa: Map<LoraTarget, string>) => {
    let y = matrices.get(target)!.forward(g, input);
    const b = bias.get(target);
    if (b) y = g.op('Add', [y, b]);
    const f = factors.get(target);
    if (!f) return y;
    const inA = g.op('MatMul', [input, f.a]);
    xa.set(target, inA);
    // scale · (x·A)·B with the scale on [M, r], not on [M, out] (a 0.5B micro-batch: 0.1 s of a forward's Muls).
    return g.op('Add', [y, g.op('MatMul', [g.op('Mul', [inA, scale]), f.b])]);
  };

  const forward = (g: GraphBuilder, input: string): { y: string; saved: Saved } => {
    const xa = new Map<LoraTarget, string>();
    const { y: n1, r: r1 } = rmsNorm(g, input, wIn, eps);
    let q3 = g.op('Reshape', [project(g, 'q_proj', n1, xa), g.int64s([-1, H, hd])]);
    let k3 = g.op('Reshape', [project(g, 'k_proj', n1, xa), g.int64s([-1, KV, hd])]);
    const v = project(g, 'v_proj', n1, xa);
    let rq: string | null = null, rk: string | null = null;
    const q3raw = q3, k3raw = k3;
    if (qNorm && kNorm) {
      ({ y: q3, r: rq } = rmsNorm(g, q3, qNorm, eps));
      ({ y: k3, r: rk } = rmsNorm(g, k3, kNorm, eps));
    }
    const qr = rotary(g, q3, cos, sin, hd);
    const kr = rotary(g, k3, cos, sin, hd);
    // Query head h uses kv head floor(h / rep) (HF's repeat_kv): [rows, KV, rep, length, hd] against [rows, KV, 1, length, hd].
    const q5 = g.op('Transpose', [g.op('Reshape', [qr, shape(g, [KV, rep, hd])])], { perm: { ints: [0, 2, 3, 1, 4] } });
    const kvHeads = (t: string) => g.op('Unsqueeze', [g.op('Transpose', [g.op('Reshape', [t, shape(g, [KV, hd])])], { perm: { ints: [0, 2, 1, 3] } }), g.int64s([2])]);
    const k5 = kvHeads(kr);
    const v5 = kvHeads(v);
    const scores = g.op('Add', [g.op('Mul', [g.op('MatMul', [q5, g.op('Transpose', [k5], { perm: { ints: [0, 1, 2, 4, 3] } })]), g.scalarFloat(invSqrtHd)]), mask]);
    const probs = g.op('Softmax', [scores], { axis: -1 });
    const context = g.op('Reshape', [g.op('Transpose', [g.op('MatMul', [probs, v5])], { perm: { ints: [0, 3, 1, 2, 4] } }), g.int64s([-1, H * hd])]);
    const h = g.op('Add', [input, project(g, 'o_proj', context, xa)]);
    const { y: n2, r: r2 } = rmsNorm(g, h, wPost, eps);
    const gate = project(g, 'gate_proj', n2, xa);
    const up = project(g, 'up_proj', n2, xa);
    const sigGate = g.op('Sigmoid', [gate]);
    const act = g.op('Mul', [g.op('Mul', [gate, sigGate]), up]);
    const y = g.op('Add', [h, project(g, 'down_proj', act, xa)]);
    return { y, saved: { x: input, r1, n1, q3: q3raw, k3: k3raw, rq, rk, q5, k5, v5, probs, context, h, r2, n2, gate, up, sigGate, act, xa } };
  };

  /** dx of one projection from its output's gradient; adds the adapter's gradients to `grads`. */
  const projectBackward = (g: GraphBuilder, target: LoraTarget, input: string, dy: string, s: Saved, grads: Map<string, string>) => {
    let dx = matrices.get(target)!.backward(g, dy);
    const f = factors.get(target);
    if (!f) return dx;
    const dyB = g.op('Mul', [g.op('Gemm', [dy, f.b], { transB: 1 }), scale]); // scale · dy·Bᵀ [M, r]
    grads.set(loraGradOutput(target, 'a'), g.op('Gemm', [input, dyB], { transA: 1 })); // xᵀ·(scale·dy·Bᵀ)
    grads.set(loraGradOutput(target, 'b'), g.op('Mul', [g.op('Gemm', [s.xa.get(target)!, dy], { transA: 1 }), scale])); // scale·(x·A)ᵀ·dy
    dx = g.op('Add', [dx, g.op('Gemm', [dyB, f.a], { transB: 1 })]);
    return dx;
  };

  const backwardPass = (g: GraphBuilder, s: Saved, dy: string): { dx: string; grads: Map<string, string> } => {
    const grads = new Map<string, string>();
    // MLP: y = h + down(silu(gate) · up)
    const dAct = projectBackward(g, 'down_proj', s.act, dy, s, grads);
    const dUp = g.op('Mul', [dAct, g.op('Mul', [s.gate, s.sigGate])]);
    // d silu(g)/dg = σ(g)·(1 + g·(1 − σ(g)))
    const dSilu = g.op('Mul', [s.sigGate, g.op('Add', [g.scalarFloat(1), g.op('Mul', [s.gate, g.op('Sub', [g.scalarFloat(1), s.sigGate])])])]);
    const dGate = g.op('Mul', [g.op('Mul', [dAct, s.up]), dSilu]);
    const dN2 = g.op('Add', [projectBackward(g, 'gate_proj', s.n2, dGate, s, grads), projectBackward(g, 'up_proj', s.n2, dUp, s, grads)]);
    const dh = g.op('Add', [dy, rmsNormBackward(g, s.h, s.r2, wPost, dN2)]);
    // Attention: h = x + o_proj(context)
    const dContext = projectBackward(g, 'o_proj', s.context, dh, s, grads);
    const dC5 = g.op('Transpose', [g.op('Reshape', [dContext, shape(g, [KV, rep, hd])])], { perm: { ints: [0, 2, 3, 1, 4] } });
    const transposeLast = (t: string) => g.op('Transpose', [t], { perm: { ints: [0, 1, 2, 4, 3] } });
    const dProbs = g.op('MatMul', [dC5, transposeLast(s.v5)]);
    const sumOverRep = (t: string) => g.op('ReduceSum', [t, g.int64s([2])], { keepdims: 1 });
    const dV5 = sumOverRep(g.op('MatMul', [transposeLast(s.probs), dC5]));
    const dScores = g.op('Mul', [g.op('Mul', [s.probs, g.op('Sub', [dProbs, g.op('ReduceSum', [g.op('Mul', [dProbs, s.probs]), g.int64s([-1])], { keepdims: 1 })])]), g.scalarFloat(invSqrtHd)]);
    const dQ5 = g.op('MatMul', [dScores, s.k5]);
    const dK5 = sumOverRep(g.op('MatMul', [transposeLast(dScores), s.q5]));
    const tokensFirst = (t: string, heads: number) => g.op('Reshape', [g.op('Transpose', [g.op('Squeeze', [t, g.int64s([2])])], { perm: { ints: [0, 2, 1, 3] } }), g.int64s([-1, heads, hd])]);
    let dQ3 = rotaryBackward(g, g.op('Reshape', [g.op('Transpose', [dQ5], { perm: { ints: [0, 3, 1, 2, 4] } }), g.int64s([-1, H, hd])]), cos, sin, hd);
    let dK3 = rotaryBackward(g, tokensFirst(dK5, KV), cos, sin, hd);
    if (qNorm && kNorm) {
      dQ3 = rmsNormBackward(g, s.q3, s.rq!, qNorm, dQ3);
      dK3 = rmsNormBackward(g, s.k3, s.rk!, kNorm, dK3);
    }
    const dV = g.op('Reshape', [tokensFirst(dV5, KV), g.int64s([-1, KV * hd])]);
    const dN1 = g.op('Add', [
      g.op('Add', [projectBackward(g, 'q_proj', s.n1, g.op('Reshape', [dQ3, g.int64s([-1, H * hd])]), s, grads), projectBackward(g, 'k_proj', s.n1, g.op('Reshape', [dK3, g.int64s([-1, KV * hd])]), s, grads)]),
      projectBackward(g, 'v_proj', s.n1, dV, s, grads),
    ]);
    return { dx: g.op('Add', [dh, rmsNormBackward(g, s.x, s.r1, wIn, dN1)]), grads };
  };

  const gradNames = targets.flatMap((t) => [loraGradOutput(t, 'a'), loraGradOutput(t, 'b')]);
  const outputs: BranchOutputs = {
    names: ['out', ...gradNames, ...savedList.map(({ name }) => `saved_out.${name}`)],
    ranks: [2, ...gradNames.map(() => 2), ...savedList.map(({ rank }) => rank)],
  };
  const savedOutputs = (s: Saved) => new Map([...savedRecord(s, targets)].map(([name, v]) => [`saved_out.${name}`, v]));

  const forwardSaving = leafBranch(root, outputs, 'fs', (g) => {
    const f = forward(g, x);
    return new Map([['out', f.y], ...savedOutputs(f.saved)]);
  });
  const forwardOnly = leafBranch(root, outputs, 'fp', (g) => new Map([['out', forward(g, x).y]]));
  const backwardFromSaved = leafBranch(root, outputs, 'bs', (g) => {
    const v = (name: string) => savedInputs.get(name)!;
    // What the forward did not keep, made again as it made them.
    const sigGate = g.op('Sigmoid', [v('gate')]);
    const s: Saved = {
      x, r1: v('r1'), n1: rmsNormed(g, x, v('r1'), wIn), q5: v('q5'), k5: v('k5'), v5: v('v5'), probs: v('probs'), context: v('context'), h: v('h'), r2: v('r2'),
      n2: rmsNormed(g, v('h'), v('r2'), wPost), gate: v('gate'), up: v('up'), sigGate, act: g.op('Mul', [g.op('Mul', [v('gate'), sigGate]), v('up')]),
      q3: config.qkNorm ? v('q3') : '', k3: config.qkNorm ? v('k3') : '', rq: config.qkNorm ? v('rq') : null, rk: config.qkNorm ? v('rk') : null,
      xa: new Map(targets.map((t) => [t, v(`xa.${t}`)])),
    };
    const { dx, grads } = backwardPass(g, s, dyIn);
    return new Map([['out', dx], ...grads]);
  });
  const backwardRecomputing = leafBranch(root, outputs, 'br', (g) => {
    const { dx, grads } = backwardPass(g, forward(g, x).saved, dyIn);
    return new Map([['out', dx], ...grads]);
  });

  rootIf(root, outputs, backward, ifBranch(root, outputs, 'b', save, backwardFromSaved, backwardRecomputing), ifBranch(root, outputs, 'f', save, forwardSaving, forwardOnly),
    (name, i) => (i === 0 ? ['M', D] : Array.from({ length: outputs.ranks[i] }, (_, k) => `${name}_d${k}`)));
  return root.toModelBytes('hearth_train_layer');
}
