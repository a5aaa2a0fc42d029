// float32 → ggml blocks for every type gguf-dequant.ts reads: the inverse of its dequantizers, used by
// the GGUF writer to produce test and benchmark models in each quantization.
//
// These are simple, deterministic quantizers (one pass per block, no error search like llama.cpp's
// `make_qkx2_quants`): each block's scale is chosen from the block's own max/min so that no value is
// clipped, and every value is then rounded to the nearest level of the *stored* (f16-rounded) scale.
// The blocks are valid ggml blocks — llama.cpp reads them as the same values (gguf-quant.test.ts) —
// only their rounding error is a little larger than llama.cpp's own quantizer would reach.
//
// Error per value, with d the stored step of the value's (sub-)block:
//   Q8_0, Q4_K, Q5_K, Q6_K: ≤ d/2 (no clipping: scales are rounded up, never down)
//   Q4_1, Q5_1: ≤ d/2, plus the f16 rounding of the block's minimum for values at the bottom
//   Q4_0, Q5_0: ≤ d, as in ggml: the largest-magnitude value maps to −8 (−16) exactly, so a value of
//               the opposite sign and equal magnitude would need +8 (+16), which the format lacks.
//   F16, BF16: round to nearest even.
import { GGML_TYPE, GGML_TYPES, ggmlTypeName } from './gguf-dequant.js';
import { f16ToF32, f32ToBF16, f32ToF16 } from './half.js';

/** Quantize `values` (a whole number of blocks) to the ggml type `type`; returns the raw block bytes. */
export function quantize(type: number, values: Float32Array): Uint8Array {
  const info = GGML_TYPES[type];
  if (!info) throw new Error(`cannot quantize to ggml type ${ggmlTypeName(type)}`);
  if (values.length % info.blockElems !== 0) {
    throw new Error(`cannot quantize ${values.length} values to ${info.name}: not a multiple of its block size ${info.blockElems}`);
  }
  const out = new Uint8Array((values.length / info.blockElems) * info.blockBytes);
  const blocks = values.length / info.blockElems;
  switch (type) {
    case GGML_TYPE.F32: new Float32Array(out.buffer).set(values); break;
    case GGML_TYPE.F16: { const h = new Uint16Array(out.buffer); for (let i = 0; i < values.length; i++) h[i] = f32ToF16(values[i]); break; }
    case GGML_TYPE.BF16: { const h = new Uint16Array(out.buffer); for (let i = 0; i < values.length; i++) h[i] = f32ToBF16(values[i]); break; }
    case GGML_TYPE.Q8_0: for (let b = 0; b < blocks; b++) blockQ8_0(values, b * 32, out, b * 34); break;
    case GGML_TYPE.Q4_0: for (let b = 0; b < blocks; b++) blockSymmetric(values, b * 32, out, b * 18, 4); break;
    case GGML_TYPE.Q5_0: for (let b = 0; b < blocks; b++) blockSymmetric(values, b * 32, out, b * 22, 5); break;
    case GGML_TYPE.Q4_1: for (let b = 0; b < blocks; b++) blockWithMin(values, b * 32, out, b * 20, 4); break;
    case GGML_TYPE.Q5_1: for (let b = 0; b < blocks; b++) blockWithMin(values, b * 32, out, b * 24, 5); break;
    case GGML_TYPE.Q4_K: for (let b = 0; b < blocks; b++) blockK(values, b * 256, out, b * 144, 4); break;
    case GGML_TYPE.Q5_K: for (let b = 0; b < blocks; b++) blockK(values, b * 256, out, b * 176, 5); break;
    case GGML_TYPE.Q6_K: for (let b = 0; b < blocks; b++) blockQ6_K(values, b * 256, out, b * 210); break;
    default: throw new Error(`cannot quantize to ggml type ${info.name}`);
  }
  return out;
}

/** Store an f16 and return the value it actually holds (what the dequantizer will use). */
function putHalf(out: Uint8Array, off: number, value: number): number {
  const h = f32ToF16(value);
  out[off] = h & 0xff;
  out[off + 1] = h >> 8;
  return f16ToF32(h);
}

/** A step ≥ `step` that survives f16 rounding (so quantizing with it never clips). */
function halfAtLeast(step: number): number {
  let h = f32ToF16(step);
  if (f16ToF32(h) < step) h++; // positive finite halves are ordered like their bit patterns
  return f16ToF32(h);
}

const clamp = (v: number, lo: number, hi: number) => (v < lo ? lo : v > hi ? hi : v);

/** Q8_0: d = amax/127, q = round(x/d) in int8. */
function blockQ8_0(x: Float32Array, o: number, out: Uint8Array, p: number): void {
  let amax = 0;
  for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[o + j]));
  const d = putHalf(out, p, halfAtLeast(amax / 127));
  const id = d ? 1 / d : 0;
  for (let j = 0; j < 32; j++) out[p + 2 + j] = clamp(Math.round(x[o + j] * id), -127, 127) & 0xff;
}

/**
 * Q4_0 / Q5_0 (ggml's choice of scale): d = (value of largest magnitude) / −2^(bits−1), so that value
 * maps to level 0 exactly; q = round(x/d) + 2^(bits−1), clamped to the format's levels.
 */
function blockSymmetric(x: Float32Array, o: number, out: Uint8Array, p: number, bits: 4 | 5): void {
  const zero = 1 << (bits - 1), top = (1 << bits) - 1;
  let amax = 0, max = 0;
  for (let j = 0; j < 32; j++) { const v = x[o + j]; if (Math.abs(v) > amax) { amax = Math.abs(v); max = v; } }
  const d = putHalf(out, p, max / -zero);
  const id = d ? 1 / d : 0;
  const qs = bits === 4 ? p + 2 : p + 6;
  let qh = 0;
  for (let j = 0; j < 16; j++) {
    const q0 = clamp(Math.round(x[o + j] * id) + zero, 0, top);
    const q1 = clamp(Math.round(x[o + j + 16] * id) + zero, 0, top);
    out[qs + j] = (q0 & 0xf) | ((q1 & 0xf) << 4);
    qh |= ((q0 >> 4) << j) | ((q1 >> 4) << (j + 16));
  }
  if (bits === 5) putU32(out, p + 2, qh);
}

/** Q4_1 / Q5_1: m = min, d = (max − min)/(2^bits − 1), q = round((x − m)/d). */
function blockWithMin(x: Float32Array, o: number, out: Uint8Array, p: number, bits: 4 | 5): void {
  const top = (1 << bits) - 1;
  let min = Infinity, max = -Infinity;
  for (let j = 0; j < 32; j++) { const v = x[o + j]; if (v < min) min = v; if (v > max) max = v; }
  const m = putHalf(out, p + 2, min);
  const d = putHalf(out, p, halfAtLeast((max - m) / top));
  const id = d ? 1 / d : 0;
  const qs = bits === 4 ? p + 4 : p + 8;
  let qh = 0;
  for (let j = 0; j < 16; j++) {
    const q0 = clamp(Math.round((x[o + j] - m) * id), 0, top);
    const q1 = clamp(Math.round((x[o + j + 16] - m) * id), 0, top);
    out[qs + j] = (q0 & 0xf) | ((q1 & 0xf) << 4);
    qh |= ((q0 >> 4) << j) | ((q1 >> 4) << (j + 16));
  }
  if (bits === 5) putU32(out, p + 4, qh);
}

function putU32(out: Uint8Array, off: number, v: number): void {
  out[off] = v & 0xff; out[off + 1] = (v >>> 8) & 0xff; out[off + 2] = (v >>> 16) & 0xff; out[off + 3] = v >>> 24;
}

// Per-super-block scratch for the K-quants (one block is quantized at a time).
const subMin = new Float64Array(16);
const subMax = new Float64Array(16);
const levels = new Uint8Array(256);
const subScale = new Uint8Array(16);
const subOffset = new Uint8Array(16);

/**
 * Q4_K / Q5_K: 8 sub-blocks of 32, value = d·sc_j·q − dmin·m_j with 6-bit sc_j, m_j.
 * Offsets first: m_j = ceil(−min_j / dmin) (min_j ≤ 0), then each scale is the smallest 6-bit
 * multiple of d that spans the sub-block's range above −m_j·dmin, so nothing is clipped.
 */
function blockK(x: Float32Array, o: number, out: Uint8Array, p: number, bits: 4 | 5): void {
  const top = (1 << bits) - 1;
  let maxOffset = 0;
  for (let j = 0; j < 8; j++) {
    let mn = 0, mx = -Infinity; // the offset is never positive: ggml stores −min with min ≤ 0
    for (let l = 0; l < 32; l++) { const v = x[o + 32 * j + l]; if (v < mn) mn = v; if (v > mx) mx = v; }
    subMin[j] = -mn; subMax[j] = mx;
    maxOffset = Math.max(maxOffset, -mn);
  }
  const dmin = putHalf(out, p + 2, halfAtLeast(maxOffset / 63));
  let maxStep = 0;
  for (let j = 0; j < 8; j++) {
    subOffset[j] = dmin ? Math.min(63, Math.ceil(subMin[j] / dmin)) : 0;
    subMin[j] = subOffset[j] * dmin; // the offset as stored
    subMax[j] = (subMax[j] + subMin[j]) / top; // the step this sub-block needs
    maxStep = Math.max(maxStep, subMax[j]);
  }
  const d = putHalf(out, p, halfAtLeast(maxStep / 63));
  for (let j = 0; j < 8; j++) {
    subScale[j] = d ? Math.min(63, Math.ceil(subMax[j] / d)) : 0;
    const step = d * subScale[j];
    const inv = step ? 1 / step : 0;
    for (let l = 0; l < 32; l++) levels[32 * j + l] = clamp(Math.round((x[o + 32 * j + l] + subMin[j]) * inv), 0, top);
  }
  // 12 scale bytes (get_scale_min_k4's inverse): sub-blocks 0–3 in the low 6 bits of bytes 0–3 (scale)
  // and 4–7 (offset); sub-blocks 4–7 as nibbles in bytes 8–11 with their top 2 bits in bytes 0–7's top bits.
  const s = p + 4;
  for (let j = 0; j < 4; j++) { out[s + j] = subScale[j]; out[s + j + 4] = subOffset[j]; }
  for (let j = 4; j < 8; j++) {
    out[s + j + 4] = (subScale[j] & 0xf) | ((subOffset[j] & 0xf) << 4);
    out[s + j - 4] |= (subScale[j] >> 4) << 6;
    out[s + j] |= (subOffset[j] >> 4) << 6;
  }
  // Quants per 64-element group g: sub-block 2g in low nibbles, 2g+1 in high nibbles; Q5_K's fifth bits
  // go to qh[l] bit 2g (low) and 2g+1 (high).
  const qh = p + 16, qs = bits === 4 ? p + 16 : p + 48;
  for (let g = 0; g < 4; g++) {
    for (let l = 0; l < 32; l++) {
      const lo = levels[64 * g + l], hi = levels[64 * g + 32 + l];
      out[qs + 32 * g + l] = (lo & 0xf) | ((hi & 0xf) << 4);
      if (bits === 5) out[qh + l] |= ((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1));
    }
  }
}

/** Q6_K: 16 sub-blocks of 16, value = d·sc_j·(q − 32) with int8 sc_j (kept positive here), q 6-bit. */
function blockQ6_K(x: Float32Array, o: number, out: Uint8Array, p: number): void {
  let maxStep = 0;
  for (let j = 0; j < 16; j++) {
    let amax = 0;
    for (let l = 0; l < 16; l++) amax = Math.max(amax, Math.abs(x[o + 16 * j + l]));
    subMax[j] = amax / 31; // levels −31..31 cover ±amax; −32 is unused by this quantizer
    maxStep = Math.max(maxStep, subMax[j]);
  }
  const d = putHalf(out, p + 208, halfAtLeast(maxStep / 127));
  for (let j = 0; j < 16; j++) {
    const sc = d ? Math.min(127, Math.ceil(subMax[j] / d)) : 0;
    out[p + 192 + j] = sc;
    const step = d * sc;
    const inv = step ? 1 / step : 0;
    for (let l = 0; l < 16; l++) levels[16 * j + l] = clamp(Math.round(x[o + 16 * j + l] * inv), -32, 31) + 32;
  }
  // Per 128-element half n: ql[64n + l] holds elements l (low) and l+64 (high), ql[64n + 32 + l] elements
  // l+32 and l+96; qh[32n + l] holds the top 2 bits of elements l, l+32, l+64, l+96 at bits 0, 2, 4, 6.
  for (let n = 0; n < 2; n++) {
    const ql = p + 64 * n, qh = p + 128 + 32 * n, L = 128 * n;
    for (let l = 0; l < 32; l++) {
      const q1 = levels[L + l], q2 = levels[L + l + 32], q3 = levels[L + l + 64], q4 = levels[L + l + 96];
      out[ql + l] = (q1 & 0xf) | ((q3 & 0xf) << 4);
      out[ql + l + 32] = (q2 & 0xf) | ((q4 & 0xf) << 4);
      out[qh + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
    }
  }
}
