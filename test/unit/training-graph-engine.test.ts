// The graph engine (worker/training/graph/) against today's TF.js engine on the same float base: per-token
// logprobs, entropies and every LoRA gradient of one micro-batch within 1e-4 relative L2 (both are fp32 and
// differ in summation order only, ~1e-6; a wrong backward op gives O(0.1–1)). Llama-style (GQA, untied) and
// Qwen2-style (q/k/v bias, tied head over two vocabulary chunks), Qwen3-style q/k norm, llama3 rope scaling,
// packed sequences in two rows.
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { ModelConfig } from '../../src/runtime/model-config.js';
import { weightsSource } from '../../src/runtime/weight-source.js';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { GraphLoraModel } from '../../worker/training/graph/graph-model.js';
import { GraphEngine, layerSavedBytes } from '../../worker/training/graph/graph-engine.js';
import { GraphSession } from '../../worker/training/graph/graph-session.js';
import { ALL_LORA_TARGETS } from '../../worker/training/lora.js';
import { buildTrainingModel } from '../../worker/training/loop.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { microBatchGradients, relL2, seededLora, tinyConfig } from './training-helpers.js';

beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
}, 180_000);

/** Logprobs, entropies and gradients of a weighted NLL (weights of both signs) for one micro-batch. */
function measure(kind: 'tfjs' | 'graph', config: ModelConfig, seed: number) {
  const weights = randomWeights(config, seed);
  for (const [name, w] of weights) if (name.endsWith('.bias') || name.includes('norm')) w.data.forEach((v, i) => (w.data[i] = name.endsWith('.bias') ? Math.sin(i) * 0.05 : 1 + Math.cos(i) * 0.1));
  const lora = seededLora(config);
  const model = kind === 'graph'
    ? GraphLoraModel.build(config, weightsSource(weights), lora)
    : (() => { const m = buildTrainingModel({ config, weights, baseModelName: 't', mode: 'lora', recompute: 'never' }, 5); m.lora!.dispose(); m.lora = lora; return m; })();
  return microBatchGradients(model, lora, config.vocabSize);
}

const cases: [string, ModelConfig][] = [
  ['llama (GQA, untied)', tinyConfig({ vocabSize: 300, hiddenSize: 64, intermediateSize: 96, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16 })],
  ['qwen2 (q/k/v bias, tied, two vocabulary chunks)', tinyConfig({ architecture: 'qwen2', attentionBias: true, tieWordEmbeddings: true, vocabSize: 16384 + 300, hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 1, headDim: 8 })],
  ['qwen3 (q/k norm)', tinyConfig({ architecture: 'qwen3', qkNorm: true, vocabSize: 200, hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 2, numKvHeads: 2, headDim: 16 })],
  ['llama3 rope scaling, sliding window', tinyConfig({ vocabSize: 200, hiddenSize: 32, intermediateSize: 64, numLayers: 1, numHeads: 4, numKvHeads: 4, headDim: 8, slidingWindow: 7, ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 16 } })],
];

describe('graph engine vs the TF.js engine (float base)', () => {
  for (const [name, config] of cases) {
    it(name, () => {
      const ref = measure('tfjs', config, 3);
      expect(ref.rows).toBeGreaterThan(1);
      // Every layer's activations saved; every layer recomputed in the backward; the first layer saved, the rest not.
      const oneLayer = layerSavedBytes(config, ref.rows, 40, 4, 7);
      for (const budget of ['', '0', String(oneLayer)]) {
        process.env.HEARTH_TRAIN_SAVED_BYTES = budget;
        try {
          const got = measure('graph', config, 3);
          expect(relL2(got.logp, ref.logp)).toBeLessThan(1e-5);
          expect(relL2(got.entropy, ref.entropy)).toBeLessThan(1e-5);
          expect(Math.abs(got.loss - ref.loss) / Math.abs(ref.loss)).toBeLessThan(1e-5);
          ref.grads.forEach((g, i) => {
            expect(relL2(got.grads[i], g), `budget ${budget || 'default'}: gradient ${i}`).toBeLessThan(1e-4);
          });
        } finally {
          delete process.env.HEARTH_TRAIN_SAVED_BYTES;
        }
      }
    }, 120_000);
  }
});

describe('graph engine build', () => {
  it('frees every session it loaded when its build stops (here: the head\'s norm weight is missing)', () => {
    const config = cases[0][1];
    const weights = randomWeights(config, 1);
    weights.delete('model.norm.weight');
    const loaded: GraphSession[] = [];
    const realLoad = GraphSession.load.bind(GraphSession);
    const spy = vi.spyOn(GraphSession, 'load').mockImplementation((...args) => {
      const s = realLoad(...args);
      loaded.push(s);
      return s;
    });
    const disposed = new Set<GraphSession>();
    const dispose = vi.spyOn(GraphSession.prototype, 'dispose').mockImplementation(function (this: GraphSession) { disposed.add(this); });
    try {
      expect(() => new GraphEngine(config, weightsSource(weights), ALL_LORA_TARGETS)).toThrow('weight model.norm.weight is missing');
      expect(loaded.length).toBe(1 + config.numLayers); // the inputs graph and every layer's, before the head's
      expect(loaded.every((s) => disposed.has(s))).toBe(true);
    } finally {
      spy.mockRestore();
      dispose.mockRestore();
      for (const s of loaded) s.dispose();
    }
  });
});
