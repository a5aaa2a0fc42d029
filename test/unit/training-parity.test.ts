// The TF.js training twin must compute the same function as inference: against the naive JS
// reference forward pass, and against the ONNX Runtime graph (base model and with a LoRA adapter
// written by the training checkpoint writer and read by the inference side).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../src/runtime/model-config.js';
import { buildDecoderGraph, type AttentionKind } from '../../src/runtime/llama-graph.js';
import { loadLoraAdapter, readPeftAdapter } from '../../src/runtime/lora.js';
import { createSession, ModelRunner } from '../../src/runtime/runner.js';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { writeCheckpoint } from '../../worker/training/checkpoint.js';
import { DEFAULT_LORA_CONFIG, LoraAdapters } from '../../worker/training/lora.js';
import { LlamaModel, type TokenBatch } from '../../worker/training/model.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { referenceLogits } from './runtime-reference.js';
import { tinyConfig } from './training-helpers.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-parity-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
});

const tokens = [5, 17, 3, 99, 250, 7, 42, 300];
const batchOf = (ids: number[]): TokenBatch => ({
  rows: 1,
  length: ids.length,
  inputIds: Int32Array.from(ids),
  positions: Int32Array.from(ids.map((_, i) => i)),
  segmentIds: new Int32Array(ids.length).fill(1),
});

/** Larger-than-init weights so logits spread over several units and differences show. */
function weightsFor(config: ModelConfig, seed: number) {
  const w = randomWeights(config, seed);
  for (const [name, t] of w) if (!name.includes('norm')) t.data.forEach((v, i, a) => (a[i] = v * 5));
  for (const [name, t] of w) if (name.includes('norm')) t.data.forEach((_, i, a) => (a[i] = 0.8 + 0.4 * ((i * 37) % 11) / 10));
  return w;
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

const variants: [string, ModelConfig][] = [
  ['llama (GQA 4/2, tied)', tinyConfig()],
  ['llama3 rope scaling, untied', tinyConfig({ tieWordEmbeddings: false, ropeTheta: 500000, ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 16 } })],
  ['qwen2 (q/k/v bias)', tinyConfig({ architecture: 'qwen2', attentionBias: true, ropeTheta: 1000000 })],
  ['qwen3 (q/k norm)', tinyConfig({ architecture: 'qwen3', qkNorm: true })],
];

describe('TF.js model parity', () => {
  for (const [name, config] of variants) {
    it(`${name}: TF.js logits equal the reference forward pass`, () => {
      const weights = weightsFor(config, 7);
      const model = LlamaModel.fromWeights(config, weights, { trainable: false });
      const ours = model.forward(batchOf(tokens)).dataSync();
      const ref = referenceLogits(config, weights, tokens);
      const flat = Float64Array.from(ref.flatMap((r) => Array.from(r)));
      const spread = Math.max(...flat) - Math.min(...flat);
      expect(spread).toBeGreaterThan(1); // the comparison is meaningful
      console.log(`${name}: max |TF.js - reference| = ${maxAbsDiff(ours, flat).toExponential(2)} (logit spread ${spread.toFixed(1)})`);
      expect(maxAbsDiff(ours, flat)).toBeLessThan(1e-4);
      model.dispose();
    });
  }

  for (const attention of ['standard', 'gqa'] as AttentionKind[]) {
    it(`ONNX Runtime (${attention} attention) and TF.js agree, base and with a trained-format LoRA adapter`, async () => {
      const config = tinyConfig({ architecture: 'qwen2', attentionBias: true });
      const weights = weightsFor(config, 3);
      const model = LlamaModel.fromWeights(config, weights, { trainable: false });
      const lora = LoraAdapters.create(config, { ...DEFAULT_LORA_CONFIG, rank: 4, alpha: 8 }, 1);
      for (const b of lora.bT.values()) b.assign(tf.randomNormal(b.shape, 0, 0.2, 'float32', 5));
      const dir = join(root, `adapter-${attention}`);
      await writeCheckpoint(dir, { kind: 'lora', lora: lora.config, tensors: lora.toPeftTensors(), baseModel: 'tiny' });
      expect(readPeftAdapter(dir).scale).toBe(2);

      const { session } = await createSession(buildDecoderGraph(config, weights, { attention, maxPositions: 64, lora: true }), { intraOpThreads: 1 });
      const runner = new ModelRunner(session, config, attention, 64, 'cpu', true);
      const adapter = loadLoraAdapter(dir, config, attention);
      const [ortBase, ortLora] = await runner.forward(
        [null, adapter].map((a) => ({ tokens, kv: runner.newSequence(), adapter: a })),
        { allLogits: true },
      );
      const tfBase = model.forward(batchOf(tokens)).dataSync();
      model.lora = lora;
      const tfLora = model.forward(batchOf(tokens)).dataSync();
      expect(maxAbsDiff(tfBase, tfLora)).toBeGreaterThan(0.05); // the adapter matters
      console.log(`${attention}: max |ORT - TF.js| base ${maxAbsDiff(ortBase, tfBase).toExponential(2)}, LoRA ${maxAbsDiff(ortLora, tfLora).toExponential(2)}`);
      expect(maxAbsDiff(ortBase, tfBase)).toBeLessThan(1e-4);
      expect(maxAbsDiff(ortLora, tfLora)).toBeLessThan(1e-4);
      await runner.release();
      model.dispose();
    });
  }
});
