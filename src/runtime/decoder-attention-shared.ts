// What every layer's attention shares within one forward (made once per body, before the layers): the rotary
// tables, the masks and sequence lengths of each attention form, and which runs take the in-place 'decode'
// form (decided by the runner and, in graph ops, by the graph itself).
import type { ModelConfig } from './model-config.js';
import { DataType, type GraphBuilder } from './onnx-proto.js';
import { ropeTables } from './rope.js';
import { cacheHeadDim, type AttentionKind, type GraphOptions } from './decoder-options.js';
import type { PackedRows } from './decoder-packed-rows.js';

/** Per-forward values the attention forms share across layers (made once per body, before the layers). */
export interface AttentionShared {
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

/** The rotary tables [maxPositions, hp/2] as initializers (computed only when the graph's bytes are written). */
export function rotaryTables(g: GraphBuilder, config: ModelConfig, opts: GraphOptions): { cosTable: string; sinTable: string } {
  const hd = config.headDim;
  const hp = cacheHeadDim(config, opts.attention);
  let rope: { cos: Float32Array; sin: Float32Array } | undefined;
  const ropeTablesOnce = () => (rope ??= padRopeTables(ropeTables(config, opts.maxPositions), opts.maxPositions, hd / 2, hp / 2));
  const cosTable = g.floats('rope_cos', [opts.maxPositions, hp / 2], () => ropeTablesOnce().cos);
  const sinTable = g.floats('rope_sin', [opts.maxPositions, hp / 2], () => ropeTablesOnce().sin);
  return { cosTable, sinTable };
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

/** decodeStepInPlace in graph ops: S == 1 and B · (P + 1) ≥ IN_PLACE_DECODE_MIN, as a bool scalar. */
export function decodeFormCondition(g: GraphBuilder, inputIds: string): string {
  const dim = (t: string, axis: number) => g.op('Shape', [t], { start: axis, end: axis + 1 });
  const rowsTimesPositions = g.op('Mul', [dim(inputIds, 0), g.op('Add', [dim('past_key_values.0.key', 2), g.int64s([1])])]);
  const oneToken = g.op('Equal', [dim(inputIds, 1), g.int64s([1])]);
  return g.op('Squeeze', [g.op('And', [oneToken, g.op('GreaterOrEqual', [rowsTimesPositions, g.int64s([IN_PLACE_DECODE_MIN])])]), g.int64s([0])]);
}

/** The per-forward values of the forms a body uses (its kind, plus 'decode' when it decodes in place). */
export function attentionShared(
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
