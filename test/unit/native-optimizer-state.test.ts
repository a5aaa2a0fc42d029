// A native run's AdamW carried across optim_steps (docs/art.md "Optimizer"): two steps whose moments travel through
// the optimizer state file equal one reference AdamW (plain arithmetic, bias correction included) over the same
// gradients, a fresh second step does not; the file round-trips exactly and a damaged one is refused.
import * as tf from '@tensorflow/tfjs-core';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adapterMoments, restoreAdapterMoments } from '../../worker/training/adapter-moments.js';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { readOptimizerState, writeCheckpoint } from '../../worker/training/checkpoint.js';
import { DEFAULT_LORA_CONFIG, LoraAdapters } from '../../worker/training/lora.js';
import { AdamW, type AdamWConfig } from '../../worker/training/optimizer.js';
import { decodeOptimizerState, encodeOptimizerState, OPTIMIZER_STATE_FILE, type OptimizerState } from '../../src/runtime/optimizer-state.js';
import { mulberry32 } from '../../worker/training/tensor-utils.js';
import { tinyConfig } from './training-helpers.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-optim-state-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
});

const CONFIG: AdamWConfig = { beta1: 0.9, beta2: 0.99, epsilon: 1e-8, weightDecay: 0.1 };
const LR = 0.01;
const cfg = tinyConfig({ numLayers: 1 });
const adapters = (seed = 1) => LoraAdapters.create(cfg, { ...DEFAULT_LORA_CONFIG, rank: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] }, seed);

function randomGradients(vars: tf.Variable[], seed: number): Float32Array[] {
  const random = mulberry32(seed);
  return vars.map((v) => Float32Array.from({ length: v.size }, () => 2 * random() - 1));
}

/** AdamW by hand, in float64: torch.optim.AdamW's update (decoupled decay, bias-corrected moments). */
function referenceAdamW(p0: Float32Array, grads: Float32Array[], c: AdamWConfig, lr: number): Float64Array {
  const p = Float64Array.from(p0);
  const m = new Float64Array(p.length);
  const v = new Float64Array(p.length);
  grads.forEach((g, t0) => {
    const t = t0 + 1;
    for (let i = 0; i < p.length; i++) {
      m[i] = c.beta1 * m[i] + (1 - c.beta1) * g[i];
      v[i] = c.beta2 * v[i] + (1 - c.beta2) * g[i] * g[i];
      const mHat = m[i] / (1 - c.beta1 ** t);
      const vHat = v[i] / (1 - c.beta2 ** t);
      p[i] = p[i] * (1 - lr * c.weightDecay) - (lr * mHat) / (Math.sqrt(vHat) + c.epsilon);
    }
  });
  return p;
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}

describe('AdamW carried through the optimizer state file', () => {
  it('two steps with carried moments = reference AdamW over the same gradients; a fresh second step differs', () => {
    const lora = adapters();
    const vars = lora.variables();
    const start = vars.map((v) => Float32Array.from(v.dataSync() as Float32Array));
    const g1 = randomGradients(vars, 11);
    const g2 = randomGradients(vars, 22);

    // Job 1: one step, its moments written to the file's bytes.
    const first = new AdamW(vars, CONFIG);
    tf.tidy(() => first.apply(g1.map((g, i) => tf.tensor(g, vars[i].shape)), LR));
    const bytes = encodeOptimizerState(adapterMoments(lora, first));
    first.dispose();
    const afterOne = vars.map((v) => Float32Array.from(v.dataSync() as Float32Array));

    // Job 2: a new optimizer (as a new worker job has) continues from the file.
    const state = decodeOptimizerState(bytes, lora.toPeftTensors());
    expect(state.step).toBe(1);
    const second = new AdamW(vars, CONFIG);
    restoreAdapterMoments(lora, second, state);
    tf.tidy(() => second.apply(g2.map((g, i) => tf.tensor(g, vars[i].shape)), LR));
    expect(second.steps).toBe(2);
    expect(adapterMoments(lora, second).step).toBe(2);
    second.dispose();

    let freshDiff = 0;
    vars.forEach((v, i) => {
      const expected = referenceAdamW(start[i], [g1[i], g2[i]], CONFIG, LR);
      expect(maxAbsDiff(v.dataSync(), expected)).toBeLessThan(1e-6);
      // A fresh AdamW from the same weights: the first step's moments and bias correction are lost.
      const fresh = referenceAdamW(afterOne[i], [g2[i]], CONFIG, LR);
      freshDiff = Math.max(freshDiff, maxAbsDiff(fresh, expected));
    });
    expect(freshDiff).toBeGreaterThan(1e-3);
    lora.dispose();
  });

  it('the state file round-trips exactly and refuses damaged or mismatched files', () => {
    const lora = adapters(2);
    const vars = lora.variables();
    const opt = new AdamW(vars, CONFIG);
    tf.tidy(() => opt.apply(randomGradients(vars, 5).map((g, i) => tf.tensor(g, vars[i].shape)), LR));
    const state = adapterMoments(lora, opt);
    const adapter = lora.toPeftTensors();
    const bytes = encodeOptimizerState(state);
    const back = decodeOptimizerState(bytes, adapter);
    expect(back.step).toBe(1);
    expect([...back.m.keys()].sort()).toEqual([...adapter.keys()].sort());
    for (const [name, t] of state.m) {
      expect(back.m.get(name)!.shape).toEqual(adapter.get(name)!.shape);
      expect(Array.from(back.m.get(name)!.data)).toEqual(Array.from(t.data));
      expect(Array.from(back.v.get(name)!.data)).toEqual(Array.from(state.v.get(name)!.data));
    }

    const flipped = Buffer.from(bytes);
    flipped[flipped.length - 3] ^= 0x40;
    expect(() => decodeOptimizerState(flipped, adapter)).toThrow(/damaged/);
    expect(() => decodeOptimizerState(bytes.subarray(0, bytes.length - 8), adapter)).toThrow(/unreadable/);
    expect(() => decodeOptimizerState(Buffer.from('not a file'), adapter)).toThrow(/unreadable/);
    const fewer: OptimizerState = { step: 1, m: new Map([...state.m].slice(1)), v: new Map([...state.v].slice(1)) };
    expect(() => decodeOptimizerState(encodeOptimizerState(fewer), adapter)).toThrow(/no exp_avg for/);
    const emptyAtOne: OptimizerState = { step: 1, m: new Map(), v: new Map() };
    expect(() => decodeOptimizerState(encodeOptimizerState(emptyAtOne), adapter)).toThrow(/no exp_avg/);
    expect(() => decodeOptimizerState(encodeOptimizerState({ ...state, step: 0 }))).toThrow(/step 0 must hold no moments/);
    // A fresh state (step 0) restores nothing: the optimizer stays at its first step.
    const fresh = new AdamW(vars, CONFIG);
    restoreAdapterMoments(lora, fresh, decodeOptimizerState(encodeOptimizerState({ step: 0, m: new Map(), v: new Map() }), adapter));
    expect(fresh.steps).toBe(0);
    fresh.dispose();
    opt.dispose();
    lora.dispose();
  });

  it('is written inside the checkpoint folder and verified when read; a checkpoint without one starts fresh', async () => {
    const lora = adapters(3);
    const vars = lora.variables();
    const opt = new AdamW(vars, CONFIG);
    tf.tidy(() => opt.apply(randomGradients(vars, 9).map((g, i) => tf.tensor(g, vars[i].shape)), LR));
    const contents = { kind: 'lora' as const, lora: lora.config, tensors: lora.toPeftTensors(), baseModel: 'tiny' };
    const withState = join(root, 'step-1');
    await writeCheckpoint(withState, { ...contents, optimizer: adapterMoments(lora, opt) });
    expect((await readOptimizerState(withState))!.step).toBe(1);
    const without = join(root, 'step-0');
    await writeCheckpoint(without, contents);
    expect(await readOptimizerState(without)).toBeNull();

    const file = join(withState, OPTIMIZER_STATE_FILE);
    const damaged = readFileSync(file);
    damaged[damaged.length - 1] ^= 0x01;
    writeFileSync(file, damaged);
    await expect(readOptimizerState(withState)).rejects.toThrow(/damaged/);
    opt.dispose();
    lora.dispose();
  });
});
