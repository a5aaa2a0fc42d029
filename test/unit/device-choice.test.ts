// Device names (--device, HEARTH_WORKERS) and the worker's device choice over fake provider probes.
import { describe, expect, it } from 'vitest';
import { formatDevice, normalizeDeviceRequest, parseDevice } from '../../src/domain/device-name.js';
import { parseWorkers } from '../../src/config/config.js';
import { chooseDevice, providerError, type DeviceProbes } from '../../src/runtime/device-choice.js';
import { cpuKey, deviceConfigs, deviceKeyOf, gpuKey, gpuOfDevice } from '../../src/hardware/device-config.js';
import type { DeviceReport, GpuDevice } from '../../src/protocol/hardware.js';

const h100: GpuDevice = { vendor: 'nvidia', index: 0, name: 'NVIDIA H100 80GB HBM3', memoryMiB: 81559, driver: '550.54.15' };
const report = (gpus: GpuDevice[]): DeviceReport => ({
  host: 'h1', detectedAt: '2026-11-26T00:00:00.000Z', cpu: { model: 'AMD EPYC 9654', arch: 'x64', cores: 16, memoryMiB: 128000, simd: [] }, gpus, probes: [],
});

/** Probes answering as told, recording what was asked. */
function probes(cuda: string | null, webgpu: string | null): DeviceProbes & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    cuda: async (i) => (asked.push(`cuda:${i}`), cuda),
    webgpu: async () => (asked.push('webgpu'), webgpu),
  };
}

describe('device names', () => {
  it('parse cpu, cuda[:N] and webgpu[:N], with the index defaulting to 0', () => {
    expect(parseDevice('cpu')).toEqual({ kind: 'cpu', index: 0 });
    expect(parseDevice('cuda')).toEqual({ kind: 'cuda', index: 0 });
    expect(parseDevice('cuda:3')).toEqual({ kind: 'cuda', index: 3 });
    expect(formatDevice(parseDevice('webgpu'))).toBe('webgpu:0');
    expect(normalizeDeviceRequest('auto')).toBe('auto');
    expect(normalizeDeviceRequest('webgpu:1')).toBe('webgpu:1');
  });

  it('refuse anything else, listing the choices', () => {
    for (const bad of ['gpu', 'cpu:0', 'cuda:', 'cuda:x', 'rocm:0', 'webgpu:-1', 'auto:0', ''])
      expect(() => normalizeDeviceRequest(bad), bad).toThrow(/use cpu, cuda\[:N\], webgpu\[:N\] or auto/);
  });

  it('are accepted by HEARTH_WORKERS, normalized', () => {
    expect(parseWorkers('inference:webgpu,training:auto,inference:cuda')).toEqual([
      { kind: 'inference', device: 'webgpu:0' }, { kind: 'training', device: 'auto' }, { kind: 'inference', device: 'cuda:0' },
    ]);
    expect(() => parseWorkers('inference:vulkan')).toThrow(/HEARTH_WORKERS: unknown device "vulkan".* in "inference:vulkan"/);
  });
});

describe('chooseDevice', () => {
  it('cpu asks no provider', async () => {
    const p = probes('x', 'y');
    expect(await chooseDevice('cpu', p)).toEqual({ device: 'cpu', line: 'device cpu (asked for)' });
    expect(p.asked).toEqual([]);
  });

  it('auto takes CUDA when its provider loads', async () => {
    const p = probes(null, null);
    const c = await chooseDevice('auto', p, [h100]);
    expect(c.device).toBe('cuda:0');
    expect(c.line).toBe('device auto → cuda:0 (CUDA provider loaded; NVIDIA H100 80GB HBM3, 81559 MiB)');
    expect(p.asked).toEqual(['cuda:0']);
  });

  it('auto takes WebGPU when CUDA does not load and a GPU has an adapter, saying why in one line', async () => {
    const c = await chooseDevice('auto', probes('Failed to load shared library', null), [h100]);
    expect(c).toEqual({
      device: 'webgpu:0',
      line: 'device auto → webgpu:0 (CUDA provider not loadable: Failed to load shared library; WebGPU adapter on NVIDIA H100 80GB HBM3, 81559 MiB)',
    });
  });

  it('auto takes the CPU when neither works, with both reasons', async () => {
    const c = await chooseDevice('auto', probes('Failed to load shared library', 'No supported adapters'), []);
    expect(c).toEqual({ device: 'cpu', line: 'device auto → cpu (CUDA provider not loadable: Failed to load shared library; no WebGPU adapter: No supported adapters)' });
  });

  it('auto does not take an adapter without a detected GPU (a software rasterizer), but webgpu:0 does', async () => {
    const c = await chooseDevice('auto', probes('no lib', null), []);
    expect(c.device).toBe('cpu');
    expect(c.line).toMatch(/a WebGPU adapter exists but no GPU was detected/);
    expect((await chooseDevice('webgpu', probes('no lib', null), [])).line).toBe('device webgpu:0 (asked for; WebGPU adapter on no GPU detected by nvidia-smi/rocm-smi)');
  });

  it('an explicit device that does not work is an error naming it and the reason', async () => {
    await expect(chooseDevice('cuda:1', probes('Failed to load shared library', null), [h100])).rejects.toThrow(/device cuda:1: the CUDA execution provider does not load \(Failed to load shared library\)/);
    await expect(chooseDevice('webgpu', probes(null, 'No supported adapters'))).rejects.toThrow(/device webgpu:0: no WebGPU adapter \(No supported adapters\)/);
    await expect(chooseDevice('webgpu:1', probes(null, null))).rejects.toThrow(/cannot select a WebGPU adapter other than the first/);
    expect((await chooseDevice('cuda', probes(null, 'x'), [h100])).device).toBe('cuda:0');
  });

  it('shortens ORT errors to their message', () => {
    expect(providerError(new Error('/onnxruntime_src/webgpu_context.cc:136 lambda adapter_result.status == Success was false. Failed to get a WebGPU adapter: No supported adapters\nmore')))
      .toBe('Failed to get a WebGPU adapter: No supported adapters');
    expect(providerError(new Error('OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library'))).toBe('OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library');
  });
});

describe('the device a worker uses is the one it is priced as', () => {
  it('webgpu:N is the N-th detected GPU, for calibration keys and hardware options', () => {
    const r = report([h100]);
    expect(gpuOfDevice(r, 'webgpu:0')).toBe(r.gpus[0]);
    expect(gpuOfDevice(r, 'webgpu:1')).toBeUndefined();
    expect(deviceKeyOf(r, 'webgpu:0')).toBe(gpuKey(h100));
    expect(deviceKeyOf(r, 'cpu')).toBe(cpuKey(r.cpu));
    const served = deviceConfigs([r], [{ host: 'h1', device: 'webgpu:0' }]);
    expect(served.map((c) => c.vendor)).toEqual(['nvidia']);
    // An auto worker that fell back to the CPU is offered as the CPU, not as the GPU beside it.
    expect(deviceConfigs([r], [{ host: 'h1', device: 'cpu' }]).map((c) => c.vendor)).toEqual(['cpu']);
  });
});
