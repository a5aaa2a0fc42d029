// Structured outputs through the openai SDK's own helper: `chat.completions.parse` with a zod schema of
// bounded fields (integer, boolean, enum, string with maxLength) must finish within a small max_tokens and
// parse, on the demo model (random weights) and on the real stories260K (a story model that never saw
// JSON), under strict key order. Before issue #20 small models hit max_tokens in whitespace and the SDK
// raised LengthFinishReasonError.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { importModel } from '../../src/models/model-store.js';
import { DEMO_MODEL, startDemoServer } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';

const STORIES = fileURLToPath(new URL('../../../shared/models/stories260K/stories260K.gguf', import.meta.url));
const DEMO = DEMO_MODEL;
const STORIES_ID = 'karpathy/stories260K';
const hasStories = existsSync(STORIES);

let s: TestServer;
let client: OpenAI;

beforeAll(async () => {
  s = await startDemoServer({ prepare: async (home) => { if (hasStories) await importModel(home, STORIES, { id: STORIES_ID }); } });
  client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: s.key('alice'), maxRetries: 0 });
}, 120_000);
afterAll(async () => s?.close());

const Pet = z.object({
  name: z.string().max(12),
  age: z.number().int(),
  vaccinated: z.boolean(),
  kind: z.enum(['cat', 'dog', 'bird']),
  nickname: z.string().max(6).nullable(),
});
const MAX_TOKENS = 120;

async function parsePet(model: string, seed: number) {
  const r = await client.chat.completions.parse({
    model,
    messages: [{ role: 'user', content: 'Describe a pet as JSON.' }],
    response_format: zodResponseFormat(Pet, 'pet'),
    max_tokens: MAX_TOKENS,
    temperature: 1,
    seed,
  });
  return r.choices[0];
}

const models = [DEMO, ...(hasStories ? [STORIES_ID] : [])];

describe.each(models)('chat.completions.parse with a bounded zod schema on %s', (model) => {
  it(`finishes within ${MAX_TOKENS} tokens and parses, with the keys in the schema's order, for every seed`, async () => {
    for (const seed of [1, 2, 3, 4]) {
      const choice = await parsePet(model, seed);
      expect(choice.finish_reason, `seed ${seed}: ${choice.message.content}`).toBe('stop');
      const pet = choice.message.parsed!;
      expect(Pet.parse(pet)).toEqual(pet);
      expect([...pet.name].length).toBeLessThanOrEqual(12); // code points, as JSON Schema and zod count
      // strict: true (zodResponseFormat sets it) → keys in declaration order, compact whitespace.
      expect(Object.keys(JSON.parse(choice.message.content!))).toEqual(['name', 'age', 'vaccinated', 'kind', 'nickname']);
      const outsideStrings = choice.message.content!.replace(/"(?:[^"\\]|\\.)*"/g, '""');
      expect(outsideStrings).not.toMatch(/\s{2,}/);
    }
  });
});
