// GGUF block-quantized weights served as stored: the repacked MatMulNBits / GatherBlockQuantized forms
// stand for exactly the values ggml's dequantization gives, and a graph built on them matches the
// reference forward pass run on those dequantized values.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ModelConfig, Weights } from '../../src/runtime/model-config.js';
import { dequantize, GGML_TYPE } from '../../src/runtime/gguf-dequant.js';
import { quantize } from '../../src/runtime/gguf-quantize.js';
import { dequantizeNBits, nbitsLayout, repackGgml } from '../../src/runtime/gguf-repack.js';
import { openGguf } from '../../src/runtime/gguf-model.js';
import { buildDecoderGraph, type AttentionKind } from '../../src/runtime/llama-graph.js';
import { createSession, ModelRunner } from '../../src/runtime/runner.js';
import { loadModel } from '../../src/runtime/load-model.js';
import { seededRandom } from '../../src/runtime/generate.js';
import { tinyConfig, randomWeights } from '../../src/synthetic-models/tiny-model.js';
import { referenceLogits } from './runtime-reference.js';
import { permuteQK, writeGguf, type GgufTensorSpec } from './runtime-gguf-writer.js';

const { Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, F32 } = GGML_TYPE;

describe('ggml blocks → MatMulNBits form', () => {
  for (const name of ['Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q8_0', 'Q4_K', 'Q5_K', 'Q6_K'] as const) {
    it(`${name}: the repacked form stands for ggml's dequantized values`, () => {
      const type = GGML_TYPE[name];
      const rand = seededRandom(type);
      const N = 3, K = 512;
      // Values with an offset, so formats with minimums have non-zero ones.
      const blocks = quantize(type, Float32Array.from({ length: N * K }, () => (rand() - 0.3) * 0.2));
      const expected = dequantize(type, blocks, N * K);
      const repacked = repackGgml(type, blocks, N, K);
      const got = dequantizeNBits(repacked, N, K);
      const layout = nbitsLayout(type)!;
      expect([repacked.bits, repacked.block]).toEqual([layout.bits, layout.block]);
      let worst = 0;
      for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(got[i] - expected[i]) / (Math.abs(expected[i]) + 1e-3));
      // Exact but for float32 rounding of (q − z)·s + offset against s·q − min.
      expect(worst).toBeLessThan(1e-5);
      expect(new Set(expected).size).toBeGreaterThan(16); // the data is not degenerate
    });
  }
  it('refuses float types and unknown types', () => {
    expect(nbitsLayout(F32)).toBeNull();
    expect(() => repackGgml(F32, new Uint8Array(8), 1, 2)).toThrow(/no MatMulNBits form/);
  });
});

// Hidden 256 so K-quant super-blocks (256) fit every projection; head_dim 64 for GroupQueryAttention.
const SHAPE = { hiddenSize: 256, numHeads: 4, numKvHeads: 2, headDim: 64, intermediateSize: 512, numLayers: 2, vocabSize: 300 };
const TOKENS = [5, 17, 42, 99, 3, 250, 7, 64];
const dir = mkdtempSync(join(tmpdir(), 'hearth-gguf-blocks-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A llama GGUF whose matrices are random blocks of the given types (per HF tensor suffix), norms f32.
 * Returns the path; the reference weights come from reading it back dequantized.
 */
function writeBlockModel(file: string, config: ModelConfig, typeOf: (hfName: string) => number): void {
  const rand = seededRandom(11);
  const f32 = randomWeights(config, 3, 0.2); // norms (and any f32 matrix)
  const ggufName = (name: string) => name
    .replace('model.embed_tokens.weight', 'token_embd.weight').replace('model.norm.weight', 'output_norm.weight').replace('lm_head.weight', 'output.weight')
    .replace(/^model\.layers\.(\d+)\./, 'blk.$1.').replace('input_layernorm', 'attn_norm').replace('post_attention_layernorm', 'ffn_norm')
    .replace('self_attn.q_proj', 'attn_q').replace('self_attn.k_proj', 'attn_k').replace('self_attn.v_proj', 'attn_v').replace('self_attn.o_proj', 'attn_output')
    .replace('mlp.gate_proj', 'ffn_gate').replace('mlp.up_proj', 'ffn_up').replace('mlp.down_proj', 'ffn_down');
  const tensors: GgufTensorSpec[] = [];
  for (const [name, t] of f32) {
    const type = t.shape.length === 2 ? typeOf(name) : F32;
    let data: Uint8Array;
    if (type === F32) {
      let values = t.data;
      if (name.endsWith('q_proj.weight')) values = permuteQK(values, t.shape[0], t.shape[1], config.numHeads);
      if (name.endsWith('k_proj.weight')) values = permuteQK(values, t.shape[0], t.shape[1], config.numKvHeads);
      data = new Uint8Array(values.buffer.slice(0));
    } else {
      // Gaussian-ish values with an offset (so minimums matter), quantized by our ggml quantizer.
      const std = name.includes('embed') || name.includes('lm_head') ? 0.6 : 0.15;
      const values = Float32Array.from({ length: t.shape[0] * t.shape[1] }, () => (rand() + rand() + rand() - 1.3) * std);
      data = quantize(type, name.endsWith('q_proj.weight') ? permuteQK(values, t.shape[0], t.shape[1], config.numHeads) : name.endsWith('k_proj.weight') ? permuteQK(values, t.shape[0], t.shape[1], config.numKvHeads) : values);
    }
    tensors.push({ name: ggufName(name), dims: [...t.shape].reverse(), type, data });
  }
  const tokens = Array.from({ length: config.vocabSize }, (_, i) => (i < 3 ? ['<unk>', '<s>', '</s>'][i] : `t${i}`));
  writeGguf(file, {
    'general.architecture': { type: 'string', value: 'llama' },
    'llama.context_length': { type: 'u32', value: 128 },
    'llama.embedding_length': { type: 'u32', value: config.hiddenSize },
    'llama.feed_forward_length': { type: 'u32', value: config.intermediateSize },
    'llama.block_count': { type: 'u32', value: config.numLayers },
    'llama.attention.head_count': { type: 'u32', value: config.numHeads },
    'llama.attention.head_count_kv': { type: 'u32', value: config.numKvHeads },
    'llama.attention.layer_norm_rms_epsilon': { type: 'f32', value: config.rmsNormEps },
    'llama.rope.freq_base': { type: 'f32', value: config.ropeTheta },
    'tokenizer.ggml.model': { type: 'string', value: 'llama' },
    'tokenizer.ggml.tokens': { type: 'array', item: 'string', value: tokens },
    'tokenizer.ggml.scores': { type: 'array', item: 'f32', value: tokens.map(() => 0) },
    'tokenizer.ggml.token_type': { type: 'array', item: 'i32', value: tokens.map((_, i) => (i < 3 ? 3 : 1)) },
    'tokenizer.ggml.bos_token_id': { type: 'u32', value: 1 },
    'tokenizer.ggml.eos_token_id': { type: 'u32', value: 2 },
  }, tensors);
}

async function storedLogits(file: string, attention: AttentionKind, nbitsAccuracy: 0 | 4 = 4): Promise<{ logits: Float32Array[]; reference: Float64Array[]; graphBytes: number }> {
  const { config, source } = openGguf(file);
  const weights: Weights = new Map([...source].map(([n, t]) => [n, { shape: t.shape, data: t.f32() }]));
  const graph = buildDecoderGraph(config, source, { attention, maxPositions: 64, nbitsAccuracy });
  const { session } = await createSession(graph, { intraOpThreads: 1 });
  const r = new ModelRunner(session, config, attention, 64, 'cpu');
  const [all] = await r.forward([{ tokens: TOKENS, kv: r.newSequence() }], { allLogits: true });
  await r.release();
  const V = config.vocabSize;
  const logits = TOKENS.map((_, i) => all.subarray(i * V, (i + 1) * V));
  return { logits, reference: referenceLogits(config, weights, TOKENS), graphBytes: graph.length };
}

/** Worst |Δ| over positions relative to the reference's largest logit; and how often the argmax agrees. */
function compare(logits: Float32Array[], reference: Float64Array[]): { rel: number; argmaxAgree: number } {
  let rel = 0, agree = 0;
  const argmax = (a: ArrayLike<number>) => { let b = 0; for (let i = 1; i < a.length; i++) if (a[i] > a[b]) b = i; return b; };
  for (let p = 0; p < logits.length; p++) {
    const scale = Math.max(...reference[p].map(Math.abs));
    for (let i = 0; i < logits[p].length; i++) rel = Math.max(rel, Math.abs(logits[p][i] - reference[p][i]) / scale);
    if (argmax(logits[p]) === argmax(reference[p])) agree++;
  }
  return { rel, argmaxAgree: agree / logits.length };
}

describe('GGUF block weights served as stored', () => {
  const config = tinyConfig({ architecture: 'llama', overrides: { ...SHAPE, tieWordEmbeddings: false } }, 300);
  const cases: [string, (n: string) => number, boolean][] = [
    ['Q4_0', () => Q4_0, false],
    ['Q4_1 (offsets for the minimums)', () => Q4_1, false],
    ['Q5_0 (8-bit)', () => Q5_0, false],
    ['Q5_1 (8-bit with offsets)', () => Q5_1, false],
    ['Q5_K (8-bit with offsets)', () => Q5_K, false],
    ['Q8_0', () => Q8_0, false],
    ['Q4_K (offsets for the minimums)', () => Q4_K, false],
    ['Q6_K (8-bit, blocks of 16)', () => Q6_K, false],
    // llama.cpp's Q4_K_M mixes types inside the fused q|k|v and gate|up projections.
    ['Q4_K_M-style mix: v, down and the head in Q6_K, the rest Q4_K', (n) => (/v_proj|down_proj|lm_head/.test(n) ? Q6_K : Q4_K), false],
    ['Q4_K with tied embeddings (one copy of the blocks for the gather and the head)', () => Q4_K, true],
    ['Q6_K with tied embeddings (8-bit gather in blocks of 16)', () => Q6_K, true],
  ];
  for (const [label, typeOf, tied] of cases) {
    it(`${label}: logits match the reference forward on the dequantized weights`, async () => {
      const c = { ...config, tieWordEmbeddings: tied };
      const file = join(dir, `${label.replace(/\W+/g, '_')}.gguf`);
      writeBlockModel(file, c, (n) => (tied && n === 'lm_head.weight' ? F32 : typeOf(n)));
      // With float32 activations (accuracy_level 0) the blocks are exactly the dequantized weights.
      const exact = await storedLogits(file, 'gqa', 0);
      expect(compare(exact.logits, exact.reference).rel).toBeLessThan(1e-4);
      // As served (accuracy_level 4), activations are rounded to int8 per block, as llama.cpp's own quantized
      // dot products do: random weights give heavy-tailed activations, so a few % of the largest logit.
      const served = compare((await storedLogits(file, 'gqa')).logits, exact.reference);
      expect(served.rel).toBeLessThan(0.1);
      expect(served.argmaxAgree).toBeGreaterThanOrEqual(6 / 8);
    });
  }

  it('the graph holds the blocks, not float32 copies, and loads through external data with the same logits', async () => {
    const file = join(dir, 'sizes.gguf');
    writeBlockModel(file, config, () => Q4_0);
    const { graphBytes, logits } = await storedLogits(file, 'gqa');
    const f32Graph = buildDecoderGraph(openGguf(file).config, openGguf(file).source, { attention: 'gqa', maxPositions: 64, weightType: 'f32' });
    // 4-bit blocks of 32 with a float scale: 5 bits a weight against 32.
    expect(graphBytes).toBeLessThan(f32Graph.length / 4);

    // The same file as a store folder, loaded with its graph's weights in a side file (and cached).
    const { importModel } = await import('../../src/models/model-store.js');
    await importModel(join(dir, 'home'), file, { id: 'test/q4-0' });
    const first = await loadModel('test/q4-0', { home: join(dir, 'home'), attention: 'gqa', maxContext: 64 });
    const [row] = await first.runner.forward([{ tokens: TOKENS, kv: first.runner.newSequence() }]);
    expect(first.graphBuilt).toBe(true);
    const second = await loadModel('test/q4-0', { home: join(dir, 'home'), attention: 'gqa', maxContext: 64 });
    const [again] = await second.runner.forward([{ tokens: TOKENS, kv: second.runner.newSequence() }]);
    expect(second.graphBuilt).toBe(false); // the cached build was reused
    expect(Array.from(again)).toEqual(Array.from(row));
    expect(compare([row], [Float64Array.from(logits[TOKENS.length - 1])]).rel).toBeLessThan(1e-5);
    await first.runner.release();
    await second.runner.release();

    // LoRA-capable graph over the same blocks (what inference workers load): base rows give the same logits.
    const withLora = await loadModel('test/q4-0', { home: join(dir, 'home'), attention: 'gqa', maxContext: 64, lora: true });
    const [loraBase] = await withLora.runner.forward([{ tokens: TOKENS, kv: withLora.runner.newSequence() }]);
    expect(compare([loraBase], [Float64Array.from(row)]).rel).toBeLessThan(1e-5);
    await withLora.runner.release();
  });
});
