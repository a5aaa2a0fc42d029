// x · Wᵀ over a matrix kept in its file's ggml blocks, repacked to MatMulNBits' layout (gguf-repack.ts): the
// MatMulNBits node (codes with one scale a block, zero point 2^(bits−1)), plus Σ_block(x) · offsets for the formats
// whose blocks also carry a minimum (w = (q − z)·s + m, so x·w is MatMulNBits' product plus each block's input sum
// times its minimum). Serving's decoder (decoder-quantized.ts) and the trainer's frozen matrices
// (worker/training/graph/frozen-matrix.ts) both build their products with it.
import type { GraphBuilder } from './onnx-proto.js';

/** A block-stored [N, K] matrix as a graph's initializers name it. */
export interface NBitsMatrix {
  /** N outputs, K inputs, `bits` a code, `block` codes a block. */
  N: number;
  K: number;
  bits: number;
  block: number;
  /** Codes [N, K/block, block·bits/8] (uint8) and scales [N·K/block] (float32). */
  packed: string;
  scales: string;
  /**
   * Per-block minimums, or null: [K/block, N] ('kn': a MatMul, any input rank), as serving stores them, or
   * [N, K/block] ('nk': a Gemm with transB, rank-2 inputs), as training stores them for its backward's dequantization.
   */
  offsets: { name: string; layout: 'kn' | 'nk' } | null;
}

/**
 * x [..., K] (of rank `rank`) · Wᵀ → [..., N]. `accuracyLevel` is MatMulNBits' (0: float32 math, the kernel
 * dequantizing the blocks into its own buffer; 4: int8 activations, faster and not exact).
 */
export function nbitsProduct(g: GraphBuilder, x: string, rank: number, w: NBitsMatrix, accuracyLevel: number): string {
  const y = g.op('MatMulNBits', [x, w.packed, w.scales], { K: w.K, N: w.N, bits: w.bits, block_size: w.block, accuracy_level: accuracyLevel }, 'com.microsoft');
  if (!w.offsets) return y;
  if (w.offsets.layout === 'nk' && rank !== 2) throw new Error(`offsets laid out [N, K/block] need a rank-2 input, not rank ${rank}`);
  const sums = blockSums(g, x, rank, w.K, w.block);
  const correction = w.offsets.layout === 'kn' ? g.op('MatMul', [sums, w.offsets.name]) : g.op('Gemm', [sums, w.offsets.name], { transB: 1 });
  return g.op('Add', [y, correction]);
}

/** Block sums already made, per graph and input: q, k and v (gate and up, the head's chunks) share one. */
const madeBlockSums = new WeakMap<GraphBuilder, Map<string, string>>();

/** Σ over each block of x [..., K] → [..., K/block], made once per (sub)graph, input and block size. */
function blockSums(g: GraphBuilder, x: string, rank: number, K: number, block: number): string {
  let made = madeBlockSums.get(g);
  if (!made) madeBlockSums.set(g, (made = new Map()));
  const key = `${x}/${block}`;
  let sums = made.get(key);
  if (!sums) {
    const blocks = g.op('Reshape', [x, g.int64s([...Array<number>(rank - 1).fill(0), K / block, block])]);
    sums = g.op('ReduceSum', [blocks, g.int64s([-1])], { keepdims: 0 });
    made.set(key, sums);
  }
  return sums;
}
