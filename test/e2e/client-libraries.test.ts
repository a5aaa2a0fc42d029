// The client libraries people point at a local server, unmodified, against Hearth's chat completions (issue #42):
// the `openai` SDK, LangChain's ChatOpenAI (@langchain/openai) and the AI SDK's OpenAI provider (ai +
// @ai-sdk/openai, its chat-completions model). The demo model has random weights, so its text is noise: exactly
// what grammar-constrained decoding must hold to a schema. Temperature 1 everywhere, so every token may be drawn.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { ChatOpenAI } from '@langchain/openai';
import { ContextOverflowError } from '@langchain/core/errors';
import { tool as langchainTool } from '@langchain/core/tools';
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, jsonSchema, tool as aiTool } from 'ai';
import { z } from 'zod';
import { startDemoServer, DEMO_MODEL } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';

const MODEL = DEMO_MODEL;
let s: TestServer;
let key: string;
let client: OpenAI;

beforeAll(async () => {
  // A context of 2048: LangChain's tool definitions, rendered into the prompt by the chat template, take ~500 of
  // the demo tokenizer's tokens.
  s = await startDemoServer({ maxContext: 2048 });
  key = s.key('alice');
  client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: key, maxRetries: 0 });
}, 120_000);
afterAll(async () => s?.close());

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
const chars = (x: string) => [...x].length;

/** The schema of the 200-generation bar: bounded strings (lengths in characters), a bounded array, a bounded integer. */
const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 8 },
    tags: { type: 'array', items: { type: 'string', maxLength: 4 }, maxItems: 3 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
  },
  required: ['name', 'tags', 'age'],
  additionalProperties: false,
} as const;

/** PERSON's rules, checked independently of the grammar; returns what is wrong (empty when valid). */
function personProblems(v: unknown): string[] {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return ['not an object'];
  const o = v as Record<string, unknown>;
  const out: string[] = [];
  if (Object.keys(o).some((k) => !['name', 'tags', 'age'].includes(k))) out.push(`extra keys ${Object.keys(o)}`);
  if (typeof o.name !== 'string' || chars(o.name) < 1 || chars(o.name) > 8) out.push(`name ${JSON.stringify(o.name)}`);
  if (!Array.isArray(o.tags) || o.tags.length > 3 || o.tags.some((t) => typeof t !== 'string' || chars(t) > 4)) out.push(`tags ${JSON.stringify(o.tags)}`);
  if (!Number.isInteger(o.age) || (o.age as number) < 0 || (o.age as number) > 120) out.push(`age ${JSON.stringify(o.age)}`);
  return out;
}

const WEATHER = { type: 'object', properties: { city: { type: 'string', maxLength: 6 }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city', 'days'], additionalProperties: false };
const CLOCK = { type: 'object', properties: { zone: { enum: ['utc', 'cet'] } }, required: ['zone'], additionalProperties: false };
const toolProblems = (name: string, args: unknown): string[] => {
  const a = args as Record<string, unknown>;
  if (name === 'get_weather')
    return typeof a?.city === 'string' && chars(a.city) <= 6 && Number.isInteger(a.days) && (a.days as number) >= 1 && (a.days as number) <= 7 && Object.keys(a).length === 2 ? [] : [`get_weather ${JSON.stringify(args)}`];
  if (name === 'get_time') return (a?.zone === 'utc' || a?.zone === 'cet') && Object.keys(a).length === 1 ? [] : [`get_time ${JSON.stringify(args)}`];
  return [`unknown tool ${name}`];
};

describe('openai SDK: chat completions', () => {
  it('200 schema-constrained generations at temperature 1: 0 invalid UTF-8, 0 schema violations', async () => {
    const problems: string[] = [];
    let generations = 0;
    let nonAscii = 0;
    // 20 requests of n = 10 (the engine batches a request's choices).
    for (let r = 0; r < 20; r++) {
      const res = await client.chat.completions.create({
        model: MODEL, messages: [{ role: 'user', content: 'A person, please.' }], n: 10, temperature: 1, max_tokens: 160, seed: 1000 + r,
        response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON as never, strict: true } },
      });
      for (const c of res.choices) {
        generations++;
        if (c.finish_reason !== 'stop') problems.push(`choice ended ${c.finish_reason}`);
        // The tokens' own bytes (Hearth always returns them) must be well-formed UTF-8, not just the decoded text.
        const bytes = Uint8Array.from(c.logprobs!.content!.flatMap((t) => t.bytes ?? []));
        try {
          expect(strictUtf8.decode(bytes)).toBe(c.message.content);
        } catch (err) {
          problems.push(`invalid UTF-8: ${(err as Error).message}`);
          continue;
        }
        if (/[^\x00-\x7f]/.test(c.message.content!)) nonAscii++;
        try {
          problems.push(...personProblems(JSON.parse(c.message.content!)));
        } catch {
          problems.push(`not JSON: ${c.message.content}`);
        }
      }
    }
    expect(generations).toBe(200);
    expect(problems).toEqual([]);
    expect(nonAscii).toBeGreaterThan(10); // the random model does write multi-byte characters: the bar is not met by ASCII alone
  }, 120_000);

  it('tool_choice required with two tools: each call\'s arguments follow its own tool\'s schema; streamed, arguments come in several deltas and no empty content', async () => {
    const tools = [
      { type: 'function' as const, function: { name: 'get_weather', parameters: WEATHER } },
      { type: 'function' as const, function: { name: 'get_time', parameters: CLOCK } },
    ];
    const problems: string[] = [];
    const names = new Set<string>();
    const res = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Weather or time?' }], tools, tool_choice: 'required', n: 20, temperature: 1, max_tokens: 200, seed: 7 });
    for (const c of res.choices) {
      expect(c.finish_reason).toBe('tool_calls');
      const call = c.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      names.add(call.function.name);
      problems.push(...toolProblems(call.function.name, JSON.parse(call.function.arguments)));
    }
    expect(problems).toEqual([]);
    expect(names.size).toBe(2); // the model may pick either

    const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Weather?' }], tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, temperature: 1, max_tokens: 200, seed: 3, stream: true });
    const argDeltas: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta;
      if (d?.tool_calls) {
        expect(d).not.toHaveProperty('content');
        for (const t of d.tool_calls) if (t.function?.arguments) argDeltas.push(t.function.arguments);
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    expect(argDeltas.length).toBeGreaterThan(2);
    expect(toolProblems('get_weather', JSON.parse(argDeltas.join('')))).toEqual([]);
  }, 60_000);

  it('validation errors are 400 BadRequestError in OpenAI\'s shape; a forced tool\'s unsupported schema names its param; verbosity is refused', async () => {
    const bad = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], logprobs: true, top_logprobs: 50 }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad).toMatchObject({ status: 400, param: 'top_logprobs', type: 'invalid_request_error' });
    const tools = [{ type: 'function' as const, function: { name: 'f', parameters: { type: 'object', properties: { s: { type: 'string', pattern: '^a' } } } } }];
    const schema = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], tools, tool_choice: 'required' }).catch((e: unknown) => e);
    expect(schema).toMatchObject({ status: 400, param: 'tools[0].function.parameters', code: 'unsupported_parameter' });
    const verbosity = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], verbosity: 'low' }).catch((e: unknown) => e);
    expect(verbosity).toMatchObject({ status: 400, param: 'verbosity', code: 'unsupported_parameter' });
  });
});

describe('LangChain ChatOpenAI', () => {
  const chat = (extra: Record<string, unknown> = {}) =>
    new ChatOpenAI({ model: MODEL, apiKey: key, configuration: { baseURL: `${s.url}/v1` }, temperature: 1, maxTokens: 200, maxRetries: 0, ...extra });
  const Person = z.object({ name: z.string().min(1).max(8), tags: z.array(z.string().max(4)).max(3), age: z.number().int().min(0).max(120) });

  for (const method of ['jsonSchema', 'functionCalling'] as const)
    it(`withStructuredOutput (method ${method}) parses every answer at temperature 1`, async () => {
      const structured = chat().withStructuredOutput(Person, { method, name: 'person' });
      const problems: string[] = [];
      for (let i = 0; i < 15; i++) {
        const out = await structured.invoke([{ role: 'user', content: `Person ${i}?` }]);
        problems.push(...personProblems(out));
      }
      expect(problems).toEqual([]);
    }, 60_000);

  it('bindTools with two tools and tool_choice required: a call to either, arguments matching its own schema', async () => {
    const weather = langchainTool(async () => 'sunny', { name: 'get_weather', description: 'Weather', schema: z.object({ city: z.string().max(6), days: z.number().int().min(1).max(7) }) });
    const time = langchainTool(async () => 'noon', { name: 'get_time', description: 'Time', schema: z.object({ zone: z.enum(['utc', 'cet']) }) });
    const bound = chat().bindTools([weather, time], { tool_choice: 'required' });
    const problems: string[] = [];
    const names = new Set<string>();
    for (let i = 0; i < 10; i++) {
      const msg = await bound.invoke([{ role: 'user', content: `Question ${i}` }]);
      expect(msg.tool_calls?.length).toBeGreaterThanOrEqual(1);
      for (const call of msg.tool_calls ?? []) {
        names.add(call.name);
        problems.push(...toolProblems(call.name, call.args));
      }
    }
    expect(problems).toEqual([]);
    expect(names.size).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('a prompt longer than the context raises ContextOverflowError (and a 400 is not retried)', async () => {
    const requestsBefore = s.store.usage.list('alice').reduce((n, u) => n + u.requests, 0);
    const err = await chat({ maxRetries: 2 }).invoke([{ role: 'user', content: 'word '.repeat(5000) }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ContextOverflowError);
    expect((err as Error).message).toMatch(/This model's maximum context length is 2048 tokens\. However, your messages resulted in \d+ tokens\./);
    const invalid = await chat({ maxRetries: 2, logprobs: true, topLogprobs: 50 }).invoke('x').catch((e: unknown) => e);
    expect((invalid as { status?: number }).status).toBe(400);
    expect(s.store.usage.list('alice').reduce((n, u) => n + u.requests, 0)).toBe(requestsBefore); // nothing generated, nothing booked
  }, 60_000);
});

describe('AI SDK (createOpenAI().chat)', () => {
  const provider = () => createOpenAI({ baseURL: `${s.url}/v1`, apiKey: key });

  it('generateObject: every object matches the schema at temperature 1', async () => {
    const problems: string[] = [];
    for (let i = 0; i < 10; i++) {
      const { object } = await generateObject({ model: provider().chat(MODEL), schema: jsonSchema(PERSON as never), prompt: `Person ${i}`, temperature: 1, maxOutputTokens: 160, maxRetries: 0 });
      problems.push(...personProblems(object));
    }
    expect(problems).toEqual([]);
  }, 60_000);

  it('generateText with two tools and toolChoice required: the call\'s input matches its own tool\'s schema', async () => {
    const tools = {
      get_weather: aiTool({ description: 'Weather', inputSchema: jsonSchema(WEATHER as never) }),
      get_time: aiTool({ description: 'Time', inputSchema: jsonSchema(CLOCK as never) }),
    };
    const problems: string[] = [];
    for (let i = 0; i < 10; i++) {
      const result = await generateText({ model: provider().chat(MODEL), tools, toolChoice: 'required', prompt: `Question ${i}`, temperature: 1, maxOutputTokens: 200, maxRetries: 0 });
      expect(result.toolCalls.length).toBeGreaterThanOrEqual(1);
      for (const call of result.toolCalls) problems.push(...toolProblems(call.toolName, call.input));
    }
    expect(problems).toEqual([]);
  }, 60_000);
});
