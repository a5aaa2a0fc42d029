// What this machine has, so that tests expect of the hardware what is there: the suite passes on a
// CPU-only machine and on a CUDA machine (Dockerfile.gpu). GPU-only tests skip elsewhere, saying so
// in their title ("GPU machines only").
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);

function installed(pkg: string): boolean {
  try {
    require.resolve(pkg);
    return true;
  } catch {
    return false;
  }
}

function nvidiaGpus(): number {
  const r = spawnSync('nvidia-smi', ['-L'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.split('\n').filter((l) => l.startsWith('GPU ')).length : 0;
}

const onnxDir = path.dirname(require.resolve('onnxruntime-node/package.json'));

export const machine = {
  /** NVIDIA GPUs that nvidia-smi lists (0 without a driver or without GPUs). */
  nvidiaGpus: nvidiaGpus(),
  /** ONNX Runtime's CUDA provider library was installed (Dockerfile.gpu fetches it; .npmrc skips it). */
  onnxCudaProvider: fs.existsSync(path.join(onnxDir, 'bin/napi-v6/linux/x64/libonnxruntime_providers_cuda.so')),
  tfjsNodeGpu: installed('@tensorflow/tfjs-node-gpu'),
  tfjsNode: installed('@tensorflow/tfjs-node'),
};

/** ONNX inference can run on cuda:0 here. */
export const onnxCuda = machine.nvidiaGpus > 0 && machine.onnxCudaProvider;
