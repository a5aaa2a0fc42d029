// GGUF: container parsing, dequantization, HF name/layout mapping (incl. the q/k permutation),
// tokenizer construction from metadata, clear errors, and the real stories260K model.
import { describe, expect, it, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { sharedPath } from '../helpers/shared.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dequantQ4_0, dequantQ8_0 } from '../../src/runtime/gguf-dequant.js';
import { readGgufHeader } from '../../src/runtime/gguf-reader.js';
import { readGgufModel, unpermuteQK } from '../../src/runtime/gguf-model.js';
import { f32ToF16 } from '../../src/runtime/half.js';
import { Tokenizer } from '../../src/runtime/tokenizer.js';
import { buildTokenizerFromGguf } from '../../src/runtime/gguf-tokenizer.js';
import type { GgufValue } from '../../src/runtime/gguf-reader.js';
import { randomWeights, tinyConfig, tinyTokenizer } from '../../src/synthetic-models/tiny-model.js';
import { permuteQK, writeGguf, writeLlamaGguf } from './runtime-gguf-writer.js';

let dir: string;
beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'hearth-gguf-')); });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const half = (x: number) => [f32ToF16(x) & 0xff, f32ToF16(x) >> 8];

describe('dequantization', () => {
  it('Q8_0: scale × int8', () => {
    const block = Uint8Array.from([...half(0.5), ...Array.from({ length: 32 }, (_, i) => (i - 16) & 0xff)]);
    expect(Array.from(dequantQ8_0(block, 32))).toEqual(Array.from({ length: 32 }, (_, i) => (i - 16) * 0.5));
  });

  it('Q4_0: low nibbles are elements 0..15, high nibbles 16..31, zero point 8', () => {
    const qs = Array.from({ length: 16 }, (_, j) => (j & 0xf) | ((15 - j) << 4));
    const out = dequantQ4_0(Uint8Array.from([...half(2), ...qs]), 32);
    for (let j = 0; j < 16; j++) {
      expect(out[j]).toBe((j - 8) * 2);
      expect(out[j + 16]).toBe((15 - j - 8) * 2);
    }
  });

  // Q4_K, Q6_K and the other multi-level formats are checked against llama.cpp itself in gguf-quant.test.ts
  // (an independent reader of the same blocks), not against expectations derived from our own reading.
});

describe('GGUF reader', () => {
  it('rejects a file without the GGUF magic', () => {
    const p = join(dir, 'bad-magic.gguf');
    writeGguf(p, {}, [], { magic: 'GGUX' });
    expect(() => readGgufHeader(p)).toThrow(/bad GGUF header.*magic/);
  });

  it('rejects an unsupported version and a truncated file', () => {
    const p = join(dir, 'v9.gguf');
    writeGguf(p, {}, [], { version: 9 });
    expect(() => readGgufHeader(p)).toThrow(/unsupported GGUF version 9/);
    const t = join(dir, 'trunc.gguf');
    writeGguf(t, {}, [{ name: 'x', dims: [64], type: 0, data: new Uint8Array(16) }]);
    expect(() => readGgufHeader(t)).toThrow(/extends past the end/);
  });

  it('names an unsupported tensor type', () => {
    const p = join(dir, 'q2k.gguf');
    writeGguf(p, {}, [{ name: 'blk.0.attn_q.weight', dims: [256], type: 10, data: new Uint8Array(84), byteSize: 84 }]);
    expect(() => readGgufHeader(p)).toThrow(/unsupported GGUF tensor type Q2_K in tensor blk\.0\.attn_q\.weight/);
  });

  it('undoes the q/k row permutation exactly', () => {
    const data = Float32Array.from({ length: 16 * 3 }, (_, i) => i);
    expect(Array.from(unpermuteQK(permuteQK(data, 16, 3, 2), 16, 3, 2))).toEqual(Array.from(data));
    expect(Array.from(permuteQK(data, 16, 3, 2))).not.toEqual(Array.from(data));
  });
});

describe('GGUF → ModelConfig + Weights + tokenizer', () => {
  const tokens = ['<unk>', '<s>', '</s>', ...Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`), '▁', 'h', 'e', 'l', 'o', 'he', 'll', 'hell', 'hello', '▁hello'];
  const types = tokens.map((t, i) => (i === 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1));
  const scores = tokens.map((t, i) => (i < 259 ? 0 : -(i - 259)));
  // '▁hello' last but with the best merge score so it wins.
  scores[tokens.indexOf('▁hello')] = 10;

  it('maps names, restores HF q/k layout, and reads the SentencePiece vocabulary', async () => {
    const config = tinyConfig({ overrides: { vocabSize: tokens.length, hiddenSize: 32, numHeads: 4, numKvHeads: 2, headDim: 8, intermediateSize: 48, numLayers: 2, tieWordEmbeddings: false } }, tokens.length);
    const weights = randomWeights(config, 3, 0.2);
    const p = join(dir, 'llama.gguf');
    writeLlamaGguf(p, config, weights, tokens, scores, types);
    const m = readGgufModel(p);
    expect(m.config.architecture).toBe('llama');
    expect(m.config.numKvHeads).toBe(2);
    expect(m.config.tieWordEmbeddings).toBe(false);
    expect(m.config.bosTokenId).toBe(1);
    expect(m.config.eosTokenIds).toEqual([2]);
    for (const [name, t] of weights) {
      expect(m.weights.get(name)?.shape, name).toEqual(t.shape);
      expect(Array.from(m.weights.get(name)!.data), name).toEqual(Array.from(t.data));
    }
    const tok = new Tokenizer({ tokenizerJson: m.tokenizerJson, tokenizerConfig: m.tokenizerConfig });
    const ids = await tok.encode('hello hello');
    expect(ids.map((i) => tokens[i])).toEqual(['<s>', '▁hello', '▁hello']);
    // Byte fallback for characters outside the vocabulary, and a lossless decode.
    const ids2 = await tok.encode('hé');
    expect(ids2.map((i) => tokens[i])).toEqual(['<s>', '▁', 'h', '<0xC3>', '<0xA9>']);
    expect(tok.decode(ids2)).toBe('hé');
  });

  it('builds a byte-level BPE tokenizer (tokenizer.ggml.model = gpt2) that encodes like the original', async () => {
    const json = tinyTokenizer().json as { model: { vocab: Record<string, number>; merges: [string, string][] }; added_tokens: { id: number; content: string }[] };
    const tokens: string[] = [];
    for (const [t, id] of Object.entries(json.model.vocab)) tokens[id] = t;
    const special = new Set(json.added_tokens.map((a) => a.id));
    const md = new Map<string, GgufValue>([
      ['tokenizer.ggml.model', 'gpt2'], ['tokenizer.ggml.pre', 'default'], ['tokenizer.ggml.tokens', tokens],
      ['tokenizer.ggml.token_type', tokens.map((_, i) => (special.has(i) ? 3 : 1))],
      ['tokenizer.ggml.merges', json.model.merges.map(([a, b]) => `${a} ${b}`)],
      ['tokenizer.ggml.bos_token_id', tokens.indexOf('<s>')], ['tokenizer.ggml.eos_token_id', tokens.indexOf('</s>')],
      ['tokenizer.ggml.add_bos_token', true], ['tokenizer.chat_template', '{{ messages[0].content }}'],
    ]);
    const built = buildTokenizerFromGguf(md);
    expect(built.tokenizerConfig.chat_template).toBe('{{ messages[0].content }}');
    const a = new Tokenizer({ tokenizerJson: built.tokenizerJson, tokenizerConfig: built.tokenizerConfig });
    const b = new Tokenizer({ tokenizerJson: json as unknown as Record<string, unknown>, tokenizerConfig: { bos_token: '<s>' } });
    for (const text of ['The lamp on the hill.', "It's 12345 o'clock!\n\n  ünïcødé 🎉", '<|im_start|>user']) {
      expect(await a.encode(text)).toEqual(await b.encode(text));
      expect(a.decode(await a.encode(text), { skipSpecialTokens: false })).toBe('<s>' + text);
    }
  });

  for (const arch of ['qwen2', 'qwen3'] as const) {
    it(`${arch}: biases / q-k norms map to HF names, rows are not permuted`, () => {
      const config = tinyConfig({ architecture: arch, overrides: { vocabSize: tokens.length, hiddenSize: 64, numHeads: 4, numKvHeads: 2, headDim: 32, intermediateSize: 48, numLayers: 1, tieWordEmbeddings: true } }, tokens.length);
      const weights = randomWeights(config, 4, 0.2);
      const p = join(dir, `${arch}.gguf`);
      writeLlamaGguf(p, config, weights, tokens, scores, types, {}, arch);
      const m = readGgufModel(p);
      expect(m.config.architecture).toBe(arch);
      expect(m.config.attentionBias).toBe(arch === 'qwen2');
      expect(m.config.qkNorm).toBe(arch === 'qwen3');
      expect(m.config.headDim).toBe(32);
      expect(m.config.tieWordEmbeddings).toBe(true);
      expect([...m.weights.keys()].sort()).toEqual([...weights.keys()].sort());
      for (const [name, t] of weights) expect(Array.from(m.weights.get(name)!.data), name).toEqual(Array.from(t.data));
    });
  }

  it('refuses an unknown architecture, naming it', () => {
    const p = join(dir, 'phi.gguf');
    writeGguf(p, { 'general.architecture': { type: 'string', value: 'phi3' } }, []);
    expect(() => readGgufModel(p)).toThrow(/unsupported architecture "phi3"/);
  });
});

describe('stories260K (real model)', () => {
  const STORIES = sharedPath('models', 'stories260K', 'stories260K.gguf'); // fails naming the path when ../shared is missing
  it('greedy decoding from BOS + "Once upon a time" tells the Lily story', async () => {
    const { importModel } = await import('../../src/models/model-store.js');
    const { loadModel } = await import('../../src/runtime/load-model.js');
    const { generateText } = await import('../../src/runtime/generate.js');
    const home = mkdtempSync(join(tmpdir(), 'hearth-home-'));
    try {
      await importModel(home, STORIES, { id: 'karpathy/stories260K' });
      const model = await loadModel('karpathy/stories260K', { home });
      const r = await generateText(model, 'Once upon a time', { maxTokens: 40 });
      expect(r.promptIds).toEqual([1, 403, 407, 261, 378]);
      expect(r.text.startsWith(', there was a little girl named Lily.')).toBe(true);
      await model.runner.release();
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
