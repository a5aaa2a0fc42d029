// Wire shapes of the hardware area: what a worker reports about its host (DeviceReport, sent with
// heartbeats), and what `GET /inference/:vendor/v2/hardware` returns (the NVIDIA-defined
// `NvidiaHardwareRes` shape: pricing numbers, specs a map of string to string).
import { z } from 'zod';

export const GpuVendor = z.enum(['nvidia', 'amd']);
export type GpuVendor = z.infer<typeof GpuVendor>;

/** The vendors a hardware option can belong to (the `{vendor}` path filter). */
export const HardwareVendor = z.enum(['nvidia', 'amd', 'cpu']);
export type HardwareVendor = z.infer<typeof HardwareVendor>;

export const GpuDevice = z.object({
  vendor: GpuVendor,
  /** The vendor tool's index (nvidia-smi `index`, rocm-smi `cardN`). */
  index: z.number().int().nonnegative(),
  name: z.string(),
  memoryMiB: z.number().nonnegative(),
  /** Memory in use when detected; informative only (pricing uses the total). */
  memoryUsedMiB: z.number().nonnegative().optional(),
  /** Driver version; for AMD the kernel driver version rocm-smi reports. */
  driver: z.string(),
  /** NVIDIA compute capability ("8.0"), AMD GFX target ("gfx90a"). */
  computeCapability: z.string().optional(),
  uuid: z.string().optional(),
});
export type GpuDevice = z.infer<typeof GpuDevice>;

export const CpuDevice = z.object({
  /** `model name` from /proc/cpuinfo (or os.cpus() elsewhere). */
  model: z.string(),
  /** Node's `process.arch` (x64, arm64, …). */
  arch: z.string(),
  /** Logical processors the OS schedules on. */
  cores: z.number().int().positive(),
  /** Physical cores, when /proc/cpuinfo says (`physical id` × `cpu cores`). */
  physicalCores: z.number().int().positive().optional(),
  memoryMiB: z.number().nonnegative(),
  /** The SIMD extensions Hearth cares about, e.g. ["avx2", "avx512f", "amx_tile"]. */
  simd: z.array(z.string()),
});
export type CpuDevice = z.infer<typeof CpuDevice>;

/** What happened when one detection source was asked (kept so "why no GPU?" has an answer). */
export const DetectionProbe = z.object({
  source: z.enum(['nvidia-smi', 'rocm-smi', 'cpuinfo']),
  status: z.enum(['ok', 'absent', 'failed']),
  detail: z.string().optional(),
});
export type DetectionProbe = z.infer<typeof DetectionProbe>;

export const DeviceReport = z.object({
  host: z.string(),
  /** ISO time of detection. */
  detectedAt: z.string(),
  cpu: CpuDevice,
  gpus: z.array(GpuDevice),
  probes: z.array(DetectionProbe),
});
export type DeviceReport = z.infer<typeof DeviceReport>;

export const HardwarePricing = z.object({
  cents_per_million_input_tokens: z.number(),
  cents_per_million_output_tokens: z.number(),
});

export const HardwareOption = z.object({
  id: z.string(),
  name: z.string(),
  type: z.string(),
  pricing: HardwarePricing,
  specs: z.record(z.string(), z.string()).optional(),
});
export type HardwareOption = z.infer<typeof HardwareOption>;

/** Response of `GET /inference/:vendor/v2/hardware` (NvidiaHardwareRes). */
export const HardwareResponse = z.object({ hardware: z.array(HardwareOption) });
export type HardwareResponse = z.infer<typeof HardwareResponse>;
