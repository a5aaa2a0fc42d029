// POST /v1/embeddings through the unmodified `openai` SDK against a server with a real inference worker (the demo
// model, random weights: the vectors mean nothing, their shape, normalization and consistency do).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { startDemoServer, DEMO_MODEL } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';

let s: TestServer;
let key: string;
let client: OpenAI;
let width: number;

beforeAll(async () => {
  s = await startDemoServer();
  key = s.key('emb');
  client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: key, maxRetries: 0 });
  width = JSON.parse(fs.readFileSync(path.join(s.home, 'models', ...DEMO_MODEL.split('/'), 'config.json'), 'utf8')).hidden_size;
}, 120_000);
afterAll(async () => s?.close());

const norm = (v: number[]) => Math.hypot(...v);
const maxDiff = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));

async function failure(call: () => Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await call();
  } catch (err) {
    if (err instanceof OpenAI.APIError) return err;
    throw err;
  }
  throw new Error('the call succeeded');
}

describe('embeddings.create', () => {
  it('embeds several inputs as unit vectors of the model width, in order, with usage', async () => {
    const inputs = ['The cat sat on the mat.', 'An entirely different sentence about databases.', 'The cat sat on the mat.'];
    const r = await client.embeddings.create({ model: DEMO_MODEL, input: inputs, encoding_format: 'float' });
    expect(r.object).toBe('list');
    expect(r.model).toBe(DEMO_MODEL);
    expect(r.data.map((d) => [d.object, d.index])).toEqual([['embedding', 0], ['embedding', 1], ['embedding', 2]]);
    for (const d of r.data) {
      expect(d.embedding).toHaveLength(width);
      expect(norm(d.embedding)).toBeCloseTo(1, 5);
    }
    // Equal inputs give equal vectors; different ones do not.
    expect(maxDiff(r.data[0].embedding, r.data[2].embedding)).toBeLessThan(1e-5);
    expect(maxDiff(r.data[0].embedding, r.data[1].embedding)).toBeGreaterThan(1e-3);
    expect(r.usage.prompt_tokens).toBeGreaterThan(6);
    expect(r.usage.total_tokens).toBe(r.usage.prompt_tokens);

    // A batched call equals the single calls (float tolerance: batch rows may run in other kernel shapes).
    for (const [i, text] of inputs.slice(0, 2).entries()) {
      const one = await client.embeddings.create({ model: DEMO_MODEL, input: text, encoding_format: 'float' });
      expect(maxDiff(one.data[0].embedding, r.data[i].embedding)).toBeLessThan(1e-4);
    }
  });

  it('answers base64 (the SDK decodes it; its default format) with the same vectors as float', async () => {
    const input = ['hello there', 'general kenobi'];
    const floats = await client.embeddings.create({ model: DEMO_MODEL, input, encoding_format: 'float' });
    // The SDK asks for base64 when no format is given and decodes it to numbers itself.
    const decoded = await client.embeddings.create({ model: DEMO_MODEL, input });
    for (const i of [0, 1]) expect(maxDiff(decoded.data[i].embedding, floats.data[i].embedding)).toBeLessThan(1e-4);
    // Asked for explicitly, the string comes through: little-endian float32.
    const raw = await client.embeddings.create({ model: DEMO_MODEL, input: 'hello there', encoding_format: 'base64' });
    const text = raw.data[0].embedding as unknown as string;
    expect(typeof text).toBe('string');
    const bytes = Buffer.from(text, 'base64');
    expect(bytes.length).toBe(4 * width);
    const values = Array.from({ length: width }, (_, i) => bytes.readFloatLE(4 * i));
    expect(maxDiff(values, floats.data[0].embedding)).toBeLessThan(1e-4);
  });

  it('takes token ids and lists of token ids; usage counts exactly those tokens', async () => {
    const one = await client.embeddings.create({ model: DEMO_MODEL, input: [5, 6, 7, 8], encoding_format: 'float' });
    expect(one.data).toHaveLength(1);
    expect(one.usage.prompt_tokens).toBe(4);
    const many = await client.embeddings.create({ model: DEMO_MODEL, input: [[5, 6, 7, 8], [9, 10]], encoding_format: 'float' });
    expect(many.usage.prompt_tokens).toBe(6);
    expect(maxDiff(many.data[0].embedding, one.data[0].embedding)).toBeLessThan(1e-4);
    expect(norm(many.data[1].embedding)).toBeCloseTo(1, 5);
  });

  it('honours dimensions equal to the model width, and answers 400 naming it otherwise', async () => {
    const same = await client.embeddings.create({ model: DEMO_MODEL, input: 'x y z', dimensions: width, encoding_format: 'float' });
    expect(same.data[0].embedding).toHaveLength(width);
    const err = await failure(() => client.embeddings.create({ model: DEMO_MODEL, input: 'x y z', dimensions: 8 }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.param).toBe('dimensions');
    expect(err.message).toContain(`dimensions must be ${width}`);
  });

  it('answers bad input in OpenAI error shape: token ids outside the vocabulary, a model that does not exist', async () => {
    const err = await failure(() => client.embeddings.create({ model: DEMO_MODEL, input: [[1, 10_000_000]] }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err).toMatchObject({ type: 'invalid_request_error', param: 'input', code: 'invalid_value' });
    const missing = await failure(() => client.embeddings.create({ model: 'nobody/nothing', input: 'x' }));
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing.code).toBe('model_not_found');
    // An empty string is not an input (OpenAI refuses it too); the body's shape errors carry OpenAI's error object.
    const empty = await s.call('POST', '/v1/embeddings', { key, body: { model: DEMO_MODEL, input: '' } });
    expect(empty.status).toBeGreaterThanOrEqual(400);
    expect(empty.status).toBeLessThan(500);
    expect(empty.body.error).toMatchObject({ type: 'invalid_request_error', param: 'input' });
  });

  it('books the prompt tokens like chat (GET /v1/usage)', async () => {
    const fresh = s.key('emb-usage');
    const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: fresh, maxRetries: 0 });
    const r = await c.embeddings.create({ model: DEMO_MODEL, input: ['one two', 'three'], encoding_format: 'float' });
    const usage = await s.call('GET', '/v1/usage', { key: fresh });
    expect(usage.body.data).toEqual([
      { project: 'inference', model: DEMO_MODEL, requests: 1, prompt_tokens: r.usage.prompt_tokens, completion_tokens: 0, total_tokens: r.usage.prompt_tokens },
    ]);
  });
});
