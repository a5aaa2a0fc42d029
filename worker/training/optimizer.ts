// AdamW (decoupled weight decay, Loshchilov & Hutter), global-norm gradient clipping and the
// learning-rate schedule. tfjs-core has Adam but neither AdamW nor clip-by-global-norm.
import * as tf from '@tensorflow/tfjs-core';

export interface AdamWConfig {
  beta1: number;
  beta2: number;
  epsilon: number;
  weightDecay: number;
}

export const DEFAULT_ADAMW: AdamWConfig = { beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weightDecay: 0 };

/** Name of the fused AdamW kernel (registered for wasm and cpu in wasm-kernels.ts). */
export const FUSED_ADAMW_KERNEL = 'HearthAdamW';

export interface AdamWStep {
  learningRate: number;
  beta1: number;
  beta2: number;
  epsilon: number;
  weightDecay: number;
  /** Bias corrections 1 - beta1^t and 1 - beta2^t. */
  c1: number;
  c2: number;
}

/**
 * One AdamW update over flat arrays, into the out arrays:
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p = p - lr * ((m / c1) / (sqrt(v / c2) + eps) + wd * p)
 */
export function adamwUpdate(
  p: ArrayLike<number>, g: ArrayLike<number>, m: ArrayLike<number>, v: ArrayLike<number>,
  outP: Float32Array, outM: Float32Array, outV: Float32Array, s: AdamWStep,
): void {
  const { learningRate: lr, beta1, beta2, epsilon, weightDecay, c1, c2 } = s;
  for (let i = 0; i < outP.length; i++) {
    const gi = g[i];
    const mi = beta1 * m[i] + (1 - beta1) * gi;
    const vi = beta2 * v[i] + (1 - beta2) * gi * gi;
    outM[i] = mi;
    outV[i] = vi;
    outP[i] = p[i] - lr * (mi / c1 / (Math.sqrt(vi / c2) + epsilon) + weightDecay * p[i]);
  }
}

/** Adam's carried state: the number of updates applied and each variable's moments, in variable order. */
export interface AdamWMoments {
  step: number;
  m: Float32Array[];
  v: Float32Array[];
}

export class AdamW {
  private step = 0;
  private readonly m: tf.Variable[];
  private readonly v: tf.Variable[];

  constructor(
    readonly variables: tf.Variable[],
    readonly config: AdamWConfig = DEFAULT_ADAMW,
    /** Use the fused kernel when the backend has it (one pass instead of ~13 elementwise ops). */
    private readonly fused = true,
  ) {
    this.m = variables.map((x) => tf.tidy(() => tf.variable(tf.zerosLike(x), false)));
    this.v = variables.map((x) => tf.tidy(() => tf.variable(tf.zerosLike(x), false)));
  }

  /** Number of updates applied so far. */
  get steps(): number {
    return this.step;
  }

  /** The moments and step count, to continue this optimizer in a later job (optimizer-state.ts). */
  exportMoments(): AdamWMoments {
    return { step: this.step, m: this.m.map((x) => Float32Array.from(x.dataSync() as Float32Array)), v: this.v.map((x) => Float32Array.from(x.dataSync() as Float32Array)) };
  }

  /** Continue from moments an earlier job exported (same variables, same order): bias correction goes on from `step`. */
  restoreMoments(state: AdamWMoments): void {
    if (!Number.isInteger(state.step) || state.step < 0) throw new Error(`AdamW: step ${state.step} is not a count`);
    if (state.m.length !== this.variables.length || state.v.length !== this.variables.length) {
      throw new Error(`AdamW: moments for ${state.m.length}/${state.v.length} variables, not ${this.variables.length}`);
    }
    this.variables.forEach((x, i) => {
      if (state.m[i].length !== x.size || state.v[i].length !== x.size) throw new Error(`AdamW: moments of variable ${i} have the wrong size`);
      tf.tidy(() => {
        this.m[i].assign(tf.tensor(state.m[i], x.shape));
        this.v[i].assign(tf.tensor(state.v[i], x.shape));
      });
    });
    this.step = state.step;
  }

  /** One update; `grads[i]` belongs to `variables[i]`. */
  apply(grads: tf.Tensor[], learningRate: number): void {
    if (grads.length !== this.variables.length) throw new Error(`AdamW: ${grads.length} gradients for ${this.variables.length} variables`);
    this.step++;
    const { beta1, beta2, epsilon, weightDecay } = this.config;
    const s: AdamWStep = { learningRate, beta1, beta2, epsilon, weightDecay, c1: 1 - Math.pow(beta1, this.step), c2: 1 - Math.pow(beta2, this.step) };
    const fused = this.fused && tf.getKernel(FUSED_ADAMW_KERNEL, tf.getBackend()) !== undefined;
    this.variables.forEach((param, i) => {
      if (fused) {
        const attrs = s as unknown as tf.NamedAttrMap;
        const [p, m, v] = tf.engine().runKernel<tf.Tensor[]>(FUSED_ADAMW_KERNEL, { param, grad: grads[i], m: this.m[i], v: this.v[i] }, attrs);
        param.assign(p);
        this.m[i].assign(m);
        this.v[i].assign(v);
        tf.dispose([p, m, v]);
        return;
      }
      // One tidy per variable: temporaries of a large model would otherwise pile up in the heap.
      tf.tidy(() => {
        const g = grads[i];
        const m = tf.add(tf.mul(this.m[i], beta1), tf.mul(g, 1 - beta1));
        const v = tf.add(tf.mul(this.v[i], beta2), tf.mul(tf.square(g), 1 - beta2));
        this.m[i].assign(m);
        this.v[i].assign(v);
        let update = tf.div(tf.div(m, s.c1), tf.add(tf.sqrt(tf.div(v, s.c2)), epsilon));
        if (weightDecay !== 0) update = tf.add(update, tf.mul(param, weightDecay));
        param.assign(tf.sub(param, tf.mul(update, learningRate)));
      });
    });
  }

  dispose(): void {
    for (const x of [...this.m, ...this.v]) x.dispose();
  }
}

/** sqrt(sum of squares of all gradients). */
export function globalNorm(grads: tf.Tensor[]): number {
  return tf.tidy(() => {
    const total = grads.reduce<tf.Tensor>((acc, g) => tf.add(acc, tf.sum(tf.square(g))), tf.scalar(0));
    return Math.sqrt(total.dataSync()[0]);
  });
}

/**
 * Scale gradients so their global norm is at most maxNorm (maxNorm <= 0 disables). Returns the
 * same array when nothing is scaled, else new tensors (the caller disposes both), and the
 * pre-clip norm.
 */
export function clipByGlobalNorm(grads: tf.Tensor[], maxNorm: number): { grads: tf.Tensor[]; norm: number } {
  const norm = globalNorm(grads);
  if (!Number.isFinite(norm)) throw new Error(`gradient norm is ${norm}; training diverged`);
  if (!(maxNorm > 0 && norm > maxNorm)) return { grads, norm };
  const scale = maxNorm / (norm + 1e-6);
  return { grads: grads.map((g) => tf.mul(g, scale)), norm };
}

export interface LrSchedule {
  peak: number;
  /** Linear ramp from 0 over this many steps. */
  warmupSteps: number;
  totalSteps: number;
  kind: 'constant' | 'cosine';
  /** Cosine floor as a fraction of peak. */
  minRatio: number;
}

/** Learning rate for optimizer step `step` (0-based): linear warmup, then constant or cosine decay. */
export function learningRateAt(step: number, s: LrSchedule): number {
  if (step < s.warmupSteps) return (s.peak * (step + 1)) / (s.warmupSteps + 1);
  if (s.kind === 'constant') return s.peak;
  const decaySteps = Math.max(1, s.totalSteps - s.warmupSteps);
  const progress = Math.min(1, (step - s.warmupSteps) / decaySteps);
  const cosine = 0.5 * (1 + Math.cos(Math.PI * progress));
  return s.peak * (s.minRatio + (1 - s.minRatio) * cosine);
}
