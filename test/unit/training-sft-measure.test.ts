// The measuring pass of an SFT step (runSft with forwardOnly, what a native run's forward_backward runs): the loss
// it reports at given weights is the loss the optimizer step on the same inputs starts from, and it writes nothing.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TrainSequence } from '../../worker/training/data.js';
import { runSft, type TrainingEvent } from '../../worker/training/loop.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { randomIds, tinyConfig } from './training-helpers.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-sft-measure-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const cfg = tinyConfig({ hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16 });
const weights = randomWeights(cfg, 3);
const sequences: TrainSequence[] = [0, 1, 2].map((s) => {
  const ids = randomIds(24 + 4 * s, cfg.vocabSize, s + 11);
  return { ids, lossMask: ids.map((_, i) => (i >= 6 ? 1 : 0)) };
});
const model = { config: cfg, weights, baseModelName: 'tiny', mode: 'lora' as const, lora: { rank: 4 } };

async function steps(forwardOnly: boolean, dir: string): Promise<Record<string, number>[]> {
  const events: TrainingEvent[] = [];
  await runSft({ sequences, batchSize: 'auto', learningRate: [1e-2], forwardOnly }, { model, checkpointDir: join(root, dir), log: () => {}, seed: 5 }, (e) => void events.push(e));
  return events.filter((e) => e.type === 'gradient_step').map((e) => e.data as Record<string, number>);
}

describe('SFT measuring pass', () => {
  it("reports the loss and token counts of the optimizer step it stands for, and trains and writes nothing", async () => {
    const [measured] = await steps(true, 'measure');
    expect(existsSync(join(root, 'measure'))).toBe(false);
    const [trained] = await steps(false, 'train');
    expect(existsSync(join(root, 'train'))).toBe(true);
    expect(measured.num_trainable_tokens).toBe(trained.num_trainable_tokens);
    expect(measured.num_trainable_tokens).toBe(sequences.reduce((a, s) => a + s.ids.length - 1 - 5, 0));
    expect(measured.max_sequence_tokens).toBe(32);
    expect(measured.loss).toBeGreaterThan(1);
    expect(Math.abs(measured.loss - trained.loss)).toBeLessThan(1e-4 * trained.loss);
  });
});
