// How llama.cpp's converter lays a Hugging Face Llama/Qwen model out as GGUF: tensor names, tensor order,
// the q/k row permutation of the llama architecture, and the model metadata keys. Used to write GGUF files
// (gguf-writer.ts); gguf-model.ts reads the same layout back.
import type { ModelConfig } from './model-config.js';
import type { GgufMetaValue } from './gguf-writer.js';

export type GgufArchitecture = 'llama' | 'qwen2' | 'qwen3';

/** HF → GGUF names of the model-wide tensors and of each layer's (`model.layers.N.` → `blk.N.`). */
export const GLOBAL_NAMES: Record<string, string> = {
  'model.embed_tokens.weight': 'token_embd.weight',
  'model.norm.weight': 'output_norm.weight',
  'lm_head.weight': 'output.weight',
};
export const LAYER_NAMES: Record<string, string> = {
  'input_layernorm.weight': 'attn_norm.weight',
  'self_attn.q_proj.weight': 'attn_q.weight',
  'self_attn.q_proj.bias': 'attn_q.bias',
  'self_attn.k_proj.weight': 'attn_k.weight',
  'self_attn.k_proj.bias': 'attn_k.bias',
  'self_attn.v_proj.weight': 'attn_v.weight',
  'self_attn.v_proj.bias': 'attn_v.bias',
  'self_attn.q_norm.weight': 'attn_q_norm.weight',
  'self_attn.k_norm.weight': 'attn_k_norm.weight',
  'self_attn.o_proj.weight': 'attn_output.weight',
  'post_attention_layernorm.weight': 'ffn_norm.weight',
  'mlp.gate_proj.weight': 'ffn_gate.weight',
  'mlp.up_proj.weight': 'ffn_up.weight',
  'mlp.down_proj.weight': 'ffn_down.weight',
};

/** HF tensor name → GGUF tensor name (throws for a name llama.cpp's layout has no place for). */
export function ggufTensorName(hfName: string): string {
  if (hfName in GLOBAL_NAMES) return GLOBAL_NAMES[hfName];
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hfName);
  if (m && m[2] in LAYER_NAMES) return `blk.${m[1]}.${LAYER_NAMES[m[2]]}`;
  throw new Error(`no GGUF name for tensor ${hfName}`);
}

/** One tensor of a model in HF terms: its name and row-major shape ([rows, cols] for matrices). */
export interface HfTensorSpec { name: string; shape: number[] }

/** The tensors of a Llama-family config, in the order llama.cpp's converter writes them. */
export function llamaTensorSpecs(config: ModelConfig): HfTensorSpec[] {
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, headDim: hd, intermediateSize: F, vocabSize: V } = config;
  const specs: HfTensorSpec[] = [{ name: 'model.embed_tokens.weight', shape: [V, D] }];
  for (let i = 0; i < config.numLayers; i++) {
    const p = `model.layers.${i}.`;
    specs.push({ name: p + 'input_layernorm.weight', shape: [D] });
    specs.push({ name: p + 'self_attn.q_proj.weight', shape: [H * hd, D] });
    if (config.attentionBias) specs.push({ name: p + 'self_attn.q_proj.bias', shape: [H * hd] });
    specs.push({ name: p + 'self_attn.k_proj.weight', shape: [KV * hd, D] });
    if (config.attentionBias) specs.push({ name: p + 'self_attn.k_proj.bias', shape: [KV * hd] });
    specs.push({ name: p + 'self_attn.v_proj.weight', shape: [KV * hd, D] });
    if (config.attentionBias) specs.push({ name: p + 'self_attn.v_proj.bias', shape: [KV * hd] });
    if (config.qkNorm) {
      specs.push({ name: p + 'self_attn.q_norm.weight', shape: [hd] });
      specs.push({ name: p + 'self_attn.k_norm.weight', shape: [hd] });
    }
    specs.push({ name: p + 'self_attn.o_proj.weight', shape: [D, H * hd] });
    specs.push({ name: p + 'post_attention_layernorm.weight', shape: [D] });
    specs.push({ name: p + 'mlp.gate_proj.weight', shape: [F, D] });
    specs.push({ name: p + 'mlp.up_proj.weight', shape: [F, D] });
    specs.push({ name: p + 'mlp.down_proj.weight', shape: [D, F] });
  }
  specs.push({ name: 'model.norm.weight', shape: [D] });
  if (!config.tieWordEmbeddings) specs.push({ name: 'lm_head.weight', shape: [V, D] });
  return specs;
}

/**
 * The number of heads whose rows llama.cpp permutes in this tensor, or 0. llama.cpp's converter permutes
 * q/k rows of the llama architecture (its rotary kernel pairs adjacent elements: HF row j·hd/2 + i of a
 * head becomes GGUF row 2i + j); Qwen uses the NeoX rotary layout and is written as is.
 */
export function qkPermutationHeads(hfName: string, config: ModelConfig, arch: GgufArchitecture): number {
  if (arch !== 'llama') return 0;
  if (/self_attn\.q_proj\.weight$/.test(hfName)) return config.numHeads;
  if (/self_attn\.k_proj\.weight$/.test(hfName)) return config.numKvHeads;
  return 0;
}

/** The HF row stored at GGUF row `row` of a permuted q/k tensor (rowsPerHead = head dim). */
export function hfRowOfPermutedRow(row: number, rowsPerHead: number): number {
  const head = Math.floor(row / rowsPerHead), r = row % rowsPerHead, half = rowsPerHead / 2;
  return head * rowsPerHead + (r & 1) * half + (r >> 1);
}

/** llama.cpp's HF → GGUF q/k row permutation of a whole [rows, cols] tensor (gguf-model.ts's unpermuteQK undoes it). */
export function permuteQK(data: Float32Array, rows: number, cols: number, heads: number): Float32Array {
  const out = new Float32Array(data.length);
  const rowsPerHead = rows / heads;
  for (let row = 0; row < rows; row++) {
    const src = hfRowOfPermutedRow(row, rowsPerHead) * cols;
    out.set(data.subarray(src, src + cols), row * cols);
  }
  return out;
}

/** The `{arch}.*` model metadata llama.cpp reads for a Llama-family config. */
export function llamaModelMetadata(config: ModelConfig, arch: GgufArchitecture): Record<string, GgufMetaValue> {
  const u32 = (value: number): GgufMetaValue => ({ type: 'u32', value });
  const f32 = (value: number): GgufMetaValue => ({ type: 'f32', value });
  const md: Record<string, GgufMetaValue> = {
    'general.architecture': { type: 'string', value: arch },
    [`${arch}.vocab_size`]: u32(config.vocabSize),
    [`${arch}.context_length`]: u32(config.maxPositionEmbeddings),
    [`${arch}.embedding_length`]: u32(config.hiddenSize),
    [`${arch}.feed_forward_length`]: u32(config.intermediateSize),
    [`${arch}.block_count`]: u32(config.numLayers),
    [`${arch}.attention.head_count`]: u32(config.numHeads),
    [`${arch}.attention.head_count_kv`]: u32(config.numKvHeads),
    [`${arch}.attention.key_length`]: u32(config.headDim),
    [`${arch}.attention.value_length`]: u32(config.headDim),
    [`${arch}.rope.dimension_count`]: u32(config.headDim),
    [`${arch}.attention.layer_norm_rms_epsilon`]: f32(config.rmsNormEps),
    [`${arch}.rope.freq_base`]: f32(config.ropeTheta),
  };
  if (config.ropeScaling) throw new Error('writing rope scaling to GGUF is not supported');
  return md;
}
