// Backend choice: an unavailable requested backend fails with the reason and is not cached.
import { describe, expect, it } from 'vitest';
import { initTrainingBackend } from '../../worker/training/backend.js';

describe('training backend choice', () => {
  it('refuses unknown names and unavailable native backends, then still starts on wasm', async () => {
    await expect(initTrainingBackend({ prefer: 'gpu-please' as never, log: () => {} })).rejects.toThrow(/"gpu-please".*not one of tensorflow-gpu, tensorflow, wasm, cpu/);
    await expect(initTrainingBackend({ prefer: 'tensorflow-gpu', log: () => {} })).rejects.toThrow(/tensorflow-gpu was requested but @tensorflow\/tfjs-node-gpu not installed/);
    const lines: string[] = [];
    const backend = await initTrainingBackend({ log: (l) => lines.push(l) });
    expect(backend.name).toBe('wasm');
    expect(lines[0]).toContain('@tensorflow/tfjs-node-gpu not installed; @tensorflow/tfjs-node not installed');
  });
});
