// Dequantization of the ggml tensor types Hearth accepts, to float32.
// Block layouts follow ggml's block_* structs (ggml-common.h) and dequantize_row_* (ggml-quants.c);
// QK_K = 256-element super-blocks for K-quants. test/unit/gguf-quant.test.ts checks every type
// against llama.cpp itself. The inverse (float32 → blocks) is gguf-quantize.ts.
import { decodeBF16, decodeF16, decodeF32, f16BitsToF32 } from './half.js';

/** ggml type ids (the numbers stored in a GGUF tensor table) of the types Hearth reads and writes. */
export const GGML_TYPE = {
  F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q8_0: 8, Q4_K: 12, Q5_K: 13, Q6_K: 14, BF16: 30,
} as const;
export type GgmlTypeName = keyof typeof GGML_TYPE;

export const GGML_TYPES: Record<number, { name: GgmlTypeName; blockElems: number; blockBytes: number }> = {
  0: { name: 'F32', blockElems: 1, blockBytes: 4 },
  1: { name: 'F16', blockElems: 1, blockBytes: 2 },
  2: { name: 'Q4_0', blockElems: 32, blockBytes: 18 }, // f16 d, 16 nibble bytes
  3: { name: 'Q4_1', blockElems: 32, blockBytes: 20 }, // f16 d, f16 m, 16 nibble bytes
  6: { name: 'Q5_0', blockElems: 32, blockBytes: 22 }, // f16 d, 4 high-bit bytes, 16 nibble bytes
  7: { name: 'Q5_1', blockElems: 32, blockBytes: 24 }, // f16 d, f16 m, 4 high-bit bytes, 16 nibble bytes
  8: { name: 'Q8_0', blockElems: 32, blockBytes: 34 }, // f16 d, 32 int8
  12: { name: 'Q4_K', blockElems: 256, blockBytes: 144 }, // f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes
  13: { name: 'Q5_K', blockElems: 256, blockBytes: 176 }, // f16 d, f16 dmin, 12 scale bytes, 32 high-bit bytes, 128 nibble bytes
  14: { name: 'Q6_K', blockElems: 256, blockBytes: 210 }, // 128 low-nibble bytes, 64 high-2-bit bytes, 16 int8 scales, f16 d
  30: { name: 'BF16', blockElems: 1, blockBytes: 2 },
};

const OTHER_TYPE_NAMES: Record<number, string> = {
  9: 'Q8_1', 10: 'Q2_K', 11: 'Q3_K', 15: 'Q8_K',
  16: 'IQ2_XXS', 17: 'IQ2_XS', 18: 'IQ3_XXS', 19: 'IQ1_S', 20: 'IQ4_NL', 21: 'IQ3_S', 22: 'IQ2_S',
  23: 'IQ4_XS', 24: 'I8', 25: 'I16', 26: 'I32', 27: 'I64', 28: 'F64', 29: 'IQ1_M', 34: 'TQ1_0', 35: 'TQ2_0',
};

export function ggmlTypeName(type: number): string {
  return GGML_TYPES[type]?.name ?? OTHER_TYPE_NAMES[type] ?? `type ${type}`;
}

function typeInfo(type: number, tensorName: string) {
  const info = GGML_TYPES[type];
  if (!info) {
    const supported = Object.values(GGML_TYPES).map((t) => t.name).join(', ');
    throw new Error(`unsupported GGUF tensor type ${ggmlTypeName(type)} in tensor ${tensorName} (supported: ${supported})`);
  }
  return info;
}

export function tensorByteSize(type: number, elements: number, tensorName: string): number {
  const info = typeInfo(type, tensorName);
  if (elements % info.blockElems !== 0) throw new Error(`bad GGUF tensor ${tensorName}: ${elements} elements is not a multiple of the ${info.name} block size`);
  return (elements / info.blockElems) * info.blockBytes;
}

export function dequantize(type: number, bytes: Uint8Array, elements: number): Float32Array {
  switch (type) {
    case 0: return decodeF32(bytes, elements);
    case 1: return decodeF16(bytes, elements);
    case 30: return decodeBF16(bytes, elements);
    case 2: return dequantQ4_0(bytes, elements);
    case 3: return dequantQ4_1(bytes, elements);
    case 6: return dequantQ5_0(bytes, elements);
    case 7: return dequantQ5_1(bytes, elements);
    case 8: return dequantQ8_0(bytes, elements);
    case 12: return dequantQ4_K(bytes, elements);
    case 13: return dequantQ5_K(bytes, elements);
    case 14: return dequantQ6_K(bytes, elements);
    default: throw new Error(`unsupported GGUF tensor type ${ggmlTypeName(type)}`);
  }
}

/** The f16 at byte `off` of a block, as a number. */
export function half(b: Uint8Array, off: number): number {
  return f16BitsToF32(b[off] | (b[off + 1] << 8));
}

/** Q8_0: blocks of 32 = f16 scale + 32 int8. */
export function dequantQ8_0(b: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let blk = 0, off = 0; blk < n / 32; blk++, off += 34) {
    const d = half(b, off);
    for (let j = 0; j < 32; j++) out[blk * 32 + j] = d * ((b[off + 2 + j] << 24) >> 24);
  }
  return out;
}

/** Q4_0: blocks of 32 = f16 scale + 16 bytes; low nibble = element j, high nibble = element j+16; zero point 8. */
export function dequantQ4_0(b: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let blk = 0, off = 0; blk < n / 32; blk++, off += 18) {
    const d = half(b, off);
    const y = blk * 32;
    for (let j = 0; j < 16; j++) {
      const q = b[off + 2 + j];
      out[y + j] = ((q & 0xf) - 8) * d;
      out[y + j + 16] = ((q >> 4) - 8) * d;
    }
  }
  return out;
}

/** Q4_1: blocks of 32 = f16 scale d + f16 offset m + 16 nibble bytes (same order as Q4_0); value = q·d + m. */
export function dequantQ4_1(b: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let blk = 0, off = 0; blk < n / 32; blk++, off += 20) {
    const d = half(b, off), m = half(b, off + 2);
    const y = blk * 32;
    for (let j = 0; j < 16; j++) {
      const q = b[off + 4 + j];
      out[y + j] = (q & 0xf) * d + m;
      out[y + j + 16] = (q >> 4) * d + m;
    }
  }
  return out;
}

/** The 32 fifth bits of a Q5 block: a little-endian u32, bit j belongs to element j. */
function highBits(b: Uint8Array, off: number): number {
  return (b[off] | (b[off + 1] << 8) | (b[off + 2] << 16) | (b[off + 3] << 24)) >>> 0;
}

/** Q5_0: blocks of 32 = f16 scale + u32 fifth bits + 16 nibble bytes (Q4_0 order); zero point 16. */
export function dequantQ5_0(b: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let blk = 0, off = 0; blk < n / 32; blk++, off += 22) {
    const d = half(b, off);
    const qh = highBits(b, off + 2);
    const y = blk * 32;
    for (let j = 0; j < 16; j++) {
      const q = b[off + 6 + j];
      out[y + j] = (((q & 0xf) | (((qh >>> j) & 1) << 4)) - 16) * d;
      out[y + j + 16] = (((q >> 4) | (((qh >>> (j + 16)) & 1) << 4)) - 16) * d;
    }
  }
  return out;
}

/** Q5_1: blocks of 32 = f16 d + f16 m + u32 fifth bits + 16 nibble bytes; value = q·d + m. */
export function dequantQ5_1(b: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let blk = 0, off = 0; blk < n / 32; blk++, off += 24) {
    const d = half(b, off), m = half(b, off + 2);
    const qh = highBits(b, off + 4);
    const y = blk * 32;
    for (let j = 0; j < 16; j++) {
      const q = b[off + 8 + j];
      out[y + j] = ((q & 0xf) | (((qh >>> j) & 1) << 4)) * d + m;
      out[y + j + 16] = ((q >> 4) | (((qh >>> (j + 16)) & 1) << 4)) * d + m;
    }
  }
  return out;
}

/** 6-bit scale/min pair j of a Q4_K block's 12 packed scale bytes (get_scale_min_k4). */
export function scaleMinK4(j: number, q: Uint8Array, o: number): [number, number] {
  if (j < 4) return [q[o + j] & 63, q[o + j + 4] & 63];
  return [(q[o + j + 4] & 0xf) | ((q[o + j - 4] >> 6) << 4), (q[o + j + 4] >> 4) | ((q[o + j] >> 6) << 4)];
}

/** Q4_K: 256-element super-blocks: f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes. */
export function dequantQ4_K(b: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  let y = 0;
  for (let off = 0; y < n; off += 144) {
    const d = half(b, off);
    const dmin = half(b, off + 2);
    const scales = off + 4;
    let q = off + 16;
    for (let j = 0, is = 0; j < 256; j += 64, is += 2) {
      const [sc1, m1] = scaleMinK4(is, b, scales);
      const [sc2, m2] = scaleMinK4(is + 1, b, scales);
      const d1 = d * sc1, min1 = dmin * m1, d2 = d * sc2, min2 = dmin * m2;
      for (let l = 0; l < 32; l++) out[y++] = d1 * (b[q + l] & 0xf) - min1;
      for (let l = 0; l < 32; l++) out[y++] = d2 * (b[q + l] >> 4) - min2;
      q += 32;
    }
  }
  return out;
}

/**
 * Q5_K: Q4_K's layout plus 32 bytes of fifth bits before the nibbles: for the 64-element group g,
 * bit 2g of qh[l] is the fifth bit of its low-nibble element l, bit 2g+1 that of its high-nibble element l.
 */
export function dequantQ5_K(b: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  let y = 0;
  for (let off = 0; y < n; off += 176) {
    const d = half(b, off);
    const dmin = half(b, off + 2);
    const scales = off + 4, qh = off + 16;
    let ql = off + 48;
    for (let g = 0; g < 4; g++) {
      const [sc1, m1] = scaleMinK4(2 * g, b, scales);
      const [sc2, m2] = scaleMinK4(2 * g + 1, b, scales);
      const d1 = d * sc1, min1 = dmin * m1, d2 = d * sc2, min2 = dmin * m2;
      const lowBit = 1 << (2 * g), highBit = 2 << (2 * g);
      for (let l = 0; l < 32; l++) out[y++] = d1 * ((b[ql + l] & 0xf) + (b[qh + l] & lowBit ? 16 : 0)) - min1;
      for (let l = 0; l < 32; l++) out[y++] = d2 * ((b[ql + l] >> 4) + (b[qh + l] & highBit ? 16 : 0)) - min2;
      ql += 32;
    }
  }
  return out;
}

/** Q6_K: 256-element super-blocks: 128 low-nibble bytes, 64 high-2-bit bytes, 16 int8 scales, f16 d. */
export function dequantQ6_K(b: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  let y = 0;
  for (let off = 0; y < n; off += 210) {
    const d = half(b, off + 208);
    let ql = off, qh = off + 128, sc = off + 192;
    for (let part = 0; part < 2; part++) {
      for (let l = 0; l < 32; l++) {
        const is = l >> 4;
        const q1 = ((b[ql + l] & 0xf) | (((b[qh + l] >> 0) & 3) << 4)) - 32;
        const q2 = ((b[ql + l + 32] & 0xf) | (((b[qh + l] >> 2) & 3) << 4)) - 32;
        const q3 = ((b[ql + l] >> 4) | (((b[qh + l] >> 4) & 3) << 4)) - 32;
        const q4 = ((b[ql + l + 32] >> 4) | (((b[qh + l] >> 6) & 3) << 4)) - 32;
        const s = (i: number) => (b[sc + i] << 24) >> 24;
        out[y + l] = d * s(is) * q1;
        out[y + l + 32] = d * s(is + 2) * q2;
        out[y + l + 64] = d * s(is + 4) * q3;
        out[y + l + 96] = d * s(is + 6) * q4;
      }
      y += 128; ql += 64; qh += 32; sc += 8;
    }
  }
  return out;
}
