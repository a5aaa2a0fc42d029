// ONNX Runtime's WebGPU provider end to end on a real adapter. On a machine without a GPU the adapter is
// SwiftShader's Vulkan driver, shipped in Debian's chromium package (which CI installs for the console's
// browser tests): pointed at it before ONNX Runtime starts Dawn, the WebGPU provider runs every kernel on it.
// Without any adapter these tests are skipped and say so; the placement summary is tested everywhere.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importModel } from '../../src/models/model-store.js';
import { loadModel, type LoadedModel } from '../../src/runtime/load-model.js';
import { generateIds } from '../../src/runtime/generate.js';
import { ortDeviceProbes } from '../../src/runtime/device-choice.js';
import { placementLine, placementOf } from '../../src/runtime/placement.js';
import type { ResidentSequenceKv } from '../../src/runtime/resident-kv.js';
import { LORA_GROUPS, loraGroupDims, type LoraAdapter } from '../../src/runtime/lora.js';
import { sharedPath } from '../helpers/shared.js';
import { onnxCuda } from '../helpers/hardware.js';
import { useSwiftShaderUnlessNamed, webgpuAdapterProblem } from '../helpers/webgpu.js';

useSwiftShaderUnlessNamed();

describe('placement from an ORT profile', () => {
  it('counts each node once and lists the operators that ran on the CPU', () => {
    const ev = (name: string, provider: string, op: string) => ({ cat: 'Node', name, args: { provider, op_name: op } });
    const events = [
      ev('a', 'WebGpuExecutionProvider', 'MatMul'), ev('a', 'WebGpuExecutionProvider', 'MatMul'), ev('b', 'WebGpuExecutionProvider', 'GroupQueryAttention'),
      ev('c', 'CPUExecutionProvider', 'Shape'), ev('d', 'CPUExecutionProvider', 'Cast'), ev('e', 'CPUExecutionProvider', 'Cast'),
      { cat: 'Session', name: 'model_run' },
    ];
    const p = placementOf(events);
    expect(p).toEqual({ nodesByProvider: { WebGpuExecutionProvider: 2, CPUExecutionProvider: 3 }, cpuOps: { Shape: 1, Cast: 2 } });
    expect(placementLine('webgpu:0', p)).toBe('webgpu:0 runs 2 nodes on WebGpuExecutionProvider; 3 on the CPU (no device kernel or shape arithmetic ORT keeps there): Cast×2, Shape');
  });
});

describe('ORT provider probes on this machine', () => {
  it.skipIf(onnxCuda)('the CUDA provider does not load without its libraries, and the probe says why', async () => {
    expect(await ortDeviceProbes().cuda(0)).toMatch(/Failed to load shared library/);
  });
});

const adapterProblem = await webgpuAdapterProblem('runtime-webgpu');

describe.skipIf(adapterProblem !== null)('stories260K on webgpu:0 (a real WebGPU adapter)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hearth-webgpu-'));
  const home = join(dir, 'home');
  let cpu: LoadedModel, gpu: LoadedModel;
  const gpuLog: string[] = [];
  beforeAll(async () => {
    await importModel(home, sharedPath('models', 'stories260K', 'stories260K.gguf'), { id: 'karpathy/stories260K' });
    // The same graph form on both (GroupQueryAttention, what a GPU gets), so logits compare closely.
    // With LoRA inputs, as the inference worker loads every model.
    cpu = await loadModel('karpathy/stories260K', { home, maxContext: 128, attention: 'gqa', lora: true });
    gpu = await loadModel('karpathy/stories260K', { home, maxContext: 128, device: 'webgpu:0', lora: true, log: (l) => gpuLog.push(l) });
  });
  afterAll(async () => {
    await cpu?.runner.release();
    await gpu?.runner.release();
    rmSync(dir, { recursive: true, force: true });
  });

  it('loads on the device, with GroupQueryAttention and the projections on WebGPU and the fallback nodes named', () => {
    expect(gpu.runner.device).toBe('webgpu:0');
    expect(gpu.runner.attention).toBe('gqa');
    const p = gpu.placement!;
    expect(p.nodesByProvider.WebGpuExecutionProvider).toBeGreaterThan(20);
    // No compute-heavy operator fell back to the CPU.
    for (const op of ['GroupQueryAttention', 'MatMul', 'SkipSimplifiedLayerNormalization', 'MatMulNBits']) expect(p.cpuOps[op], op).toBeUndefined();
    expect(gpuLog.join('\n')).toMatch(/webgpu:0 runs \d+ nodes on WebGpuExecutionProvider; \d+ on the CPU .*Cast/);
  });

  it('keeps the KV cache in GPU memory between steps (present outputs as WebGPU buffers)', async () => {
    expect(gpu.runner.kvResident).toBe(true);
    const kv = gpu.runner.newSequence() as ResidentSequenceKv;
    await gpu.runner.forward([{ tokens: [1, 403, 407], kv }]);
    await gpu.runner.forward([{ tokens: [261], kv }]);
    expect(kv.length).toBe(4);
    expect(kv.block!.tensors.every((t) => t.location === 'gpu-buffer')).toBe(true);
    kv.dispose();
  });

  it('greedy decoding equals the CPU token for token, logits within 1e-3', async () => {
    const prompt = await cpu.tokenizer.encode('Once upon a time', { addSpecialTokens: true });
    const ours = await generateIds(gpu, prompt, { maxTokens: 12, temperature: 0, stopAtEos: false });
    expect(ours).toEqual(await generateIds(cpu, prompt, { maxTokens: 12, temperature: 0, stopAtEos: false }));
    const [a] = await cpu.runner.forward([{ tokens: prompt, kv: cpu.runner.newSequence() }]);
    const [b] = await gpu.runner.forward([{ tokens: prompt, kv: gpu.runner.newSequence() }]);
    let maxDiff = 0;
    for (let i = 0; i < a.length; i++) maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
    expect(maxDiff).toBeLessThan(1e-3);
  });

  it('serves a LoRA adapter beside the base model in one batch, as the CPU does', async () => {
    const adapter = randomAdapter(gpu);
    const run = async (m: LoadedModel) => {
      const a = m.runner.newSequence(), b = m.runner.newSequence();
      const out = await m.runner.forward([{ tokens: [1, 403, 407], kv: a, adapter }, { tokens: [1, 403, 407], kv: b }]);
      const next = await m.runner.forward([{ tokens: [300], kv: a, adapter }, { tokens: [300], kv: b }]);
      a.dispose();
      b.dispose();
      return [...out, ...next];
    };
    const [c, g] = [await run(cpu), await run(gpu)];
    c.forEach((l, i) => expect(maxDiff(l, g[i]), `row ${i}`).toBeLessThan(1e-3));
    expect(maxDiff(c[0], c[1])).toBeGreaterThan(1e-2); // the adapter changes the logits
  });

  it('4-bit weights (MatMulNBits) run on the device and decode as the CPU does', async () => {
    const load = (device?: string) => loadModel('karpathy/stories260K', { home, maxContext: 64, attention: 'gqa', weightType: 'q4', device });
    const [c, g] = [await load(), await load('webgpu:0')];
    try {
      expect(g.placement!.cpuOps.MatMulNBits).toBeUndefined();
      const prompt = await c.tokenizer.encode('Once upon a time', { addSpecialTokens: true });
      expect(await generateIds(g, prompt, { maxTokens: 8, temperature: 0, stopAtEos: false })).toEqual(await generateIds(c, prompt, { maxTokens: 8, temperature: 0, stopAtEos: false }));
    } finally {
      await c.runner.release();
      await g.runner.release();
    }
  });

  it('batches sequences of different lengths (continuous batching) as the CPU does', async () => {
    const run = async (m: LoadedModel) => {
      const s1 = m.runner.newSequence(), s2 = m.runner.newSequence();
      await m.runner.forward([{ tokens: [1, 403, 407, 261], kv: s1 }]);
      await m.runner.forward([{ tokens: [1, 300], kv: s2 }]);
      const out: number[][] = [];
      for (let step = 0; step < 3; step++) out.push((await m.runner.forward([{ tokens: [300 + step], kv: s1 }, { tokens: [310 + step], kv: s2 }])).map((l) => argmaxOf(l)));
      // A prefix copy and a newcomer join the batch (gathered on the device), one leaves.
      const s3 = s1.copyPrefix(3), s4 = m.runner.newSequence();
      await m.runner.forward([{ tokens: [1, 290], kv: s4 }]);
      s2.dispose();
      out.push((await m.runner.forward([{ tokens: [320], kv: s1 }, { tokens: [321], kv: s3 }, { tokens: [322], kv: s4 }])).map((l) => argmaxOf(l)));
      for (const s of [s1, s3, s4]) s.dispose();
      return out;
    };
    expect(await run(gpu)).toEqual(await run(cpu));
  });
});

function maxDiff(a: Float32Array, b: Float32Array): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}

/** A rank-4 adapter on every group, deterministic. */
function randomAdapter(m: LoadedModel): LoraAdapter {
  const dims = loraGroupDims(m.config, m.runner.attention);
  const rank = 4;
  let seed = 7;
  const rand = (n: number) => Float32Array.from({ length: n }, () => ((seed = (seed * 16807) % 2147483647) / 2147483647 - 0.5) * 0.5);
  const groups = Object.fromEntries(LORA_GROUPS.map((g) => {
    const [inDim, outDim] = dims[g];
    return [g, { rank, a: Array.from({ length: m.config.numLayers }, () => rand(inDim * rank)), b: Array.from({ length: m.config.numLayers }, () => rand(rank * outDim)) }];
  })) as LoraAdapter['groups'];
  return { name: 'random', groups };
}

function argmaxOf(a: Float32Array): number {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return best;
}
