import { describe, expect, it } from 'vitest';
import { HardwareCatalogue, latestReports, type LiveWorker, modelFingerprint, servingSlots } from '../../src/hardware/catalogue.js';
import { DEFAULT_COSTS, mergeCosts } from '../../src/hardware/costs.js';
import { cpuKey, deviceConfigs, deviceKeyOf, gpuKey, workerDeviceName } from '../../src/hardware/device-config.js';
import { hardwareOptions } from '../../src/hardware/pricing.js';
import type { DeviceReport, GpuDevice } from '../../src/protocol/hardware.js';

const gpu = (vendor: 'nvidia' | 'amd', index: number, name = 'NVIDIA L4', memoryMiB = 23034): GpuDevice => ({
  vendor, index, name, memoryMiB, driver: '550.54.14',
});
const report = (host: string, gpus: GpuDevice[], detectedAt = '2026-11-22T00:00:00.000Z'): DeviceReport => ({
  host, detectedAt, cpu: { model: 'AMD EPYC 9654', arch: 'x64', cores: 8, memoryMiB: 64000, simd: ['avx2', 'avx512f'] }, gpus, probes: [],
});

describe('worker device names', () => {
  it('are cuda:N for NVIDIA and rocm:N for AMD', () => {
    expect(workerDeviceName(gpu('nvidia', 3))).toBe('cuda:3');
    expect(workerDeviceName(gpu('amd', 1))).toBe('rocm:1');
  });

  it('give a worker the calibration key of its own device', () => {
    const r = report('h1', [gpu('nvidia', 0), gpu('nvidia', 1, 'NVIDIA A10G', 23028)]);
    expect(deviceKeyOf(r, 'cuda:1')).toBe(gpuKey(gpu('nvidia', 1, 'NVIDIA A10G', 23028)));
    expect(deviceKeyOf(r, 'cpu')).toBe(cpuKey(r.cpu));
    expect(() => deviceKeyOf(r, 'cuda:7')).toThrow(/cuda:7 is not among the detected devices \(cuda:0, cuda:1\)/);
  });
});

describe('latestReports', () => {
  it('keeps the newest valid report per host and skips malformed ones', () => {
    const old = report('h1', [gpu('nvidia', 0)], '2026-11-22T00:00:00.000Z');
    const fresh = report('h1', [gpu('nvidia', 0), gpu('nvidia', 1)], '2026-11-22T00:05:00.000Z');
    const workers: LiveWorker[] = [
      { kind: 'inference', device: 'cuda:0', host: 'h1', devices: fresh },
      { kind: 'training', device: 'cuda:1', host: 'h1', devices: old },
      { kind: 'inference', device: 'cpu', host: 'h2', devices: { host: 'h2', gpus: 'none' } },
      { kind: 'inference', device: 'cpu', host: 'h3' },
    ];
    const reports = latestReports(workers);
    expect(reports).toHaveLength(1);
    expect(reports[0].gpus).toHaveLength(2);
  });
});

describe('serving filter', () => {
  const h1 = report('h1', [gpu('nvidia', 0), gpu('nvidia', 1), gpu('nvidia', 2)]);
  const h2 = report('h2', [gpu('amd', 0, 'AMD Instinct MI210', 65520)]);
  const workers: LiveWorker[] = [
    { kind: 'inference', device: 'cuda:0', host: 'h1', devices: h1 },
    { kind: 'inference', device: 'cuda:2', host: 'h1', devices: h1 },
    { kind: 'training', device: 'cuda:1', host: 'h1', devices: h1 },
    { kind: 'inference', device: 'rocm:0', host: 'h2', devices: h2 },
  ];

  it('counts only devices an inference worker is bound to; CPUs only with a cpu worker', () => {
    const configs = deviceConfigs(latestReports(workers), servingSlots(workers));
    expect(configs.map((c) => `${c.name} ×${c.count}`)).toEqual(['NVIDIA L4 ×2', 'AMD Instinct MI210 ×1']);
    const withCpu = [...workers, { kind: 'inference', device: 'cpu', host: 'h2', devices: h2 }];
    expect(deviceConfigs(latestReports(withCpu), servingSlots(withCpu)).map((c) => c.vendor)).toEqual(['nvidia', 'amd', 'cpu']);
    // Without a filter every reported device counts (both hosts have the same CPU kind).
    expect(deviceConfigs(latestReports(workers)).map((c) => `${c.name} ×${c.count}`)).toEqual([
      'NVIDIA L4 ×3', 'AMD EPYC 9654 ×2', 'AMD Instinct MI210 ×1',
    ]);
  });

  it('drives hardwareOptions end to end', () => {
    const options = hardwareOptions({
      devices: latestReports(workers),
      serving: servingSlots(workers),
      model: { id: 'Qwen/Qwen2.5-0.5B-Instruct', paramCount: 494_032_768, bytesPerParam: 4 },
      throughput: (key) => (key === gpuKey(gpu('nvidia', 0)) ? { prefillTps: 8000, decodeTps: 400 } : undefined),
      vendor: 'nvidia',
    });
    // L4 (≤ 24 GiB class) 80 ¢/h: 80 / 28.8e6 × 1e6 = 2.777… → 2.78; 80 / 1.44e6 × 1e6 = 55.55… → 55.56
    expect(options).toHaveLength(1);
    expect(options[0].pricing).toEqual({ cents_per_million_input_tokens: 2.78, cents_per_million_output_tokens: 55.56 });
    expect(options[0].specs?.device_count).toBe('2');
  });
});

describe('HardwareCatalogue', () => {
  const manifest = {
    id: 'Qwen/Qwen2.5-0.5B-Instruct', format: 'hf', source: '/x', architecture: 'qwen2', parameters: 494_032_768,
    sizeBytes: 1_976_131_072, importedAt: '2026-11-22T00:10:00.000Z', config: {},
  };
  const host = report('h1', [gpu('nvidia', 0)]);
  const workers: LiveWorker[] = [{ kind: 'inference', device: 'cuda:0', host: 'h1', devices: host }];

  it('prices a stored model from the calibration recorded for its fingerprint', () => {
    const catalogue = new HardwareCatalogue(mergeCosts(DEFAULT_COSTS, { byDeviceName: { 'NVIDIA L4': 72 } }));
    expect(catalogue.optionsFor({ workers, manifest, vendor: 'nvidia' })).toEqual({ hardware: [] }); // not calibrated yet
    catalogue.calibration.record({
      modelId: manifest.id, modelFileHash: modelFingerprint(manifest), deviceKey: gpuKey(gpu('nvidia', 0)),
      prefillTps: 4000, decodeTps: 200, measuredAt: '2026-11-22T00:20:00.000Z',
    });
    const { hardware } = catalogue.optionsFor({ workers, manifest, vendor: 'nvidia' });
    // 72 ¢/h: 72 / 14.4e6 × 1e6 = 5; 72 / 720,000 × 1e6 = 100. Memory: 494M × 4 B fits 23034 MiB.
    expect(hardware.map((h) => h.pricing)).toEqual([{ cents_per_million_input_tokens: 5, cents_per_million_output_tokens: 100 }]);
    // A re-import changes the fingerprint: the old measurement no longer applies.
    const reimported = { ...manifest, importedAt: '2026-11-23T00:00:00.000Z' };
    expect(modelFingerprint(reimported)).not.toBe(modelFingerprint(manifest));
    expect(catalogue.optionsFor({ workers, manifest: reimported, vendor: 'nvidia' }).hardware).toEqual([]);
  });

  it('rejects a manifest without a parameter count', () => {
    expect(() => new HardwareCatalogue().optionsFor({ workers, manifest: { id: 'a/b' }, vendor: 'nvidia' })).toThrow();
  });
});
