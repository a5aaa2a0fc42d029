// The frozen base's matrices inside a training graph, in the form the model file stores them: float32, or the
// ggml blocks repacked to MatMulNBits' layout (src/runtime/gguf-repack.ts, the bytes serving reads). One copy
// of each matrix: the forward product x·Wᵀ and the backward product dy·W both read it.
//
// The forward product x·Wᵀ of stored blocks is MatMulNBits on the CPU (`nbitsForward`), unpacked: its kernel
// dequantizes the blocks in one pass into its own buffer and runs the same float32 SGEMM. Elsewhere, and for every
// backward product dy·W, the blocks are dequantized inside the graph (a block at a time into a float [N, K] that
// lives only for the branch that needs it). Why not MatMulNBits' packed form, or a transposed 4-bit copy:
// - dy·W contracts over N, and a 4-bit block of Wᵀ would have one scale per element: no transposed copy is exact;
// - MatMulNBits' prepacked form is a second copy of the weights beside the initializer the backward reads
//   (the sessions load with prepacking off: graph-session.ts), which an 8B model cannot afford on 24 GiB;
// - the dequantized values are exactly the served ones ((q − zero)·scale + offset, as dequantizeNBits), so the
//   forward and backward products are plain float32 GEMMs over the served weights (MLAS, every core).
import { DataType, type GraphBuilder } from '../../../src/runtime/onnx-proto.js';
import type { NBitsWeights } from '../../../src/runtime/gguf-repack.js';
import { nbitsProduct } from '../../../src/runtime/nbits-product.js';

/** A frozen [N, K] matrix (HF layout: N outputs, K inputs) as a training graph reads it. */
export type FrozenMatrixData =
  | { kind: 'float'; N: number; K: number; data: () => Float32Array }
  | { kind: 'nbits'; N: number; K: number; weights: () => NBitsWeights };

/** Rows [from, to) of a frozen matrix (the LM head's vocabulary chunks), without copying the stored bytes. */
export function frozenRows(m: FrozenMatrixData, from: number, to: number): FrozenMatrixData {
  const N = to - from;
  if (m.kind === 'float') return { kind: 'float', N, K: m.K, data: () => m.data().subarray(from * m.K, to * m.K) };
  return {
    kind: 'nbits', N, K: m.K,
    weights: () => {
      const w = m.weights();
      const blocksPerRow = m.K / w.block;
      const rowBytes = (m.K * w.bits) / 8;
      return {
        bits: w.bits, block: w.block,
        packed: w.packed.subarray(from * rowBytes, to * rowBytes),
        scales: w.scales.subarray(from * blocksPerRow, to * blocksPerRow),
        offsets: w.offsets ? w.offsets.subarray(from * blocksPerRow, to * blocksPerRow) : null,
      };
    },
  };
}

const bytesOf = (a: Float32Array | Uint8Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/**
 * A frozen matrix's products in a graph. `forward(g, x)` = x [M, K] · Wᵀ → [M, N]; `backward(g, dy)` =
 * dy [M, N] · W → [M, K]. `g` is the (sub)graph the nodes go into; the weights are initializers of the root
 * graph, so an If's branches share them. Stored blocks are dequantized for each product, right before it: the
 * float copy lives for that product only (a layer's matrices all at once would be 4 bytes a weight: 0.9 GB for
 * an 8B layer), for one more pass over the blocks, which costs O(N·K) against the product's O(M·N·K).
 */
export class FrozenMatrix {
  private weight: string | null = null;
  /** The stored blocks as MatMulNBits reads them: packed [N, K/block, bytes], scales [N·K/block], offsets [N, K/block]. */
  private blocks: { packed: string; scales: string; offsets: string | null; bits: number; block: number } | null = null;

  /**
   * `nbitsForward`: x·Wᵀ over stored blocks by MatMulNBits (fp32 accuracy: ONNX Runtime's CPU kernel dequantizes
   * the blocks in one pass into its own buffer and runs the same SGEMM), plus Σ_block(x) · offsetsᵀ for formats
   * with per-block minimums, as serving computes it. An 8B layer's [14,336, 4,096] Q4_K product at 256 tokens:
   * 330–390 ms against 620–640 through the graph's Cast/Div/Floor dequantization. Off on GPU providers, which
   * keep the standard-op form every provider runs. The backward (dy·W contracts over N, across the blocks) always
   * dequantizes in the graph.
   */
  constructor(private readonly root: GraphBuilder, readonly name: string, readonly data: FrozenMatrixData, private readonly opts: { nbitsForward?: boolean } = {}) {}

  forward(g: GraphBuilder, x: string): string {
    const m = this.data;
    if (m.kind === 'nbits' && this.opts.nbitsForward) {
      const t = this.initializers();
      const offsets = t.offsets ? { name: t.offsets, layout: 'nk' as const } : null;
      return nbitsProduct(g, x, 2, { N: m.N, K: m.K, bits: t.bits, block: t.block, packed: t.packed, scales: t.scales, offsets }, 0);
    }
    return g.op('Gemm', [x, this.matrix(g)], { transB: 1 });
  }

  backward(g: GraphBuilder, dy: string): string {
    return g.op('MatMul', [dy, this.matrix(g)]);
  }

  /** Rows `index` [n] (int64) of W as float32 [n, K]: gathered first, so stored blocks are dequantized for n rows only. */
  rows(g: GraphBuilder, index: string): string {
    const m = this.data;
    if (m.kind === 'float') return g.op('Gather', [this.matrix(g), index], { axis: 0 });
    const t = this.blockViews(g);
    const pick = (name: string) => g.op('Gather', [name, index], { axis: 0 });
    return dequantizeBlocks(g, { ...t, packed: pick(t.packed), scales: pick(t.scales), offsets: t.offsets ? pick(t.offsets) : null }, [-1, m.K]);
  }

  /** The blocks with scales and offsets as [N, K/block, 1] (views made in `g`), as dequantizeBlocks reads them. */
  private blockViews(g: GraphBuilder): NonNullable<FrozenMatrix['blocks']> {
    const t = this.initializers();
    const perBlock = (name: string) => g.op('Reshape', [name, g.int64s([this.data.N, this.data.K / t.block, 1])]);
    return { ...t, scales: perBlock(t.scales), offsets: t.offsets ? perBlock(t.offsets) : null };
  }

  /** W [N, K] as float32 in graph `g`: the initializer itself, or its blocks dequantized there (anew at each call). */
  matrix(g: GraphBuilder): string {
    const m = this.data;
    if (m.kind === 'float') return (this.weight ??= this.root.floats(this.name, [m.N, m.K], m.data));
    return dequantizeBlocks(g, this.blockViews(g), [m.N, m.K]);
  }

  private initializers(): NonNullable<FrozenMatrix['blocks']> {
    if (this.blocks) return this.blocks;
    const m = this.data as Extract<FrozenMatrixData, { kind: 'nbits' }>;
    let cached: NBitsWeights | null = null;
    const w = () => (cached ??= m.weights());
    const { bits, block, offsets } = w();
    const blocksPerRow = m.K / block;
    this.blocks = {
      bits, block,
      packed: this.root.initializer(`${this.name}.packed`, DataType.UINT8, [m.N, blocksPerRow, (block * bits) / 8], () => w().packed),
      scales: this.root.initializer(`${this.name}.scales`, DataType.FLOAT, [m.N * blocksPerRow], () => bytesOf(w().scales)),
      offsets: offsets ? this.root.initializer(`${this.name}.offsets`, DataType.FLOAT, [m.N, blocksPerRow], () => bytesOf(w().offsets!)) : null,
    };
    cached = null; // the graph holds the bytes now (the getter above runs at most once per initializer)
    return this.blocks;
  }
}

/**
 * Blocks [R, K/block, block·bits/8] (uint8, MatMulNBits' packing: element 2j of a 4-bit block in byte j's low
 * nibble, 2j+1 in its high one) with scales and offsets [R, K/block, 1] → float32 values reshaped to `dims`:
 * (q − 2^(bits−1))·scale + offset, as MatMulNBits and dequantizeNBits read them. Standard ONNX ops only (Cast,
 * Div, Floor), so every execution provider runs it.
 */
export function dequantizeBlocks(g: GraphBuilder, t: { packed: string; scales: string; offsets: string | null; bits: number; block: number }, dims: (number | string)[] | string): string {
  const bytes = g.op('Cast', [t.packed], { to: DataType.FLOAT });
  let q: string;
  if (t.bits === 8) {
    q = bytes;
  } else {
    const high = g.op('Floor', [g.op('Div', [bytes, g.scalarFloat(16)])]);
    const low = g.op('Sub', [bytes, g.op('Mul', [high, g.scalarFloat(16)])]);
    const pairs = g.op('Concat', [g.op('Unsqueeze', [low, g.int64s([-1])]), g.op('Unsqueeze', [high, g.int64s([-1])])], { axis: -1 });
    q = g.op('Reshape', [pairs, g.int64s([0, 0, t.block])]);
  }
  let w = g.op('Mul', [g.op('Sub', [q, g.scalarFloat(1 << (t.bits - 1))]), t.scales]);
  if (t.offsets) w = g.op('Add', [w, t.offsets]);
  const shape = typeof dims === 'string' ? dims : g.int64s(dims.map((d) => (typeof d === 'number' ? d : -1)));
  return g.op('Reshape', [w, shape]);
}
