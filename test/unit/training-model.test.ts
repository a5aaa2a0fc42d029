// The TF.js Llama twin: gradients by finite differences, LoRA identity at B=0, packing.
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { buildMicroBatch, type TrainSequence } from '../../worker/training/data.js';
import { LoraAdapters, DEFAULT_LORA_CONFIG } from '../../worker/training/lora.js';
import { tokenLogprobs, weightedNll } from '../../worker/training/losses.js';
import { LlamaModel, type TokenBatch } from '../../worker/training/model.js';
import { ropeInverseFrequencies } from '../../worker/training/rope.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { randomIds, tinyConfig } from './training-helpers.js';

const small = tinyConfig({ vocabSize: 64, hiddenSize: 16, intermediateSize: 24, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 4 });

function seqs(count: number, length: number, vocab: number): TrainSequence[] {
  return Array.from({ length: count }, (_, s) => {
    const ids = randomIds(length, vocab, s + 11);
    return { ids, lossMask: ids.map(() => 1) };
  });
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

describe('LlamaModel (TF.js)', () => {
  beforeAll(async () => {
    await initTrainingBackend({ log: () => {} });
  });

  it('analytic gradients match central finite differences', () => {
    // Larger-than-usual weights make the function far from linear, so a wrong gradient shows.
    const weights = randomWeights(small, 3);
    for (const [name, t] of weights) if (!name.includes('norm')) t.data.forEach((v, i) => (t.data[i] = v * 10));
    const model = LlamaModel.fromWeights(small, weights, { trainable: true });
    const mb = buildMicroBatch(seqs(2, 6, small.vocabSize), [0, 1]);
    const w = new Float32Array(mb.numTokens).fill(1 / mb.numTokens);
    const loss = () => weightedNll(tokenLogprobs(model.logits(model.hidden(mb.batch)), mb.targets), w);
    const { grads } = tf.variableGrads(loss, model.trainableVariables());
    const names = [
      'model.embed_tokens.weight',
      'model.layers.0.self_attn.q_proj.weight',
      'model.layers.0.self_attn.k_proj.weight',
      'model.layers.1.self_attn.v_proj.weight',
      'model.layers.0.self_attn.o_proj.weight',
      'model.layers.0.mlp.gate_proj.weight',
      'model.layers.1.mlp.down_proj.weight',
      'model.layers.0.input_layernorm.weight',
      'model.norm.weight',
    ];
    let checked = 0;
    for (const name of names) {
      const v = model.params.get(name)!;
      const analytic = grads[v.name].dataSync();
      const base = v.dataSync().slice() as Float32Array;
      for (const idx of [0, 5, 13]) {
        const eps = 1e-2;
        const at = (delta: number) => {
          const moved = base.slice();
          moved[idx] += delta;
          v.assign(tf.tensor(moved, v.shape));
          return tf.tidy(() => loss().dataSync()[0]);
        };
        const numeric = (at(eps) - at(-eps)) / (2 * eps);
        v.assign(tf.tensor(base, v.shape));
        expect(Math.abs(numeric - analytic[idx]), `${name}[${idx}]: numeric ${numeric} analytic ${analytic[idx]}`).toBeLessThan(2e-3 + 0.03 * Math.abs(numeric));
        checked++;
      }
    }
    expect(checked).toBe(27);
    tf.dispose(Object.values(grads));
    model.dispose();
  });

  it('LoRA adapter gradients match central finite differences', () => {
    const weights = randomWeights(small, 3);
    for (const [name, t] of weights) if (!name.includes('norm')) t.data.forEach((v, i) => (t.data[i] = v * 10));
    const model = LlamaModel.fromWeights(small, weights, { trainable: false });
    const lora = LoraAdapters.create(small, { ...DEFAULT_LORA_CONFIG, rank: 2 }, 1);
    for (const b of lora.bT.values()) b.assign(tf.randomNormal(b.shape, 0, 0.5, 'float32', 3));
    model.lora = lora;
    const mb = buildMicroBatch(seqs(2, 6, small.vocabSize), [0, 1]);
    const w = new Float32Array(mb.numTokens).fill(1 / mb.numTokens);
    const loss = () => weightedNll(tokenLogprobs(model.logits(model.hidden(mb.batch)), mb.targets), w);
    const vars = model.trainableVariables();
    expect(vars).toHaveLength(2 * 7 * small.numLayers); // the base is frozen
    const { grads } = tf.variableGrads(loss, vars);
    for (const v of [lora.aT.get('model.layers.0.self_attn.q_proj')!, lora.bT.get('model.layers.1.mlp.down_proj')!, lora.aT.get('model.layers.0.self_attn.v_proj')!]) {
      const analytic = grads[v.name].dataSync();
      const base = v.dataSync().slice() as Float32Array;
      for (const idx of [0, 3]) {
        const at = (delta: number) => {
          const moved = base.slice();
          moved[idx] += delta;
          v.assign(tf.tensor(moved, v.shape));
          return tf.tidy(() => loss().dataSync()[0]);
        };
        const numeric = (at(1e-3) - at(-1e-3)) / 2e-3;
        v.assign(tf.tensor(base, v.shape));
        expect(Math.abs(numeric - analytic[idx])).toBeLessThan(5e-3 + 0.02 * Math.abs(numeric));
      }
    }
    tf.dispose(Object.values(grads));
    model.dispose();
  });

  it('LoRA with B = 0 gives exactly the base logits, and nonzero B changes them', () => {
    const cfg = tinyConfig();
    const model = LlamaModel.fromWeights(cfg, randomWeights(cfg, 1), { trainable: false });
    const mb = buildMicroBatch(seqs(2, 20, cfg.vocabSize), [0, 1]);
    const base = model.forward(mb.batch).dataSync();
    model.lora = LoraAdapters.create(cfg, DEFAULT_LORA_CONFIG, 5);
    expect(model.trainableVariables()).toHaveLength(2 * 7 * cfg.numLayers);
    const withZeroB = model.forward(mb.batch).dataSync();
    expect(maxAbsDiff(base, withZeroB)).toBe(0);
    const b = model.lora.bT.get('model.layers.0.self_attn.v_proj')!;
    b.assign(tf.fill(b.shape, 0.05));
    expect(maxAbsDiff(base, model.forward(mb.batch).dataSync())).toBeGreaterThan(1e-4);
    model.lora.enabled = false;
    expect(maxAbsDiff(base, model.forward(mb.batch).dataSync())).toBe(0);
    model.dispose();
  });

  it('a packed row gives the same logits as each sequence alone', () => {
    const model = LlamaModel.fromWeights(small, randomWeights(small, 2), { trainable: false });
    const sequences = [...seqs(1, 7, small.vocabSize), ...seqs(2, 5, small.vocabSize).slice(1)];
    const packed = model.forward(buildMicroBatch(sequences, [0, 1]).batch).dataSync();
    const alone = sequences.flatMap((s) => Array.from(model.forward(buildMicroBatch([s], [0]).batch).dataSync()));
    expect(packed.length).toBe(alone.length);
    expect(maxAbsDiff(packed, alone)).toBeLessThan(1e-5);
    model.dispose();
  });

  it('the causal mask hides future tokens', () => {
    const model = LlamaModel.fromWeights(small, randomWeights(small, 2), { trainable: false });
    const batch = (ids: number[]): TokenBatch => ({
      rows: 1,
      length: ids.length,
      inputIds: Int32Array.from(ids),
      positions: Int32Array.from(ids.map((_, i) => i)),
      segmentIds: new Int32Array(ids.length).fill(1),
    });
    const a = model.forward(batch([5, 6, 7, 8])).dataSync();
    const b = model.forward(batch([5, 6, 7, 40])).dataSync();
    const v = small.vocabSize;
    expect(maxAbsDiff(a.slice(0, 3 * v), b.slice(0, 3 * v))).toBe(0);
    expect(maxAbsDiff(a.slice(3 * v), b.slice(3 * v))).toBeGreaterThan(1e-6);
    model.dispose();
  });

  it('qwen2 (q/k/v bias) and qwen3 (q/k norm) variants run and use their extra weights', () => {
    for (const overrides of [{ architecture: 'qwen2' as const, attentionBias: true }, { architecture: 'qwen3' as const, qkNorm: true }]) {
      const cfg = { ...small, ...overrides };
      const weights = randomWeights(cfg, 4);
      const extra = overrides.attentionBias ? 'model.layers.0.self_attn.k_proj.bias' : 'model.layers.0.self_attn.q_norm.weight';
      expect(weights.has(extra)).toBe(true);
      const mb = buildMicroBatch(seqs(1, 6, cfg.vocabSize), [0]);
      const before = LlamaModel.fromWeights(cfg, weights, { trainable: false });
      const l0 = before.forward(mb.batch).dataSync();
      before.dispose();
      weights.get(extra)!.data.fill(overrides.attentionBias ? 0.5 : 2);
      const after = LlamaModel.fromWeights(cfg, weights, { trainable: false });
      expect(maxAbsDiff(l0, after.forward(mb.batch).dataSync())).toBeGreaterThan(1e-5);
      after.dispose();
    }
  });

  it('missing or mis-shaped weights fail with the tensor name', () => {
    const weights = randomWeights(small, 1);
    weights.delete('model.layers.1.mlp.up_proj.weight');
    expect(() => LlamaModel.fromWeights(small, weights, { trainable: false })).toThrow(/model\.layers\.1\.mlp\.up_proj\.weight is missing/);
  });

  it('llama3 rope scaling: long wavelengths divided by factor, short ones kept', () => {
    const cfg = tinyConfig({
      headDim: 64,
      ropeTheta: 500000,
      ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
    });
    const scaled = ropeInverseFrequencies(cfg);
    const plain = ropeInverseFrequencies({ ...cfg, ropeScaling: null });
    expect(scaled[0]).toBe(plain[0]); // wavelength 2*pi < 8192/4
    expect(scaled[31]).toBeCloseTo(plain[31] / 8, 12); // wavelength > 8192
    const mid = plain.findIndex((f) => (2 * Math.PI) / f > 2048 && (2 * Math.PI) / f < 8192);
    expect(mid).toBeGreaterThan(0);
    expect(scaled[mid]).toBeLessThan(plain[mid]);
    expect(scaled[mid]).toBeGreaterThan(plain[mid] / 8);
  });
});
