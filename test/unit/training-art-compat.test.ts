// Training-side details ART's client depends on (issue #20, item 8): every gradient_step value must survive
// ART's float(v), and logprob tokens not written token_id:N are looked up in the vocabulary as ART does.
import { describe, expect, it } from 'vitest';
import { finiteMetrics } from '../../worker/training/loop.js';
import { resolveKlReference } from '../../src/domain/kl-reference.js';
import { choiceTokens } from '../../worker/training/rl-data.js';
import { balanceAdvantage, rlSettingsFromExperimentalConfig, unsupportedExperimentalKeys } from '../../src/protocol/rl-settings.js';

describe('finiteMetrics', () => {
  it('drops NaN and ±Infinity (JSON would write null, which float() refuses) and keeps every finite value', () => {
    const out = finiteMetrics({ loss: NaN, grad_norm: Infinity, entropy: -Infinity, reward: 0.5, num_tokens: 0, kl_policy_ref: -1e-9 });
    expect(out).toEqual({ reward: 0.5, num_tokens: 0, kl_policy_ref: -1e-9 });
    expect(JSON.parse(JSON.stringify(out))).toEqual(out);
  });
});

describe('choiceTokens', () => {
  const choice = (tokens: string[]) => ({ logprobs: { content: tokens.map((token) => ({ token, logprob: -1 })) } });
  const vocab = new Map([['▁Once', 7], ['▁upon', 9]]);
  const lookup = (t: string) => vocab.get(t) ?? null;

  it('reads token_id:N, and falls back to the vocabulary for other tokens', () => {
    expect(choiceTokens(choice(['token_id:3', 'token_id:12']))).toEqual({ ids: [3, 12], logprobs: [-1, -1] });
    expect(choiceTokens(choice(['▁Once', 'token_id:4', '▁upon']), lookup)).toEqual({ ids: [7, 4, 9], logprobs: [-1, -1, -1] });
  });

  it('names a token that is neither, and a choice without logprobs gives null', () => {
    expect(() => choiceTokens(choice(['▁Once', 'zzz']), lookup)).toThrow('"zzz", which is neither "token_id:N" nor a piece of this model\'s vocabulary');
    expect(() => choiceTokens(choice(['▁Once']))).toThrow(/neither/);
    expect(choiceTokens({ logprobs: null })).toBeNull();
  });
});

describe('advantage_balance (ART preprocessing/pack.py)', () => {
  const advantages = [1.5, -1, 0.5, -2];
  it('0 keeps both signs, 1 only positive, -1 only negative, between scales the other side', () => {
    expect(advantages.map((a) => balanceAdvantage(a, 0))).toEqual([1.5, -1, 0.5, -2]);
    expect(advantages.map((a) => balanceAdvantage(a, 1))).toEqual([1.5, -0, 0.5, -0]);
    expect(advantages.map((a) => balanceAdvantage(a, -1))).toEqual([0, -1, 0, -2]);
    expect(advantages.map((a) => balanceAdvantage(a, 0.25))).toEqual([1.5, -0.75, 0.5, -1.5]);
    expect(advantages.map((a) => balanceAdvantage(a, -0.5))).toEqual([0.75, -1, 0.25, -2]);
  });

  it('is accepted now, and refused outside [-1, 1]', () => {
    expect(unsupportedExperimentalKeys({ advantage_balance: 0.5 })).toEqual([]);
    expect(rlSettingsFromExperimentalConfig({ advantage_balance: -0.3 }).advantageBalance).toBe(-0.3);
    expect(() => rlSettingsFromExperimentalConfig({ advantage_balance: 2 })).toThrow(/outside \[-1, 1\]/);
  });
});

describe('KL reference (kl_penalty_reference_step, kl_penalty_step_lag, kl_ref_adapter_path)', () => {
  const checkpoints = [{ step: 1, path: '/h/ck/m/step-1' }, { step: 2, path: '/h/ck/m/step-2' }, { step: 3, path: '/h/ck/m/step-3' }];
  it('resolves to the base (null), a checkpoint folder of the model, or an error naming the problem', () => {
    expect(resolveKlReference(null, checkpoints, 3)).toEqual({ dir: null });
    expect(resolveKlReference({ kl_penalty_reference_step: 0 }, checkpoints, 3)).toEqual({ dir: null });
    expect(resolveKlReference({ kl_penalty_reference_step: 2 }, checkpoints, 3)).toEqual({ dir: '/h/ck/m/step-2' });
    expect(resolveKlReference({ kl_penalty_reference_step: 7 }, checkpoints, 3)).toEqual({ error: 'kl_penalty_reference_step 7: this model has no checkpoint at step 7' });
    // PipelineTrainer's lag: max(0, current step − lag).
    expect(resolveKlReference({ kl_penalty_step_lag: 2 }, checkpoints, 3)).toEqual({ dir: '/h/ck/m/step-1' });
    expect(resolveKlReference({ kl_penalty_step_lag: 5 }, checkpoints, 3)).toEqual({ dir: null });
    expect(resolveKlReference({ kl_ref_adapter_path: '/h/ck/m/step-3/' }, checkpoints, 3)).toEqual({ dir: '/h/ck/m/step-3' });
    expect(resolveKlReference({ kl_ref_adapter_path: '/etc' }, checkpoints, 3)).toEqual({ error: "kl_ref_adapter_path /etc is not one of this model's checkpoint folders" });
    // The path wins over the step, the step over the lag (ART sends the step computed from its lag).
    expect(resolveKlReference({ kl_ref_adapter_path: '/h/ck/m/step-1', kl_penalty_reference_step: 2, kl_penalty_step_lag: 1 }, checkpoints, 3)).toEqual({ dir: '/h/ck/m/step-1' });
    expect(resolveKlReference({ kl_penalty_reference_step: 2, kl_penalty_step_lag: 1 }, checkpoints, 3)).toEqual({ dir: '/h/ck/m/step-2' });
  });
});
