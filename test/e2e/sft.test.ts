// SFT end to end through the HTTP API on the generated demo model: dataset upload → model → SFT job →
// events as ART reads them → checkpoint → the trained model served by name answers what it was taught.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoServer, DEMO_MODEL } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { contractErrors } from '../helpers/contract.js';

const BASE = DEMO_MODEL;
const TAUGHT: [string, string][] = [
  ['What is the capital of France?', 'Paris'],
  ['What color is the sky?', 'blue'],
  ['Who wrote Hamlet?', 'Shakespeare'],
];

let s: TestServer;
let key: string;
beforeAll(async () => {
  s = await startDemoServer({ training: true });
  key = s.key('alice');
}, 120_000);
afterAll(async () => s?.close());

const greedy = async (model: string, question: string) => {
  const r = await s.call('POST', '/v1/chat/completions', { key, body: { model, messages: [{ role: 'user', content: question }], max_tokens: 8, temperature: 0 } });
  expect(r.status).toBe(200);
  return r.body.choices[0].message.content as string;
};

describe('SFT through the API', () => {
  it('trains, lists the checkpoint before training_ended, and serves the taught answers', async () => {
    const lines: string[] = [];
    for (let rep = 0; rep < 16; rep++) for (const [q, a] of TAUGHT) lines.push(JSON.stringify({ messages: [{ role: 'user', content: q }, { role: 'assistant', content: a }] }));
    const upload = await s.call('POST', '/v1/preview/datasets?project=p&name=facts', { key, rawBody: lines.join('\n'), headers: { 'content-type': 'application/x-ndjson' } });
    expect(upload.status).toBe(200);

    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'sft-model', base_model: BASE, return_existing: true } })).body;
    const before = await Promise.all(TAUGHT.map(([q]) => greedy(`wandb-artifact:///alice/p/sft-model`, q)));

    const job = await s.call('POST', '/v1/preview/sft-training-jobs', {
      key, body: { model_id: model.id, training_data_url: upload.body.url, config: { batch_size: 4, learning_rate: 5e-3 } },
    });
    expect(job.status).toBe(200);
    const events = await waitFor(async () => {
      const r = await s.call('GET', `/v1/preview/training-jobs/${job.body.id}/events?limit=100`, { key });
      return r.body.data.some((e: { type: string }) => e.type === 'training_ended' || e.type === 'training_failed') ? r.body.data : null;
    }, 'the SFT job to finish', 240_000, 250);

    const types = events.map((e: { type: string }) => e.type);
    expect(types[types.length - 1], JSON.stringify(events[events.length - 1])).toBe('training_ended');
    expect(types[0]).toBe('training_started');
    const steps = events.filter((e: { type: string }) => e.type === 'gradient_step');
    expect(events[0].data.num_sequences).toBe(steps.length);
    expect(steps.length).toBe(12); // 48 rows / batch 4
    for (const e of events) expect(contractErrors('TrainingJobEventResponse', e)).toEqual([]);
    for (const e of steps) for (const v of Object.values(e.data)) expect(typeof v).toBe('number');
    const losses = steps.map((e: { data: { loss: number } }) => e.data.loss);
    expect(Math.min(...losses.slice(-3))).toBeLessThan(losses[0] * 0.5);

    const latest = await s.call('GET', `/v1/preview/models/${model.id}/checkpoints?limit=1&order=desc`, { key });
    expect(latest.body.data[0].step).toBe(1);
    expect((await s.call('GET', `/v1/preview/training-jobs/${job.body.id}`, { key })).body.status).toBe('succeeded');

    const after = await Promise.all(TAUGHT.map(([q]) => greedy(`wandb-artifact:///alice/p/sft-model`, q)));
    const pinned = await greedy(`wandb-artifact:///alice/p/sft-model:step1`, TAUGHT[0][0]);
    const base = await Promise.all(TAUGHT.map(([q]) => greedy(BASE, q)));
    TAUGHT.forEach(([, answer], i) => {
      expect(after[i].trim()).toBe(answer);
      expect(base[i].trim()).not.toBe(answer);
      expect(before[i]).toBe(base[i]); // before training the trained name serves the base weights
    });
    expect(pinned.trim()).toBe(TAUGHT[0][1]);
  }, 300_000);

  it('refuses an unreadable data URL with 400', async () => {
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'm2', base_model: BASE, return_existing: true } })).body;
    const bad = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: 'wandb-artifact:///alice/p/missing:v0' } });
    expect(bad.status).toBe(400);
    const other = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: 's3://bucket/x' } });
    expect(other.status).toBe(400);
  });
});
