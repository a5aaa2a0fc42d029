// Embeddings on the engine (GenerateRequest.embed) and the pure parts of worker/inference/embeddings.ts: the hidden
// state comes from the prompt's last position however the prompt was chunked or batched, and with chat traffic in
// the same steps; pooling output is L2-normalized; base64 is OpenAI's little-endian float32.
import { describe, expect, it } from 'vitest';
import { Engine, type EngineEvent } from '../../worker/inference/engine.js';
import { defaultSamplingParams } from '../../worker/inference/sampling-params.js';
import { base64Float32, checkEmbeddingRequest, embeddingInputs, l2Normalize, submitEmbedding } from '../../worker/inference/embeddings.js';
import { BadRequestError } from '../../worker/inference/request-params.js';
import type { EmbeddingResponse } from '../../src/protocol/openai-embeddings.js';
import { ToyModel, ToyTokenizer } from './inference-toy-model.js';

const tok = new ToyTokenizer();
const HIDDEN = 12;

function engineWith(opts: { maxBatchedTokens?: number; prefillChunkTokens?: number } = {}, hiddenSize: number | null = HIDDEN) {
  const model = new ToyModel({ hiddenSize: hiddenSize ?? undefined });
  const engine = new Engine(model, tok, { maxNumSeqs: 8, maxBatchedTokens: opts.maxBatchedTokens ?? 64, prefillChunkTokens: opts.prefillChunkTokens ?? 64, kvCacheTokens: 1024, blockSize: 4 });
  return { engine, model };
}

/** The hidden state the engine reports for an embed request, and its `done` counts. */
function embed(engine: Engine, text: string): Promise<{ hidden: Float32Array; promptTokens: number; completionTokens: number }> {
  return new Promise((resolve, reject) => {
    let hidden: Float32Array | null = null;
    engine.submit({ promptIds: tok.encode(text), params: defaultSamplingParams({ maxTokens: 1 }), embed: true }, (e: EngineEvent) => {
      if (e.type === 'embedding') hidden = e.hidden;
      if (e.type === 'done') hidden ? resolve({ hidden, promptTokens: e.promptTokens, completionTokens: e.completionTokens }) : reject(new Error('done without embedding'));
      if (e.type === 'error') reject(new Error(e.message));
      if (e.type === 'delta') reject(new Error('an embed request generated a token'));
    });
  });
}

const long = 'the quick brown fox jumps over the lazy dog again and again';

describe('engine embed requests', () => {
  it('report the last position hidden state, generate nothing, and count the prompt', async () => {
    const { engine } = engineWith();
    const r = await embed(engine, 'hello world');
    expect(r.hidden).toHaveLength(HIDDEN);
    expect(r.promptTokens).toBe(tok.encode('hello world').length);
    expect(r.completionTokens).toBe(0);
    // Equal prompts, equal vectors; another prompt, another vector.
    expect(Array.from((await embed(engine, 'hello world')).hidden)).toEqual(Array.from(r.hidden));
    expect(Array.from((await embed(engine, 'hello there')).hidden)).not.toEqual(Array.from(r.hidden));
    expect(engine.stats.generatedTokens).toBe(0);
  });

  it('give the same vector whether the prompt runs whole or in chunks, alone or beside decoding chat requests', async () => {
    const whole = (await embed(engineWith().engine, long)).hidden;
    const { engine, model } = engineWith({ maxBatchedTokens: 8, prefillChunkTokens: 4 });
    // A chat request decoding while the embedding prompt is prefilled in chunks of at most 4 tokens.
    const chat = new Promise<void>((resolve, reject) =>
      engine.submit({ promptIds: tok.encode('abc'), params: defaultSamplingParams({ temperature: 0, maxTokens: 30, ignoreEos: true }) }, (e) => {
        if (e.type === 'done') resolve();
        if (e.type === 'error') reject(new Error(e.message));
      }),
    );
    const chunked = embed(engine, long);
    const [r] = await Promise.all([chunked, chat]);
    expect(Array.from(r.hidden)).toEqual(Array.from(whole));
    // The embedding prompt really shared steps with the decoding chat sequence, and ran in several chunks.
    const embedSeq = model.steps.flat().filter((it) => it.tokens.length > 1).map((it) => it.seqId);
    const mixed = model.steps.filter((step) => step.some((it) => it.tokens.length === 1 && it.pastLength > 0) && step.some((it) => embedSeq.includes(it.seqId) && it.tokens.length > 1));
    expect(mixed.length).toBeGreaterThan(1);
  });

  it('fail with a clear error on a model without hidden states, and refuse n > 1', async () => {
    const { engine } = engineWith({}, null);
    await expect(embed(engine, 'hello')).rejects.toThrow(/cannot serve embeddings/);
    expect(() => engineWith().engine.submit({ promptIds: [3], params: defaultSamplingParams(), n: 2, embed: true }, () => {})).toThrow(/n must be 1/);
  });
});

describe('embedding helpers', () => {
  it('l2Normalize gives unit length and keeps the direction; a zero vector stays zero', () => {
    const v = l2Normalize(Float32Array.of(3, 4));
    expect(Array.from(v)).toEqual([Math.fround(0.6), Math.fround(0.8)]);
    expect(Array.from(l2Normalize(new Float32Array(3)))).toEqual([0, 0, 0]);
  });

  it('base64Float32 is little-endian float32, as OpenAI sends it', () => {
    const v = Float32Array.of(1, -2.5, 0.1);
    const bytes = Buffer.from(base64Float32(v), 'base64');
    expect(bytes).toHaveLength(12);
    expect(bytes.readFloatLE(0)).toBe(1);
    expect(bytes.readFloatLE(4)).toBe(-2.5);
    expect(bytes.readFloatLE(8)).toBe(Math.fround(0.1));
    expect(bytes.subarray(0, 4)).toEqual(Buffer.from([0x00, 0x00, 0x80, 0x3f]));
  });

  it('embeddingInputs lists every input form', () => {
    expect(embeddingInputs('a')).toEqual(['a']);
    expect(embeddingInputs(['a', 'b'])).toEqual(['a', 'b']);
    expect(embeddingInputs([1, 2])).toEqual([[1, 2]]);
    expect(embeddingInputs([[1], [2, 3]])).toEqual([[1], [2, 3]]);
  });

  it('checkEmbeddingRequest: dimensions only at the model width, token ids in the vocabulary, a model with hidden states', () => {
    const model = { hiddenSize: 8, vocabSize: 10 };
    expect(() => checkEmbeddingRequest({ model: 'm', input: 'x', dimensions: 8 }, model, 'm')).not.toThrow();
    const err = (f: () => void) => { try { f(); } catch (e) { return e as BadRequestError; } throw new Error('no error'); };
    expect(err(() => checkEmbeddingRequest({ model: 'm', input: 'x', dimensions: 4 }, model, 'm'))).toMatchObject({ param: 'dimensions', message: expect.stringContaining('must be 8') });
    expect(err(() => checkEmbeddingRequest({ model: 'm', input: [[1, 10]] }, model, 'm'))).toMatchObject({ param: 'input', message: expect.stringContaining('token id 10') });
    expect(err(() => checkEmbeddingRequest({ model: 'm', input: 'x' }, { vocabSize: 10 }, 'm'))).toMatchObject({ param: 'model', message: expect.stringContaining('cannot produce embeddings') });
    expect(err(() => checkEmbeddingRequest({ model: 'm', input: 'x', normalize: false }, model, 'm'))).toMatchObject({ param: 'normalize', code: 'unsupported_parameter' });
  });
});

describe('submitEmbedding', () => {
  const servable = (model: ToyModel) => ({ model, tokenizer: tok, chatTemplate: { render: () => '' } });

  function request(engine: Engine, model: ToyModel, body: Record<string, unknown>): Promise<EmbeddingResponse> {
    return new Promise((resolve, reject) => {
      submitEmbedding(servable(model), engine, { model: 'toy', ...body } as never, 'toy', null, (e) => (e.type === 'result' ? resolve(e.data) : reject(new Error(e.message)))).catch(reject);
    });
  }

  it('answers every input in order, normalized, with the prompt tokens as usage; a batch equals single calls', async () => {
    const { engine, model } = engineWith();
    const batch = await request(engine, model, { input: ['hello world', 'abc', long] });
    expect(batch.data.map((d) => d.index)).toEqual([0, 1, 2]);
    const tokens = ['hello world', 'abc', long].reduce((a, t) => a + tok.encode(t).length, 0);
    expect(batch.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens });
    for (const d of batch.data) {
      const v = d.embedding as number[];
      expect(v).toHaveLength(HIDDEN);
      expect(Math.hypot(...v)).toBeCloseTo(1, 5);
    }
    const single = await request(engine, model, { input: 'abc' });
    expect(single.data[0].embedding).toEqual(batch.data[1].embedding);
    const ids = await request(engine, model, { input: tok.encode('abc') });
    expect(ids.data[0].embedding).toEqual(batch.data[1].embedding);
    const b64 = await request(engine, model, { input: ['abc'], encoding_format: 'base64' });
    const bytes = Buffer.from(b64.data[0].embedding as string, 'base64');
    expect(Array.from({ length: HIDDEN }, (_, i) => bytes.readFloatLE(4 * i))).toEqual(batch.data[1].embedding);
  });

  it('refuses an input longer than the context before running anything', async () => {
    const { engine, model } = engineWith();
    await expect(request(engine, model, { input: ['a', 'a'.repeat(300)] })).rejects.toThrow(/maximum context length is 255 tokens\. However, input\[1\] resulted in 300 tokens/);
    expect(engine.stats.steps).toBe(0);
  });
});
