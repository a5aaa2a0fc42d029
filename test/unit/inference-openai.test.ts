import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import {
  ChatCompletionChunk,
  ChatCompletionRequest,
  ChatCompletionResponse,
  CompletionResponse,
  unsupportedParams,
} from '../../src/protocol/openai.js';
import type { ChatTemplatePort, ServableModel } from '../../worker/inference/model-port.js';
import { SSE_DONE, sseData } from '../../worker/inference/openai-format.js';
import { createEngine, type InferenceEvent, type InferenceRequest } from '../../worker/inference/openai-adapter.js';
import { ToyModel, ToyTokenizer } from './inference-toy-model.js';

const tok = new ToyTokenizer();
const template: ChatTemplatePort = {
  render: (messages, opts) =>
    messages.map((m) => `${m.role}: ${m.content ?? ''}\n`).join('') + (opts.tools ? `tools: ${opts.tools.map((t) => t.function.name).join(',')}\n` : '') + (opts.addGenerationPrompt ? 'assistant: ' : ''),
};

function servable(boost?: Map<number, number>): ServableModel {
  return { model: new ToyModel({ maxContext: 512, boost }), tokenizer: tok, chatTemplate: template };
}

/** An in-process fetch that speaks HTTP+SSE the way the lead's route will. */
function fakeFetch(hearth: ReturnType<typeof createEngine>): typeof fetch {
  return (async (url: string | URL | Request, init?: RequestInit) => {
    const body = JSON.parse(String(init?.body));
    const kind: InferenceRequest['kind'] = String(url).endsWith('/chat/completions') ? 'chat' : 'completion';
    const enc = new TextEncoder();
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    const stream = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) });
    const first = await new Promise<InferenceEvent>((resolve) => {
      let started = false;
      void hearth.submit({ kind, body, model: body.model }, (e) => {
        if (!started) {
          started = true;
          resolve(e);
        }
        if (e.type === 'chunk') controller.enqueue(enc.encode(sseData(e.data)));
        if (e.type === 'result' && body.stream) {
          controller.enqueue(enc.encode(SSE_DONE));
          controller.close();
        }
      });
    });
    if (first.type === 'error') return new Response(JSON.stringify({ error: { message: first.message } }), { status: first.status, headers: { 'content-type': 'application/json' } });
    if (first.type === 'result') return new Response(JSON.stringify(first.data), { headers: { 'content-type': 'application/json' } });
    return new Response(stream, { headers: { 'content-type': 'text/event-stream' } });
  }) as typeof fetch;
}

function client(boost?: Map<number, number>) {
  const hearth = createEngine(servable(boost), { kvCacheTokens: 4096, blockSize: 16 });
  return new OpenAI({ apiKey: 'k', baseURL: 'http://hearth.test/v1', fetch: fakeFetch(hearth), maxRetries: 0 });
}

const messages = [
  { role: 'system' as const, content: 'you help' },
  { role: 'user' as const, content: [{ type: 'text' as const, text: 'hello there' }] },
];

describe('OpenAI chat completions (through the openai SDK)', () => {
  it('token ids only with return_token_ids (vLLM): absent by default, so ART does not send them back', async () => {
    const plain = await client().chat.completions.create({ model: 'toy', messages, max_completion_tokens: 4, temperature: 0 });
    expect(plain.choices[0]).not.toHaveProperty('token_ids');
    expect(plain).not.toHaveProperty('prompt_token_ids');
    expect(plain.choices[0].logprobs!.content!.length).toBeGreaterThan(0);
    const asked = await client().chat.completions.create({ model: 'toy', messages, max_completion_tokens: 4, temperature: 0, return_token_ids: true } as never);
    expect((asked as unknown as { prompt_token_ids: number[] }).prompt_token_ids.length).toBeGreaterThan(0);
    const chunks = await client().chat.completions.create({ model: 'toy', messages, max_completion_tokens: 4, temperature: 0, stream: true });
    for await (const chunk of chunks) {
      expect(chunk).not.toHaveProperty('prompt_token_ids');
      for (const choice of chunk.choices) expect(choice).not.toHaveProperty('token_ids');
    }
    const completion = await client().completions.create({ model: 'toy', prompt: 'hello', max_tokens: 4, temperature: 0 });
    expect(completion.choices[0]).not.toHaveProperty('token_ids');
    expect(completion.choices[0]).not.toHaveProperty('prompt_token_ids');
  });

  it('non-streaming: shape, logprobs by default as token_id:<id> with bytes, token ids (asked), usage', async () => {
    const r = await client().chat.completions.create({ model: 'toy', messages, max_completion_tokens: 8, temperature: 0, return_token_ids: true } as never);
    ChatCompletionResponse.parse(r);
    const c = r.choices[0] as (typeof r.choices)[0] & { token_ids: number[] };
    expect(r.object).toBe('chat.completion');
    expect(r.model).toBe('toy');
    expect(c.logprobs!.content!.length).toBe(c.token_ids.length);
    c.logprobs!.content!.forEach((e, i) => {
      expect(e.token).toBe(`token_id:${c.token_ids[i]}`);
      expect(e.bytes).toEqual(tok.isSpecial(c.token_ids[i]) ? [] : [...tok.tokenBytes(c.token_ids[i])]);
      expect(e.logprob).toBeLessThanOrEqual(0);
      expect(e.top_logprobs).toEqual([]);
    });
    expect(r.usage).toEqual({ prompt_tokens: (r as unknown as { prompt_token_ids: number[] }).prompt_token_ids.length, completion_tokens: c.token_ids.length, total_tokens: expect.any(Number) });
    // At most 8 tokens; 'length' exactly when the 8th token is not EOS, 'stop' when the answer ended with EOS.
    expect(c.token_ids.length).toBeLessThanOrEqual(8);
    expect(c.finish_reason).toBe(c.token_ids.length === 8 && !tok.eosTokenIds.includes(c.token_ids[7]) ? 'length' : 'stop');
    expect(c.message.content).toBe(tok.decode(c.token_ids));
  });

  it('the EOS token is the last logprob entry, with empty bytes', async () => {
    const api = new OpenAI({ apiKey: 'k', baseURL: 'http://hearth.test/v1', fetch: fakeFetch(createEngine(servable(new Map([[0, 50]])), { kvCacheTokens: 4096 })), maxRetries: 0 });
    const r = await api.chat.completions.create({ model: 'toy', messages, max_tokens: 5, temperature: 1, seed: 1 });
    expect(r.choices[0].finish_reason).toBe('stop');
    expect(r.choices[0].logprobs!.content!.at(-1)).toMatchObject({ token: 'token_id:0', bytes: [] });
    expect(r.choices[0].message.content).toBe('');
  });

  it('streaming equals non-streaming: role chunk, content deltas with logprobs, finish, usage, [DONE]', async () => {
    const api = client();
    const req = { model: 'toy', messages, max_tokens: 10, temperature: 0.8, seed: 3, top_logprobs: 2, logprobs: true };
    const full = await api.chat.completions.create(req);
    const stream = await api.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const ch of stream) chunks.push(ch);
    chunks.forEach((ch) => ChatCompletionChunk.parse(ch));
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const text = chunks.map((ch) => ch.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe(full.choices[0].message.content);
    const lps = chunks.flatMap((ch) => ch.choices[0]?.logprobs?.content ?? []);
    expect(lps).toEqual(full.choices[0].logprobs!.content);
    expect(lps[0].top_logprobs).toHaveLength(2);
    const finishes = chunks.map((ch) => ch.choices[0]?.finish_reason).filter(Boolean);
    expect(finishes).toEqual([full.choices[0].finish_reason]);
    expect(chunks.at(-1)!.choices).toEqual([]);
    expect(chunks.at(-1)!.usage).toEqual(full.usage);
  });

  it('n choices, stop strings and finish reasons', async () => {
    const req = { model: 'toy', messages, n: 3, max_tokens: 6, temperature: 1, seed: 9 };
    const free = await client().chat.completions.create(req);
    // A stop string taken from the middle of the first choice's free answer: with it, that choice ends
    // right before it with finish_reason 'stop'; choices that never wrote it are unchanged.
    const text0 = free.choices[0].message.content!;
    const stop = text0.slice(2, 4);
    expect(stop).toHaveLength(2);
    const r = await client().chat.completions.create({ ...req, stop: [stop] });
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(r.usage!.completion_tokens).toBe(r.choices.reduce((a, c) => a + c.logprobs!.content!.length, 0));
    expect(r.choices[0].message.content).toBe(text0.slice(0, text0.indexOf(stop)));
    expect(r.choices[0].finish_reason).toBe('stop');
    for (const [i, c] of free.choices.entries()) {
      expect(c.finish_reason).toBe(c.logprobs!.content!.length === 6 && c.logprobs!.content![5].token !== 'token_id:0' ? 'length' : 'stop');
      if (i > 0 && !c.message.content!.includes(stop)) expect(r.choices[i]).toMatchObject({ finish_reason: c.finish_reason, message: { content: c.message.content } });
    }
  });

  it('tools: a Hermes <tool_call> becomes tool_calls with finish_reason tool_calls (forced via tool_choice)', async () => {
    const api = client();
    const tools = [{ type: 'function' as const, function: { name: 'name', parameters: { type: 'object', properties: { age: { type: 'integer' } }, required: ['age'] } } }];
    const r = await api.chat.completions.create({ model: 'toy', messages, tools, tool_choice: 'required', max_tokens: 200, temperature: 0.7, seed: 1 });
    const c = r.choices[0];
    expect(c.finish_reason).toBe('tool_calls');
    const call = c.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe('name');
    expect(Number.isInteger(JSON.parse(call.function.arguments).age)).toBe(true);
    expect(c.message.content).toBeNull();
    const s = await api.chat.completions.create({ model: 'toy', messages, tools, tool_choice: 'required', max_tokens: 200, temperature: 0.7, seed: 1, stream: true });
    const deltas: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    let finish: string | null = null;
    for await (const ch of s) {
      deltas.push(...(ch.choices[0]?.delta.tool_calls ?? []));
      finish = ch.choices[0]?.finish_reason ?? finish;
      expect(ch.choices[0]?.delta.content ?? '').not.toContain('<tool_call>');
      if (ch.choices[0]?.delta.tool_calls) expect(ch.choices[0].delta).not.toHaveProperty('content'); // no empty content beside a call
    }
    expect(finish).toBe(c.finish_reason);
    expect(deltas[0]).toMatchObject({ index: 0, id: expect.stringMatching(/^call_/), function: { name: 'name' } });
    // The arguments stream in several deltas as they are decoded; together they are the whole answer's.
    expect(deltas.length).toBeGreaterThan(2);
    const streamed = deltas.map((d) => d.function?.arguments ?? '').join('');
    expect(JSON.parse(streamed)).toEqual(JSON.parse(call.function.arguments));
  });

  it('a forced tool call cut by max_tokens comes back in tool_calls as generated, finish_reason length, no markup in content', async () => {
    const api = client();
    const tools = [{ type: 'function' as const, function: { name: 'name', parameters: { type: 'object', properties: { age: { type: 'integer' } }, required: ['age'] } } }];
    // The toy tokenizer spends a few tokens on `<tool_call>\n{"name": "name", "arguments": `, (24 here), so 28 tokens end inside the arguments.
    const r = await api.chat.completions.create({ model: 'toy', messages, tools, tool_choice: 'required', max_tokens: 28, temperature: 0.7, seed: 1 });
    const c = r.choices[0];
    expect(c.finish_reason).toBe('length');
    expect(c.message.content).toBeNull();
    const call = c.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe('name');
    expect(call.function.arguments.startsWith("{"), JSON.stringify(r.choices[0])).toBe(true);
    expect(() => JSON.parse(call.function.arguments)).toThrow(); // cut: the arguments as far as they went
    const s = await api.chat.completions.create({ model: 'toy', messages, tools, tool_choice: 'required', max_tokens: 28, temperature: 0.7, seed: 1, stream: true });
    let args = '';
    let finish: string | null = null;
    for await (const ch of s) {
      for (const d of ch.choices[0]?.delta.tool_calls ?? []) args += d.function?.arguments ?? '';
      expect(ch.choices[0]?.delta.content ?? '').toBe('');
      finish = ch.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('length');
    expect(args).toBe(call.function.arguments); // same seed, same tokens
  });

  it('json_schema response_format output parses and matches', async () => {
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
    const r = await client().chat.completions.create({
      model: 'toy', messages, max_tokens: 100, temperature: 0.5, seed: 2,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema, strict: true } },
    });
    expect(r.choices[0].finish_reason).toBe('stop');
    expect(typeof JSON.parse(r.choices[0].message.content!).ok).toBe('boolean');
  });

  it('answers 400 for bad and unsupported parameters', async () => {
    const api = client();
    await expect(api.chat.completions.create({ model: 'toy', messages, temperature: 3 })).rejects.toMatchObject({ status: 400 });
    await expect(api.chat.completions.create({ model: 'toy', messages, prompt_logprobs: 1 } as never)).rejects.toThrow(/prompt_logprobs/);
    await expect(
      api.chat.completions.create({ model: 'toy', messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: 'a' } } } }),
    ).rejects.toThrow(/pattern/);
    await expect(api.chat.completions.create({ model: 'toy', messages, max_tokens: 100000 })).rejects.toThrow(/maximum context length/);
  });
});

describe('OpenAI completions', () => {
  it('text_completion with legacy logprobs, several prompts, and streaming', async () => {
    const api = client();
    const r = await api.completions.create({ model: 'toy', prompt: ['hello', 'abc'], max_tokens: 5, temperature: 0, logprobs: 2 });
    CompletionResponse.parse(r);
    expect(r.object).toBe('text_completion');
    expect(r.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(r.usage!.prompt_tokens).toBe(tok.encode('hello').length + tok.encode('abc').length);
    for (const c of r.choices) {
      expect(c.logprobs!.tokens!.length).toBe(c.logprobs!.token_logprobs!.length);
      expect(Object.keys(c.logprobs!.top_logprobs![0])).toHaveLength(2);
    }
    const s = await api.completions.create({ model: 'toy', prompt: 'hello', max_tokens: 5, temperature: 0, stream: true });
    let text = '';
    for await (const ch of s) text += ch.choices[0]?.text ?? '';
    expect(text).toBe(r.choices[0].text);
  });
});

describe('request schema', () => {
  it('accepts unknown extras and the vLLM extras, applies OpenAI ranges', () => {
    const ok = ChatCompletionRequest.parse({ model: 'm', messages: [{ role: 'developer', content: 'x' }, { role: 'tool', content: 'r', tool_call_id: 'c' }], top_k: 5, whatever: 1, chat_template_kwargs: { enable_thinking: false } });
    expect(unsupportedParams(ok)).toEqual([]);
    expect(ChatCompletionRequest.safeParse({ model: 'm', messages: [], n: 1 }).success).toBe(false);
    expect(ChatCompletionRequest.safeParse({ model: 'm', messages: [{ role: 'user', content: 'x' }], top_logprobs: 21 }).success).toBe(false);
    expect(ChatCompletionRequest.safeParse({ model: 'm', messages: [{ role: 'user', content: 'x' }], logit_bias: { abc: 1 } }).success).toBe(false);
    const img = ChatCompletionRequest.parse({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] });
    expect(unsupportedParams(img)).toEqual(['messages[0].content[0].type=image_url']);
  });
});

describe('validated bodies', () => {
  const run = (req: InferenceRequest) =>
    new Promise<InferenceEvent>((resolve) => {
      const hearth = createEngine(servable(), { kvCacheTokens: 4096 });
      void hearth.submit(req, (e) => (e.type === 'error' || e.type === 'result' ? resolve(e) : undefined));
    });

  it('parses a body once: not again when the API already did (validated), while the checks beyond the schema still run', async () => {
    // temperature 3 is outside the schema's range: the engine's own parse refuses it, a validated body is taken as given.
    const body = { model: 'toy', prompt: 'hello', max_tokens: 2, temperature: 3, seed: 1 };
    expect(await run({ kind: 'completion', body, model: 'toy' })).toMatchObject({ type: 'error', status: 400, message: expect.stringContaining('temperature') });
    expect(await run({ kind: 'completion', body, model: 'toy', validated: true })).toMatchObject({ type: 'result' });
    expect(await run({ kind: 'completion', body: { ...body, temperature: 0, suffix: 'x' }, model: 'toy', validated: true })).toMatchObject({ type: 'error', status: 400, message: expect.stringContaining('unsupported parameters: suffix') });
  });
});
