// ggml weight blocks → com.microsoft:MatMulNBits (and GatherBlockQuantized) inputs, without a second
// rounding. A [N, K] matrix (HF [out, in] layout, quantized along K) becomes
//   packed  uint8 [N, K/block, block·bits/8]: element 2j of a 4-bit block in byte j's low nibble, 2j+1 high;
//   scales  float [N · K/block];
//   offsets float [N · K/block] or null: what each weight of a block adds beyond (q − zero point) · scale.
// MatMulNBits computes (q − 2^(bits−1)) · scale (its default zero point). Formats with a per-block minimum
// (Q4_1, Q5_1, Q4_K, Q5_K: x = scale·q − min) cannot carry it as an integer zero point, and ORT's float zero
// points fall back to a path 50–200× slower (measured), so the graph adds Σ_block(a) · offset instead, as
// llama.cpp's own dot products do with their block sums: exact up to float32 summation order.
//
// Which form each ggml type takes (all exact):
//   Q4_0            4 bits, block 32                 Q8_0   8 bits, block 32 (q + 128)
//   Q4_1, Q4_K      4 bits, block 32, offsets        Q5_0   8 bits, block 32 (q + 112)
//   Q6_K            8 bits, block 16 (q + 96)        Q5_1, Q5_K  8 bits, block 32 (q + 128), offsets
// F32, F16 and BF16 tensors have no block form here: they are served as float32 (see decoder-linear.ts).
import { half, scaleMinK4 } from './gguf-dequant.js';

export interface NBitsWeights {
  bits: 4 | 8;
  block: number;
  packed: Uint8Array;
  scales: Float32Array;
  offsets: Float32Array | null;
}

interface Layout { bits: 4 | 8; block: number; hasOffsets: boolean; superElems: number; superBytes: number }

const LAYOUTS: Record<number, Layout> = {
  2: { bits: 4, block: 32, hasOffsets: false, superElems: 32, superBytes: 18 }, // Q4_0
  3: { bits: 4, block: 32, hasOffsets: true, superElems: 32, superBytes: 20 }, // Q4_1
  6: { bits: 8, block: 32, hasOffsets: false, superElems: 32, superBytes: 22 }, // Q5_0
  7: { bits: 8, block: 32, hasOffsets: true, superElems: 32, superBytes: 24 }, // Q5_1
  8: { bits: 8, block: 32, hasOffsets: false, superElems: 32, superBytes: 34 }, // Q8_0
  12: { bits: 4, block: 32, hasOffsets: true, superElems: 256, superBytes: 144 }, // Q4_K
  13: { bits: 8, block: 32, hasOffsets: true, superElems: 256, superBytes: 176 }, // Q5_K
  14: { bits: 8, block: 16, hasOffsets: false, superElems: 256, superBytes: 210 }, // Q6_K
};

/** The MatMulNBits form of a ggml type, or null when it has none (float types, unsupported quants). */
export function nbitsLayout(ggmlType: number): { bits: 4 | 8; block: number; hasOffsets: boolean } | null {
  const l = LAYOUTS[ggmlType];
  return l ? { bits: l.bits, block: l.block, hasOffsets: l.hasOffsets } : null;
}

/** Repack a [N, K] ggml matrix (N rows of K elements, row-major, as GGUF stores dims [K, N]). */
export function repackGgml(ggmlType: number, src: Uint8Array, N: number, K: number): NBitsWeights {
  const l = LAYOUTS[ggmlType];
  if (!l) throw new Error(`ggml type ${ggmlType} has no MatMulNBits form`);
  if (K % l.superElems !== 0) throw new Error(`row length ${K} is not a multiple of the ${l.superElems}-element ggml block`);
  const blocks = (N * K) / l.block;
  const blockBytes = (l.block * l.bits) / 8;
  const out: NBitsWeights = {
    bits: l.bits, block: l.block, packed: new Uint8Array(blocks * blockBytes), scales: new Float32Array(blocks),
    offsets: l.hasOffsets ? new Float32Array(blocks) : null,
  };
  if (src.length !== ((N * K) / l.superElems) * l.superBytes) throw new Error(`ggml tensor has ${src.length} bytes, expected ${((N * K) / l.superElems) * l.superBytes}`);
  const supers = (N * K) / l.superElems;
  const P = out.packed, S = out.scales, O = out.offsets;
  for (let sb = 0; sb < supers; sb++) {
    const o = sb * l.superBytes;
    switch (ggmlType) {
      case 2: { // Q4_0: d, 16 bytes; element j low nibble of byte j, element j+16 high nibble; x = (q − 8)·d
        S[sb] = half(src, o);
        const p = sb * 16;
        for (let j = 0; j < 8; j++) {
          P[p + j] = (src[o + 2 + 2 * j] & 0xf) | ((src[o + 2 + 2 * j + 1] & 0xf) << 4);
          P[p + 8 + j] = (src[o + 2 + 2 * j] >> 4) | (src[o + 2 + 2 * j + 1] & 0xf0);
        }
        break;
      }
      case 3: { // Q4_1: d, m, 16 bytes; x = q·d + m = (q − 8)·d + (8d + m)
        const d = half(src, o);
        S[sb] = d;
        O![sb] = 8 * d + half(src, o + 2);
        const p = sb * 16;
        for (let j = 0; j < 8; j++) {
          P[p + j] = (src[o + 4 + 2 * j] & 0xf) | ((src[o + 4 + 2 * j + 1] & 0xf) << 4);
          P[p + 8 + j] = (src[o + 4 + 2 * j] >> 4) | (src[o + 4 + 2 * j + 1] & 0xf0);
        }
        break;
      }
      case 6: case 7: { // Q5_0 (d, qh, qs; x = (q − 16)·d) and Q5_1 (d, m, qh, qs; x = q·d + m)
        const d = half(src, o);
        const withMin = ggmlType === 7;
        S[sb] = d;
        const qhAt = o + (withMin ? 4 : 2), qs = qhAt + 4;
        const qh = src[qhAt] | (src[qhAt + 1] << 8) | (src[qhAt + 2] << 16) | (src[qhAt + 3] << 24);
        // 8-bit q8 with (q8 − 128) = q − 16 (Q5_0) or = q, the min going to the offset (Q5_1).
        const shift = withMin ? 128 : 112;
        if (withMin) O![sb] = half(src, o + 2);
        const p = sb * 32;
        for (let j = 0; j < 16; j++) {
          P[p + j] = ((src[qs + j] & 0xf) | (((qh >>> j) & 1) << 4)) + shift;
          P[p + j + 16] = ((src[qs + j] >> 4) | (((qh >>> (j + 16)) & 1) << 4)) + shift;
        }
        break;
      }
      case 8: { // Q8_0: d, 32 int8; x = q·d
        S[sb] = half(src, o);
        const p = sb * 32;
        for (let j = 0; j < 32; j++) P[p + j] = (src[o + 2 + j] + 128) & 0xff;
        break;
      }
      case 12: case 13: { // Q4_K / Q5_K: d, dmin, 12 scale bytes, [qh 32 bytes (Q5_K)], qs 128 bytes
        const d = half(src, o), dmin = half(src, o + 2);
        const five = ggmlType === 13;
        const qhAt = o + 16, qs = o + (five ? 48 : 16);
        for (let chunk = 0; chunk < 4; chunk++) { // 64 elements: sub-block 2c = low nibbles, 2c+1 = high nibbles
          for (let half2 = 0; half2 < 2; half2++) {
            const j = 2 * chunk + half2;
            const [sc, m] = scaleMinK4(j, src, o + 4);
            const b = sb * 8 + j;
            const scale = d * sc, min = dmin * m;
            S[b] = scale;
            const q = qs + chunk * 32;
            if (!five) {
              O![b] = 8 * scale - min; // x = scale·q − min = (q − 8)·scale + (8·scale − min)
              const p = b * 16;
              if (half2 === 0) for (let t = 0; t < 16; t++) P[p + t] = (src[q + 2 * t] & 0xf) | ((src[q + 2 * t + 1] & 0xf) << 4);
              else for (let t = 0; t < 16; t++) P[p + t] = (src[q + 2 * t] >> 4) | (src[q + 2 * t + 1] & 0xf0);
            } else {
              O![b] = -min; // x = scale·q − min with q8 = q + 128
              const bit = 2 * chunk + half2;
              const p = b * 32;
              for (let t = 0; t < 32; t++) {
                const low = half2 === 0 ? src[q + t] & 0xf : src[q + t] >> 4;
                P[p + t] = low + (((src[qhAt + t] >> bit) & 1) << 4) + 128;
              }
            }
          }
        }
        break;
      }
      case 14: { // Q6_K: ql 128, qh 64, int8 scales 16, d; 16 sub-blocks of 16; x = d·sc·(q − 32), q8 = q + 96
        const d = half(src, o + 208);
        for (let part = 0; part < 2; part++) {
          const ql = o + part * 64, qh = o + 128 + part * 32, sc = o + 192 + part * 8;
          const base = sb * 256 + part * 128; // element index of this 128-element half
          for (let l = 0; l < 32; l++) {
            const h = src[qh + l];
            const q1 = (src[ql + l] & 0xf) | ((h & 3) << 4);
            const q2 = (src[ql + l + 32] & 0xf) | (((h >> 2) & 3) << 4);
            const q3 = (src[ql + l] >> 4) | (((h >> 4) & 3) << 4);
            const q4 = (src[ql + l + 32] >> 4) | (((h >> 6) & 3) << 4);
            P[base + l] = q1 + 96;
            P[base + l + 32] = q2 + 96;
            P[base + l + 64] = q3 + 96;
            P[base + l + 96] = q4 + 96;
          }
          for (let i = 0; i < 8; i++) S[base / 16 + i] = d * ((src[sc + i] << 24) >> 24);
        }
        break;
      }
    }
  }
  return out;
}

/** The float32 values a repacked matrix stands for (what MatMulNBits multiplies by; tests and references). */
export function dequantizeNBits(w: NBitsWeights, N: number, K: number): Float32Array {
  const out = new Float32Array(N * K);
  const zero = 1 << (w.bits - 1);
  for (let i = 0; i < N * K; i++) {
    const b = Math.floor(i / w.block);
    const q = w.bits === 8 ? w.packed[i] : (w.packed[i >> 1] >> ((i & 1) * 4)) & 0xf;
    out[i] = (q - zero) * w.scales[b] + (w.offsets ? w.offsets[b] : 0);
  }
  return out;
}
