// N3's RL batches arrive tokenized, as ART's TokenMatrixBatch with the `cispo` (or `importance_sampling`) loss
// (art/preprocessing/token_matrix.py token_matrix_batch_from_art_rollouts, art/training/token_matrix.py and
// token_matrix_loss.py @ 44cf4bbe; docs/art.md "N3: RL over token matrices"). Per matrix, rows over its T
// positions, position t standing for the target token_ids[t + 1]:
//   token_ids int64 [T]; target_token_ids int64 [T,1]; advantages float32 [T,1] (≠ 0: the position is trained);
//   behavior_logprobs float32 [T,1]; loss_weights float32 [T,1] (optional, default 1); policy_version int64 [T]
//   or [T,1] (optional; ≥ 0 where trained).
// Hearth's RL trainer takes a sequence as token ids with, per id, whether it is a trained target, its sampling
// logprob, advantage and loss weight (worker/training/rl-token-data.ts), so position t maps to id t + 1.
// Pure: malformed rows throw a ValidationError (422, naming the matrix and row); well-formed rows Hearth cannot
// train come back as a reason (501).
import { ValidationError } from '../../errors/domain-errors.js';
import type { TokenMatrixBatchT } from '../../schemas/native-framings.js';
import type { ExperimentalTrainingConfigT } from '../../protocol/training.js';
import { denseValues } from './token-matrix.js';
import type { RlTokenSequence } from '../../protocol/token-sequences.js';

type Matrix = TokenMatrixBatchT['matrices'][number];
type Row = Matrix['rows'][number];


export type RlTokenMatrixDecoding = { ok: true; sequences: RlTokenSequence[] } | { ok: false; reason: string };

/** The losses over token matrices Hearth's RL trainer implements, and the loss values each takes (ART's NamedLossRequest). */
export const TOKEN_RL_LOSSES: Record<string, string[]> = { cispo: ['clip_low_threshold', 'clip_high_threshold'], importance_sampling: [] };

const REQUIRED = ['token_ids', 'target_token_ids', 'behavior_logprobs', 'advantages'];
const OPTIONAL = ['loss_weights', 'policy_version'];
const COEFFICIENTS = ['behavior_logprobs', 'advantages', 'loss_weights'];

const fail = (loc: (string | number)[], msg: string) => new ValidationError([{ loc: ['body', ...loc], msg, type: 'value_error' }]);

/**
 * The trainer's experimental_config for an N3 RL loss (ART's defaults: clip_low_threshold 0, clip_high_threshold 4).
 * CISPO clips the ratio to [low, high], Hearth's CISPO to [1 - epsilon, 1 + epsilon_high]. importance_sampling
 * (-ratio · A, the gradient through the ratio) is Hearth's PPO with a clip that never binds: min(r·A, clip(r)·A) = r·A.
 */
export function tokenRlExperimentalConfig(loss: { name: string; values: Record<string, unknown> }): ExperimentalTrainingConfigT {
  if (loss.name === 'importance_sampling') return { loss_fn: 'ppo', epsilon: 1, epsilon_high: 1e30, normalize_advantages: false };
  const low = typeof loss.values.clip_low_threshold === 'number' ? loss.values.clip_low_threshold : 0;
  const high = typeof loss.values.clip_high_threshold === 'number' ? loss.values.clip_high_threshold : 4;
  return { loss_fn: 'cispo', epsilon: 1 - low, epsilon_high: high - 1, normalize_advantages: false };
}

/** ART's NamedLossRequest rules for an RL loss over token matrices: only its own values, CISPO's clip low ≤ high (else 422). */
export function checkTokenRlLoss(loss: { name: string; values: Record<string, unknown> }): void {
  const allowed = TOKEN_RL_LOSSES[loss.name] ?? [];
  const unknown = Object.keys(loss.values).filter((k) => !allowed.includes(k));
  if (unknown.length) throw fail(['loss', unknown[0]], `unsupported ${loss.name} settings: ${unknown.join(', ')}`);
  const { epsilon, epsilon_high: epsilonHigh } = tokenRlExperimentalConfig(loss);
  if (loss.name === 'cispo' && 1 - epsilon! > 1 + epsilonHigh!) throw fail(['loss', 'clip_low_threshold'], 'clip_low_threshold must not exceed clip_high_threshold');
}

/** Every scalar a row holds as sent (spans: default and span values), to check its dtype. */
function sentScalars(row: Row): unknown[] {
  if (row.values.encoding === 'dense') return row.values.data;
  return [row.values.default, ...row.values.spans.map((s) => s.value)].flat();
}

function checkDtype(row: Row, loc: (string | number)[]): void {
  const ints = row.dtype === 'int64' || row.dtype === 'int32';
  const ok = sentScalars(row).every((v) => typeof v === 'number' && Number.isFinite(v) && (!ints || Number.isInteger(v)));
  if (!ok) throw fail(loc, `row ${row.name} (${row.dtype}) must hold ${ints ? 'integers' : 'finite numbers'}`);
}

/** The RL sequences of an N3 token matrix batch, or why Hearth cannot train on it; throws a ValidationError when malformed. */
export function rlSequencesFromTokenMatrices(batch: TokenMatrixBatchT): RlTokenMatrixDecoding {
  if (batch.routes.length > 0) return { ok: false, reason: 'token matrix routes (MoE routing replay) are not implemented by this server' };
  const ids = new Set<string>();
  const sequences: RlTokenSequence[] = [];
  for (const [m, matrix] of batch.matrices.entries()) {
    const at = (...rest: (string | number)[]) => ['batch', 'matrices', m, ...rest];
    const name = `matrix ${JSON.stringify(matrix.matrix_id)}`;
    if (ids.has(matrix.matrix_id)) throw fail(at('matrix_id'), `${name}: matrix_id values must be unique`);
    ids.add(matrix.matrix_id);
    const rows = new Map<string, { row: Row; r: number }>();
    for (const [r, row] of matrix.rows.entries()) {
      if (rows.has(row.name)) throw fail(at('rows', r, 'name'), `${name}: row names must be unique (${row.name})`);
      if (!REQUIRED.includes(row.name) && !OPTIONAL.includes(row.name)) {
        throw fail(at('rows', r, 'name'), `${name} has unused row ${row.name} (an RL loss reads ${[...REQUIRED, ...OPTIONAL].join(', ')})`);
      }
      rows.set(row.name, { row, r });
    }
    const missing = REQUIRED.filter((n) => !rows.has(n));
    if (missing.length) throw fail(at('rows'), `${name} is missing rows ${missing.join(', ')}`);
    const values = new Map<string, number[]>();
    for (const [rowName, { row, r }] of rows) {
      checkDtype(row, at('rows', r, 'values'));
      try {
        values.set(rowName, denseValues(row));
      } catch (err) {
        throw fail(at('rows', r, 'values'), `${name}: ${(err as Error).message}`);
      }
    }
    const { row: tokenRow } = rows.get('token_ids')!;
    const t = tokenRow.shape[0];
    if (tokenRow.dtype !== 'int64' || tokenRow.shape.length !== 1) throw fail(at('rows', rows.get('token_ids')!.r), `${name}: token_ids must be int64 with shape [T]`);
    for (const [rowName, { row, r }] of rows) {
      if (rowName === 'token_ids') continue;
      const perToken = row.shape.length === 2 && row.shape[0] === t && row.shape[1] === 1;
      if (rowName === 'policy_version') {
        if (row.dtype !== 'int64' || !(perToken || (row.shape.length === 1 && row.shape[0] === t))) throw fail(at('rows', r), `${name}: policy_version must be int64 with shape [T] or [T,1] (T = ${t})`);
      } else if (rowName === 'target_token_ids') {
        if (row.dtype !== 'int64' || !perToken) throw fail(at('rows', r), `${name}: target_token_ids must be int64 with shape [T,1] (T = ${t}; one target per token position)`);
      } else if (row.dtype !== 'float32' || !perToken) {
        throw fail(at('rows', r), `${name}: ${rowName} must be float32 with shape [T,1] like target_token_ids (T = ${t})`);
      }
    }
    const tokenIds = values.get('token_ids')!;
    const targets = values.get('target_token_ids')!;
    if (tokenIds.some((v) => v < 0) || targets.some((v) => v < 0)) throw fail(at('rows'), `${name}: token_ids and target_token_ids must be nonnegative`);
    const advantages = values.get('advantages')!;
    const behavior = values.get('behavior_logprobs')!;
    const weights = values.get('loss_weights') ?? new Array<number>(t).fill(1);
    const versions = values.get('policy_version');
    const sequence: RlTokenSequence = {
      token_ids: tokenIds, loss_mask: new Array<number>(t).fill(0), logprobs: new Array<number>(t).fill(0),
      advantages: new Array<number>(t).fill(0), weights: new Array<number>(t).fill(0),
    };
    let active = 0;
    for (let i = 0; i < t; i++) {
      if (advantages[i] === 0) continue;
      active++;
      if (versions && versions[i] < 0) throw fail(at('rows', rows.get('policy_version')!.r), `${name} has a negative policy_version at trained position ${i}`);
      if (i + 1 >= t || targets[i] !== tokenIds[i + 1]) {
        return { ok: false, reason: `${name}: the target at position ${i} is not the next input token; this server trains next-token targets only` };
      }
      sequence.loss_mask[i + 1] = 1;
      sequence.logprobs[i + 1] = behavior[i];
      sequence.advantages[i + 1] = advantages[i];
      sequence.weights[i + 1] = weights[i];
    }
    if (active === 0) throw fail(at('rows', rows.get('advantages')!.r), `${name} has no loss-bearing target (every advantage is 0)`);
    sequences.push(sequence);
  }
  return { ok: true, sequences };
}
