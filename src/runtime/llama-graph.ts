// Builds the ONNX decoder graph (Llama / Mistral / Qwen2 / Qwen3) from ModelConfig + Weights.
// Interface (Optimum / transformers.js names and symbolic dims):
//   inputs  input_ids, attention_mask, position_ids [int64], past_key_values.{i}.key|value [f32, B,KV,P,hd]
//           (+ num_logits_to_keep [int64 [1]] in Hearth's runner graph)
//   outputs logits [B, num_logits_to_keep, V] (trailing positions), and either present.{i}.key|value
//           (exports, forExport) or new_key_values.{i}.key|value and logits_lse [B, num_logits_to_keep]
//           = log Σ exp(logits) and hidden [B, num_logits_to_keep, D] = the final-norm hidden states the
//           logits are computed from (the runner graph; embeddings pool them, see worker/inference/embeddings.ts)
// Three attention forms, all with the KV cache right-padded (row b valid at [0, len_b)):
//   'gqa'      com.microsoft:GroupQueryAttention (fastest on CPU for head_dim % 16 == 0; smaller heads
//              can be zero-padded, see padHeads, and the cache then has cacheHeadDim() columns). In the
//              runner graph, decode steps over enough cache read it in place instead (decodeStepInPlace).
//   'standard' explicit mask, any head_dim. Exports use opset-17 ops only (widest compatibility); the
//              runner graph reads the past in place (no concatenated cache) with contrib RotaryEmbedding.
//   'onnx23'   opset-23 Attention + RotaryEmbedding (any head_dim, explicit mask): few nodes, which
//              helps very small models.
// Runner graphs that decode in place also take packed rows (mixed steps: decoding rows and prompt chunks
// in one run, see packedRows): input_ids [1, N] holds every row's new tokens one after another.
import type { ModelConfig, Weights } from './model-config.js';
import { DataType, GraphBuilder, float, type Dim, type ExternalData } from './onnx-proto.js';
import { ropeTables } from './rope.js';
import { q4BlockFor, quantizeQ4, type Q4Weights } from './q4.js';
import { weightsSource, type SourceTensor, type WeightSource } from './weight-source.js';
import { nbitsLayout, repackGgml, type NBitsWeights } from './gguf-repack.js';

export type AttentionKind = 'gqa' | 'standard' | 'onnx23';
export type WeightType = 'stored' | 'f32' | 'q4';
/**
 * What one decoder body computes attention with: a kind, 'decode' (runner graphs, one new token per row)
 * or 'packed' (runner graphs, rows with different numbers of new tokens packed into one sequence).
 */
type BodyForm = AttentionKind | 'decode' | 'packed';

export interface GraphOptions {
  attention: AttentionKind;
  /**
   * Exported graphs follow the Optimum interface exactly: full `present.{i}.key|value` outputs and no
   * `num_logits_to_keep` input. Hearth's own runner graph (default) instead outputs only the new
   * tokens' keys/values, `new_key_values.{i}.key|value` [B, KV, S, hd]: onnxruntime-node copies every
   * output into JS memory (even one given as a preallocated fetch), so returning the whole cache
   * would copy it once more per step and churn the garbage collector (measured: 1.4 MB per token on
   * the ~20M model at context 170, a major GC every ~40 tokens).
   */
  forExport?: boolean;
  /**
   * Add per-row LoRA inputs (see lora.ts): for each projection group (qkv, o, gate_up, down)
   * `lora.{group}.a` [num_layers, batch_size, in, rank] and `.b` [num_layers, batch_size, rank, out],
   * added to the base projection. Rank may be 0 (no adapter in the batch). One input per group, not per
   * layer: onnxruntime-node wraps every feed, and 64 of them (~20M) cost 0.4–0.7 ms per step even when
   * the If skips them; 8 cost ~0.05 ms.
   */
  lora?: boolean;
  /**
   * What the projections, LM head and embedding compute with:
   *   'stored' (default) as the file holds them: ggml block-quantized tensors (GGUF) as MatMulNBits /
   *           GatherBlockQuantized over the same blocks (see gguf-repack.ts), float tensors as float32;
   *   'f32'   everything dequantized to float32;
   *   'q4'    projections and LM head re-quantized to 4 bits in blocks of 128 (MatMulNBits, int8
   *           activations): 2-5× faster decode than f32 and 6× smaller. Matrices whose input size is not
   *           a multiple of 16 stay f32.
   */
  weightType?: WeightType;
  /** Preferred block length of the 4-bit weights (default Q4_BLOCK = 128; see q4BlockFor for input sizes it does not divide). */
  q4Block?: number;
  /**
   * MatMulNBits' accuracy_level for the stored blocks: 4 (default) rounds activations to int8 per block, as
   * llama.cpp's quantized dot products do, for int8 kernels; 0 computes in float32 (slower; exact tests).
   */
  nbitsAccuracy?: 0 | 4;
  /**
   * Serve float16 weights at 16 bits (MatMul in float16 between two Casts; the embedding gathered in float16)
   * instead of widening them to float32: for devices with fast 16-bit math (see fast-half.ts). Half the
   * memory and bytes per decode step; activations and the residual stream stay float32.
   */
  half?: boolean;
  /**
   * Device-resident KV cache (runner graphs on a GPU, GroupQueryAttention only): output GroupQueryAttention's
   * whole present, `present.{i}.key|value` [rows, KV, present_sequence_length, hp], which the runner keeps in GPU
   * memory and feeds back as the next step's past (resident-kv.ts), instead of the new positions for the host to
   * append. No in-place decode or packed forms: they exist to spare host copies that a device cache never makes.
   */
  residentKv?: boolean;
  /** Write large initializers to this side file (ONNX external data) instead of into the graph. */
  external?: ExternalData;
  /** Rows of the rotary tables = longest supported context. */
  maxPositions: number;
}

/**
 * Chosen by measurement (2-core Xeon, ORT 1.30, 2 threads): GroupQueryAttention when head_dim % 16 == 0
 * (on ~20M/~120M models it tied or beat opset-23 Attention, and the notes measured ~2× the standard
 * graph on ~120M); otherwise the opset-23 Attention graph,
 * 1.3–1.8× faster than the standard graph and zero-padded GQA on stories260K (head_dim 8).
 * On a GPU always GroupQueryAttention: ORT's WebGPU provider has no kernel for the opset-23 Attention op (it
 * ran on the CPU, with copies both ways every layer) nor for half of the standard graph's mask and shape ops,
 * while GroupQueryAttention and every projection/norm ran on WebGPU (ORT 1.30, SwiftShader adapter, 2026-11-26).
 */
export function defaultAttention(config: ModelConfig, device = 'cpu'): AttentionKind {
  if (device !== 'cpu') return 'gqa';
  return config.headDim % 16 === 0 ? 'gqa' : 'onnx23';
}

/** Head size of the KV cache tensors: GQA pads heads to a multiple of 16. */
export function cacheHeadDim(config: ModelConfig, attention: AttentionKind): number {
  return attention === 'gqa' ? Math.ceil(config.headDim / 16) * 16 : config.headDim;
}

/**
 * Zero-pad each head of a [heads·hd, cols] projection to hp rows. With `rotary`, the two rotate_half
 * halves move apart (row i → i, row hd/2+i → hp/2+i) so GQA's pairs (i, i+hp/2) are the original
 * pairs; padded rows are zero and contribute nothing to q·k or to the attention output.
 */
export function padHeads(data: Float32Array, heads: number, hd: number, hp: number, cols: number, rotary: boolean): Float32Array {
  if (hp === hd) return data;
  const out = new Float32Array(heads * hp * cols);
  for (let h = 0; h < heads; h++)
    for (let d = 0; d < hd; d++) {
      const to = rotary && d >= hd / 2 ? hp / 2 + (d - hd / 2) : d;
      out.set(data.subarray((h * hd + d) * cols, (h * hd + d + 1) * cols), (h * hp + to) * cols);
    }
  return out;
}

/** [rows, cols] → [cols, rows], in 32×32 tiles so both sides stay in cache (10× faster on big matrices). */
export function transpose<T extends Float32Array | Uint16Array>(data: T, rows: number, cols: number): T {
  const out = new (data.constructor as new (n: number) => T)(data.length);
  const T = 32;
  for (let r0 = 0; r0 < rows; r0 += T) {
    const r1 = Math.min(r0 + T, rows);
    for (let c0 = 0; c0 < cols; c0 += T) {
      const c1 = Math.min(c0 + T, cols);
      for (let r = r0; r < r1; r++) {
        const base = r * cols;
        for (let c = c0; c < c1; c++) out[c * rows + r] = data[base + c];
      }
    }
  }
  return out;
}

function concat<T extends Float32Array | Uint16Array>(arrays: T[]): T {
  const out = new (arrays[0].constructor as new (n: number) => T)(arrays.reduce((a, x) => a + x.length, 0));
  let o = 0;
  for (const a of arrays) { out.set(a, o); o += a.length; }
  return out;
}

/** Read a weight and check its shape, with an error that names what is wrong. */
export function expectWeight<T extends { shape: number[] }>(weights: Map<string, T>, name: string, shape: number[]): T {
  const t = weights.get(name);
  if (!t) throw new Error(`missing tensor ${name}`);
  if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i]))
    throw new Error(`tensor ${name} has shape [${t.shape}] but the config implies [${shape}]`);
  return t;
}

/** Check that every tensor the config implies is present with the right shape. */
export function verifyWeights(config: ModelConfig, weights: Map<string, { shape: number[] }>): void {
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, headDim: hd, intermediateSize: F, vocabSize: V } = config;
  expectWeight(weights, 'model.embed_tokens.weight', [V, D]);
  expectWeight(weights, 'model.norm.weight', [D]);
  if (!config.tieWordEmbeddings) expectWeight(weights, 'lm_head.weight', [V, D]);
  for (let i = 0; i < config.numLayers; i++) {
    const p = `model.layers.${i}.`;
    expectWeight(weights, p + 'input_layernorm.weight', [D]);
    expectWeight(weights, p + 'post_attention_layernorm.weight', [D]);
    expectWeight(weights, p + 'self_attn.q_proj.weight', [H * hd, D]);
    expectWeight(weights, p + 'self_attn.k_proj.weight', [KV * hd, D]);
    expectWeight(weights, p + 'self_attn.v_proj.weight', [KV * hd, D]);
    expectWeight(weights, p + 'self_attn.o_proj.weight', [D, H * hd]);
    expectWeight(weights, p + 'mlp.gate_proj.weight', [F, D]);
    expectWeight(weights, p + 'mlp.up_proj.weight', [F, D]);
    expectWeight(weights, p + 'mlp.down_proj.weight', [D, F]);
    if (config.attentionBias) {
      expectWeight(weights, p + 'self_attn.q_proj.bias', [H * hd]);
      expectWeight(weights, p + 'self_attn.k_proj.bias', [KV * hd]);
      expectWeight(weights, p + 'self_attn.v_proj.bias', [KV * hd]);
    }
    if (config.qkNorm) {
      expectWeight(weights, p + 'self_attn.q_norm.weight', [hd]);
      expectWeight(weights, p + 'self_attn.k_norm.weight', [hd]);
    }
  }
}

/** Widen [pos, half] rotary tables to [pos, hpHalf] (cos 1, sin 0 in the padding). */
function padRopeTables(t: { cos: Float32Array; sin: Float32Array }, positions: number, half: number, hpHalf: number) {
  if (half === hpHalf) return t;
  const cos = new Float32Array(positions * hpHalf).fill(1), sin = new Float32Array(positions * hpHalf);
  for (let p = 0; p < positions; p++) {
    cos.set(t.cos.subarray(p * half, (p + 1) * half), p * hpHalf);
    sin.set(t.sin.subarray(p * half, (p + 1) * half), p * hpHalf);
  }
  return { cos, sin };
}

/**
 * The decoder graph as ONNX bytes. Weights are read from `weights` as the graph needs them; with
 * `opts.external` the large ones go to that side file as they are made, so the graph stays small.
 */
export function buildDecoderGraph(config: ModelConfig, weights: Weights | WeightSource, opts: GraphOptions): Uint8Array {
  verifyWeights(config, weights);
  const source = isSource(weights) ? weights : weightsSource(weights);
  const hd = config.headDim;
  if (opts.residentKv && (opts.attention !== 'gqa' || opts.forExport)) throw new Error('a resident KV cache needs the GroupQueryAttention runner graph');
  if (opts.attention === 'gqa' && hd % 16 !== 0 && config.qkNorm) throw new Error(`GroupQueryAttention needs head_dim % 16 == 0 with q/k norm (head_dim ${hd}); use the standard attention graph`);
  const root = new GraphBuilder();
  root.external = opts.external ?? null;
  const outputs = decoderOutputs(config, opts);
  if (!opts.lora) {
    decoderBody(root, config, source, opts, false, '');
  } else {
    // Two bodies over the same weights (initializers live once, in the root graph): with the LoRA
    // inputs, and without them for batches that carry no adapter, chosen per run by `use_lora`. The
    // rank-0 LoRA nodes (12 per layer) otherwise cost base-model requests 10% (~20M) to 45% (~1M).
    // (Weights must not sit two If levels deep: ORT then stops pre-packing them, and the ~20M model's
    // MatMuls took twice as long. So the per-layer attention Ifs below hold no weights.)
    const useLora = root.input('use_lora', DataType.BOOL, []);
    const withLora = root.subgraph(), base = root.subgraph();
    decoderBody(withLora, config, source, opts, true, '.lora');
    decoderBody(base, config, source, opts, false, '.base');
    for (const [name, dims] of outputs) { withLora.output(name + '.lora', DataType.FLOAT, dims); base.output(name + '.base', DataType.FLOAT, dims); }
    root.node('If', [useLora], { outputs: outputs.map(([name]) => name), attrs: { then_branch: { graph: withLora, name: 'with_lora' }, else_branch: { graph: base, name: 'base' } } });
  }
  for (const [name, dims] of outputs) root.output(name, DataType.FLOAT, dims);
  return root.toModelBytes('hearth_decoder', opts.attention === 'onnx23' ? 23 : 17);
}

function isSource(w: Weights | WeightSource): w is WeightSource {
  const first = w.values().next().value as SourceTensor | { data: Float32Array } | undefined;
  return first !== undefined && 'f32' in first;
}

/**
 * Whether the runner graph decodes rows of one new token with the 'decode' attention, which reads the
 * cache where it lies: GroupQueryAttention copies each row's whole past into a new present buffer every
 * step (onnxruntime-node cannot bind one buffer as both), which costs more than the attention itself
 * once rows are batched or contexts long. 'standard' graphs use it too; padded GQA heads (head_dim % 16 ≠ 0)
 * and onnx23 graphs never do.
 */
export function decodesInPlace(config: ModelConfig, attention: AttentionKind): boolean {
  return attention === 'standard' || (attention === 'gqa' && config.headDim % 16 === 0);
}

/**
 * Rows × cache positions from which a decode step takes the in-place form. Below it one GroupQueryAttention
 * node beats the in-place form's ~17 nodes per layer: ~20M, one row at context 130 ran 4–7% slower in place,
 * at context 600 2% faster; 8 rows at context 130 10–12% faster.
 */
export const IN_PLACE_DECODE_MIN = 512;

/** The runner's side of the graph's choice: rows of one new token over caches of P positions. */
export function decodeStepInPlace(rows: number, newTokens: number, cachePositions: number): boolean {
  return newTokens === 1 && rows * (cachePositions + 1) >= IN_PLACE_DECODE_MIN;
}

/**
 * Symbolic name of the cache's batch dimension. Runner graphs name it apart from input_ids' batch_size:
 * packed runs feed input_ids as one row over a cache of several (ORT plans buffers by these names, and
 * one name for both made it reuse a [1, N, ·] buffer for [B, S, ·]).
 */
function cacheRowsDim(opts: GraphOptions): string {
  return opts.forExport ? 'batch_size' : 'rows';
}

/** Graph outputs: logits first, then the KV outputs (see GraphOptions.forExport). */
function decoderOutputs(config: ModelConfig, opts: GraphOptions): [string, Dim[]][] {
  const hp = cacheHeadDim(config, opts.attention);
  const rows = cacheRowsDim(opts);
  const out: [string, Dim[]][] = [['logits', [rows, 'num_logits', config.vocabSize]]];
  if (!opts.forExport) out.push(['logits_lse', [rows, 'num_logits']], ['hidden', [rows, 'num_logits', config.hiddenSize]]);
  for (let i = 0; i < config.numLayers; i++) {
    for (const kind of ['key', 'value']) {
      if (opts.forExport) out.push([`present.${i}.${kind}`, ['batch_size', config.numKvHeads, 'total_sequence_length', hp]]);
      else if (opts.residentKv) out.push([`present.${i}.${kind}`, [rows, config.numKvHeads, 'present_sequence_length', hp]]);
      else out.push([`new_key_values.${i}.${kind}`, [rows, config.numKvHeads, 'new_positions', hp]]);
    }
  }
  return out;
}

/** Per-forward values the attention forms share across layers (made once per body, before the layers). */
interface AttentionShared {
  positionIds: string;
  cosTable: string;
  sinTable: string;
  /** GQA: seqlens_k, total_sequence_length, and the index that gathers the new positions out of the present. */
  gqa?: { seqlensK: string; totalLen: string; newIndex: string | null };
  /** Explicit-mask forms: additive bias [B,1,G·S,T] ([B,1,S,T] for onnx23), RoPE tables for exports, [P, S]. */
  masked?: { bias: string; cosF: string; sinS: string; pastNewSplit: string };
  /** The decode form: bias [B,1,1,P+1] and [P, 1]. */
  decode?: { bias: string; pastNewSplit: string };
  /** Packed rows (see packedRows). */
  packed?: PackedRows;
}

/** Names a layer's attention writes: its output, and the new keys/values (or the present, in exports). */
interface AttentionOutputs { attn: string; key: string; value: string }

/**
 * The decoder's nodes in graph `g` (the root, or an If branch whose outputs carry `suffix`). Weights
 * are read lazily (GraphBuilder makes each named initializer once): a second body reuses what the
 * first made, whose source weights may be consumed by then.
 */
function decoderBody(g: GraphBuilder, config: ModelConfig, weights: WeightSource, opts: GraphOptions, lora: boolean, suffix: string): void {
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, headDim: hd, intermediateSize: F, vocabSize: V } = config;
  const hp = cacheHeadDim(config, opts.attention); // head size inside the graph
  // Weights are given to the builder as thunks: only the first body computes (and reads) them.
  const w = (name: string) => weights.get(name)!.f32();
  const eps = float(config.rmsNormEps);

  const inputIds = g.input('input_ids', DataType.INT64, ['batch_size', 'sequence_length']);
  const mask = g.input('attention_mask', DataType.INT64, [cacheRowsDim(opts), 'total_sequence_length']);
  const positionIds = g.input('position_ids', DataType.INT64, ['batch_size', 'sequence_length']);
  for (let i = 0; i < config.numLayers; i++) {
    for (const kind of ['key', 'value']) {
      g.input(`past_key_values.${i}.${kind}`, DataType.FLOAT, [cacheRowsDim(opts), KV, 'past_sequence_length', hp]);
    }
  }

  let rope: { cos: Float32Array; sin: Float32Array } | undefined;
  const ropeTablesOnce = () => (rope ??= padRopeTables(ropeTables(config, opts.maxPositions), opts.maxPositions, hd / 2, hp / 2));
  const cosTable = g.floats('rope_cos', [opts.maxPositions, hp / 2], () => ropeTablesOnce().cos);
  const sinTable = g.floats('rope_sin', [opts.maxPositions, hp / 2], () => ropeTablesOnce().sin);
  // A norm's weight, made once (in the root graph) for every body and branch that uses it.
  const normWeight = (name: string) => g.floats(name, [weights.get(name)!.shape[0]], () => w(name));
  const rmsNorm = (x: string, weightName: string) => g.op('SimplifiedLayerNormalization', [x, normWeight(weightName)], { axis: -1, epsilon: eps, stash_type: 1 });

  // Decoding rows (one new token each) take the 'decode' form, chosen per layer by an If on the input's
  // shapes (see decodeStepInPlace); prompt chunks and small decode steps take the graph's own form.
  const inPlace = !opts.forExport && !opts.residentKv && decodesInPlace(config, opts.attention);
  const shared = attentionShared(g, config, opts, { inputIds, mask, positionIds, cosTable, sinTable }, inPlace);
  const decodeForm = inPlace ? decodeFormCondition(g, inputIds) : null;
  // Mixed steps: rows with different numbers of new tokens, packed (same graphs as the decode form).
  if (inPlace) shared.packed = packedRows(g, config, mask, shared.decode!.bias);

  // y + (x·A)·B per batch row, when the graph takes LoRA inputs.
  const loraDims = { qkv: [D, (H + 2 * KV) * hp], o: [H * hp, D], gate_up: [D, 2 * F], down: [F, D] } as const;
  const withLora = (layer: number, group: keyof typeof loraDims, input: string, y: string): string => {
    if (!lora) return y;
    const [inDim, outDim] = loraDims[group];
    const aAll = g.input(`lora.${group}.a`, DataType.FLOAT, [config.numLayers, 'batch_size', inDim, `lora_rank_${group}`]);
    const bAll = g.input(`lora.${group}.b`, DataType.FLOAT, [config.numLayers, 'batch_size', `lora_rank_${group}`, outDim]);
    const index = g.int64s([layer], [], `lora_layer_${layer}`);
    const a = g.op('Gather', [aAll, index]), b = g.op('Gather', [bAll, index]);
    return g.op('Add', [y, g.op('MatMul', [g.op('MatMul', [input, a]), b])]);
  };

  // Residual stream x; a branch output waits in `pending` until the next norm, which adds it with
  // SkipSimplifiedLayerNormalization (output 3 = x + branch) in one node instead of Add + norm.
  // y = input · Wᵀ for W in HF [out = N, in = K] layout. `parts` name the source tensors W stacks along
  // N (fused q|k|v, gate|up); `wOutIn` gives W as float32 (with any head padding). Per weightType:
  // MatMulNBits on 4-bit re-quantized W ('q4'), on the file's own blocks ('stored'; one node per run of
  // parts with the same ggml type, outputs concatenated), or MatMul on Wᵀ.
  const linear = (name: string, input: string, wOutIn: () => Float32Array, N: number, K: number, parts: string[], output?: string): string => {
    const block = opts.weightType === 'q4' ? q4BlockFor(K, opts.q4Block) : null;
    if (block !== null) {
      let q: Q4Weights | undefined;
      const quantized = () => (q ??= quantizeQ4(wOutIn(), N, K, block));
      const packed = g.initializer(name + '.q4', DataType.UINT8, [N, K / block, block / 2], () => quantized().packed);
      const scales = g.floats(name + '.q4_scales', [N * (K / block)], () => quantized().scales);
      return g.node('MatMulNBits', [input, packed, scales], {
        outputs: output ? [output] : 1, domain: 'com.microsoft', attrs: { K, N, bits: 4, block_size: block, accuracy_level: 4 },
      })[0];
    }
    const runs = (opts.weightType ?? 'stored') === 'stored' && hp === hd ? ggmlRuns(parts.map((n) => weights.get(n)!), opts.half ?? false) : null;
    if (!runs) return g.node('MatMul', [input, g.floats(name + '_t', [K, N], () => transpose(wOutIn(), N, K))], { outputs: output ? [output] : 1 })[0];
    const ys = runs.map((run) => {
      if (run.type !== null) return nbitsMatMul(g, input, run.tensors, K, blockSums, opts.nbitsAccuracy ?? 4);
      const n = run.tensors.reduce((a, t) => a + t.shape[0], 0);
      if (opts.half && run.tensors.every((t) => t.f16)) {
        const wT = g.halves(`f16.${run.tensors.map(tensorKey).join('+')}_t`, [K, n], () => transpose(concat(run.tensors.map((t) => t.f16!())), n, K));
        return g.op('Cast', [g.op('MatMul', [g.op('Cast', [input], { to: DataType.FLOAT16 }), wT])], { to: DataType.FLOAT });
      }
      return g.op('MatMul', [input, g.floats(`f32.${run.tensors.map(tensorKey).join('+')}_t`, [K, n], () => transpose(concat(run.tensors.map((t) => t.f32())), n, K))]);
    });
    const y = ys.length === 1 ? ys[0] : g.op('Concat', ys, { axis: -1 });
    return output ? g.node('Identity', [y], { outputs: [output] })[0] : y;
  };
  const blockSums = new Map<string, string>();

  const embedTokens = weights.get('model.embed_tokens.weight')!;
  let x = embedding(g, embedTokens, inputIds, opts) ?? g.op('Gather', [g.floats('model.embed_tokens.weight', [V, D], () => w('model.embed_tokens.weight')), inputIds], { axis: 0 });
  let pending: string | null = null;
  const addAndNorm = (weightName: string): string => {
    if (pending === null) return rmsNorm(x, weightName);
    const gamma = g.floats(weightName, [D], () => w(weightName));
    const [normed, , , sum] = g.node('SkipSimplifiedLayerNormalization', [x, pending, gamma], {
      outputs: [g.fresh('normed'), '', '', g.fresh('residual')], domain: 'com.microsoft', attrs: { epsilon: eps },
    });
    x = sum;
    pending = null;
    return normed;
  };
  for (let i = 0; i < config.numLayers; i++) {
    const p = `model.layers.${i}.`;
    const h = addAndNorm(p + 'input_layernorm.weight');
    // Fused QKV projection.
    const pad = (data: Float32Array, heads: number, cols: number, rotary: boolean) => padHeads(data, heads, hd, hp, cols, rotary);
    const wqkv = () => concat([pad(w(p + 'self_attn.q_proj.weight'), H, D, true), pad(w(p + 'self_attn.k_proj.weight'), KV, D, true), pad(w(p + 'self_attn.v_proj.weight'), KV, D, false)]);
    const qkvParts = ['q_proj', 'k_proj', 'v_proj'].map((n) => `${p}self_attn.${n}.weight`);
    let qkv = withLora(i, 'qkv', h, linear(p + 'self_attn.qkv_proj.weight', h, wqkv, (H + 2 * KV) * hp, D, qkvParts));
    if (config.attentionBias) {
      const bias = () => concat([pad(w(p + 'self_attn.q_proj.bias'), H, 1, true), pad(w(p + 'self_attn.k_proj.bias'), KV, 1, true), pad(w(p + 'self_attn.v_proj.bias'), KV, 1, false)]);
      qkv = g.op('Add', [qkv, g.floats(p + 'self_attn.qkv_proj.bias', [(H + 2 * KV) * hp], bias)]);
    }
    const out: AttentionOutputs = {
      attn: g.fresh('attn'),
      key: opts.forExport ? `present.${i}.key` : opts.residentKv ? `present.${i}.key${suffix}` : `new_key_values.${i}.key${suffix}`,
      value: opts.forExport ? `present.${i}.value` : opts.residentKv ? `present.${i}.value${suffix}` : `new_key_values.${i}.value${suffix}`,
    };
    const layer = (sub: GraphBuilder, form: BodyForm, names: AttentionOutputs) => attention(sub, form, config, opts, shared, i, qkv, normWeight, names);
    if (!decodeForm) layer(g, opts.attention, out);
    else {
      // If(decode step) then 'decode' else (If(packed rows) then 'packed' else the graph's own form): decode
      // steps pass one If, as before mixed steps existed. The branches hold attention nodes only (no
      // weights: see buildDecoderGraph).
      const choose = (sub: GraphBuilder, cond: string, then: (b: GraphBuilder, names: AttentionOutputs) => void, otherwise: (b: GraphBuilder, names: AttentionOutputs) => void, names: AttentionOutputs, tag: string) => {
        const t = sub.subgraph(), e = sub.subgraph();
        for (const [branch, build, side] of [[t, then, 'then'], [e, otherwise, 'else']] as const) {
          const inner: AttentionOutputs = { attn: `${names.attn}.${tag}.${side}`, key: `${names.key}.${tag}.${side}`, value: `${names.value}.${tag}.${side}` };
          build(branch, inner);
          branch.output(inner.attn, DataType.FLOAT, ['batch_size', 'sequence_length', H * hp]);
          for (const n of [inner.key, inner.value]) branch.output(n, DataType.FLOAT, ['rows', KV, 'new_positions', hp]);
        }
        sub.node('If', [cond], { outputs: [names.attn, names.key, names.value], attrs: { then_branch: { graph: t, name: g.fresh(tag) }, else_branch: { graph: e, name: g.fresh(`not_${tag}`) } } });
      };
      choose(g, decodeForm, (b, names) => layer(b, 'decode', names), (b, names) => choose(b, shared.packed!.cond, (c, n) => layer(c, 'packed', n), (c, n) => layer(c, opts.attention, n), names, 'packed'), out, 'decode');
    }
    // o_proj^T is [H·hd, D]: its rows follow the (padded) value layout of the attention output.
    const wo = () => (hp === hd ? w(p + 'self_attn.o_proj.weight') : transpose(pad(transpose(w(p + 'self_attn.o_proj.weight'), D, H * hd), H, D, false), H * hp, D));
    pending = withLora(i, 'o', out.attn, linear(p + 'self_attn.o_proj.weight', out.attn, wo, D, H * hp, [p + 'self_attn.o_proj.weight']));

    // SwiGLU MLP with one fused gate|up projection.
    const h2 = addAndNorm(p + 'post_attention_layernorm.weight');
    const wgu = () => concat([w(p + 'mlp.gate_proj.weight'), w(p + 'mlp.up_proj.weight')]);
    const gu = withLora(i, 'gate_up', h2, linear(p + 'mlp.gate_up_proj.weight', h2, wgu, 2 * F, D, [p + 'mlp.gate_proj.weight', p + 'mlp.up_proj.weight']));
    const [gate, up] = g.node('Split', [gu, g.int64s([F, F])], { outputs: 2, attrs: { axis: -1 } });
    const act = g.op('Mul', [g.op('Mul', [gate, g.op('Sigmoid', [gate])]), up]);
    pending = withLora(i, 'down', act, linear(p + 'mlp.down_proj.weight', act, () => w(p + 'mlp.down_proj.weight'), D, F, [p + 'mlp.down_proj.weight']));
  }

  // Logits only for trailing positions (saves S·V·D FLOPs in prefill). Hearth's runner feeds
  // `num_logits_to_keep` (1, or S for prompt scoring); exported graphs keep exactly the last position
  // so they need only the standard inputs. (onnxruntime-node cannot feed initializer-backed inputs.)
  let last = addAndNorm('model.norm.weight');
  if (shared.packed) last = unpackRows(g, shared.packed, last, D);
  const keep = opts.forExport ? g.int64s([1]) : g.input('num_logits_to_keep', DataType.INT64, [1]);
  last = g.op('Slice', [last, g.op('Neg', [keep]), g.int64s([2 ** 31 - 1]), g.int64s([1])]);
  const headName = config.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
  const logits = linear('lm_head.weight', last, () => w(headName), V, D, [headName], 'logits' + suffix);
  // log Σ exp(logits) per position, for the sampler: in JS the exp over the vocabulary costs ~50 µs per
  // token at V = 8192, here a few. (Opset 18 moved the axes from an attribute to an input.)
  const opset23 = opts.attention === 'onnx23';
  // The hidden states the logits come from (after the final norm, as transformers' last_hidden_state): what
  // /v1/embeddings pools. Only the kept positions, so a normal step returns D more floats per row, not S·D.
  if (!opts.forExport) g.node('Identity', [last], { outputs: ['hidden' + suffix] });
  if (!opts.forExport)
    g.node('ReduceLogSumExp', opset23 ? [logits, g.int64s([-1])] : [logits], { outputs: ['logits_lse' + suffix], attrs: opset23 ? { keepdims: 0 } : { axes: { ints: [-1] }, keepdims: 0 } });
}

/** Consecutive source tensors of one ggml type with a MatMulNBits form (type null: float32), or null if none has one. */
function ggmlRuns(tensors: SourceTensor[], half: boolean): { type: number | null; tensors: SourceTensor[] }[] | null {
  const typeOf = (t: SourceTensor) => (t.ggml && nbitsLayout(t.ggml.type) ? t.ggml.type : null);
  if (tensors.every((t) => typeOf(t) === null && !(half && t.f16))) return null;
  const runs: { type: number | null; tensors: SourceTensor[] }[] = [];
  for (const t of tensors) {
    const type = typeOf(t);
    const last = runs[runs.length - 1];
    if (last && last.type === type) last.tensors.push(t); else runs.push({ type, tensors: [t] });
  }
  return runs;
}

/** Repack tensors of one ggml type, stacked along N, once (MatMul and embedding initializers share it). */
const repackCache = new WeakMap<SourceTensor[], NBitsWeights>();
function repackStacked(tensors: SourceTensor[], K: number): NBitsWeights {
  const hit = repackCache.get(tensors);
  if (hit) return hit;
  const parts = tensors.map((t) => repackGgml(t.ggml!.type, t.ggml!.bytes(), t.shape[0], K));
  const cat = <T extends Uint8Array | Float32Array>(xs: T[]): T => {
    if (xs.length === 1) return xs[0];
    const out = new (xs[0].constructor as new (n: number) => T)(xs.reduce((a, x) => a + x.length, 0));
    let o = 0;
    for (const x of xs) { out.set(x, o); o += x.length; }
    return out;
  };
  const r: NBitsWeights = { ...parts[0], packed: cat(parts.map((p) => p.packed)), scales: cat(parts.map((p) => p.scales)), offsets: parts[0].offsets ? cat(parts.map((p) => p.offsets!)) : null };
  repackCache.set(tensors, r);
  return r;
}

/**
 * input [B, S, K] · Wᵀ on the file's own blocks: MatMulNBits, plus Σ_block(input) · offsets for formats
 * with per-block minimums (see gguf-repack.ts). Initializers are named after the stacked source tensors.
 */
function nbitsMatMul(g: GraphBuilder, input: string, tensors: SourceTensor[], K: number, blockSums: Map<string, string>, accuracyLevel: number): string {
  const N = tensors.reduce((a, t) => a + t.shape[0], 0);
  const { bits, block, hasOffsets } = nbitsLayout(tensors[0].ggml!.type)!;
  const name = `nbits.${tensors.map(tensorKey).join('+')}`;
  const repacked = () => repackStacked(tensors, K);
  const packed = g.initializer(name, DataType.UINT8, [N, K / block, (block * bits) / 8], () => repacked().packed);
  const scales = g.floats(name + '.scales', [N * (K / block)], () => repacked().scales);
  const y = g.op('MatMulNBits', [input, packed, scales], { K, N, bits, block_size: block, accuracy_level: accuracyLevel }, 'com.microsoft');
  if (!hasOffsets) return y;
  const sumKey = `${input}/${block}`;
  let sums = blockSums.get(sumKey);
  if (!sums) {
    sums = g.op('ReduceSum', [g.op('Reshape', [input, g.int64s([0, 0, K / block, block])]), g.int64s([-1])], { keepdims: 0 });
    blockSums.set(sumKey, sums);
  }
  const offsetsT = g.floats(name + '.offsets_t', [K / block, N], () => transpose(repacked().offsets!, N, K / block));
  return g.op('Add', [y, g.op('MatMul', [sums, offsetsT])]);
}

/** A stable name for a source tensor within one graph build (object identity → counter). */
const tensorKeys = new WeakMap<SourceTensor, string>();
let tensorKeyCounter = 0;
function tensorKey(t: SourceTensor): string {
  let k = tensorKeys.get(t);
  if (!k) { k = `t${tensorKeyCounter++}`; tensorKeys.set(t, k); }
  return k;
}

/**
 * Token embeddings gathered from the file's own blocks (com.microsoft:GatherBlockQuantized over the bytes
 * the tied LM head's MatMulNBits reads: one copy), offsets added per block. Null: gather float32 instead.
 */
function embedding(g: GraphBuilder, embed: SourceTensor, inputIds: string, opts: GraphOptions): string | null {
  if ((opts.weightType ?? 'stored') !== 'stored') return null;
  if (opts.half && embed.f16) {
    const table = g.halves(`f16.${tensorKey(embed)}`, embed.shape, () => embed.f16!());
    return g.op('Cast', [g.op('Gather', [table, inputIds], { axis: 0 })], { to: DataType.FLOAT });
  }
  if (!embed.ggml) return null;
  const layout = nbitsLayout(embed.ggml.type);
  if (!layout) return null;
  const [V, D] = embed.shape;
  const { bits, block } = layout;
  const tensors = [embed];
  const name = `nbits.${tensorKey(embed)}`;
  const repacked = () => repackStacked(tensors, D);
  // MatMulNBits' [V, D/block, block·bits/8] bytes, read as [V, D·bits/8] rows.
  const packed = g.initializer(name, DataType.UINT8, [V, D / block, (block * bits) / 8], () => repacked().packed);
  const rows = g.alias(name + '.rows', packed, DataType.UINT8, [V, (D * bits) / 8], () => repacked().packed);
  const scales = g.floats(name + '.scales', [V * (D / block)], () => repacked().scales);
  const scaleRows = g.alias(name + '.scale_rows', scales, DataType.FLOAT, [V, D / block], () => { const s = repacked().scales; return new Uint8Array(s.buffer, s.byteOffset, s.byteLength); });
  const x = g.op('GatherBlockQuantized', [rows, inputIds, scaleRows], { gather_axis: 0, quantize_axis: 1, block_size: block, bits }, 'com.microsoft'); // [B, S, D]
  if (!layout.hasOffsets) return x;
  const offsets = g.op('Gather', [g.floats(name + '.offsets', [V, D / block], () => repacked().offsets!), inputIds], { axis: 0 }); // [B, S, D/block]
  const blocks = g.op('Reshape', [x, g.int64s([0, 0, D / block, block])]);
  return g.op('Reshape', [g.op('Add', [blocks, g.op('Unsqueeze', [offsets, g.int64s([-1])])]), g.int64s([0, 0, D])]);
}

/** decodeStepInPlace in graph ops: S == 1 and B · (P + 1) ≥ IN_PLACE_DECODE_MIN, as a bool scalar. */
function decodeFormCondition(g: GraphBuilder, inputIds: string): string {
  const dim = (t: string, axis: number) => g.op('Shape', [t], { start: axis, end: axis + 1 });
  const rowsTimesPositions = g.op('Mul', [dim(inputIds, 0), g.op('Add', [dim('past_key_values.0.key', 2), g.int64s([1])])]);
  const oneToken = g.op('Equal', [dim(inputIds, 1), g.int64s([1])]);
  return g.op('Squeeze', [g.op('And', [oneToken, g.op('GreaterOrEqual', [rowsTimesPositions, g.int64s([IN_PLACE_DECODE_MIN])])]), g.int64s([0])]);
}

/**
 * Packed rows (mixed steps, vLLM's chunked prefill): decoding rows and prompt chunks in one run without
 * padding the projections and MLP. The runner feeds input_ids / position_ids as [1, N] (row after row)
 * with the past as [B, KV, P, hd] and the explicit mask [B, P + S] (row b: its valid past, then its
 * count c_b of new positions right-aligned in S = the longest count). The graph recognises it by
 * input_ids having one row while the past has B ≠ 1. From the mask alone: c = Σ mask[:, P:], and padded
 * slot (b, j) holds packed token j + Σ_{b' ≤ b} c_{b'} − S when j ≥ S − c_b (else padding).
 * Attention comes in two parts, so that decoding rows are not padded to S queries (which made a mixed
 * step with a 64-token chunk cost twice two separate runs on ~20M): every row's last token attends like
 * a decode step (the whole batch, one query per row), and the rows with several new tokens (chunk rows,
 * usually one) attend as right-padded rows over a gathered copy of their own past.
 */
interface PackedRows {
  /** Bool scalar: the run is packed. */
  cond: string;
  /** [B·S] packed token of each padded slot (0 in padding slots, which the mask hides). */
  index: string;
  /** [B] packed token that is each row's last. */
  lastIndex: string;
  /** [B_c] the chunk rows (c_b > 1), their [B_c·S] padded slots' packed tokens and validity. */
  chunkRows: string;
  chunkIndex: string;
  chunkValid: string;
  /** [B_c, 1, G·S, P + S] additive mask of the chunk rows (padding and causality). */
  chunkBias: string;
  /** [P, S], [B, −1] and [B_c, −1]. */
  pastNewSplit: string;
  rowsDims: string;
  chunkDims: string;
  /** [N] where each packed token's attention output lies in [last tokens (B); chunk rows' tokens]. */
  assemble: string;
}

/** The packed-rows values, computed only in packed runs (an If; other runs get placeholders). */
function packedRows(g: GraphBuilder, config: ModelConfig, mask: string, padBias: string): PackedRows {
  const dim = (t: string, axis: number) => g.op('Shape', [t], { start: axis, end: axis + 1 });
  const past = 'past_key_values.0.key';
  const cond = g.op('Squeeze', [g.op('Not', [g.op('Equal', [dim('input_ids', 0), dim(past, 0)])]), g.int64s([0])]);
  const keys = ['index', 'lastIndex', 'chunkRows', 'chunkIndex', 'chunkValid', 'chunkBias', 'pastNewSplit', 'rowsDims', 'chunkDims', 'assemble'] as const;
  const types = [DataType.INT64, DataType.INT64, DataType.INT64, DataType.INT64, DataType.BOOL, DataType.FLOAT, DataType.INT64, DataType.INT64, DataType.INT64, DataType.INT64];
  const ranks: Dim[][] = [['n'], ['b'], ['bc'], ['n'], ['n'], ['bc', 1, 'gs', 't'], [2], [2], [2], ['n']];
  const outs = keys.map((k) => g.fresh(`packed_${k}`));
  const t = g.subgraph(), e = g.subgraph();
  const value: Record<(typeof keys)[number], string> = {} as never;
  const zero = t.int64s([0], []), one = t.int64s([1], []);
  const scalar = (x: string) => t.op('Squeeze', [x, t.int64s([0])]);
  const flat = (x: string) => t.op('Reshape', [x, t.int64s([-1])]);
  const B = dim(past, 0), P = t.op('Shape', [past], { start: 2, end: 3 }), T = t.op('Shape', [mask], { start: 1, end: 2 });
  const S = t.op('Sub', [T, P]);
  const counts = t.op('ReduceSum', [t.op('Slice', [mask, P, T, t.int64s([1])]), t.int64s([1])], { keepdims: 1 }); // [B, 1]
  const incl = t.op('CumSum', [counts, zero]);
  const slot = t.op('Range', [zero, scalar(S), one]); // [S]
  const index2d = t.op('Max', [t.op('Add', [slot, t.op('Sub', [incl, S])]), zero]); // [B, S]
  const valid2d = t.op('GreaterOrEqual', [slot, t.op('Sub', [S, counts])]); // [B, S]
  value.index = flat(index2d);
  value.lastIndex = flat(t.op('Sub', [incl, one]));
  const isChunk = t.op('Greater', [counts, one]); // [B, 1]
  value.chunkRows = flat(t.op('NonZero', [flat(isChunk)]));
  value.chunkIndex = flat(t.op('Gather', [index2d, value.chunkRows], { axis: 0 }));
  value.chunkValid = flat(t.op('Gather', [valid2d, value.chunkRows], { axis: 0 }));
  const keyIdx = t.op('Range', [zero, scalar(T), one]);
  const queryIdx = t.op('Unsqueeze', [t.op('Range', [scalar(P), scalar(T), one]), t.int64s([1])]); // [S, 1]
  const causal = t.op('Where', [t.op('LessOrEqual', [keyIdx, queryIdx]), t.scalarFloat(0), t.scalarFloat(-1e9, 'mask_big')]); // [S, T]
  const chunkPad = t.op('Gather', [padBias, value.chunkRows], { axis: 0 }); // [B_c, 1, 1, T]
  value.chunkBias = t.op('Tile', [t.op('Add', [chunkPad, causal]), t.int64s([1, 1, config.numHeads / config.numKvHeads, 1])]);
  value.pastNewSplit = t.op('Concat', [P, S], { axis: 0 });
  value.rowsDims = t.op('Concat', [B, t.int64s([-1])], { axis: 0 });
  value.chunkDims = t.op('Concat', [t.op('Shape', [value.chunkRows]), t.int64s([-1])], { axis: 0 });
  // Token (b, j) of a chunk row comes after the B last-token outputs, at its place among the chunk rows' tokens.
  const chunkOffset = t.op('CumSum', [t.op('Where', [isChunk, counts, zero]), zero], { exclusive: 1 }); // [B, 1]
  const inChunks = t.op('Add', [t.op('Add', [B, chunkOffset]), t.op('Sub', [slot, t.op('Sub', [S, counts])])]); // [B, S]
  const rowIdx = t.op('Unsqueeze', [t.op('Range', [zero, scalar(B), one]), t.int64s([1])]); // [B, 1]
  value.assemble = t.op('Compress', [flat(t.op('Where', [isChunk, inChunks, rowIdx])), flat(valid2d)], { axis: 0 });
  keys.forEach((k, i) => {
    t.node('Identity', [value[k]], { outputs: [`${outs[i]}.then`] });
    t.output(`${outs[i]}.then`, types[i], ranks[i]);
    // Placeholders of the same types for every other run.
    const none = types[i] === DataType.FLOAT ? e.floats(g.fresh('packed_none'), [1, 1, 1, 1], new Float32Array(1)) : e.int64s(ranks[i].length === 1 ? [0] : [0, 0]);
    e.node(types[i] === DataType.BOOL ? 'Cast' : 'Identity', [none], { outputs: [`${outs[i]}.else`], attrs: types[i] === DataType.BOOL ? { to: DataType.BOOL } : undefined });
    e.output(`${outs[i]}.else`, types[i], ranks[i]);
  });
  g.node('If', [cond], { outputs: outs, attrs: { then_branch: { graph: t, name: g.fresh('packed_rows') }, else_branch: { graph: e, name: g.fresh('not_packed_rows') } } });
  const result = { cond } as PackedRows;
  keys.forEach((k, i) => (result[k] = outs[i]));
  return result;
}

/** Before the LM head: packed hidden states [1, N, D] back to right-padded rows [B, S, D], whose last position is each row's last token. */
function unpackRows(g: GraphBuilder, pk: PackedRows, hidden: string, D: number): string {
  const t = g.subgraph(), e = g.subgraph();
  const out = g.fresh('rows'), tOut = `${out}.then`, eOut = `${out}.else`;
  const padded = t.op('Gather', [t.op('Reshape', [hidden, t.int64s([-1, D])]), pk.index], { axis: 0 });
  t.node('Reshape', [padded, t.op('Concat', [pk.rowsDims, t.int64s([D])], { axis: 0 })], { outputs: [tOut] });
  e.node('Identity', [hidden], { outputs: [eOut] });
  t.output(tOut, DataType.FLOAT, ['rows', 'row_length', D]);
  e.output(eOut, DataType.FLOAT, ['rows', 'row_length', D]);
  g.node('If', [pk.cond], { outputs: [out], attrs: { then_branch: { graph: t, name: g.fresh('unpack_rows') }, else_branch: { graph: e, name: g.fresh('rows_as_fed') } } });
  return out;
}

/** The per-forward values of the forms a body uses (its kind, plus 'decode' when it decodes in place). */
function attentionShared(
  g: GraphBuilder, config: ModelConfig, opts: GraphOptions,
  inputs: { inputIds: string; mask: string; positionIds: string; cosTable: string; sinTable: string }, inPlace: boolean,
): AttentionShared {
  const { numHeads: H, numKvHeads: KV } = config;
  const hp = cacheHeadDim(config, opts.attention);
  const { inputIds, mask, positionIds } = inputs;
  const shared: AttentionShared = { positionIds, cosTable: inputs.cosTable, sinTable: inputs.sinTable };
  const big = g.scalarFloat(-1e9, 'mask_big');
  const axis0 = g.int64s([0]);
  // [B,1,1,T]: 0 where attention_mask is 1, −1e9 where it is 0 (padding).
  const padBias = () => g.op('Unsqueeze', [g.op('Mul', [g.op('Sub', [g.scalarFloat(1), g.op('Cast', [mask], { to: DataType.FLOAT })]), big]), g.int64s([1, 2])]);
  const width = (t: string) => g.op('Shape', [t], { start: 1, end: 2 }); // [1]: dim 1 as a 1-D tensor
  if (inPlace) {
    // The decode form's mask is [B, P + 1]: each row's valid past positions, then its new token.
    shared.decode = { bias: padBias(), pastNewSplit: g.op('Concat', [g.op('Sub', [width(mask), g.int64s([1])]), g.int64s([1])], { axis: 0 }) };
  }
  if (opts.attention === 'gqa') {
    const sum = g.op('ReduceSum', [mask, g.int64s([1])], { keepdims: 0 });
    const seqlensK = g.op('Cast', [g.op('Sub', [sum, g.int64s([1], [])])], { to: DataType.INT32 });
    const totalLen = g.op('Cast', [g.op('Squeeze', [width(mask), axis0])], { to: DataType.INT32 });
    // The runner graph returns only the new positions of each row's present keys/values: row b's
    // new tokens sit at present positions position_ids[b, :], so gather along that axis.
    const newIndex = opts.forExport || opts.residentKv ? null : g.op('Expand', [g.op('Unsqueeze', [positionIds, g.int64s([1, 3])]), g.int64s([1, KV, 1, hp])]);
    shared.gqa = { seqlensK, totalLen, newIndex };
    return shared;
  }
  // Exported standard graphs apply RoPE as x·cosF + concat(x2, x1)·sinS, with cosF = [cos, cos] and
  // sinS = [-sin, sin] (the other forms use a RotaryEmbedding op on the tables instead).
  let cosF = '', sinS = '';
  if (opts.attention === 'standard' && opts.forExport) {
    const cos = g.op('Gather', [inputs.cosTable, positionIds], { axis: 0 }); // [B,S,hd/2]
    const sin = g.op('Gather', [inputs.sinTable, positionIds], { axis: 0 });
    const axis1 = g.int64s([1]);
    cosF = g.op('Unsqueeze', [g.op('Concat', [cos, cos], { axis: -1 }), axis1]); // [B,1,S,hd]
    sinS = g.op('Unsqueeze', [g.op('Concat', [g.op('Neg', [sin]), sin], { axis: -1 }), axis1]);
  }
  // Additive mask [B,1,G·S,T]: padding (attention_mask = 0) and causality (key j ≤ P + i).
  const T = g.op('Squeeze', [width(mask), axis0]);
  const S = g.op('Squeeze', [width(inputIds), axis0]);
  const zero = g.int64s([0], []), oneI = g.int64s([1], []);
  const keyIdx = g.op('Range', [zero, T, oneI]); // [T]
  const queryIdx = g.op('Unsqueeze', [g.op('Range', [g.op('Sub', [T, S]), T, oneI]), g.int64s([1])]); // [S,1]
  const causal = g.op('Where', [g.op('LessOrEqual', [keyIdx, queryIdx]), g.scalarFloat(0), big]); // [S,T]
  const bias4 = g.op('Add', [padBias(), causal]); // [B,1,S,T]
  // The standard graph folds the query group into rows ([B,KV,G·S,T]); Attention broadcasts over heads.
  const bias = opts.attention === 'onnx23' ? bias4 : g.op('Tile', [bias4, g.int64s([1, 1, H / KV, 1])]);
  // [P, S]: where a row of scores splits into past and new positions (the standard runner graph).
  const pastNewSplit = g.op('Concat', [g.op('Unsqueeze', [g.op('Sub', [T, S]), axis0]), g.op('Unsqueeze', [S, axis0])], { axis: 0 });
  shared.masked = { bias, cosF, sinS, pastNewSplit };
  return shared;
}

/**
 * One layer's attention in graph `g` (a body, or a branch of the layer's decode/chunk If) from the fused
 * qkv projection [B, S, (H + 2·KV)·hp]; writes `out.attn` [B, S, H·hp] and the new keys/values
 * [B, KV, S, hp] (the present, in exports) under the given names.
 */
function attention(
  g: GraphBuilder, form: BodyForm, config: ModelConfig, opts: GraphOptions, shared: AttentionShared, i: number, qkv: string,
  normWeight: (name: string) => string, out: AttentionOutputs,
): void {
  const { numHeads: H, numKvHeads: KV, headDim: hd } = config;
  const { positionIds, cosTable, sinTable } = shared;
  const pastK = `past_key_values.${i}.key`, pastV = `past_key_values.${i}.value`;
  const rmsNorm = (x: string, weightName: string) => g.op('SimplifiedLayerNormalization', [x, normWeight(weightName)], { axis: -1, epsilon: float(config.rmsNormEps), stash_type: 1 });
  // q, k (each head normalized first in Qwen3) and v as [B, S, heads·hd].
  const qkvParts = () => {
    const [q, k, v] = g.node('Split', [qkv, g.int64s([H * hd, KV * hd, KV * hd])], { outputs: 3, attrs: { axis: -1 } });
    const headNorm = (t: string, heads: number, name: string) =>
      config.qkNorm ? g.op('Reshape', [rmsNorm(g.op('Reshape', [t, g.int64s([0, 0, heads, hd])]), `model.layers.${i}.self_attn.${name}.weight`), g.int64s([0, 0, heads * hd])]) : t;
    return { q: headNorm(q, H, 'q_norm'), k: headNorm(k, KV, 'k_norm'), v };
  };
  const scale = () => g.scalarFloat(1 / Math.sqrt(hd), 'attn_scale');
  const keysT = (t: string) => g.op('Transpose', [t], { perm: { ints: [0, 1, 3, 2] } }); // fused into the MatMul by ORT
  // Attention over the past where it lies plus the new positions: scores against the past (never
  // concatenated) and against the new keys are joined for one softmax; the context sums both halves'
  // products. qg [B,KV,G·S,hd] scaled; new keys/values [B,KV,S,hd]; split = [P, S]. Returns [B,KV,G·S,hd].
  const attendInPlace = (qg: string, newK: string, newV: string, bias: string, split: string, past = { k: pastK, v: pastV }) => {
    const scores = g.op('Add', [g.op('Concat', [g.op('MatMul', [qg, keysT(past.k)]), g.op('MatMul', [qg, keysT(newK)])], { axis: -1 }), bias]);
    const [probsPast, probsNew] = g.node('Split', [g.op('Softmax', [scores], { axis: -1 }), split], { outputs: 2, attrs: { axis: -1 } });
    return g.op('Add', [g.op('MatMul', [probsPast, past.v]), g.op('MatMul', [probsNew, newV])]);
  };

  if (form === 'gqa') {
    const fullPresent = opts.forExport || opts.residentKv;
    // Rotary inside GQA (do_rotary). onnxruntime-node cannot bind a JS buffer as an output (it
    // copies outputs back), so the runner graph keeps the present to itself and returns the new
    // positions, gathered out of it (2 nodes instead of rotary/split/reshape/transpose: 7).
    const parts = config.qkNorm ? qkvParts() : null;
    const [, presK, presV] = g.node('GroupQueryAttention',
      [parts?.q ?? qkv, parts?.k ?? '', parts?.v ?? '', pastK, pastV, shared.gqa!.seqlensK, shared.gqa!.totalLen, cosTable, sinTable, positionIds],
      { outputs: [out.attn, fullPresent ? out.key : g.fresh('present_k'), fullPresent ? out.value : g.fresh('present_v')], domain: 'com.microsoft',
        attrs: { num_heads: H, kv_num_heads: KV, do_rotary: 1, rotary_interleaved: 0, scale: float(1 / Math.sqrt(hd)) } });
    if (!fullPresent) {
      g.node('GatherElements', [presK, shared.gqa!.newIndex!], { outputs: [out.key], attrs: { axis: 2 } });
      g.node('GatherElements', [presV, shared.gqa!.newIndex!], { outputs: [out.value], attrs: { axis: 2 } });
    }
  } else if (form === 'onnx23') {
    const { q, k, v } = qkvParts();
    const qr = g.op('RotaryEmbedding', [q, cosTable, sinTable, positionIds], { num_heads: H, interleaved: 0 });
    const kr = g.op('RotaryEmbedding', [k, cosTable, sinTable, positionIds], { num_heads: KV, interleaved: 0 });
    // (ORT requires the present outputs whenever a past is given, even if nothing reads them.)
    g.node('Attention', [qr, kr, v, shared.masked!.bias, pastK, pastV], {
      outputs: opts.forExport ? [out.attn, out.key, out.value] : [out.attn, g.fresh('present_k'), g.fresh('present_v')],
      attrs: { q_num_heads: H, kv_num_heads: KV },
    });
    if (!opts.forExport) {
      const heads = (t: string, name: string) => g.node('Transpose', [g.op('Reshape', [t, g.int64s([0, 0, KV, hd])])], { outputs: [name], attrs: { perm: { ints: [0, 2, 1, 3] } } });
      heads(kr, out.key);
      heads(v, out.value);
    }
  } else if (form === 'packed') {
    // Projections ran on the packed tokens [1, N, ·]; rotary too (positions are per token). New keys and
    // values go to right-padded rows [B, KV, S, hd] (the runner's layout); attention in two parts (see PackedRows).
    const pk = shared.packed!;
    const { q, k, v } = qkvParts();
    const qr = g.op('RotaryEmbedding', [q, positionIds, cosTable, sinTable], { num_heads: H, interleaved: 0 }, 'com.microsoft');
    const kr = g.op('RotaryEmbedding', [k, positionIds, cosTable, sinTable], { num_heads: KV, interleaved: 0 }, 'com.microsoft');
    const tokens = (t: string, heads: number) => g.op('Reshape', [t, g.int64s([-1, heads * hd])]); // [N, heads·hd]
    const rows = (t: string, heads: number, index: string, dims: string, name?: string) => {
      const shaped = g.op('Reshape', [g.op('Gather', [tokens(t, heads), index], { axis: 0 }), g.op('Concat', [dims, g.int64s([heads, hd])], { axis: 0 })]); // [rows, S, heads, hd]
      return g.node('Transpose', [shaped], { outputs: name ? [name] : 1, attrs: { perm: { ints: [0, 2, 1, 3] } } })[0]; // [rows, heads, S, hd]
    };
    const newK = rows(kr, KV, pk.index, pk.rowsDims, out.key), newV = rows(v, KV, pk.index, pk.rowsDims, out.value);
    // Every row's last token, as a decode step (its row's new keys are all before it).
    const qLast = g.op('Mul', [g.op('Reshape', [g.op('Gather', [tokens(qr, H), pk.lastIndex], { axis: 0 }), g.int64s([-1, KV, H / KV, hd])]), scale()]); // [B,KV,G,hd]
    const lastCtx = g.op('Reshape', [attendInPlace(qLast, newK, newV, shared.decode!.bias, pk.pastNewSplit), g.int64s([-1, H * hd])]); // [B, H·hd]
    // Chunk rows, right-padded, over a copy of their own past.
    const pick = (t: string) => g.op('Gather', [t, pk.chunkRows], { axis: 0 });
    const qChunk = g.op('Mul', [g.op('Reshape', [rows(qr, H, pk.chunkIndex, pk.chunkDims), g.int64s([0, KV, -1, hd])]), scale()]); // [B_c,KV,G·S,hd]
    const chunkCtx = attendInPlace(qChunk, pick(newK), pick(newV), pk.chunkBias, pk.pastNewSplit, { k: pick(pastK), v: pick(pastV) });
    const chunkTokens = g.op('Reshape', [g.op('Transpose', [g.op('Reshape', [chunkCtx, g.int64s([0, H, -1, hd])])], { perm: { ints: [0, 2, 1, 3] } }), g.int64s([-1, H * hd])]);
    const joined = g.op('Concat', [lastCtx, g.op('Compress', [chunkTokens, pk.chunkValid], { axis: 0 })], { axis: 0 });
    g.node('Unsqueeze', [g.op('Gather', [joined, pk.assemble], { axis: 0 }), g.int64s([0])], { outputs: [out.attn] }); // [1, N, H·hd]
  } else if (form === 'decode') {
    // One new token per row: [B, 1, heads·hd] is [B, heads, 1, hd] in memory already, so heads need
    // reshapes, not transposes.
    const { q, k, v } = qkvParts();
    const qr = g.op('RotaryEmbedding', [q, positionIds, cosTable, sinTable], { num_heads: H, interleaved: 0 }, 'com.microsoft');
    const kr = g.op('RotaryEmbedding', [k, positionIds, cosTable, sinTable], { num_heads: KV, interleaved: 0 }, 'com.microsoft');
    const qg = g.op('Mul', [g.op('Reshape', [qr, g.int64s([0, KV, H / KV, hd])]), scale()]); // [B,KV,G,hd]
    const newK = g.node('Reshape', [kr, g.int64s([0, KV, 1, hd])], { outputs: [out.key] })[0];
    const newV = g.node('Reshape', [v, g.int64s([0, KV, 1, hd])], { outputs: [out.value] })[0];
    const ctx = attendInPlace(qg, newK, newV, shared.decode!.bias, shared.decode!.pastNewSplit); // [B,KV,G,hd]
    g.node('Reshape', [ctx, g.int64s([0, 1, H * hd])], { outputs: [out.attn] });
  } else {
    const { q, k, v } = qkvParts();
    const heads = (t: string, n: number, name?: string) => g.node('Transpose', [g.op('Reshape', [t, g.int64s([0, 0, n, hd])])], { outputs: name ? [name] : 1, attrs: { perm: { ints: [0, 2, 1, 3] } } })[0];
    const m = shared.masked!;
    let qr: string, kr: string;
    if (opts.forExport) {
      // Exports stay within opset 17: RoPE as x·cosF + concat(x2, x1)·sinS.
      const rotate = (t: string) => {
        const [a, b] = g.node('Split', [t, g.int64s([hd / 2, hd / 2])], { outputs: 2, attrs: { axis: -1 } });
        return g.op('Add', [g.op('Mul', [t, m.cosF]), g.op('Mul', [g.op('Concat', [b, a], { axis: -1 }), m.sinS])]);
      };
      qr = rotate(heads(q, H));
      kr = rotate(heads(k, KV));
    } else {
      qr = g.op('RotaryEmbedding', [heads(q, H), positionIds, cosTable, sinTable], { interleaved: 0 }, 'com.microsoft');
      kr = g.node('RotaryEmbedding', [heads(k, KV), positionIds, cosTable, sinTable], { outputs: [out.key], domain: 'com.microsoft', attrs: { interleaved: 0 } })[0];
    }
    const vh = heads(v, KV, opts.forExport ? undefined : out.value);
    // Grouped query attention without repeating K/V: fold the group into the query rows (scaled by
    // 1/√hd here, not in Wq, so every form shares the projection weights and LoRA factors).
    const qg = g.op('Mul', [g.op('Reshape', [qr, g.int64s([0, KV, -1, hd])]), scale()]); // [B,KV,G·S,hd]
    let ctx: string;
    if (opts.forExport) {
      // The Optimum interface returns the whole cache, so it is concatenated anyway: attend over it.
      const allK = g.node('Concat', [pastK, kr], { outputs: [out.key], attrs: { axis: 2 } })[0];
      const allV = g.node('Concat', [pastV, vh], { outputs: [out.value], attrs: { axis: 2 } })[0];
      ctx = g.op('MatMul', [g.op('Softmax', [g.op('Add', [g.op('MatMul', [qg, keysT(allK)]), m.bias])], { axis: -1 }), allV]); // [B,KV,G·S,hd]
    } else {
      ctx = attendInPlace(qg, kr, vh, m.bias, m.pastNewSplit); // the runner's graph reads the past where it lies
    }
    const ctxHeads = g.op('Reshape', [ctx, g.int64s([0, H, -1, hd])]);
    g.node('Reshape', [g.op('Transpose', [ctxHeads], { perm: { ints: [0, 2, 1, 3] } }), g.int64s([0, 0, H * hd])], { outputs: [out.attn] });
  }
}
