// Backend choice: an unavailable requested backend fails with the reason and is not cached; the default is
// the best one this machine has (test/helpers/hardware.ts), so the test holds on CPU and GPU machines.
import { describe, expect, it } from 'vitest';
import { initTrainingBackend, type BackendName } from '../../worker/training/backend.js';
import { machine } from '../helpers/hardware.js';

const expected: BackendName = machine.tfjsNodeGpu ? 'tensorflow-gpu' : machine.tfjsNode ? 'tensorflow' : 'wasm';

describe('training backend choice', () => {
  it(`refuses unknown names and unavailable native backends, then starts on the best one here (${expected})`, async () => {
    await expect(initTrainingBackend({ prefer: 'gpu-please' as never, log: () => {} })).rejects.toThrow(/"gpu-please".*not one of tensorflow-gpu, tensorflow, wasm, cpu/);
    if (!machine.tfjsNodeGpu) {
      await expect(initTrainingBackend({ prefer: 'tensorflow-gpu', log: () => {} })).rejects.toThrow(/tensorflow-gpu was requested but @tensorflow\/tfjs-node-gpu not installed/);
    }
    const lines: string[] = [];
    const backend = await initTrainingBackend({ log: (l) => lines.push(l) });
    expect(backend.name).toBe(expected);
    if (expected === 'wasm') expect(lines[0]).toContain('@tensorflow/tfjs-node-gpu not installed; @tensorflow/tfjs-node not installed');
    else expect(lines[0]).toContain('loaded (native TensorFlow)');
  });
});
