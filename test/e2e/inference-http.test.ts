// Paths of the OpenAI-compatible API run over real HTTP with the official `openai` client (the unit tests run
// them through an in-process shim): /v1/completions streaming and logprobs, streamed tool-call deltas, and
// the Prometheus metrics that a served request moves.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { startDemoServer, DEMO_MODEL } from '../helpers/demo-server.js';

/** The per-model series of /metrics are shown to a scrape with this key (HEARTH_METRICS_KEY). */
const METRICS_KEY = 'metrics-test-key';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const MODEL = DEMO_MODEL;
let s: TestServer;
let client: OpenAI;

beforeAll(async () => {
  s = await startDemoServer({ env: { HEARTH_METRICS_KEY: METRICS_KEY } });
  client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: s.key('alice'), maxRetries: 0 });
}, 120_000);
afterAll(async () => s?.close());

type LegacyLogprobs = { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[] };

describe('/v1/completions over HTTP', () => {
  const req = { model: MODEL, prompt: 'Once upon a time', max_tokens: 10, temperature: 0.9, seed: 5, logprobs: 2 };

  it('returns legacy logprobs: one entry per generated token, top alternatives, offsets into the text', async () => {
    const r = await client.completions.create(req);
    const c = r.choices[0];
    const lp = c.logprobs as unknown as LegacyLogprobs;
    expect(r.object).toBe('text_completion');
    expect(lp.tokens).toHaveLength(r.usage!.completion_tokens);
    expect(lp.token_logprobs).toHaveLength(lp.tokens.length);
    for (const [i, top] of lp.top_logprobs.entries()) {
      expect(Object.keys(top).length).toBeGreaterThanOrEqual(1);
      expect(Object.keys(top).length).toBeLessThanOrEqual(2);
      expect(lp.token_logprobs[i]).toBeLessThanOrEqual(0);
      // The sampled token's logprob is never above the best alternative's.
      expect(lp.token_logprobs[i]).toBeLessThanOrEqual(Math.max(...Object.values(top)) + 1e-6);
    }
    expect(lp.text_offset[0]).toBe(0);
    expect([...lp.text_offset].sort((a, b) => a - b)).toEqual(lp.text_offset);
    expect(['length', 'stop']).toContain(c.finish_reason);
    expect(c.finish_reason).toBe(lp.tokens.length === 10 ? 'length' : 'stop');
  });

  it('streams the same text, logprobs and finish reason as the whole answer', async () => {
    const whole = await client.completions.create(req);
    const stream = await client.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.Completion[] = [];
    for await (const ch of stream) chunks.push(ch);
    const text = chunks.map((ch) => ch.choices[0]?.text ?? '').join('');
    expect(text).toBe(whole.choices[0].text);
    const tokens = chunks.flatMap((ch) => (ch.choices[0]?.logprobs as unknown as LegacyLogprobs | undefined)?.tokens ?? []);
    const logprobs = chunks.flatMap((ch) => (ch.choices[0]?.logprobs as unknown as LegacyLogprobs | undefined)?.token_logprobs ?? []);
    const wholeLp = whole.choices[0].logprobs as unknown as LegacyLogprobs;
    expect(tokens).toEqual(wholeLp.tokens);
    expect(logprobs).toEqual(wholeLp.token_logprobs);
    expect(chunks.map((ch) => ch.choices[0]?.finish_reason).filter(Boolean)).toEqual([whole.choices[0].finish_reason]);
    expect(chunks.at(-1)!.usage).toEqual(whole.usage);
  });

  it('says in Server-Timing how long the worker took to the first token (streams) or the answer, and the server in all', async () => {
    const timing = (res: Response) => {
      const header = res.headers.get('server-timing') ?? '';
      const dur = (name: string) => Number(new RegExp(`(?:^|,\\s*)${name};dur=([\\d.]+)`).exec(header)?.[1]);
      return { worker: dur('worker'), total: dur('total') };
    };
    const post = (body: object) => fetch(`${s.url}/v1/completions`, { method: 'POST', headers: { authorization: `Bearer ${s.key('alice')}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const whole = await post({ model: MODEL, prompt: 'Once upon a time', max_tokens: 4 });
    expect(whole.status).toBe(200);
    const streamed = await post({ model: MODEL, prompt: 'Once upon a time', max_tokens: 4, stream: true });
    expect(streamed.status).toBe(200);
    await streamed.text();
    await whole.json();
    for (const t of [timing(whole), timing(streamed)]) {
      expect(t.worker).toBeGreaterThan(0);
      expect(t.total).toBeGreaterThan(t.worker); // the worker's time is part of the server's
    }
  });

  it('echoes the prompt with its own tokens scored (echo + logprobs), matching what generation reported for the same tokens', async () => {
    const call = (body: Record<string, unknown>) => s.call('POST', '/v1/completions', { key: s.key('alice'), body: { model: MODEL, ...body } });
    const gen = await call({ prompt: 'The lamp on the hill', max_tokens: 5, temperature: 0, logprobs: 2, return_token_ids: true });
    expect(gen.status).toBe(200);
    const g = gen.body.choices[0];
    const ids = [...g.prompt_token_ids, ...g.token_ids];
    // Prompt + what was generated, scored: the last tokens' logprobs are the ones generation reported.
    const echo = await call({ prompt: ids, max_tokens: 1, temperature: 0, logprobs: 2, echo: true });
    expect(echo.status, JSON.stringify(echo.body)).toBe(200);
    const e = echo.body.choices[0];
    const lp = e.logprobs as { tokens: string[]; token_logprobs: (number | null)[]; top_logprobs: (Record<string, number> | null)[]; text_offset: number[] };
    expect(lp.tokens).toHaveLength(ids.length + 1);
    expect(lp.token_logprobs[0]).toBeNull();
    expect(lp.top_logprobs[0]).toBeNull();
    const scored = lp.token_logprobs.slice(g.prompt_token_ids.length, ids.length) as number[];
    scored.forEach((v, i) => expect(v).toBeCloseTo(g.logprobs.token_logprobs[i], 3));
    for (let i = 1; i < ids.length; i++) {
      expect(lp.token_logprobs[i]).toBeLessThanOrEqual(0);
      expect(Object.keys(lp.top_logprobs[i]!).length).toBe(2);
    }
    expect(e.text.startsWith('The lamp on the hill' + g.text)).toBe(true);
    expect(lp.text_offset[lp.text_offset.length - 1]).toBeGreaterThanOrEqual(('The lamp on the hill' + g.text).length);
    // The same prompt as text, and through a checkpoint-free name, gives the same scores.
    const asText = await call({ prompt: 'The lamp on the hill', max_tokens: 1, temperature: 0, logprobs: 0, echo: true });
    expect(asText.body.choices[0].logprobs.token_logprobs.slice(0, g.prompt_token_ids.length)).toEqual(lp.token_logprobs.slice(0, g.prompt_token_ids.length));
    expect(asText.body.choices[0].logprobs.top_logprobs).toBeNull();
    // Streamed, echo is refused by name.
    const streamed = await call({ prompt: 'x', max_tokens: 1, echo: true, stream: true });
    expect(streamed.status).toBe(400);
    expect(JSON.stringify(streamed.body)).toContain('echo');
  });

  it('answers several prompts with one choice each, in order', async () => {
    const prompts = ['Once', 'The dog', 'A'];
    const r = await client.completions.create({ model: MODEL, prompt: prompts, max_tokens: 4, temperature: 0, ignore_eos: true } as never);
    const alone = await Promise.all(prompts.map(async (p) => (await client.completions.create({ model: MODEL, prompt: p, max_tokens: 4, temperature: 0, ignore_eos: true } as never)).choices[0].text));
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(r.choices.map((c) => c.text)).toEqual(alone);
  });
});

describe('streamed tool calls over HTTP', () => {
  it('sends tool-call deltas that add up to the non-streamed call, and finish_reason tool_calls', async () => {
    const tools = [{ type: 'function' as const, function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string', maxLength: 5 } }, required: ['q'] } } }];
    const req = { model: MODEL, messages: [{ role: 'user' as const, content: 'Use the tool' }], tools, tool_choice: 'required' as const, max_tokens: 200, temperature: 1, seed: 3 };
    const whole = await client.chat.completions.create(req);
    const expected = whole.choices[0].message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(whole.choices[0].finish_reason).toBe('tool_calls');

    const stream = await client.chat.completions.create({ ...req, stream: true });
    const deltas: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    const finishes: string[] = [];
    let content = '';
    for await (const ch of stream) {
      deltas.push(...(ch.choices[0]?.delta.tool_calls ?? []));
      content += ch.choices[0]?.delta.content ?? '';
      if (ch.choices[0]?.finish_reason) finishes.push(ch.choices[0].finish_reason);
    }
    expect(finishes).toEqual(['tool_calls']);
    expect(content).toBe('');
    expect(deltas.length).toBeGreaterThan(0);
    expect(deltas.every((d) => d.index === 0)).toBe(true);
    expect(deltas[0]).toMatchObject({ id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'lookup' } });
    const args = deltas.map((d) => d.function?.arguments ?? '').join('');
    expect(JSON.parse(args)).toEqual(JSON.parse(expected.function.arguments));
  });
});

/** The value of one sample of /metrics, 0 when it is not there yet. */
function sample(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.split(' ').pop()) : 0;
}
const metrics = async () => (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_KEY}` } })).text();

describe('Prometheus metrics over HTTP', () => {
  it('move by what one served request did: its tokens, its HTTP request, its engine steps', async () => {
    const before = await metrics();
    const chatRoute = '{method="POST",route="/v1/chat/completions",status="200"}';
    const r = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'count me' }], max_tokens: 7, temperature: 0, ignore_eos: true } as never) as OpenAI.ChatCompletion;
    expect(r.usage!.completion_tokens).toBe(7);
    const after = await metrics();
    expect(sample(after, 'hearth_tokens_generated_total', `{model="${MODEL}"}`) - sample(before, 'hearth_tokens_generated_total', `{model="${MODEL}"}`)).toBe(7);
    expect(sample(after, 'hearth_http_requests_total', chatRoute) - sample(before, 'hearth_http_requests_total', chatRoute)).toBe(1);
    // Engine steps by batch size arrive with the worker's next heartbeats: at least one step per generated token.
    const stepsBefore = sample(before, 'hearth_batch_size_count');
    await waitFor(async () => sample(await metrics(), 'hearth_batch_size_count') - stepsBefore >= 7, 'the request\'s engine steps in /metrics');
    // The loaded model's mixed-step budget (auto: the initial 32 until decode and mixed steps were measured, then 8–512).
    const budget = (await metrics()).split('\n').find((l) => l.startsWith('hearth_prefill_chunk_tokens{') && l.includes(`model="${MODEL}"`));
    expect(budget, 'hearth_prefill_chunk_tokens for the served model').toBeDefined();
    expect(Number(budget!.split(' ').at(-1))).toBeGreaterThanOrEqual(8);
  });
});
