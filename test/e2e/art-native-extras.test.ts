// Native runs beyond train_sft's default path (docs/art.md "The native training-runs API"), through real HTTP and a
// real training worker: SFT batches with assistant_turns "last" train only each trajectory's final assistant turn;
// the publication modes Hearth cannot honour are refused with nothing stored.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { startDemoServer } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { ForwardBackwardResult, NativeTrainingOperation, NativeTrainingResult, OptimStepResult } from '../helpers/art-native-models.js';

const BASE = 'hearth/tiny-random-llama';
const hex = () => crypto.randomBytes(16).toString('hex');
const spec = { base_model: BASE, dtype: 'bfloat16', lora_rank: 4, lora_target_modules: ['linear_qkv', 'linear_proj'] };
const loss = { name: 'cross_entropy', normalize_advantages: true, values: {} };
const optimizer = { learning_rate: 1e-2, beta1: 0.9, beta2: 0.99, eps: 1e-8, weight_decay: 0.1, grad_clip_norm: 1 };
// Two assistant turns; the second one is a Choice, as ART's trajectories hold the sampled ones.
const twoTurns = {
  messages_and_choices: [
    { role: 'user', content: 'What is the capital of France?' }, { role: 'assistant', content: 'Paris, a large city on the Seine.' },
    { role: 'user', content: 'And of Italy?' }, { finish_reason: 'stop', index: 0, message: { role: 'assistant', content: 'Rome' }, logprobs: null },
  ],
  tools: null,
};

let s: TestServer;
afterAll(async () => s?.close());

const parse = <T extends z.ZodType>(schema: T, value: unknown): z.output<T> => {
  const r = schema.safeParse(value);
  expect(r.success, JSON.stringify(r.error?.issues ?? null)).toBe(true);
  return r.data as z.output<T>;
};

describe('native runs: assistant_turns "last", publication modes', () => {
  it('"last" trains only the final assistant turn; unsupported publications 501', async () => {
    s = await startDemoServer({ training: true });
    const home = s.home;
    const key = s.key('alice');
    const post = (p: string, body?: unknown) => s.call('POST', `/v1${p}`, { key, body });
    const get = (p: string) => s.call('GET', `/v1${p}`, { key });
    const id: string = (await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, run_name: 'extras', spec })).body.run_id;
    let seq = 0;
    const submit = async (kind: string, body: Record<string, unknown>) => {
      const r = await post(`/training/runs/${id}/${kind}`, { request_id: `${kind}-${hex()}`, sequence_id: seq, ...body });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      seq++;
      return parse(NativeTrainingOperation, r.body);
    };
    const result = async <T extends z.ZodType>(op: { operation_id: string; kind: string }, schema: T): Promise<z.output<T>> => {
      const done = await waitFor(async () => {
        const o = (await get(`/training/runs/${id}/operations/${op.operation_id}`)).body;
        return ['succeeded', 'failed', 'cancelled'].includes(o.status) ? o : null;
      }, op.kind, 120_000, 50);
      expect(done.status, JSON.stringify(done.error)).toBe('succeeded');
      return parse(schema, parse(NativeTrainingResult, (await get(`/training/runs/${id}/operations/${op.operation_id}/result`)).body).result);
    };

    // assistant_turns: the same trajectory trains both turns ("all") or only the last; "last" counts exactly the
    // tokens of the final turn, which the one-turn trajectory that ends the same way also trains.
    const fbAll = await submit('forward_backward', { batch: { kind: 'sft', trajectories: [twoTurns], assistant_turns: 'all' }, loss });
    const fbLast = await submit('forward_backward', { batch: { kind: 'sft', trajectories: [twoTurns], assistant_turns: 'last' }, loss });
    const lastOnly = { messages_and_choices: twoTurns.messages_and_choices.slice(2), tools: null };
    const fbLastOnly = await submit('forward_backward', { batch: { kind: 'sft', trajectories: [lastOnly], assistant_turns: 'all' }, loss });
    const all = (await result(fbAll, ForwardBackwardResult)).packing.trainable_assistant_tokens;
    const last = (await result(fbLast, ForwardBackwardResult)).packing.trainable_assistant_tokens;
    const final = (await result(fbLastOnly, ForwardBackwardResult)).packing.trainable_assistant_tokens;
    expect(last).toBeGreaterThan(0);
    expect(all).toBeGreaterThan(last);
    expect(last).toBe(final);
    // The "last" batch's kept inputs mark the earlier turn as context, and the optim_step applies all three batches.
    const kept = fs.readFileSync(path.join(home, 'native-runs', id, `1-${fbLast.operation_id}.jsonl`), 'utf8');
    expect(JSON.parse(kept).messages.map((m: { weight?: number }) => m.weight)).toEqual([undefined, 0, undefined, undefined]);
    const step = await result(await submit('optim_step', { optimizer }), OptimStepResult);
    expect(step.contributing_forward_backward_operation_ids).toEqual([fbAll.operation_id, fbLast.operation_id, fbLastOnly.operation_id]);
    expect(step.metrics.num_trainable_tokens).toBe(all + last + final);

    // Publication modes Hearth cannot honour: 501 naming why, nothing stored, the sequence does not advance.
    for (const mode of ['merged_weights', 'external_lora']) {
      const r = await post(`/training/runs/${id}/save_weights_for_sampler`, {
        request_id: `publish-${hex()}`, sequence_id: seq, checkpoint_name: 'step-1', ttl_seconds: null, publication: { mode, model_alias: 'extras' },
      });
      expect([r.status, r.body.detail]).toEqual([501, expect.stringContaining(`publication mode "${mode}" is not implemented by this server: `)]);
    }
    expect((await get(`/training/runs/${id}`)).body.next_sequence_id).toBe(seq);
  }, 300_000);
});
