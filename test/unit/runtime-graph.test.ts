// The ONNX decoder graphs (GroupQueryAttention and standard-ops forms) against a naive JS forward pass,
// across architectures and features, for prefill, cached decode and mixed-length batches.
import { describe, expect, it } from 'vitest';
import type { Architecture, ModelConfig, Weights } from '../../src/runtime/model-config.js';
import { buildDecoderGraph, type AttentionKind } from '../../src/runtime/llama-graph.js';
import { createSession, ModelRunner, PACK_MAX_CHUNK_TOKENS } from '../../src/runtime/runner.js';
import type { SequenceKv } from '../../src/runtime/kv-cache.js';
import { randomWeights, tinyConfig } from '../../src/synthetic-models/tiny-model.js';
import { referenceLogits } from './runtime-reference.js';
import { logSumExp } from '../../worker/inference/sampler.js';
import { dequantizeQ4, q4BlockFor, quantizeQ4 } from '../../src/runtime/q4.js';

const SMALL = { hiddenSize: 64, numHeads: 4, numKvHeads: 2, headDim: 16, intermediateSize: 96, numLayers: 2, vocabSize: 300 };

function model(architecture: Architecture, overrides: Partial<ModelConfig> = {}, seed = 7): { config: ModelConfig; weights: Weights } {
  const config = tinyConfig({ architecture, overrides: { ...SMALL, ...overrides } }, 300);
  // std 0.2: large enough that attention patterns, norms and rotary all move the logits.
  return { config, weights: randomWeights(config, seed, 0.2) };
}

async function runner(m: { config: ModelConfig; weights: Weights }, attention: AttentionKind, maxPositions = 64): Promise<ModelRunner> {
  const { session } = await createSession(buildDecoderGraph(m.config, m.weights, { attention, maxPositions }), { intraOpThreads: 1 });
  return new ModelRunner(session, m.config, attention, maxPositions, 'cpu');
}

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

const TOKENS = [5, 17, 42, 99, 3, 250, 7, 64, 128, 11];

const VARIANTS: [string, Architecture, Partial<ModelConfig>][] = [
  ['llama tied', 'llama', {}],
  ['llama untied + llama3 rope scaling', 'llama', { tieWordEmbeddings: false, ropeTheta: 500000, ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 16 } }],
  ['qwen2 (qkv bias)', 'qwen2', {}],
  ['qwen3 (q/k norm)', 'qwen3', {}],
  ['llama head_dim 8 (GQA pads heads to 16) + qkv bias', 'qwen2', { headDim: 8, numHeads: 8, numKvHeads: 4 }],
];

describe('decoder graph vs reference forward', () => {
  for (const [label, arch, overrides] of VARIANTS) {
    for (const attention of ['gqa', 'standard', 'onnx23'] as const) {
      it(`${label}, ${attention}: prefill + cached decode match`, async () => {
        const m = model(arch, overrides);
        const ref = referenceLogits(m.config, m.weights, TOKENS);
        const r = await runner(m, attention);
        const kv = r.newSequence();
        const [prefill] = await r.forward([{ tokens: TOKENS.slice(0, 6), kv }], { allLogits: true });
        for (let i = 0; i < 6; i++) expect(maxDiff(prefill.subarray(i * 300, (i + 1) * 300), ref[i])).toBeLessThan(2e-3);
        for (let i = 6; i < TOKENS.length; i++) {
          const [step] = await r.forward([{ tokens: [TOKENS[i]], kv }]);
          expect(maxDiff(step, ref[i])).toBeLessThan(2e-3);
        }
        expect(kv.length).toBe(TOKENS.length);
        await r.release();
      });
    }
  }

  it('the reference is sensitive: a different seed moves logits a lot', () => {
    const a = referenceLogits(model('llama').config, model('llama').weights, TOKENS.slice(0, 3));
    const b = referenceLogits(model('llama', {}, 8).config, model('llama', {}, 8).weights, TOKENS.slice(0, 3));
    expect(maxDiff(a[2], b[2])).toBeGreaterThan(0.5);
  });

  for (const attention of ['gqa', 'standard', 'onnx23'] as const) {
    it(`${attention}: a mixed-length batch equals running each sequence alone`, async () => {
      const m = model('llama');
      const r = await runner(m, attention);
      const prompts = [[5, 17, 42], [99, 3, 250, 7, 64, 128], [11]];
      const kvs = prompts.map(() => r.newSequence());
      const calls = r.timing.calls;
      const first = await r.forward(prompts.map((tokens, i) => ({ tokens, kv: kvs[i] })));
      // gqa and standard graphs run the rows packed in one run; onnx23 pads prompt chunks together but
      // keeps the one-token row out of them (it would be padded to 6 positions).
      expect(r.timing.calls - calls).toBe(attention === 'onnx23' ? 2 : 1);
      const next = [[8], [9], [10]];
      const second = await r.forward(next.map((tokens, i) => ({ tokens, kv: kvs[i] })), { allLogits: true });
      for (let i = 0; i < prompts.length; i++) {
        const ref = referenceLogits(m.config, m.weights, [...prompts[i], ...next[i]]);
        expect(maxDiff(first[i], ref[prompts[i].length - 1])).toBeLessThan(2e-3);
        expect(maxDiff(second[i], ref[prompts[i].length])).toBeLessThan(2e-3);
        expect(kvs[i].length).toBe(prompts[i].length + 1);
      }
      // Batched prefill with different new-token counts and all logits.
      const kv2 = [r.newSequence(), r.newSequence()];
      const both = await r.forward([{ tokens: [1, 2, 3, 4], kv: kv2[0] }, { tokens: [5, 6], kv: kv2[1] }], { allLogits: true });
      const ref0 = referenceLogits(m.config, m.weights, [1, 2, 3, 4]);
      const ref1 = referenceLogits(m.config, m.weights, [5, 6]);
      expect(both[0].length).toBe(4 * 300);
      expect(both[1].length).toBe(2 * 300);
      expect(maxDiff(both[0].subarray(3 * 300), ref0[3])).toBeLessThan(2e-3);
      expect(maxDiff(both[1].subarray(0, 300), ref1[0])).toBeLessThan(2e-3);
      // Multi-token chunks on top of cached context, batched (chunked prefill of two prompts).
      const more = await r.forward([{ tokens: [7, 8, 9], kv: kv2[0] }, { tokens: [10, 11, 12], kv: kv2[1] }, { tokens: [13], kv: kvs[2] }]);
      expect(maxDiff(more[0], referenceLogits(m.config, m.weights, [1, 2, 3, 4, 7, 8, 9]).at(-1)!)).toBeLessThan(2e-3);
      expect(maxDiff(more[1], referenceLogits(m.config, m.weights, [5, 6, 10, 11, 12]).at(-1)!)).toBeLessThan(2e-3);
      expect(maxDiff(more[2], referenceLogits(m.config, m.weights, [...prompts[2], ...next[2], 13]).at(-1)!)).toBeLessThan(2e-3);
      // The graph's log Σ exp of each row, which the sampler uses for logprobs, is that of the returned logits.
      const rows = await r.forwardRows([{ tokens: [14], kv: kv2[0] }, { tokens: [15, 16], kv: r.newSequence() }]);
      for (const row of rows) expect(row.logSumExp).toBeCloseTo(logSumExp(row.logits), 4);
      expect(rows[0].logSumExp).not.toBeCloseTo(rows[1].logSumExp, 2);
      await r.release();
    });
  }

  // Decode steps over rows × positions ≥ IN_PLACE_DECODE_MIN take the in-place decode form; smaller ones
  // (every test above) take GroupQueryAttention. Both must give the reference logits.
  for (const [label, arch] of [['llama', 'llama'], ['qwen2 (qkv bias)', 'qwen2'], ['qwen3 (q/k norm)', 'qwen3']] as const) {
    it(`gqa, ${label}: batched decode steps over long enough caches read the cache in place`, async () => {
      const m = model(arch);
      const r = await runner(m, 'gqa', 160);
      const prompts = Array.from({ length: 8 }, (_, b) => Array.from({ length: 60 + b }, (_, i) => (i * 37 + b * 11 + 5) % 300));
      const kvs = prompts.map(() => r.newSequence());
      for (const [b, p] of prompts.entries()) await r.forward([{ tokens: p, kv: kvs[b] }]);
      const before = r.timing.inPlaceDecodeCalls;
      let out: Float32Array[] = [];
      for (let step = 0; step < 3; step++) {
        const next = prompts.map((_, b) => (step * 13 + b * 7) % 300);
        out = await r.forward(next.map((t, b) => ({ tokens: [t], kv: kvs[b] })));
        prompts.forEach((p, b) => p.push(next[b]));
      }
      expect(r.timing.inPlaceDecodeCalls - before).toBe(3);
      for (const b of [0, 3, 7]) expect(maxDiff(out[b], referenceLogits(m.config, m.weights, prompts[b]).at(-1)!)).toBeLessThan(2e-3);
      // One row over a short cache stays with GroupQueryAttention.
      await r.forward([{ tokens: [1], kv: r.newSequence() }]);
      expect(r.timing.inPlaceDecodeCalls - before).toBe(3);
      await r.release();
    });
  }

  // Mixed steps: decoding rows, a prompt chunk on a cached prefix and a new prompt in one packed run.
  for (const [label, arch, attention] of [['llama', 'llama', 'gqa'], ['qwen2 (qkv bias)', 'qwen2', 'gqa'], ['qwen3 (q/k norm)', 'qwen3', 'gqa'], ['llama', 'llama', 'standard']] as const) {
    it(`${attention}, ${label}: decoding rows and prompt chunks of different lengths run packed in one run and match the reference`, async () => {
      const m = model(arch);
      const r = await runner(m, attention, 160);
      const seqs = Array.from({ length: 4 }, (_, b) => Array.from({ length: 20 + 3 * b }, (_, i) => (i * 37 + b * 11 + 5) % 300));
      const kvs = seqs.map(() => r.newSequence());
      for (const [b, p] of seqs.entries()) await r.forward([{ tokens: p, kv: kvs[b] }]);
      await r.forward(seqs.map((p, b) => ({ tokens: [p.at(-1)!], kv: kvs[b] }))); // now rows of one batch
      seqs.forEach((p) => p.push(p.at(-1)!));
      const fresh = [7, 8, 9, 10, 11];
      const kvFresh = r.newSequence();
      for (let step = 0; step < 3; step++) {
        // rows 0 and 2 decode, row 1 takes a 6-token chunk, row 3 a 2-token chunk, and a new prompt arrives (step 0) or continues.
        const adds = [[1 + step], [40, 41, 42, 43, 44, step], [3 + step], [50 + step, 60], step === 0 ? fresh : [12 + step]];
        const calls = r.timing.calls, packed = r.timing.packedCalls;
        const out = await r.forward([...kvs, kvFresh].map((kv, b) => ({ tokens: adds[b], kv })));
        expect([r.timing.calls - calls, r.timing.packedCalls - packed]).toEqual([1, 1]);
        const all = [...seqs, step === 0 ? [] : fresh];
        adds.forEach((a, b) => all[b].push(...a));
        for (let b = 0; b < 5; b++) {
          const full = b < 4 ? seqs[b] : fresh;
          expect(maxDiff(out[b], referenceLogits(m.config, m.weights, full).at(-1)!)).toBeLessThan(2e-3);
          expect((b < 4 ? kvs[b] : kvFresh).length).toBe(full.length);
        }
      }
      // Decoding on afterwards from the packed caches (in the batch form again).
      const out = await r.forward([...kvs, kvFresh].map((kv) => ({ tokens: [9], kv })));
      [...seqs, fresh].forEach((p, b) => expect(maxDiff(out[b], referenceLogits(m.config, m.weights, [...p, 9]).at(-1)!)).toBeLessThan(2e-3));
      // Past PACK_MAX_CHUNK_TOKENS prompt tokens the rows run apart again (packing would cost more).
      const packedBefore = r.timing.packedCalls;
      const bigPrompt = Array.from({ length: PACK_MAX_CHUNK_TOKENS + 8 }, (_, i) => (i * 13 + 1) % 300);
      const apart = await r.forward([...kvs.map((kv) => ({ tokens: [4], kv })), { tokens: bigPrompt, kv: r.newSequence() }]);
      expect(r.timing.packedCalls - packedBefore).toBe(0);
      expect(maxDiff(apart[4], referenceLogits(m.config, m.weights, bigPrompt).at(-1)!)).toBeLessThan(2e-3);
      await r.release();
    });
  }

  it('a mixed step sizes the batch rows by what each row holds after it: a short new prompt does not resize long decoding rows', async () => {
    const m = model('llama');
    const r = await runner(m, 'gqa', 160);
    const seqs = [0, 1].map((b) => Array.from({ length: 40 + b }, (_, i) => (i * 17 + b * 5 + 3) % 300));
    const kvs = seqs.map(() => r.newSequence() as SequenceKv);
    for (const [b, p] of seqs.entries()) await r.forward([{ tokens: p, kv: kvs[b] }]);
    for (let step = 0; step < 12; step++) {
      await r.forward(kvs.map((kv, b) => ({ tokens: [(step * 3 + b) % 300], kv })));
      seqs.forEach((p, b) => p.push((step * 3 + b) % 300));
    }
    const batch = kvs[0].batch!, P = batch.P;
    expect(P - kvs[1].length).toBeLessThan(PACK_MAX_CHUNK_TOKENS); // less room than a chunk: the old sizing resized here
    const chunk = Array.from({ length: PACK_MAX_CHUNK_TOKENS - 2 }, (_, i) => (i * 29 + 1) % 300);
    const kvNew = r.newSequence() as SequenceKv;
    const packed = r.timing.packedCalls;
    const out = await r.forward([...kvs.map((kv) => ({ tokens: [7], kv })), { tokens: chunk, kv: kvNew }]);
    expect(r.timing.packedCalls - packed).toBe(1);
    expect(kvNew.batch).toBe(batch);
    expect(batch.P).toBe(P);
    seqs.forEach((p) => p.push(7));
    [...seqs, chunk].forEach((p, b) => expect(maxDiff(out[b], referenceLogits(m.config, m.weights, p).at(-1)!)).toBeLessThan(2e-3));
    await r.release();
  });

  it('gqa: caches grow past their initial capacity, alone and in a batch', async () => {
    const m = model('llama');
    const r = await runner(m, 'gqa', 100); // capacities round up past the rotary table: must still work
    const a = { tokens: [1, 2, 3], kv: r.newSequence() as SequenceKv }, b = { tokens: [4], kv: r.newSequence() as SequenceKv };
    await r.forward([{ tokens: a.tokens, kv: a.kv }]);
    await r.forward([{ tokens: b.tokens, kv: b.kv }]);
    let out: Float32Array[] = [];
    for (let i = 0; i < 70; i++) {
      if (i === 30) { const [solo] = await r.forward([{ tokens: [i % 50], kv: a.kv }]); a.tokens.push(i % 50); expect(solo.length).toBe(300); }
      out = await r.forward([{ tokens: [(i * 7) % 300], kv: a.kv }, { tokens: [(i * 11) % 300], kv: b.kv }]);
      a.tokens.push((i * 7) % 300);
      b.tokens.push((i * 11) % 300);
    }
    expect(a.kv.length).toBe(a.tokens.length);
    expect(a.kv.batch!.P).toBeGreaterThanOrEqual(a.kv.length); // the batch rows grew past their first 64 positions
    expect(maxDiff(out[0], referenceLogits(m.config, m.weights, a.tokens).at(-1)!)).toBeLessThan(2e-3);
    expect(maxDiff(out[1], referenceLogits(m.config, m.weights, b.tokens).at(-1)!)).toBeLessThan(2e-3);
    await r.release();
  });

  it('q4 (MatMulNBits) graph matches the reference on the 4-bit-rounded weights', async () => {
    const m = model('llama', { tieWordEmbeddings: false, hiddenSize: 64, intermediateSize: 128 });
    const rounded: Weights = new Map([...m.weights].map(([name, t]) => {
      const isMatrix = t.shape.length === 2 && name !== 'model.embed_tokens.weight';
      const [N, K] = t.shape;
      return [name, isMatrix ? { shape: t.shape, data: dequantizeQ4(quantizeQ4(t.data, N, K, q4BlockFor(K)!), N, K) } : t];
    }));
    const ref = referenceLogits(m.config, rounded, TOKENS.slice(0, 6));
    const exact = referenceLogits(m.config, m.weights, TOKENS.slice(0, 6));
    for (const attention of ['gqa', 'standard'] as const) {
      const { session } = await createSession(buildDecoderGraph(m.config, m.weights, { attention, maxPositions: 64, weightType: 'q4' }), { intraOpThreads: 1 });
      const r = new ModelRunner(session, m.config, attention, 64, 'cpu');
      const [logits] = await r.forward([{ tokens: TOKENS.slice(0, 6), kv: r.newSequence() }]);
      const scale = Math.max(...ref[5].map(Math.abs));
      // int8 activations (accuracy_level 4) add a little error on top of the 4-bit weights.
      expect(maxDiff(logits, ref[5]) / scale).toBeLessThan(0.03);
      expect(maxDiff(ref[5], exact[5]) / scale).toBeGreaterThan(0.001); // the rounding is real
      await r.release();
    }
    const q = quantizeQ4(Float32Array.from({ length: 64 }, (_, i) => i - 20), 2, 32, 32);
    expect(dequantizeQ4(q, 2, 32)[0]).toBeCloseTo(-20, 5); // the largest magnitude maps exactly to -8·d
    expect([q4BlockFor(768), q4BlockFor(64), q4BlockFor(96), q4BlockFor(8)]).toEqual([128, 64, 32, null]);
    expect(() => q4BlockFor(768, Number('x'))).toThrow(/power of two in 16\.\.256/); // a bad --q4-block never falls back to f32 silently
  });

  it('refuses a model with a missing tensor, naming it', () => {
    const m = model('llama');
    m.weights.delete('model.layers.1.mlp.up_proj.weight');
    expect(() => buildDecoderGraph(m.config, m.weights, { attention: 'standard', maxPositions: 8 })).toThrow(/missing tensor model\.layers\.1\.mlp\.up_proj\.weight/);
  });

  it('refuses GroupQueryAttention for q/k-norm models with head_dim not a multiple of 16', () => {
    const m = model('qwen3', { headDim: 8, numHeads: 8 });
    expect(() => buildDecoderGraph(m.config, m.weights, { attention: 'gqa', maxPositions: 8 })).toThrow(/head_dim % 16/);
  });

  for (const attention of ['gqa', 'standard', 'onnx23'] as const) {
    it(`${attention}: many batched decode steps (cache kept in the batch tensors), then a member continues alone`, async () => {
      const m = model('llama', { headDim: 8, numHeads: 8, numKvHeads: 4 });
      const r = await runner(m, attention);
      const seqs = [[5, 17], [99, 3, 250, 7], [11, 12, 13]].map((p) => ({ tokens: [...p], kv: r.newSequence() }));
      for (const s of seqs) await r.forward([{ tokens: s.tokens, kv: s.kv }]);
      let logits: Float32Array[] = [];
      for (let step = 0; step < 4; step++) {
        const next = seqs.map((s, b) => 20 + step * 3 + b);
        logits = await r.forward(seqs.map((s, b) => ({ tokens: [next[b]], kv: s.kv })));
        seqs.forEach((s, b) => s.tokens.push(next[b]));
      }
      seqs.forEach((s, b) => {
        const ref = referenceLogits(m.config, m.weights, s.tokens);
        expect(maxDiff(logits[b], ref[s.tokens.length - 1])).toBeLessThan(2e-3);
        expect(s.kv.length).toBe(s.tokens.length);
      });
      // Sequence 1 continues alone: its cache is copied out of the batch first.
      const [solo] = await r.forward([{ tokens: [77], kv: seqs[1].kv }]);
      const ref = referenceLogits(m.config, m.weights, [...seqs[1].tokens, 77]);
      expect(maxDiff(solo, ref[seqs[1].tokens.length])).toBeLessThan(2e-3);
      // The others, batched again (a new batch without sequence 1), still agree.
      const rest = await r.forward([{ tokens: [78], kv: seqs[0].kv }, { tokens: [79], kv: seqs[2].kv }]);
      expect(maxDiff(rest[0], referenceLogits(m.config, m.weights, [...seqs[0].tokens, 78]).at(-1)!)).toBeLessThan(2e-3);
      expect(maxDiff(rest[1], referenceLogits(m.config, m.weights, [...seqs[2].tokens, 79]).at(-1)!)).toBeLessThan(2e-3);
      await r.release();
    });

    it(`${attention}: sequences join and leave a batch between steps (rows move, a long row leaves, a disposed one drops)`, async () => {
      const m = model('llama', { headDim: 8, numHeads: 8, numKvHeads: 4 });
      const r = await runner(m, attention, 160);
      const seq = (prompt: number[]) => ({ tokens: [...prompt], kv: r.newSequence() });
      const a = seq([5, 17]), b = seq([99, 3, 250]), c = seq(Array.from({ length: 100 }, (_, i) => 1 + ((i * 37) % 290))), d = seq([11, 12]), e = seq([200]);
      for (const s of [a, b, c, d, e]) await r.forward([{ tokens: s.tokens, kv: s.kv }]);
      let next = 20;
      const step = async (members: (typeof a)[]) => {
        const toks = members.map(() => next++);
        const logits = await r.forward(members.map((s, i) => ({ tokens: [toks[i]], kv: s.kv })));
        members.forEach((s, i) => {
          s.tokens.push(toks[i]);
          expect(s.kv.length).toBe(s.tokens.length);
          expect(maxDiff(logits[i], referenceLogits(m.config, m.weights, s.tokens).at(-1)!)).toBeLessThan(2e-3);
        });
      };
      await step([a, b, c]);
      await step([a, b, c]);
      await step([b, c, d]); // a leaves (copied out), d joins
      await step([d, b]); // c, the long row, leaves: rows shrink; order differs from the rows'
      await step([e, d, b, a]); // a comes back, e is new: the rows grow past their first capacity
      d.kv.dispose(); // d's request is gone: its row drops without a copy
      await step([e, b, a]);
      await step([a]); // alone again
      await step([c, a]);
      await r.release();
    });
  }
});
