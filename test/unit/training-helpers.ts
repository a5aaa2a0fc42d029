// Shared fixtures for the training tests (not a test file itself).
import type { ModelConfig } from '../../src/runtime/model-config.js';
import type { TrainSequence } from '../../worker/training/data.js';
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

/** ||a - b|| / ||b||: how far a gradient or logit vector is from its reference. */
export function relL2(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += b[i] ** 2;
  }
  return Math.sqrt(num / den);
}

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
