// 4-bit block quantization for com.microsoft:MatMulNBits (bits 4, block 32, symmetric, zero point 8).
// B is uint8 [N, K/32, 16]: row n is output column n (HF [out, in] layout), quantized along K;
// byte j of a block holds element 2j in the low nibble and 2j+1 in the high nibble.

export const Q4_BLOCK = 32;

export interface Q4Weights {
  packed: Uint8Array;
  scales: Float32Array;
}

/** Quantize a row-major [N, K] matrix (K % 32 == 0). Scale = value of largest magnitude / −8, like Q4_0. */
export function quantizeQ4(w: Float32Array, N: number, K: number): Q4Weights {
  if (K % Q4_BLOCK !== 0) throw new Error(`4-bit quantization needs K % 32 == 0 (K = ${K})`);
  const blocks = K / Q4_BLOCK;
  const packed = new Uint8Array(N * blocks * 16);
  const scales = new Float32Array(N * blocks);
  for (let n = 0; n < N; n++)
    for (let b = 0; b < blocks; b++) {
      const base = n * K + b * Q4_BLOCK;
      let amax = 0, vmax = 0;
      for (let j = 0; j < Q4_BLOCK; j++) {
        const v = w[base + j];
        if (Math.abs(v) > amax) { amax = Math.abs(v); vmax = v; }
      }
      const d = vmax / -8;
      const inv = d !== 0 ? 1 / d : 0;
      scales[n * blocks + b] = d;
      const out = (n * blocks + b) * 16;
      for (let j = 0; j < 16; j++) {
        const q0 = Math.min(15, Math.max(0, Math.round(w[base + 2 * j] * inv) + 8));
        const q1 = Math.min(15, Math.max(0, Math.round(w[base + 2 * j + 1] * inv) + 8));
        packed[out + j] = q0 | (q1 << 4);
      }
    }
  return { packed, scales };
}

/** The float32 matrix a quantized one stands for (tests and reference checks). */
export function dequantizeQ4(q: Q4Weights, N: number, K: number): Float32Array {
  const blocks = K / Q4_BLOCK;
  const out = new Float32Array(N * K);
  for (let n = 0; n < N; n++)
    for (let b = 0; b < blocks; b++) {
      const d = q.scales[n * blocks + b];
      for (let j = 0; j < 16; j++) {
        const byte = q.packed[(n * blocks + b) * 16 + j];
        out[n * K + b * Q4_BLOCK + 2 * j] = ((byte & 0xf) - 8) * d;
        out[n * K + b * Q4_BLOCK + 2 * j + 1] = ((byte >> 4) - 8) * d;
      }
    }
  return out;
}
