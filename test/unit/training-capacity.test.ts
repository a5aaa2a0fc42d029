// Jobs too large for the wasm heap are refused with a clear message; wasm aborts are explained.
import { describe, expect, it } from 'vitest';
import { assertFitsWasmHeap, explainTrainingError, persistentTrainingBytes } from '../../worker/training/capacity.js';
import * as tf from '@tensorflow/tfjs-core';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { buildTrainingModel } from '../../worker/training/loop.js';
import { countParameters, randomWeights } from '../../worker/training/tensor-utils.js';
import { tinyConfig } from './training-helpers.js';

/** Qwen2.5-0.5B's shape: 494M parameters, tied embeddings. */
const qwen05 = tinyConfig({ architecture: 'qwen2', vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14, numKvHeads: 2, headDim: 64, attentionBias: true });

describe('capacity', () => {
  it('counts parameters like Hugging Face does', () => {
    expect(countParameters(qwen05)).toBe(494_032_768);
  });

  it('allows LoRA on a 0.5B model, refuses its full fine-tuning, and refuses LoRA on 1.5B', () => {
    expect(() => assertFitsWasmHeap(qwen05, 'lora')).not.toThrow();
    expect(() => assertFitsWasmHeap(qwen05, 'full')).toThrow(/full fine-tuning of a 494M-parameter model needs about 9\.9 GB.*use LoRA/);
    const qwen15 = { ...qwen05, hiddenSize: 1536, intermediateSize: 8960, numLayers: 28, numHeads: 12, headDim: 128 };
    expect(() => assertFitsWasmHeap(qwen15, 'lora')).toThrow(/LoRA training of a \d+M-parameter model/);
    expect(() => assertFitsWasmHeap(tinyConfig(), 'full')).not.toThrow();
  });

  it("LoRA's estimate is what a real LoRA training model holds, apart from its small adapters", async () => {
    await initTrainingBackend({ log: () => {} });
    // A wide vocabulary, as in real models, so the LM head and its cached transpose weigh what they do there.
    const cfg = tinyConfig({ vocabSize: 8192 });
    const weights = randomWeights(cfg, 3);
    const before = tf.memory().numBytes;
    const model = buildTrainingModel({ config: cfg, weights, baseModelName: 'tiny', mode: 'lora' });
    const ids = Int32Array.from({ length: 8 }, (_, i) => 3 + i);
    tf.dispose(model.forward({ rows: 1, length: 8, inputIds: ids, positions: Int32Array.from(ids.keys()), segmentIds: new Int32Array(8) })); // caches the head's transpose
    const held = tf.memory().numBytes - before;
    const adapters = model.lora!.toPeftTensors();
    const adapterBytes = [...adapters.values()].reduce((a, t) => a + t.data.length * 4, 0);
    model.dispose();
    expect(held - adapterBytes).toBe(persistentTrainingBytes(cfg, 'lora'));
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
