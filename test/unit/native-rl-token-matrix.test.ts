// N3's RL token matrices (src/services/native-runs/rl-token-matrix.ts): rows as ART's client lowers a rollout become the
// RL trainer's sequences (per-token trained mask, behaviour logprob, advantage, loss weight), malformed rows are a
// 422 naming the matrix and row, and the loss maps onto the trainer's CISPO (or PPO for importance_sampling).
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors/domain-errors.js';
import { checkTokenRlLoss, rlSequencesFromTokenMatrices, tokenRlExperimentalConfig } from '../../src/services/native-runs/rl-token-matrix.js';
import { translateN3 } from '../../src/services/native-runs/framing.js';
import { N3ForwardBackwardBody, TokenMatrixBatch, type TokenMatrixBatchT } from '../../src/schemas/native-framings.js';
import { artRlTokenMatrix } from '../helpers/art-native-framing-models.js';

const batchOf = (...matrices: unknown[]): TokenMatrixBatchT => TokenMatrixBatch.parse({ kind: 'token_matrix', matrices, routes: [] });
// A prompt of 3 tokens, then 3 sampled ones (mask 1) with their sampling logprobs.
const tokens = [5, 6, 7, 8, 9, 10];
const mask = [0, 0, 0, 1, 1, 1];
const logprobs = [NaN, NaN, NaN, -0.5, -1.25, -2];

function rejects(batch: TokenMatrixBatchT, msg: RegExp): ValidationError {
  try {
    rlSequencesFromTokenMatrices(batch);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues[0].msg).toMatch(msg);
    return err as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

describe('N3 RL token matrices → RL sequences', () => {
  it('maps position t (target ids[t+1]) to the trainer\'s entry t+1: mask, behaviour logprob, advantage, weight', () => {
    const decoded = rlSequencesFromTokenMatrices(batchOf(
      artRlTokenMatrix('rollout-0', tokens, mask, logprobs, 0.75, { weight: 0.5, versions: [-1, -1, -1, 2, 2, 2] }),
      artRlTokenMatrix('rollout-1', [5, 6, 11, 12], [0, 0, 1, 1], [NaN, NaN, -0.1, -0.2], -1.5),
    ));
    expect(decoded).toEqual({
      ok: true,
      sequences: [
        { token_ids: tokens, loss_mask: [0, 0, 0, 1, 1, 1], logprobs: [0, 0, 0, -0.5, -1.25, -2], advantages: [0, 0, 0, 0.75, 0.75, 0.75], weights: [0, 0, 0, 0.5, 0.5, 0.5] },
        { token_ids: [5, 6, 11, 12], loss_mask: [0, 0, 1, 1], logprobs: [0, 0, -0.1, -0.2], advantages: [0, 0, -1.5, -1.5], weights: [0, 0, 1, 1] },
      ],
    });
  });

  it('trains positions with a nonzero advantage; without a loss_weights row each weighs 1', () => {
    const m = artRlTokenMatrix('m', tokens, mask, logprobs, 2);
    const noWeights = { ...m, rows: m.rows.filter((r) => (r as { name: string }).name !== 'loss_weights') };
    const decoded = rlSequencesFromTokenMatrices(batchOf(noWeights));
    expect(decoded.ok && decoded.sequences[0].weights).toEqual([0, 0, 0, 1, 1, 1]);
  });

  it('refuses malformed rows with a 422 naming the matrix and row', () => {
    const m = artRlTokenMatrix('m', tokens, mask, logprobs, 1);
    const rows = m.rows as { name: string; dtype: string; shape: number[]; values: unknown }[];
    const withRow = (name: string, row: unknown) => ({ ...m, rows: rows.map((r) => (r.name === name ? row : r)) });
    const adv = rows.find((r) => r.name === 'advantages')!;
    rejects(batchOf({ ...m, rows: rows.filter((r) => r.name !== 'behavior_logprobs') }), /matrix "m" is missing rows behavior_logprobs/);
    rejects(batchOf({ ...m, rows: [...rows, { ...adv, name: 'rewards' }] }), /unused row rewards/);
    rejects(batchOf(withRow('advantages', { ...adv, shape: [5, 1] })), /5 values for shape|\[T,1\]/);
    rejects(batchOf(withRow('advantages', { ...adv, shape: [6], values: { encoding: 'dense', data: [0, 0, 0, 1, 1, 1] } })), /advantages must be float32 with shape \[T,1\]/);
    rejects(batchOf(withRow('advantages', { ...adv, dtype: 'int64' })), /advantages must be float32/);
    rejects(batchOf(withRow('token_ids', { name: 'token_ids', dtype: 'int64', shape: [6], values: { encoding: 'dense', data: [5, 6, 7.5, 8, 9, 10] } })), /token_ids \(int64\) must hold integers/);
    rejects(batchOf(withRow('token_ids', { name: 'token_ids', dtype: 'int64', shape: [6], values: { encoding: 'dense', data: [5, 6, -7, 8, 9, 10] } })), /nonnegative/);
    rejects(batchOf(withRow('target_token_ids', { name: 'target_token_ids', dtype: 'int64', shape: [6, 2], values: { encoding: 'dense', data: new Array(12).fill(1) } })), /one target per token position/);
    rejects(batchOf(withRow('advantages', { ...adv, values: { encoding: 'dense', data: [0, 0, 0, 0, 0, 0] } })), /no loss-bearing target/);
    rejects(batchOf(withRow('advantages', { ...adv, values: { encoding: 'dense', data: [0, 0, true, 1, 1, 0] } })), /must hold finite numbers/);
    rejects(batchOf(withRow('advantages', { ...adv, values: { encoding: 'spans', default: [0], spans: [{ start: 4, end: 9, value: [1] }] } })), /inside \[0, 6\)/);
    const versions = artRlTokenMatrix('m', tokens, mask, logprobs, 1, { versions: [-1, -1, -1, 2, -1, 2] });
    rejects(batchOf(versions), /negative policy_version at trained position 3/);
    const err = rejects(batchOf(m, { ...m }), /matrix_id values must be unique/);
    expect(err.issues[0].loc).toEqual(['body', 'batch', 'matrices', 1, 'matrix_id']);
  });

  it('answers 501 for what it cannot train: a target that is not the next token, MoE routes', () => {
    const m = artRlTokenMatrix('m', tokens, mask, logprobs, 1);
    const rows = m.rows as { name: string }[];
    const targets = { name: 'target_token_ids', dtype: 'int64', shape: [6, 1], values: { encoding: 'dense', data: [6, 7, 8, 9, 99, 0] } };
    expect(rlSequencesFromTokenMatrices(batchOf({ ...m, rows: rows.map((r) => (r.name === 'target_token_ids' ? targets : r)) })))
      .toMatchObject({ ok: false, reason: /position 4 is not the next input token/ });
    const routed = TokenMatrixBatch.parse({ kind: 'token_matrix', matrices: [m], routes: [{ kind: 'captured', matrix_id: 'm' }] });
    expect(rlSequencesFromTokenMatrices(routed)).toMatchObject({ ok: false, reason: /routes/ });
  });
});

describe('N3 RL losses', () => {
  it("CISPO's ratio clip [low, high] is the trainer's [1 - epsilon, 1 + epsilon_high]; importance_sampling is PPO whose clip never binds", () => {
    // ART's client sends low = 1 - (epsilon ?? 1), high = 1 + (epsilon_high ?? 4).
    expect(tokenRlExperimentalConfig({ name: 'cispo', values: { clip_low_threshold: 0, clip_high_threshold: 5 } }))
      .toEqual({ loss_fn: 'cispo', epsilon: 1, epsilon_high: 4, normalize_advantages: false });
    expect(tokenRlExperimentalConfig({ name: 'cispo', values: {} })).toMatchObject({ epsilon: 1, epsilon_high: 3 });
    expect(tokenRlExperimentalConfig({ name: 'importance_sampling', values: {} })).toEqual({ loss_fn: 'ppo', epsilon: 1, epsilon_high: 1e30, normalize_advantages: false });
    expect(() => checkTokenRlLoss({ name: 'cispo', values: { clip_low_threshold: 2, clip_high_threshold: 1 } })).toThrow(/must not exceed/);
    expect(() => checkTokenRlLoss({ name: 'cispo', values: { beta: 1 } })).toThrow(/unsupported cispo settings: beta/);
    expect(() => checkTokenRlLoss({ name: 'importance_sampling', values: { clip_low_threshold: 0 } })).toThrow(/unsupported importance_sampling/);
  });

  it('translates train()\'s forward_backward to an rl_tokens batch; dpo, normalize_advantages and malformed rows are refused', () => {
    const body = (loss: Record<string, unknown>, matrices: unknown[] = [artRlTokenMatrix('rollout-0', tokens, mask, logprobs, 1)]) =>
      N3ForwardBackwardBody.parse({
        request_id: 'fb-1', sequence_id: 0, batch: { kind: 'token_matrix', matrices, routes: [] }, loss,
        collect_packing_shapes: false, retain_packed_input: false, return_token_logprobs: false,
      });
    const cispo = translateN3('forward_backward', body({ name: 'cispo', normalize_advantages: false, clip_low_threshold: 0, clip_high_threshold: 5 }));
    expect(cispo.unsupported).toBeUndefined();
    expect(cispo.batchKind).toBe('rl');
    expect(cispo.command).toMatchObject({
      batch: { kind: 'rl_tokens', sequences: [{ token_ids: tokens, loss_mask: [0, 0, 0, 1, 1, 1] }] },
      loss: { name: 'cispo', normalize_advantages: false, values: { clip_low_threshold: 0, clip_high_threshold: 5 } },
    });
    expect(translateN3('forward_backward', body({ name: 'importance_sampling', normalize_advantages: false })).batchKind).toBe('rl');
    expect(translateN3('forward_backward', body({ name: 'dpo', normalize_advantages: false })).unsupported).toMatch(/dpo loss over token matrices/);
    expect(translateN3('forward_backward', body({ name: 'cispo', normalize_advantages: true })).unsupported).toMatch(/normalize_advantages=true/);
    expect(() => translateN3('forward_backward', body({ name: 'cispo', normalize_advantages: false }, [{ kind: 'matrix', matrix_id: 'x', rows: [] }]))).toThrow();
    const sft = body({ name: 'cispo', normalize_advantages: false });
    (sft.batch as { matrices: { rows: { name: string }[] }[] }).matrices[0].rows = (sft.batch as { matrices: { rows: { name: string }[] }[] }).matrices[0].rows.filter((r) => r.name !== 'advantages');
    expect(() => translateN3('forward_backward', sft)).toThrow(ValidationError);
  });
});
