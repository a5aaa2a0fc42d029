import { describe, expect, it } from 'vitest';
import { estimateMemoryNeedMiB, kvCacheMiB } from '../../src/domain/memory-fit.js';
import { kvCacheShapeOf, parameterCount } from '../../src/runtime/model-size.js';
import type { ModelConfig } from '../../src/runtime/model-config.js';

const llama32_1b: ModelConfig = {
  architecture: 'llama', vocabSize: 128256, hiddenSize: 2048, intermediateSize: 8192, numLayers: 16, numHeads: 32, numKvHeads: 8,
  headDim: 64, maxPositionEmbeddings: 131072, rmsNormEps: 1e-5, ropeTheta: 500000, ropeScaling: null, tieWordEmbeddings: true,
  attentionBias: false, qkNorm: false, bosTokenId: 128000, eosTokenIds: [128001], padTokenId: null,
};
const qwen25_05b: ModelConfig = {
  ...llama32_1b, architecture: 'qwen2', vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14,
  numKvHeads: 2, headDim: 64, attentionBias: true,
};

describe('parameterCount', () => {
  it('matches the published counts of Llama-3.2-1B and Qwen2.5-0.5B', () => {
    expect(parameterCount(llama32_1b)).toBe(1_235_814_400);
    expect(parameterCount(qwen25_05b)).toBe(494_032_768);
  });

  it('counts an untied lm_head and Qwen3 q/k norms', () => {
    expect(parameterCount({ ...llama32_1b, tieWordEmbeddings: false }) - parameterCount(llama32_1b)).toBe(128256 * 2048);
    expect(parameterCount({ ...llama32_1b, qkNorm: true }) - parameterCount(llama32_1b)).toBe(16 * 2 * 64);
  });
});

describe('KV cache from the model shape', () => {
  it('feeds the memory estimate', () => {
    // 16 layers × 8 KV heads × 64 × 4096 tokens × 2 (K and V) × 4 bytes = 256 MiB
    const kv = kvCacheMiB(kvCacheShapeOf(llama32_1b, 4096, 4));
    expect(kv).toBe(256);
    // f32 weights: 1,235,814,400 × 4 B = 4714.2 MiB; + 256 + 512 → 5483
    expect(estimateMemoryNeedMiB({ paramCount: parameterCount(llama32_1b), bytesPerParam: 4, kvCacheMiB: kv })).toBe(5483);
  });
});
