// Shared fixtures for the training tests (not a test file itself).
import * as tf from '@tensorflow/tfjs-core';
import type { ModelConfig } from '../../src/runtime/model-config.js';
import { buildMicroBatch, trainedPositions, type TrainSequence } from '../../worker/training/data.js';
import { LoraAdapters } from '../../worker/training/lora.js';
import { weightedNll } from '../../worker/training/losses.js';
import { logprobsAt, type TrainingModel } from '../../worker/training/token-logprobs.js';
import { runSft, type TrainingEvent, type TrainingModelSpec } from '../../worker/training/loop.js';
import { setOnnxRuntimeCompute } from '../../worker/training/ort-kernels.js';

/** ~0.8M parameters: vocab 512, d 128, 4 layers, 4 query / 2 kv heads, tied embeddings. */
export function tinyConfig(overrides: Partial<ModelConfig> = {}): ModelConfig {
  return {
    architecture: 'llama',
    vocabSize: 512,
    hiddenSize: 128,
    intermediateSize: 344,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 32,
    maxPositionEmbeddings: 2048,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    ropeScaling: null,
    tieWordEmbeddings: true,
    attentionBias: false,
    qkNorm: false,
    bosTokenId: 1,
    eosTokenIds: [2],
    padTokenId: null,
    ...overrides,
  };
}

/** Deterministic pseudo-random token ids in [3, vocab). */
export function randomIds(count: number, vocab: number, seed: number): number[] {
  let a = seed >>> 0;
  const ids: number[] = [];
  for (let i = 0; i < count; i++) {
    a = (Math.imul(a, 1664525) + 1013904223) >>> 0;
    ids.push(3 + (a % (vocab - 3)));
  }
  return ids;
}

export { relL2 } from '../../worker/training/tensor-utils.js';

/**
 * The loss of each step of a 20-step SFT run (the sequences repeated 20 times, batches of 4, seed 1), with ONNX
 * Runtime's kernels on or off: what the ORT-path tests compare against the reference path.
 */
export async function sftStepLosses(opts: {
  ort: boolean;
  sequences: TrainSequence[];
  learningRate: number;
  model: TrainingModelSpec;
  checkpointDir: string;
}): Promise<number[]> {
  setOnnxRuntimeCompute(opts.ort);
  const events: TrainingEvent[] = [];
  await runSft(
    { sequences: Array.from({ length: 20 }, () => opts.sequences).flat(), batchSize: 4, learningRate: opts.learningRate },
    { model: opts.model, checkpointDir: opts.checkpointDir, log: () => {}, seed: 1 },
    (e) => void events.push(e),
  );
  return events.filter((e) => e.type === 'gradient_step').map((e) => e.data.loss);
}

/** The largest |a[i] - b[i]| / b[i]: how far a loss curve strays from its reference. */
export function worstRelativeDifference(a: readonly number[], b: readonly number[]): number {
  return Math.max(...a.map((value, i) => Math.abs(value - b[i]) / b[i]));
}

/**
 * Five sequences of 41, 21, 21, 30 and 11 ids (40, 20, 20, 29 and 10 positions) trained from position 4: buildMicroBatch
 * lays them out as three rows of 40 with sequences packed end to end (the graph engine's tests).
 */
export function packedSequences(vocabSize: number): { ids: number[]; lossMask: number[] }[] {
  return [41, 21, 21, 30, 11].map((length, s) => {
    const ids = randomIds(length, vocabSize, s + 11);
    return { ids, lossMask: ids.map((_, i) => (i >= 4 ? 1 : 0)) };
  });
}

/** Rank-4 LoRA on all seven projections with seeded values (fresh adapters have B = 0, which zeroes A's gradient). */
export function seededLora(config: ModelConfig): LoraAdapters {
  const lora = LoraAdapters.create(config, { rank: 4, alpha: 8, dropout: 0, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] }, 5);
  lora.variables().forEach((v, i) => v.assign(tf.randomNormal(v.shape, 0, 0.05, 'float32', 9 + i)));
  return lora;
}

/**
 * One micro-batch of packedSequences through `model` (whose adapters are `lora`): a weighted NLL with weights of
 * both signs, its per-token logprobs and entropies, every adapter's gradient, and the forward+backward's time.
 * Disposes the model.
 */
export function microBatchGradients(model: TrainingModel, lora: LoraAdapters, vocabSize: number) {
  const sequences = packedSequences(vocabSize);
  const mb = buildMicroBatch(sequences, sequences.map((_, i) => i));
  const at = trainedPositions(mb);
  const w = Float32Array.from(at.index, (_, j) => ((j % 3) - 0.7) / at.index.length);
  let entropy = new Float32Array(0);
  const vars = lora.variables();
  const t = performance.now();
  const { value, grads } = tf.variableGrads(() => weightedNll(logprobsAt(model, mb, at, true, (e) => (entropy = Float32Array.from(e))), w), vars);
  const stepMs = performance.now() - t;
  const logp = tf.tidy(() => Float32Array.from(logprobsAt(model, mb, at, false).dataSync() as Float32Array));
  const out = { rows: mb.batch.rows, loss: value.dataSync()[0], logp, entropy, grads: vars.map((v) => Float32Array.from(grads[v.name].dataSync() as Float32Array)), stepMs };
  tf.dispose([value, ...Object.values(grads)]);
  model.dispose();
  return out;
}
