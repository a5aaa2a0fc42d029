// The GPU memory a worker's device has now, from detection (nvidia-smi, sysfs): what a model load (inference)
// or a training job's plan is checked against before anything is loaded there.
import type { DeviceMemory } from '../runtime/device-memory.js';
import { detectDevices } from './detect.js';
import { gpuOfDevice } from './device-config.js';

/** The detected GPU's memory for `device` (undefined on the CPU, or when detection does not list it). */
export async function deviceMemoryOf(device: string): Promise<DeviceMemory | undefined> {
  if (device === 'cpu') return undefined;
  const gpu = gpuOfDevice(await detectDevices(), device);
  return gpu && { name: gpu.name, totalMiB: gpu.memoryMiB, freeMiB: gpu.memoryMiB - (gpu.memoryUsedMiB ?? 0) };
}
