// Rotary position embedding as graph nodes, HF's rotate_half convention (worker/training/rope.ts makes the tables):
// rope(x) = x · cos + swap(x) · sinSigned, swap(x) = [x2, x1]. It is linear, and swap is its own transpose, so
// the backward is dx = dy · cos + swap(dy · sinSigned).
import type { GraphBuilder } from '../../../src/runtime/onnx-proto.js';

/** [x2, x1]: the halves of the last axis (length hd) exchanged. */
function swapHalves(g: GraphBuilder, x: string, hd: number): string {
  const first = g.op('Slice', [x, g.int64s([0]), g.int64s([hd / 2]), g.int64s([-1])]);
  const second = g.op('Slice', [x, g.int64s([hd / 2]), g.int64s([hd]), g.int64s([-1])]);
  return g.op('Concat', [second, first], { axis: -1 });
}

/** x [M, heads, hd] rotated; cos and sinSigned [M, 1, hd]. */
export function rotary(g: GraphBuilder, x: string, cos: string, sinSigned: string, hd: number): string {
  return g.op('Add', [g.op('Mul', [x, cos]), g.op('Mul', [swapHalves(g, x, hd), sinSigned])]);
}

export function rotaryBackward(g: GraphBuilder, dy: string, cos: string, sinSigned: string, hd: number): string {
  return g.op('Add', [g.op('Mul', [dy, cos]), swapHalves(g, g.op('Mul', [dy, sinSigned]), hd)]);
}
