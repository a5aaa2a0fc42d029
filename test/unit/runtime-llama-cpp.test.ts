// Hearth against llama.cpp (node-llama-cpp's CPU build) on the same GGUF files, imported and served as
// stored: greedy tokens agree for 64 tokens on F32, F16, BF16 and Q8_0 files; on 4–6-bit files, where
// llama.cpp and Hearth each round activations to 8 bits their own way, the next-token argmax under
// teacher forcing agrees on ≥ 98% of 256 positions and the logits stay within a per-format tolerance.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importModel } from '../../src/models/model-store.js';
import { shapeConfig } from '../../src/synthetic-models/tiny-model.js';
import { writeGgufModel, type GgufFileType } from '../../src/synthetic-models/tiny-gguf.js';
import { loadModel, type LoadedModel } from '../../src/runtime/load-model.js';
import { generateIds, argmax, seededRandom } from '../../src/runtime/generate.js';
import { withLlamaCppModel } from '../helpers/llama-cpp.js';
import { sharedPath } from '../helpers/shared.js';

const dir = mkdtempSync(join(tmpdir(), 'hearth-llamacpp-'));
const home = join(dir, 'home');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Hidden 256 (a K-quant super-block), head_dim 64 (GroupQueryAttention), GQA 4:2, a few layers. Untied: the
// generator's head then predicts a permutation of the last token (tied, it predicts the token itself, and
// greedy text would repeat one token).
const config = shapeConfig('tiny', { layers: 3 });
const MODEL = { ...config, hiddenSize: 256, numHeads: 4, numKvHeads: 2, headDim: 64, intermediateSize: 512, maxPositionEmbeddings: 512, tieWordEmbeddings: false };

async function imported(type: GgufFileType): Promise<{ file: string; model: LoadedModel }> {
  const file = join(dir, `${type}.gguf`);
  if (!existsSync(file)) {
    writeGgufModel(file, { config: MODEL, type, seed: 5 });
    await importModel(home, file, { id: `test/${type.toLowerCase()}` });
  }
  return { file, model: await loadModel(`test/${type.toLowerCase()}`, { home, maxContext: 512 }) };
}

/** A prompt of token ids (no tokenizer involved: both engines take ids). */
const PROMPT = [1, 17, 42, 99, 3, 250, 7, 64, 128, 11];

describe('Hearth vs llama.cpp on the same GGUF files', () => {
  for (const type of ['F32', 'F16', 'BF16', 'Q8_0'] as const) {
    it(`${type}: greedy decoding agrees for 64 tokens`, async () => {
      const { file, model } = await imported(type);
      const ours = await generateIds(model, PROMPT, { maxTokens: 64, temperature: 0, stopAtEos: false });
      await model.runner.release();
      const theirs = await withLlamaCppModel(file, (m) => m.greedy(PROMPT, 64));
      expect(ours).toEqual(theirs);
      expect(new Set(ours).size).toBeGreaterThan(8); // not a degenerate repetition
    });
  }

  // Tolerance on the logits, relative to the spread (standard deviation) of llama.cpp's logits at that
  // position. Both engines multiply the same block values but round activations to 8 bits their own way
  // (llama.cpp to Q8_K/Q8_0 blocks, Hearth to MatMulNBits' int8 blocks). Measured worst over 256 × 1024
  // logits: 0.116–0.130 σ for every format, Q6_K as much as Q4_0, so it is the activation rounding, not the
  // weights; a misread block moves logits by whole σ. 0.2 σ leaves room for other seeds.
  const TOLERANCE = 0.2;
  for (const type of ['Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q4_K', 'Q5_K', 'Q6_K', 'Q4_K_M'] as const) {
    it(`${type}: teacher-forced argmax agrees on ≥ 98% of 256 positions, logits within ${TOLERANCE} σ`, async () => {
      const { file, model } = await imported(type);
      const rand = seededRandom(3);
      const ids = [1, ...Array.from({ length: 255 }, () => 3 + Math.floor(rand() * (MODEL.vocabSize - 3)))];
      const V = MODEL.vocabSize;
      const [all] = await model.runner.forward([{ tokens: ids, kv: model.runner.newSequence() }], { allLogits: true });
      await model.runner.release();
      const theirs = await withLlamaCppModel(file, (m) => m.logits(ids));
      let agree = 0, worst = 0;
      const mean = (a: ArrayLike<number>) => { let m = 0; for (let i = 0; i < a.length; i++) m += a[i] / a.length; return m; };
      for (let p = 0; p < ids.length; p++) {
        const ours = all.subarray(p * V, (p + 1) * V);
        if (argmax(ours) === argmax(theirs[p])) agree++;
        // Compared centred: a constant shift of a row changes no probability.
        const mo = mean(ours), mt = mean(theirs[p]);
        let sd = 0;
        for (const v of theirs[p]) sd += (v - mt) ** 2 / V;
        sd = Math.sqrt(sd);
        for (let i = 0; i < V; i++) worst = Math.max(worst, Math.abs(ours[i] - mo - (theirs[p][i] - mt)) / sd);
      }
      console.log(`${type}: argmax agreement ${(agree / ids.length).toFixed(3)}, worst |Δ| ${worst.toFixed(4)} σ`);
      expect(agree / ids.length).toBeGreaterThanOrEqual(0.98);
      expect(worst).toBeLessThan(TOLERANCE);
    });
  }
});

describe('stories260K (real pretrained GGUF)', () => {
  let real = '';
  beforeAll(() => { real = sharedPath('models', 'stories260K', 'stories260K.gguf'); });
  it('greedy decoding agrees with llama.cpp for 64 tokens', async () => {
    await importModel(home, real, { id: 'karpathy/stories260K' });
    const model = await loadModel('karpathy/stories260K', { home, maxContext: 512 });
    const prompt = await model.tokenizer.encode('Once upon a time', { addSpecialTokens: true });
    const ours = await generateIds(model, prompt, { maxTokens: 64, temperature: 0, stopAtEos: false });
    await model.runner.release();
    const theirs = await withLlamaCppModel(real, (m) => m.greedy(prompt, 64));
    expect(ours).toEqual(theirs);
  });
});
