// SFT end to end on a ~0.8M-parameter random model: overfitting, events, checkpoint, cancellation.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { afterAll, describe, expect, it } from 'vitest';
import { readCheckpoint } from '../../worker/training/checkpoint.js';
import type { TrainSequence } from '../../worker/training/data.js';
import { planSftBatches, runSft, type TrainingEvent } from '../../worker/training/loop.js';
import { ComputeCancelledError } from '../../src/runtime/compute-cancel.js';
import { countParameters, randomWeights } from '../../worker/training/tensor-utils.js';
import { randomIds, tinyConfig } from './training-helpers.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-sft-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// ~0.9M parameters in 2 wide layers rather than 4 narrow ones: each step runs half the kernels, and
// this small a model is dominated by per-kernel overhead, not FLOPs.
const cfg = tinyConfig({ hiddenSize: 192, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 48 });
const weights = randomWeights(cfg, 1);
/** Four random 48-token sequences; the first 8 tokens are prompt (not trained). */
const sequences: TrainSequence[] = [0, 1, 2, 3].map((s) => {
  const ids = randomIds(48, cfg.vocabSize, s + 7);
  return { ids, lossMask: ids.map((_, i) => (i >= 8 ? 1 : 0)) };
});

describe('SFT', () => {
  it('overfits 4 sequences in 50 full fine-tuning steps (loss falls > 50x)', async () => {
    expect(countParameters(cfg)).toBeGreaterThan(800_000);
    const events: TrainingEvent[] = [];
    const started = Date.now();
    const result = await runSft(
      { sequences: Array.from({ length: 50 }, () => sequences).flat(), batchSize: 4, learningRate: 3e-3 },
      { model: { config: cfg, weights, baseModelName: 'tiny', mode: 'full' }, checkpointDir: join(root, 'full', 'step-1'), log: () => {} },
      (e) => void events.push(e),
    );
    const seconds = (Date.now() - started) / 1000;
    const steps = events.filter((e) => e.type === 'gradient_step').map((e) => e.data);
    expect(events[0]).toEqual({ type: 'training_started', data: { num_sequences: 50 } });
    expect(steps).toHaveLength(50);
    for (const s of steps) for (const v of Object.values(s)) expect(typeof v).toBe('number');
    const first = steps[0].loss;
    const last = steps[49].loss;
    // Measured on the 2-core box (load average 8, CPU shared): ~6.29 (ln 512) -> ~0.002 in ~15 s. The time is
    // logged, not asserted: speed budgets live in the benchmarks (npm run bench:train).
    console.log(`SFT overfit: loss ${first.toFixed(3)} -> ${last.toFixed(4)} in ${seconds.toFixed(1)} s, ${steps[49].tokens_per_second.toFixed(0)} tok/s`);
    expect(first).toBeGreaterThan(5.5);
    expect(first / last).toBeGreaterThan(50);
    expect(steps[0].num_trainable_tokens).toBe(4 * 40);
    expect(steps[0].num_tokens).toBe(4 * 47);
    expect(result.steps).toBe(50);
    const ckpt = await readCheckpoint(result.checkpointDir);
    expect(ckpt.kind).toBe('full');
    if (ckpt.kind === 'full') expect(ckpt.weights.get('model.layers.0.self_attn.q_proj.weight')!.shape).toEqual([192, 192]);
  });

  it('LoRA SFT trains only the adapters and learns a repeating pattern', async () => {
    const numTensorsBefore = tf.memory().numTensors;
    // A cycle of 8 tokens repeated: predictable from the previous token once learned.
    const cycle = randomIds(8, cfg.vocabSize, 99);
    const ids = Array.from({ length: 64 }, (_, i) => cycle[i % 8]);
    // The frozen tied embedding bounds the logits (|h| * |e|); a random std-0.02 table caps them
    // near 2.5, so LoRA alone could never push the loss below ~3.7. Use a std-0.2 table.
    const loraBase = randomWeights(cfg, 1);
    loraBase.get('model.embed_tokens.weight')!.data.forEach((v, i, a) => (a[i] = v * 10));
    const events: TrainingEvent[] = [];
    const result = await runSft(
      { sequences: Array.from({ length: 30 }, () => ({ ids, lossMask: ids.map(() => 1) })), batchSize: 1, learningRate: 1e-2 },
      { model: { config: cfg, weights: loraBase, baseModelName: 'tiny', mode: 'lora', lora: { rank: 8, alpha: 16 } }, checkpointDir: join(root, 'lora', 'step-1'), log: () => {} },
      (e) => void events.push(e),
    );
    const losses = events.filter((e) => e.type === 'gradient_step').map((e) => e.data.loss);
    console.log(`LoRA SFT losses: ${losses.map((l) => l.toFixed(2)).join(' ')}`);
    expect(losses).toHaveLength(30);
    expect(losses[29]).toBeLessThan(losses[0] / 3);
    const ckpt = await readCheckpoint(result.checkpointDir);
    expect(ckpt.kind).toBe('lora');
    // Everything the job created (model, adapters, optimizer state) was released.
    expect(tf.memory().numTensors).toBe(numTensorsBefore);
  });

  it('stops between steps when cancelled, writing no checkpoint', async () => {
    const events: TrainingEvent[] = [];
    let polls = 0;
    const dir = join(root, 'cancelled', 'step-1');
    await expect(
      runSft(
        { sequences, batchSize: 1, learningRate: 1e-3 },
        { model: { config: cfg, weights, baseModelName: 'tiny', mode: 'lora' }, checkpointDir: dir, isCancelled: () => ++polls > 2, log: () => {} },
        (e) => void events.push(e),
      ),
    ).rejects.toBeInstanceOf(ComputeCancelledError);
    expect(events.filter((e) => e.type === 'gradient_step')).toHaveLength(2);
    expect(existsSync(dir)).toBe(false);
  });

  it('plans batches: per-batch learning rates, "auto", and mismatches', () => {
    const seqs = Array.from({ length: 5 }, () => sequences[0]);
    expect(planSftBatches({ sequences: seqs, batchSize: 2, learningRate: 1e-4 })).toEqual({
      batches: [[0, 1], [2, 3], [4]],
      learningRates: [1e-4, 1e-4, 1e-4],
    });
    expect(planSftBatches({ sequences: seqs, batchSize: 'auto', learningRate: [1, 2] }).batches).toEqual([[0, 1, 2], [3, 4]]);
    expect(() => planSftBatches({ sequences: seqs, batchSize: 2, learningRate: [1, 2] })).toThrow(/2 values but the data makes 3 batches/);
    const cosine = planSftBatches({ sequences: seqs, batchSize: 1, learningRate: 1, schedule: { warmupSteps: 1, kind: 'cosine' } });
    expect(cosine.learningRates[0]).toBeCloseTo(0.5, 9);
    expect(cosine.learningRates[1]).toBeCloseTo(1, 9);
    expect(cosine.learningRates[4]).toBeLessThan(0.2);
  });
});
