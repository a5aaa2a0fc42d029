// The measuring pass of an SFT step (runSft with forwardOnly, what a native run's forward_backward runs): the loss
// it reports at given weights is the loss the optimizer step on the same inputs starts from, and it writes nothing.
// Per-token loss weights (ART's loss_weights row, any sign): the loss is Σ w_t · (−log p_t) / N over the N weighted
// targets, and the gradient scales and flips with the weights.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeTokenLogprobs } from '../../src/protocol/token-logprobs.js';
import { readCheckpoint } from '../../worker/training/checkpoint.js';
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

async function stepEvents(forwardOnly: boolean, dir: string, seqs = sequences, returnTokenLogprobs = false) {
  const events: TrainingEvent[] = [];
  await runSft({ sequences: seqs, batchSize: 'auto', learningRate: [1e-2], forwardOnly, returnTokenLogprobs }, { model, checkpointDir: join(root, dir), log: () => {}, seed: 5 }, (e) => void events.push(e));
  return events.flatMap((e) => (e.type === 'gradient_step' ? [e] : []));
}
const steps = async (forwardOnly: boolean, dir: string, seqs = sequences) => (await stepEvents(forwardOnly, dir, seqs)).map((e) => e.data);
/** The sequences with loss weights w(sequence, position) at their trained targets. */
const weighted = (w: (s: number, t: number) => number): TrainSequence[] => sequences.map((s, i) => ({ ...s, tokenWeights: s.ids.map((_, t) => (s.lossMask[t] ? w(i, t) : 0)) }));
const close = (a: number, b: number, what: string) => expect(Math.abs(a - b), `${what}: ${a} vs ${b}`).toBeLessThanOrEqual(1e-4 * Math.max(1, Math.abs(b)));

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

  it('weighs each target by its loss weight, of either sign: the loss is their weighted mean NLL, the gradient scales and flips with them', async () => {
    // The unweighted measurement's token logprobs: what every weighted loss below is made of.
    const [plain] = await stepEvents(true, 'plain', sequences, true);
    const logprobs = decodeTokenLogprobs(plain.tokenLogprobs!);
    const w = (s: number, t: number) => [0.5, -1.25, 2, -0.3, 1][(s + t) % 5];
    let sum = 0;
    let n = 0;
    sequences.forEach((s, i) => s.ids.forEach((_, t) => {
      if (t === 0 || !s.lossMask[t]) return;
      sum += w(i, t) * -logprobs.get(i)![t - 1];
      n++;
    }));
    const [measured] = await steps(true, 'weighted', weighted(w));
    expect(measured.num_trainable_tokens).toBe(n);
    close(measured.loss, sum / n, 'weighted loss');
    expect(Math.abs(measured.loss - plain.data.loss)).toBeGreaterThan(0.1);

    // One optimizer step at weights 1, 2 and −1: the loss and the (pre-clip) gradient norm scale with the weights,
    // and the negated weights move the adapters' B (zero at the start) exactly the other way.
    const [one] = await steps(false, 'w1', weighted(() => 1));
    const [two] = await steps(false, 'w2', weighted(() => 2));
    const [minus] = await steps(false, 'w-1', weighted(() => -1));
    close(one.loss, plain.data.loss, 'weights 1 = the mean NLL');
    close(two.loss, 2 * one.loss, 'weights 2: loss');
    close(two.grad_norm, 2 * one.grad_norm, 'weights 2: gradient norm');
    close(minus.loss, -one.loss, 'weights -1: loss');
    close(minus.grad_norm, one.grad_norm, 'weights -1: gradient norm');
    const [up, down] = await Promise.all([readCheckpoint(join(root, 'w1')), readCheckpoint(join(root, 'w-1'))]);
    if (up.kind !== 'lora' || down.kind !== 'lora') throw new Error('expected LoRA checkpoints');
    let compared = 0;
    for (const [name, t] of up.tensors) {
      if (!name.includes('lora_B')) continue;
      const other = down.tensors.get(name)!.data;
      expect(t.data.some((v) => v !== 0), name).toBe(true);
      t.data.forEach((v, i) => expect(Math.abs(v + other[i]), `${name}[${i}]`).toBeLessThanOrEqual(1e-6 + 1e-3 * Math.abs(v)));
      compared++;
    }
    expect(compared).toBeGreaterThan(0);
  }, 120_000);
});
