// A forward-only RL job (a native run's RL forward_backward, worker/training/loop.ts RlJob.forwardOnly): one
// gradient_step with the loss the training job starts from and the packing it would use, no checkpoint, weights
// untouched.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { runRl, type TrainingEvent } from '../../worker/training/loop.js';
import { tokenizeTrajectoryGroups } from '../../worker/training/rl-data.js';
import { END, chars, toyTokenizer } from '../helpers/toy-chat-tokenizer.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { tinyConfig } from './training-helpers.js';
import { rlSettingsFromExperimentalConfig } from '../../src/protocol/rl-settings.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-rl-measure-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
});

const choice = (text: string) => ({
  finish_reason: 'stop', index: 0, message: { role: 'assistant', content: text },
  logprobs: { content: [...chars(text), END].map((id) => ({ token: `token_id:${id}`, logprob: -1.5 })) },
});
const trajectory = (q: string, a: string, reward: number) => ({ messages_and_choices: [{ role: 'user', content: q }, choice(a)], reward });
const groups = [
  { trajectories: [trajectory('2+2?', '4', 1), trajectory('2+2?', '5', 0), trajectory('2+2?', '22', 0)] },
  { trajectories: [trajectory('1+1?', '2', 1), trajectory('1+1?', '2', 1)] },
];

describe('forward-only RL job', () => {
  const cfg = tinyConfig();
  const weights = randomWeights(cfg, 3);
  const model = { config: cfg, weights, baseModelName: 'tiny', mode: 'lora' as const };

  it('reports the first training step\'s loss and metrics at the starting weights, in one gradient_step, and writes nothing', async () => {
    const data = await tokenizeTrajectoryGroups(groups, toyTokenizer, { allowTrainingWithoutLogprobs: false });
    const config = { learning_rate: 1e-2, packed_sequence_length: 4096 };
    const measured: TrainingEvent[] = [];
    const dir = join(root, 'measure');
    const result = await runRl({ data, settings: rlSettingsFromExperimentalConfig(config), forwardOnly: true }, { model, checkpointDir: dir, log: () => {} }, (e) => void measured.push(e));
    expect(measured[0]).toEqual({ type: 'training_started', data: { num_sequences: 1 } });
    expect(measured).toHaveLength(2);
    expect(existsSync(dir)).toBe(false);
    expect(result.steps).toBe(0);

    const trained: TrainingEvent[] = [];
    await runRl({ data, settings: rlSettingsFromExperimentalConfig(config) }, { model, checkpointDir: join(root, 'train'), log: () => {} }, (e) => void trained.push(e));
    const m = measured[1].data as Record<string, number>;
    const t = trained[1].data as Record<string, number>;
    // One packed step: the measurement is exactly that step's forward half.
    expect(m.loss).toBeCloseTo(t.loss, 5);
    expect(m.policy_loss).toBeCloseTo(t.policy_loss, 5);
    for (const k of ['num_trainable_tokens', 'num_tokens', 'num_groups_trainable', 'num_trajectories', 'reward']) expect(m[k]).toBe(t[k]);
    expect(m).toMatchObject({ packed_sequences: 1, packed_sequence_length: 4096, num_groups_trainable: 1 });
    expect(m.grad_norm).toBeUndefined();
  });

  it('with nothing to learn reports zero trainable tokens and no packed sequence', async () => {
    const data = await tokenizeTrajectoryGroups([groups[1]], toyTokenizer, { allowTrainingWithoutLogprobs: false });
    const events: TrainingEvent[] = [];
    await runRl({ data, forwardOnly: true }, { model, checkpointDir: join(root, 'none'), log: () => {} }, (e) => void events.push(e));
    expect(events[1].data).toMatchObject({ num_trainable_tokens: 0, packed_sequences: 0, loss: 0 });
  });
});
