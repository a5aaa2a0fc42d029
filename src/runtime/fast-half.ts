// Whether a device multiplies float16 fast enough to serve float16 weights at 16 bits (half the memory and
// the bytes a decode step reads) instead of widening them to float32 at load.
//
// ONNX Runtime 1.30's CPU provider has a float16 MatMul kernel (MLAS half GEMM) only on Arm with the FP16
// extension. On x86 — even with AVX512-FP16 — it has none: its cast-insertion pass wraps the node in Casts to
// float32 and folds the weight to float32 at session creation, so the logits equal the float32 graph's
// (tested) and nothing is saved. CUDA devices have it.
import { readFileSync } from 'node:fs';

/** The CPU has native fp16 arithmetic that ONNX Runtime's CPU kernels use (Arm FP16; see above for x86). */
export function cpuinfoHasFastHalf(cpuinfo: string, arch: string): boolean {
  const flags = new Set(cpuinfo.split('\n').filter((l) => /^(flags|Features)\s*:/.test(l)).flatMap((l) => l.split(':')[1].trim().split(/\s+/)));
  return arch === 'arm64' && flags.has('fphp') && flags.has('asimdhp');
}

/** Serve float16 weights at 16 bits on this device? `HEARTH_F16=off` forces float32, `on` forces 16 bits. */
export function servesHalf(device: string, env = process.env.HEARTH_F16): boolean {
  if (env === 'off') return false;
  if (env === 'on') return true;
  if (env !== undefined && env !== '' && env !== 'auto') throw new Error(`HEARTH_F16 must be auto, on or off, got "${env}"`);
  // GPUs: CUDA has float16 kernels; WebGPU has them where the adapter offers shader-f16 (every current NVIDIA/AMD
  // Vulkan driver; the load's placement line shows any float16 node that fell back to the CPU).
  if (device.startsWith('cuda') || device.startsWith('webgpu')) return true;
  try {
    return cpuinfoHasFastHalf(readFileSync('/proc/cpuinfo', 'utf8'), process.arch);
  } catch {
    return false; // not Linux: no way to tell here, float32 is always correct
  }
}
