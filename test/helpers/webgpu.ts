// WebGPU in the tests: on a machine without a GPU, ONNX Runtime's WebGPU provider (Dawn) runs on SwiftShader's
// Vulkan driver from Debian's chromium package, loaded through the system's Vulkan loader (libvulkan1).
import { existsSync } from 'node:fs';
import { ortDeviceProbes } from '../../src/runtime/device-choice.js';

const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

/**
 * Point the Vulkan loader at SwiftShader unless a driver is named already. Call before the process's first WebGPU
 * session: the loader reads these when Dawn creates its instance.
 */
export function useSwiftShaderUnlessNamed(): void {
  if (!process.env.VK_ICD_FILENAMES && !process.env.VK_DRIVER_FILES && existsSync(SWIFTSHADER_ICD)) {
    process.env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
    process.env.VK_DRIVER_FILES = SWIFTSHADER_ICD;
  }
}

/** Null where a WebGPU adapter answers here (SwiftShader's where nothing else is named), else why not, said once. */
export async function webgpuAdapterProblem(testName: string): Promise<string | null> {
  useSwiftShaderUnlessNamed();
  const problem = await ortDeviceProbes().webgpu();
  if (problem) console.log(`${testName}: WebGPU tests SKIPPED, no adapter (${problem}); install chromium (SwiftShader's Vulkan ICD) and libvulkan1 to run them`);
  return problem;
}
