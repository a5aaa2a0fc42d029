// Rotary position embedding tables for the trainer, in the layout its TF.js ops want (Hugging Face "rotate_half"
// convention); the frequencies are serving's, so a trained model sees exactly the positions it is served with.
import type { ModelConfig } from '../../src/runtime/model-config.js';
import { inverseFrequencies } from '../../src/runtime/rope.js';

/** inv_freq[i] = theta^(-2i/headDim), with Llama-3 frequency scaling when configured: serving's tables (src/runtime/rope.ts). */
export function ropeInverseFrequencies(config: ModelConfig): Float64Array {
  const type = config.ropeScaling?.type;
  if (type !== undefined && type !== 'llama3') throw new Error(`rope_scaling type ${String(type)} is not supported`);
  return inverseFrequencies(config);
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
