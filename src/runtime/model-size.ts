// Sizes the memory-fit rule needs, computed from the shared ModelConfig: how many parameters a
// model has, and the shape of its KV cache.
import type { ModelConfig } from './model-config.js';
import type { KvCacheShape } from '../domain/memory-fit.js';

/** Exact parameter count of a Llama-family decoder (Llama, Mistral, Qwen2, Qwen3). */
export function parameterCount(c: ModelConfig): number {
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  const attention =
    c.hiddenSize * qDim + 2 * c.hiddenSize * kvDim + qDim * c.hiddenSize + (c.attentionBias ? qDim + 2 * kvDim : 0);
  const mlp = 3 * c.hiddenSize * c.intermediateSize; // gate, up, down
  const norms = 2 * c.hiddenSize + (c.qkNorm ? 2 * c.headDim : 0);
  const embeddings = c.vocabSize * c.hiddenSize * (c.tieWordEmbeddings ? 1 : 2);
  return embeddings + c.numLayers * (attention + mlp + norms) + c.hiddenSize; // + final norm
}

/** KV cache shape for `tokens` cached tokens (context length × concurrent sequences). */
export function kvCacheShapeOf(c: ModelConfig, tokens: number, bytesPerValue: number): KvCacheShape {
  return { numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, tokens, bytesPerValue };
}
