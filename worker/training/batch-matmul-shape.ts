// The shapes of one TF.js BatchMatMul call, read once for the two kernels that replace the wasm backend's
// (wasm-kernels.ts: XNNPACK GEMMs; ort-kernels.ts: ONNX Runtime's MLAS), which cover the same cases.
import type * as tf from '@tensorflow/tfjs-core';

export const sizeOf = (shape: number[]) => shape.reduce((a, b) => a * b, 1);

export interface BatchMatMulShape {
  a: tf.TensorInfo;
  b: tf.TensorInfo;
  transposeA: boolean;
  transposeB: boolean;
  /** Product of each operand's batch dims (1 without batch dims). */
  batchA: number;
  batchB: number;
  /** The output's batch dims: the longer operand's. */
  batchShape: number[];
  /** op(A) is [m, k], op(B) is [k, n]. */
  m: number;
  k: number;
  n: number;
  /**
   * Whether the replacement kernels compute this call: float32 operands whose batch shapes are equal, or one of
   * which has none (the common cases; other broadcasts go to the stock kernel).
   */
  covered: boolean;
}

/** The shapes of a BatchMatMul kernel call; throws when the inner dimensions differ. */
export function batchMatMulShape(args: { inputs: unknown; attrs?: unknown }): BatchMatMulShape {
  const { a, b } = args.inputs as { a: tf.TensorInfo; b: tf.TensorInfo };
  const { transposeA, transposeB } = args.attrs as { transposeA: boolean; transposeB: boolean };
  const batchShapeA = a.shape.slice(0, -2);
  const batchShapeB = b.shape.slice(0, -2);
  const batchA = sizeOf(batchShapeA);
  const batchB = sizeOf(batchShapeB);
  const sameBatch = batchShapeA.join(',') === batchShapeB.join(',');
  const [ra, ca] = a.shape.slice(-2);
  const [rb, cb] = b.shape.slice(-2);
  const m = transposeA ? ca : ra;
  const k = transposeA ? ra : ca;
  const n = transposeB ? rb : cb;
  if (k !== (transposeB ? cb : rb)) throw new Error(`matMul: inner dimensions differ (${a.shape} x ${b.shape}, transposeA=${transposeA}, transposeB=${transposeB})`);
  return {
    a, b, transposeA, transposeB, batchA, batchB, m, k, n,
    batchShape: batchShapeA.length >= batchShapeB.length ? batchShapeA : batchShapeB,
    covered: a.dtype === 'float32' && b.dtype === 'float32' && (sameBatch || batchA === 1 || batchB === 1),
  };
}
