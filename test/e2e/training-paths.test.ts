// Training paths run to success through the HTTP API: SFT whose data is a Weave table (weave:///…), and RL
// trajectories that carry `tools` and `additional_histories` (ART sends both). Real worker processes, the
// generated demo model.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoServer, DEMO_MODEL } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const BASE = DEMO_MODEL;
let s: TestServer;
let key: string;

beforeAll(async () => {
  s = await startDemoServer({ training: true });
  key = s.key('alice');
}, 120_000);
afterAll(async () => s?.close());

type Event = { type: string; data: Record<string, number> };
const newModel = async (name: string) => (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name, base_model: BASE } })).body.id as string;
async function runToEnd(path: string, body: unknown): Promise<Event[]> {
  const job = await s.call('POST', path, { key, body });
  expect(job.status, JSON.stringify(job.body)).toBe(200);
  const events = await waitFor(async () => {
    const r = await s.call('GET', `/v1/preview/training-jobs/${job.body.id}/events?limit=100`, { key });
    return r.body.data.some((e: Event) => e.type === 'training_ended' || e.type === 'training_failed') ? (r.body.data as Event[]) : null;
  }, `job ${job.body.id} to end`, 240_000, 200);
  expect(events.at(-1)!.type, JSON.stringify(events.at(-1))).toBe('training_ended');
  return events;
}
const steps = (events: Event[]) => events.filter((e) => e.type === 'gradient_step').map((e) => e.data);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe('SFT from a weave:/// table', () => {
  const TAUGHT: [string, string][] = [
    ['What is the capital of France?', 'Paris'],
    ['What color is the sky?', 'blue'],
    ['Who wrote Hamlet?', 'Shakespeare'],
  ];

  it('trains on the table rows ({messages, tools?}) and serves the taught answers', async () => {
    const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }];
    const rows = [];
    for (let rep = 0; rep < 16; rep++) {
      for (const [q, a] of TAUGHT) rows.push({ messages: [{ role: 'user', content: q }, { role: 'assistant', content: a }], ...(rep === 0 ? { tools } : {}) });
    }
    const table = await s.call('POST', '/table/create', { key, body: { table: { project_id: 'alice/p', rows } } });
    expect(table.status).toBe(200);
    const modelId = await newModel('from-table');
    const events = await runToEnd('/v1/preview/sft-training-jobs', {
      model_id: modelId, training_data_url: `weave:///alice/p/table/${table.body.digest}`, config: { batch_size: 4, learning_rate: 5e-3 },
    });
    expect(steps(events)).toHaveLength(12); // 48 rows / batch 4: every row was read
    expect(events[0].data.num_sequences).toBe(12); // what ART reads as the number of steps
    const checkpoints = (await s.call('GET', `/v1/preview/models/${modelId}/checkpoints`, { key })).body.data;
    expect(checkpoints.map((c: { step: number }) => c.step)).toEqual([1]);
    for (const [q, a] of TAUGHT) {
      const r = await s.call('POST', '/v1/chat/completions', { key, body: { model: 'wandb-artifact:///alice/p/from-table', messages: [{ role: 'user', content: q }], max_tokens: 8, temperature: 0 } });
      expect(r.status).toBe(200);
      expect(r.body.choices[0].message.content.trim()).toBe(a);
    }
  }, 300_000);

  it('refuses a table that does not exist in the project with 400, naming it', async () => {
    const modelId = await newModel('no-table');
    const r = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: modelId, training_data_url: 'weave:///alice/p/table/0000000000000000000000000000000000000000000' } });
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toContain('0000000000000000000000000000000000000000000');
  });
});

describe('RL with tools and additional_histories', () => {
  const tools = [{ type: 'function', function: { name: 'search_kb', description: 'Search the knowledge base', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } } }];
  const PROMPT = [{ role: 'user', content: 'Find the manual.' }];
  const FOLLOW_UP = [{ role: 'user', content: 'And the warranty?' }];
  let seed = 100;

  /** One rollout choice (with its per-token logprobs), as ART records it. */
  async function rollout(messages: unknown[], withTools: boolean) {
    const r = await s.call('POST', '/v1/chat/completions', { key, body: { model: BASE, messages, max_tokens: 6, temperature: 1, seed: seed++, ignore_eos: true, ...(withTools ? { tools } : {}) } });
    expect(r.status).toBe(200);
    return r.body.choices[0] as { message: { content: string }; logprobs: { content: unknown[] } };
  }

  it('trains every history of a trajectory, with its tools in the prompt', async () => {
    // Two trajectories with different rewards (a zero-variance group would be skipped), each with a sub-agent
    // history of its own.
    const main = [await rollout(PROMPT, true), await rollout(PROMPT, true)];
    const extra = [await rollout(FOLLOW_UP, false), await rollout(FOLLOW_UP, false)];
    const group = (opts: { tools: boolean; additional: boolean }) => ({
      trajectories: main.map((choice, i) => ({
        messages_and_choices: [...PROMPT, choice],
        reward: i === 0 ? 1 : 0,
        ...(opts.tools ? { tools } : {}),
        ...(opts.additional ? { additional_histories: [{ messages_and_choices: [...FOLLOW_UP, extra[i]] }] } : {}),
      })),
    });
    const run = async (name: string, opts: { tools: boolean; additional: boolean }) =>
      steps(await runToEnd('/v1/preview/training-jobs', { model_id: await newModel(name), trajectory_groups: [group(opts)] }));

    const plain = await run('rl-plain', { tools: false, additional: false });
    const withTools = await run('rl-tools', { tools: true, additional: false });
    const withHistories = await run('rl-histories', { tools: true, additional: true });
    const trained = (st: Record<string, number>[]) => sum(st.map((x) => x.num_trainable_tokens));
    const seen = (st: Record<string, number>[]) => sum(st.map((x) => x.num_tokens)); // all tokens through the model (RL steps report num_tokens; train_tokens is not sent: ART maps it onto the trainable count)
    const choiceTokens = (cs: typeof main) => sum(cs.map((c) => c.logprobs.content.length));

    // Every sampled token of every history is trained, nothing else.
    expect(trained(plain)).toBe(choiceTokens(main));
    expect(trained(withTools)).toBe(choiceTokens(main));
    expect(trained(withHistories)).toBe(choiceTokens(main) + choiceTokens(extra));
    // The tools are rendered into the prompt (the chat template lists them): more tokens go through the model.
    expect(seen(withTools)).toBeGreaterThan(seen(plain));
    expect(seen(withHistories)).toBeGreaterThan(seen(withTools));
    for (const st of [plain, withTools, withHistories]) expect(st[0].reward).toBe(0.5);
  }, 300_000);
});
