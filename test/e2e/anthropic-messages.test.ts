// Anthropic's Messages API through the unmodified @anthropic-ai/sdk against a server with a real inference worker
// (the demo model: random weights, so texts are gibberish; shapes, events, stop reasons, tool round trips, token
// counts and errors are what is checked). Greedy answers are compared with the OpenAI chat route's for the same
// conversation: the translation must give the model exactly the prompt the chat route gives it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { startDemoServer, DEMO_MODEL } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';

const MODEL = DEMO_MODEL;
let s: TestServer;
let key: string;
let client: Anthropic;
let openai: OpenAI;

beforeAll(async () => {
  s = await startDemoServer();
  key = s.key('claude-user');
  client = new Anthropic({ baseURL: s.url, apiKey: key, maxRetries: 0 });
  openai = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: key, maxRetries: 0 });
}, 120_000);
afterAll(async () => s?.close());

async function failure(call: () => Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  try {
    await call();
  } catch (err) {
    if (err instanceof Anthropic.APIError) return err;
    throw err;
  }
  throw new Error('the call succeeded');
}

const textOf = (m: Anthropic.Message) => m.content.filter((b): b is Anthropic.TextBlock => b.type === 'text').map((b) => b.text).join('');
/** Sampling fields Anthropic's API takes that this SDK version's types leave out. */
const greedy = { temperature: 0 } as Record<string, unknown>;

const weatherTool = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'] },
};

describe('messages.create', () => {
  it('answers a Message: text block, stop reason, usage; greedy text equals the chat route for the same conversation', async () => {
    const m = await client.messages.create({ model: MODEL, max_tokens: 12, system: 'You are terse.', messages: [{ role: 'user', content: 'Say hello' }], ...greedy });
    expect(m).toMatchObject({ type: 'message', role: 'assistant', model: MODEL, stop_sequence: null });
    expect(m.id).toMatch(/^msg_/);
    expect(m.content.every((b) => b.type === 'text')).toBe(true);
    expect(m.usage.input_tokens).toBeGreaterThan(3);
    expect(m.usage.output_tokens).toBeGreaterThan(0);
    expect(m.usage.output_tokens).toBeLessThanOrEqual(12);
    expect(m.stop_reason).toBe(m.usage.output_tokens === 12 ? 'max_tokens' : 'end_turn');
    const chat = await openai.chat.completions.create({ model: MODEL, max_tokens: 12, temperature: 0, messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hello' }] });
    expect(textOf(m)).toBe(chat.choices[0].message.content);
    expect(m.usage.input_tokens).toBe(chat.usage!.prompt_tokens);
    // System as text blocks, user content as blocks: the same prompt.
    const blocks = await client.messages.create({
      model: MODEL, max_tokens: 12, system: [{ type: 'text', text: 'You are terse.' }], messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello' }] }], ...greedy,
    });
    expect(textOf(blocks)).toBe(textOf(m));
  });

  it('stops at a stop sequence and names it', async () => {
    const long = await client.messages.create({ model: MODEL, max_tokens: 40, messages: [{ role: 'user', content: 'Tell me a story' }], ...greedy });
    const text = textOf(long);
    expect(text.length).toBeGreaterThan(12);
    const stop = text.slice(6, 9);
    const m = await client.messages.create({ model: MODEL, max_tokens: 40, stop_sequences: [stop], messages: [{ role: 'user', content: 'Tell me a story' }], ...greedy });
    expect(m.stop_reason).toBe('stop_sequence');
    expect(m.stop_sequence).toBe(stop);
    expect(textOf(m)).toBe(text.slice(0, text.indexOf(stop)));
  });

  it('takes top_p and top_k', async () => {
    const m = await client.messages.create({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'Hi' }], ...({ temperature: 1, top_p: 0.9, top_k: 5 } as Record<string, unknown>) });
    expect(m.usage.output_tokens).toBeGreaterThan(0);
  });

  it('calls a forced tool (tool_choice tool), then takes the tool_result back; both match the chat route', async () => {
    const ask = { role: 'user' as const, content: 'What is the weather in Paris?' };
    const m = await client.messages.create({ model: MODEL, max_tokens: 150, tools: [weatherTool], tool_choice: { type: 'tool', name: 'get_weather' }, messages: [ask], ...greedy });
    expect(m.stop_reason).toBe('tool_use');
    const use = m.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather' });
    expect(typeof (use.input as { city: unknown }).city).toBe('string');
    expect(use.id.length).toBeGreaterThan(0);

    const followUp = await client.messages.create({
      model: MODEL, max_tokens: 10, tools: [weatherTool], ...greedy,
      messages: [ask, { role: 'assistant', content: m.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '15 degrees and sunny' }] }],
    });
    expect(['end_turn', 'max_tokens', 'tool_use']).toContain(followUp.stop_reason);
    const tools = [{ type: 'function' as const, function: { name: weatherTool.name, description: weatherTool.description, parameters: weatherTool.input_schema } }];
    const chat = await openai.chat.completions.create({
      model: MODEL, max_tokens: 10, temperature: 0, tools,
      messages: [
        ask,
        { role: 'assistant', content: null, tool_calls: [{ id: use.id, type: 'function', function: { name: 'get_weather', arguments: JSON.stringify(use.input) } }] },
        { role: 'tool', tool_call_id: use.id, content: '15 degrees and sunny' },
      ],
    });
    expect(followUp.usage.input_tokens).toBe(chat.usage!.prompt_tokens);
    expect(textOf(followUp)).toBe(chat.choices[0].message.content ?? '');
    expect(followUp.usage.output_tokens).toBe(chat.usage!.completion_tokens);
  });

  it('any: some tool is called; none: no tool is called', async () => {
    const any = await client.messages.create({ model: MODEL, max_tokens: 150, tools: [weatherTool], tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'weather?' }], ...greedy });
    expect(any.stop_reason).toBe('tool_use');
    expect(any.content.some((b) => b.type === 'tool_use')).toBe(true);
    const none = await client.messages.create({ model: MODEL, max_tokens: 8, tools: [weatherTool], tool_choice: { type: 'none' }, messages: [{ role: 'user', content: 'weather?' }], ...greedy });
    expect(none.content.every((b) => b.type === 'text')).toBe(true);
    expect(none.stop_reason).not.toBe('tool_use');
  });
});

describe('messages.stream', () => {
  it('sends the documented events, and the final message equals the whole answer', async () => {
    const params = { model: MODEL, max_tokens: 16, messages: [{ role: 'user' as const, content: 'Stream something' }], ...greedy } as Anthropic.MessageCreateParamsNonStreaming;
    const whole = await client.messages.create(params);
    const stream = client.messages.stream(params);
    const types: string[] = [];
    let text = '';
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
    }
    const final = await stream.finalMessage();
    expect(types[0]).toBe('message_start');
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
    if (textOf(whole)) expect(types.slice(1, 3)).toEqual(['content_block_start', 'content_block_delta']);
    expect(text).toBe(textOf(whole));
    expect(final.content).toEqual(whole.content);
    expect(final.stop_reason).toBe(whole.stop_reason);
    expect(final.usage.input_tokens).toBe(whole.usage.input_tokens);
    expect(final.usage.output_tokens).toBe(whole.usage.output_tokens);
  });

  it('streams a tool call as input_json_delta; the SDK rebuilds its input', async () => {
    const stream = client.messages.stream({ model: MODEL, max_tokens: 150, tools: [weatherTool], tool_choice: { type: 'tool', name: 'get_weather' }, messages: [{ role: 'user', content: 'Weather in Rome?' }], ...greedy } as Anthropic.MessageCreateParamsNonStreaming);
    const deltas: string[] = [];
    let start: unknown = null;
    for await (const ev of stream) {
      if (ev.type === 'content_block_start' && ev.content_block.type === 'tool_use') start = ev.content_block;
      if (ev.type === 'content_block_delta' && ev.delta.type === 'input_json_delta') deltas.push(ev.delta.partial_json);
    }
    const final = await stream.finalMessage();
    expect(start).toMatchObject({ type: 'tool_use', name: 'get_weather', input: {} });
    expect(final.stop_reason).toBe('tool_use');
    const use = final.content.find((b) => b.type === 'tool_use') as Anthropic.ToolUseBlock;
    expect(use.input).toEqual(JSON.parse(deltas.join('')));
    expect(typeof (use.input as { city: unknown }).city).toBe('string');
  });

  it('on the wire: event lines, a ping after message_start, blocks opened and closed by index', async () => {
    const res = await fetch(`${s.url}/v1/messages`, {
      method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: MODEL, max_tokens: 6, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = (await res.text()).trim().split('\n\n').map((e) => {
      const [event, data] = e.split('\n');
      return { event: event.replace(/^event: /, ''), data: JSON.parse(data.replace(/^data: /, '')) };
    });
    expect(events.every((e) => e.event === e.data.type)).toBe(true);
    expect(events.slice(0, 2).map((e) => e.event)).toEqual(['message_start', 'ping']);
    const starts = events.filter((e) => e.event === 'content_block_start').map((e) => e.data.index);
    const stops = events.filter((e) => e.event === 'content_block_stop').map((e) => e.data.index);
    expect(stops).toEqual(starts);
    expect(events.at(-1)!.event).toBe('message_stop');
  });
});

describe('count_tokens, auth and errors', () => {
  it('count_tokens equals the input_tokens a create reports for the same conversation, tools included', async () => {
    const messages = [{ role: 'user' as const, content: 'How many tokens is this?' }];
    const counted = await client.messages.countTokens({ model: MODEL, system: 'Be brief.', tools: [weatherTool], messages });
    const created = await client.messages.create({ model: MODEL, max_tokens: 1, system: 'Be brief.', tools: [weatherTool], messages });
    expect(counted.input_tokens).toBe(created.usage.input_tokens);
    const withoutTools = await client.messages.countTokens({ model: MODEL, system: 'Be brief.', messages });
    expect(withoutTools.input_tokens).toBeLessThan(counted.input_tokens);
  });

  it('takes the key as x-api-key (apiKey) or bearer (authToken); a bad key is an authentication_error', async () => {
    const bearer = new Anthropic({ baseURL: s.url, authToken: key, apiKey: null, maxRetries: 0 });
    expect((await bearer.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: 'x' }] })).input_tokens).toBeGreaterThan(0);
    const bad = new Anthropic({ baseURL: s.url, apiKey: 'hearth_not_a_key', maxRetries: 0 });
    const err = await failure(() => bad.messages.create({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }));
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(err.status).toBe(401);
    expect(err.error).toEqual({ type: 'error', error: { type: 'authentication_error', message: 'Invalid or revoked API key' } });
  });

  it('answers bad requests 400 invalid_request_error and unknown models 404 not_found_error, in Anthropic shape', async () => {
    const missing = await failure(() => client.messages.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }] } as unknown as Anthropic.MessageCreateParamsNonStreaming));
    expect(missing).toBeInstanceOf(Anthropic.BadRequestError);
    expect(missing.error).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: Field required' } });
    const image = await failure(() =>
      client.messages.create({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/x.png' } }] }] }),
    );
    expect(image).toBeInstanceOf(Anthropic.BadRequestError);
    expect((image.error as { error: { message: string } }).error.message).toContain('image blocks are not supported');
    const hot = await failure(() => client.messages.create({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'x' }], ...({ temperature: 1.5 } as Record<string, unknown>) }));
    expect(hot).toBeInstanceOf(Anthropic.BadRequestError);
    expect((hot.error as { error: { message: string } }).error.message).toMatch(/^temperature: /);
    const unknown = await failure(() => client.messages.create({ model: 'nobody/nothing', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }));
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
    expect(unknown.error).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
  });

  it('books usage like chat', async () => {
    const fresh = s.key('claude-usage');
    const c = new Anthropic({ baseURL: s.url, apiKey: fresh, maxRetries: 0 });
    const m = await c.messages.create({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'count me' }] });
    const stream = c.messages.stream({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'count me' }] });
    const streamed = await stream.finalMessage();
    const usage = await s.call('GET', '/v1/usage', { key: fresh });
    expect(usage.body.data).toEqual([{
      project: 'inference', model: MODEL, requests: 2,
      prompt_tokens: m.usage.input_tokens + streamed.usage.input_tokens, completion_tokens: m.usage.output_tokens + streamed.usage.output_tokens,
      total_tokens: m.usage.input_tokens + streamed.usage.input_tokens + m.usage.output_tokens + streamed.usage.output_tokens,
    }]);
  });
});
