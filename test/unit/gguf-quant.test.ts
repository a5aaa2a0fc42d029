// ggml quantization formats: our quantizers round-trip through our dequantizers within each format's
// error bound, and llama.cpp (node-llama-cpp's CPU build, an independent reader of the same blocks)
// sees the same values our dequantizers produce.
import { describe, expect, it } from 'vitest';
import { dequantize, GGML_TYPE, GGML_TYPES, type GgmlTypeName } from '../../worker/runtime/gguf-dequant.js';
import { quantize } from '../../worker/runtime/gguf-quantize.js';
import { f16ToF32 } from '../../worker/runtime/half.js';
import { seededRandom } from '../../worker/runtime/generate.js';

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
