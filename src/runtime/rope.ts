// Rotary embedding tables (HF rotate_half convention): cos/sin of position × inverse frequency,
// with optional Llama-3 frequency scaling.
import type { ModelConfig, RopeScaling } from './model-config.js';

/** Per-frequency divisors for Llama-3 rope scaling (1 = unchanged), as llama.cpp's rope_freqs stores them. */
export function llamaRopeFactors(headDim: number, theta: number, s: RopeScaling): number[] {
  const lowWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
  const highWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
  const out: number[] = [];
  for (let i = 0; i < headDim / 2; i++) {
    const invFreq = 1 / theta ** ((2 * i) / headDim);
    const wavelen = (2 * Math.PI) / invFreq;
    if (wavelen < highWavelen) out.push(1);
    else if (wavelen > lowWavelen) out.push(s.factor);
    else {
      const smooth = (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      out.push(1 / ((1 - smooth) / s.factor + smooth));
    }
  }
  return out;
}

export function inverseFrequencies(config: ModelConfig): Float64Array {
  const half = config.headDim / 2;
  const inv = new Float64Array(half);
  const factors = config.ropeScaling ? llamaRopeFactors(config.headDim, config.ropeTheta, config.ropeScaling) : null;
  for (let i = 0; i < half; i++) inv[i] = 1 / config.ropeTheta ** ((2 * i) / config.headDim) / (factors ? factors[i] : 1);
  return inv;
}

/** cos and sin tables of shape [maxPositions, headDim/2], row-major. */
export function ropeTables(config: ModelConfig, maxPositions: number): { cos: Float32Array; sin: Float32Array } {
  const inv = inverseFrequencies(config);
  const half = inv.length;
  const cos = new Float32Array(maxPositions * half);
  const sin = new Float32Array(maxPositions * half);
  for (let p = 0; p < maxPositions; p++)
    for (let i = 0; i < half; i++) {
      const a = p * inv[i];
      cos[p * half + i] = Math.cos(a);
      sin[p * half + i] = Math.sin(a);
    }
  return { cos, sin };
}
