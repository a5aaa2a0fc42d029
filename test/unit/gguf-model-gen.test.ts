// The GGUF model generator (src/synthetic-models/tiny-gguf.ts): what it writes is what Hearth's GGUF reader reads
// back (names, q/k layout, config, quantized values), its tokenizer metadata tokenizes in llama.cpp as in
// Hearth, its files are deterministic, and its tensor-type recipes match llama.cpp's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ggufTensorType, syntheticWeights, writeGgufModel } from '../../src/synthetic-models/tiny-gguf.js';
import { shapeConfig, tinyConfig, tinyTokenizer } from '../../src/synthetic-models/tiny-model.js';
import { readGgufModel } from '../../src/runtime/gguf-model.js';
import { dequantize, GGML_TYPE } from '../../src/runtime/gguf-dequant.js';
import { quantize } from '../../src/runtime/gguf-quantize.js';
import { Tokenizer } from '../../src/runtime/tokenizer.js';
import { withLlamaCppModel } from '../helpers/llama-cpp.js';
import { referenceLogits } from './runtime-reference.js';

let dir: string;
beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'hearth-gguf-gen-')); });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tokSize = tinyTokenizer().size;

describe('GGUF model generator', () => {
  for (const [arch, type] of [['llama', 'Q8_0'], ['qwen2', 'Q4_K'], ['qwen3', 'F16']] as const) {
    it(`${arch} ${type}: Hearth's reader gets the config and the quantized synthetic weights back`, () => {
      const config = tinyConfig({ architecture: arch, overrides: { hiddenSize: 256, numHeads: 4, numKvHeads: 2, headDim: 64, intermediateSize: 512, numLayers: 2, vocabSize: 1000, tieWordEmbeddings: arch !== 'llama' } }, tokSize);
      const p = join(dir, `${arch}-${type}.gguf`);
      const info = writeGgufModel(p, { config, type, seed: 3 });
      const m = readGgufModel(p);
      expect(m.config).toMatchObject({
        architecture: arch, vocabSize: 1000, hiddenSize: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 64,
        intermediateSize: 512, tieWordEmbeddings: arch !== 'llama', attentionBias: arch === 'qwen2', qkNorm: arch === 'qwen3',
        bosTokenId: config.bosTokenId, ropeTheta: config.ropeTheta,
      });
      expect(m.config.eosTokenIds.sort()).toEqual([...config.eosTokenIds].sort());
      const expected = syntheticWeights(config, 3);
      expect([...m.weights.keys()].sort()).toEqual([...expected.keys()].sort());
      for (const [name, t] of expected) {
        const want = t.shape.length === 2 ? dequantize(GGML_TYPE[type], quantize(GGML_TYPE[type], t.data), t.data.length) : t.data;
        expect(m.weights.get(name)!.shape, name).toEqual(t.shape);
        expect(Buffer.from(m.weights.get(name)!.data.buffer).equals(Buffer.from(want.buffer)), name).toBe(true);
      }
      expect(info.tensors.filter((t) => t.dims.length === 1).every((t) => t.type === 'F32')).toBe(true);
      expect(m.tokenizerConfig.chat_template).toContain('<|im_start|>');
    });
  }

  for (const arch of ['llama', 'qwen2', 'qwen3'] as const) {
    it(`${arch}: llama.cpp computes the model the HF weights define (names, q/k layout, rope, norms, biases)`, async () => {
      const config = tinyConfig({ architecture: arch, overrides: { hiddenSize: 256, numHeads: 4, numKvHeads: 2, headDim: 64, intermediateSize: 512, numLayers: 2, ropeTheta: 500000, tieWordEmbeddings: arch === 'qwen2' } }, tokSize);
      const weights = syntheticWeights(config, 9);
      const p = join(dir, `ref-${arch}.gguf`);
      writeGgufModel(p, { config, type: 'F32', weights });
      const ids = Array.from({ length: 24 }, (_, i) => (i * 131 + 7) % (config.vocabSize - 4));
      const ours = referenceLogits(config, weights, ids);
      const theirs = await withLlamaCppModel(p, (m) => m.logits(ids), { kvCacheType: 'F32', flashAttention: false });
      let maxDiff = 0, sumSq = 0, n = 0;
      for (let t = 0; t < ids.length; t++) for (let v = 0; v < config.vocabSize; v++) {
        maxDiff = Math.max(maxDiff, Math.abs(ours[t][v] - theirs[t][v]));
        sumSq += ours[t][v] ** 2; n++;
      }
      // float32 (llama.cpp, with an f32 KV cache) against float64 (reference) arithmetic: ~1e-5 of the
      // logits' scale; a misplaced row, a wrong rope layout or a missing bias moves them by order 1.
      expect(maxDiff / Math.sqrt(sumSq / n)).toBeLessThan(1e-4);
    }, 120_000);
  }

  it('the same seed writes the same bytes; another seed other weights', () => {
    const config = tinyConfig({ overrides: { hiddenSize: 256, numHeads: 4, numKvHeads: 2, headDim: 64, intermediateSize: 256, numLayers: 1 } }, tokSize);
    const [a, b, c] = ['a', 'b', 'c'].map((n) => join(dir, `seed-${n}.gguf`));
    writeGgufModel(a, { config, type: 'Q4_0', seed: 5 });
    writeGgufModel(b, { config, type: 'Q4_0', seed: 5 });
    writeGgufModel(c, { config, type: 'Q4_0', seed: 6 });
    expect(readFileSync(a).equals(readFileSync(b))).toBe(true);
    expect(readFileSync(a).equals(readFileSync(c))).toBe(false);
  });

  it('tokenizer metadata: llama.cpp tokenizes like Hearth, special tokens included; padding tokens are unused', async () => {
    const config = tinyConfig({ overrides: { hiddenSize: 256, numHeads: 4, numKvHeads: 2, headDim: 64, intermediateSize: 256, numLayers: 1, vocabSize: 1200 } }, tokSize);
    const p = join(dir, 'tok.gguf');
    writeGgufModel(p, { config, type: 'F32' });
    const m = readGgufModel(p);
    const hearth = new Tokenizer({ tokenizerJson: m.tokenizerJson, tokenizerConfig: m.tokenizerConfig });
    // "[PAD1100]" is the text of an unused padding token: neither engine may produce that token from text.
    const texts = ['The lamp on the hill.', "It's 12345 o'clock!\n\n  ünïcødé 🎉", '<|im_start|>user\nhi<|im_end|>\n', 'x[PAD1100]'];
    await withLlamaCppModel(p, async (llama) => {
      expect(llama.vocabSize).toBe(1200);
      for (const text of texts) {
        const ours = await hearth.encode(text);
        expect(ours[0]).toBe(config.bosTokenId); // add_bos_token
        expect(llama.tokenize(text), text).toEqual(ours.slice(1));
        expect(ours).not.toContain(1100);
      }
    });
  });

  it("a real-size vocabulary (Qwen's 151,936 tokens) gives a working tokenizer", async () => {
    // Regression: the tokenizer sized its byte table with Math.max(...ids), which overflows the call stack
    // past ~120k arguments, so every Llama 3 / Qwen GGUF failed at import with "unusable tokenizer".
    const config = tinyConfig({ overrides: { hiddenSize: 32, numHeads: 2, numKvHeads: 1, headDim: 16, intermediateSize: 32, numLayers: 1, vocabSize: 151_936 } }, tokSize);
    const p = join(dir, 'big-vocab.gguf');
    writeGgufModel(p, { config, type: 'F16' });
    const m = readGgufModel(p);
    const hearth = new Tokenizer({ tokenizerJson: m.tokenizerJson, tokenizerConfig: m.tokenizerConfig });
    expect(hearth.vocabSize).toBe(151_936);
    const ids = await hearth.encode('The lamp on the hill.');
    expect(hearth.decode(ids.slice(1))).toBe('The lamp on the hill.');
  });

  it("Q4_K_M follows llama.cpp's recipe; K-quants fall back where a row is not a multiple of 256", () => {
    const n = 32, dims = [4096, 4096];
    expect(ggufTensorType('Q4_K_M', 'output.weight', [4096, 128256], n)).toBe('Q6_K');
    expect(ggufTensorType('Q4_K_M', 'token_embd.weight', [4096, 128256], n)).toBe('Q4_K');
    const vTypes = Array.from({ length: n }, (_, i) => ggufTensorType('Q4_K_M', `blk.${i}.attn_v.weight`, dims, n));
    // first and last eighth (layers 0–3, 28–31) and every third layer between (6, 9, …, 27) get Q6_K
    expect(vTypes.map((t, i) => (t === 'Q6_K' ? i : -1)).filter((i) => i >= 0)).toEqual([0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]);
    expect(ggufTensorType('Q4_K_M', 'blk.5.ffn_down.weight', [14336, 4096], n)).toBe('Q4_K');
    expect(ggufTensorType('Q4_K_M', 'blk.6.ffn_down.weight', [14336, 4096], n)).toBe('Q6_K');
    expect(ggufTensorType('Q4_K_M', 'blk.5.attn_q.weight', dims, n)).toBe('Q4_K');
    expect(ggufTensorType('Q4_K_M', 'blk.0.attn_norm.weight', [4096], n)).toBe('F32');
    // Qwen2.5-0.5B's 896-wide rows
    expect(ggufTensorType('Q4_K', 'blk.0.attn_q.weight', [896, 896], 24)).toBe('Q5_0');
    expect(ggufTensorType('Q5_K', 'blk.0.attn_q.weight', [896, 896], 24)).toBe('Q5_1');
    expect(ggufTensorType('Q6_K', 'blk.0.attn_q.weight', [896, 896], 24)).toBe('Q8_0');
    expect(ggufTensorType('Q4_K', 'blk.0.ffn_down.weight', [4864, 896], 24)).toBe('Q4_K');
  });

  it('named shapes have the dimensions of the real models', () => {
    expect(shapeConfig('8b', { layers: 4 })).toMatchObject({ hiddenSize: 4096, numLayers: 4, numHeads: 32, numKvHeads: 8, headDim: 128, intermediateSize: 14336, vocabSize: 128256, ropeTheta: 500000, tieWordEmbeddings: false });
    expect(shapeConfig('1b')).toMatchObject({ hiddenSize: 2048, numLayers: 16, numHeads: 32, numKvHeads: 8, intermediateSize: 8192, vocabSize: 32000 });
    expect(shapeConfig('qwen0.5b')).toMatchObject({ architecture: 'qwen2', hiddenSize: 896, numLayers: 24, numHeads: 14, numKvHeads: 2, headDim: 64, intermediateSize: 4864, vocabSize: 151936, tieWordEmbeddings: true, attentionBias: true });
    expect(shapeConfig('qwen0.5b', { architecture: 'qwen3' })).toMatchObject({ qkNorm: true, attentionBias: false });
  });
});
