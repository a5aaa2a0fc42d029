// What a LoRA job on the graph engine (graph-engine.ts) holds in memory, from its shapes alone, so a job that cannot
// fit is refused before it loads anything, with the numbers. Pure: loop.ts feeds it the base's tensors (shape and
// ggml type, nothing read) and the machine's memory; test/unit/training-graph-memory-plan.test.ts checks it.
//
// What lives where:
// - weights as stored: every frozen matrix as an ORT initializer of its layer's (or the head's) graph, in the form
//   frozenData picks: MatMulNBits' repacked blocks (codes + a float32 scale per block, + a float32 offset per block
//   for the formats with a minimum) where the ggml type has one and the row length is a multiple of 256, else
//   float32; norms and biases float32. A tied embedding is also the head's initializer: stored twice.
// - the token embeddings of the inputs graph (inputs-graph.ts): its initializer when stored in blocks (the same blocks
//   once more); a float table is fed from JS, the held float base's own array (else t.f32()'s).
// - a float base handed in as `weights` (HF checkpoints: job.ts) stays alive beside the graphs (the job's spec
//   holds it): the graphs' float initializers are a copy of it.
// - adapters: A and B float32 as TF.js variables (the job's record, on the host) and, where the graphs run
//   (device-adamw.ts), their values, the accumulated gradient sum and a micro-batch's gradient.
// - AdamW: two moments per adapter value, where the graphs run. The update's new values and moments are made
//   after the backward's transients are gone, and are smaller than them.
// - activations kept between a micro-batch's forward and backward: each layer's input [M, d] (numLayers + 1 of
//   them), dy and the backward's dx, rotary tables and the [rows, length, length] mask.
// - transients, one graph at a time: a layer's backward branch (its forward recomputed, then the backward) holds the
//   attention scores/probabilities and their gradients (rows × heads × length² floats, a few at once), the d- and
//   ffn-wide activations of the recomputed forward and of the backward, and, when the layer is stored in blocks,
//   the layer's matrices dequantized to float32 (each is made once in the branch and read by the recomputed
//   forward and by the backward, so all of them are live at the backward's start) plus the Cast/Div/Floor
//   temporaries of the one being dequantized. The head's forward (its backward is [n, d] only): per vocabulary
//   chunk of VOCAB_CHUNK rows its logits, log-softmax, softmax and the softmax's share for the n trained rows, and
//   the chunk dequantized.
// - the process itself: Node, TF.js, ONNX Runtime's code and thread pools.
//
// Calibration (peak RSS, `process.resourceUsage().maxRSS`, of real steps on this 2-core CPU box: see
// scripts/measure-train-memory.ts; the estimate is `total`):
//   0.25B llama (d 1024, ffn 2816, 16 layers, vocab 32000, untied), every matrix Q4_K, a WeightSource, LoRA r 8
//   on all 7 projections, 1 × 512 tokens, 2 steps: measured peak 1.36 GB (0.30 GB before the graphs: Node and the
//   blocks; 0.76 GB with the graphs built; 1.08 GB between steps); estimated 1.36 GB. Only one shape was measured
//   (the box is shared and slow): the per-token and attention factors below are read off one point, not fitted,
//   and a float base (HF weights) was not measured at all; expect ±30% elsewhere.
//   Before graph-session.ts turned constant folding and the per-session CPU arenas off, the same run peaked at
//   7.8 GB (folding: each branch's dequantized matrices kept as float32 initializers) and 7.0 GB after two steps
//   growing (arenas: every layer's session kept its own peak): this plan does not describe that engine.
import type { ModelConfig } from '../../../src/runtime/model-config.js';
import { nbitsLayout } from '../../../src/runtime/gguf-repack.js';
import type { DeviceMemory } from '../../../src/runtime/device-memory.js';
import type { LoraTarget } from '../lora.js';
import { projectionShape } from '../lora.js';

/** The LM head's vocabulary rows per chunk (head-graph.ts VOCAB_CHUNK; repeated so this module stays pure). */
const VOCAB_CHUNK = 16384;

/** A base tensor as the plan needs it: its HF shape and, when the file stores it in blocks, the ggml type. */
export interface PlannedTensor { shape: number[]; ggmlType?: number }

/** Attention-sized [rows, heads, length, length] float tensors live at once in a layer's backward. */
export const ATTENTION_TENSORS = 4;
/** Float tensors per token of each projection-output width (d + q + 2·kv) live at once in a layer's backward. */
export const HIDDEN_TENSORS = 8;
/** [M, ffn]-wide float tensors live at once in a layer's backward, per token. */
export const FFN_TENSORS = 8;
/** float32 copies of the largest matrix alive while it is dequantized (Cast, Floor/Sub, Concat, Mul/Add). */
export const DEQUANT_TEMPORARIES = 4;
/** [n, VOCAB_CHUNK] float tensors of the head's forward live at once (logits, log-softmax, softmax, its share). */
export const HEAD_CHUNK_TENSORS = 4;
/** The process without a model: Node, TF.js's backend, ONNX Runtime's code and pools (0.14 GB at start, TF.js's wasm heap and ORT's pools on top). */
export const RUNTIME_BYTES = 0.6e9;

/**
 * Bytes the graph engine holds for one frozen tensor, in the form frozenData (graph-engine.ts) gives it: the
 * repacked blocks where the ggml type has a MatMulNBits form and the row length is a multiple of 256 (and the
 * tensor is a matrix), else float32. `blocks` says which.
 */
export function storedTensorBytes(t: PlannedTensor): { bytes: number; blocks: boolean } {
  const elements = t.shape.reduce((a, b) => a * b, 1);
  const layout = t.ggmlType !== undefined ? nbitsLayout(t.ggmlType) : null;
  const K = t.shape[1];
  if (layout && t.shape.length === 2 && K % 256 === 0) {
    const blocks = elements / layout.block;
    return { bytes: (elements * layout.bits) / 8 + blocks * 4 * (layout.hasOffsets ? 2 : 1), blocks: true };
  }
  return { bytes: elements * 4, blocks: false };
}

export interface GraphMemoryInput {
  config: ModelConfig;
  /** The base by HF name (a WeightSource's shapes and ggml types, or float weights' shapes). */
  tensors: Map<string, PlannedTensor>;
  /** The base is float `weights` the job holds for its whole run (not a source read tensor by tensor). */
  floatBaseHeld: boolean;
  lora: { rank: number; targets: readonly LoraTarget[] };
  /** The largest micro-batch: rows × length tokens. */
  microBatch: { rows: number; length: number };
}

/** Bytes by part; `total` is their sum at the step's peak (the larger of a layer's and the head's transient). */
export interface GraphMemoryPlan {
  /** Frozen tensors as ORT initializers (every layer graph and the head). */
  weights: number;
  /** The embedding table of the inputs graph (inputs-graph.ts): 0 when it is the held float base's own array. */
  embedding: number;
  /** A float base the job holds beside the graphs. */
  floatBase: number;
  /** LoRA A and B: the host's record, and the device optimizer's values, accumulated sum and a micro-batch's gradient. */
  adapters: number;
  /** AdamW's two moments (the device optimizer's). */
  moments: number;
  /** What a micro-batch's forward keeps for its backward (every layer's input) and the backward's dy/dx. */
  activations: number;
  /** The peak transient of one layer's backward graph. */
  layerTransient: number;
  /** The peak transient of the head's graph (its forward, by vocabulary chunk). */
  headTransient: number;
  /** Of layerTransient and headTransient, the float copies of block-stored weights and their temporaries. */
  layerDequantizing: number;
  headDequantizing: number;
  runtime: number;
  total: number;
  /** Of these, what ONNX Runtime holds (on the device when the graphs run on a GPU): weights, transients, the optimizer's tensors. */
  runtimeHeld: number;
}

/** LoRA parameters (A and B) of every adapted projection. */
export function adapterParameters(config: ModelConfig, rank: number, targets: readonly LoraTarget[]): number {
  let n = 0;
  for (const t of targets) {
    const [inDim, outDim] = projectionShape(config, t);
    n += rank * (inDim + outDim);
  }
  return n * config.numLayers;
}

export function graphMemoryPlan(input: GraphMemoryInput): GraphMemoryPlan {
  const { config, tensors } = input;
  const { hiddenSize: d, intermediateSize: F, numHeads: H, numKvHeads: KV, headDim: hd, numLayers: L, vocabSize: V } = config;
  const { rows, length } = input.microBatch;
  const M = rows * length;
  const need = (name: string) => {
    const t = tensors.get(name);
    if (!t) throw new Error(`weight ${name} is missing`);
    return t;
  };

  let weights = 0;
  let layerWidest = 0; // the largest matrix of a layer stored in blocks, in elements
  let layerDequantized = 0; // float32 bytes of the largest block-stored layer once dequantized
  for (let l = 0; l < L; l++) {
    const prefix = `model.layers.${l}.`;
    let dequantized = 0;
    for (const [name, t] of tensors) {
      if (!name.startsWith(prefix)) continue;
      const s = storedTensorBytes(t);
      weights += s.bytes;
      if (s.blocks) {
        const elements = t.shape[0] * t.shape[1];
        dequantized += elements * 4;
        layerWidest = Math.max(layerWidest, elements);
      }
    }
    layerDequantized = Math.max(layerDequantized, dequantized);
  }
  const embed = need('model.embed_tokens.weight');
  const head = config.tieWordEmbeddings ? embed : need('lm_head.weight');
  const headStored = storedTensorBytes(head);
  weights += headStored.bytes + storedTensorBytes(need('model.norm.weight')).bytes;
  const embedStored = storedTensorBytes(embed);
  const embedding = embedStored.blocks || !input.floatBaseHeld ? embedStored.bytes : 0;
  let floatBase = 0;
  if (input.floatBaseHeld) for (const t of tensors.values()) floatBase += t.shape.reduce((a, b) => a * b, 1) * 4;

  const adapterValues = adapterParameters(config, input.lora.rank, input.lora.targets) * 4;
  const adapters = adapterValues * 4; // the TF.js record; on the device: values, accumulated sum, a micro-batch's gradient
  const moments = adapterValues * 2;
  const optimizerHeld = adapterValues * 3 + moments; // device-adamw.ts's tensors, where the graphs run
  // Layer inputs (numLayers + 1), dy and dx, rotary cos/sin [M, hd] each, the mask [rows, length, length].
  const activations = ((L + 3) * M * d + 2 * M * hd + rows * length * length) * 4;

  const widths = d + H * hd + 2 * KV * hd;
  const layerDequantizing = layerDequantized + DEQUANT_TEMPORARIES * layerWidest * 4;
  const layerTransient = 4 * (ATTENTION_TENSORS * rows * H * length * length + M * (HIDDEN_TENSORS * widths + FFN_TENSORS * F)) + layerDequantizing;
  const trained = M; // every token of the micro-batch may be a trained row
  const chunk = Math.min(V, VOCAB_CHUNK);
  const headDequantizing = headStored.blocks ? (1 + DEQUANT_TEMPORARIES) * chunk * d * 4 : 0;
  const headTransient = 4 * (HEAD_CHUNK_TENSORS * trained * chunk + 4 * trained * d) + headDequantizing;

  const runtime = RUNTIME_BYTES;
  const transient = Math.max(layerTransient, headTransient);
  const total = weights + embedding + floatBase + adapters + moments + activations + transient + runtime;
  return { weights, embedding, floatBase, adapters, moments, activations, layerTransient, headTransient, layerDequantizing, headDequantizing, runtime, total, runtimeHeld: weights + transient + optimizerHeld };
}

const gb = (b: number) => (b / 1e9).toFixed(1);

/** The memory a job is checked against: the host's, and the GPU's when the graphs run there. */
export interface AvailableMemory {
  /** Bytes the host can still give this process (MemAvailable, or the cgroup's limit less what is used). */
  hostAvailable: number;
  hostTotal: number;
  /** Bytes of the base this process already holds (float weights read before the check): counted in the plan, not free. */
  hostAlreadyHeld?: number;
  /** The GPU the graphs run on: ORT's weights and transients go there, the rest stays on the host. */
  device?: DeviceMemory & { label: string };
}

/**
 * Throws, with every part in GB and the memory there is, when a job's plan does not fit: on the CPU the whole plan
 * against the host's available memory (plus what the process already holds of it); on a GPU the weights and
 * transients against the device's free memory and the rest against the host's.
 */
export function assertGraphPlanFits(plan: GraphMemoryPlan, memory: AvailableMemory, what: string): void {
  const parts =
    `weights as stored ${gb(plan.weights)} GB, embedding table ${gb(plan.embedding)} GB` +
    (plan.floatBase ? `, float base held in JS ${gb(plan.floatBase)} GB` : '') +
    `, adapters and their gradients ${gb(plan.adapters)} GB, AdamW moments ${gb(plan.moments)} GB, ` +
    `saved activations ${gb(plan.activations)} GB, a layer's backward ${gb(plan.layerTransient)} GB, the head's backward ${gb(plan.headTransient)} GB ` +
    `(one at a time), runtime ${gb(plan.runtime)} GB`;
  const advice = 'use a smaller micro-batch, shorter sequences, a more quantized base (GGUF Q4_K) or a larger machine';
  const held = memory.hostAlreadyHeld ?? 0;
  const hostFree = `${gb(memory.hostAvailable + held)} GB available of this machine's ${gb(memory.hostTotal)} GB` + (held ? ` (${gb(held)} GB of it the base already loaded)` : '');
  if (memory.device) {
    const deviceFree = memory.device.freeMiB * 2 ** 20;
    if (plan.runtimeHeld > deviceFree) {
      throw new Error(
        `${what} needs about ${gb(plan.runtimeHeld)} GB on ${memory.device.label} (${memory.device.name}) for weights as stored ${gb(plan.weights)} GB, ` +
          `a layer's backward ${gb(plan.layerTransient)} GB / the head's ${gb(plan.headTransient)} GB and the optimizer's adapters and moments, and the GPU has ${gb(deviceFree)} GB free of ` +
          `${gb(memory.device.totalMiB * 2 ** 20)} GB (all parts: ${parts}); ${advice}`,
      );
    }
    const host = plan.total - plan.runtimeHeld;
    if (host > memory.hostAvailable + held) throw new Error(`${what} needs about ${gb(host)} GB of host memory beside the GPU's share (${parts}), and there is ${hostFree}; ${advice}`);
    return;
  }
  if (plan.total > memory.hostAvailable + held) throw new Error(`${what} needs about ${gb(plan.total)} GB of memory (${parts}), and there is ${hostFree}; ${advice}`);
}
