// ggml quantization formats: our quantizers round-trip through our dequantizers within each format's
// error bound, and llama.cpp (node-llama-cpp's CPU build, an independent reader of the same blocks)
// sees the same values our dequantizers produce.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dequantize, GGML_TYPE, GGML_TYPES, type GgmlTypeName } from '../../src/runtime/gguf-dequant.js';
import { quantize } from '../../src/runtime/gguf-quantize.js';
import { f16ToF32 } from '../../src/runtime/half.js';
import { seededRandom } from '../../src/runtime/generate.js';
import type { Weights } from '../../src/runtime/model-config.js';
import { syntheticWeights, writeGgufModel } from '../../src/synthetic-models/tiny-gguf.js';
import { tinyConfig, tinyTokenizer } from '../../src/synthetic-models/tiny-model.js';
import { withLlamaCppModel } from '../helpers/llama-cpp.js';

const ALL_TYPES = Object.keys(GGML_TYPE) as GgmlTypeName[];

/** Gaussian-ish test data with outliers, an all-zero block, an all-positive and an all-negative block. */
function testData(n: number, seed: number): Float32Array {
  const r = seededRandom(seed);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = (r() + r() + r() - 1.5) * 0.2 + (r() < 0.005 ? (r() - 0.5) * 8 : 0);
  x.fill(0, 256, 512);
  for (let i = 512; i < 768; i++) x[i] = Math.abs(x[i]) + 0.3;
  for (let i = 768; i < 1024; i++) x[i] = -Math.abs(x[i]) - 0.3;
  return x;
}

/**
 * The largest error each format allows for the values of one (sub-)block, from the block's values alone.
 * step = the (sub-)block's range over its number of levels; quantizers may widen the step by the rounding
 * of the stored f16/6-bit/8-bit scales (the "+ super" terms), never clip.
 */
function errorBound(type: GgmlTypeName, block: Float32Array, superBlock: Float32Array): number {
  const amax = Math.max(...block.map(Math.abs));
  const max = Math.max(...block), min = Math.min(...block);
  const halfUlp16 = (v: number) => Math.abs(v) * 2 ** -11 + 2 ** -25; // f16 rounding of a stored value
  const superStep = (levels: number, per: (b: Float32Array) => number, scaleLevels: number) => {
    let m = 0;
    for (let i = 0; i < superBlock.length; i += block.length) m = Math.max(m, per(superBlock.subarray(i, i + block.length)));
    return m / levels / scaleLevels;
  };
  const rangeWithZero = (b: Float32Array) => Math.max(...b, 0) - Math.min(...b, 0);
  switch (type) {
    case 'F32': return 0;
    case 'F16': return halfUlp16(amax);
    case 'BF16': return amax * 2 ** -8;
    case 'Q8_0': return (amax / 127) * (0.5 + 2 ** -10) + 1e-9;
    case 'Q4_0': return (amax / 8) * (1 + 2 ** -10) + 1e-9; // the sign opposite the largest value lacks level +8
    case 'Q5_0': return (amax / 16) * (1 + 2 ** -10) + 1e-9;
    case 'Q4_1': return ((max - min) / 15) * (0.5 + 2 ** -10) + halfUlp16(min);
    case 'Q5_1': return ((max - min) / 31) * (0.5 + 2 ** -10) + halfUlp16(min);
    // step ≤ range/levels + one 6-bit unit of the super-block step (+ one unit of the offset step)
    case 'Q4_K': return 0.5 * (rangeWithZero(block) / 15 + superStep(15, rangeWithZero, 63) * 1.01 + superStep(15, (b) => -Math.min(...b, 0), 63) * 1.01) + 1e-9;
    case 'Q5_K': return 0.5 * (rangeWithZero(block) / 31 + superStep(31, rangeWithZero, 63) * 1.01 + superStep(31, (b) => -Math.min(...b, 0), 63) * 1.01) + 1e-9;
    case 'Q6_K': return 0.5 * (amax / 31 + superStep(31, (b) => Math.max(...b.map(Math.abs)), 127) * 1.01) + 1e-9;
  }
}

const subBlock: Record<GgmlTypeName, number> = { F32: 1, F16: 1, BF16: 1, Q8_0: 32, Q4_0: 32, Q5_0: 32, Q4_1: 32, Q5_1: 32, Q4_K: 32, Q5_K: 32, Q6_K: 16 };

describe('quantize → dequantize round trip', () => {
  const n = 256 * 64;
  const x = testData(n, 7);
  for (const name of ALL_TYPES) {
    it(`${name}: every value within the format's error bound, block bytes as ggml sizes them`, () => {
      const type = GGML_TYPE[name];
      const info = GGML_TYPES[type];
      const bytes = quantize(type, x);
      expect(bytes.length).toBe((n / info.blockElems) * info.blockBytes);
      const y = dequantize(type, bytes, n);
      const sub = subBlock[name], sup = Math.max(info.blockElems, sub);
      let worst = 0;
      for (let s = 0; s < n; s += sub) {
        const block = x.subarray(s, s + sub);
        const superBlock = x.subarray(Math.floor(s / sup) * sup, Math.floor(s / sup) * sup + sup);
        const bound = errorBound(name, block, superBlock);
        for (let i = s; i < s + sub; i++) {
          const err = Math.abs(y[i] - x[i]);
          if (err > bound) expect.fail(`${name}: value ${i} = ${x[i]} came back as ${y[i]} (error ${err} > bound ${bound})`);
          worst = Math.max(worst, bound ? err / bound : 0);
        }
      }
      // The zero block comes back as zeros in every format.
      for (let i = 256; i < 512; i++) expect(y[i] === 0, `value ${i}`).toBe(true); // ±0
      // The bound is tight enough to mean something: some value uses a good part of it.
      if (name !== 'F32') expect(worst).toBeGreaterThan(0.3);
    });
  }

  it('F16 and BF16 round to nearest even, as ggml converts', () => {
    // 1 + 2^-11 is halfway between f16 1 and 1 + 2^-10: ties go to the even mantissa (1).
    const h = quantize(GGML_TYPE.F16, Float32Array.from([1 + 2 ** -11, 1 + 3 * 2 ** -11, 65520, -0]));
    const hv = new Uint16Array(h.buffer);
    expect(f16ToF32(hv[0])).toBe(1);
    expect(f16ToF32(hv[1])).toBe(1 + 2 ** -9);
    expect(f16ToF32(hv[2])).toBe(Infinity);
    expect(hv[3]).toBe(0x8000);
    const b = new Uint16Array(quantize(GGML_TYPE.BF16, Float32Array.from([1 + 2 ** -8, 1 + 3 * 2 ** -8, NaN])).buffer);
    expect(b[0]).toBe(0x3f80);
    expect(b[1]).toBe(0x3f82);
    expect(b[2] & 0x7f80).toBe(0x7f80);
    expect(b[2] & 0x7f).not.toBe(0);
  });

  it('refuses a length that is not a whole number of blocks, naming the type', () => {
    expect(() => quantize(GGML_TYPE.Q4_K, new Float32Array(128))).toThrow(/Q4_K.*block size 256/);
    expect(() => quantize(10, new Float32Array(256))).toThrow(/Q2_K/);
  });
});

// ---------------------------------------------------------------------------------------------------
// llama.cpp agreement. A small untied model (rows of 256 and 512 so every block size fits) is written
// by the product's GGUF writer; llama.cpp computes teacher-forced logits over a fixed token sequence.
//
// 1. Exact: token_embd.weight in type T (everything else F32) vs an all-F32 file whose token_embd holds our
//    dequantization of the same blocks. llama.cpp reads embedding rows with ggml_get_rows, which converts
//    the blocks with the type's own dequantizer and no other rounding, so every logit must match to float
//    rounding: any difference in how a single value is decoded shows (the negative control proves it).
// 2. Whole model in type T vs an F32 file of its dequantized weights. Here llama.cpp's matmuls round the
//    activations too (to the weight type's dot-product partner: Q8_0/Q8_1 blocks of 32 for Q4_0–Q8_0, Q8_K
//    super-blocks of 256 for the K-quants, f16 for F16, bf16 for BF16), which a dequantized F32 file does
//    not. 8-bit rounding of a block of activations errs by ≤ amax/254 per value, ≈ 0.3–1% of a dot product,
//    so logits (std ≈ 2 here) move by a few hundredths: measured 0.028–0.044 std for the 8-bit partners,
//    0.009 for bf16, 0.0012 for f16 (and exactly 0 for the embedding check). The tolerances are 8% of the
//    logits' std for 8-bit rounding, 3% for bf16, 0.5% for f16, while a wrongly decoded format moves logits
//    by about their whole std.
// ---------------------------------------------------------------------------------------------------

const config = tinyConfig({ overrides: { hiddenSize: 256, numHeads: 4, numKvHeads: 2, headDim: 64, intermediateSize: 512, numLayers: 2, tieWordEmbeddings: false } }, tinyTokenizer().size);
const weights = syntheticWeights(config, 11);
const sequence = Array.from({ length: 48 }, (_, i) => (i * 389 + 17) % (config.vocabSize - 4));

function dequantized(w: Weights, type: number, only?: string): Weights {
  const out: Weights = new Map();
  for (const [name, t] of w) {
    const convert = t.shape.length === 2 && (only === undefined || name === only);
    out.set(name, convert ? { shape: t.shape, data: dequantize(type, quantize(type, t.data), t.data.length) } : t);
  }
  return out;
}

async function logitsOf(path: string): Promise<Float32Array[]> {
  return withLlamaCppModel(path, (m) => m.logits(sequence));
}

function compare(a: Float32Array[], b: Float32Array[]) {
  let maxDiff = 0, sum = 0, sumSq = 0, count = 0, argmaxAgree = 0;
  for (let p = 0; p < a.length; p++) {
    let ia = 0, ib = 0;
    for (let v = 0; v < a[p].length; v++) {
      maxDiff = Math.max(maxDiff, Math.abs(a[p][v] - b[p][v]));
      sum += a[p][v]; sumSq += a[p][v] ** 2; count++;
      if (a[p][v] > a[p][ia]) ia = v;
      if (b[p][v] > b[p][ib]) ib = v;
    }
    if (ia === ib) argmaxAgree++;
  }
  const std = Math.sqrt(sumSq / count - (sum / count) ** 2);
  return { maxDiff, std, argmaxAgreement: argmaxAgree / a.length };
}

const WHOLE_MODEL_TOLERANCE: Record<GgmlTypeName, number> = {
  F32: 1e-4, F16: 0.005, BF16: 0.03, Q8_0: 0.08, Q4_0: 0.08, Q4_1: 0.08, Q5_0: 0.08, Q5_1: 0.08, Q4_K: 0.08, Q5_K: 0.08, Q6_K: 0.08,
};

describe('llama.cpp reads our blocks as our dequantizers do', () => {
  let dir: string;
  let f32Logits: Float32Array[];
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'hearth-gguf-quant-'));
    const p = join(dir, 'f32.gguf');
    writeGgufModel(p, { config, type: 'F32', weights });
    f32Logits = await logitsOf(p);
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the test model is decisive: one logit stands well above the rest at most positions', () => {
    let decisive = 0;
    for (const row of f32Logits) {
      const sorted = Array.from(row).sort((x, y) => y - x);
      if (sorted[0] - sorted[1] > 1) decisive++;
    }
    expect(decisive / f32Logits.length).toBeGreaterThan(0.9);
  });

  for (const name of ALL_TYPES) {
    it(`${name}: embedding rows decode exactly as ours; whole-model logits within ${WHOLE_MODEL_TOLERANCE[name]} × their std`, async () => {
      const type = GGML_TYPE[name];
      const embQ = join(dir, `${name}-embd.gguf`), embRef = join(dir, `${name}-embd-ref.gguf`);
      writeGgufModel(embQ, { config, type: 'F32', weights, tensorTypes: { 'token_embd.weight': name } });
      writeGgufModel(embRef, { config, type: 'F32', weights: dequantized(weights, type, 'model.embed_tokens.weight') });
      const exact = compare(await logitsOf(embQ), await logitsOf(embRef));
      expect(exact.maxDiff, `${name} embedding: max logit difference`).toBeLessThanOrEqual(1e-4 * exact.std);

      const whole = join(dir, `${name}.gguf`), wholeRef = join(dir, `${name}-ref.gguf`);
      writeGgufModel(whole, { config, type: name, weights });
      writeGgufModel(wholeRef, { config, type: 'F32', weights: dequantized(weights, type) });
      const r = compare(await logitsOf(whole), await logitsOf(wholeRef));
      expect(r.maxDiff / r.std, `${name} whole model: max logit difference / std`).toBeLessThanOrEqual(WHOLE_MODEL_TOLERANCE[name]);
      expect(r.argmaxAgreement).toBeGreaterThanOrEqual(0.98);
    }, 120_000);
  }

  it('negative control: one value decoded one step off is caught by the exact embedding check', async () => {
    const type = GGML_TYPE.Q4_K;
    const bad = dequantized(weights, type, 'model.embed_tokens.weight');
    const emb = bad.get('model.embed_tokens.weight')!;
    const data = Float32Array.from(emb.data);
    const token = sequence[5], step = 0.05; // well under one Q4_K step of these rows (std 1, range ≈ ±3.5 over 15 levels)
    data[token * config.hiddenSize + 3] += step;
    bad.set('model.embed_tokens.weight', { shape: emb.shape, data });
    const q = join(dir, 'neg-embd.gguf'), ref = join(dir, 'neg-embd-ref.gguf');
    writeGgufModel(q, { config, type: 'F32', weights, tensorTypes: { 'token_embd.weight': 'Q4_K' } });
    writeGgufModel(ref, { config, type: 'F32', weights: bad });
    const r = compare(await logitsOf(q), await logitsOf(ref));
    expect(r.maxDiff).toBeGreaterThan(1e-4 * r.std * 10);
  }, 120_000);
});
