// The LoRA training engine on ONNX Runtime graphs: a graph per decoder layer (layer-graph.ts) and one for the
// last norm + LM head + log-softmax (head-graph.ts), built over the frozen base as the model file stores it.
//
// A micro-batch's forward runs the embedding lookup (here, a row per token), the layers in order (keeping each
// layer's input) and the head at the trained rows: per-token logprobs and entropies. Its backward takes
// dLoss/dlogprob per trained row and runs the head, then the layers in reverse (each recomputing its forward),
// giving every adapter's gradient. The loss between the two is the caller's (loop.ts keeps TF.js's losses over
// the logprob vector), so every loss the trainer knows works unchanged.
import type { ModelConfig } from '../../../src/runtime/model-config.js';
import type { SourceTensor, WeightSource } from '../../../src/runtime/weight-source.js';
import { dequantizeNBits, nbitsLayout, repackGgml, type NBitsWeights } from '../../../src/runtime/gguf-repack.js';
import type { TokenBatch } from '../model.js';
import type { LoraTarget } from '../lora.js';
import { attentionMask } from '../attention-mask.js';
import { ropeTables } from '../rope.js';
import { frozenRows, type FrozenMatrixData } from './frozen-matrix.js';
import { buildLayerGraph, loraGradOutput, loraInput, savedTensors, type LayerWeights } from './layer-graph.js';
import { freemem, totalmem } from 'node:os';
import { buildHeadGraph, VOCAB_CHUNK } from './head-graph.js';
import { GraphSession, TransferCounter, type GraphSessionOptions, type Output } from './graph-session.js';

/** One adapted projection's factors in lora.ts's layout: A transposed [in, r], B transposed [r, out]. */
export interface AdapterFactors { a: Float32Array; b: Float32Array; inDim: number; outDim: number; rank: number }

/** The trained rows of a micro-batch: flattened token index and the target there. */
export interface TrainedRows { index: Int32Array; targets: Int32Array }

/** What a forward keeps for its backward. */
export interface ForwardState {
  batch: TokenBatch;
  rows: TrainedRows;
  /** Each layer's input [M, d]; the last entry is the last layer's output. */
  layerInputs: Float32Array[];
  /** Each layer's saved activations (by savedTensors name), or null where its backward recomputes them. */
  layerSaved: (Map<string, Output> | null)[];
  lse: Float32Array;
  /** The head's softmax by vocabulary chunk, kept for its backward, or null where it computes the logits again. */
  headProbs: Output[] | null;
  adapters: Map<string, AdapterFactors>;
  scale: number;
  cos: Float32Array;
  sin: Float32Array;
  mask: Float32Array;
}

/** A source tensor as a training graph reads it: its ggml blocks repacked where MatMulNBits has a form, else float32. */
export function frozenData(t: SourceTensor): FrozenMatrixData {
  const [N, K] = t.shape;
  const layout = t.ggml ? nbitsLayout(t.ggml.type) : null;
  if (t.ggml && layout && K % 256 === 0) {
    const { type, bytes } = t.ggml;
    // Repacked once: the head's vocabulary chunks each ask for their rows of it.
    let repacked: NBitsWeights | null = null;
    return { kind: 'nbits', N, K, weights: () => (repacked ??= repackGgml(type, bytes(), N, K)) };
  }
  return { kind: 'float', N, K, data: () => t.f32() };
}

/** Module path of an adapted projection: `model.layers.3.self_attn.q_proj`. */
export function projectionPath(layer: number, target: LoraTarget): string {
  const parent = target === 'gate_proj' || target === 'up_proj' || target === 'down_proj' ? 'mlp' : 'self_attn';
  return `model.layers.${layer}.${parent}.${target}`;
}

/** Token embeddings: rows of the table, dequantized row by row when it is stored in blocks. */
class EmbeddingTable {
  private readonly float: Float32Array | null;
  constructor(private readonly data: FrozenMatrixData) {
    this.float = data.kind === 'float' ? data.data() : null;
    if (data.kind === 'nbits') data.weights(); // repacked now (frozenData keeps it), not at the first token
  }
  rows(ids: Int32Array): Float32Array {
    const D = this.data.K;
    const out = new Float32Array(ids.length * D);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (this.float) { out.set(this.float.subarray(id * D, (id + 1) * D), i * D); continue; }
      out.set(dequantizeNBits((frozenRows(this.data, id, id + 1) as Extract<FrozenMatrixData, { kind: 'nbits' }>).weights(), 1, D), i * D);
    }
    return out;
  }
}

/**
 * Bytes of saved activations a step may keep: HEARTH_TRAIN_SAVED_BYTES, or a quarter of the machine's memory, and
 * never more than what is free now less a reserve for the step's transients (memory-plan.ts checks a job against
 * what it needs without saving anything, so saving only ever uses what is left). Layers are saved in order while
 * their activations fit; the rest recompute their forward.
 */
export function savedActivationBudget(env: Record<string, string | undefined> = process.env, free = process.availableMemory?.() ?? freemem()): number {
  const asked = env.HEARTH_TRAIN_SAVED_BYTES;
  if (asked !== undefined && asked !== '' && Number.isFinite(Number(asked)) && Number(asked) >= 0) return Number(asked);
  return Math.max(0, Math.min(totalmem() / 4, free - SAVED_RESERVE_BYTES));
}

/** What saving leaves free for the step's transients (a layer's backward, the head's chunks). */
const SAVED_RESERVE_BYTES = 2 * 2 ** 30;

/** Bytes of one layer's saved activations for `rows` × `length` tokens (what savedTensors lists). */
export function layerSavedBytes(config: ModelConfig, rows: number, length: number, rank: number, adapted: number): number {
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, headDim: hd, intermediateSize: F } = config;
  const M = rows * length;
  const perToken = 2 * D + H * hd + D + 2 /* r1, r2 */ + 4 * F + (H + 2 * KV) * hd + adapted * rank + (config.qkNorm ? (H + KV) * (hd + 1) : 0);
  return 4 * (M * perToken + rows * H * length * length);
}

/**
 * Whether the sessions may keep ONNX Runtime's memory arenas (graph-session.ts: twice as fast on large tensors,
 * but each of the numLayers + 1 sessions keeps its peak): when numLayers + 1 peaks of a layer's backward at the
 * job's largest micro-batch (`transientBytes`, memory-plan.ts) fit in an eighth of the machine's memory.
 */
export function arenasAffordable(numLayers: number, transientBytes: number, total = totalmem()): boolean {
  return (numLayers + 1) * transientBytes <= total / 8;
}

export interface GraphEngineOptions extends GraphSessionOptions {
  /** Called as each graph is built and loaded (`layer 3/32`). */
  onProgress?: (what: string) => void;
}

export class GraphEngine {
  readonly transfers: TransferCounter;
  private readonly layers: GraphSession[] = [];
  private readonly head: GraphSession;
  private readonly embedding: EmbeddingTable;
  private readonly saved: { name: string; rank: number }[];
  /** The head graph's vocabulary chunks (0 … k−1). */
  private readonly headChunks: number[];

  constructor(readonly config: ModelConfig, source: WeightSource, readonly targets: readonly LoraTarget[], opts: GraphEngineOptions = {}) {
    if (config.numHeads % config.numKvHeads !== 0) throw new Error(`numHeads ${config.numHeads} is not a multiple of numKvHeads ${config.numKvHeads}`);
    this.transfers = opts.counter ?? new TransferCounter();
    this.saved = savedTensors(config, targets);
    this.headChunks = Array.from({ length: Math.ceil(config.vocabSize / VOCAB_CHUNK) }, (_, i) => i);
    const sessionOpts = { ...opts, counter: this.transfers };
    const tensor = (name: string) => {
      const t = source.get(name);
      if (!t) throw new Error(`weight ${name} is missing`);
      return t;
    };
    this.embedding = new EmbeddingTable(frozenData(tensor('model.embed_tokens.weight')));
    for (let l = 0; l < config.numLayers; l++) {
      const prefix = `model.layers.${l}.`;
      const weights: LayerWeights = { matrices: new Map(), vectors: new Map() };
      for (const [name, t] of source) {
        if (!name.startsWith(prefix)) continue;
        const local = name.slice(prefix.length);
        if (local.endsWith('_proj.weight')) weights.matrices.set(local.slice(0, -'.weight'.length), frozenData(t));
        else weights.vectors.set(local, t.f32());
      }
      this.layers.push(GraphSession.load(buildLayerGraph(config, weights, targets), sessionOpts));
      opts.onProgress?.(`layer ${l + 1}/${config.numLayers}`);
    }
    const headName = config.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
    this.head = GraphSession.load(buildHeadGraph(config, frozenData(tensor(headName)), tensor('model.norm.weight').f32()), sessionOpts);
    opts.onProgress?.('head');
  }

  /** The logprob and entropy of each trained row, and what the backward needs. */
  forward(batch: TokenBatch, rows: TrainedRows, adapters: Map<string, AdapterFactors>, scale: number, backwardFollows = true): { logp: Float32Array; entropy: Float32Array; state: ForwardState } {
    const D = this.config.hiddenSize;
    const { cos, sinSigned: sin } = ropeTables(this.config, batch.positions);
    const mask = attentionMask(batch, this.config.slidingWindow ?? null);
    const layerInputs: Float32Array[] = [this.embedding.rows(batch.inputIds)];
    const layerSaved: (Map<string, Output> | null)[] = [];
    const rank = adapters.values().next().value?.rank ?? 0;
    const perLayer = layerSavedBytes(this.config, batch.rows, batch.length, rank, this.targets.length);
    // The head's softmax first (keeping it saves a product with the largest matrix), then layers in order.
    let budget = backwardFollows ? savedActivationBudget() : 0;
    const headProbBytes = 4 * rows.index.length * this.config.vocabSize;
    const saveHead = headProbBytes <= budget;
    if (saveHead) budget -= headProbBytes;
    for (let l = 0; l < this.layers.length; l++) {
      const save = perLayer * (l + 1) <= budget;
      const out = this.layers[l].run(this.layerFeeds(l, batch, layerInputs[l], { cos, sin, mask }, adapters, scale, null, save ? 'save' : null));
      layerInputs.push(out.out.data);
      layerSaved.push(save ? new Map(this.saved.map(({ name }) => [name, out[`saved_out.${name}`]])) : null);
    }
    const selected = gatherRows(layerInputs[layerInputs.length - 1], rows.index, D);
    const head = this.head.run({
      x: { data: selected, dims: [rows.index.length, D] },
      targets: { data: BigInt64Array.from(rows.targets, (t) => BigInt(t)) },
      backward: { data: false },
      save: { data: saveHead },
      lse: { data: new Float32Array(0), dims: [0, 1] },
      dlogp: { data: new Float32Array(0), dims: [0, 1] },
      ...this.savedProbFeeds(null),
    });
    const headProbs = saveHead ? this.headChunks.map((i) => head[`saved_probs_out.${i}`]) : null;
    return {
      logp: head.logp.data, entropy: head.entropy.data,
      state: { batch, rows, layerInputs, layerSaved, lse: head.lse_out.data, headProbs, adapters, scale, cos, sin, mask },
    };
  }

  /** Every adapter's gradient ([in, r] and [r, out], by module path) from dLoss/dlogprob of each trained row. */
  backward(state: ForwardState, dlogp: Float32Array): Map<string, { a: Float32Array; b: Float32Array }> {
    const { hiddenSize: D } = this.config;
    const { batch, rows, layerInputs } = state;
    const n = rows.index.length;
    const head = this.head.run({
      x: { data: gatherRows(layerInputs[layerInputs.length - 1], rows.index, D), dims: [n, D] },
      targets: { data: BigInt64Array.from(rows.targets, (t) => BigInt(t)) },
      backward: { data: true },
      save: { data: state.headProbs !== null },
      lse: { data: state.lse, dims: [n, 1] },
      dlogp: { data: dlogp, dims: [n, 1] },
      ...this.savedProbFeeds(state.headProbs),
    });
    state.headProbs = null;
    let dy: Float32Array = new Float32Array(batch.rows * batch.length * D);
    const dSelected = head.dx.data;
    for (let j = 0; j < n; j++) {
      const at = rows.index[j] * D;
      for (let k = 0; k < D; k++) dy[at + k] += dSelected[j * D + k];
    }
    const grads = new Map<string, { a: Float32Array; b: Float32Array }>();
    for (let l = this.layers.length - 1; l >= 0; l--) {
      const saved = state.layerSaved[l];
      const out = this.layers[l].run(this.layerFeeds(l, batch, layerInputs[l], state, state.adapters, state.scale, dy, saved));
      state.layerSaved[l] = null; // read: let it go before the next layer's backward
      dy = out.out.data;
      for (const target of this.targets) grads.set(projectionPath(l, target), { a: out[loraGradOutput(target, 'a')].data, b: out[loraGradOutput(target, 'b')].data });
    }
    return grads;
  }

  /** The head's saved-softmax inputs: the kept chunks, or empties. */
  private savedProbFeeds(logits: Output[] | null): Record<string, Output> {
    return Object.fromEntries(this.headChunks.map((i) => [`saved_probs.${i}`, logits ? logits[i] : { data: new Float32Array(0), dims: [0, 0] }]));
  }

  /**
   * One layer's feeds. `saved`: 'save' asks a forward to return its activations; a map gives them to a backward;
   * null runs the forward alone or the backward with the forward recomputed.
   */
  private layerFeeds(layer: number, batch: TokenBatch, x: Float32Array, t: { cos: Float32Array; sin: Float32Array; mask: Float32Array }, adapters: Map<string, AdapterFactors>, scale: number, dy: Float32Array | null, saved: 'save' | Map<string, Output> | null) {
    const { hiddenSize: D, headDim: hd } = this.config;
    const M = batch.rows * batch.length;
    const feeds: Record<string, { data: Float32Array | BigInt64Array | boolean | number; dims?: number[] }> = {
      x: { data: x, dims: [M, D] },
      bt: { data: new BigInt64Array([BigInt(batch.rows), BigInt(batch.length)]) },
      cos: { data: t.cos, dims: [M, 1, hd] },
      sin: { data: t.sin, dims: [M, 1, hd] },
      mask: { data: t.mask, dims: [batch.rows, 1, 1, batch.length, batch.length] },
      lora_scale: { data: scale },
      backward: { data: dy !== null },
      dy: dy ? { data: dy, dims: [M, D] } : { data: new Float32Array(0), dims: [0, D] },
      save: { data: saved !== null },
    };
    for (const { name, rank } of this.saved) {
      const given = saved instanceof Map ? saved.get(name)! : null;
      feeds[`saved.${name}`] = given ?? { data: new Float32Array(0), dims: Array.from({ length: rank }, () => 0) };
    }
    for (const target of this.targets) {
      const f = adapters.get(projectionPath(layer, target));
      if (!f) throw new Error(`no adapter for ${projectionPath(layer, target)}`);
      feeds[loraInput(target, 'a')] = { data: f.a, dims: [f.inDim, f.rank] };
      feeds[loraInput(target, 'b')] = { data: f.b, dims: [f.rank, f.outDim] };
    }
    return feeds;
  }

  dispose(): void {
    for (const s of this.layers) s.dispose();
    this.head.dispose();
  }
}

function gatherRows(x: Float32Array, index: Int32Array, D: number): Float32Array {
  const out = new Float32Array(index.length * D);
  for (let j = 0; j < index.length; j++) out.set(x.subarray(index[j] * D, (index[j] + 1) * D), j * D);
  return out;
}
