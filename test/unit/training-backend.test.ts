// The wasm kernel patches must give the same numbers as the reference cpu backend.
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { tokenLogprobs, weightedNll } from '../../worker/training/losses.js';

const rand = (shape: number[], seed: number) => tf.randomNormal(shape, 0, 1, 'float32', seed);

/** Run `f` on wasm and on cpu; return the largest absolute difference of the outputs. */
async function maxDiffWasmVsCpu(f: () => tf.Tensor): Promise<number> {
  const outs: Float32Array[] = [];
  for (const backend of ['wasm', 'cpu']) {
    await tf.setBackend(backend);
    const out = tf.tidy(f);
    outs.push(out.dataSync() as Float32Array);
    out.dispose();
  }
  await tf.setBackend('wasm');
  expect(outs[0].length).toBe(outs[1].length);
  return outs[0].reduce((m, v, i) => Math.max(m, Math.abs(v - outs[1][i])), 0);
}

describe('training backend', () => {
  let lines: string[] = [];
  beforeAll(async () => {
    lines = [];
    // These tests check Hearth's wasm kernels, so they ask for wasm whatever else this machine has.
    const backend = await initTrainingBackend({ prefer: 'wasm', log: (l) => lines.push(l) });
    expect(backend.name).toBe('wasm');
  });

  it('logs one line naming the backend and the reason', () => {
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/TF\.js backend: wasm \(simd=(true|false), threads=1\) — requested explicitly( with patched [A-Za-z/]+)?(; GEMMs and the LM head on (ONNX Runtime \(MLAS, \d+ threads?\)|XNNPACK.*))?$/);
  });

  const cases: [string, number[], number[], boolean, boolean][] = [
    ['plain 2-D', [7, 5], [5, 3], false, false],
    ['transposeA', [5, 7], [5, 3], true, false],
    ['transposeB', [7, 5], [3, 5], false, true],
    ['both transposed', [5, 7], [3, 5], true, true],
    ['batched', [2, 3, 7, 5], [2, 3, 5, 4], false, false],
    ['batched, transposeB', [2, 3, 7, 5], [2, 3, 4, 5], false, true],
    ['batched x 2-D (folded)', [4, 7, 5], [5, 3], false, false],
    ['2-D x batched', [7, 5], [4, 5, 3], false, false],
  ];
  for (const [name, aShape, bShape, ta, tb] of cases) {
    it(`BatchMatMul ${name} matches cpu`, async () => {
      const diff = await maxDiffWasmVsCpu(() => tf.matMul(rand(aShape, 1) as tf.Tensor3D, rand(bShape, 2) as tf.Tensor3D, ta, tb));
      expect(diff).toBeLessThan(1e-5);
    });
  }

  it('BatchMatMul stays right when one buffer is seen through two shapes (reshape aliasing)', async () => {
    const diff = await maxDiffWasmVsCpu(() => {
      const b = rand([4, 6], 1);
      const first = tf.matMul(rand([3, 4], 2), b);
      const second = tf.matMul(rand([3, 8], 3), tf.reshape(b, [8, 3]));
      return tf.concat([tf.reshape(first, [-1]), tf.reshape(second, [-1])]);
    });
    expect(diff).toBeLessThan(1e-5);
  });

  it('embedding gradient (UnsortedSegmentSum) matches cpu', async () => {
    const diff = await maxDiffWasmVsCpu(() => {
      const table = rand([10, 3], 4);
      const ids = tf.tensor1d([1, 1, 3, 9, 0], 'int32');
      return tf.grad((t: tf.Tensor) => tf.sum(tf.mul(tf.gather(t, ids), rand([5, 3], 5))))(table);
    });
    expect(diff).toBeLessThan(1e-6);
  });

  it('fused token logprob gradient matches cpu', async () => {
    const targets = new Int32Array([1, 5, 7, 3, 2, 0]);
    const weights = new Float32Array(6).fill(1 / 6);
    const diff = await maxDiffWasmVsCpu(() =>
      tf.grad((x: tf.Tensor) => weightedNll(tokenLogprobs(x as tf.Tensor2D, targets), weights))(rand([6, 16], 6)),
    );
    expect(diff).toBeLessThan(1e-6);
  });
});
