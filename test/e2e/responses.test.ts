// POST /v1/responses (OpenAI's Responses API, stateless) through the unmodified clients that speak it: the
// `openai` SDK (`responses.create`, `responses.stream`) and the AI SDK's default provider `createOpenAI()(model)`
// (generateText, streamText, generateObject, tools), against real worker processes on the demo model
// (random weights: gibberish text, which is fine for shapes; constrained outputs are valid by construction).
// Constrained strings here are enums: free strings under maxLength are issue #42 item 1's subject (UTF-8), not
// this route's, and would make these checks depend on it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';
import { DEMO_MODEL, startDemoServer } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';

const MODEL = DEMO_MODEL;
let s: TestServer;
let key: string;
let client: OpenAI;

beforeAll(async () => {
  // The demo model's tokens are mostly single characters: a forced call takes ~80 of them, and the AI SDK's
  // second step carries the first one's call and result, so the context is the model's own 2048.
  s = await startDemoServer({ maxContext: 2048 });
  key = s.key('alice');
  client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: key, maxRetries: 0 });
}, 120_000);
afterAll(async () => s?.close());

async function failure(call: () => Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await call();
  } catch (err) {
    if (err instanceof OpenAI.APIError) return err;
    throw err;
  }
  throw new Error('the call succeeded');
}

const weather = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome', 'Oslo'] } }, required: ['city'], additionalProperties: false },
  strict: true,
};

describe('openai SDK: responses.create', () => {
  it('answers a string input with one message item, usage, and books the usage', async () => {
    const before = s.store.usage.list('alice').reduce((a, u) => a + u.completionTokens, 0);
    const r = await client.responses.create({ model: MODEL, input: 'Hello there', max_output_tokens: 64, temperature: 0, instructions: 'Be brief.' });
    expect(r).toMatchObject({ object: 'response', model: MODEL, instructions: 'Be brief.', error: null, store: false });
    expect(r.id).toMatch(/^resp_/);
    expect(['completed', 'incomplete']).toContain(r.status);
    expect(r.output).toHaveLength(1);
    const message = r.output[0] as OpenAI.Responses.ResponseOutputMessage;
    expect(message).toMatchObject({ type: 'message', role: 'assistant' });
    expect(message.content[0]).toMatchObject({ type: 'output_text', annotations: [], logprobs: [] });
    expect(r.output_text).toBe((message.content[0] as OpenAI.Responses.ResponseOutputText).text); // the SDK's own helper
    const u = r.usage!;
    expect(u.input_tokens).toBeGreaterThan(0);
    expect(u.output_tokens).toBeGreaterThan(0);
    expect(u.total_tokens).toBe(u.input_tokens + u.output_tokens);
    expect(u.input_tokens_details.cached_tokens).toBe(0);
    const after = s.store.usage.list('alice').reduce((a, x) => a + x.completionTokens, 0);
    expect(after - before).toBe(u.output_tokens);
  });

  it('reports a cut answer as incomplete with reason max_output_tokens', async () => {
    // `seed` is Hearth's extra (not in the SDK's types): at seed 3 the random model does not end within 3 tokens,
    // so the answer is cut (the output count checks that).
    const r = await client.responses.create({ model: MODEL, input: 'Tell me a long story', max_output_tokens: 3, temperature: 1, seed: 3 } as never) as OpenAI.Responses.Response;
    expect(r.usage!.output_tokens).toBe(3);
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(r.output[0].type === 'message' && r.output[0].status).toBe('incomplete');
  });

  it('returns logprobs when include asks for them, with top_logprobs', async () => {
    const r = await client.responses.create({ model: MODEL, input: 'Hi', max_output_tokens: 5, include: ['message.output_text.logprobs'], top_logprobs: 2 });
    const part = (r.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText;
    expect(part.logprobs!.length).toBe(r.usage!.output_tokens);
    for (const lp of part.logprobs!) {
      expect(lp.logprob).toBeLessThanOrEqual(0);
      expect(lp.top_logprobs).toHaveLength(2);
      expect(Array.isArray(lp.bytes)).toBe(true);
    }
  });

  it('does a function_call round trip: a forced call, then its output sent back as items', async () => {
    const first = await client.responses.create({ model: MODEL, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] }], tools: [weather], tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 250 });
    const call = first.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call, JSON.stringify(first.output)).toMatchObject({ type: 'function_call', name: 'get_weather', status: 'completed' });
    expect(call.call_id).toBeTruthy();
    const args = JSON.parse(call.arguments);
    expect(typeof args.city).toBe('string');
    const second = await client.responses.create({
      model: MODEL,
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        ...(first.output as OpenAI.Responses.ResponseInputItem[]),
        { type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ temperature_c: 21 }) },
      ],
      tools: [weather],
      tool_choice: 'none',
      max_output_tokens: 8,
    });
    expect(second.output[0].type).toBe('message');
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens); // the call and its output reached the prompt
  });

  it('constrains the text to a json_schema (text.format)', async () => {
    const r = await client.responses.create({
      model: MODEL, input: 'A pet as JSON', max_output_tokens: 100, temperature: 1,
      text: { format: { type: 'json_schema', name: 'pet', strict: true, schema: { type: 'object', properties: { name: { type: 'string', enum: ['Rex', 'Tom'] }, age: { type: 'integer' } }, required: ['name', 'age'], additionalProperties: false } } },
    });
    expect(r.status).toBe('completed');
    const pet = JSON.parse(r.output_text);
    expect(Object.keys(pet)).toEqual(['name', 'age']);
    expect(Number.isInteger(pet.age)).toBe(true);
    expect(r.text!.format).toMatchObject({ type: 'json_schema', name: 'pet' });
  });

  it('parses a zod text format (responses.parse with zodTextFormat)', async () => {
    const Pet = z.object({ vaccinated: z.boolean(), kind: z.enum(['cat', 'dog']), age: z.number().int() });
    const r = await client.responses.parse({ model: MODEL, input: 'A pet', text: { format: zodTextFormat(Pet, 'pet') }, max_output_tokens: 100, temperature: 1 });
    expect(r.output_parsed).not.toBeNull();
    expect(Pet.parse(r.output_parsed)).toEqual(r.output_parsed);
  });

  it('serves a trained model name (no checkpoint yet: its base weights), as chat completions do', async () => {
    const m = await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'resp-model', base_model: MODEL } });
    expect(m.status).toBe(200);
    const r = await client.responses.create({ model: 'wandb-artifact:///alice/p/resp-model', input: 'Hi', max_output_tokens: 3 });
    expect(r.model).toBe('wandb-artifact:///alice/p/resp-model');
    expect((await client.responses.create({ model: 'wandb-artifact:///alice/p/resp-model:latest', input: 'Hi', max_output_tokens: 3 })).status).not.toBe('failed');
    for (const name of ['wandb-artifact:///alice/p/nope', 'wandb-artifact:///alice/p/resp-model:step5', 'nobody/none']) {
      const missing = await failure(() => client.responses.create({ model: name, input: 'Hi' }));
      expect(missing.status, name).toBe(404);
      expect(missing.code).toBe('model_not_found');
      expect((missing.error as { param?: string }).param).toBe('model');
    }
    // Another entity's model is not found either.
    const bob = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: s.key('bob'), maxRetries: 0 });
    expect((await failure(() => bob.responses.create({ model: 'wandb-artifact:///alice/p/resp-model', input: 'Hi' }))).status).toBe(404);
  });
});

describe('openai SDK: responses.stream', () => {
  it('sends the documented events in order, with increasing sequence numbers, ending in the final response', async () => {
    // Greedy, so the same tokens every run: sampled, the first token was now and then the end of sequence (no delta).
    const stream = client.responses.stream({ model: MODEL, input: 'Stream please', max_output_tokens: 12, temperature: 0, include: ['message.output_text.logprobs'] });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    const final = await stream.finalResponse();
    const types = events.map((e) => e.type);
    expect(types.slice(0, 5)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added', 'response.output_text.delta']);
    expect(types.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', final.status === 'incomplete' ? 'response.incomplete' : 'response.completed']);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = events.filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === 'response.output_text.delta');
    const text = deltas.map((d) => d.delta).join('');
    expect(final.output_text).toBe(text);
    const done = events.find((e) => e.type === 'response.output_text.done') as OpenAI.Responses.ResponseTextDoneEvent;
    expect(done.text).toBe(text);
    // Every token's logprob: the deltas carry those of tokens whose text was sent, the done event all (an
    // end-of-sequence token, or bytes that never complete a character, send no text), as does the final part.
    const deltaLogprobs = deltas.flatMap((d) => d.logprobs);
    expect(done.logprobs).toHaveLength(final.usage!.output_tokens);
    expect(done.logprobs.slice(0, deltaLogprobs.length)).toEqual(deltaLogprobs);
    expect(deltaLogprobs.length).toBeGreaterThan(0);
    expect(((final.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText).logprobs).toHaveLength(final.usage!.output_tokens);
    expect(final.usage!.total_tokens).toBe(final.usage!.input_tokens + final.usage!.output_tokens);
  });

  it('streams a function call as output_item.added, arguments deltas and done', async () => {
    const stream = client.responses.stream({ model: MODEL, input: 'Weather?', tools: [weather], tool_choice: 'required', max_output_tokens: 250 });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    const final = await stream.finalResponse();
    const added = events.find((e) => e.type === 'response.output_item.added') as OpenAI.Responses.ResponseOutputItemAddedEvent;
    expect(added.item).toMatchObject({ type: 'function_call', name: 'get_weather', arguments: '' });
    const argDeltas = events.filter((e) => e.type === 'response.function_call_arguments.delta') as OpenAI.Responses.ResponseFunctionCallArgumentsDeltaEvent[];
    const argsDone = events.find((e) => e.type === 'response.function_call_arguments.done') as OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent;
    expect(argDeltas.map((d) => d.delta).join('')).toBe(argsDone.arguments);
    expect(typeof JSON.parse(argsDone.arguments).city).toBe('string');
    const call = final.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call.arguments).toBe(argsDone.arguments);
  });
});

describe('on the wire', () => {
  it('names each SSE event, sends no [DONE], and carries Server-Timing like the chat route', async () => {
    const res = await fetch(`${s.url}/v1/responses`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, input: 'Hi', max_output_tokens: 4, stream: true }),
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('server-timing')).toMatch(/^worker;dur=[\d.]+, total;dur=[\d.]+$/);
    const blocks = (await res.text()).split('\n\n').filter(Boolean);
    for (const block of blocks) {
      const [eventLine, dataLine] = block.split('\n');
      expect(eventLine).toMatch(/^event: /);
      expect(JSON.parse(dataLine.slice('data: '.length)).type).toBe(eventLine.slice('event: '.length));
    }
    expect(blocks.some((b) => b.includes('[DONE]'))).toBe(false);
    const whole = await s.call('POST', '/v1/responses', { key, body: { model: MODEL, input: 'Hi', max_output_tokens: 4 } });
    expect(whole.headers.get('server-timing')).toMatch(/^worker;dur=/);
  });
});

describe('refusals (400, OpenAI error shape)', () => {
  it('answers validation errors and unsupported parameters with 400 naming the field', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ model: MODEL, input: 'x', temperature: 9 }, 'temperature'],
      [{ model: MODEL, input: 'x', frobnicate: 1 }, 'frobnicate'],
      [{ model: MODEL, input: 'x', previous_response_id: 'resp_1' }, 'previous_response_id'],
      [{ model: MODEL, input: 'x', background: true }, 'background'],
      [{ model: MODEL, input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ model: MODEL, input: [{ type: 'item_reference', id: 'msg_1' }] }, 'input[0].type'],
      [{ model: MODEL, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x' }] }] }, 'input[0].content[0].type'],
      [{ model: MODEL, input: 'x', reasoning: { summary: 'auto' } }, 'reasoning.summary'],
      [{ model: MODEL, input: 'x', include: ['reasoning.encrypted_content'] }, 'include[0]'],
      [{ model: MODEL, input: 'x', tool_choice: { type: 'function', name: 'nope' }, tools: [weather] }, 'tool_choice.name'],
      // The worker's own checks (beyond the context), named as the Responses request calls the field, streamed or not.
      [{ model: MODEL, input: 'x', max_output_tokens: 5000 }, 'max_output_tokens'],
      [{ model: MODEL, input: 'x', max_output_tokens: 5000, stream: true }, 'max_output_tokens'],
    ];
    for (const [body, param] of cases) {
      const r = await s.call('POST', '/v1/responses', { key, body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(Object.keys(r.body)).toEqual(['error']);
      expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param });
      expect(r.body.error.message.length).toBeGreaterThan(10);
    }
  });

  it('answers stored retrieval with 400 saying responses are not stored', async () => {
    const err = await failure(() => client.responses.retrieve('resp_123'));
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/does not store responses/);
  });
});

describe('AI SDK: createOpenAI()(model) (the Responses API)', () => {
  const provider = () => createOpenAI({ baseURL: `${s.url}/v1`, apiKey: key });

  it('generateText', async () => {
    const r = await generateText({ model: provider()(MODEL), prompt: 'Hello', maxOutputTokens: 8, maxRetries: 0 });
    expect(typeof r.text).toBe('string');
    expect(r.usage.outputTokens).toBeGreaterThan(0);
    expect(['stop', 'length']).toContain(r.finishReason);
    expect(r.response.id).toMatch(/^resp_/);
  });

  it('streamText', async () => {
    const r = streamText({ model: provider()(MODEL), prompt: 'Hello', maxOutputTokens: 8, maxRetries: 0 });
    let streamed = '';
    for await (const part of r.textStream) streamed += part;
    expect(streamed).toBe(await r.text);
    expect((await r.usage).outputTokens).toBeGreaterThan(0);
    expect(['stop', 'length']).toContain(await r.finishReason);
  });

  it('generateObject with a zod schema', async () => {
    const schema = z.object({ kind: z.enum(['ant', 'cat']), legs: z.number().int() });
    const r = await generateObject({ model: provider()(MODEL), schema, prompt: 'An animal', maxOutputTokens: 80, maxRetries: 0 });
    expect(schema.parse(r.object)).toEqual(r.object);
  });

  it('calls a tool and runs it (generateText with a forced tool choice), then answers with its result', async () => {
    let ran = 0;
    const r = await generateText({
      model: provider()(MODEL),
      prompt: 'Weather in Paris?',
      tools: {
        get_weather: tool({
          description: 'The weather in a city',
          inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome', 'Oslo'] } }, required: ['city'], additionalProperties: false }),
          execute: async ({ city }) => {
            ran++;
            return { city, temperature_c: 21 };
          },
        }),
      },
      toolChoice: { type: 'tool', toolName: 'get_weather' },
      prepareStep: ({ stepNumber }) => (stepNumber > 0 ? { toolChoice: 'none' } : {}),
      stopWhen: stepCountIs(2),
      maxOutputTokens: 250,
      // The client's default store: true; function calls go back whole (only assistant text becomes item_reference).
      maxRetries: 0,
    });
    expect(ran).toBe(1);
    expect(r.steps[0].toolCalls[0]).toMatchObject({ toolName: 'get_weather' });
    expect(r.steps).toHaveLength(2);
  });

  it('streams a tool call (streamText): the input streams in pieces and the call arrives parsed', async () => {
    const r = streamText({
      model: provider()(MODEL),
      prompt: 'Weather in Paris?',
      tools: { get_weather: tool({ description: 'The weather in a city', inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome', 'Oslo'] } }, required: ['city'], additionalProperties: false }) }) },
      toolChoice: 'required',
      maxOutputTokens: 250,
      maxRetries: 0,
    });
    let streamedInput = '';
    for await (const part of r.fullStream) if (part.type === 'tool-input-delta') streamedInput += part.delta;
    const calls = await r.toolCalls;
    expect(calls).toHaveLength(1);
    expect(calls[0].toolName).toBe('get_weather');
    expect(typeof (calls[0].input as { city: string }).city).toBe('string');
    expect(JSON.parse(streamedInput)).toEqual(calls[0].input);
    expect(await r.finishReason).toBe('tool-calls');
  });
});
