// The OpenAI-compatible API end to end: the official `openai` client → HTTP → queue → inference worker
// process → engine → the generated demo model (random weights, real formats).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { startDemoServer, DEMO_MODEL } from '../helpers/demo-server.js';

/** The per-model series of /metrics are shown to a scrape with this key (HEARTH_METRICS_KEY). */
const METRICS_KEY = 'metrics-test-key';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const MODEL = DEMO_MODEL;
let s: TestServer;
let key: string;
let client: OpenAI;

beforeAll(async () => {
  s = await startDemoServer({ env: { HEARTH_METRICS_KEY: METRICS_KEY } });
  key = s.key('alice');
  client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: key, maxRetries: 0, defaultHeaders: { 'OpenAI-Project': 'alice/rollouts' } });
}, 120_000);
afterAll(async () => s?.close());

const ask = (content: string, extra: Record<string, unknown> = {}) =>
  client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 12, temperature: 0, ...extra } as never) as Promise<OpenAI.ChatCompletion>;

async function streamText(content: string, extra: Record<string, unknown> = {}) {
  const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 12, temperature: 0, stream: true, ...extra } as never);
  const chunks: OpenAI.ChatCompletionChunk[] = [];
  for await (const c of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>) chunks.push(c);
  return { chunks, text: chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('') };
}

describe('chat completions through the openai client', () => {
  it('lists the demo model', async () => {
    const list = await client.models.list();
    expect(list.data.map((m) => m.id)).toContain(MODEL);
  });

  it('answers with content, usage, and per-token logprobs written token_id:<id> even when not asked', async () => {
    const r = await ask('Hello there');
    expect(r.object).toBe('chat.completion');
    const choice = r.choices[0];
    expect(typeof choice.message.content).toBe('string');
    expect(['stop', 'length']).toContain(choice.finish_reason);
    expect(r.usage!.completion_tokens).toBeGreaterThan(0);
    expect(r.usage!.total_tokens).toBe(r.usage!.prompt_tokens + r.usage!.completion_tokens);
    const lp = choice.logprobs!.content!;
    expect(lp).toHaveLength(r.usage!.completion_tokens);
    for (const e of lp) {
      expect(e.token).toMatch(/^token_id:\d+$/);
      expect(e.logprob).toBeLessThanOrEqual(0);
      expect(Array.isArray(e.bytes)).toBe(true);
    }
  });

  it('reports length when max_tokens cuts the answer', async () => {
    const r = await ask('Count with me', { max_tokens: 5, ignore_eos: true });
    expect(r.choices[0].finish_reason).toBe('length');
    expect(r.usage!.completion_tokens).toBe(5);
  });

  it('streams the same greedy text it returns whole, role first, then [DONE]', async () => {
    const whole = await ask('Tell me a story');
    const { chunks, text } = await streamText('Tell me a story');
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    expect(text).toBe(whole.choices[0].message.content);
    expect(chunks.some((c) => c.choices[0]?.finish_reason)).toBe(true);
    expect(chunks.every((c) => c.usage === undefined || c.usage === null)).toBe(true); // not asked for
  });

  it('sends a usage chunk when stream_options.include_usage is set', async () => {
    const { chunks } = await streamText('Usage please', { stream_options: { include_usage: true } });
    const last = chunks[chunks.length - 1];
    expect(last.choices).toEqual([]);
    expect(last.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it('books the usage of streams that did not ask for the usage chunk, and sends them none', async () => {
    const headers = { 'OpenAI-Project': 'alice/unasked-usage' };
    const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Quiet' }], max_tokens: 7, ignore_eos: true, stream: true } as never, { headers });
    const completion = await client.completions.create({ model: MODEL, prompt: 'Once', max_tokens: 5, ignore_eos: true, stream: true } as never, { headers });
    const chunks: { usage?: unknown }[] = [];
    for await (const c of chat as unknown as AsyncIterable<{ usage?: unknown }>) chunks.push(c);
    for await (const c of completion as unknown as AsyncIterable<{ usage?: unknown }>) chunks.push(c);
    expect(chunks.length).toBeGreaterThan(12);
    expect(chunks.filter((c) => 'usage' in c)).toEqual([]);
    const booked = s.ctx.store.usage.list('alice').filter((u) => u.project === 'unasked-usage');
    expect(booked.reduce((a, u) => a + u.requests, 0)).toBe(2);
    expect(booked.reduce((a, u) => a + u.completionTokens, 0)).toBe(12);
    expect(booked.reduce((a, u) => a + u.promptTokens, 0)).toBeGreaterThan(0);
  });

  it('returns n choices and repeats itself for the same seed', async () => {
    const r = await ask('Pick', { n: 3, temperature: 1, seed: 7 });
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    const again = await ask('Pick', { n: 3, temperature: 1, seed: 7 });
    expect(again.choices.map((c) => c.message.content)).toEqual(r.choices.map((c) => c.message.content));
  });

  it('stops before a stop string and does not include it', async () => {
    const base = (await ask('Stop test', { max_tokens: 20, ignore_eos: true })).choices[0].message.content!;
    expect(base.length).toBeGreaterThan(6);
    const stop = base.slice(4, 7);
    const r = await ask('Stop test', { max_tokens: 20, ignore_eos: true, stop: [stop] });
    expect(r.choices[0].finish_reason).toBe('stop');
    expect(r.choices[0].message.content).toBe(base.slice(0, base.indexOf(stop)));
  });

  it('enforces a json_schema response format', async () => {
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 6 }, ok: { type: 'boolean' } }, required: ['name', 'ok'] };
    const r = await ask('JSON please', { temperature: 1, seed: 3, max_tokens: 60, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
    const parsed = JSON.parse(r.choices[0].message.content!);
    expect(typeof parsed.name).toBe('string');
    expect(parsed.name.length).toBeLessThanOrEqual(6);
    expect(typeof parsed.ok).toBe('boolean');
  });

  it('calls a named tool', async () => {
    const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string', maxLength: 5 } }, required: ['q'] } } }];
    const r = await ask('Use the tool', { tools, tool_choice: { type: 'function', function: { name: 'lookup' } }, max_tokens: 200, temperature: 1, seed: 1 });
    const call = r.choices[0].message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(r.choices[0].finish_reason).toBe('tool_calls');
    expect(call.function.name).toBe('lookup');
    expect(typeof JSON.parse(call.function.arguments).q).toBe('string');
  });

  it('gives each of several concurrent streams exactly its own tokens (batched = one at a time)', async () => {
    const prompts = ['alpha', 'bravo charlie', 'delta', 'echo foxtrot golf', 'hotel', 'india juliet'];
    const alone: string[] = [];
    for (const p of prompts) alone.push((await ask(p, { max_tokens: 10, ignore_eos: true })).choices[0].message.content!);
    const together = await Promise.all(prompts.map((p) => streamText(p, { max_tokens: 10, ignore_eos: true })));
    expect(together.map((t) => t.text)).toEqual(alone);
  });

  it('frees the slot when the client disconnects mid-stream, and the worker stops generating for it', async () => {
    const ctrl = new AbortController();
    const stream = await client.chat.completions.create(
      { model: MODEL, messages: [{ role: 'user', content: 'a long one' }], max_tokens: 400, ignore_eos: true, stream: true } as never,
      { signal: ctrl.signal, headers: { 'OpenAI-Project': 'team/disconnects' } },
    );
    let n = 0;
    try {
      for await (const _ of stream as unknown as AsyncIterable<unknown>) if (++n === 3) ctrl.abort();
    } catch {
      /* aborted */
    }
    await waitFor(() => s.ctx.queue!.gateway.inFlight() === 0, 'the request to leave the gateway', 10_000);
    await waitFor(() => s.ctx.queue!.liveWorkers('inference')[0]?.load === 0, 'the worker to drop the sequence', 10_000);
    // Cancelled, the request never reached its 400 tokens, so no usage came back to be booked (uncancelled, it
    // would have run to its end and booked them).
    expect(s.ctx.store.usage.list('alice').filter((u) => u.project === 'disconnects')).toEqual([]);
  });

  it('serves raw completions (no chat template)', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 6, temperature: 0, ignore_eos: true } as never);
    expect(r.object).toBe('text_completion');
    expect(r.usage!.completion_tokens).toBe(6);
  });

  it('counts generated tokens in /metrics', async () => {
    const text = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_KEY}` } })).text();
    const line = text.split('\n').find((l) => l.startsWith('hearth_tokens_generated_total{model="hearth/tiny-random-llama"}'));
    expect(Number(line?.split(' ').pop())).toBeGreaterThan(0);
    // Engine steps by batch size arrive with the worker's heartbeats.
    await waitFor(async () => {
      const t = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_KEY}` } })).text();
      return Number(/^hearth_batch_size_count (\S+)/m.exec(t)?.[1] ?? 0) > 0;
    }, 'batch sizes in /metrics', 5_000, 100);
  });

  it('books usage per project from the OpenAI-Project header', async () => {
    const r = await s.call('GET', '/v1/usage', { key });
    const row = r.body.data.find((u: { project: string; model: string }) => u.project === 'rollouts' && u.model === MODEL);
    expect(row.requests).toBeGreaterThan(5);
    expect(row.completion_tokens).toBeGreaterThan(0);
  });
});

describe('inference errors', () => {
  it('answers unknown models 404, bad parameters 400, malformed bodies 400 (OpenAI\'s status, not 422: clients retry a 422)', async () => {
    const unknown = await s.call('POST', '/v1/chat/completions', { key, body: { model: 'nobody/nothing', messages: [{ role: 'user', content: 'x' }] } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ type: 'invalid_request_error', code: 'model_not_found', param: 'model' });
    const trained = await s.call('POST', '/v1/chat/completions/', { key, body: { model: 'wandb-artifact:///bob/p/m', messages: [{ role: 'user', content: 'x' }] } });
    expect(trained.status).toBe(404);
    const unsupported = await s.call('POST', '/v1/chat/completions', { key, body: { model: MODEL, messages: [{ role: 'user', content: 'x' }], use_beam_search: true } });
    expect(unsupported.status).toBe(400);
    expect(unsupported.body.error).toMatchObject({ param: 'use_beam_search', code: 'unsupported_parameter' });
    expect(unsupported.body.error.message).toContain('use_beam_search');
    const malformed = await s.call('POST', '/v1/chat/completions', { key, body: { model: MODEL, messages: 'hi' } });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatchObject({ type: 'invalid_request_error', param: 'messages', code: 'invalid_type' });
    const tooLong = await s.call('POST', '/v1/chat/completions', { key, body: { model: MODEL, messages: [{ role: 'user', content: 'word '.repeat(2000) }] } });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error.message).toMatch(/\d+/);
  });
});

describe('hardware options', () => {
  it('calibrates on first request and prices the model from measured throughput', async () => {
    const r = await s.call('GET', '/inference/cpu/v2/hardware?model=tiny-random-llama', { key });
    expect(r.status).toBe(200);
    expect(r.body.hardware.length).toBeGreaterThanOrEqual(1);
    const option = r.body.hardware[0];
    expect(option).toMatchObject({ id: expect.any(String), name: expect.any(String), type: expect.any(String) });
    expect(option.pricing.cents_per_million_input_tokens).toBeGreaterThan(0);
    expect(option.pricing.cents_per_million_output_tokens).toBeGreaterThan(0);
    // Prefill is faster than decode per token, so input tokens cost less.
    expect(option.pricing.cents_per_million_input_tokens).toBeLessThan(option.pricing.cents_per_million_output_tokens);
    for (const v of Object.values(option.specs)) expect(typeof v).toBe('string');
    const again = await s.call('GET', '/inference/cpu/v2/hardware?model=tiny-random-llama', { key });
    expect(again.body).toEqual(r.body); // cached measurement, same prices
  });

  it('filters by vendor, and answers 400 without a model and 404 for an unknown one', async () => {
    expect((await s.call('GET', '/inference/nvidia/v2/hardware?model=tiny-random-llama', { key })).body).toEqual({ hardware: [] });
    expect((await s.call('GET', '/inference/acme/v2/hardware?model=tiny-random-llama', { key })).body).toEqual({ hardware: [] });
    const missing = await s.call('GET', '/inference/cpu/v2/hardware', { key });
    expect(missing.status).toBe(400);
    expect(missing.body.detail[0].loc).toEqual(['query', 'model']);
    expect((await s.call('GET', '/inference/cpu/v2/hardware?model=nope', { key })).status).toBe(404);
  });
});
