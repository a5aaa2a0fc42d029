// The frozen base's products on a device session (device-products.ts): the same values and gradients as the
// TF.js reference, through the CPU provider everywhere and through the WebGPU provider on a real adapter
// (SwiftShader's Vulkan driver where chromium is installed, as in runtime-webgpu.test.ts; skipped, saying so,
// without one).
import * as tf from '@tensorflow/tfjs-core';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { DeviceFrozenProducts } from '../../worker/training/device-products.js';
import { frozenLinear, setFrozenProductsDevice } from '../../worker/training/frozen-linear.js';
import { ortDeviceProbes } from '../../src/runtime/device-choice.js';
import { relL2 } from './training-helpers.js';
import { useSwiftShaderUnlessNamed } from '../helpers/webgpu.js';
import { HEAD_CHUNK_ROWS, headTokenLogprobs } from '../../worker/training/head-logprobs.js';

useSwiftShaderUnlessNamed();

beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
}, 180_000);
afterEach(() => setFrozenProductsDevice(null));

/** frozenLinear's value and x-gradient through `products`, against tf.matMul. */
function check(products: DeviceFrozenProducts): void {
  const wData = Float32Array.from({ length: 80 * 48 }, (_, i) => Math.sin(i * 0.37) * 0.2);
  const frozen = { data: wData, rows: 80, cols: 48 };
  const wT = tf.tensor2d(wData, [80, 48]);
  const x = tf.randomNormal([37, 48], 0, 1, 'float32', 2) as tf.Tensor2D;
  const dy = tf.randomNormal([37, 80], 0, 1, 'float32', 3);
  setFrozenProductsDevice(products);
  const value = frozenLinear(x, frozen).dataSync();
  const grad = tf.grad((h: tf.Tensor) => tf.sum(tf.mul(frozenLinear(h as tf.Tensor2D, frozen), dy)))(x).dataSync();
  setFrozenProductsDevice(null);
  expect(relL2(value, tf.matMul(x, wT, false, true).dataSync())).toBeLessThan(1e-5);
  expect(relL2(grad, tf.grad((h: tf.Tensor) => tf.sum(tf.mul(tf.matMul(h as tf.Tensor2D, wT, false, true), dy)))(x).dataSync())).toBeLessThan(1e-5);
  // The weight went to the device once, for both products.
  expect(products.residentBytes).toBe(wData.byteLength);
  tf.dispose([wT, x, dy]);
}

/** The fused LM head over a frozen head (two vocabulary chunks) through `products`, against the host path. */
function checkHead(products: DeviceFrozenProducts): void {
  const vocab = HEAD_CHUNK_ROWS + 300, d = 32, n = 9;
  const head = { data: Float32Array.from({ length: vocab * d }, (_, i) => Math.cos(i * 0.013) * 0.3), rows: vocab, cols: d };
  const hidden = tf.randomNormal([n, d], 0, 1, 'float32', 4) as tf.Tensor2D;
  const targets = Int32Array.from({ length: n }, (_, i) => (i * 977) % vocab);
  const weights = tf.tensor1d(Array.from({ length: n }, (_, i) => (i % 3) - 1));
  const run = () => {
    let entropy: Float32Array = new Float32Array(0);
    const lp = headTokenLogprobs(hidden, head, false, targets, (e) => (entropy = e.slice())).dataSync().slice();
    const grad = tf.grad((h: tf.Tensor) => tf.sum(tf.mul(headTokenLogprobs(h as tf.Tensor2D, head, false, targets), weights)))(hidden).dataSync();
    return { lp, entropy, grad };
  };
  const host = run();
  setFrozenProductsDevice(products);
  const dev = run();
  setFrozenProductsDevice(null);
  expect(relL2(dev.lp, host.lp)).toBeLessThan(1e-5);
  expect(relL2(dev.entropy, host.entropy)).toBeLessThan(1e-5);
  expect(relL2(dev.grad, host.grad)).toBeLessThan(1e-5);
  expect(products.residentBytes).toBe(head.data.byteLength); // both chunks, once
  tf.dispose([hidden, weights]);
}

describe('frozen products on a device session', () => {
  it('through the CPU provider: same value and gradient as the reference', () => {
    check(new DeviceFrozenProducts('cpu', ['cpu']));
  });

  it('the fused LM head over a frozen head: same logprobs, entropy and gradient as the host path', () => {
    checkHead(new DeviceFrozenProducts('cpu', ['cpu']));
  });

  it('through WebGPU on a real adapter (skipped without one)', async (ctx) => {
    const problem = await ortDeviceProbes().webgpu();
    if (problem) {
      console.log(`training-device-products: WebGPU check SKIPPED, no adapter (${problem})`);
      ctx.skip();
    }
    check(new DeviceFrozenProducts('webgpu:0', ['webgpu', 'cpu']));
    checkHead(new DeviceFrozenProducts('webgpu:0', ['webgpu', 'cpu']));
  });
});
