// The ONNX Runtime compute path (GEMMs on MLAS, the fused LM head + log-softmax) must train the
// same model as the reference path (wasm XNNPACK GEMMs, logits + losses.ts tokenLogprobs).
//
// Tolerances: both paths are fp32 and differ only in summation order (MLAS and XNNPACK block K
// differently, and the fused head sums the vocabulary per chunk). That moves a dot product of
// length K by about sqrt(K) * 6e-8 relative, ~2e-6 at K = 1024: gradients agree to ~1e-6 relative
// L2 per tensor, so 1e-4 leaves a wide margin while a wrong transpose, a dropped term or a wrong
// chunk offset gives O(1). Losses over 20 AdamW steps must stay within 1e-4 relative (the bar of
// issue 18): Adam normalises each update, so tiny gradient differences stay tiny in the weights.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { microBatches, trainedPositions, type TrainSequence } from '../../worker/training/data.js';
import { HEAD_CHUNK_ROWS, headTokenLogprobs } from '../../worker/training/head-logprobs.js';
import { buildTrainingModel } from '../../worker/training/loop.js';
import { tokenLogprobs, weightedNll } from '../../worker/training/losses.js';
import { onnxRuntimeCompute, setOnnxRuntimeCompute } from '../../worker/training/ort-kernels.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { randomIds, tinyConfig, relL2, sftStepLosses, worstRelativeDifference } from './training-helpers.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-ort-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(async () => {
  const backend = await initTrainingBackend({ log: () => {} });
  expect(backend.gemm).toBe('onnxruntime');
});
afterEach(() => setOnnxRuntimeCompute(true));


/** Values of `f()` on the ONNX Runtime path and on the reference path. */
function bothPaths<T>(f: () => T): { ort: T; reference: T } {
  setOnnxRuntimeCompute(true);
  const ort = f();
  setOnnxRuntimeCompute(false);
  const reference = f();
  setOnnxRuntimeCompute(true);
  return { ort, reference };
}

describe('ONNX Runtime training path', () => {
  it('is on by default on wasm', () => {
    expect(onnxRuntimeCompute()).toBe(true);
  });

  // A vocabulary of two full chunks and a partial one, so chunk offsets and the merge are tested.
  const vocab = 2 * HEAD_CHUNK_ROWS + 123;
  for (const headTrainable of [true, false]) {
    it(`fused head logprobs, entropy and gradients equal the logits path (${headTrainable ? 'trainable' : 'frozen'} head)`, () => {
      const n = 37;
      const d = 24;
      const h = tf.randomNormal([n, d], 0, 1, 'float32', 1) as tf.Tensor2D;
      const w = tf.randomNormal([vocab, d], 0, 0.5, 'float32', 2) as tf.Tensor2D;
      const targets = Int32Array.from({ length: n }, (_, i) => (i * 977) % vocab);
      const weights = Float32Array.from({ length: n }, (_, i) => (i % 3) / n);
      const run = (fused: boolean) => {
        let entropy: Float32Array = new Float32Array(0);
        const keep = (e: Float32Array) => (entropy = e);
        const loss = (hh: tf.Tensor, ww: tf.Tensor) => {
          const lp = fused
            ? headTokenLogprobs(hh as tf.Tensor2D, ww as tf.Tensor2D, headTrainable, targets, keep)
            : tokenLogprobs(tf.matMul(hh as tf.Tensor2D, ww as tf.Tensor2D, false, true), targets, keep);
          return weightedNll(lp, weights);
        };
        const logprobs = tf.tidy(() => (fused ? headTokenLogprobs(h, w, headTrainable, targets) : tokenLogprobs(tf.matMul(h, w, false, true), targets)));
        const grads = headTrainable ? tf.grads(loss)([h, w]) : [tf.grad((hh: tf.Tensor) => loss(hh, w))(h)];
        const out = { logprobs: logprobs.dataSync().slice(), entropy, grads: grads.map((g) => g.dataSync().slice()) };
        tf.dispose([logprobs, ...grads]);
        return out;
      };
      const fused = run(true);
      const reference = run(false);
      expect(relL2(fused.logprobs, reference.logprobs)).toBeLessThan(1e-5);
      // Entropy = logsumexp - mean logit: a difference of close numbers, so its relative error is larger.
      expect(relL2(fused.entropy, reference.entropy)).toBeLessThan(1e-4);
      expect(fused.grads).toHaveLength(headTrainable ? 2 : 1);
      for (let i = 0; i < fused.grads.length; i++) expect(relL2(fused.grads[i], reference.grads[i])).toBeLessThan(1e-5);
      tf.dispose([h, w]);
    });
  }

  // Untied head over several vocabulary chunks, GQA, 2 layers.
  const config = tinyConfig({ vocabSize: HEAD_CHUNK_ROWS + 500, tieWordEmbeddings: false, hiddenSize: 64, intermediateSize: 160, numLayers: 2, headDim: 16 });
  const weights = randomWeights(config, 3);
  const sequences: TrainSequence[] = [0, 1, 2, 3].map((s) => {
    const ids = randomIds(40, config.vocabSize, s + 11);
    return { ids, lossMask: ids.map((_, i) => (i >= 6 ? 1 : 0)) };
  });

  for (const mode of ['full', 'lora'] as const) {
    it(`${mode}: every parameter gradient of one step equals the reference path's (rel L2 < 1e-4)`, () => {
      const [mb] = microBatches(sequences, [0, 1, 2, 3], 10_000);
      const at = trainedPositions(mb);
      const w = new Float32Array(at.index.length).fill(1 / at.index.length);
      let names: string[] = [];
      // Built per path: on the ONNX Runtime path a LoRA model keeps its frozen base outside the heap.
      const { ort, reference } = bothPaths(() => {
        const model = buildTrainingModel({ config, weights, baseModelName: 'tiny', mode }, 5);
        if (model.lora) for (const v of model.lora.variables()) v.assign(tf.randomNormal(v.shape, 0, 0.05, 'float32', 9)); // B = 0 would hide A's gradient
        const vars = model.trainableVariables();
        names = vars.map((v) => v.name);
        const { value, grads } = tf.variableGrads(() => {
          const hidden = tf.gather(model.hidden(mb.batch, true), tf.tensor1d(at.index, 'int32')) as tf.Tensor2D;
          return weightedNll(model.tokenLogprobs(hidden, at.targets), w);
        }, vars);
        const out = { loss: value.dataSync()[0], grads: vars.map((v) => grads[v.name].dataSync().slice()) };
        tf.dispose([value, ...Object.values(grads)]);
        model.dispose();
        return out;
      });
      expect(Math.abs(ort.loss - reference.loss) / reference.loss).toBeLessThan(1e-5);
      expect(ort.grads).toHaveLength(reference.grads.length);
      const worst = names.map((name, i) => ({ name, err: relL2(ort.grads[i], reference.grads[i]) })).sort((a, b) => b.err - a.err);
      console.log(`${mode}: ${names.length} gradients, worst rel L2 ${worst[0].err.toExponential(2)} (${worst[0].name})`);
      expect(worst[0].err).toBeLessThan(1e-4);
    });
  }

  it('full fine-tuning: 20 steps give the same losses as the reference path (rel 1e-4)', async () => {
    const model = { config, weights, baseModelName: 'tiny', mode: 'full' as const };
    const ort = await sftStepLosses({ ort: true, sequences, learningRate: 3e-3, model, checkpointDir: join(root, 'ort') });
    const reference = await sftStepLosses({ ort: false, sequences, learningRate: 3e-3, model, checkpointDir: join(root, 'reference') });
    expect(ort).toHaveLength(20);
    const worst = worstRelativeDifference(ort, reference);
    console.log(`20 steps: loss ${reference[0].toFixed(4)} -> ${reference[19].toFixed(4)}, worst relative difference ${worst.toExponential(2)}`);
    expect(reference[19]).toBeLessThan(reference[0] / 2); // it learned, so the comparison means something
    expect(worst).toBeLessThan(1e-4);
  });
});
