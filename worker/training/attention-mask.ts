// The additive attention mask of a token batch, as plain numbers (the TF.js engine's; the graph engine makes the same
// mask on the device: graph/inputs-graph.ts).
import type { TokenBatch } from './model.js';

/**
 * [rows, 1, 1, length, length]: 0 where key j is visible from query i (same packed sequence, j <= i, and within
 * the sliding window if the model has one), -1e9 elsewhere.
 */
export function attentionMask(batch: TokenBatch, slidingWindow: number | null = null): Float32Array {
  const { rows, length: T, segmentIds } = batch;
  const mask = new Float32Array(rows * T * T).fill(-1e9);
  for (let b = 0; b < rows; b++) {
    for (let i = 0; i < T; i++) {
      const seg = segmentIds[b * T + i];
      const rowOffset = (b * T + i) * T;
      const first = slidingWindow ? Math.max(0, i - slidingWindow + 1) : 0;
      for (let j = first; j <= i; j++) if (segmentIds[b * T + j] === seg) mask[rowOffset + j] = 0;
    }
  }
  return mask;
}
