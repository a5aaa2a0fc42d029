import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_COSTS, hourlyCostCents, loadCosts, mergeCosts } from '../../src/hardware/costs.js';
import { cpuKey, deviceConfigs, gpuKey } from '../../src/hardware/device-config.js';
import { estimateMemoryNeedMiB, fitsInMemory, kvCacheMiB } from '../../src/domain/memory-fit.js';
import { centsPerMillionTokens, hardwareOptions, uncalibratedConfigs } from '../../src/hardware/pricing.js';
import { type DeviceReport, type GpuDevice, HardwareResponse } from '../../src/protocol/hardware.js';

const a100 = (index: number): GpuDevice => ({
  vendor: 'nvidia', index, name: 'NVIDIA A100-SXM4-80GB', memoryMiB: 81920, driver: '535.104.05', computeCapability: '8.0',
});
const t4: GpuDevice = { vendor: 'nvidia', index: 1, name: 'Tesla T4', memoryMiB: 15360, driver: '535.104.05', computeCapability: '7.5' };
const mi210: GpuDevice = { vendor: 'amd', index: 0, name: 'AMD Instinct MI210', memoryMiB: 65520, driver: '6.7.0', computeCapability: 'gfx90a' };
const cpu = { model: 'Intel(R) Xeon(R) Processor', arch: 'x64', cores: 2, memoryMiB: 24000, simd: ['avx2', 'avx512f'] };

const report = (host: string, gpus: GpuDevice[], memoryMiB = 24000): DeviceReport => ({
  host, detectedAt: '2026-11-22T00:00:00.000Z', cpu: { ...cpu, memoryMiB }, gpus, probes: [],
});
const cluster = [report('gpu-1', [a100(0), t4]), report('gpu-2', [a100(0), a100(1), mi210], 23000)];

// Llama-3.1-8B in bf16: 8.03e9 × 2 B.
const llama8b = { id: 'meta-llama/Llama-3.1-8B-Instruct', paramCount: 8.03e9, bytesPerParam: 2 };

describe('centsPerMillionTokens', () => {
  it('is hourly cost over tokens per hour, per million, rounded up to 0.01 cent', () => {
    expect(centsPerMillionTokens(250, 5000)).toBe(13.89); // 250 / 18e6 × 1e6 = 13.888…
    expect(centsPerMillionTokens(250, 1000)).toBe(69.45); // 250 / 3.6e6 × 1e6 = 69.444…
    expect(centsPerMillionTokens(8, 20)).toBe(111.12); // 8 / 72,000 × 1e6 = 111.111…
    expect(centsPerMillionTokens(360, 100)).toBe(1000); // exact: no spurious round-up
    expect(centsPerMillionTokens(252, 1e6)).toBe(0.07); // 0.07 exactly stays 0.07
    expect(centsPerMillionTokens(1, 1e9)).toBe(0.01); // tiny prices never show as 0
    expect(centsPerMillionTokens(1e-9, 1e9)).toBe(0.01);
    expect(centsPerMillionTokens(0, 50)).toBe(0);
  });

  it('rejects a zero or negative throughput', () => {
    expect(() => centsPerMillionTokens(250, 0)).toThrow(/positive/);
    expect(() => centsPerMillionTokens(-1, 10)).toThrow(/>= 0/);
  });
});

describe('memory fit', () => {
  it('adds 20% KV headroom (min 512 MiB) and 512 MiB runtime overhead to the weights', () => {
    // 16.06e9 B = 15315.9 MiB; + 3063.2 + 512 = 18891.1 → 18892
    expect(estimateMemoryNeedMiB(llama8b)).toBe(18892);
    // 135M f32: 540e6 B = 515.0 MiB; headroom floor 512; + 512 → 1539
    expect(estimateMemoryNeedMiB({ paramCount: 135e6, bytesPerParam: 4 })).toBe(1539);
    expect(estimateMemoryNeedMiB({ paramCount: 135e6, bytesPerParam: 4, kvCacheMiB: 100 })).toBe(1127);
  });

  it('offers a model only where the estimate fits the device memory', () => {
    expect(fitsInMemory(llama8b, 24564)).toBe(true); // RTX 4090
    expect(fitsInMemory(llama8b, 15360)).toBe(false); // T4
    expect(fitsInMemory(llama8b, 18892)).toBe(true); // boundary: equal fits
    expect(fitsInMemory(llama8b, 18891)).toBe(false);
    expect(() => estimateMemoryNeedMiB({ paramCount: 0, bytesPerParam: 2 })).toThrow(/positive/);
  });

  it('computes the exact KV cache size from the model shape', () => {
    // Llama-3.1-8B: 32 layers, 8 KV heads, head 128, 8192 tokens, f16 → 1024 MiB
    expect(kvCacheMiB({ numLayers: 32, numKvHeads: 8, headDim: 128, tokens: 8192, bytesPerValue: 2 })).toBe(1024);
  });
});

describe('costs', () => {
  it('prices GPUs by memory class and CPUs per core', () => {
    expect(hourlyCostCents({ vendor: 'nvidia', name: 'Tesla T4', memoryMiB: 15360 }, DEFAULT_COSTS)).toBe(40);
    expect(hourlyCostCents({ vendor: 'nvidia', name: 'NVIDIA GeForce RTX 4090', memoryMiB: 24564 }, DEFAULT_COSTS)).toBe(80);
    expect(hourlyCostCents({ vendor: 'nvidia', name: 'H100', memoryMiB: 81559 }, DEFAULT_COSTS)).toBe(250);
    expect(hourlyCostCents({ vendor: 'amd', name: 'AMD Instinct MI300X', memoryMiB: 196592 }, DEFAULT_COSTS)).toBe(400);
    expect(hourlyCostCents({ vendor: 'cpu', name: 'Xeon', memoryMiB: 1, cores: 16 }, DEFAULT_COSTS)).toBe(64);
  });

  it('merges an override over the defaults: names win, tiers are re-sorted, unknown keys rejected', () => {
    const costs = mergeCosts(DEFAULT_COSTS, {
      byDeviceName: { 'tesla t4': 11 },
      gpuTiers: [{ upToGiB: null, centsPerHour: 999 }, { upToGiB: 32, centsPerHour: 100 }],
    });
    expect(hourlyCostCents({ vendor: 'nvidia', name: 'Tesla T4', memoryMiB: 15360 }, costs)).toBe(11);
    expect(hourlyCostCents({ vendor: 'nvidia', name: 'RTX 5090', memoryMiB: 32607 }, costs)).toBe(100);
    expect(hourlyCostCents({ vendor: 'nvidia', name: 'A100', memoryMiB: 81920 }, costs)).toBe(999);
    expect(costs.cpuCentsPerCoreHour).toBe(DEFAULT_COSTS.cpuCentsPerCoreHour);
    expect(() => mergeCosts(DEFAULT_COSTS, { cpuCentsPerCore: 3 })).toThrow(/invalid hardware pricing/);
    expect(() => mergeCosts(DEFAULT_COSTS, { cpuCentsPerCoreHour: -1 })).toThrow(/cpuCentsPerCoreHour/);
  });

  it('loads HEARTH_PRICING_FILE and names the file in errors', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'hearth-pricing-'));
    try {
      const good = path.join(dir, 'pricing.json');
      writeFileSync(good, JSON.stringify({ cpuCentsPerCoreHour: 1.5 }));
      expect(loadCosts({ HEARTH_PRICING_FILE: good }).cpuCentsPerCoreHour).toBe(1.5);
      expect(loadCosts({})).toBe(DEFAULT_COSTS);
      const bad = path.join(dir, 'bad.json');
      writeFileSync(bad, '{not json');
      expect(() => loadCosts({ HEARTH_PRICING_FILE: bad })).toThrow(/HEARTH_PRICING_FILE=.*bad\.json/);
      expect(() => loadCosts({ HEARTH_PRICING_FILE: path.join(dir, 'missing.json') })).toThrow(/ENOENT/);
      writeFileSync(bad, JSON.stringify({ gpuTiers: [] }));
      expect(() => loadCosts({ HEARTH_PRICING_FILE: bad })).toThrow(/gpuTiers/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('deviceConfigs', () => {
  it('groups identical devices across hosts and keeps the smallest CPU memory', () => {
    const configs = deviceConfigs(cluster);
    const byKey = new Map(configs.map((c) => [c.key, c]));
    expect(configs).toHaveLength(4); // A100, T4, CPU, MI210
    expect(byKey.get(gpuKey(a100(0)))).toMatchObject({ count: 3, hosts: ['gpu-1', 'gpu-2'] });
    expect(byKey.get(cpuKey(cpu))).toMatchObject({ vendor: 'cpu', count: 2, memoryMiB: 23000, cores: 2 });
  });

  it('separates devices whose driver differs (a new calibration is needed)', () => {
    const newer = { ...a100(0), driver: '550.54.14' };
    expect(deviceConfigs([report('a', [a100(0)]), report('b', [newer])]).filter((c) => c.vendor === 'nvidia')).toHaveLength(2);
  });
});

describe('hardwareOptions', () => {
  const measured = new Map([
    [gpuKey(a100(0)), { prefillTps: 5000, decodeTps: 1000 }],
    [gpuKey(t4), { prefillTps: 900, decodeTps: 40 }],
    [gpuKey(mi210), { prefillTps: 3000, decodeTps: 600 }],
    [cpuKey(cpu), { prefillTps: 100, decodeTps: 20 }],
  ]);
  const base = { devices: cluster, model: llama8b, throughput: (k: string) => measured.get(k) };

  it('prices the fitting NVIDIA configuration from its throughput (T4 too small for 8B bf16)', () => {
    const options = hardwareOptions({ ...base, vendor: 'nvidia' });
    expect(HardwareResponse.parse({ hardware: options }).hardware).toEqual(options);
    expect(options).toHaveLength(1);
    const [opt] = options;
    expect(opt.type).toBe('serverless');
    expect(opt.name).toBe('NVIDIA A100-SXM4-80GB (80 GiB)');
    expect(opt.id).toMatch(/^nvidia-a100-sxm4-80gb-[0-9a-f]{8}$/);
    expect(opt.pricing).toEqual({ cents_per_million_input_tokens: 13.89, cents_per_million_output_tokens: 69.45 });
    expect(opt.specs).toMatchObject({
      device: 'NVIDIA A100-SXM4-80GB', device_count: '3', hosts: '2', devices_per_replica: '1', memory_mib: '81920',
      driver: '535.104.05', compute_capability: '8.0', prefill_tokens_per_second: '5000', decode_tokens_per_second: '1000',
      cost_cents_per_hour: '250', model_memory_estimate_mib: '18892',
    });
    expect(Object.values(opt.specs ?? {}).every((v) => typeof v === 'string')).toBe(true);
  });

  it('filters by vendor (case-insensitive); unknown vendor lists nothing', () => {
    expect(hardwareOptions({ ...base, vendor: 'AMD' }).map((o) => o.specs?.device)).toEqual(['AMD Instinct MI210']);
    expect(hardwareOptions({ ...base, vendor: 'intel' })).toEqual([]);
    const [cpuOption] = hardwareOptions({ ...base, vendor: 'cpu' });
    // 2 cores × 4 ¢ = 8 ¢/h; 100 tok/s prefill, 20 tok/s decode; smallest host memory 23000 MiB fits 18892
    expect(cpuOption.pricing).toEqual({ cents_per_million_input_tokens: 22.23, cents_per_million_output_tokens: 111.12 });
    expect(cpuOption.specs).toMatchObject({ cores: '2', simd: 'avx2,avx512f', device_count: '2' });
  });

  it('offers small models on the small GPU too, cheapest output first; uses the given costs', () => {
    const small = { id: 'x/SmolLM2-135M', paramCount: 135e6, bytesPerParam: 4 };
    const options = hardwareOptions({ ...base, model: small, vendor: 'nvidia' });
    expect(options.map((o) => o.specs?.device)).toEqual(['NVIDIA A100-SXM4-80GB', 'Tesla T4']); // 69.45 < 277.78
    const cheapT4 = mergeCosts(DEFAULT_COSTS, { byDeviceName: { 'Tesla T4': 1 } });
    const repriced = hardwareOptions({ ...base, model: small, vendor: 'nvidia', costs: cheapT4 });
    expect(repriced[0].specs?.device).toBe('Tesla T4');
    expect(repriced[0].pricing.cents_per_million_output_tokens).toBe(6.95); // 1 / 144,000 × 1e6 = 6.944…
  });

  it('leaves out configurations without a measurement, and names them for calibration', () => {
    const none = { ...base, throughput: () => undefined };
    expect(hardwareOptions({ ...none, vendor: 'nvidia' })).toEqual([]);
    expect(uncalibratedConfigs({ ...none, vendor: 'nvidia' }).map((c) => c.name)).toEqual(['NVIDIA A100-SXM4-80GB']);
  });

  it('gives the same id for the same configuration and different ids for different drivers', () => {
    const one = hardwareOptions({ ...base, vendor: 'nvidia' })[0].id;
    expect(hardwareOptions({ ...base, devices: [report('z', [a100(5)])], vendor: 'nvidia' })[0].id).toBe(one);
    const newer = { ...a100(0), driver: '550.54.14' };
    const other = hardwareOptions({ ...base, devices: [report('z', [newer])], throughput: () => ({ prefillTps: 1, decodeTps: 1 }), vendor: 'nvidia' });
    expect(other[0].id).not.toBe(one);
  });
});
