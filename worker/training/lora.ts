// LoRA adapters (Hu et al. 2021) as PEFT defines them: y = x W^T + (alpha / r) * dropout(x) A^T B^T,
// A [r, in] initialised like PEFT (kaiming-uniform with a=sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in))),
// B [out, r] initialised to zero, so a fresh adapter leaves the model unchanged.
// Internally A and B are kept transposed (A^T [in, r], B^T [r, out]) so the forward pass needs no
// transposes; PEFT layout is restored when saving.
import * as tf from '@tensorflow/tfjs-core';
import type { ModelConfig, Weights } from '../../src/runtime/model-config.js';
import { mulberry32, transpose2d } from './tensor-utils.js';

export const ALL_LORA_TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;
export type LoraTarget = (typeof ALL_LORA_TARGETS)[number];

export interface LoraConfig {
  rank: number;
  alpha: number;
  dropout: number;
  targetModules: LoraTarget[];
}

export const DEFAULT_LORA_CONFIG: LoraConfig = { rank: 8, alpha: 16, dropout: 0, targetModules: [...ALL_LORA_TARGETS] };

/** Accepts PEFT names (`q_proj`) and short names (`q`). */
export function parseLoraTargets(names: string[]): LoraTarget[] {
  return names.map((name) => {
    const full = name.endsWith('_proj') ? name : `${name}_proj`;
    if (!(ALL_LORA_TARGETS as readonly string[]).includes(full)) {
      throw new Error(`LoRA target module "${name}" is not supported (supported: ${ALL_LORA_TARGETS.join(', ')})`);
    }
    return full as LoraTarget;
  });
}

/** `model.layers.3.self_attn` or `model.layers.3.mlp` for a target. */
function moduleParent(target: LoraTarget): string {
  return target === 'gate_proj' || target === 'up_proj' || target === 'down_proj' ? 'mlp' : 'self_attn';
}

/** [in, out] of one target projection. */
export function projectionShape(config: ModelConfig, target: LoraTarget): [number, number] {
  const d = config.hiddenSize;
  const q = config.numHeads * config.headDim;
  const kv = config.numKvHeads * config.headDim;
  switch (target) {
    case 'q_proj': return [d, q];
    case 'k_proj': case 'v_proj': return [d, kv];
    case 'o_proj': return [q, d];
    case 'gate_proj': case 'up_proj': return [d, config.intermediateSize];
    case 'down_proj': return [config.intermediateSize, d];
  }
}

/** Every adapted module path, e.g. `model.layers.0.self_attn.q_proj`. */
export function loraModulePaths(config: ModelConfig, targets: LoraTarget[]): { path: string; target: LoraTarget }[] {
  const out: { path: string; target: LoraTarget }[] = [];
  for (let layer = 0; layer < config.numLayers; layer++) {
    for (const target of targets) out.push({ path: `model.layers.${layer}.${moduleParent(target)}.${target}`, target });
  }
  return out;
}

export class LoraAdapters {
  /** When false the adapters are skipped: the model computes the base logits (KL reference). */
  enabled = true;
  /** Seed of the next dropout mask (a counter; model.ts rewinds it when a layer runs again). */
  dropoutSeed = 1;

  private constructor(
    readonly config: LoraConfig,
    /** module path -> A^T [in, r] */
    readonly aT: Map<string, tf.Variable>,
    /** module path -> B^T [r, out] */
    readonly bT: Map<string, tf.Variable>,
  ) {}

  get scale(): number {
    return this.config.alpha / this.config.rank;
  }

  /** Fresh adapters: A random (seeded), B zero. */
  static create(model: ModelConfig, config: LoraConfig = DEFAULT_LORA_CONFIG, seed = 0): LoraAdapters {
    if (!Number.isInteger(config.rank) || config.rank < 1) throw new Error(`LoRA rank must be a positive integer, got ${config.rank}`);
    const random = mulberry32(seed);
    const aT = new Map<string, tf.Variable>();
    const bT = new Map<string, tf.Variable>();
    for (const { path, target } of loraModulePaths(model, config.targetModules)) {
      const [inDim, outDim] = projectionShape(model, target);
      const bound = 1 / Math.sqrt(inDim);
      const a = new Float32Array(inDim * config.rank);
      for (let i = 0; i < a.length; i++) a[i] = (2 * random() - 1) * bound;
      aT.set(path, tf.tidy(() => tf.variable(tf.tensor2d(a, [inDim, config.rank]), true)));
      bT.set(path, tf.tidy(() => tf.variable(tf.zeros([config.rank, outDim]), true)));
    }
    return new LoraAdapters(config, aT, bT);
  }

  /** Adapters from PEFT-named tensors (`base_model.model.<path>.lora_A.weight`, [r, in]; lora_B [out, r]). */
  static fromPeftTensors(model: ModelConfig, config: LoraConfig, tensors: Weights): LoraAdapters {
    const aT = new Map<string, tf.Variable>();
    const bT = new Map<string, tf.Variable>();
    for (const { path, target } of loraModulePaths(model, config.targetModules)) {
      const [inDim, outDim] = projectionShape(model, target);
      const a = tensors.get(`base_model.model.${path}.lora_A.weight`);
      const b = tensors.get(`base_model.model.${path}.lora_B.weight`);
      if (!a || !b) throw new Error(`adapter is missing lora_A/lora_B for ${path}`);
      if (a.shape[0] !== config.rank || a.shape[1] !== inDim || b.shape[0] !== outDim || b.shape[1] !== config.rank) {
        throw new Error(`adapter tensor shapes for ${path} (${a.shape} / ${b.shape}) do not match rank ${config.rank} and [${inDim} -> ${outDim}]`);
      }
      aT.set(path, tf.tidy(() => tf.variable(tf.tensor2d(transpose2d(a.data, config.rank, inDim), [inDim, config.rank]), true)));
      bT.set(path, tf.tidy(() => tf.variable(tf.tensor2d(transpose2d(b.data, outDim, config.rank), [config.rank, outDim]), true)));
    }
    return new LoraAdapters(config, aT, bT);
  }

  /** The LoRA term for module `path` given its input x [N, in], or null if not adapted/disabled. */
  delta(path: string, x: tf.Tensor2D, training: boolean): tf.Tensor2D | null {
    if (!this.enabled) return null;
    const a = this.aT.get(path);
    const b = this.bT.get(path);
    if (!a || !b) return null;
    const input = training && this.config.dropout > 0 ? tf.dropout(x, this.config.dropout, undefined, this.dropoutSeed++) : x;
    return tf.mul(tf.matMul(tf.matMul(input, a as tf.Tensor2D), b as tf.Tensor2D), this.scale) as tf.Tensor2D;
  }

  variables(): tf.Variable[] {
    return [...this.aT.values(), ...this.bT.values()];
  }

  /** PEFT names and layout: lora_A [r, in], lora_B [out, r]. */
  toPeftTensors(): Weights {
    const out: Weights = new Map();
    for (const [path, a] of this.aT) {
      const b = this.bT.get(path)!;
      const [inDim, r] = a.shape as [number, number];
      const outDim = b.shape[1] as number;
      out.set(`base_model.model.${path}.lora_A.weight`, { shape: [r, inDim], data: transpose2d(a.dataSync() as Float32Array, inDim, r) });
      out.set(`base_model.model.${path}.lora_B.weight`, { shape: [outDim, r], data: transpose2d(b.dataSync() as Float32Array, r, outDim) });
    }
    return out;
  }

  dispose(): void {
    for (const v of this.variables()) v.dispose();
  }
}
