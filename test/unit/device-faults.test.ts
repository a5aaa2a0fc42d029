// Device faults: recognising a lost GPU or one out of memory from ONNX Runtime's errors, refusing a model that
// cannot fit in a GPU's free memory (with the numbers), and what the inference worker does when a step faults
// (the requests fail with 503 naming the device; out of memory: a new session next request; lost: the worker
// exits for its supervisor). The worker part injects ONNX Runtime's error text at a run (fault-points.ts).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../scripts/make-tiny-model.js';
import { deviceFaultOf, DeviceFaultError } from '../../src/runtime/device-fault.js';
import { checkFitsDevice, GGUF_GRAPH_BYTES_PER_FILE_BYTE, modelMemoryNeed, ModelTooLargeError } from '../../src/runtime/device-memory.js';
import type { ModelConfig } from '../../src/runtime/model-config.js';
import { createHandlers, EXIT_DEVICE_LOST } from '../../worker/inference/worker-handler.js';
import type { Handlers } from '../../worker/handlers.js';
import { InferenceFailure } from '../../src/protocol/inference-events.js';
import { runInferenceTask } from '../helpers/inference-task.js';
import type { InferenceTask } from '../../src/protocol/messages.js';

describe('deviceFaultOf', () => {
  it('recognises out-of-memory and lost devices in CUDA and WebGPU errors, naming the device', () => {
    const oom = deviceFaultOf(new Error('[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : CUDA failure 2: out of memory ; GPU=0'), 'cuda:0');
    expect(oom).toBeInstanceOf(DeviceFaultError);
    expect(oom!.kind).toBe('out-of-memory');
    expect(oom!.status).toBe(503);
    expect(oom!.message).toMatch(/^device cuda:0 ran out of memory during this request/);
    expect(deviceFaultOf(new Error('Failed to allocate memory for requested buffer of size 123'), 'webgpu:0')!.kind).toBe('out-of-memory');
    const lost = deviceFaultOf(new Error('WebGPU device lost (DeviceLostReason::Unknown): Device was lost'), 'webgpu:0');
    expect(lost!.kind).toBe('lost');
    expect(lost!.message).toMatch(/^device webgpu:0 was lost during this request/);
    expect(deviceFaultOf(new Error('CUDA error cudaErrorIllegalAddress:an illegal memory access was encountered'), 'cuda:1')!.kind).toBe('lost');
  });

  it('leaves ordinary errors alone', () => {
    expect(deviceFaultOf(new Error("input 'x' is missing in 'feeds'"), 'webgpu:0')).toBeNull();
    expect(deviceFaultOf(new Error('context length 600 exceeds the model maximum'), 'cuda:0')).toBeNull();
  });
});

describe('a model too large for the GPU', () => {
  // Llama-3-8B's shape.
  const llama8b: ModelConfig = {
    architecture: 'llama', vocabSize: 128256, hiddenSize: 4096, intermediateSize: 14336, numLayers: 32, numHeads: 32, numKvHeads: 8, headDim: 128,
    maxPositionEmbeddings: 8192, rmsNormEps: 1e-5, ropeTheta: 500000, ropeScaling: null, tieWordEmbeddings: false, attentionBias: false, qkNorm: false,
    bosTokenId: 1, eosTokenIds: [2], padTokenId: null,
  };

  it('is estimated from its shape and weight type', () => {
    const f32 = modelMemoryNeed({ config: llama8b, weightType: 'f32', fileBytes: 0, gguf: false, half: false, kvCacheBytes: 2 ** 30 });
    expect(f32.weightsMiB).toBeGreaterThan(28_000); // 8.0 B × 4 bytes
    expect(f32.weightsMiB).toBeLessThan(31_000);
    expect(f32.kvCacheMiB).toBe(1024);
    const q4k = modelMemoryNeed({ config: llama8b, weightType: 'stored', fileBytes: 4.92e9, gguf: true, half: true, kvCacheBytes: 2 ** 30 });
    expect(q4k.weightsMiB).toBe(Math.ceil((4.92e9 * GGUF_GRAPH_BYTES_PER_FILE_BYTE) / 2 ** 20)); // GGUF blocks in the graph's layout
    const q4 = modelMemoryNeed({ config: llama8b, weightType: 'q4', fileBytes: 0, gguf: false, half: false, kvCacheBytes: 0 });
    expect(q4.weightsMiB).toBeLessThan(f32.weightsMiB / 5);
  });

  it('is refused with the numbers; one that fits is not', () => {
    const need = modelMemoryNeed({ config: llama8b, weightType: 'f32', fileBytes: 0, gguf: false, half: false, kvCacheBytes: 2 ** 30 });
    const l4 = { name: 'NVIDIA L4', totalMiB: 23034, freeMiB: 22500 };
    expect(() => checkFitsDevice('meta/llama-8b', 'cuda:0', need, l4, 'f32')).toThrow(ModelTooLargeError);
    expect(() => checkFitsDevice('meta/llama-8b', 'cuda:0', need, l4, 'f32')).toThrow(
      new RegExp(`meta/llama-8b does not fit on cuda:0 \\(NVIDIA L4\\): it needs ~${need.totalMiB} MiB \\(weights ${need.weightsMiB} MiB as f32, KV cache 1024 MiB .*runtime 512 MiB\\) and the GPU has 22500 MiB free of 23034 MiB`),
    );
    expect(() => checkFitsDevice('meta/llama-8b', 'cuda:0', need, { name: 'NVIDIA H100', totalMiB: 81559, freeMiB: 81000 }, 'f32')).not.toThrow();
  });
});

describe('inference worker on a device fault', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hearth-device-faults-'));
  const modelDir = join(dir, 'model');
  const faultDir = join(dir, 'faults');
  const logs: string[] = [];
  const exits: number[] = [];
  let handlers: Handlers;
  beforeAll(async () => {
    makeTinyModel({ dir: modelDir, size: 'tiny', seed: 4, std: 0.1 });
    mkdirSync(faultDir);
    process.env.HEARTH_FAULT_DIR = faultDir;
    handlers = await createHandlers('cpu', (m) => logs.push(m), undefined, undefined, (code) => void exits.push(code));
  });
  afterAll(async () => {
    delete process.env.HEARTH_FAULT_DIR;
    await handlers.close?.();
    rmSync(dir, { recursive: true, force: true });
  });
  const task = (): InferenceTask => ({
    requestId: Math.random().toString(36), op: 'chat', stream: false,
    body: { model: 'tiny', messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 6, temperature: 0 },
    model: { baseModel: 'test/tiny', baseModelDir: modelDir, adapterDir: null, name: 'tiny' },
  });
  const run = () => runInferenceTask(handlers, task());
  const failure = async () => {
    try {
      await run();
    } catch (err) {
      return err as InferenceFailure;
    }
    throw new Error('the request did not fail');
  };

  it('out of memory: that request fails with 503 naming the device, and the next one runs on a new session', async () => {
    const before = await run();
    writeFileSync(join(faultDir, 'inference-run-error'), 'CUDA failure 2: out of memory ; GPU=0');
    const err = await failure();
    expect(err).toBeInstanceOf(InferenceFailure); // the engine's error event, its status as the client will get it
    expect(err.status).toBe(503);
    expect(err.message).toMatch(/^device cpu ran out of memory during this request \(CUDA failure 2: out of memory/);
    expect(logs.join('\n')).toMatch(/the session of test\/tiny is released; the next request loads it anew/);
    const loadsBefore = logs.filter((l) => l.startsWith('inference engine ready')).length;
    expect(await run()).toEqual({ ...(before as object), id: expect.any(String), created: expect.any(Number) });
    expect(logs.filter((l) => l.startsWith('inference engine ready')).length).toBe(loadsBefore + 1);
    expect(exits).toEqual([]);
  });

  it('lost: the request fails with 503 naming the device, and the worker exits for its supervisor', async () => {
    writeFileSync(join(faultDir, 'inference-run-error'), 'WebGPU device lost: Device was lost');
    const err = await failure();
    expect(err.status).toBe(503);
    expect(err.message).toMatch(/^device cpu was lost during this request/);
    await new Promise((r) => setTimeout(r, 700));
    expect(exits).toEqual([EXIT_DEVICE_LOST]);
  });
});
