import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseCpuInfo } from '../../src/hardware/cpuinfo.js';
import { detectDevices } from '../../src/hardware/detect.js';
import { NVIDIA_QUERY_FIELDS_LEGACY, parseNvidiaSmiCsv } from '../../src/hardware/nvidia-smi.js';
import { parseRocmSmiJson } from '../../src/hardware/rocm-smi.js';
import { DeviceReport } from '../../src/protocol/hardware.js';

const fixtures = path.resolve(import.meta.dirname, '../fixtures/hardware');
const fixture = (name: string) => path.join(fixtures, name);
const read = (name: string) => readFileSync(fixture(name), 'utf8');

const tempDirs: string[] = [];
afterAll(() => tempDirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A directory to use as the whole PATH, holding fake vendor tools (shell scripts). */
function fakePath(tools: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'hearth-hw-'));
  tempDirs.push(dir);
  for (const [name, body] of Object.entries(tools)) {
    const file = path.join(dir, name);
    writeFileSync(file, `#!/bin/sh\n${body}\n`);
    chmodSync(file, 0o755);
  }
  return dir;
}
const printFixture = (name: string) => `/bin/cat '${fixture(name)}'`;

describe('parseNvidiaSmiCsv', () => {
  it('reads every GPU of a 4-GPU host', () => {
    const gpus = parseNvidiaSmiCsv(read('nvidia-smi-4x-a100.csv'));
    expect(gpus).toHaveLength(4);
    expect(gpus.map((g) => g.index)).toEqual([0, 1, 2, 3]);
    expect(gpus[2]).toEqual({
      vendor: 'nvidia',
      index: 2,
      name: 'NVIDIA A100-SXM4-80GB',
      memoryMiB: 81920,
      memoryUsedMiB: 1203,
      driver: '535.104.05',
      computeCapability: '8.0',
      uuid: 'GPU-1b2c3d4e-0000-1111-2222-333344445557',
    });
  });

  it('treats [N/A] as absent and skips blank lines', () => {
    const [rtx, t4] = parseNvidiaSmiCsv(read('nvidia-smi-mixed.csv'));
    expect(rtx).toMatchObject({ name: 'NVIDIA GeForce RTX 4090', memoryMiB: 24564, computeCapability: '8.9' });
    expect(t4).toEqual({ vendor: 'nvidia', index: 1, name: 'Tesla T4', memoryMiB: 15360, driver: '550.54.14' });
  });

  it('keeps a name that contains a comma whole', () => {
    const [gpu] = parseNvidiaSmiCsv('0, Odd, Name GPU, 8192, 1, 550.1, 7.5, GPU-x');
    expect(gpu.name).toBe('Odd, Name GPU');
    expect(gpu.memoryMiB).toBe(8192);
    expect(gpu.uuid).toBe('GPU-x');
  });

  it('parses the legacy column list and rejects short or non-numeric lines', () => {
    const [k80] = parseNvidiaSmiCsv(read('nvidia-smi-legacy-no-compute-cap.csv'), NVIDIA_QUERY_FIELDS_LEGACY);
    expect(k80).toMatchObject({ name: 'Tesla K80', memoryMiB: 11441, driver: '470.82.01' });
    expect(k80.computeCapability).toBeUndefined();
    expect(() => parseNvidiaSmiCsv('0, Tesla T4, 15360')).toThrow(/expected 7 columns/);
    expect(() => parseNvidiaSmiCsv('0, Tesla T4, lots, 1, 550, 7.5, GPU-x')).toThrow(/memory.total/);
  });
});

describe('parseRocmSmiJson', () => {
  it('reads two MI210 cards with bytes converted to MiB and the system driver', () => {
    const gpus = parseRocmSmiJson(read('rocm-smi-2x-mi210.json'));
    expect(gpus).toHaveLength(2);
    expect(gpus[1]).toEqual({
      vendor: 'amd',
      index: 1,
      name: 'AMD Instinct MI210',
      memoryMiB: 65520, // 68702699520 B / 2^20
      memoryUsedMiB: 2048,
      driver: '6.7.0',
      computeCapability: 'gfx90a',
      uuid: '0x9a4c1e2b3d5f6072',
    });
  });

  it('tolerates a warning before the JSON and newer key capitalisation', () => {
    const [mi300] = parseRocmSmiJson(read('rocm-smi-mi300x-warning.txt'));
    expect(mi300).toMatchObject({ name: 'AMD Instinct MI300X', memoryMiB: 196592, driver: '6.8.5', computeCapability: 'gfx942' });
  });

  it('throws on output without JSON or a card without VRAM total', () => {
    expect(() => parseRocmSmiJson('ERROR: No AMD GPUs found')).toThrow(/no JSON/);
    expect(() => parseRocmSmiJson('{"card0": {"Card series": "X"}}')).toThrow(/VRAM Total Memory/);
    expect(parseRocmSmiJson('{"system": {"Driver version": "6.7.0"}}')).toEqual([]);
  });
});

describe('parseCpuInfo', () => {
  it('counts logical and physical cores and keeps only the SIMD flags of interest (x86)', () => {
    expect(parseCpuInfo(read('cpuinfo-x86-2threads.txt'))).toEqual({
      model: 'Intel(R) Xeon(R) Platinum 8480+',
      cores: 2,
      physicalCores: 1,
      simd: ['sse4_2', 'avx', 'avx2', 'fma', 'f16c', 'avx512f', 'avx512bw', 'avx512vl', 'avx512_vnni', 'avx512_bf16', 'avx512_fp16', 'avx_vnni', 'amx_tile', 'amx_bf16', 'amx_int8'],
    });
  });

  it('reads ARM Features and names the CPU from implementer/part when no model name exists', () => {
    const info = parseCpuInfo(read('cpuinfo-arm64.txt'));
    expect(info.model).toBe('ARM CPU (implementer 0x41, part 0xd4f)');
    expect(info.cores).toBe(2);
    expect(info.physicalCores).toBeUndefined();
    expect(info.simd).toEqual(['asimd', 'asimddp', 'asimdhp', 'sve', 'sve2', 'i8mm', 'bf16']);
    expect(parseCpuInfo(`${read('cpuinfo-arm64.txt')}\n\nHardware\t: Some SoC\n`).model).toBe('Some SoC');
  });

  it('throws when there is no processor entry', () => {
    expect(() => parseCpuInfo('')).toThrow(/no "processor"/);
  });
});

describe('detectDevices', () => {
  it('finds no GPU, with reasons, when neither tool is on PATH, and still reports the CPU', async () => {
    const debug: string[] = [];
    const report = await detectDevices({ env: { PATH: fakePath({}) }, debug: (m) => debug.push(m) });
    expect(DeviceReport.parse(report)).toEqual(report); // JSON shape holds
    expect(JSON.parse(JSON.stringify(report))).toEqual(report);
    expect(report.gpus).toEqual([]);
    expect(report.probes.slice(0, 2)).toEqual([
      { source: 'nvidia-smi', status: 'absent', detail: 'nvidia-smi not found on PATH' },
      { source: 'rocm-smi', status: 'absent', detail: 'rocm-smi not found on PATH' },
    ]);
    expect(debug).toContain('nvidia-smi: nvidia-smi not found on PATH');
    expect(report.cpu.cores).toBeGreaterThanOrEqual(1);
    expect(report.cpu.memoryMiB).toBeGreaterThan(0);
  });

  it('runs nvidia-smi with the documented query and reads several GPUs', async () => {
    const dir = fakePath({
      'nvidia-smi': `[ "$1" = "--query-gpu=index,name,memory.total,memory.used,driver_version,compute_cap,uuid" ] && [ "$2" = "--format=csv,noheader,nounits" ] || exit 7\n${printFixture('nvidia-smi-4x-a100.csv')}`,
    });
    const report = await detectDevices({ env: { PATH: dir } });
    expect(report.gpus).toHaveLength(4);
    expect(report.gpus.every((g) => g.vendor === 'nvidia' && g.name === 'NVIDIA A100-SXM4-80GB')).toBe(true);
    expect(report.probes[0]).toEqual({ source: 'nvidia-smi', status: 'ok' });
  });

  it('lists NVIDIA and AMD GPUs of the same host together', async () => {
    const dir = fakePath({
      'nvidia-smi': printFixture('nvidia-smi-mixed.csv'),
      'rocm-smi': `[ "$*" = "--showproductname --showmeminfo vram --showdriverversion --showuniqueid --json" ] || exit 7\n${printFixture('rocm-smi-2x-mi210.json')}`,
    });
    const report = await detectDevices({ env: { PATH: dir } });
    expect(report.gpus.map((g) => `${g.vendor}:${g.index}:${g.name}`)).toEqual([
      'nvidia:0:NVIDIA GeForce RTX 4090',
      'nvidia:1:Tesla T4',
      'amd:0:AMD Instinct MI210',
      'amd:1:AMD Instinct MI210',
    ]);
  });

  it('retries without compute_cap on drivers that do not know the field', async () => {
    const dir = fakePath({
      'nvidia-smi': `case "$1" in *compute_cap*) echo 'Field "compute_cap" is not a valid field to query.' >&2; exit 2;; esac\n${printFixture('nvidia-smi-legacy-no-compute-cap.csv')}`,
    });
    const report = await detectDevices({ env: { PATH: dir } });
    expect(report.gpus).toEqual([
      { vendor: 'nvidia', index: 0, name: 'Tesla K80', memoryMiB: 11441, memoryUsedMiB: 0, driver: '470.82.01', uuid: 'GPU-0f0f0f0f-1111-2222-3333-444455556666' },
    ]);
  });

  it('turns a failing tool, garbage output and a hang into failed probes, never a crash', async () => {
    const dir = fakePath({
      'nvidia-smi': `echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." ; exit 9`,
      'rocm-smi': 'exec /bin/sleep 3600', // hangs: only the probe's timeout can end it
    });
    const report = await detectDevices({ env: { PATH: dir }, timeoutMs: 300 });
    expect(report.gpus).toEqual([]);
    expect(report.probes[0]).toMatchObject({ source: 'nvidia-smi', status: 'failed' });
    expect(report.probes[0].detail).toMatch(/exited with 9: NVIDIA-SMI has failed/);
    expect(report.probes[1]).toEqual({ source: 'rocm-smi', status: 'failed', detail: 'rocm-smi timed out after 300 ms' });

    const garbage = fakePath({ 'nvidia-smi': 'echo "0, only two"' });
    const r2 = await detectDevices({ env: { PATH: garbage } });
    expect(r2.probes[0]).toMatchObject({ source: 'nvidia-smi', status: 'failed' });
    expect(r2.probes[0].detail).toMatch(/expected 7 columns/);
  });

  it('falls back to os.cpus() when the cpuinfo file is missing', async () => {
    const report = await detectDevices({ env: { PATH: fakePath({}) }, cpuinfoPath: '/nonexistent/cpuinfo' });
    expect(report.cpu.simd).toEqual([]);
    expect(report.cpu.cores).toBeGreaterThanOrEqual(1);
    expect(report.probes[2]).toMatchObject({ source: 'cpuinfo', status: 'failed' });
  });
});
