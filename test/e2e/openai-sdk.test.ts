// The unmodified `openai` SDK against Hearth, for what its users see when things go wrong: every error class
// carries Hearth's message (OpenAI's `error` object), `models.retrieve` finds names with slashes, and the
// response shapes match the SDK's types where they used to differ (issue #20, items 1–4 and 6).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import { startDemoServer, DEMO_MODEL } from '../helpers/demo-server.js';
import { startServer, tempHome, type TestServer } from '../helpers/server.js';

const MODEL = DEMO_MODEL;
let s: TestServer;
let key: string;
let client: OpenAI;

beforeAll(async () => {
  s = await startDemoServer();
  key = s.key('alice');
  // maxRetries 2 (the SDK's default): a 4xx must not be retried, and the request count below proves it.
  client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: key, maxRetries: 2 });
}, 120_000);
afterAll(async () => s?.close());

/** The SDK's error for a call that must fail (the test fails if it succeeds). */
async function failure(call: () => Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await call();
  } catch (err) {
    if (err instanceof OpenAI.APIError) return err;
    throw err;
  }
  throw new Error('the call succeeded');
}

const chat = (extra: Record<string, unknown>) =>
  client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0, ...extra } as never);

describe('models.retrieve', () => {
  it('finds a base model whose id has a slash (the SDK sends it URL-encoded)', async () => {
    const m = await client.models.retrieve(MODEL);
    expect(m).toMatchObject({ id: MODEL, object: 'model', owned_by: 'system', root: MODEL });
    const listed = (await client.models.list()).data.find((x) => x.id === MODEL);
    expect(m).toEqual(listed);
  });

  it("finds the caller's trained models by their wandb-artifact name, and nobody else's", async () => {
    const created = await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'retrievable', base_model: MODEL } });
    expect(created.status).toBe(200);
    const name = 'wandb-artifact:///alice/p/retrievable';
    expect(await client.models.retrieve(name)).toMatchObject({ id: name, object: 'model', owned_by: 'alice', root: MODEL });
    // Step names the inference routes accept are models too.
    expect(await client.models.retrieve(`${name}:step0`)).toMatchObject({ id: `${name}:step0`, root: MODEL });
    const bob = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: s.key('bob'), maxRetries: 0 });
    const err = await failure(() => bob.models.retrieve(name));
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.code).toBe('model_not_found');
  });

  it('answers an unknown model with NotFoundError naming it', async () => {
    const err = await failure(() => client.models.retrieve('nobody/nothing'));
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.message).toBe('404 The model `nobody/nothing` does not exist on this server');
    expect(err).toMatchObject({ type: 'invalid_request_error', code: 'model_not_found', param: 'model' });
  });
});

describe('errors reach the SDK with their message, class, type, param and code', () => {
  it('401 AuthenticationError for a bad key', async () => {
    const bad = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'hearth_not_a_key', maxRetries: 0 });
    const err = await failure(() => bad.models.list());
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(err.message).toBe('401 Invalid or revoked API key');
    expect(err.code).toBe('invalid_api_key');
  });

  it('404 NotFoundError for an unknown model on chat and completions', async () => {
    const err = await failure(() => chat({ model: 'nobody/nothing' }));
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.message).toContain('nobody/nothing');
    expect(err.code).toBe('model_not_found');
    const completion = await failure(() => client.completions.create({ model: 'nobody/nothing', prompt: 'x' }));
    expect(completion).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('400 BadRequestError naming an unsupported parameter, a too-long prompt and too many max_tokens', async () => {
    const unsupported = await failure(() => chat({ use_beam_search: true }));
    expect(unsupported).toBeInstanceOf(OpenAI.BadRequestError);
    expect(unsupported).toMatchObject({ param: 'use_beam_search', code: 'unsupported_parameter', type: 'invalid_request_error' });
    expect(unsupported.message).toBe('400 unsupported parameters: use_beam_search');
    const tooLong = await failure(() => chat({ messages: [{ role: 'user', content: 'word '.repeat(2000) }] }));
    expect(tooLong).toBeInstanceOf(OpenAI.BadRequestError);
    expect(tooLong.code).toBe('context_length_exceeded');
    expect(tooLong.message).toMatch(/^400 This model's maximum context length is 512 tokens\. However, your messages resulted in \d+ tokens\. Please reduce the length of the messages\.$/);
    const maxTokens = await failure(() => chat({ max_tokens: 100_000 }));
    expect(maxTokens).toMatchObject({ param: 'max_tokens', code: 'invalid_value' });
    expect(maxTokens.message).toContain('max_tokens is too large: 100000');
  });

  it('400 for top_logprobs without logprobs, as OpenAI answers; with logprobs it works', async () => {
    const err = await failure(() => chat({ top_logprobs: 2 }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.param).toBe('top_logprobs');
    expect(err.message).toBe('400 top_logprobs is only allowed when logprobs is true');
    const ok = (await chat({ top_logprobs: 2, logprobs: true })) as OpenAI.ChatCompletion;
    expect(ok.choices[0].logprobs!.content![0].top_logprobs).toHaveLength(2);
  });

  it('400, not a retried 500, for token ids outside the vocabulary', async () => {
    const before = s.store.usage.list('alice').reduce((n, u) => n + u.requests, 0);
    let attempts = 0;
    const counting = new OpenAI({
      baseURL: `${s.url}/v1`, apiKey: key, maxRetries: 2,
      fetch: (url, init) => (attempts++, fetch(url as string, init as RequestInit)),
    });
    const err = await failure(() => counting.completions.create({ model: MODEL, prompt: [9038, 2501], max_tokens: 2 }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.message).toMatch(/^400 prompt: token id 9038 is outside the vocabulary \(0\.\.\d+\)$/);
    expect(err.param).toBe('prompt');
    expect(attempts).toBe(1);
    // Ids inside the vocabulary still work.
    const ok = await counting.completions.create({ model: MODEL, prompt: [1, 2, 3], max_tokens: 2, temperature: 0 });
    expect(ok.choices[0].text).toEqual(expect.any(String));
    expect(s.store.usage.list('alice').reduce((n, u) => n + u.requests, 0)).toBe(before + 1);
  });

  it('400 BadRequestError (not 422, which clients retry) names the field, and the body keeps FastAPI\'s detail list', async () => {
    const err = await failure(() => client.chat.completions.create({ model: MODEL, messages: [{ role: 'wizard', content: 'hi' }] } as never));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.param).toBe('messages[0].role');
    expect(err.type).toBe('invalid_request_error');
    expect(err.message).toMatch(/^400 Invalid request: messages\[0\]\.role: /);
    const raw = await s.call('POST', '/v1/chat/completions', { key, body: { model: 5, messages: 'hi' } });
    expect(raw.status).toBe(400);
    expect(raw.body.error).toMatchObject({ type: 'invalid_request_error', param: 'model', code: 'invalid_type' });
    expect(raw.body.error.message).toMatch(/and 1 more problem/);
    expect(raw.body.detail.map((d: { loc: unknown[] }) => d.loc)).toEqual([['body', 'model'], ['body', 'messages']]);
  });

  it('404 NotFoundError "Invalid URL" for an unknown OpenAI path, even with a body that is not JSON', async () => {
    const err = await failure(() => client.post('/assistants', { body: 'not json' as never, headers: { 'content-type': 'application/json' } }));
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.message).toBe('404 Invalid URL (POST /v1/assistants)');
  });

  it('hardware options and usage answer in the OpenAI shape too', async () => {
    const root = new OpenAI({ baseURL: s.url, apiKey: key, maxRetries: 0 });
    const err = await failure(() => root.get('/inference/cpu/v2/hardware', { query: { model: 'no-such-model' } }));
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.message).toBe('404 Model "no-such-model" is not installed on this server');
    expect(err.code).toBe('model_not_found');
    const bad = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'hearth_nope', maxRetries: 0 });
    expect((await failure(() => bad.get('/usage'))).message).toBe('401 Invalid or revoked API key');
  });
});

describe('errors from a server without workers, and from the rate limiter', () => {
  it('503 InternalServerError with its message; 429 RateLimitError with retry-after', async () => {
    const bareHome = tempHome();
    await ensureDemoModel(bareHome);
    const bare = await startServer({ home: bareHome, env: { HEARTH_RATE_LIMIT: '3' } });
    try {
      const c = new OpenAI({ baseURL: `${bare.url}/v1`, apiKey: bare.key('carol'), maxRetries: 0 });
      const unavailable = await failure(() => c.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }] }));
      expect(unavailable).toBeInstanceOf(OpenAI.InternalServerError);
      expect(unavailable.status).toBe(503);
      expect(unavailable.message).toBe('503 No inference workers are attached to this server');
      expect(unavailable.type).toBe('server_error');
      let limited: InstanceType<typeof OpenAI.APIError> | null = null;
      for (let i = 0; i < 10 && !limited; i++) {
        const err = await c.models.list().then(() => null, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
        if (err) limited = err;
      }
      expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
      expect(limited!.message).toBe('429 Rate limit reached for this API key');
      expect(limited!).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
      expect(Number(limited!.headers?.get('retry-after'))).toBeGreaterThanOrEqual(1);
      const root = new OpenAI({ baseURL: bare.url, apiKey: bare.key('carol'), maxRetries: 0 });
      const noQueue = await failure(() => root.get('/inference/cpu/v2/hardware', { query: { model: 'tiny-random-llama' } }));
      expect(noQueue.message).toBe('503 No inference workers are attached to this server: hardware options are measured on them');
    } finally {
      await bare.close();
    }
  });

  it('hardware options right after start: the first request waits for the starting worker and gets measured prices', async () => {
    const home = tempHome();
    await ensureDemoModel(home);
    const fresh = await startServer({ home, env: { HEARTH_WORKERS: 'inference:cpu' }, queue: {} });
    try {
      // Asked the moment the API answers, as a client does right after /v1/health: no worker has reported yet.
      expect((await fresh.call('GET', '/v1/health')).status).toBe(200);
      expect(fresh.ctx.queue!.liveWorkers('inference')).toEqual([]);
      expect(fresh.ctx.queue!.startingWorkers('inference')).toBe(1);
      const root = new OpenAI({ baseURL: fresh.url, apiKey: fresh.key('carol'), maxRetries: 0 });
      const r = (await root.get('/inference/cpu/v2/hardware', { query: { model: 'tiny-random-llama' } })) as { hardware: { pricing: Record<string, number> }[] };
      expect(r.hardware.length).toBeGreaterThanOrEqual(1);
      expect(r.hardware[0].pricing.cents_per_million_output_tokens).toBeGreaterThan(0);
      expect(fresh.ctx.queue!.startingWorkers('inference')).toBe(0);
    } finally {
      await fresh.close();
    }
  });

  it('hardware options answer 503 with retry-after, not an empty list, while no inference worker has reported or is starting', async () => {
    const home = tempHome();
    await ensureDemoModel(home);
    const idle = await startServer({ home, env: { HEARTH_WORKERS: 'none' }, queue: {} });
    try {
      expect(idle.ctx.queue!.liveWorkers('inference')).toEqual([]);
      const root = new OpenAI({ baseURL: idle.url, apiKey: idle.key('carol'), maxRetries: 0 });
      const err = await failure(() => root.get('/inference/cpu/v2/hardware', { query: { model: 'tiny-random-llama' } }));
      expect(err).toBeInstanceOf(OpenAI.InternalServerError);
      expect(err.status).toBe(503);
      expect(err.message).toMatch(/^503 No inference worker has reported yet/);
      expect(err.headers?.get('retry-after')).toBe('2');
    } finally {
      await idle.close();
    }
  });
});

describe('response shapes the SDK types declare', () => {
  it('chat: logprobs carry refusal null, message has no tool_calls key when no tool was called', async () => {
    const r = (await chat({})) as OpenAI.ChatCompletion;
    const choice = r.choices[0];
    expect(choice.logprobs!.refusal).toBeNull();
    expect('tool_calls' in choice.message).toBe(false);
    const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, temperature: 0, stream: true });
    let withLogprobs = 0;
    for await (const chunk of stream) {
      const lp = chunk.choices[0]?.logprobs;
      if (lp) {
        withLogprobs++;
        expect(lp.refusal).toBeNull();
      }
    }
    expect(withLogprobs).toBeGreaterThan(0);
  });

  it('completions: top_logprobs null unless logprobs: N asks for them', async () => {
    const plain = await client.completions.create({ model: MODEL, prompt: 'Once', max_tokens: 3, temperature: 0 });
    expect(plain.choices[0].logprobs!.top_logprobs).toBeNull();
    expect(plain.choices[0].logprobs!.tokens).toHaveLength(plain.usage!.completion_tokens);
    const asked = await client.completions.create({ model: MODEL, prompt: 'Once', max_tokens: 3, temperature: 0, logprobs: 2 });
    expect(asked.choices[0].logprobs!.top_logprobs).toHaveLength(asked.usage!.completion_tokens);
    for (const top of asked.choices[0].logprobs!.top_logprobs!) expect(Object.keys(top)).toHaveLength(2);
  });
});
