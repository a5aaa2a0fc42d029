// Test helper: small GGUF files with known contents (including deliberately broken ones) through the
// product's GGUF writer and llama.cpp layout (src/runtime/gguf-writer.ts, gguf-llama-layout.ts).
import type { ModelConfig, Weights } from '../../src/runtime/model-config.js';
import { GgufWriter, type GgufMetaValue } from '../../src/runtime/gguf-writer.js';
import { ggufTensorName, llamaModelMetadata, permuteQK, qkPermutationHeads, type GgufArchitecture } from '../../src/runtime/gguf-llama-layout.js';
import { tensorByteSize } from '../../src/runtime/gguf-dequant.js';

export { permuteQK };
export type MetaValue = GgufMetaValue;

/** A tensor and its bytes; `byteSize` declares the size of a type the writer cannot size itself. */
export interface GgufTensorSpec { name: string; dims: number[]; type: number; data: Uint8Array; byteSize?: number }

/** Write tensors with given bytes; a tensor with fewer bytes than its dims need makes a truncated file. */
export function writeGguf(path: string, metadata: Record<string, MetaValue>, tensors: GgufTensorSpec[], opts: { magic?: string; version?: number } = {}): void {
  const w = new GgufWriter(path, { metadata, tensors, magic: opts.magic, version: opts.version });
  for (const t of tensors) {
    const size = t.byteSize ?? tensorByteSize(t.type, t.dims.reduce((a, b) => a * b, 1), t.name);
    w.append(t.data.subarray(0, size));
    if (t.data.length < size) { w.abort(); return; }
  }
  w.close();
}

const f32bytes = (a: Float32Array) => new Uint8Array(a.buffer.slice(a.byteOffset, a.byteOffset + a.byteLength));

/** A llama-family GGUF (F32) from HF-layout weights, with a small SentencePiece-style vocabulary. */
export function writeLlamaGguf(path: string, config: ModelConfig, weights: Weights, tokens: string[], scores: number[], types: number[], extra: Record<string, MetaValue> = {}, arch: GgufArchitecture = 'llama'): void {
  const tensors: GgufTensorSpec[] = [];
  for (const [name, t] of weights) {
    const heads = qkPermutationHeads(name, config, arch);
    const data = heads ? permuteQK(t.data, t.shape[0], t.shape[1], heads) : t.data;
    tensors.push({ name: ggufTensorName(name), dims: [...t.shape].reverse(), type: 0, data: f32bytes(data) });
  }
  writeGguf(path, {
    ...llamaModelMetadata(config, arch),
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
