// One layer's attention, in each form a body computes it with (GroupQueryAttention, opset-23 Attention, the
// standard graph, the in-place 'decode' form, packed rows), and the If that picks a form per run in runner
// graphs that decode in place. Input: the fused qkv projection; output: the attention before o_proj and the
// new keys/values (see llama-graph.ts for the forms and the interface).
import type { ModelConfig } from './model-config.js';
import { DataType, float, type GraphBuilder } from './onnx-proto.js';
import { cacheHeadDim, type BodyForm, type GraphOptions } from './decoder-options.js';
import type { AttentionShared } from './decoder-attention-shared.js';

/** Names a layer's attention writes: its output, and the new keys/values (or the present, in exports). */
export interface AttentionOutputs { attn: string; key: string; value: string }

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

/**
 * Layer `i`'s attention in body `g` from its fused qkv projection. Without `decodeForm`, the graph's own form;
 * with it (runner graphs that decode in place), the form is picked per run by shape.
 */
export function layerAttention(
  g: GraphBuilder, config: ModelConfig, opts: GraphOptions, shared: AttentionShared, decodeForm: string | null, i: number, qkv: string,
  normWeight: (name: string) => string, out: AttentionOutputs,
): void {
  const { numHeads: H, numKvHeads: KV } = config;
  const hp = cacheHeadDim(config, opts.attention);
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
}
