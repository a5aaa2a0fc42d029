// The graph engine's memory plan (worker/training/graph/memory-plan.ts): stored bytes per ggml form (agreeing with
// the form frozenData really gives a tensor), the parts of known shapes, an 8B Q4_K job at 1 × 256 fitting 14 GiB,
// a 70B job refused with every part in the message, and loop.ts's check over a job spec.
import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../src/runtime/model-config.js';
import { GGML_TYPE } from '../../src/runtime/gguf-dequant.js';
import { totalmem } from 'node:os';
import { arenasAffordable, frozenData, savedActivationBudget } from '../../worker/training/graph/graph-engine.js';
import { adapterParameters, assertGraphPlanFits, graphMemoryPlan, storedTensorBytes, type PlannedTensor } from '../../worker/training/graph/memory-plan.js';
import { ALL_LORA_TARGETS } from '../../worker/training/lora.js';
import { assertGraphJobFits } from '../../worker/training/loop.js';
import { expectedWeightShapes } from '../../worker/training/tensor-utils.js';
import { tinyConfig } from './training-helpers.js';

const GiB = 2 ** 30;

/** A config's tensors, matrices in `type` (the LM head in `headType`), vectors float. */
function tensorsOf(config: ModelConfig, type?: number, headType = type): Map<string, PlannedTensor> {
  const out = new Map<string, PlannedTensor>();
  for (const [name, shape] of expectedWeightShapes(config)) {
    const t = shape.length !== 2 ? undefined : name === 'lm_head.weight' ? headType : type;
    out.set(name, t === undefined ? { shape } : { shape, ggmlType: t });
  }
  return out;
}

const llama8b: ModelConfig = tinyConfig({ vocabSize: 128256, hiddenSize: 4096, intermediateSize: 14336, numLayers: 32, numHeads: 32, numKvHeads: 8, headDim: 128, tieWordEmbeddings: false, ropeTheta: 500000 });
const llama70b: ModelConfig = { ...llama8b, hiddenSize: 8192, intermediateSize: 28672, numLayers: 80, numHeads: 64, numKvHeads: 8 };
const lora = { rank: 8, targets: ALL_LORA_TARGETS };

describe('graph engine memory plan', () => {
  it('counts a tensor as frozenData stores it: repacked blocks with scales (and offsets), or float32', () => {
    const cases: [number[], number | undefined, number][] = [
      [[512, 256], GGML_TYPE.Q4_K, 512 * 256 / 2 + (512 * 256 / 32) * 8], // 4 bits, a scale and an offset per 32
      [[512, 256], GGML_TYPE.Q4_0, 512 * 256 / 2 + (512 * 256 / 32) * 4], // 4 bits, a scale per 32
      [[512, 256], GGML_TYPE.Q6_K, 512 * 256 + (512 * 256 / 16) * 4], // 8 bits, a scale per 16
      [[512, 256], GGML_TYPE.Q8_0, 512 * 256 + (512 * 256 / 32) * 4],
      [[512, 256], GGML_TYPE.Q5_K, 512 * 256 + (512 * 256 / 32) * 8],
      [[512, 288], GGML_TYPE.Q8_0, 512 * 288 * 4], // rows not a multiple of 256: float32
      [[512, 256], GGML_TYPE.F16, 512 * 256 * 4], // a float type: float32
      [[512, 256], undefined, 512 * 256 * 4],
      [[256], undefined, 1024],
    ];
    for (const [shape, type, bytes] of cases) {
      const got = storedTensorBytes({ shape, ggmlType: type });
      expect(got.bytes, `${shape} type ${type}`).toBe(bytes);
      if (shape.length === 2) {
        const t = { shape, f32: () => new Float32Array(0), ...(type !== undefined && type !== GGML_TYPE.F16 ? { ggml: { type, bytes: () => new Uint8Array(0) } } : {}) };
        expect(got.blocks ? 'nbits' : 'float', `${shape} type ${type}`).toBe(frozenData(t).kind);
      }
    }
  });

  it('sums the parts of a known shape', () => {
    const config = tinyConfig({ vocabSize: 1000, hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 64, tieWordEmbeddings: false });
    const plan = graphMemoryPlan({ config, tensors: tensorsOf(config, GGML_TYPE.Q4_K), floatBaseHeld: false, lora, microBatch: { rows: 1, length: 128 } });
    const q4k = (n: number, k: number) => (n * k) / 2 + (n * k / 32) * 8;
    const layer = q4k(256, 256) * 2 + q4k(128, 256) * 2 + q4k(512, 256) * 2 + q4k(256, 512) + 2 * 256 * 4;
    expect(plan.weights).toBe(2 * layer + q4k(1000, 256) + 256 * 4);
    expect(plan.embedding).toBe(q4k(1000, 256));
    expect(plan.floatBase).toBe(0);
    expect(adapterParameters(config, 8, ALL_LORA_TARGETS)).toBe(2 * 8 * (2 * (256 + 256) + 2 * (256 + 128) + 2 * (256 + 512) + (512 + 256))); // q, o; k, v; gate, up; down
    expect(plan.moments).toBe(adapterParameters(config, 8, ALL_LORA_TARGETS) * 4 * 2);
    expect(plan.activations).toBe(((2 + 3) * 128 * 256 + 2 * 128 * 64 + 128 * 128) * 4);
    expect(plan.total).toBe(plan.weights + plan.embedding + plan.adapters + plan.moments + plan.activations + Math.max(plan.layerTransient, plan.headTransient) + plan.runtime);
    // Where the graphs run (a GPU): the weights, the larger transient, and the device optimizer's values, summed
    // gradients, a micro-batch's gradients and moments; the TF.js record of the adapters stays on the host.
    const values = adapterParameters(config, 8, ALL_LORA_TARGETS) * 4;
    expect(plan.runtimeHeld).toBe(plan.weights + Math.max(plan.layerTransient, plan.headTransient) + 3 * values + plan.moments);
    expect(plan.total - plan.runtimeHeld).toBe(plan.embedding + values + plan.activations + plan.runtime);
    // The same base in float, held by the job: weights copied into the graphs, the embedding is the held array.
    const float = graphMemoryPlan({ config, tensors: tensorsOf(config), floatBaseHeld: true, lora, microBatch: { rows: 1, length: 128 } });
    expect(float.embedding).toBe(0);
    expect(float.floatBase).toBe(float.weights + 1000 * 256 * 4); // the base in JS has the embedding besides what the graphs hold
    // Attention grows with length², the rest with length.
    const long = graphMemoryPlan({ config, tensors: tensorsOf(config, GGML_TYPE.Q4_K), floatBaseHeld: false, lora, microBatch: { rows: 1, length: 4096 } });
    expect(long.layerTransient).toBeGreaterThan(4 * 4096 * 4096 * 4);
  });

  it('keeps memory arenas within an eighth of the machine: the head session\'s first, then every layer session\'s beside it', () => {
    const float = { layerDequantizing: 0, headDequantizing: 0 };
    expect(arenasAffordable(6, { ...float, layerTransient: 0.25 * GiB, headTransient: 1.5 * GiB }, 24 * GiB)).toEqual({ head: true, layers: true }); // 3 GiB
    expect(arenasAffordable(6, { ...float, layerTransient: 0.25 * GiB, headTransient: 1.5 * GiB + 1 }, 24 * GiB)).toEqual({ head: true, layers: false });
    expect(arenasAffordable(6, { ...float, layerTransient: 0.01 * GiB, headTransient: 3 * GiB + 1 }, 24 * GiB)).toEqual({ head: false, layers: true });
    // A peak that is mostly dequantized weights keeps no arena, however small.
    expect(arenasAffordable(6, { layerTransient: 0.01 * GiB, headTransient: 0.1 * GiB, layerDequantizing: 0.006 * GiB, headDequantizing: 0.04 * GiB }, 24 * GiB)).toEqual({ head: true, layers: false });
    // bench:train's RL micro-batch (20M, 16 × 127 tokens) keeps them all on 24 GiB; the 0.5B at 1 × 512 the head's.
    const m20 = tinyConfig({ vocabSize: 32000, hiddenSize: 288, intermediateSize: 768, numLayers: 6, numHeads: 6, numKvHeads: 2, headDim: 48, tieWordEmbeddings: false });
    const rl = graphMemoryPlan({ config: m20, tensors: tensorsOf(m20), floatBaseHeld: true, lora, microBatch: { rows: 16, length: 127 } });
    expect(7 * Math.max(rl.layerTransient, rl.headTransient)).toBeGreaterThan(3 * GiB); // what the first rule counted
    expect(arenasAffordable(m20.numLayers, rl, 24 * GiB)).toEqual({ head: true, layers: true });
    const q05 = tinyConfig({ architecture: 'qwen2', vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14, numKvHeads: 2, headDim: 64, tieWordEmbeddings: true, attentionBias: true });
    const big = graphMemoryPlan({ config: q05, tensors: tensorsOf(q05), floatBaseHeld: true, lora, microBatch: { rows: 1, length: 512 } });
    expect(arenasAffordable(q05.numLayers, big, 24 * GiB)).toEqual({ head: true, layers: false });
    // The 8B Q4_K (Q6_K head) at 1 × 256: its head's peak is its dequantized chunks; none.
    const q4k = graphMemoryPlan({ config: llama8b, tensors: tensorsOf(llama8b, GGML_TYPE.Q4_K, GGML_TYPE.Q6_K), floatBaseHeld: false, lora, microBatch: { rows: 1, length: 256 } });
    expect(q4k.headTransient).toBeLessThan(3 * GiB);
    expect(arenasAffordable(llama8b.numLayers, q4k, 24 * GiB)).toEqual({ head: false, layers: false });
  });

  it('saves activations where they stay: host memory, a GPU that keeps outputs (within its free memory), never on one whose outputs cross to the host', () => {
    const free = 20 * GiB;
    const host = Math.min(totalmem() / 4, free - 2 * GiB);
    expect(savedActivationBudget({}, free)).toBe(host);
    expect(savedActivationBudget({}, free, { kind: 'host' })).toBe(host);
    expect(savedActivationBudget({}, 1 * GiB)).toBe(0); // under the transients' reserve
    expect(savedActivationBudget({}, free, { kind: 'device' })).toBe(host); // device memory unknown: the host's rule
    expect(savedActivationBudget({}, free, { kind: 'device', free: 3 * GiB })).toBe(Math.min(host, 1 * GiB));
    expect(savedActivationBudget({}, free, { kind: 'device', free: 1 * GiB })).toBe(0);
    expect(savedActivationBudget({}, free, { kind: 'crossing' })).toBe(0);
    // HEARTH_TRAIN_SAVED_BYTES decides wherever they live (a GPU check can measure saving on CUDA too).
    expect(savedActivationBudget({ HEARTH_TRAIN_SAVED_BYTES: '12345' }, free, { kind: 'crossing' })).toBe(12345);
    expect(savedActivationBudget({ HEARTH_TRAIN_SAVED_BYTES: '0' }, free)).toBe(0);
    expect(savedActivationBudget({ HEARTH_TRAIN_SAVED_BYTES: 'lots' }, free)).toBe(host);
  });

  it('fits an 8B Q4_K base at 1 × 256 tokens in 14 GiB', () => {
    const plan = graphMemoryPlan({ config: llama8b, tensors: tensorsOf(llama8b, GGML_TYPE.Q4_K, GGML_TYPE.Q6_K), floatBaseHeld: false, lora, microBatch: { rows: 1, length: 256 } });
    expect(plan.weights).toBeGreaterThan(4.5e9); // ~0.63 B/weight for 7.5B block-stored weights, a Q6_K head
    expect(plan.weights).toBeLessThan(6e9);
    expect(plan.total).toBeLessThanOrEqual(14 * GiB);
    expect(() => assertGraphPlanFits(plan, { hostAvailable: 14 * GiB, hostTotal: 24 * GiB }, '8B')).not.toThrow();
  });

  it('refuses a 70B job with every part and the memory there is', () => {
    const plan = graphMemoryPlan({ config: llama70b, tensors: tensorsOf(llama70b, GGML_TYPE.Q4_K), floatBaseHeld: false, lora, microBatch: { rows: 1, length: 1024 } });
    expect(plan.weights).toBeGreaterThan(40e9);
    let message = '';
    try { assertGraphPlanFits(plan, { hostAvailable: 20e9, hostTotal: 24e9 }, 'LoRA training of a 70B model'); } catch (e) { message = (e as Error).message; }
    expect(message).toMatch(/^LoRA training of a 70B model needs about \d+\.\d GB of memory \(weights as stored \d+\.\d GB, embedding table \d+\.\d GB, adapters and their gradients \d+\.\d GB, AdamW moments \d+\.\d GB, saved activations \d+\.\d GB, a layer's backward \d+\.\d GB, the head's backward \d+\.\d GB \(one at a time\), runtime \d+\.\d GB\), and there is 20\.0 GB available of this machine's 24\.0 GB; /);
    // On a GPU: the weights and transients against its free memory.
    expect(() => assertGraphPlanFits(plan, { hostAvailable: 100e9, hostTotal: 128e9, device: { label: 'cuda:0', name: 'NVIDIA L4', totalMiB: 23034, freeMiB: 22000 } }, '70B'))
      .toThrow(/^70B needs about \d+\.\d GB on cuda:0 \(NVIDIA L4\) .* and the GPU has 23\.1 GB free of 24\.2 GB/);
    expect(() => assertGraphPlanFits(plan, { hostAvailable: 100e9, hostTotal: 128e9, device: { label: 'cuda:0', name: 'NVIDIA H200', totalMiB: 143771, freeMiB: 140000 } }, '70B')).not.toThrow();
  });

  it('loop.ts checks a job spec: float weights already held count as available, a source is read for nothing', () => {
    const config = tinyConfig({ vocabSize: 1000, hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 64 });
    const source = new Map([...expectedWeightShapes(config)].map(([name, shape]) => [name, {
      shape, f32: () => { throw new Error('the check must not read the weights'); },
      ...(shape.length === 2 ? { ggml: { type: GGML_TYPE.Q4_K, bytes: () => { throw new Error('the check must not read the weights'); } } } : {}),
    }]));
    const spec = { config, source, baseModelName: 't', mode: 'lora' as const };
    expect(() => assertGraphJobFits(spec, 512, 'cpu', undefined, { available: 8e9, total: 16e9 })).not.toThrow();
    expect(() => assertGraphJobFits(spec, 512, 'cpu', undefined, { available: 0.1e9, total: 16e9 })).toThrow(
      /^LoRA training of a 0\.0B-parameter model on ONNX Runtime graphs \(cpu\) at 512 tokens per micro-batch needs about .* and there is 0\.1 GB available of this machine's 16\.0 GB; use a smaller micro-batch/,
    );
    expect(() => assertGraphJobFits({ ...spec, config: llama70b, source: new Map([...expectedWeightShapes(llama70b)].map(([name, shape]) => [name, { shape, f32: () => new Float32Array(0) }])) }, 256, 'cpu', undefined, { available: 20e9, total: 24e9 }))
      .toThrow(/float base held in JS|weights as stored \d{3}\.\d GB/);
  });
});
