// Token embeddings: gathered from the file's own blocks, from float16, or from float32.
import type { ModelConfig } from './model-config.js';
import { DataType, type GraphBuilder } from './onnx-proto.js';
import type { SourceTensor, WeightSource } from './weight-source.js';
import { nbitsLayout } from './gguf-repack.js';
import type { GraphOptions } from './decoder-options.js';
import { repackStacked, tensorKey } from './decoder-quantized.js';

/** The embeddings of `inputIds` [B, S] as [B, S, D]: the stored form where one serves, else a float32 Gather. */
export function tokenEmbedding(g: GraphBuilder, config: ModelConfig, weights: WeightSource, inputIds: string, opts: GraphOptions): string {
  const { hiddenSize: D, vocabSize: V } = config;
  const embedTokens = weights.get('model.embed_tokens.weight')!;
  return storedEmbedding(g, embedTokens, inputIds, opts) ?? g.op('Gather', [g.floats('model.embed_tokens.weight', [V, D], () => weights.get('model.embed_tokens.weight')!.f32()), inputIds], { axis: 0 });
}

/**
 * Token embeddings gathered from the file's own blocks (com.microsoft:GatherBlockQuantized over the bytes
 * the tied LM head's MatMulNBits reads: one copy), offsets added per block. Null: gather float32 instead.
 */
function storedEmbedding(g: GraphBuilder, embed: SourceTensor, inputIds: string, opts: GraphOptions): string | null {
  if ((opts.weightType ?? 'stored') !== 'stored') return null;
  if (opts.half && embed.f16) {
    const table = g.halves(`f16.${tensorKey(embed)}`, embed.shape, () => embed.f16!());
    return g.op('Cast', [g.op('Gather', [table, inputIds], { axis: 0 })], { to: DataType.FLOAT });
  }
  if (!embed.ggml) return null;
  const layout = nbitsLayout(embed.ggml.type);
  if (!layout) return null;
  const [V, D] = embed.shape;
  const { bits, block } = layout;
  const tensors = [embed];
  const name = `nbits.${tensorKey(embed)}`;
  const repacked = () => repackStacked(tensors, D);
  // MatMulNBits' [V, D/block, block·bits/8] bytes, read as [V, D·bits/8] rows.
  const packed = g.initializer(name, DataType.UINT8, [V, D / block, (block * bits) / 8], () => repacked().packed);
  const rows = g.alias(name + '.rows', packed, DataType.UINT8, [V, (D * bits) / 8], () => repacked().packed);
  const scales = g.floats(name + '.scales', [V * (D / block)], () => repacked().scales);
  const scaleRows = g.alias(name + '.scale_rows', scales, DataType.FLOAT, [V, D / block], () => { const s = repacked().scales; return new Uint8Array(s.buffer, s.byteOffset, s.byteLength); });
  const x = g.op('GatherBlockQuantized', [rows, inputIds, scaleRows], { gather_axis: 0, quantize_axis: 1, block_size: block, bits }, 'com.microsoft'); // [B, S, D]
  if (!layout.hasOffsets) return x;
  const offsets = g.op('Gather', [g.floats(name + '.offsets', [V, D / block], () => repacked().offsets!), inputIds], { axis: 0 }); // [B, S, D/block]
  const blocks = g.op('Reshape', [x, g.int64s([0, 0, D / block, block])]);
  return g.op('Reshape', [g.op('Add', [blocks, g.op('Unsqueeze', [offsets, g.int64s([-1])])]), g.int64s([0, 0, D])]);
}
