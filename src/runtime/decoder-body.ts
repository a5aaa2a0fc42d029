// One decoder body: the graph inputs, the embedding, each layer (norm, fused qkv projection, attention, o_proj,
// norm, MLP, with the residual adds folded into the next norm), the final norm and the LM head. llama-graph.ts
// builds one body, or two under an If when the graph takes LoRA inputs.
import type { ModelConfig } from './model-config.js';
import { DataType, float, type GraphBuilder } from './onnx-proto.js';
import type { WeightSource } from './weight-source.js';
import { cacheHeadDim, cacheRowsDim, type GraphOptions } from './decoder-options.js';
import { attentionShared, decodeFormCondition, decodesInPlace, rotaryTables } from './decoder-attention-shared.js';
import { layerAttention, type AttentionOutputs } from './decoder-attention.js';
import { packedRows, unpackRows } from './decoder-packed-rows.js';
import { tokenEmbedding } from './decoder-embedding.js';
import { linearLayer } from './decoder-linear.js';
import { loraAdder } from './decoder-lora.js';
import { swigluMlp } from './decoder-mlp.js';
import { concat, padHeads, transpose } from './decoder-weights.js';

/**
 * The decoder's nodes in graph `g` (the root, or an If branch whose outputs carry `suffix`). Weights
 * are read lazily (GraphBuilder makes each named initializer once): a second body reuses what the
 * first made, whose source weights may be consumed by then.
 */
export function decoderBody(g: GraphBuilder, config: ModelConfig, weights: WeightSource, opts: GraphOptions, lora: boolean, suffix: string): void {
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, headDim: hd, vocabSize: V } = config;
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

  const { cosTable, sinTable } = rotaryTables(g, config, opts);
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

  const withLora = loraAdder(g, config, hp, lora);
  const linear = linearLayer(g, weights, opts, hp !== hd);

  // Residual stream x; a branch output waits in `pending` until the next norm, which adds it with
  // SkipSimplifiedLayerNormalization (output 3 = x + branch) in one node instead of Add + norm.
  let x = tokenEmbedding(g, config, weights, inputIds, opts);
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
    layerAttention(g, config, opts, shared, decodeForm, i, qkv, normWeight, out);
    // o_proj^T is [H·hd, D]: its rows follow the (padded) value layout of the attention output.
    const wo = () => (hp === hd ? w(p + 'self_attn.o_proj.weight') : transpose(pad(transpose(w(p + 'self_attn.o_proj.weight'), D, H * hd), H, D, false), H * hp, D));
    pending = withLora(i, 'o', out.attn, linear(p + 'self_attn.o_proj.weight', out.attn, wo, D, H * hp, [p + 'self_attn.o_proj.weight']));

    const h2 = addAndNorm(p + 'post_attention_layernorm.weight');
    pending = swigluMlp(g, config, weights, i, h2, linear, withLora);
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
