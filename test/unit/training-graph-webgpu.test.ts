// The graph engine (worker/training/graph/) on ONNX Runtime's WebGPU provider against itself on the CPU: per-token
// logprobs, entropies and every LoRA gradient of one micro-batch, on a float base and on a Q4_K GGUF base (its
// blocks dequantized in the graph), within 1e-4 relative L2. On a machine without a GPU the adapter is SwiftShader's
// Vulkan driver from Debian's chromium package (as in runtime-webgpu.test.ts); without any adapter the tests are
// skipped and say so.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../src/runtime/model-config.js';
import { weightsSource, type WeightSource } from '../../src/runtime/weight-source.js';
import { openGguf } from '../../src/runtime/gguf-model.js';
import { writeGgufModel } from '../../src/synthetic-models/tiny-gguf.js';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { GraphLoraModel } from '../../worker/training/graph/graph-model.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { microBatchGradients, relL2, seededLora, tinyConfig } from './training-helpers.js';
import { webgpuAdapterProblem } from '../helpers/webgpu.js';

const adapterProblem = await webgpuAdapterProblem('training-graph-webgpu');

const dir = mkdtempSync(join(tmpdir(), 'hearth-graph-webgpu-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
}, 180_000);

/** Logprobs, entropies and gradients of a weighted NLL (weights of both signs) for one micro-batch on `providers`. */
function measure(config: ModelConfig, source: WeightSource, providers: ('cpu' | 'webgpu')[]) {
  const lora = seededLora(config);
  const model = GraphLoraModel.build(config, source, lora, { providers });
  return { ...microBatchGradients(model, lora, config.vocabSize), bytes: model.engine.transfers.total };
}

function compare(name: string, config: ModelConfig, source: () => WeightSource) {
  const cpu = measure(config, source(), ['cpu']);
  const gpu = measure(config, source(), ['webgpu']);
  const worst = Math.max(...cpu.grads.map((g, i) => relL2(gpu.grads[i], g)));
  console.log(`training-graph-webgpu ${name}: logp rel L2 ${relL2(gpu.logp, cpu.logp).toExponential(2)}, entropy ${relL2(gpu.entropy, cpu.entropy).toExponential(2)}, ` +
    `worst gradient ${worst.toExponential(2)}; forward+backward ${cpu.stepMs.toFixed(0)} ms cpu, ${gpu.stepMs.toFixed(0)} ms webgpu; ${gpu.bytes} bytes host↔device`);
  expect(relL2(gpu.logp, cpu.logp)).toBeLessThan(1e-5);
  expect(relL2(gpu.entropy, cpu.entropy)).toBeLessThan(1e-4);
  expect(Math.abs(gpu.loss - cpu.loss) / Math.abs(cpu.loss)).toBeLessThan(1e-4);
  cpu.grads.forEach((g, i) => expect(relL2(gpu.grads[i], g), `gradient ${i}`).toBeLessThan(1e-4));
}

describe.skipIf(adapterProblem !== null)('graph engine on webgpu:0 vs the CPU', () => {
  it('llama (GQA, untied), float base', () => {
    const config = tinyConfig({ vocabSize: 300, hiddenSize: 64, intermediateSize: 96, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16 });
    const weights = randomWeights(config, 3);
    compare('llama float', config, () => weightsSource(weights));
  }, 300_000);

  it('qwen2 (q/k/v bias, tied head over two vocabulary chunks), float base', () => {
    const config = tinyConfig({ architecture: 'qwen2', attentionBias: true, tieWordEmbeddings: true, vocabSize: 16384 + 300, hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 1, headDim: 8 });
    const weights = randomWeights(config, 3);
    for (const [name, w] of weights) if (name.endsWith('.bias')) w.data.forEach((_, i) => (w.data[i] = Math.sin(i) * 0.05));
    compare('qwen2 float', config, () => weightsSource(weights));
  }, 300_000);

  it('llama, Q4_K GGUF base (MatMulNBits over the stored blocks)', () => {
    const config = tinyConfig({ vocabSize: 1024, hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 64 });
    const file = join(dir, 'q4k.gguf');
    writeGgufModel(file, { config, type: 'Q4_K', seed: 5 });
    compare('llama Q4_K', config, () => openGguf(file).source);
  }, 300_000);
});
