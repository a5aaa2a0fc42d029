// Test helper: writes small GGUF v3 files (metadata + F32/raw tensors) so the reader can be tested
// against files with known contents, including deliberately broken ones.
import { writeFileSync } from 'node:fs';
import type { ModelConfig, Weights } from '../../worker/runtime/model-config.js';

export type MetaValue = { type: 'u32' | 'i32' | 'f32' | 'bool' | 'string'; value: number | boolean | string } | { type: 'array'; item: 'string' | 'f32' | 'i32'; value: (string | number)[] };

export interface GgufTensorSpec { name: string; dims: number[]; type: number; data: Uint8Array }

class Buf {
  parts: Buffer[] = [];
  u32(v: number) { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.parts.push(b); }
  i32(v: number) { const b = Buffer.alloc(4); b.writeInt32LE(v); this.parts.push(b); }
  u64(v: number) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.parts.push(b); }
  f32(v: number) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.parts.push(b); }
  str(s: string) { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.parts.push(b); }
  get length() { return this.parts.reduce((a, p) => a + p.length, 0); }
}

const TYPE_ID = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 } as const;

export function writeGguf(path: string, metadata: Record<string, MetaValue>, tensors: GgufTensorSpec[], opts: { magic?: string; version?: number } = {}): void {
  const b = new Buf();
  b.parts.push(Buffer.from(opts.magic ?? 'GGUF', 'ascii'));
  b.u32(opts.version ?? 3);
  b.u64(tensors.length);
  b.u64(Object.keys(metadata).length);
  const writeScalar = (type: string, v: string | number | boolean) => {
    if (type === 'u32') b.u32(v as number); else if (type === 'i32') b.i32(v as number);
    else if (type === 'f32') b.f32(v as number); else if (type === 'bool') b.parts.push(Buffer.from([v ? 1 : 0]));
    else b.str(v as string);
  };
  for (const [k, mv] of Object.entries(metadata)) {
    b.str(k);
    b.u32(TYPE_ID[mv.type]);
    if (mv.type === 'array') { b.u32(TYPE_ID[mv.item]); b.u64(mv.value.length); for (const x of mv.value) writeScalar(mv.item, x); }
    else writeScalar(mv.type, mv.value);
  }
  let offset = 0;
  const offsets: number[] = [];
  for (const t of tensors) {
    b.str(t.name); b.u32(t.dims.length); for (const d of t.dims) b.u64(d); b.u32(t.type);
    offsets.push(offset); b.u64(offset);
    offset += Math.ceil(t.data.length / 32) * 32;
  }
  const pad = (Math.ceil(b.length / 32) * 32) - b.length;
  b.parts.push(Buffer.alloc(pad));
  for (const t of tensors) { b.parts.push(Buffer.from(t.data)); b.parts.push(Buffer.alloc(Math.ceil(t.data.length / 32) * 32 - t.data.length)); }
  writeFileSync(path, Buffer.concat(b.parts));
}

const f32bytes = (a: Float32Array) => new Uint8Array(a.buffer.slice(a.byteOffset, a.byteOffset + a.byteLength));

/** llama.cpp's HF → GGUF q/k row permutation (the inverse of what the importer undoes). */
export function permuteQK(data: Float32Array, rows: number, cols: number, heads: number): Float32Array {
  const hd = rows / heads, half = hd / 2, out = new Float32Array(data.length);
  for (let h = 0; h < heads; h++) for (let i = 0; i < half; i++) for (let j = 0; j < 2; j++)
    out.set(data.subarray((h * hd + j * half + i) * cols, (h * hd + j * half + i + 1) * cols), (h * hd + 2 * i + j) * cols);
  return out;
}

/** A llama GGUF from HF-layout weights, with a small SentencePiece-style vocabulary. */
export function writeLlamaGguf(path: string, config: ModelConfig, weights: Weights, tokens: string[], scores: number[], types: number[], extra: Record<string, MetaValue> = {}, arch: 'llama' | 'qwen2' | 'qwen3' = 'llama'): void {
  const names: Record<string, string> = {
    'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight': 'output_norm.weight', 'lm_head.weight': 'output.weight',
  };
  const layer: Record<string, string> = {
    'input_layernorm.weight': 'attn_norm.weight', 'post_attention_layernorm.weight': 'ffn_norm.weight',
    'self_attn.q_proj.weight': 'attn_q.weight', 'self_attn.k_proj.weight': 'attn_k.weight', 'self_attn.v_proj.weight': 'attn_v.weight',
    'self_attn.o_proj.weight': 'attn_output.weight', 'mlp.gate_proj.weight': 'ffn_gate.weight', 'mlp.up_proj.weight': 'ffn_up.weight', 'mlp.down_proj.weight': 'ffn_down.weight',
    'self_attn.q_proj.bias': 'attn_q.bias', 'self_attn.k_proj.bias': 'attn_k.bias', 'self_attn.v_proj.bias': 'attn_v.bias',
    'self_attn.q_norm.weight': 'attn_q_norm.weight', 'self_attn.k_norm.weight': 'attn_k_norm.weight',
  };
  const tensors: GgufTensorSpec[] = [];
  for (const [name, t] of weights) {
    const m = /^model\.layers\.(\d+)\.(.+)$/.exec(name);
    const gname = m ? `blk.${m[1]}.${layer[m[2]]}` : names[name];
    let data = t.data;
    // llama.cpp permutes q/k rows only for the llama architecture (qwen uses the NeoX rotary layout).
    if (arch === 'llama' && name.endsWith('q_proj.weight')) data = permuteQK(data, t.shape[0], t.shape[1], config.numHeads);
    if (arch === 'llama' && name.endsWith('k_proj.weight')) data = permuteQK(data, t.shape[0], t.shape[1], config.numKvHeads);
    tensors.push({ name: gname, dims: [...t.shape].reverse(), type: 0, data: f32bytes(data) });
  }
  writeGguf(path, {
    'general.architecture': { type: 'string', value: arch },
    [`${arch}.context_length`]: { type: 'u32', value: config.maxPositionEmbeddings },
    [`${arch}.embedding_length`]: { type: 'u32', value: config.hiddenSize },
    [`${arch}.feed_forward_length`]: { type: 'u32', value: config.intermediateSize },
    [`${arch}.block_count`]: { type: 'u32', value: config.numLayers },
    [`${arch}.attention.head_count`]: { type: 'u32', value: config.numHeads },
    [`${arch}.attention.head_count_kv`]: { type: 'u32', value: config.numKvHeads },
    [`${arch}.attention.key_length`]: { type: 'u32', value: config.headDim },
    [`${arch}.attention.layer_norm_rms_epsilon`]: { type: 'f32', value: config.rmsNormEps },
    [`${arch}.rope.freq_base`]: { type: 'f32', value: config.ropeTheta },
    'tokenizer.ggml.model': { type: 'string', value: 'llama' },
    'tokenizer.ggml.tokens': { type: 'array', item: 'string', value: tokens },
    'tokenizer.ggml.scores': { type: 'array', item: 'f32', value: scores },
    'tokenizer.ggml.token_type': { type: 'array', item: 'i32', value: types },
    'tokenizer.ggml.bos_token_id': { type: 'u32', value: 1 },
    'tokenizer.ggml.eos_token_id': { type: 'u32', value: 2 },
    'tokenizer.ggml.unknown_token_id': { type: 'u32', value: 0 },
    ...extra,
  }, tensors);
}
