// N3's SFT batches arrive tokenized, as ART's TokenMatrixBatch (art/training/token_matrix.py @ 44cf4bbe): per
// sequence a `token_ids` row [T], a `target_token_ids` row [T,1] (the next token) and a `loss_weights` row [T,1]
// (≠ 0 where that target is trained on, and how much: any finite value), dense or as spans. Hearth's trainer takes a
// sequence as token ids, a loss mask over them (mask[t] = 1: ids[t] is a target) and a weight per target, so a
// matrix is exactly one such sequence when every weighted target is the next input token; anything else is refused
// with the reason. The step's loss is Σ w_t · (−log p_t) / N over its N weighted targets (ART's
// `mean_active_token`; 1 everywhere: the mean NLL).
import type { TokenMatrixBatchT } from '../../schemas/native-framings.js';
import type { TokenizedSftRow } from '../../protocol/token-sequences.js';

type Row = TokenMatrixBatchT['matrices'][number]['rows'][number];


export type TokenMatrixDecoding = { ok: true; sequences: TokenizedSftRow[] } | { ok: false; status: 400 | 501; reason: string };

const SFT_ROWS = new Set(['token_ids', 'target_token_ids', 'loss_weights']);

/** A row's values in row-major order (spans expanded over their default). */
export function denseValues(row: Row): number[] {
  const width = row.shape.slice(1).reduce((a, b) => a * b, 1);
  const tokens = row.shape[0];
  const flat = (v: number | boolean | (number | boolean)[]): number[] => (Array.isArray(v) ? v : [v]).map(Number);
  if (row.values.encoding === 'dense') {
    if (row.values.data.length !== tokens * width) throw new Error(`row ${row.name}: ${row.values.data.length} values for shape [${row.shape.join(', ')}]`);
    return row.values.data.map(Number);
  }
  const fill = flat(row.values.default);
  if (fill.length !== width) throw new Error(`row ${row.name}: default has ${fill.length} values, the row is ${width} wide`);
  const out: number[] = [];
  for (let t = 0; t < tokens; t++) out.push(...fill);
  let previousEnd = 0;
  for (const span of row.values.spans) {
    const value = flat(span.value);
    if (span.end <= span.start || span.start < previousEnd || span.end > tokens) throw new Error(`row ${row.name}: spans must be sorted, non-overlapping and inside [0, ${tokens})`);
    if (value.length !== width) throw new Error(`row ${row.name}: a span value has ${value.length} values, the row is ${width} wide`);
    for (let t = span.start; t < span.end; t++) out.splice(t * width, width, ...value);
    previousEnd = span.end;
  }
  return out;
}

/** The SFT (cross_entropy) sequences of a token matrix batch, or why Hearth cannot train on it. */
export function sftSequencesFromTokenMatrices(batch: TokenMatrixBatchT): TokenMatrixDecoding {
  if (batch.routes.length > 0) return { ok: false, status: 501, reason: 'token matrix routes (MoE routing replay) are not implemented by this server' };
  const sequences: TokenizedSftRow[] = [];
  for (const matrix of batch.matrices) {
    const rows = new Map(matrix.rows.map((r) => [r.name, r]));
    const extra = [...rows.keys()].filter((n) => !SFT_ROWS.has(n));
    if (extra.length) {
      return { ok: false, status: 501, reason: `matrix ${matrix.matrix_id}: rows ${extra.join(', ')} are not implemented by this server for cross_entropy (supported: ${[...SFT_ROWS].join(', ')})` };
    }
    const ids = rows.get('token_ids');
    const targets = rows.get('target_token_ids');
    const weights = rows.get('loss_weights');
    if (!ids || !targets || !weights) return { ok: false, status: 400, reason: `matrix ${matrix.matrix_id} needs token_ids, target_token_ids and loss_weights rows` };
    const t = ids.shape[0];
    if (ids.shape.length !== 1 || targets.shape.length !== 2 || targets.shape[0] !== t || weights.shape.length !== 2 || weights.shape[0] !== t) {
      return { ok: false, status: 400, reason: `matrix ${matrix.matrix_id}: token_ids must be [T], target_token_ids and loss_weights [T,K] over the same T` };
    }
    if (targets.shape[1] !== 1 || weights.shape[1] !== 1) {
      return { ok: false, status: 501, reason: `matrix ${matrix.matrix_id}: more than one target candidate per token is not implemented by this server` };
    }
    let tokenIds: number[], targetIds: number[], lossWeights: number[];
    try {
      tokenIds = denseValues(ids);
      targetIds = denseValues(targets);
      lossWeights = denseValues(weights);
    } catch (err) {
      return { ok: false, status: 400, reason: `matrix ${matrix.matrix_id}: ${(err as Error).message}` };
    }
    if (tokenIds.some((v) => !Number.isInteger(v) || v < 0)) return { ok: false, status: 400, reason: `matrix ${matrix.matrix_id}: token_ids must be nonnegative integers` };
    const mask = new Array<number>(t).fill(0);
    const targetWeights = new Array<number>(t).fill(0);
    for (let i = 0; i < t; i++) {
      const w = lossWeights[i];
      if (w === 0) continue;
      if (i + 1 >= t || targetIds[i] !== tokenIds[i + 1]) {
        return { ok: false, status: 501, reason: `matrix ${matrix.matrix_id}: the target at token ${i} is not the next input token; this server trains next-token targets only` };
      }
      mask[i + 1] = 1;
      targetWeights[i + 1] = w;
    }
    // Weights only when one differs from 1, so plain 0/1 matrices keep their lines as before.
    const weighted = targetWeights.some((w, i) => mask[i] === 1 && w !== 1);
    sequences.push({ token_ids: tokenIds, loss_mask: mask, ...(weighted ? { weights: targetWeights } : {}) });
  }
  return { ok: true, sequences };
}
