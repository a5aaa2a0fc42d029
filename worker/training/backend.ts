// Chooses and prepares the TF.js backend the trainer runs on.
//
// Order: tfjs-node-gpu -> tfjs-node -> wasm (SIMD). The native packages are optional: they are not
// installable without network (their install script downloads libtensorflow), so they are
// `require`d in try/catch. The pure-JS `cpu` backend is ~30x slower than patched wasm and is used
// only when asked for explicitly (HEARTH_TFJS_BACKEND=cpu), e.g. for reference numerics.
import { createRequire, register } from 'node:module';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import '@tensorflow/tfjs-backend-wasm';
import { matMulGraph, trainingThreads } from './ort-compute.js';
import { registerOrtBatchMatMul, setOnnxRuntimeCompute } from './ort-kernels.js';
import { patchWasmBatchMatMul, patchWasmIdentity, registerFusedAdamW, registerSegmentSumKernels } from './wasm-kernels.js';

export type BackendName = 'tensorflow-gpu' | 'tensorflow' | 'wasm' | 'cpu';

export interface TrainingBackend {
  /** What runs the kernels. */
  name: BackendName;
  /** The tfjs backend name (`tensorflow`, `wasm`, `cpu`). */
  tfjsBackend: string;
  /** Why this one was chosen (and why the ones before it were not). */
  reason: string;
  simd: boolean;
  /** Threads of the TF.js kernels themselves. */
  threads: number;
  /**
   * What runs the GEMMs and the LM head on the wasm backend: ONNX Runtime's MLAS (multi-threaded,
   * ort-kernels.ts / head-logprobs.ts) or the wasm backend's own XNNPACK (the reference path).
   * `native` for the TensorFlow backends, `js` for cpu.
   */
  gemm: 'onnxruntime' | 'xnnpack' | 'native' | 'js';
}

const requireOptional = createRequire(import.meta.url);

let gradientsLoaded: Promise<void> | null = null;

/**
 * Register tfjs-core's gradient functions. Only the `@tensorflow/tfjs` union package does this on
 * import, and it is not a dependency; tfjs-core ships them as ESM with extensionless imports, which
 * a small resolve hook (tfjs-core-esm-resolve-hook.mjs) makes loadable.
 */
export function loadGradients(): Promise<void> {
  gradientsLoaded ??= (async () => {
    register('./tfjs-core-esm-resolve-hook.mjs', import.meta.url);
    await import('@tensorflow/tfjs-core/dist/register_all_gradients.js' as string);
  })();
  return gradientsLoaded;
}

function tryNative(pkg: string): string | null {
  try {
    requireOptional(pkg);
    return null;
  } catch (err) {
    const code = (err as { code?: string }).code;
    return code === 'MODULE_NOT_FOUND' ? `${pkg} not installed` : `${pkg} failed to load (${(err as Error).message.split('\n')[0]})`;
  }
}

let chosen: Promise<TrainingBackend> | null = null;

/**
 * Pick, initialise and patch the backend once per process. `prefer` (or env HEARTH_TFJS_BACKEND)
 * forces one: `cpu`, `wasm`, `tensorflow` (tfjs-node) or `tensorflow-gpu` (tfjs-node-gpu).
 * Prints one line saying what was chosen and why, through `log`.
 */
export function initTrainingBackend(
  opts: { prefer?: BackendName; log?: (line: string) => void } = {},
): Promise<TrainingBackend> {
  // The first successful call decides for the process (a backend cannot be switched under live
  // tensors); a failed choice is forgotten so that a later call can try again.
  chosen ??= chooseBackend(opts.prefer ?? (process.env.HEARTH_TFJS_BACKEND as BackendName | undefined)).catch((err: unknown) => {
    chosen = null;
    throw err;
  });
  return chosen.then((b) => {
    (opts.log ?? ((line: string) => process.stderr.write(`${line}\n`)))(
      `[training] TF.js backend: ${b.name} (simd=${b.simd}, threads=${b.threads}) — ${b.reason}`,
    );
    return b;
  });
}

async function chooseBackend(prefer: BackendName | undefined): Promise<TrainingBackend> {
  const allowed: BackendName[] = ['tensorflow-gpu', 'tensorflow', 'wasm', 'cpu'];
  if (prefer !== undefined && !allowed.includes(prefer)) {
    throw new Error(`TF.js backend "${prefer}" (HEARTH_TFJS_BACKEND or the device) is not one of ${allowed.join(', ')}`);
  }
  tf.enableProdMode();
  const skipped: string[] = [];

  for (const [name, pkg] of [['tensorflow-gpu', '@tensorflow/tfjs-node-gpu'], ['tensorflow', '@tensorflow/tfjs-node']] as const) {
    if (prefer !== undefined && prefer !== name) continue;
    const failure = tryNative(pkg);
    if (failure === null && (await tf.setBackend('tensorflow'))) {
      return { name, tfjsBackend: 'tensorflow', reason: `${pkg} loaded (native TensorFlow)`, simd: true, threads: 0, gemm: 'native' };
    }
    if (prefer === name) throw new Error(`TF.js backend ${name} was requested but ${failure ?? `${pkg} did not initialise`}`);
    skipped.push(failure ?? `${pkg} did not initialise`);
  }

  await loadGradients();
  registerSegmentSumKernels();
  registerFusedAdamW();

  if (prefer === 'cpu') {
    await tf.setBackend('cpu');
    return { name: 'cpu', tfjsBackend: 'cpu', reason: 'requested explicitly (pure JS, ~30x slower than wasm)', simd: false, threads: 1, gemm: 'js' };
  }

  if (!(await tf.setBackend('wasm'))) throw new Error('the TF.js wasm backend failed to initialise');
  patchWasmBatchMatMul();
  patchWasmIdentity();
  const simd = Boolean(await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT'));
  const gemm = wasmGemm();
  const reason = `${prefer === 'wasm' ? 'requested explicitly' : `${skipped.join('; ')}; using wasm`} with patched BatchMatMul/UnsortedSegmentSum/Identity; ${gemm.why}`;
  // tfjs-wasm hard-codes "no threads" under Node (tfjs issue 3830): its own kernels use one thread
  // (the ONNX Runtime GEMMs have their own pool, named in the reason).
  return { name: 'wasm', tfjsBackend: 'wasm', reason, simd, threads: 1, gemm: gemm.engine };
}

/**
 * GEMMs on ONNX Runtime unless HEARTH_TRAIN_GEMM=xnnpack asks for the wasm backend's own (the
 * reference path), or onnxruntime-node cannot load (then said in the log line).
 */
function wasmGemm(): { engine: 'onnxruntime' | 'xnnpack'; why: string } {
  const asked = process.env.HEARTH_TRAIN_GEMM ?? 'onnxruntime';
  if (asked !== 'onnxruntime' && asked !== 'xnnpack') throw new Error(`HEARTH_TRAIN_GEMM must be onnxruntime or xnnpack, got "${asked}"`);
  if (asked === 'xnnpack') {
    setOnnxRuntimeCompute(false);
    return { engine: 'xnnpack', why: 'GEMMs on wasm XNNPACK (HEARTH_TRAIN_GEMM=xnnpack)' };
  }
  try {
    matMulGraph(false, false); // loads onnxruntime-node now, so that a failure is reported here
    registerOrtBatchMatMul();
    setOnnxRuntimeCompute(true);
    return { engine: 'onnxruntime', why: `GEMMs and the LM head on ONNX Runtime (MLAS, ${trainingThreads()} threads)` };
  } catch (err) {
    setOnnxRuntimeCompute(false);
    return { engine: 'xnnpack', why: `GEMMs on wasm XNNPACK: ONNX Runtime failed to load (${(err as Error).message.split('\n')[0]})` };
  }
}
