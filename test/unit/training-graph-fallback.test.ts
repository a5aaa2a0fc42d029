// The graph engine on a device ONNX Runtime cannot load its graphs on (ORT 1.30 does not fall back by itself: a
// CUDA provider without its libraries, an unknown provider, WebGPU without an adapter each fail the session's
// creation): one log line per process naming the device and the error, every graph on the CPU, and the job's
// engine line and TrainingResult say cpu.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../src/synthetic-models/tiny-model.js';
import { setFrozenProductsDevice } from '../../worker/training/frozen-linear.js';
import { setTrainingProviders, trainingProviders } from '../../worker/training/graph/graph-session.js';
import { runTrainingJob, type SftJobSpec } from '../../worker/training/job.js';
import { createHandlers } from '../../worker/training/worker-handler.js';
import { onnxCuda } from '../helpers/hardware.js';
import { deviceMemoryOf } from '../../src/hardware/device-memory-of.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-graph-fallback-'));
const modelDir = join(root, 'model');
beforeAll(() => {
  makeTinyModel({ dir: modelDir, size: 'tiny', seed: 3 });
});
afterEach(() => {
  setTrainingProviders('cpu', ['cpu']);
  setFrozenProductsDevice(null);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
const job = (): SftJobSpec => ({
  kind: 'sft', modelDir, baseModelName: 'tiny', resumeFrom: null, checkpointDir: join(root, 'ckpt', `step-${++n}`),
  trainJsonl: JSON.stringify({ messages: [{ role: 'user', content: 'Say hi.' }, { role: 'assistant', content: 'Hi!' }] }),
});

describe('graph engine on a device whose provider does not load', () => {
  it('an unknown provider: one line for the process, the jobs train on the CPU and say so', async () => {
    const lines: string[] = [];
    setTrainingProviders('npu:0', ['no-such-provider' as never, 'cpu'], (l) => lines.push(l));
    expect(trainingProviders().device).toBe('npu:0');
    const jobLog: string[] = [];
    const first = await runTrainingJob(job(), () => {}, { log: (l) => jobLog.push(l) });
    const second = await runTrainingJob(job(), () => {}, { log: (l) => jobLog.push(l) });
    // The tiny model has 2 layers + the head: 3 graphs per job, 6 loads, one line.
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\[training\] device npu:0: ONNX Runtime cannot load the training graphs there \(.*no-such-provider.*\); training continues on the CPU$/);
    expect(trainingProviders()).toMatchObject({ device: 'cpu', providers: ['cpu'], fellBackFrom: { device: 'npu:0' } });
    for (const r of [first, second]) expect(r.engine).toMatchObject({ name: 'graph', device: 'cpu' });
    expect(jobLog.filter((l) => l.includes('engine: ONNX Runtime graphs on cpu (npu:0 failed to load)'))).toHaveLength(2);
  }, 120_000);

  it('a job too large for the GPU memory detection reports is refused before anything loads, with the numbers', async () => {
    // A GPU whose nvidia-smi reports 100 MiB, 90 of them in use, as the training worker reads it for each job.
    const bin = join(root, 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'nvidia-smi'), '#!/bin/sh\necho "0, NVIDIA Test GPU, 100, 90, 550.54, 9.0, GPU-0"\n', { mode: 0o755 });
    const path = process.env.PATH;
    process.env.PATH = `${bin}:${path}`;
    try {
      const deviceMemory = await deviceMemoryOf('cuda:0');
      expect(deviceMemory).toEqual({ name: 'NVIDIA Test GPU', totalMiB: 100, freeMiB: 10 });
      expect(await deviceMemoryOf('cpu')).toBeUndefined();
      setTrainingProviders('cuda:0', ['cpu']);
      const log: string[] = [];
      await expect(runTrainingJob(job(), () => {}, { log: (l) => log.push(l), deviceMemory })).rejects.toThrow(/needs about [\d.]+ GB on cuda:0 \(NVIDIA Test GPU\) for weights as stored .* and the GPU has 0\.0 GB free of 0\.1 GB/);
      expect(log.some((l) => l.includes('graphs built'))).toBe(false);
    } finally {
      process.env.PATH = path;
    }
  }, 120_000);

  it.skipIf(onnxCuda)('cuda:0 without the CUDA provider libraries, set up by the training worker: trains on the CPU (machines without onnxruntime CUDA only)', async () => {
    const lines: string[] = [];
    await createHandlers('cuda:0', (l) => lines.push(l));
    expect(trainingProviders().device).toBe('cuda:0');
    expect(lines.join('\n')).toMatch(/training on cuda:0: graph engine \(LoRA\) runs its layer and head graphs on cuda:0 \(ONNX Runtime providers cuda, cpu\)/);
    const result = await runTrainingJob(job(), () => {}, { log: () => {} });
    expect(result.engine).toMatchObject({ name: 'graph', device: 'cpu' });
    const fallback = lines.filter((l) => l.includes('training continues on the CPU'));
    expect(fallback).toHaveLength(1);
    expect(fallback[0]).toMatch(/device cuda:0: .*Failed to load shared library/);
  }, 120_000);
});
