// The parallel generators (src/synthetic-models/synthetic-files.ts): the GGUF they write is writeGgufModel's, byte for
// byte, and the HF folder holds the same synthetic weights (exactly in F32, rounded in BF16).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGgufParallel, writeSyntheticHfFolder } from '../../src/synthetic-models/synthetic-files.js';
import { syntheticWeights, writeGgufModel } from '../../src/synthetic-models/tiny-gguf.js';
import { shapeConfig } from '../../src/synthetic-models/tiny-model.js';
import { readModelWeights } from '../../src/runtime/hf-model.js';

const dir = mkdtempSync(join(tmpdir(), 'hearth-synthetic-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('synthetic model files on worker threads', () => {
  it('write the same GGUF bytes as writeGgufModel, for a llama (permuted q/k rows) and a qwen2 config', async () => {
    for (const architecture of ['llama', 'qwen2'] as const) {
      const config = shapeConfig('tiny', { architecture, layers: 2 });
      writeGgufModel(join(dir, `${architecture}-a.gguf`), { config, type: 'Q4_K', seed: 5 });
      const info = await writeGgufParallel(join(dir, `${architecture}-b.gguf`), { config, type: 'Q4_K', seed: 5 }, { threads: 2 });
      const a = readFileSync(join(dir, `${architecture}-a.gguf`)), b = readFileSync(join(dir, `${architecture}-b.gguf`));
      expect(info.bytes).toBe(a.length);
      expect(b.equals(a)).toBe(true);
    }
  });

  it('write the synthetic weights as a HF folder: exact in F32, within bf16 rounding in BF16', async () => {
    const config = shapeConfig('tiny', { layers: 2 });
    const expected = syntheticWeights(config, 9);
    await writeSyntheticHfFolder(join(dir, 'f32'), config, { seed: 9, dtype: 'F32', threads: 2 });
    await writeSyntheticHfFolder(join(dir, 'bf16'), config, { seed: 9, dtype: 'BF16', threads: 2 });
    const f32 = readModelWeights(join(dir, 'f32'));
    const bf16 = readModelWeights(join(dir, 'bf16')).weights;
    expect(f32.config.numLayers).toBe(2);
    expect([...f32.weights.keys()].sort()).toEqual([...expected.keys()].sort());
    for (const [name, w] of expected) {
      expect(f32.weights.get(name)!.data).toEqual(w.data);
      const b = bf16.get(name)!.data;
      for (let i = 0; i < w.data.length; i += 97) expect(Math.abs(b[i] - w.data[i])).toBeLessThanOrEqual(Math.abs(w.data[i]) * 2 ** -8 + 1e-30);
    }
  });
});
