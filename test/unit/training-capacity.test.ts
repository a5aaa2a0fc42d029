// Jobs too large for the wasm heap are refused with a clear message; wasm aborts are explained.
import { describe, expect, it } from 'vitest';
import { assertFitsWasmHeap, explainTrainingError, layerActivationBytes, persistentTrainingBytes, recomputeBudgetBytes, recomputedLayerCount, savedActivationBytes } from '../../worker/training/capacity.js';
import * as tf from '@tensorflow/tfjs-core';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { buildTrainingModel } from '../../worker/training/loop.js';
import { setOnnxRuntimeCompute } from '../../worker/training/ort-kernels.js';
import { countParameters, randomWeights } from '../../worker/training/tensor-utils.js';
import { tinyConfig } from './training-helpers.js';

/** Qwen2.5-0.5B's shape: 494M parameters, tied embeddings. */
const qwen05 = tinyConfig({ architecture: 'qwen2', vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14, numKvHeads: 2, headDim: 64, attentionBias: true });

describe('capacity', () => {
  it('counts parameters like Hugging Face does', () => {
    expect(countParameters(qwen05)).toBe(494_032_768);
  });

  it('allows LoRA on a 0.5B model at 512 tokens, refuses its full fine-tuning, and refuses what does not fit', () => {
    const qwen15 = { ...qwen05, hiddenSize: 1536, intermediateSize: 8960, numLayers: 28, numHeads: 12, headDim: 128 };
    const gib = 2 ** 30;
    // Frozen base outside the heap (the ONNX Runtime path): only norms, biases and activations in it.
    expect(() => assertFitsWasmHeap(qwen05, 'lora', { frozen: 'outside-heap', microBatchTokens: 512, fusedHead: true, totalMemoryBytes: 24 * gib })).not.toThrow();
    expect(() => assertFitsWasmHeap(qwen15, 'lora', { frozen: 'outside-heap', microBatchTokens: 512, totalMemoryBytes: 24 * gib })).not.toThrow();
    expect(() => assertFitsWasmHeap(qwen15, 'lora', { frozen: 'outside-heap', microBatchTokens: 512, totalMemoryBytes: 8 * gib })).toThrow(
      /LoRA training of a 1544M-parameter model needs about 10\.5 GB of memory .* more than this machine's 8\.6 GB/,
    );
    expect(() => assertFitsWasmHeap(qwen05, 'lora', { frozen: 'outside-heap', microBatchTokens: 8192, totalMemoryBytes: 24 * gib })).toThrow(
      /at 8192 tokens per micro-batch needs about \d+\.\d GB .* even with its layers recomputed; use a smaller micro-batch/,
    );
    // Frozen base in the heap (the XNNPACK reference path), whose [tokens, 151936] logits are TF.js tensors.
    expect(() => assertFitsWasmHeap(qwen05, 'lora')).not.toThrow();
    expect(() => assertFitsWasmHeap(qwen05, 'lora', { microBatchTokens: 128 })).not.toThrow();
    expect(() => assertFitsWasmHeap(qwen05, 'lora', { microBatchTokens: 512 })).toThrow(/at 512 tokens per micro-batch needs about \d+\.\d GB .* use a smaller micro-batch/);
    expect(() => assertFitsWasmHeap(qwen15, 'lora')).toThrow(/LoRA training of a \d+M-parameter model needs about 7\.1 GB of tensors.*too large/);
    expect(() => assertFitsWasmHeap(qwen05, 'full')).toThrow(/full fine-tuning of a 494M-parameter model needs about 9\.9 GB.*use LoRA/);
    expect(() => assertFitsWasmHeap(tinyConfig(), 'full', { microBatchTokens: 2048 })).not.toThrow();
  });

  it('a 0.5B LoRA step at 1 x 512 recomputes most of its layers, at 1 x 128 a few, a 20M step none', () => {
    const budget = recomputeBudgetBytes(qwen05, 'lora', 'outside-heap');
    expect(recomputedLayerCount(qwen05, 'lora', 'outside-heap', 1, 128)).toBe(2);
    const config20m = { ...qwen05, architecture: 'llama' as const, vocabSize: 32000, hiddenSize: 288, intermediateSize: 768, numLayers: 6, numHeads: 6, headDim: 48, attentionBias: false, tieWordEmbeddings: false };
    expect(savedActivationBytes(config20m, 4, 128)).toBeLessThan(recomputeBudgetBytes(config20m, 'full', 'heap'));
    expect(recomputedLayerCount(config20m, 'full', 'heap', 4, 128)).toBe(0);
    expect(recomputedLayerCount(config20m, 'lora', 'outside-heap', 1, 512)).toBe(0);
    const recomputed = recomputedLayerCount(qwen05, 'lora', 'outside-heap', 1, 512);
    expect(recomputed).toBeGreaterThan(12);
    expect(recomputed).toBeLessThan(24);
    // The layers kept are within the budget, one more would not be.
    const perLayer = layerActivationBytes(qwen05, 1, 512);
    expect((24 - recomputed) * perLayer).toBeLessThanOrEqual(budget);
    expect((24 - recomputed + 1) * perLayer).toBeGreaterThan(budget);
    // With the base in the heap there is less room: more layers are recomputed.
    expect(recomputedLayerCount(qwen05, 'lora', 'heap', 1, 512)).toBeGreaterThan(recomputed);
  });

  it('the activation estimate is within 25% of what a LoRA forward keeps for its backward', async () => {
    await initTrainingBackend({ log: () => {} });
    // Qwen-like proportions (FFN ~5.4 d, 7 query heads per kv head), small enough to run here.
    const cfg = tinyConfig({ architecture: 'qwen2', attentionBias: true, hiddenSize: 256, intermediateSize: 1376, numHeads: 4, numKvHeads: 1, headDim: 64 });
    const keptForBackward = (layers: number, rows: number, length: number) => {
      const config = { ...cfg, numLayers: layers };
      const model = buildTrainingModel({ config, weights: randomWeights(config, 1), baseModelName: 'tiny', mode: 'lora', recompute: 'never' });
      const n = rows * length;
      const ids = Int32Array.from({ length: n }, (_, i) => 3 + (i % 500));
      const batch = { rows, length, inputIds: ids, positions: Int32Array.from({ length: n }, (_, i) => i % length), segmentIds: new Int32Array(n) };
      let kept = 0;
      const before = tf.memory().numBytes;
      // The first gradient to run sees the forward's tidy closed: what is left is what was saved.
      const probe = tf.customGrad((...args: Array<tf.Tensor | tf.GradSaveFunc>) => ({
        value: tf.sum(args[0] as tf.Tensor),
        gradFunc: () => {
          kept = tf.memory().numBytes - before;
          return [tf.onesLike(args[0] as tf.Tensor)];
        },
      }));
      const { value, grads } = tf.variableGrads(() => probe(model.hidden(batch, true)) as tf.Scalar, model.trainableVariables());
      tf.dispose([value, ...Object.values(grads)]);
      model.dispose();
      return kept;
    };
    for (const [rows, length] of [[1, 256], [2, 96]]) {
      const perLayer = keptForBackward(2, rows, length) - keptForBackward(1, rows, length);
      const estimate = layerActivationBytes(cfg, rows, length);
      console.log(`${rows} x ${length}: ${(perLayer / 1e6).toFixed(1)} MB kept per layer, estimate ${(estimate / 1e6).toFixed(1)} MB`);
      expect(Math.abs(estimate - perLayer) / perLayer).toBeLessThan(0.25);
    }
  }, 180_000); // four small training models; slow only on a loaded machine

  it("LoRA's estimate is what a real LoRA training model holds in the heap, apart from its small adapters", async () => {
    await initTrainingBackend({ log: () => {} });
    // A wide vocabulary, as in real models, so the LM head and its cached transpose weigh what they do there.
    const cfg = tinyConfig({ vocabSize: 8192, attentionBias: true });
    const weights = randomWeights(cfg, 3);
    const ids = Int32Array.from({ length: 8 }, (_, i) => 3 + i);
    const batch = { rows: 1, length: 8, inputIds: ids, positions: Int32Array.from(ids.keys()), segmentIds: new Int32Array(8) };
    for (const ort of [true, false]) {
      setOnnxRuntimeCompute(ort); // the ONNX Runtime path keeps the frozen base outside the heap
      try {
        const before = tf.memory().numBytes;
        const model = buildTrainingModel({ config: cfg, weights, baseModelName: 'tiny', mode: 'lora' });
        tf.dispose(model.forward(batch)); // caches the head's transpose (heap placement)
        const held = tf.memory().numBytes - before;
        const adapterBytes = [...model.lora!.toPeftTensors().values()].reduce((a, t) => a + t.data.length * 4, 0);
        expect(model.frozenOutsideHeap).toBe(ort);
        model.dispose();
        expect(held - adapterBytes).toBe(persistentTrainingBytes(cfg, 'lora', ort ? 'outside-heap' : 'heap'));
      } finally {
        setOnnxRuntimeCompute(true);
      }
    }
  });

  it('explains a wasm abort and passes other errors through', () => {
    const abort = new Error('Aborted(). Build with -sASSERTIONS for more info.');
    abort.name = 'RuntimeError';
    expect(explainTrainingError(abort).message).toMatch(/wasm runtime aborted.*must be restarted/);
    const outOfBounds = new Error('memory access out of bounds');
    outOfBounds.name = 'RuntimeError';
    expect(explainTrainingError(outOfBounds).message).toMatch(/wasm runtime aborted.*must be restarted/);
    const other = new Error('token id 9999 is outside the vocabulary (512)');
    expect(explainTrainingError(other)).toBe(other);
  });
});
