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
// in one run, see decoder-packed-rows.ts): input_ids [1, N] holds every row's new tokens one after another.
//
// This file holds the graph's interface and assembly; the layers live beside it, one job a file:
//   decoder-options.ts           GraphOptions, attention kind per device, cache head size
//   decoder-weights.ts           which tensors a config implies; head padding, transposes, stacking
//   decoder-body.ts              one body: inputs, embedding, layers (norms, projections, attention, MLP), LM head
//   decoder-attention.ts         one layer's attention in each form, and the per-run form choice
//   decoder-attention-shared.ts  per-forward attention inputs (rotary tables, masks); which steps decode in place
//   decoder-packed-rows.ts       packed rows: where each row's new tokens lie in a mixed step
//   decoder-linear.ts            projections per weight type (q4, stored blocks, float16, float32)
//   decoder-quantized.ts         the file's own ggml blocks as MatMulNBits
//   decoder-embedding.ts         token embeddings (stored blocks, float16, float32)
//   decoder-lora.ts              per-row LoRA terms
//   decoder-mlp.ts               the SwiGLU MLP
// Every file here that decides the graph's bytes is listed in graph-cache.ts's BUILDER_MODULES.
import type { ModelConfig, Weights } from './model-config.js';
import { DataType, GraphBuilder, type Dim } from './onnx-proto.js';
import { weightsSource, type SourceTensor, type WeightSource } from './weight-source.js';
import { cacheHeadDim, cacheRowsDim, type GraphOptions } from './decoder-options.js';
import { verifyWeights } from './decoder-weights.js';
import { decoderBody } from './decoder-body.js';

export { cacheHeadDim, defaultAttention, type AttentionKind, type GraphOptions, type WeightType } from './decoder-options.js';
export { expectWeight, padHeads, transpose, verifyWeights } from './decoder-weights.js';
export { decodesInPlace, decodeStepInPlace, IN_PLACE_DECODE_MIN } from './decoder-attention-shared.js';

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
    // MatMuls took twice as long. So the per-layer attention Ifs of decoder-attention.ts hold no weights.)
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
