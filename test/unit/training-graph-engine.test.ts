// The graph engine (worker/training/graph/) against today's TF.js engine on the same float base: per-token
// logprobs, entropies and every LoRA gradient of one micro-batch within 1e-4 relative L2 (both are fp32 and
// differ in summation order only, ~1e-6; a wrong backward op gives O(0.1–1)). Llama-style (GQA, untied) and
// Qwen2-style (q/k/v bias, tied head over two vocabulary chunks), Qwen3-style q/k norm, llama3 rope scaling,
// packed sequences in two rows.
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../src/runtime/model-config.js';
import { weightsSource } from '../../src/runtime/weight-source.js';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { buildMicroBatch, trainedPositions } from '../../worker/training/data.js';
import { GraphLoraModel } from '../../worker/training/graph/graph-model.js';
import { layerSavedBytes } from '../../worker/training/graph/graph-engine.js';
import { buildTrainingModel } from '../../worker/training/loop.js';
import { LoraAdapters } from '../../worker/training/lora.js';
import { weightedNll } from '../../worker/training/losses.js';
import { logprobsAt } from '../../worker/training/token-logprobs.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { packedSequences, relL2, tinyConfig } from './training-helpers.js';

beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
}, 180_000);

/** Logprobs, entropies and gradients of a weighted NLL (weights of both signs) for one micro-batch. */
function measure(kind: 'tfjs' | 'graph', config: ModelConfig, seed: number) {
  const weights = randomWeights(config, seed);
  for (const [name, w] of weights) if (name.endsWith('.bias') || name.includes('norm')) w.data.forEach((v, i) => (w.data[i] = name.endsWith('.bias') ? Math.sin(i) * 0.05 : 1 + Math.cos(i) * 0.1));
  const lora = LoraAdapters.create(config, { rank: 4, alpha: 8, dropout: 0, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] }, 5);
  lora.variables().forEach((v, i) => v.assign(tf.randomNormal(v.shape, 0, 0.05, 'float32', 9 + i)));
  const model = kind === 'graph'
    ? GraphLoraModel.build(config, weightsSource(weights), lora)
    : (() => { const m = buildTrainingModel({ config, weights, baseModelName: 't', mode: 'lora', recompute: 'never' }, 5); m.lora!.dispose(); m.lora = lora; return m; })();
  const sequences = packedSequences(config.vocabSize);
  const mb = buildMicroBatch(sequences, sequences.map((_, i) => i));
  const at = trainedPositions(mb);
  const w = Float32Array.from(at.index, (_, j) => ((j % 3) - 0.7) / at.index.length);
  let entropy = new Float32Array(0);
  const vars = lora.variables();
  const { value, grads } = tf.variableGrads(() => weightedNll(logprobsAt(model, mb, at, true, (e) => (entropy = Float32Array.from(e))), w), vars);
  const logp = tf.tidy(() => logprobsAt(model, mb, at, false).dataSync() as Float32Array);
  const out = { rows: mb.batch.rows, loss: value.dataSync()[0], logp: Float32Array.from(logp), entropy, grads: vars.map((v) => Float32Array.from(grads[v.name].dataSync() as Float32Array)) };
  tf.dispose([value, ...Object.values(grads)]);
  model.dispose();
  return out;
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
