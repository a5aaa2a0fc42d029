// Packed rows: how a runner graph finds, from its inputs' shapes and the mask, where each row's new tokens lie
// when rows with different numbers of new tokens share one run (the attention's 'packed' form reads this).
import type { ModelConfig } from './model-config.js';
import { DataType, type Dim, type GraphBuilder } from './onnx-proto.js';

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
export interface PackedRows {
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
export function packedRows(g: GraphBuilder, config: ModelConfig, mask: string, padBias: string): PackedRows {
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
export function unpackRows(g: GraphBuilder, pk: PackedRows, hidden: string, D: number): string {
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
