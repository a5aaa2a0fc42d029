// RL end to end, the way ART's ServerlessBackend drives it: rollouts through chat completions on the
// model's latest name, a toy verifier, one RL job per iteration, events polled to the end, repeat.
// Measured when written (2026-11-22): mean reward 0.047 (base) → 0.82 after 3 jobs → 0.95 after 6.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoServer } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { contractErrors } from '../helpers/contract.js';

const TARGET = 'stairs'; // reward 1 when the reply contains this word (about 5% of the base model's replies)
const PROMPT = [{ role: 'user', content: 'Say something nice.' }];
const NAME = 'wandb-artifact:///alice/p/rl-model';

let s: TestServer;
let key: string;
let seed = 0;

beforeAll(async () => {
  s = await startDemoServer({ training: true, maxContext: null });
  key = s.key('alice');
}, 120_000);
afterAll(async () => s?.close());

interface Trajectory { messages_and_choices: unknown[]; reward: number }

async function rollouts(groups: number, perGroup: number): Promise<{ trajectories: Trajectory[] }[]> {
  const out = [];
  for (let g = 0; g < groups; g++) {
    const trajectories = await Promise.all(
      Array.from({ length: perGroup }, async () => {
        const r = await s.call('POST', '/v1/chat/completions', { key, body: { model: NAME, messages: PROMPT, max_tokens: 8, temperature: 1, seed: seed++ } });
        expect(r.status).toBe(200);
        const choice = r.body.choices[0];
        return { messages_and_choices: [...PROMPT, choice], reward: choice.message.content.toLowerCase().includes(TARGET) ? 1 : 0 };
      }),
    );
    out.push({ trajectories });
  }
  return out;
}

const meanReward = (groups: { trajectories: Trajectory[] }[]) => {
  const r = groups.flatMap((g) => g.trajectories.map((t) => t.reward));
  return r.reduce((a, b) => a + b, 0) / r.length;
};

describe('RL through the API', () => {
  it('raises the mean reward of fresh rollouts over the base model', async () => {
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'rl-model', base_model: 'hearth/tiny-random-llama', return_existing: true } })).body;
    const baseline = meanReward(await rollouts(16, 8));
    for (let iteration = 1; iteration <= 4; iteration++) {
      const groups = await rollouts(16, 8);
      const job = await s.call('POST', '/v1/preview/training-jobs', {
        key, body: { model_id: model.id, trajectory_groups: groups, experimental_config: { learning_rate: 1e-2, packed_sequence_length: 512, loss_fn: 'cispo' } },
      });
      expect(job.status).toBe(200);
      const events = await waitFor(async () => {
        const r = await s.call('GET', `/v1/preview/training-jobs/${job.body.id}/events?limit=100`, { key });
        return r.body.data.some((e: { type: string }) => e.type === 'training_ended' || e.type === 'training_failed') ? r.body.data : null;
      }, `RL job ${iteration}`, 120_000, 200);
      expect(events[events.length - 1].type, JSON.stringify(events[events.length - 1])).toBe('training_ended');
      expect(events[0].type).toBe('training_started');
      const steps = events.filter((e: { type: string }) => e.type === 'gradient_step');
      expect(events[0].data.num_sequences).toBe(steps.length);
      for (const e of events) expect(contractErrors('TrainingJobEventResponse', e)).toEqual([]);
      for (const e of steps) {
        for (const v of Object.values(e.data)) expect(typeof v).toBe('number');
        expect(e.data).toHaveProperty('loss');
        expect(e.data).toHaveProperty('reward');
      }
      const latest = await s.call('GET', `/v1/preview/models/${model.id}/checkpoints?limit=1&order=desc`, { key });
      expect(latest.body.data[0].step).toBe(iteration);
    }
    const trained = meanReward(await rollouts(16, 8));
    expect(baseline).toBeLessThan(0.2);
    expect(trained).toBeGreaterThan(baseline + 0.4);
  }, 300_000);

  it('rejects malformed trajectory groups with 422 and stores nothing', async () => {
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'rl-bad', base_model: 'hearth/tiny-random-llama', return_existing: true } })).body;
    const jobsBefore = s.store.jobs.count();
    for (const groups of [[{}], [{ trajectories: [{ reward: 'x' }] }], [{ trajectories: [{ messages_and_choices: 'no' }] }], []]) {
      const r = await s.call('POST', '/v1/preview/training-jobs', { key, body: { model_id: model.id, trajectory_groups: groups } });
      expect(r.status).toBe(422);
    }
    expect(s.store.jobs.count()).toBe(jobsBefore);
  });
});
