// 4-bit block quantization for com.microsoft:MatMulNBits (bits 4, symmetric, zero point 8).
// B is uint8 [N, K/block, block/2]: row n is output column n (HF [out, in] layout), quantized along K
// in blocks of `block` elements; byte j of a block holds element 2j in the low nibble and 2j+1 in the high nibble.

/**
 * Preferred block length: 128, as ORT's own 4-bit quantizer (matmul_4bits_quantizer) defaults to.
 * Measured on this 2-core machine (MatMulNBits, accuracy_level 4, M = 1): block 128 runs the ~120M
 * model's projections 1.5-1.8x faster than block 32 (Q4_0's), whose extra scales cost more than the
 * weights' bytes at this size; decode went 194 → 261 tok/s. MatMulNBits accepts 16..256 (powers of two).
 */
export const Q4_BLOCK = 128;

/** The block length used for an input size K: the preferred one if it divides K, else the largest smaller power of two (≥ 16) that does; null = keep f32. */
export function q4BlockFor(K: number, preferred = Q4_BLOCK): number | null {
  checkBlock(preferred);
  for (let b = preferred; b >= 16; b /= 2) if (K % b === 0) return b;
  return null;
}

function checkBlock(block: number): void {
  if (!Number.isInteger(Math.log2(block)) || block < 16 || block > 256) throw new Error(`4-bit block length must be a power of two in 16..256 (got ${block})`);
}

export interface Q4Weights {
  packed: Uint8Array;
  scales: Float32Array;
  block: number;
}

/** Quantize a row-major [N, K] matrix (K % block == 0). Scale = value of largest magnitude / −8, like Q4_0. */
export function quantizeQ4(w: Float32Array, N: number, K: number, block = Q4_BLOCK): Q4Weights {
  checkBlock(block);
  if (K % block !== 0) throw new Error(`4-bit quantization needs K % ${block} == 0 (K = ${K})`);
  const blocks = K / block;
  const half = block / 2;
  const packed = new Uint8Array(N * blocks * half);
  const scales = new Float32Array(N * blocks);
  for (let n = 0; n < N; n++)
    for (let b = 0; b < blocks; b++) {
      const base = n * K + b * block;
      let amax = 0, vmax = 0;
      for (let j = 0; j < block; j++) {
        const v = w[base + j];
        if (Math.abs(v) > amax) { amax = Math.abs(v); vmax = v; }
      }
      const d = vmax / -8;
      const inv = d !== 0 ? 1 / d : 0;
      scales[n * blocks + b] = d;
      const out = (n * blocks + b) * half;
      for (let j = 0; j < half; j++) {
        const q0 = Math.min(15, Math.max(0, Math.round(w[base + 2 * j] * inv) + 8));
        const q1 = Math.min(15, Math.max(0, Math.round(w[base + 2 * j + 1] * inv) + 8));
        packed[out + j] = q0 | (q1 << 4);
      }
    }
  return { packed, scales, block };
}

/** The float32 matrix a quantized one stands for (tests and reference checks). */
export function dequantizeQ4(q: Q4Weights, N: number, K: number): Float32Array {
  const block = q.block;
  const blocks = K / block;
  const half = block / 2;
  const out = new Float32Array(N * K);
  for (let n = 0; n < N; n++)
    for (let b = 0; b < blocks; b++) {
      const d = q.scales[n * blocks + b];
      for (let j = 0; j < half; j++) {
        const byte = q.packed[(n * blocks + b) * half + j];
        out[n * K + b * block + 2 * j] = ((byte & 0xf) - 8) * d;
        out[n * K + b * block + 2 * j + 1] = ((byte >> 4) - 8) * d;
      }
    }
  return out;
}
