// Small helpers on plain Float32Arrays shared by the training files.
import type { ModelConfig, Weights } from '../../src/runtime/model-config.js';
import { seededRandom } from '../../src/runtime/generate.js';

/** Row-major [rows, cols] -> [cols, rows]. */
export function transpose2d(data: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const ro = r * cols;
    for (let c = 0; c < cols; c++) out[c * rows + r] = data[ro + c];
  }
  return out;
}

/** Deterministic PRNG in [0, 1) (mulberry32), for seeded initialisation and shuffling: the runtime's. */
export const mulberry32 = seededRandom;

/** Standard normal samples (Box-Muller) from a uniform generator. */
export function normalSampler(random: () => number): () => number {
  return () => {
    const u = Math.max(random(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
  };
}

/** The Hugging Face tensor names and shapes a Llama-family config needs. */
export function expectedWeightShapes(config: ModelConfig): Map<string, number[]> {
  const d = config.hiddenSize;
  const q = config.numHeads * config.headDim;
  const kv = config.numKvHeads * config.headDim;
  const ffn = config.intermediateSize;
  const shapes = new Map<string, number[]>();
  shapes.set('model.embed_tokens.weight', [config.vocabSize, d]);
  for (let l = 0; l < config.numLayers; l++) {
    const p = `model.layers.${l}`;
    shapes.set(`${p}.input_layernorm.weight`, [d]);
    shapes.set(`${p}.self_attn.q_proj.weight`, [q, d]);
    shapes.set(`${p}.self_attn.k_proj.weight`, [kv, d]);
    shapes.set(`${p}.self_attn.v_proj.weight`, [kv, d]);
    shapes.set(`${p}.self_attn.o_proj.weight`, [d, q]);
    if (config.attentionBias) {
      shapes.set(`${p}.self_attn.q_proj.bias`, [q]);
      shapes.set(`${p}.self_attn.k_proj.bias`, [kv]);
      shapes.set(`${p}.self_attn.v_proj.bias`, [kv]);
    }
    if (config.qkNorm) {
      shapes.set(`${p}.self_attn.q_norm.weight`, [config.headDim]);
      shapes.set(`${p}.self_attn.k_norm.weight`, [config.headDim]);
    }
    shapes.set(`${p}.post_attention_layernorm.weight`, [d]);
    shapes.set(`${p}.mlp.gate_proj.weight`, [ffn, d]);
    shapes.set(`${p}.mlp.up_proj.weight`, [ffn, d]);
    shapes.set(`${p}.mlp.down_proj.weight`, [d, ffn]);
  }
  shapes.set('model.norm.weight', [d]);
  if (!config.tieWordEmbeddings) shapes.set('lm_head.weight', [config.vocabSize, d]);
  return shapes;
}

/**
 * Random weights for tests and benchmarks: normal(0, 0.02) matrices (residual output projections
 * scaled by 1/sqrt(2 * layers), as GPT-2 does), norms at 1, biases at 0.
 */
export function randomWeights(config: ModelConfig, seed = 0): Weights {
  const normal = normalSampler(mulberry32(seed));
  const weights: Weights = new Map();
  for (const [name, shape] of expectedWeightShapes(config)) {
    const size = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(size);
    if (name.endsWith('norm.weight')) data.fill(1);
    else if (!name.endsWith('.bias')) {
      const std = name.endsWith('o_proj.weight') || name.endsWith('down_proj.weight') ? 0.02 / Math.sqrt(2 * config.numLayers) : 0.02;
      for (let i = 0; i < size; i++) data[i] = normal() * std;
    }
    weights.set(name, { shape, data });
  }
  return weights;
}

/** Parameters in a config (counting a tied embedding once). */
export function countParameters(config: ModelConfig): number {
  let n = 0;
  for (const shape of expectedWeightShapes(config).values()) n += shape.reduce((a, b) => a * b, 1);
  return n;
}

/** ||a - b|| / ||b||: how far a gradient or logit vector is from its reference (tests and check scripts). */
export function relL2(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += b[i] ** 2;
  }
  return Math.sqrt(num / den);
}
