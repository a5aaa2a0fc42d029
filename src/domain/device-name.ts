// The devices a worker can be asked to run on (`hearth worker --device`, HEARTH_WORKERS), as names:
//   cpu          ONNX Runtime's CPU provider (the default)
//   cuda[:N]     ONNX Runtime's CUDA provider on NVIDIA GPU N (needs its provider libraries, see docs/gpu.md)
//   webgpu[:N]   ONNX Runtime's WebGPU provider (Dawn over the driver's Vulkan), built into onnxruntime-node
//   auto         CUDA if its provider loads, else WebGPU if an adapter exists on a detected GPU, else CPU
// Pure parsing only: which of them actually works is decided in the worker (src/runtime/device-choice.ts).

export type DeviceKind = 'cpu' | 'cuda' | 'webgpu';

export interface DeviceName {
  kind: DeviceKind;
  /** The GPU's index (0 for cpu). */
  index: number;
}

export const DEVICE_CHOICES = 'cpu, cuda[:N], webgpu[:N] or auto';

/** A concrete device's name: "cpu", "cuda:0", "webgpu:1". */
export function formatDevice(d: DeviceName): string {
  return d.kind === 'cpu' ? 'cpu' : `${d.kind}:${d.index}`;
}

/** A concrete device name ("cuda" means "cuda:0"); throws on anything else, including "auto". */
export function parseDevice(value: string): DeviceName {
  const m = /^(cpu|cuda|webgpu)(?::(\d+))?$/.exec(value.trim());
  if (!m || (m[1] === 'cpu' && m[2] !== undefined)) throw new Error(`unknown device "${value}" (use ${DEVICE_CHOICES})`);
  return { kind: m[1] as DeviceKind, index: m[2] === undefined ? 0 : Number(m[2]) };
}

/** A device request as given: a concrete device, normalized ("cuda" → "cuda:0"), or "auto". Throws on anything else. */
export function normalizeDeviceRequest(value: string): string {
  return value.trim() === 'auto' ? 'auto' : formatDevice(parseDevice(value));
}
