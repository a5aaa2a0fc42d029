// The llama.cpp reference harness (test/helpers/llama-cpp.ts) on the real pretrained stories260K model:
// greedy decoding tells the story Hearth's own test expects, and the greedy tokens are the argmax of the
// teacher-forced logits of the same sequence (the two APIs agree with each other).
import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { withLlamaCppModel } from '../helpers/llama-cpp.js';

const STORIES = fileURLToPath(new URL('../../../shared/models/stories260K/stories260K.gguf', import.meta.url));

describe('llama.cpp harness', () => {
  it('stories260K: greedy from BOS + "Once upon a time" tells the Lily story; greedy = argmax of teacher-forced logits', async () => {
    if (!existsSync(STORIES)) throw new Error(`missing ${STORIES} (the shared real-model fixture)`);
    const prompt = [1, 403, 407, 261, 378]; // BOS + "Once upon a time" in its SentencePiece vocabulary
    await withLlamaCppModel(STORIES, async (m) => {
      expect([1, ...m.tokenize('Once upon a time')]).toEqual(prompt);
      const greedy = await m.greedy(prompt, 24);
      expect(m.model.detokenize(greedy as never)).toMatch(/^, there was a little girl named Lily\./);
      const logits = await m.logits([...prompt, ...greedy]);
      expect(logits).toHaveLength(prompt.length + greedy.length);
      const argmax = logits.map((row) => row.indexOf(Math.max(...row)));
      expect(argmax.slice(prompt.length - 1, -1)).toEqual(greedy);
    });
  }, 120_000);
});
