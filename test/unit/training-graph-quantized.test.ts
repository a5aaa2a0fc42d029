// The graph engine over a base stored in ggml blocks (what a GGUF file hands it: frozenData repacks the blocks and
// the layer and head graphs dequantize them in-graph; the embedding's rows are dequantized in JS) against the same
// engine, and the TF.js engine, over the float values those blocks stand for (`t.f32()`, exactly the served
// weights). Per-token logprobs, entropies and every LoRA gradient within 1e-4 relative L2: both read the same
// values, so they differ by float32 summation order only (measured: graph vs graph bit-identical, graph vs TF.js
// ≤ 3e-6). A wrong dequantization moves weights by whole quantization steps and misses by O(0.1–1): swapping the
// nibbles in dequantizeBlocks or in the JS embedding rows fails Q4_0/Q4_1/Q4_K (logp ~0.23, gradients ~1.7),
// a zero point off by one fails every type, dropping the embedding's offsets fails Q4_1/Q4_K/Q5_1/Q5_K, a head
// chunk reading the first chunk's scales fails the two-chunk cases.
//
// Every ggml type with a MatMulNBits form, each its own layout in gguf-repack.ts: Q4_0 (4-bit, block 32, no
// offsets), Q4_1 / Q4_K (4-bit with offsets), Q5_0 / Q8_0 (8-bit, no offsets), Q5_1 / Q5_K (8-bit with offsets),
// Q6_K (8-bit, block 16). Every matrix is stored in blocks: the projections, the embedding and an untied LM head.
// Widths are multiples of 256 because frozenData only takes the block form when the row length is one.
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ModelConfig, Weights } from '../../src/runtime/model-config.js';
import type { SourceTensor, WeightSource } from '../../src/runtime/weight-source.js';
import { weightsSource } from '../../src/runtime/weight-source.js';
import { dequantize, GGML_TYPE, type GgmlTypeName } from '../../src/runtime/gguf-dequant.js';
import { quantize } from '../../src/runtime/gguf-quantize.js';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { buildMicroBatch, trainedPositions, type TrainSequence } from '../../worker/training/data.js';
import { frozenData } from '../../worker/training/graph/graph-engine.js';
import { GraphLoraModel } from '../../worker/training/graph/graph-model.js';
import { buildTrainingModel } from '../../worker/training/loop.js';
import { LoraAdapters } from '../../worker/training/lora.js';
import { weightedNll } from '../../worker/training/losses.js';
import { logprobsAt } from '../../worker/training/token-logprobs.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { randomIds, relL2, tinyConfig } from './training-helpers.js';

beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
}, 180_000);

// d 256, ffn 512 (down_proj's rows are 512 long), GQA 4/2 heads of 64, untied head, two layers.
const small: ModelConfig = tinyConfig({ vocabSize: 300, hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 64, tieWordEmbeddings: false });
// The LM head over two vocabulary chunks (frozenRows slices the blocks, scales and offsets of each), one layer.
const wideVocab: ModelConfig = { ...small, vocabSize: 16384 + 300, numLayers: 1 };
let config = small;

/** Float weights with some life in them: norms and matrices that are not all alike. */
function floatBase(seed: number): Weights {
  const weights = randomWeights(config, seed);
  for (const [name, w] of weights) {
    if (name.includes('norm')) w.data.forEach((_, i) => (w.data[i] = 1 + Math.cos(i) * 0.1));
    else w.data.forEach((v, i) => (w.data[i] = v * 3)); // std ~0.06: logits far enough from uniform to have shape
  }
  return weights;
}

/** The base with every 2-D tensor in `type`'s blocks, as openGguf hands it: f32() is the blocks dequantized. */
function quantizedSource(weights: Weights, type: number): WeightSource {
  const source: WeightSource = new Map();
  for (const [name, t] of weights) {
    if (t.shape.length !== 2) { source.set(name, { shape: t.shape, f32: () => t.data }); continue; }
    const bytes = quantize(type, t.data);
    const tensor: SourceTensor = { shape: t.shape, f32: () => dequantize(type, bytes, t.data.length), ggml: { type, bytes: () => bytes } };
    source.set(name, tensor);
  }
  return source;
}

/** The float32 values a source stands for: the reference the quantized source must train exactly like. */
function dequantizedWeights(source: WeightSource): Weights {
  return new Map([...source].map(([name, t]) => [name, { shape: t.shape, data: t.f32() }]));
}

function sequences(): TrainSequence[] {
  // Two rows of 40 with sequences packed end to end.
  return [41, 21, 21, 30].map((length, s) => {
    const ids = randomIds(length, config.vocabSize, s + 11);
    return { ids, lossMask: ids.map((_, i) => (i >= 4 ? 1 : 0)) };
  });
}

/** Logprobs, entropies and gradients of a weighted NLL (weights of both signs) for one micro-batch. */
function measure(kind: 'tfjs' | 'graph', base: { source: WeightSource } | { weights: Weights }) {
  const lora = LoraAdapters.create(config, { rank: 4, alpha: 8, dropout: 0, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] }, 5);
  lora.variables().forEach((v, i) => v.assign(tf.randomNormal(v.shape, 0, 0.05, 'float32', 9 + i)));
  const model = kind === 'graph'
    ? GraphLoraModel.build(config, 'source' in base ? base.source : weightsSource(base.weights), lora)
    : (() => {
      if (!('weights' in base)) throw new Error('the TF.js engine reads float weights');
      const m = buildTrainingModel({ config, weights: base.weights, baseModelName: 't', mode: 'lora', recompute: 'never' }, 5);
      m.lora!.dispose();
      m.lora = lora;
      return m;
    })();
  const seqs = sequences();
  const mb = buildMicroBatch(seqs, seqs.map((_, i) => i));
  const at = trainedPositions(mb);
  const w = Float32Array.from(at.index, (_, j) => ((j % 3) - 0.7) / at.index.length);
  let entropy = new Float32Array(0);
  const vars = lora.variables();
  const { value, grads } = tf.variableGrads(() => weightedNll(logprobsAt(model, mb, at, true, (e) => (entropy = Float32Array.from(e))), w), vars);
  const logp = tf.tidy(() => Float32Array.from(logprobsAt(model, mb, at, false).dataSync() as Float32Array));
  const out = { rows: mb.batch.rows, loss: value.dataSync()[0], logp, entropy, grads: vars.map((v) => ({ name: v.name, g: Float32Array.from(grads[v.name].dataSync() as Float32Array) })) };
  tf.dispose([value, ...Object.values(grads)]);
  model.dispose();
  return out;
}

function expectSame(got: ReturnType<typeof measure>, ref: ReturnType<typeof measure>, against: string): void {
  expect(ref.rows).toBeGreaterThan(1);
  expect(relL2(got.logp, ref.logp), `logprobs vs ${against}`).toBeLessThan(1e-4);
  expect(relL2(got.entropy, ref.entropy), `entropies vs ${against}`).toBeLessThan(1e-4);
  expect(Math.abs(got.loss - ref.loss) / Math.abs(ref.loss), `loss vs ${against}`).toBeLessThan(1e-4);
  expect(got.grads.length).toBe(config.numLayers * 7 * 2);
  ref.grads.forEach(({ g }, i) => {
    expect(relL2(got.grads[i].g, g), `gradient ${i} (${got.grads[i].name}) vs ${against}`).toBeLessThan(1e-4);
  });
}

const CASES: [GgmlTypeName, ModelConfig][] = [
  ...(['Q4_K', 'Q6_K', 'Q8_0', 'Q5_K', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1'] as const).map((t): [GgmlTypeName, ModelConfig] => [t, small]),
  ['Q4_K', wideVocab], // 4-bit, offsets, 8 blocks a row
  ['Q6_K', wideVocab], // 8-bit, block 16: 16 blocks a row
];

describe('graph engine over a ggml-block base vs the float values it stands for', () => {
  for (const [name, shape] of CASES) {
    it(`${name}${shape === wideVocab ? ', LM head over two vocabulary chunks' : ''}`, () => {
      config = shape;
      const weights = floatBase(3);
      const type = GGML_TYPE[name];
      const source = quantizedSource(weights, type);
      // Every matrix really takes the block path (embedding and LM head included), not the float fallback.
      for (const [n, t] of source) if (t.shape.length === 2) expect(frozenData(t).kind, n).toBe('nbits');
      const served = dequantizedWeights(source);
      // The quantization moved the weights (else the comparison would not tell a block path from a float one).
      expect(relL2(served.get('model.layers.0.mlp.up_proj.weight')!.data, weights.get('model.layers.0.mlp.up_proj.weight')!.data)).toBeGreaterThan(1e-3);
      const got = measure('graph', { source });
      expectSame(got, measure('graph', { weights: served }), 'the graph engine over the dequantized floats');
      expectSame(got, measure('tfjs', { weights: served }), 'the TF.js engine over the dequantized floats');
    }, 180_000);
  }
});
