// A cancel heard while a micro-batch computes (src/runtime/compute-cancel.ts) stops the graph engine before its next
// ONNX Runtime run, whichever run that is (in the forward, in the custom gradient's backward inside TF.js's tape,
// in the head), and leaves nothing behind: no TF.js tensor, no gradient summed on the device optimizer, no changed
// adapter. The next step on the same model and optimizer equals a step that was never interrupted.
import * as tf from '@tensorflow/tfjs-core';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { weightsSource } from '../../src/runtime/weight-source.js';
import { cancelComputeIn, computeCancelMemory, ComputeCancelledError, endCancellableCompute, startCancellableCompute, throwIfComputeCancelled } from '../../src/runtime/compute-cancel.js';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { buildMicroBatch, trainedPositions, type MicroBatch } from '../../worker/training/data.js';
import { GraphLoraModel } from '../../worker/training/graph/graph-model.js';
import { GraphSession } from '../../worker/training/graph/graph-session.js';
import { weightedNll } from '../../worker/training/losses.js';
import { DEFAULT_ADAMW } from '../../worker/training/optimizer.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { logprobsAt } from '../../worker/training/token-logprobs.js';
import { optimizerStep } from '../../worker/training/train-step.js';
import { packedSequences, seededLora, tinyConfig } from './training-helpers.js';

beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
}, 180_000);

afterEach(() => {
  vi.restoreAllMocks();
});

const config = tinyConfig({ numLayers: 2 });

/** A model, its device optimizer, and a step of two micro-batches of packedSequences. */
function job() {
  const lora = seededLora(config);
  const model = GraphLoraModel.build(config, weightsSource(randomWeights(config, 3)), lora, { providers: ['cpu'] });
  const optimizer = model.startDeviceOptimizer(DEFAULT_ADAMW);
  const sequences = packedSequences(config.vocabSize);
  const mbs = [sequences.slice(0, 2), sequences.slice(2)].map((part, k) => buildMicroBatch(part, part.map((_, i) => 2 * k + i)));
  const lossOf = (mb: MicroBatch) => {
    const at = trainedPositions(mb);
    return weightedNll(logprobsAt(model, mb, at, true), Float32Array.from(at.index, (_, j) => ((j % 3) - 0.7) / at.index.length));
  };
  const step = () => optimizerStep(optimizer, mbs, lossOf, { learningRate: 1e-2, maxGradNorm: 1 });
  const adapters = () => {
    optimizer.readBack();
    return lora.variables().map((v) => Array.from(v.dataSync() as Float32Array));
  };
  const dispose = () => {
    optimizer.dispose();
    model.dispose();
  };
  return { step, adapters, dispose };
}

describe('a cancel within a micro-batch (graph engine, optimizer on the device)', () => {
  it('stops before the next ONNX Runtime run wherever it lands, and the next step equals an uninterrupted one', async () => {
    // The reference: two steps never interrupted, and how many runs a step makes.
    const reference = job();
    const runs = vi.spyOn(GraphSession.prototype, 'run');
    const first = await reference.step();
    const runsPerStep = runs.mock.calls.length;
    const second = await reference.step();
    const expected = reference.adapters();
    reference.dispose();
    runs.mockRestore();
    expect(runsPerStep).toBeGreaterThan(2 * (config.numLayers + 1)); // a forward and a backward per micro-batch

    const interrupted = job();
    expect((await interrupted.step()).loss).toBe(first.loss);
    const tensorsBefore = tf.memory().numTensors;
    // Cut after the first run, in the middle, in the second micro-batch, and before the last run.
    const cuts = [...new Set([1, Math.floor(runsPerStep / 4), Math.floor(runsPerStep / 2), Math.floor((3 * runsPerStep) / 4), runsPerStep - 1])];
    for (const cut of cuts) {
      const token = startCancellableCompute();
      let made = 0;
      const original = GraphSession.prototype.run;
      const spy = vi.spyOn(GraphSession.prototype, 'run').mockImplementation(function (this: GraphSession, feeds) {
        const out = original.call(this, feeds);
        if (++made === cut) cancelComputeIn(computeCancelMemory(), token); // as the pulse thread does, mid-compute
        return out;
      });
      await expect(interrupted.step(), `cut after run ${cut} of ${runsPerStep}`).rejects.toBeInstanceOf(ComputeCancelledError);
      expect(made, `cut after run ${cut}`).toBe(cut); // no run after the cancel
      spy.mockRestore();
      endCancellableCompute(token);
      expect(tf.memory().numTensors, `TF.js tensors after a cut at run ${cut}`).toBe(tensorsBefore);
    }
    // The cell still names the last cut's stretch: the next stretch runs to its end.
    const token = startCancellableCompute();
    const after = await interrupted.step();
    endCancellableCompute(token);
    expect(after.loss).toBe(second.loss);
    expect(after.gradNorm).toBe(second.gradNorm);
    expect(interrupted.adapters()).toEqual(expected);
    interrupted.dispose();
  }, 180_000);
});

describe('compute-cancel tokens', () => {
  it('a cancel stops only the stretch it names, and only while it runs', () => {
    const memory = computeCancelMemory();
    const a = startCancellableCompute();
    cancelComputeIn(memory, a + 1000);
    expect(() => throwIfComputeCancelled()).not.toThrow();
    cancelComputeIn(memory, a);
    expect(() => throwIfComputeCancelled()).toThrow(ComputeCancelledError);
    endCancellableCompute(a);
    expect(() => throwIfComputeCancelled()).not.toThrow(); // ended: nothing to stop
    const b = startCancellableCompute();
    expect(b).not.toBe(a);
    expect(() => throwIfComputeCancelled()).not.toThrow(); // the cell still names a, not b
    endCancellableCompute(a); // a stale end leaves b cancellable
    cancelComputeIn(memory, b);
    expect(() => throwIfComputeCancelled()).toThrow(ComputeCancelledError);
    endCancellableCompute(b);
  });
});
