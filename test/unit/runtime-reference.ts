// A direct, loop-based Llama/Qwen forward pass in plain JS: the oracle for the ONNX graphs.
// Deliberately naive (no cache, no fusion, repeat_kv by index) so it shares no code with the graph.
import type { ModelConfig, Weights } from '../../src/runtime/model-config.js';
import { inverseFrequencies } from '../../src/runtime/rope.js';

function matvec(w: Float32Array, x: Float64Array, rows: number, cols: number, bias?: Float32Array): Float64Array {
  const out = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = bias ? bias[r] : 0;
    for (let c = 0; c < cols; c++) s += w[r * cols + c] * x[c];
    out[r] = s;
  }
  return out;
}

function rmsNorm(x: Float64Array, w: Float32Array, eps: number): Float64Array {
  let ss = 0;
  for (const v of x) ss += v * v;
  const inv = 1 / Math.sqrt(ss / x.length + eps);
  return x.map((v, i) => v * inv * w[i]);
}

function rope(x: Float64Array, pos: number, inv: Float64Array): Float64Array {
  const half = inv.length;
  const out = new Float64Array(x.length);
  for (let i = 0; i < half; i++) {
    const c = Math.cos(pos * inv[i]), s = Math.sin(pos * inv[i]);
    out[i] = x[i] * c - x[i + half] * s;
    out[i + half] = x[i + half] * c + x[i] * s;
  }
  return out;
}

/** Logits [positions][vocab] for a token sequence at positions 0..n-1. */
export function referenceLogits(config: ModelConfig, weights: Weights, tokens: number[]): Float64Array[] {
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, headDim: hd, intermediateSize: F, vocabSize: V } = config;
  const w = (n: string) => weights.get(n)!.data;
  const inv = inverseFrequencies(config);
  const emb = w('model.embed_tokens.weight');
  let xs = tokens.map((t) => Float64Array.from(emb.subarray(t * D, (t + 1) * D)));
  for (let l = 0; l < config.numLayers; l++) {
    const p = `model.layers.${l}.`;
    const qs: Float64Array[][] = [], ks: Float64Array[][] = [], vs: Float64Array[][] = [];
    xs.forEach((x, pos) => {
      const h = rmsNorm(x, w(p + 'input_layernorm.weight'), config.rmsNormEps);
      const bias = (n: string) => (config.attentionBias ? w(p + `self_attn.${n}.bias`) : undefined);
      const q = matvec(w(p + 'self_attn.q_proj.weight'), h, H * hd, D, bias('q_proj'));
      const k = matvec(w(p + 'self_attn.k_proj.weight'), h, KV * hd, D, bias('k_proj'));
      const v = matvec(w(p + 'self_attn.v_proj.weight'), h, KV * hd, D, bias('v_proj'));
      const head = (a: Float64Array, i: number) => a.slice(i * hd, (i + 1) * hd);
      const norm = (a: Float64Array, n: string) => (config.qkNorm ? rmsNorm(a, w(p + `self_attn.${n}.weight`), config.rmsNormEps) : a);
      qs.push(Array.from({ length: H }, (_, i) => rope(norm(head(q, i), 'q_norm'), pos, inv)));
      ks.push(Array.from({ length: KV }, (_, i) => rope(norm(head(k, i), 'k_norm'), pos, inv)));
      vs.push(Array.from({ length: KV }, (_, i) => head(v, i)));
    });
    xs = xs.map((x, pos) => {
      const attn = new Float64Array(H * hd);
      for (let h = 0; h < H; h++) {
        const kvh = Math.floor(h / (H / KV));
        const scores = [];
        for (let j = 0; j <= pos; j++) {
          let s = 0;
          for (let d = 0; d < hd; d++) s += qs[pos][h][d] * ks[j][kvh][d];
          scores.push(s / Math.sqrt(hd));
        }
        const m = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - m));
        const z = e.reduce((a, b) => a + b, 0);
        for (let j = 0; j <= pos; j++) for (let d = 0; d < hd; d++) attn[h * hd + d] += (e[j] / z) * vs[j][kvh][d];
      }
      const o = matvec(w(p + 'self_attn.o_proj.weight'), attn, D, H * hd);
      const x2 = x.map((v, i) => v + o[i]);
      const h2 = rmsNorm(x2, w(p + 'post_attention_layernorm.weight'), config.rmsNormEps);
      const g = matvec(w(p + 'mlp.gate_proj.weight'), h2, F, D);
      const u = matvec(w(p + 'mlp.up_proj.weight'), h2, F, D);
      const act = g.map((gv, i) => (gv / (1 + Math.exp(-gv))) * u[i]);
      const down = matvec(w(p + 'mlp.down_proj.weight'), act, D, F);
      return x2.map((v, i) => v + down[i]);
    });
  }
  const head = config.tieWordEmbeddings ? emb : w('lm_head.weight');
  return xs.map((x) => matvec(head, rmsNorm(x, w('model.norm.weight'), config.rmsNormEps), V, D));
}
