// The Llama-family decoder (llama, mistral, qwen2 with q/k/v bias, qwen3 with q/k norm) in TF.js,
// written nanoGPT-style with raw ops so that gradients come from tfjs autodiff.
//
// Shapes: B rows of T tokens, N = B*T, d = hidden size, H query heads, KV key/value heads,
// rep = H / KV, hd = head dim. Weights keep their Hugging Face names; Linear weights are stored
// transposed ([in, out]) so the forward pass is x @ W without a transpose (faster on wasm); the
// LM head keeps the Hugging Face layout [vocab, d].
//
// Frozen base outside the heap (LoRA on the ONNX Runtime path, `frozenOutsideHeap`): the 2-D
// weights (Linear layers, embedding, LM head) stay the caller's Float32Arrays in the Hugging Face
// layout and are used through frozen-linear.ts; only norms and biases become TF.js tensors.
import * as tf from '@tensorflow/tfjs-core';
import type { ModelConfig, Weights } from '../../src/runtime/model-config.js';
import { attentionMask } from './attention-mask.js';
import { recomputedLayerCount } from './capacity.js';
import { frozenLinear, gatherFrozenRows, type FrozenMatrix } from './frozen-linear.js';
import { headTokenLogprobs } from './head-logprobs.js';
import type { LoraAdapters } from './lora.js';
import { tokenLogprobs } from './losses.js';
import { onnxRuntimeCompute } from './ort-kernels.js';
import { recomputedInBackward } from './recompute.js';
import { ropeTables } from './rope.js';
import { expectedWeightShapes, transpose2d } from './tensor-utils.js';

/** Token rows to run; sequences may be packed several to a row. */
export interface TokenBatch {
  rows: number;
  length: number;
  /** [rows * length] token ids (padding can be any valid id). */
  inputIds: Int32Array;
  /** [rows * length] position of each token inside its own sequence (restarts for each packed sequence). */
  positions: Int32Array;
  /** [rows * length] which packed sequence a token belongs to; tokens attend only within their sequence. */
  segmentIds: Int32Array;
}

interface RopeInputs {
  cos: tf.Tensor;
  sin: tf.Tensor;
  /** [hd, hd] permutation: (x @ P) = [x2, x1]. */
  swapHalves: tf.Tensor2D;
}

/** P with (x @ P)[j] = x[(j + hd/2) mod hd], i.e. the two halves of x swapped. */
function halfSwapMatrix(hd: number): tf.Tensor2D {
  const p = new Float32Array(hd * hd);
  for (let j = 0; j < hd; j++) p[((j + hd / 2) % hd) * hd + j] = 1;
  return tf.tensor2d(p, [hd, hd]);
}

/**
 * A 2-D Linear weight stored transposed ([in, out]). The embedding table and the LM head keep the
 * Hugging Face layout [vocab, d]: the head is read in vocabulary chunks of contiguous rows
 * (head-logprobs.ts), and tied to the embedding it is the same tensor.
 */
function storedTransposed(name: string, shape: number[]): boolean {
  return shape.length === 2 && name !== 'model.embed_tokens.weight' && name !== 'lm_head.weight';
}

/**
 * Additive attention mask [B, 1, 1, T, T]: 0 where key j is visible from query i (same packed
 * sequence, j <= i, and within the sliding window if the model has one), -1e9 elsewhere.
 */
export function causalSegmentMask(batch: TokenBatch, slidingWindow: number | null = null): tf.Tensor {
  return tf.tensor(attentionMask(batch, slidingWindow), [batch.rows, 1, 1, batch.length, batch.length]);
}

/**
 * Which decoder layers a training forward recomputes in the backward pass (recompute.ts): `auto` =
 * on the wasm backend, as many leading layers as needed for the rest's saved activations to fit the
 * heap's share for them (capacity.ts recomputedLayerCount); a number = that many leading layers.
 */
export type LayerRecomputation = 'auto' | 'always' | 'never' | number;

export class LlamaModel {
  /** LoRA adapters, or null for full fine-tuning / plain inference. */
  lora: LoraAdapters | null = null;
  /** Which decoder layers a training forward recomputes in its backward pass. */
  recompute: LayerRecomputation = 'auto';
  /** A frozen LM head in both layouts, [d, vocab] and [vocab, d] (one is a cached transpose). */
  private frozenHeadLayouts: { dByV: tf.Tensor2D; vByD: tf.Tensor2D } | null = null;

  private constructor(
    readonly config: ModelConfig,
    /** HF name -> variable (Linear weights transposed to [in, out]). */
    readonly params: Map<string, tf.Variable>,
    /** HF name -> frozen 2-D weight outside the heap (HF layout), when built with `frozenOutsideHeap`. */
    private readonly frozen: Map<string, FrozenMatrix>,
  ) {}

  /**
   * Build from Hugging Face weights. `trainable` = full fine-tuning; for LoRA pass false and
   * attach adapters (tfjs then never computes gradients of the frozen base weights).
   * `frozenOutsideHeap` (frozen only, needs ONNX Runtime) keeps the 2-D weights as the given
   * Float32Arrays, outside the wasm heap; they must not be modified while the model lives.
   */
  static fromWeights(config: ModelConfig, weights: Weights, opts: { trainable: boolean; frozenOutsideHeap?: boolean }): LlamaModel {
    if (config.numHeads % config.numKvHeads !== 0) throw new Error(`numHeads ${config.numHeads} is not a multiple of numKvHeads ${config.numKvHeads}`);
    if (config.headDim % 2 !== 0) throw new Error(`headDim ${config.headDim} must be even for rotary embeddings`);
    if (opts.trainable && opts.frozenOutsideHeap) throw new Error('trainable weights cannot live outside the TF.js heap');
    const params = new Map<string, tf.Variable>();
    const frozen = new Map<string, FrozenMatrix>();
    for (const [name, shape] of expectedWeightShapes(config)) {
      const w = weights.get(name);
      if (!w) throw new Error(`weight ${name} is missing`);
      if (w.shape.join(',') !== shape.join(',')) throw new Error(`weight ${name} has shape [${w.shape}], expected [${shape}]`);
      if (opts.frozenOutsideHeap && shape.length === 2) {
        frozen.set(name, { data: w.data, rows: shape[0], cols: shape[1] });
        continue;
      }
      const data = storedTransposed(name, shape) ? transpose2d(w.data, shape[0], shape[1]) : w.data;
      const stored = storedTransposed(name, shape) ? [shape[1], shape[0]] : shape;
      // Inside tidy: tf.variable keeps its initial tensor alive otherwise (a leak per weight).
      params.set(name, tf.tidy(() => tf.variable(tf.tensor(data, stored), opts.trainable)));
    }
    return new LlamaModel(config, params, frozen);
  }

  /** True when the frozen 2-D weights live outside the TF.js heap. */
  get frozenOutsideHeap(): boolean {
    return this.frozen.size > 0;
  }

  private p(name: string): tf.Tensor {
    const v = this.params.get(name);
    if (!v) throw new Error(`model has no parameter ${name}`);
    return v;
  }

  /** x [N, in] @ W [in, out] (+ bias) (+ LoRA term), for the module at `path`. */
  private linear(x: tf.Tensor2D, path: string, training: boolean): tf.Tensor2D {
    const frozen = this.frozen.get(`${path}.weight`);
    let y: tf.Tensor2D = frozen ? frozenLinear(x, frozen) : tf.matMul(x, this.p(`${path}.weight`) as tf.Tensor2D);
    const bias = this.params.get(`${path}.bias`);
    if (bias) y = tf.add(y, bias) as tf.Tensor2D;
    const delta = this.lora?.delta(path, x, training);
    return delta ? (tf.add(y, delta) as tf.Tensor2D) : y;
  }

  /** RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * weight. */
  private rmsNorm<T extends tf.Tensor>(x: T, weightName: string): T {
    const variance = tf.mean(tf.square(x), -1, true);
    return tf.mul(tf.mul(x, tf.rsqrt(tf.add(variance, this.config.rmsNormEps))), this.p(weightName)) as T;
  }

  /**
   * Rotary embedding on x [B, T, heads, hd] with cos/sinSigned [B, T, 1, hd]:
   * x * cos + [x2, x1] * sinSigned. The half swap is a product with a permutation matrix, which
   * on wasm is cheaper than split + concat (and their gradients).
   */
  private rope(x: tf.Tensor4D, cos: tf.Tensor, sinSigned: tf.Tensor, swapHalves: tf.Tensor2D): tf.Tensor4D {
    const hd = this.config.headDim;
    const swapped = tf.reshape(tf.matMul(tf.reshape(x, [-1, hd]) as tf.Tensor2D, swapHalves), x.shape);
    return tf.add(tf.mul(x, cos), tf.mul(swapped, sinSigned)) as tf.Tensor4D;
  }

  private attention(x: tf.Tensor2D, layer: number, B: number, T: number, rope: RopeInputs, mask: tf.Tensor, training: boolean): tf.Tensor2D {
    const { numHeads: H, numKvHeads: KV, headDim: hd } = this.config;
    const rep = H / KV;
    const path = `model.layers.${layer}.self_attn`;
    let q = tf.reshape(this.linear(x, `${path}.q_proj`, training), [B, T, H, hd]) as tf.Tensor4D;
    let k = tf.reshape(this.linear(x, `${path}.k_proj`, training), [B, T, KV, hd]) as tf.Tensor4D;
    const v = tf.reshape(this.linear(x, `${path}.v_proj`, training), [B, T, KV, hd]);
    if (this.config.qkNorm) {
      q = this.rmsNorm(q, `${path}.q_norm.weight`);
      k = this.rmsNorm(k, `${path}.k_norm.weight`);
    }
    q = this.rope(q, rope.cos, rope.sin, rope.swapHalves);
    k = this.rope(k, rope.cos, rope.sin, rope.swapHalves);
    // GQA without repeating K/V: the `rep` query heads of one kv head share a row block.
    // Query head h uses kv head floor(h / rep), as HF's repeat_kv does.
    const qGrouped = tf.reshape(tf.transpose(tf.reshape(q, [B, T, KV, rep, hd]), [0, 2, 3, 1, 4]), [B, KV, rep * T, hd]);
    const kT = tf.transpose(k, [0, 2, 1, 3]); // [B, KV, T, hd]
    const vT = tf.transpose(v, [0, 2, 1, 3]);
    const scores = tf.mul(tf.matMul(qGrouped, kT, false, true), 1 / Math.sqrt(hd)); // [B, KV, rep*T, T]
    const masked = tf.add(tf.reshape(scores, [B, KV, rep, T, T]), mask);
    const probs = tf.reshape(tf.softmax(masked), [B, KV, rep * T, T]);
    const context = tf.matMul(probs, vT); // [B, KV, rep*T, hd]
    const merged = tf.reshape(tf.transpose(tf.reshape(context, [B, KV, rep, T, hd]), [0, 3, 1, 2, 4]), [B * T, H * hd]);
    return this.linear(merged as tf.Tensor2D, `${path}.o_proj`, training);
  }

  private mlp(x: tf.Tensor2D, layer: number, training: boolean): tf.Tensor2D {
    const path = `model.layers.${layer}.mlp`;
    const gate = this.linear(x, `${path}.gate_proj`, training);
    const up = this.linear(x, `${path}.up_proj`, training);
    const swiglu = tf.mul(tf.mul(gate, tf.sigmoid(gate)), up) as tf.Tensor2D;
    return this.linear(swiglu, `${path}.down_proj`, training);
  }

  /** Final hidden states [N, d] (after the last RMSNorm). Call inside tf.tidy / variableGrads. */
  hidden(batch: TokenBatch, training = false): tf.Tensor2D {
    const { rows: B, length: T } = batch;
    const { cos, sinSigned } = ropeTables(this.config, batch.positions);
    const hd = this.config.headDim;
    const rope: RopeInputs = { cos: tf.tensor(cos, [B, T, 1, hd]), sin: tf.tensor(sinSigned, [B, T, 1, hd]), swapHalves: halfSwapMatrix(hd) };
    const mask = causalSegmentMask(batch, this.config.slidingWindow ?? null);
    const embedding = this.frozen.get('model.embed_tokens.weight');
    let x = embedding
      ? gatherFrozenRows(embedding, batch.inputIds)
      : (tf.gather(this.p('model.embed_tokens.weight'), tf.tensor1d(batch.inputIds, 'int32')) as tf.Tensor2D); // [N, d]
    const recomputed = this.recomputedLayers(B, T, training);
    for (let layer = 0; layer < this.config.numLayers; layer++) {
      if (layer >= recomputed) {
        x = this.decoderLayer(x, layer, B, T, rope, mask, training);
        continue;
      }
      // The block gets the saved copies of the rotary tables and mask when it runs again.
      const seed = this.lora?.dropoutSeed ?? 0;
      const block = (h: tf.Tensor, [cos, sin, swapHalves, m]: tf.Tensor[]) => {
        // LoRA dropout draws the same masks when the layer runs again in the backward pass; the
        // counter then stays where the forward pass left it.
        const lora = this.lora;
        const resume = lora?.dropoutSeed ?? 0;
        if (lora) lora.dropoutSeed = seed;
        try {
          return this.decoderLayer(h as tf.Tensor2D, layer, B, T, { cos, sin, swapHalves: swapHalves as tf.Tensor2D }, m, training);
        } finally {
          if (lora) lora.dropoutSeed = Math.max(resume, lora.dropoutSeed);
        }
      };
      x = recomputedInBackward(block, x, [rope.cos, rope.sin, rope.swapHalves, mask], this.layerTrainableVariables(layer)) as tf.Tensor2D;
    }
    return this.rmsNorm(x, 'model.norm.weight');
  }

  private decoderLayer(x: tf.Tensor2D, layer: number, B: number, T: number, rope: RopeInputs, mask: tf.Tensor, training: boolean): tf.Tensor2D {
    const attn = this.attention(this.rmsNorm(x, `model.layers.${layer}.input_layernorm.weight`), layer, B, T, rope, mask, training);
    const h = tf.add(x, attn) as tf.Tensor2D;
    return tf.add(h, this.mlp(this.rmsNorm(h, `model.layers.${layer}.post_attention_layernorm.weight`), layer, training)) as tf.Tensor2D;
  }

  /** The trainable variables one decoder layer reads (its weights, or its LoRA adapters). */
  private layerTrainableVariables(layer: number): tf.Variable[] {
    const prefix = `model.layers.${layer}.`;
    const vars = [...this.params].filter(([name, v]) => v.trainable && name.startsWith(prefix)).map(([, v]) => v);
    if (this.lora) {
      for (const [path, a] of this.lora.aT) if (path.startsWith(prefix)) vars.push(a, this.lora.bT.get(path)!);
    }
    return vars;
  }

  /** How many leading decoder layers this forward recomputes in the backward pass (see LayerRecomputation). */
  private recomputedLayers(rows: number, length: number, training: boolean): number {
    const layers = this.config.numLayers;
    if (!training || this.recompute === 'never') return 0;
    if (this.recompute === 'always') return layers;
    if (typeof this.recompute === 'number') return Math.max(0, Math.min(layers, Math.floor(this.recompute)));
    if (tf.getBackend() !== 'wasm') return 0;
    return recomputedLayerCount(this.config, this.lora ? 'lora' : 'full', this.frozenOutsideHeap ? 'outside-heap' : 'heap', rows, length);
  }

  private headName(): string {
    return this.config.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
  }

  /** The LM head, [vocab, d]: lm_head.weight, or the embedding table when tied. */
  private head(): tf.Variable {
    return this.p(this.headName()) as tf.Variable;
  }

  /** Logits [N, vocab] from hidden states [N, d]. */
  logits(hidden: tf.Tensor2D): tf.Tensor2D {
    const frozen = this.frozen.get(this.headName());
    if (frozen) return frozenLinear(hidden, frozen);
    const head = this.head();
    if (head.trainable) return tf.matMul(hidden, head as tf.Tensor2D, false, true);
    return this.frozenHead()(hidden) as tf.Tensor2D;
  }

  /**
   * log softmax(hidden @ head^T)[i, targets[i]] for every row. On the ONNX Runtime path this is
   * one fused op that never materialises the [N, vocab] logits (head-logprobs.ts); otherwise the
   * logits and losses.ts tokenLogprobs (the reference path).
   */
  tokenLogprobs(hidden: tf.Tensor2D, targets: Int32Array, onEntropy?: (entropy: Float32Array) => void): tf.Tensor1D {
    const frozen = this.frozen.get(this.headName());
    if (frozen && onnxRuntimeCompute()) return headTokenLogprobs(hidden, frozen, false, targets, onEntropy);
    if (onnxRuntimeCompute()) return headTokenLogprobs(hidden, this.head() as tf.Tensor2D, this.head().trainable, targets, onEntropy);
    return tokenLogprobs(this.logits(hidden), targets, onEntropy);
  }

  /**
   * h -> h @ head^T for a frozen head (LoRA), as a custom gradient: the forward product and the
   * backward one (dh = dy @ head) each read the layout they need, so neither transposes the
   * largest matrix of the model on every micro-batch. Costs one extra vocab x d copy.
   */
  private frozenHead(): (h: tf.Tensor) => tf.Tensor {
    if (!this.frozenHeadLayouts) {
      const stored = this.head() as tf.Tensor2D; // [V, d]
      this.frozenHeadLayouts = { vByD: stored, dByV: tf.tidy(() => tf.keep(tf.transpose(stored))) };
    }
    const { dByV, vByD } = this.frozenHeadLayouts;
    return tf.customGrad((...args: Array<tf.Tensor | tf.GradSaveFunc>) => ({
      value: tf.matMul(args[0] as tf.Tensor2D, dByV),
      gradFunc: (dy: tf.Tensor) => tf.matMul(dy as tf.Tensor2D, vByD),
    }));
  }

  /** Logits [B, T, vocab] for a batch (inference/tests). */
  forward(batch: TokenBatch): tf.Tensor3D {
    return tf.tidy(() => tf.reshape(this.logits(this.hidden(batch)), [batch.rows, batch.length, this.config.vocabSize]) as tf.Tensor3D);
  }

  /** Variables the optimizer updates: all weights (full fine-tuning) or the LoRA adapters. */
  trainableVariables(): tf.Variable[] {
    const vars = [...this.params.values()].filter((v) => v.trainable);
    if (this.lora) vars.push(...this.lora.variables());
    return vars;
  }

  /** Current weights in Hugging Face names and layout (for a full fine-tuning checkpoint). */
  exportWeights(): Weights {
    const out: Weights = new Map();
    for (const [name, v] of this.params) {
      const data = v.dataSync() as Float32Array;
      if (storedTransposed(name, v.shape)) {
        const [inDim, outDim] = v.shape;
        out.set(name, { shape: [outDim, inDim], data: transpose2d(data, inDim, outDim) });
      } else {
        out.set(name, { shape: [...v.shape], data: Float32Array.from(data) });
      }
    }
    for (const [name, m] of this.frozen) out.set(name, { shape: [m.rows, m.cols], data: Float32Array.from(m.data) });
    return out;
  }

  dispose(): void {
    for (const v of this.params.values()) v.dispose();
    this.frozen.clear();
    this.frozenHeadLayouts?.dByV.dispose();
    this.lora?.dispose();
  }
}
