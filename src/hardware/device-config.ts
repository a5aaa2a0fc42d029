// A "device configuration" is one kind of device a model replica can run on: a GPU model with a
// given memory size and driver, or a host CPU. Workers on several hosts with identical devices
// share one configuration, so the hardware list shows one option per kind, not per card.
//
// The configuration key doubles as the device fingerprint for calibration: anything that changes
// measured speed (name, memory, driver, compute capability; for CPUs model, cores, SIMD) is in it.
import type { CpuDevice, DeviceReport, GpuDevice, HardwareVendor } from '../protocol/hardware.js';

export interface DeviceConfig {
  key: string;
  vendor: HardwareVendor;
  name: string;
  /** Memory one replica can use: the GPU's memory, or the smallest host memory among these CPUs. */
  memoryMiB: number;
  driver?: string;
  computeCapability?: string;
  /** CPU only: logical cores one replica uses (a CPU worker owns its host's CPU). */
  cores?: number;
  simd?: string[];
  /** How many devices of this configuration the reports list (one per CPU host). */
  count: number;
  hosts: string[];
}

export function gpuKey(gpu: GpuDevice): string {
  return [gpu.vendor, gpu.name, `${gpu.memoryMiB}MiB`, `driver ${gpu.driver}`, `cc ${gpu.computeCapability ?? '-'}`].join('|');
}

/** Memory is left out on purpose: it does not change CPU speed, and hosts differ by a few MiB. */
export function cpuKey(cpu: CpuDevice): string {
  return ['cpu', cpu.model, cpu.arch, `${cpu.cores} cores`, cpu.simd.join(',')].join('|');
}

/** The `--device` name a worker uses for a GPU: `cuda:N` (NVIDIA), `rocm:N` (AMD). */
export function workerDeviceName(gpu: GpuDevice): string {
  return `${gpu.vendor === 'nvidia' ? 'cuda' : 'rocm'}:${gpu.index}`;
}

/**
 * The detected GPU a worker's device name computes on: cuda:N is NVIDIA GPU N, rocm:N AMD GPU N, and
 * webgpu:N the N-th GPU of the report (the WebGPU provider takes the first adapter Dawn lists, which on a
 * one-GPU host is that GPU; several GPUs are split one per container, see src/runtime/device-choice.ts).
 * undefined for cpu or a GPU the report does not list.
 */
export function gpuOfDevice(report: DeviceReport, device: string): GpuDevice | undefined {
  const webgpu = /^webgpu:(\d+)$/.exec(device);
  if (webgpu) return report.gpus[Number(webgpu[1])];
  return report.gpus.find((g) => workerDeviceName(g) === device);
}

/** A device some worker is bound to: its host and its `--device` name ("cpu", "cuda:0", …). */
export interface DeviceSlot {
  host: string;
  device: string;
}

function gpuConfig(gpu: GpuDevice, host: string): DeviceConfig {
  const c: DeviceConfig = { key: gpuKey(gpu), vendor: gpu.vendor, name: gpu.name, memoryMiB: gpu.memoryMiB, driver: gpu.driver, count: 1, hosts: [host] };
  if (gpu.computeCapability !== undefined) c.computeCapability = gpu.computeCapability;
  return c;
}

function cpuConfig(cpu: CpuDevice, host: string): DeviceConfig {
  return { key: cpuKey(cpu), vendor: 'cpu', name: cpu.model, memoryMiB: cpu.memoryMiB, cores: cpu.cores, simd: [...cpu.simd], count: 1, hosts: [host] };
}

/**
 * Groups the devices of all reports (one per host) into configurations, in first-seen order.
 * With `serving`, only devices a worker is bound to count (a host's CPU counts only if a worker
 * runs on "cpu"); without it, every device of every report does.
 */
export function deviceConfigs(reports: readonly DeviceReport[], serving?: readonly DeviceSlot[]): DeviceConfig[] {
  // A slot counts for the GPU its device computes on (webgpu:0 and cuda:0 can both name one card).
  const boundGpus = new Set<GpuDevice>();
  const boundCpus = new Set<string>();
  for (const slot of serving ?? []) {
    if (slot.device === 'cpu') boundCpus.add(slot.host);
    for (const report of reports) {
      const gpu = report.host === slot.host ? gpuOfDevice(report, slot.device) : undefined;
      if (gpu) boundGpus.add(gpu);
    }
  }

  const byKey = new Map<string, DeviceConfig>();
  const add = (config: DeviceConfig) => {
    const existing = byKey.get(config.key);
    if (!existing) return void byKey.set(config.key, config);
    existing.count += 1;
    existing.memoryMiB = Math.min(existing.memoryMiB, config.memoryMiB);
    for (const h of config.hosts) if (!existing.hosts.includes(h)) existing.hosts.push(h);
  };
  for (const report of reports) {
    for (const gpu of report.gpus) if (!serving || boundGpus.has(gpu)) add(gpuConfig(gpu, report.host));
    if (!serving || boundCpus.has(report.host)) add(cpuConfig(report.cpu, report.host));
  }
  return [...byKey.values()];
}

/**
 * The configuration key (calibration fingerprint) of the device a worker runs on, from its own
 * report: `deviceKeyOf(report, "cuda:0")` (or "webgpu:0", see gpuOfDevice). Throws if the report has no such device.
 */
export function deviceKeyOf(report: DeviceReport, device: string): string {
  if (device === 'cpu') return cpuKey(report.cpu);
  const gpu = gpuOfDevice(report, device);
  if (!gpu) throw new Error(`device ${device} is not among the detected devices (${report.gpus.map(workerDeviceName).join(', ') || 'no GPU'})`);
  return gpuKey(gpu);
}
