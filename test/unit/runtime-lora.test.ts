// LoRA adapters served without merging: per-row adapter inputs must equal the merged-weight model,
// rows without an adapter must equal the base model, in the same batch.
import { describe, expect, it, beforeAll, afterAll } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ModelConfig, Weights } from '../../src/runtime/model-config.js';
import { buildDecoderGraph, type AttentionKind } from '../../src/runtime/llama-graph.js';
import { createSession, ModelRunner } from '../../src/runtime/runner.js';
import { loadLoraAdapter } from '../../src/runtime/lora.js';
import { writeSafetensors } from '../../src/runtime/safetensors.js';
import { seededRandom } from '../../src/runtime/generate.js';
import { randomWeights, tinyConfig } from '../../src/synthetic-models/tiny-model.js';
import { referenceLogits } from './runtime-reference.js';

let dir: string;
beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'hearth-lora-')); });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MODULES: Record<string, 'self_attn' | 'mlp'> = { q_proj: 'self_attn', k_proj: 'self_attn', v_proj: 'self_attn', o_proj: 'self_attn', gate_proj: 'mlp', up_proj: 'mlp', down_proj: 'mlp' };

/** Write a random PEFT adapter and return the merged weights W + (alpha/r)·B·A. */
function writeAdapter(path: string, config: ModelConfig, base: Weights, targets: string[], r: number, alpha: number, seed: number): Weights {
  const random = seededRandom(seed);
  const tensors: Weights = new Map();
  const merged: Weights = new Map([...base].map(([k, t]) => [k, { shape: t.shape, data: t.data.slice() }]));
  for (let layer = 0; layer < config.numLayers; layer++) {
    for (const m of targets) {
      const name = `model.layers.${layer}.${MODULES[m]}.${m}`;
      const [out, inDim] = base.get(`${name}.weight`)!.shape;
      const A = Float32Array.from({ length: r * inDim }, () => (random() - 0.5) * 0.6);
      const B = Float32Array.from({ length: out * r }, () => (random() - 0.5) * 0.6);
      tensors.set(`base_model.model.${name}.lora_A.weight`, { shape: [r, inDim], data: A });
      tensors.set(`base_model.model.${name}.lora_B.weight`, { shape: [out, r], data: B });
      const W = merged.get(`${name}.weight`)!.data;
      for (let o = 0; o < out; o++) for (let i = 0; i < inDim; i++) {
        let s = 0;
        for (let k = 0; k < r; k++) s += B[o * r + k] * A[k * inDim + i];
        W[o * inDim + i] += (alpha / r) * s;
      }
    }
  }
  mkdirSync(path, { recursive: true });
  writeSafetensors(join(path, 'adapter_model.safetensors'), tensors);
  writeFileSync(join(path, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r, lora_alpha: alpha, target_modules: targets, bias: 'none' }));
  return merged;
}

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

describe('LoRA at inference', () => {
  for (const [attention, headDim] of [['gqa', 16], ['standard', 16], ['gqa', 8], ['onnx23', 8]] as [AttentionKind, number][]) {
    it(`${attention} (head_dim ${headDim}): adapter rows match merged weights, base rows match the base`, async () => {
      const config = tinyConfig({ architecture: 'qwen2', overrides: { hiddenSize: 64, numHeads: 64 / headDim / 1, numKvHeads: 64 / headDim / 2, headDim, intermediateSize: 96, numLayers: 2, vocabSize: 300 } }, 300);
      const base = randomWeights(config, 11, 0.2);
      const mergedAll = writeAdapter(join(dir, `all-${attention}-${headDim}`), config, base, Object.keys(MODULES), 4, 8, 1);
      const mergedQv = writeAdapter(join(dir, `qv-${attention}-${headDim}`), config, base, ['q_proj', 'v_proj'], 2, 4, 2);
      const { session } = await createSession(buildDecoderGraph(config, base, { attention, maxPositions: 256, lora: true }), { intraOpThreads: 1 });
      const runner = new ModelRunner(session, config, attention, 256, 'cpu', true);
      const all = loadLoraAdapter(join(dir, `all-${attention}-${headDim}`), config, attention);
      const qv = loadLoraAdapter(join(dir, `qv-${attention}-${headDim}`), config, attention);
      // Long enough that the 3-row decode step reads the cache in place where the graph can (decodeStepInPlace).
      const prompt = Array.from({ length: 180 }, (_, i) => (i * 31 + 3) % 300);
      const rows = [all, null, qv].map((adapter) => ({ adapter, kv: runner.newSequence() }));
      const first = await runner.forward(rows.map((r) => ({ tokens: prompt, kv: r.kv, adapter: r.adapter })));
      const inPlaceBefore = runner.timing.inPlaceDecodeCalls;
      const second = await runner.forward(rows.map((r) => ({ tokens: [7], kv: r.kv, adapter: r.adapter })));
      expect(runner.timing.inPlaceDecodeCalls - inPlaceBefore).toBe(headDim === 16 ? 1 : 0);
      const n = prompt.length;
      const expected = [mergedAll, base, mergedQv].map((w) => referenceLogits(config, w, [...prompt, 7]));
      for (let i = 0; i < 3; i++) {
        expect(maxDiff(first[i], expected[i][n - 1])).toBeLessThan(2e-3);
        expect(maxDiff(second[i], expected[i][n])).toBeLessThan(2e-3);
      }
      // Mixed steps: rows of one adapter with different counts run packed (one run per adapter; the graphs that decode in place).
      const extra = { adapter: all, kv: runner.newSequence() };
      const adds = [[1, 2, 3], [4], [5, 6], [8, 9, 10, 11]];
      const packedBefore = runner.timing.packedCalls;
      const third = await runner.forward([...rows, extra].map((r, i) => ({ tokens: adds[i], kv: r.kv, adapter: r.adapter })));
      expect(runner.timing.packedCalls - packedBefore).toBe(headDim === 16 ? 1 : 0);
      [mergedAll, base, mergedQv].forEach((w, i) => expect(maxDiff(third[i], referenceLogits(config, w, [...prompt, 7, ...adds[i]]).at(-1)!)).toBeLessThan(2e-3));
      expect(maxDiff(third[3], referenceLogits(config, mergedAll, adds[3]).at(-1)!)).toBeLessThan(2e-3);
      // The adapter really changes the output (the test can fail).
      expect(maxDiff(expected[0][n], expected[1][n])).toBeGreaterThan(0.1);
      // Alone, without any adapter in the batch (rank-0 inputs).
      const [solo] = await runner.forward([{ tokens: [7], kv: runner.newSequence() }]);
      expect(maxDiff(solo, referenceLogits(config, base, [7])[0])).toBeLessThan(2e-3);
      await runner.release();
    });
  }

  it('refuses adapter features it cannot serve, naming them', () => {
    const p = join(dir, 'bad');
    mkdirSync(p, { recursive: true });
    writeFileSync(join(p, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: 4, lora_alpha: 8, use_dora: true }));
    const config = tinyConfig({ overrides: { numLayers: 1 } }, 300);
    expect(() => loadLoraAdapter(p, config, 'gqa')).toThrow(/use_dora/);
  });
});
