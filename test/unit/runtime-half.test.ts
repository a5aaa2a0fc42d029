// Float16 weights served at 16 bits where the device has fast fp16 math (src/runtime/fast-half.ts):
// the detection reads the CPU's flags, and a graph on the file's own half-precision weights computes the
// model the float32 widening computes, within float16's rounding, in about half the bytes.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuinfoHasFastHalf, servesHalf } from '../../src/runtime/fast-half.js';
import { loadModel, type LoadedModel } from '../../src/runtime/load-model.js';
import { importModel } from '../../src/models/model-store.js';
import { writeGgufModel } from '../../src/synthetic-models/tiny-gguf.js';
import { shapeConfig } from '../../src/synthetic-models/tiny-model.js';

const dir = mkdtempSync(join(tmpdir(), 'hearth-half-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('fast fp16 detection', () => {
  it('Arm with the FP16 extension; x86 widens to float32 (ONNX Runtime has no x86 float16 MatMul)', () => {
    const sapphire = 'processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni avx512_bf16 avx512_fp16 amx_tile\n';
    const zen4 = 'processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni avx512_bf16\n';
    const graviton = 'processor\t: 0\nFeatures\t: fp asimd evtstrm aes fphp asimdhp cpuid\n';
    expect(cpuinfoHasFastHalf(sapphire, 'x64')).toBe(false);
    expect(cpuinfoHasFastHalf(zen4, 'x64')).toBe(false);
    expect(cpuinfoHasFastHalf(graviton, 'arm64')).toBe(true);
    expect(cpuinfoHasFastHalf('Features\t: fp asimd\n', 'arm64')).toBe(false);
    expect(cpuinfoHasFastHalf(sapphire, 'ia32')).toBe(false);
  });

  it('GPUs (CUDA, WebGPU) always, HEARTH_F16 overrides, anything else is refused', () => {
    expect(servesHalf('cuda:0', undefined)).toBe(true);
    expect(servesHalf('webgpu:0', undefined)).toBe(true);
    expect(servesHalf('cuda:0', 'off')).toBe(false);
    expect(servesHalf('cpu', 'on')).toBe(true);
    expect(() => servesHalf('cpu', 'yes')).toThrow(/auto, on or off/);
  });
});

describe('float16 weights at 16 bits', () => {
  // Untied (the generator's head then predicts a permutation of the last token, so greedy text moves on).
  const config = { ...shapeConfig('tiny', { layers: 2 }), hiddenSize: 256, numHeads: 4, numKvHeads: 2, headDim: 64, intermediateSize: 512, maxPositionEmbeddings: 256, tieWordEmbeddings: false };
  const home = join(dir, 'home');

  async function greedy(model: LoadedModel, prompt: number[], n: number): Promise<{ tokens: number[]; first: Float32Array }> {
    const kv = model.runner.newSequence();
    let [logits] = await model.runner.forward([{ tokens: prompt, kv }]);
    const first = logits.slice();
    const tokens: number[] = [];
    for (let i = 0; i < n; i++) {
      let best = 0;
      for (let v = 1; v < logits.length; v++) if (logits[v] > logits[best]) best = v;
      tokens.push(best);
      [logits] = await model.runner.forward([{ tokens: [best], kv }]);
    }
    return { tokens, first };
  }

  it('same greedy text and logits within float16 rounding as the float32 widening, in half the graph bytes', async () => {
    const file = join(dir, 'f16.gguf');
    writeGgufModel(file, { config, type: 'F16', seed: 3 });
    await importModel(home, file, { id: 'test/f16' });
    const half = await loadModel('test/f16', { home, maxContext: 256, half: true });
    const wide = await loadModel('test/f16', { home, maxContext: 256, half: false });
    const prompt = [1, 17, 42, 99, 3, 250, 7, 64];
    const a = await greedy(half, prompt, 24);
    const b = await greedy(wide, prompt, 24);
    expect(a.tokens).toEqual(b.tokens);
    expect(new Set(a.tokens).size).toBeGreaterThan(4); // the text moves on; not one token repeated
    let scale = 0, worst = 0;
    for (let v = 0; v < b.first.length; v++) { scale = Math.max(scale, Math.abs(b.first[v])); worst = Math.max(worst, Math.abs(a.first[v] - b.first[v])); }
    // Weights are the file's own halves in both; where a float16 kernel runs (Arm FP16, CUDA) each MatMul's
    // input and output are also rounded to float16 (relative step 2^-11 ≈ 4.9e-4), a few times per layer.
    // (On x86, ONNX Runtime casts the node back to float32 and the logits are equal.)
    expect(worst / scale).toBeLessThan(5e-3);
    // Matrices at 2 bytes instead of 4 (norms stay float32).
    expect(half.graphBytes).toBeLessThan(wide.graphBytes * 0.6);
    await half.runner.release();
    await wide.runner.release();
  });
});
