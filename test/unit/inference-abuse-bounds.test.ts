// Bounded work per inference request (issue #44), as pure logic: the request caps' arithmetic, the memoised
// JSON-schema compiler and its caps, large answers crossing the IPC in pieces, and the prefix cache's partition
// by entity. The same probes through real HTTP: test/hardening/abuse-inference.test.ts.
import { describe, expect, it } from 'vitest';
import { answerTokenBound, checkAnswerSize, checkSequenceCount, DEFAULT_REQUEST_CAPS, requestCapsFrom } from '../../worker/inference/request-caps.js';
import { BadRequestError } from '../../worker/inference/request-params.js';
import { compileSchema, SchemaTooComplexError, unsupportedSchemaFeatures, type SchemaNode } from '../../src/domain/json-schema.js';
import { GrammarState } from '../../worker/inference/json-grammar.js';
import { ipcFrames, writeFrames } from '../../worker/transport-ipc.js';
import { PieceAssembler } from '../../src/queue/embedded.js';
import type { IpcPiece, WorkerMessage } from '../../src/protocol/messages.js';
import { PrefixCache } from '../../worker/inference/prefix-cache.js';
import { Engine, type EngineEvent } from '../../worker/inference/engine.js';
import { defaultSamplingParams } from '../../worker/inference/sampling-params.js';
import { echoedPrompt, withEchoedPrompt } from '../../worker/inference/openai-format.js';
import { createEngine, type InferenceEvent, type InferenceRequest } from '../../worker/inference/openai-adapter.js';
import type { ChatTemplatePort } from '../../worker/inference/model-port.js';
import { ToyModel, ToyTokenizer } from './inference-toy-model.js';

const caps = { maxSequences: 256, maxAnswerTokens: 1000 };
const refusal = (f: () => void): BadRequestError => {
  try {
    f();
  } catch (err) {
    if (err instanceof BadRequestError) return err;
    throw err;
  }
  throw new Error('expected a BadRequestError');
};

describe('request caps', () => {
  it('bounds an answer by n × (prompt + max_tokens) × (1 + top_logprobs), summed over prompts', () => {
    expect(answerTokenBound([{ promptTokens: 10, maxTokens: 6 }], 1, 0)).toBe(16);
    expect(answerTokenBound([{ promptTokens: 10, maxTokens: 6 }], 4, 2)).toBe(4 * 16 * 3);
    expect(answerTokenBound([{ promptTokens: 10, maxTokens: 6 }, { promptTokens: 3, maxTokens: 1 }], 2, 0)).toBe(2 * 16 + 2 * 4);
    // Probe 5 of issue #44: echo + logprobs 20 + n 128 on 3 prompts of ~2,000 token ids.
    expect(answerTokenBound(Array.from({ length: 3 }, () => ({ promptTokens: 2000, maxTokens: 16 })), 128, 20)).toBeGreaterThan(DEFAULT_REQUEST_CAPS.maxAnswerTokens);
  });

  it('allows the cap itself and refuses one more, naming the cap and its setting', () => {
    expect(() => checkAnswerSize([{ promptTokens: 500, maxTokens: 500 }], 1, 0, caps)).not.toThrow();
    const err = refusal(() => checkAnswerSize([{ promptTokens: 500, maxTokens: 501 }], 1, 0, caps));
    expect(err.message).toContain('1001');
    expect(err.message).toContain('HEARTH_MAX_ANSWER_TOKENS');
    expect(err.message).toContain('1000');
    expect(err.code).toBe('answer_too_large');
    expect(err.param).toBe('max_tokens');
    expect(refusal(() => checkAnswerSize([{ promptTokens: 5, maxTokens: 5 }], 1, 200, caps, 'top_logprobs')).param).toBe('top_logprobs');
    expect(refusal(() => checkAnswerSize([{ promptTokens: 5, maxTokens: 5 }], 200, 0, caps)).param).toBe('n');
  });

  it('refuses prompts × n above the sequence cap', () => {
    expect(() => checkSequenceCount(2, 128, caps)).not.toThrow();
    const err = refusal(() => checkSequenceCount(100, 128, caps));
    expect(err.message).toMatch(/12800 sequences \(100 prompts × n 128\).*256.*HEARTH_MAX_SEQUENCES_PER_REQUEST/);
    expect(err.param).toBe('prompt');
    expect(err.code).toBe('too_many_sequences');
    expect(refusal(() => checkSequenceCount(1, 257, caps)).param).toBe('n');
  });

  it('reads its settings from the environment, refusing nonsense', () => {
    expect(requestCapsFrom({})).toEqual(DEFAULT_REQUEST_CAPS);
    expect(requestCapsFrom({ HEARTH_MAX_SEQUENCES_PER_REQUEST: '8', HEARTH_MAX_ANSWER_TOKENS: '99' })).toEqual({ maxSequences: 8, maxAnswerTokens: 99 });
    expect(() => requestCapsFrom({ HEARTH_MAX_ANSWER_TOKENS: '0' })).toThrow(/HEARTH_MAX_ANSWER_TOKENS/);
    expect(() => requestCapsFrom({ HEARTH_MAX_SEQUENCES_PER_REQUEST: 'many' })).toThrow(/HEARTH_MAX_SEQUENCES_PER_REQUEST/);
  });
});

/** Definitions D0 … D(levels-1), each an object holding the next one twice (probe 4 of issue #44: 24 levels, 2.8 KB). */
function chainedSchema(levels: number): Record<string, unknown> {
  const $defs: Record<string, unknown> = {};
  for (let i = 0; i < levels; i++)
    $defs[`D${i}`] = i === levels - 1
      ? { type: 'integer' }
      : { type: 'object', properties: { a: { $ref: `#/$defs/D${i + 1}` }, b: { $ref: `#/$defs/D${i + 1}` } }, required: ['a', 'b'] };
  return { $defs, $ref: '#/$defs/D0' };
}

/** The same schema with every $ref written out in place (what compiling it used to build). */
function inlined(schema: unknown, root: Record<string, any>): unknown {
  if (Array.isArray(schema)) return schema.map((s) => inlined(s, root));
  if (typeof schema !== 'object' || schema === null) return schema;
  const s = schema as Record<string, unknown>;
  if (typeof s.$ref === 'string') return inlined(root.$defs[s.$ref.split('/').pop()!], root);
  return Object.fromEntries(Object.entries(s).filter(([k]) => k !== '$defs').map(([k, v]) => [k, inlined(v, root)]));
}

const accepts = (node: SchemaNode, text: string) => GrammarState.start(node).feedBytes(new TextEncoder().encode(text))?.canEnd ?? false;
const prefixOk = (node: SchemaNode, text: string) => GrammarState.start(node).feedBytes(new TextEncoder().encode(text)) !== null;

describe('JSON-schema compilation, memoised per definition', () => {
  it('compiles a chain of 24 definitions each used twice within a small node budget (the inlined tree has 2^24 leaves)', () => {
    // Expanding each use visited ~2^25 subschemas; compiled once per definition it is ~3 per level.
    const node = compileSchema(chainedSchema(24), { limits: { maxNodes: 200, maxMs: 60_000 } });
    expect(unsupportedSchemaFeatures(chainedSchema(24), { maxNodes: 200, maxMs: 60_000 })).toEqual([]);
    // Both uses of a definition are the same node: the grammar walks a DAG.
    const d0 = node as Extract<SchemaNode, { kind: 'object' }>;
    expect(d0.props![0].node).toBe(d0.props![1].node);
    // And it still decodes: a 3-level instance against a 3-level chain.
    const small = compileSchema(chainedSchema(3));
    expect(accepts(small, '{"a":{"a":1,"b":2},"b":{"a":3,"b":4}}')).toBe(true);
    expect(accepts(small, '{"a":{"a":1,"b":2},"b":{"a":3}}')).toBe(false);
  });

  it('accepts and refuses exactly what the inlined schema does, on small schemas', () => {
    const schemas: Record<string, any>[] = [
      chainedSchema(3),
      {
        $defs: { Name: { type: 'string', maxLength: 4 }, Pet: { type: 'object', properties: { name: { $ref: '#/$defs/Name' }, kind: { enum: ['cat', 'dog'] } }, required: ['name'] } },
        type: 'object',
        properties: { owner: { $ref: '#/$defs/Name' }, pets: { type: 'array', items: { $ref: '#/$defs/Pet' }, maxItems: 2 }, best: { anyOf: [{ $ref: '#/$defs/Pet' }, { type: 'null' }] } },
        required: ['owner'],
      },
    ];
    const texts = [
      '{"a":{"a":1,"b":2},"b":{"a":3,"b":4}}', '{"a":{"a":1},"b":{"a":3,"b":4}}', '{"a":1,"b":2}', '{"b":{"a":3,"b":4},"a":{"a":1,"b":2}}',
      '{"owner":"ann"}', '{"owner":"annabel"}', '{"owner":"ann","pets":[{"name":"rex","kind":"dog"}]}', '{"owner":"ann","pets":[{"kind":"dog"}]}',
      '{"owner":"ann","pets":[{"name":"a"},{"name":"b"},{"name":"c"}]}', '{"owner":"ann","best":null}', '{"owner":"ann","best":{"name":"tom","kind":"cat"}}',
      '{"owner":"ann","best":{"name":"tom","kind":"cow"}}', '{"owner":"ann","pets":[{"name":"rex","kind":"d', '{"own',
    ];
    for (const schema of schemas) {
      const shared = compileSchema(schema);
      const expanded = compileSchema(inlined(schema, schema));
      for (const t of texts) {
        expect(accepts(shared, t), t).toBe(accepts(expanded, t));
        expect(prefixOk(shared, t), t).toBe(prefixOk(expanded, t));
      }
    }
    // Still refused: recursion, and problems of a definition are reported once however often it is used.
    expect(unsupportedSchemaFeatures({ $defs: { N: { type: 'object', properties: { next: { $ref: '#/$defs/N' } } } }, $ref: '#/$defs/N' })[0]).toMatch(/recursive/);
    expect(unsupportedSchemaFeatures({ $defs: { P: { type: 'string', pattern: 'x' } }, type: 'array', items: { anyOf: [{ $ref: '#/$defs/P' }, { type: 'null' }] }, minItems: 1 })).toEqual(["#/$defs/P: 'pattern' is not supported"]);
  });

  it('refuses a schema past the node cap or the time cap with an error naming the cap and its setting', () => {
    const wide = { type: 'object', properties: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`k${i}`, { type: 'string' }])) };
    expect(() => compileSchema(wide, { limits: { maxNodes: 1000, maxMs: 60_000 } })).not.toThrow();
    const tooMany = () => compileSchema(wide, { limits: { maxNodes: 100, maxMs: 60_000 } });
    expect(tooMany).toThrow(SchemaTooComplexError);
    expect(tooMany).toThrow(/more than 100 subschemas.*HEARTH_SCHEMA_MAX_NODES/);
    expect(() => unsupportedSchemaFeatures(wide, { maxNodes: 100, maxMs: 60_000 })).toThrow(/HEARTH_SCHEMA_MAX_NODES/);
    // The clock is read every 256 subschemas; a budget of 0 ms is spent by the first reading.
    expect(() => compileSchema(wide, { limits: { maxNodes: 10_000, maxMs: 0 } })).toThrow(/took more than 0 ms.*HEARTH_SCHEMA_MAX_MS/);
  });
});

describe('large answers over the IPC', () => {
  const done = (requestId: string, result: unknown): WorkerMessage => ({ type: 'inference.event', requestId, event: { type: 'result', data: result } });

  it('sends a large result as pieces that join back to the same message', () => {
    const big = done('r1', { text: 'x'.repeat(1000), list: Array.from({ length: 50 }, (_, i) => ({ i })) });
    const frames = ipcFrames(big, 100);
    expect(frames.length).toBeGreaterThan(10);
    expect(frames.every((f) => f.type === 'ipc.piece' && f.text.length <= 100)).toBe(true);
    expect(frames.map((f) => (f as IpcPiece).last)).toEqual(frames.map((_, i) => i === frames.length - 1));
    const assembler = new PieceAssembler();
    const joined = frames.map((f) => assembler.push(f as IpcPiece));
    expect(joined.slice(0, -1).every((j) => j === null)).toBe(true);
    expect(joined.at(-1)).toEqual(big);
    // Small results and chunks travel whole.
    expect(ipcFrames(done('r2', { ok: 1 }), 100)).toEqual([done('r2', { ok: 1 })]);
    const delta: WorkerMessage = { type: 'inference.event', requestId: 'r3', event: { type: 'chunk', data: 'y'.repeat(500) } };
    expect(ipcFrames(delta, 100)).toEqual([delta]);
  });

  it('an answer that cannot be serialised fails its own request only', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const frames = ipcFrames(done('bad', cyclic));
    expect(frames).toHaveLength(1);
    expect(frames[0]).toMatchObject({ type: 'inference.event', requestId: 'bad', event: { type: 'error', status: 500 } });
    expect((frames[0] as { event: { message: string } }).event.message).toMatch(/could not send this request's answer/);
  });

  it('a write that throws (a message past what one string holds) fails the requests it carried, and the rest still go', () => {
    const sent: unknown[] = [];
    // The channel refuses a frame that carries request "huge"'s delta, as process.send throws on a > 512 MB message.
    const send = (frame: unknown, cb: () => void) => {
      const all = Array.isArray(frame) ? frame : [frame];
      if (all.some((m: WorkerMessage) => m.type === 'inference.event' && m.event.type === 'chunk' && m.requestId === 'huge')) throw new RangeError('Invalid string length');
      sent.push(frame);
      cb();
    };
    let doneCalls = 0;
    const beat = { type: 'training.started', jobId: 'j', workerId: 'w' } as WorkerMessage;
    const fine = done('fine', { ok: true });
    writeFrames([beat, { type: 'inference.event', requestId: 'huge', event: { type: 'chunk', data: 'z' } }, fine], send, () => doneCalls++);
    expect(doneCalls).toBe(1);
    // The batch was refused whole, then sent message by message: "huge" gets an error, the others go, in order.
    expect(sent).toEqual([beat, expect.objectContaining({ type: 'inference.event', requestId: 'huge', event: { type: 'error', status: 500, message: expect.stringMatching(/Invalid string length/) } }), fine]);
  });
});

describe('the prefix cache is partitioned by entity', () => {
  it('matches only entries of the same scope', () => {
    const cache = new PrefixCache(4, 8);
    cache.insert(1, [1, 2, 3, 4, 5, 6, 7, 8], 'alice');
    expect(cache.match([1, 2, 3, 4, 5, 6, 9], 'alice')).toEqual({ donorId: 1, length: 6 });
    expect(cache.match([1, 2, 3, 4, 5, 6, 9], 'bob')).toBeNull();
    expect(cache.match([1, 2, 3, 4, 5, 6, 9], null)).toBeNull();
    cache.insert(2, [1, 2, 3, 4, 5, 6, 7, 8], null);
    expect(cache.match([1, 2, 3, 4, 5, 6, 9])).toEqual({ donorId: 2, length: 6 });
  });

  /** One request's 'done' event, with a cache scope. */
  async function run(engine: Engine, promptIds: number[], scope: string | null): Promise<Extract<EngineEvent, { type: 'done' }>> {
    return new Promise((resolve) =>
      engine.submit({ promptIds, params: { ...defaultSamplingParams(), maxTokens: 3, ignoreEos: true, temperature: 0 }, cacheScope: scope }, (e) => e.type === 'done' && resolve(e)),
    );
  }

  it('in the engine: alice reuses her own prompt, bob gets no hit on alice’s, finished or still running', async () => {
    const engine = new Engine(new ToyModel({ prefixCopy: true, maxContext: 256 }), new ToyTokenizer(), { kvCacheTokens: 4096, blockSize: 4, prefillChunkTokens: 64 });
    const prompt = Array.from({ length: 40 }, (_, i) => 3 + (i % 50));
    expect((await run(engine, prompt, 'alice')).cachedTokens).toBe(0);
    expect((await run(engine, prompt, 'alice')).cachedTokens).toBe(39); // all but the token the model must run on
    expect((await run(engine, prompt, 'bob')).cachedTokens).toBe(0);
    // Concurrent (a running sequence's cache is shared with same-prompt newcomers): still not across entities.
    const other = prompt.map((_, i) => 3 + ((i * 7 + 1) % 50));
    let carolTokens = 0;
    const carol = engine.submit({ promptIds: other, params: { ...defaultSamplingParams(), maxTokens: 200, ignoreEos: true }, cacheScope: 'carol' }, (e) => {
      if (e.type === 'delta') carolTokens += e.tokens.length;
    });
    while (carolTokens < 2) await new Promise((r) => setTimeout(r, 1)); // carol's prompt is computed: she decodes
    expect((await run(engine, [...other, 7], 'dave')).cachedTokens).toBe(0);
    expect((await run(engine, [...other, 7], 'carol')).cachedTokens).toBe(40);
    carol.cancel();
  });
});

describe('echo', () => {
  it('builds each prompt’s echoed logprobs once and shares them between its choices', () => {
    const tok = new ToyTokenizer();
    const prompt = [{ id: 5, logprob: null, topLogprobs: [] }, { id: 6, logprob: -1, topLogprobs: [{ id: 6, logprob: -1 }, { id: 7, logprob: -2 }] }];
    const part = echoedPrompt(tok, prompt, 2);
    const choice = (i: number) => ({
      index: i, text: 'x', finish_reason: 'length' as const, stop_reason: null,
      logprobs: { tokens: ['token_id:9'], token_logprobs: [-0.5], top_logprobs: [{ 'token_id:9': -0.5 }], text_offset: [0] },
    });
    const [a, b] = [withEchoedPrompt(choice(0), part), withEchoedPrompt(choice(1), part)];
    expect(a.logprobs!.token_logprobs).toEqual([null, -1, -0.5]);
    expect(a.logprobs!.top_logprobs![0]).toBeNull();
    expect(a.logprobs!.top_logprobs![1]).toBe(b.logprobs!.top_logprobs![1]); // one object for both choices
    expect(a.text).toBe(part.text + 'x');
    expect(a.logprobs!.text_offset.at(-1)).toBe(part.text.length);
  });
});

describe('the engine entry refuses past the caps with OpenAI-shaped errors', () => {
  const tok = new ToyTokenizer();
  const template: ChatTemplatePort = { render: (messages, opts) => messages.map((m) => `${m.role}: ${m.content ?? ''}\n`).join('') + (opts.addGenerationPrompt ? 'assistant: ' : '') };
  const hearth = createEngine({ model: new ToyModel({ maxContext: 256 }), tokenizer: tok, chatTemplate: template }, { kvCacheTokens: 4096, requestCaps: { maxSequences: 8, maxAnswerTokens: 500 } });
  const submit = (req: InferenceRequest) =>
    new Promise<InferenceEvent>((resolve) => void hearth.submit(req, (e) => (e.type === 'error' || e.type === 'result') && resolve(e)));
  const wide = { type: 'object', properties: Object.fromEntries(Array.from({ length: 12_000 }, (_, i) => [`k${i}`, { type: 'integer' }])) };
  const messages = [{ role: 'user', content: 'hi' }];

  it('sequences, answer size, and schemas past the node cap (response_format or a forced tool call)', async () => {
    expect(await submit({ kind: 'completion', model: 'm', body: { model: 'm', prompt: ['a', 'b', 'c'], n: 3, max_tokens: 2 } })).toMatchObject({ type: 'error', status: 400, param: 'prompt', code: 'too_many_sequences' });
    expect(await submit({ kind: 'completion', model: 'm', body: { model: 'm', prompt: 'a', n: 2, max_tokens: 100, logprobs: 2 } })).toMatchObject({ type: 'error', status: 400, param: 'logprobs', code: 'answer_too_large' });
    expect(await submit({ kind: 'chat', model: 'm', body: { model: 'm', messages, n: 2, max_tokens: 100, logprobs: true, top_logprobs: 2 } })).toMatchObject({ type: 'error', status: 400, param: 'top_logprobs', code: 'answer_too_large' });
    expect(await submit({ kind: 'chat', model: 'm', body: { model: 'm', messages, max_tokens: 4 } })).toMatchObject({ type: 'result' });
    expect(await submit({ kind: 'chat', model: 'm', body: { model: 'm', messages, max_tokens: 4, response_format: { type: 'json_schema', json_schema: { name: 'w', schema: wide } } } }))
      .toMatchObject({ type: 'error', status: 400, param: 'response_format', code: 'schema_too_complex' });
    const tools = [{ type: 'function', function: { name: 'f', parameters: wide } }];
    const forced = await submit({ kind: 'chat', model: 'm', body: { model: 'm', messages, max_tokens: 4, tools, tool_choice: { type: 'function', function: { name: 'f' } } } });
    expect(forced).toMatchObject({ type: 'error', status: 400, param: 'tools[0].function.parameters', code: 'schema_too_complex' });
    expect((forced as { message: string }).message).toMatch(/HEARTH_SCHEMA_MAX_NODES/);
  });
});
