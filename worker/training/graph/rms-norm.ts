// RMSNorm and its backward as graph nodes: y = x · r · w with r = 1 / sqrt(mean(x²) + eps) over the last axis.
import type { GraphBuilder } from '../../../src/runtime/onnx-proto.js';

/** y = x · r · w; returns y and r (kept for the backward). */
export function rmsNorm(g: GraphBuilder, x: string, weight: string, eps: number): { y: string; r: string } {
  const r = rmsScale(g, x, eps);
  return { y: rmsNormed(g, x, r, weight), r };
}

/** r = 1 / sqrt(mean(x²) + eps) over the last axis. */
export function rmsScale(g: GraphBuilder, x: string, eps: number): string {
  const meanSquare = g.op('ReduceMean', [g.op('Mul', [x, x])], { axes: { ints: [-1] }, keepdims: 1 });
  return g.op('Reciprocal', [g.op('Sqrt', [g.op('Add', [meanSquare, g.scalarFloat(eps)])])]);
}

/** y = x · r · w from a scale r already made (a backward making the norm's output again from the kept r). */
export function rmsNormed(g: GraphBuilder, x: string, r: string, weight: string): string {
  return g.op('Mul', [g.op('Mul', [x, r]), weight]);
}

/**
 * dx of RMSNorm (the weight is frozen): with gx = dy · w and n the last axis' length,
 * dx = r · gx − x · r³ · mean(gx · x).
 */
export function rmsNormBackward(g: GraphBuilder, x: string, r: string, weight: string, dy: string): string {
  const gx = g.op('Mul', [dy, weight]);
  const dot = g.op('ReduceMean', [g.op('Mul', [gx, x])], { axes: { ints: [-1] }, keepdims: 1 });
  const r3 = g.op('Mul', [g.op('Mul', [r, r]), r]);
  return g.op('Sub', [g.op('Mul', [gx, r]), g.op('Mul', [x, g.op('Mul', [r3, dot])])]);
}
