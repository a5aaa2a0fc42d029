// RL over sequences with an advantage and a loss weight per token (ART's N3 token matrices; worker/training/loop.ts
// runRl, data.ts, rl-token-data.ts): each step's loss is sum_t w_t / N * -(sg(clip(ratio_t)) * A_t * logprob_t) over
// its N trained tokens, checked against a hand computation; with one advantage per sequence and equal lengths it is
// exactly the per-trajectory loss of a preview RL job.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { buildMicroBatch } from '../../worker/training/data.js';
import { buildTrainingModel, runRl, type TrainingEvent } from '../../worker/training/loop.js';
import { sequenceLogprobs } from '../../worker/training/token-logprobs.js';
import type { RlData } from '../../worker/training/rl-data.js';
import { rlDataFromTokenSequences } from '../../worker/training/rl-token-data.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { randomIds, tinyConfig } from './training-helpers.js';
import { rlSettingsFromExperimentalConfig } from '../../src/protocol/rl-settings.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-rl-tokens-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
});

const cfg = tinyConfig();
const model = { config: cfg, weights: randomWeights(cfg, 3), baseModelName: 'tiny', mode: 'lora' as const };

async function run(data: RlData, config: Record<string, unknown>, forwardOnly: boolean, name: string): Promise<Record<string, number>> {
  const events: TrainingEvent[] = [];
  await runRl({ data, settings: rlSettingsFromExperimentalConfig(config), forwardOnly }, { model, checkpointDir: join(root, name), log: () => {} }, (e) => void events.push(e));
  return events[events.length - 1].data as Record<string, number>;
}

describe('micro-batches with per-token advantages and weights', () => {
  it('take the advantage and weight of each target from the sequence (entry t+1 for input position t), else the sequence\'s and 1', () => {
    const perToken = { ids: [3, 4, 5, 6], lossMask: [0, 0, 1, 1], tokenAdvantages: [0, 0, 2, -3], tokenWeights: [0, 0, 0.5, 4], advantage: 9 };
    const perSequence = { ids: [3, 4, 5], lossMask: [0, 1, 1], advantage: 1.5 };
    const mb = buildMicroBatch([perToken, perSequence], [0, 1]);
    expect([...mb.advantages]).toEqual([0, 2, -3, 1.5, 1.5]);
    expect([...mb.lossWeights]).toEqual([0, 0.5, 4, 1, 1]);
  });
});

describe('RL loss over per-token advantages', () => {
  it('is the weighted mean over trained tokens of CISPO\'s -(sg(clip(ratio)) * A * logprob), by hand', async () => {
    const a = randomIds(7, cfg.vocabSize, 11);
    const b = randomIds(5, cfg.vocabSize, 12);
    const starting = buildTrainingModel(model);
    const [lpA, lpB] = sequenceLogprobs(starting, [{ ids: a, lossMask: [0, 0, 0, 1, 1, 1, 1] }, { ids: b, lossMask: [0, 0, 1, 1, 1] }], 4096);
    starting.dispose();
    // Behaviour logprobs chosen against the learner's: ratio e^2 (clipped to 1.5), e^-2 (clipped to 0.5), e^0.1, e^-0.2 …
    const shifts = { a: [0, 0, 0, 2, -2, 0.1, -0.2], b: [0, 0, 0.3, -3, 0] };
    const advA = [0, 0, 0, 1.5, -0.5, 2, 0.25];
    const advB = [0, 0, -1, 0.75, 3];
    const wA = [0, 0, 0, 1, 2, 0.5, 0];
    const wB = [0, 0, 1, 1, 1.5];
    const behaviour = (lp: Float32Array, shift: number[]) => shift.map((s, t) => (t === 0 || Number.isNaN(lp[t - 1]) ? 0 : lp[t - 1] - s));
    const data = rlDataFromTokenSequences([
      { token_ids: a, loss_mask: [0, 0, 0, 1, 1, 1, 1], logprobs: behaviour(lpA, shifts.a), advantages: advA, weights: wA },
      { token_ids: b, loss_mask: [0, 0, 1, 1, 1], logprobs: behaviour(lpB, shifts.b), advantages: advB, weights: wB },
    ]);
    const low = 0.5;
    const high = 1.5;
    let expected = 0;
    let expectedIs = 0;
    const n = 4 + 3;
    const add = (lp: Float32Array, shift: number[], adv: number[], w: number[], mask: number[]) => {
      for (let t = 1; t < mask.length; t++) {
        if (!mask[t]) continue;
        const ratio = Math.exp(shift[t]);
        expected += (w[t] / n) * -(Math.min(high, Math.max(low, ratio)) * adv[t] * lp[t - 1]);
        expectedIs += (w[t] / n) * -(ratio * adv[t]);
      }
    };
    add(lpA, shifts.a, advA, wA, [0, 0, 0, 1, 1, 1, 1]);
    add(lpB, shifts.b, advB, wB, [0, 0, 1, 1, 1]);
    const config = { loss_fn: 'cispo', epsilon: 1 - low, epsilon_high: high - 1, normalize_advantages: false, packed_sequence_length: 4096 };
    const measured = await run(data, config, true, 'measure');
    expect(measured.loss).toBeCloseTo(expected, 4);
    expect(measured).toMatchObject({ num_trainable_tokens: 7, packed_sequences: 1 });
    // No rewards come with per-token advantages: no reward metrics are made up.
    expect(measured.reward).toBeUndefined();
    expect(measured.num_groups_trainable).toBeUndefined();

    // importance_sampling (-ratio * A, unclipped) as N3 maps it: the trainer's PPO with a clip that never binds.
    const importanceSampling = { loss_fn: 'ppo', epsilon: 1, epsilon_high: 1e30, normalize_advantages: false, packed_sequence_length: 4096 };
    expect((await run(data, importanceSampling, true, 'measure-is')).loss).toBeCloseTo(expectedIs, 4);

    // The training step starts from the same loss and moves the weights.
    const trained = await run(data, { ...config, learning_rate: 1e-2 }, false, 'train');
    expect(trained.loss).toBeCloseTo(expected, 4);
    expect(trained.grad_norm).toBeGreaterThan(0);
  });

  it('with one advantage per sequence (and equal lengths) gives exactly the per-trajectory loss and gradient of today\'s RL jobs', async () => {
    const a = randomIds(6, cfg.vocabSize, 21);
    const b = randomIds(6, cfg.vocabSize, 22);
    const mask = [0, 0, 1, 1, 1, 1];
    const lp = [NaN, NaN, -3, -4, -5, -6];
    // Group rewards 1 and 0: advantages ±1 / (0.5 + 1e-6) (scale_rewards), as the trainer computes them.
    const perSequence: RlData = {
      sequences: [{ ids: a, lossMask: mask, logprobs: lp, trajectory: 0, group: 0 }, { ids: b, lossMask: mask, logprobs: lp, trajectory: 1, group: 0 }],
      groupRewards: [[1, 0]], numTrajectories: 2, numExceptions: 0, numChoicesWithoutLogprobs: 0,
    };
    const advantage = 0.5 / (0.5 + 1e-6);
    const row = (ids: number[], adv: number) => ({ token_ids: ids, loss_mask: mask, logprobs: lp.map((v) => (Number.isNaN(v) ? 0 : v)), advantages: mask.map((m) => m * adv), weights: mask });
    const perToken = rlDataFromTokenSequences([row(a, advantage), row(b, -advantage)]);
    const config = { learning_rate: 1e-2, packed_sequence_length: 4096 };
    const before = await run(perSequence, config, false, 'sequence');
    const after = await run(perToken, config, false, 'token');
    expect(after.loss).toBeCloseTo(before.loss, 6);
    expect(after.policy_loss).toBeCloseTo(before.policy_loss, 6);
    expect(after.grad_norm).toBeCloseTo(before.grad_norm, 6);
    expect(after.num_trainable_tokens).toBe(before.num_trainable_tokens);
  });

  it('refuses a job mixing per-token and per-sequence advantages, and rows of the wrong length', async () => {
    const tokens = rlDataFromTokenSequences([{ token_ids: [3, 4, 5], loss_mask: [0, 1, 1], logprobs: [0, -1, -1], advantages: [0, 1, 1], weights: [0, 1, 1] }]);
    const mixed: RlData = { ...tokens, sequences: [...tokens.sequences, { ids: [3, 4, 5], lossMask: [0, 1, 1], trajectory: 1, group: 1 }] };
    await expect(run(mixed, {}, true, 'mixed')).rejects.toThrow(/per-token advantages for every sequence or for none/);
    expect(() => rlDataFromTokenSequences([{ token_ids: [1, 2, 3], loss_mask: [0, 1], logprobs: [0, 0, 0], advantages: [0, 1, 1], weights: [0, 1, 1] }]))
      .toThrow(/"loss_mask" must be 3 finite numbers/);
  });
});
