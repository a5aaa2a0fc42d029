// Rotary position embedding tables (Hugging Face "rotate_half" convention), computed in plain JS.
import type { ModelConfig } from '../../src/runtime/model-config.js';

/** inv_freq[i] = theta^(-2i/headDim), with Llama-3 frequency scaling when configured. */
export function ropeInverseFrequencies(config: ModelConfig): Float64Array {
  const half = config.headDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / Math.pow(config.ropeTheta, (2 * i) / config.headDim);
  const s = config.ropeScaling;
  if (s) {
    if (s.type !== 'llama3') throw new Error(`rope_scaling type ${String(s.type)} is not supported`);
    // transformers' _compute_llama3_parameters: long wavelengths are divided by `factor`,
    // short ones kept, the band in between interpolated smoothly.
    const lowFreqWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
    const highFreqWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
    for (let i = 0; i < half; i++) {
      const wavelen = (2 * Math.PI) / inv[i];
      if (wavelen > lowFreqWavelen) {
        inv[i] = inv[i] / s.factor;
      } else if (wavelen >= highFreqWavelen) {
        const smooth = (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        inv[i] = (1 - smooth) * (inv[i] / s.factor) + smooth * inv[i];
      }
    }
  }
  return inv;
}

/**
 * cos and "signed" sin tables of shape [numTokens, headDim] for the given positions, so that
 * rope(x) = x * cos + swapHalves(x) * sinSigned, where swapHalves(x) = [x2, x1] and
 * sinSigned = [-sin, sin]; that equals HF's x * cos + rotate_half(x) * sin with rotate_half = [-x2, x1].
 */
export function ropeTables(config: ModelConfig, positions: ArrayLike<number>): { cos: Float32Array; sinSigned: Float32Array } {
  const inv = ropeInverseFrequencies(config);
  const hd = config.headDim;
  const half = hd / 2;
  const cos = new Float32Array(positions.length * hd);
  const sinSigned = new Float32Array(positions.length * hd);
  for (let t = 0; t < positions.length; t++) {
    for (let i = 0; i < half; i++) {
      const angle = positions[t] * inv[i];
      const c = Math.cos(angle);
      const s = Math.sin(angle);
      cos[t * hd + i] = c;
      cos[t * hd + half + i] = c;
      sinSigned[t * hd + i] = -s;
      sinSigned[t * hd + half + i] = s;
    }
  }
  return { cos, sinSigned };
}
