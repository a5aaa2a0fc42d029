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
  threads: number;
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
      return { name, tfjsBackend: 'tensorflow', reason: `${pkg} loaded (native TensorFlow)`, simd: true, threads: 0 };
    }
    if (prefer === name) throw new Error(`TF.js backend ${name} was requested but ${failure ?? `${pkg} did not initialise`}`);
    skipped.push(failure ?? `${pkg} did not initialise`);
  }

  await loadGradients();
  registerSegmentSumKernels();
  registerFusedAdamW();

  if (prefer === 'cpu') {
    await tf.setBackend('cpu');
    return { name: 'cpu', tfjsBackend: 'cpu', reason: 'requested explicitly (pure JS, ~30x slower than wasm)', simd: false, threads: 1 };
  }

  if (!(await tf.setBackend('wasm'))) throw new Error('the TF.js wasm backend failed to initialise');
  patchWasmBatchMatMul();
  patchWasmIdentity();
  const simd = Boolean(await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT'));
  // tfjs-wasm hard-codes "no threads" under Node (tfjs issue 3830), so it is always 1.
  const reason = prefer === 'wasm' ? 'requested explicitly' : `${skipped.join('; ')}; using wasm with patched BatchMatMul/UnsortedSegmentSum/Identity`;
  return { name: 'wasm', tfjsBackend: 'wasm', reason, simd, threads: 1 };
}
