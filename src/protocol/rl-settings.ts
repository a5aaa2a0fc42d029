// ART's `experimental_config` (spec §3.3) -> the RL trainer's settings, and the list of keys a
// request sets that this trainer does not implement (the API answers 400 naming them).
//
// ART sends every key, unset ones as null, so "set" means non-null and different from the value
// that means "off". Unknown keys are tolerated (newer clients add keys), as the spec asks.
import { z } from 'zod';
import { defaultPolicyLossConfig, PolicyLossConfig, type ImportanceSamplingLevel } from './policy-loss.js';

export type ExperimentalConfig = Record<string, unknown>;

/** Accepted and ignored: they change neither the result (debug plots, chunking of a computation). */
export const KEYS_WITHOUT_EFFECT = ['plot_tensors', 'logprob_calculation_chunk_size'];

/** Keys this trainer does not implement, with the value that means "not used" (none today; newer ART keys land here). */
// (kl_penalty_reference_step, kl_penalty_step_lag and kl_ref_adapter_path are resolved by the scheduler to a
// checkpoint folder: src/domain/kl-reference.ts; scale_learning_rate_by_reward_std_dev gets the model's
// reward-spread history from the scheduler: src/domain/training-step-metrics.ts.)
const UNSUPPORTED: Record<string, unknown> = {};

/** experimental_config keys that are set but not implemented here (empty = the request is fine). */
export function unsupportedExperimentalKeys(config: ExperimentalConfig | null | undefined): string[] {
  if (!config) return [];
  return Object.keys(UNSUPPORTED).filter((key) => config[key] !== null && config[key] !== undefined && config[key] !== UNSUPPORTED[key]);
}

/**
 * SFT jobs take a free-form experimental_config (ART never sends one); this trainer implements none
 * of its keys, so every key that is set is reported.
 */
export function unsupportedSftExperimentalKeys(config: ExperimentalConfig | null | undefined): string[] {
  return Object.keys(config ?? {}).filter((key) => config![key] !== null && config![key] !== undefined);
}

export const RlSettings = z.object({
  learningRate: z.number(),
  /** learning rate multiplied by num_trajectories ** this. */
  numTrajectoriesLrPower: z.number(),
  loss: PolicyLossConfig,
  /** Divide advantages by the group's reward std (scale_rewards and normalize_advantages). */
  scaleRewards: z.boolean(),
  allowTrainingWithoutLogprobs: z.boolean(),
  /** Recompute the "old" logprobs with the model at the start of the job (ART precalculate_logprobs). */
  precalculateLogprobs: z.boolean(),
  /** Tokens per optimizer step (sequences are packed into steps of at most this many tokens). */
  packedSequenceLength: z.number().int().positive(),
  /**
   * ART's advantage_balance in [-1, 1]: > 0 scales negative advantages by (1 − b) (1 trains on positive ones
   * only), < 0 scales positive ones by (1 + b) (−1: negative only), 0 leaves both (ART's preprocessing/pack.py).
   */
  advantageBalance: z.number().min(-1).max(1),
  /** Multiply the learning rate by the trend of the model's reward std dev (src/domain/reward-std-lr.ts). */
  scaleLearningRateByRewardStdDev: z.boolean(),
});
export type RlSettings = z.infer<typeof RlSettings>;

/** One advantage after ART's advantage_balance. */
export function balanceAdvantage(advantage: number, balance: number): number {
  if (balance > 0 && advantage < 0) return advantage * (1 - balance);
  if (balance < 0 && advantage > 0) return advantage * (1 + balance);
  return advantage;
}

export const DEFAULT_RL_LEARNING_RATE = 5e-6;
export const DEFAULT_PACKED_SEQUENCE_LENGTH = 8192;

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const bool = (v: unknown): boolean | null => (typeof v === 'boolean' ? v : null);

/** Resolve an experimental_config (nulls = defaults, as ART's trainer does). Throws on unsupported keys. */
export function rlSettingsFromExperimentalConfig(config: ExperimentalConfig | null | undefined): RlSettings {
  const c = config ?? {};
  const unsupported = unsupportedExperimentalKeys(c);
  if (unsupported.length) throw new Error(`experimental_config keys not implemented: ${unsupported.join(', ')}`);

  const ppo = c.loss_fn === 'ppo' || (c.loss_fn == null && c.ppo === true);
  if (c.loss_fn != null && c.loss_fn !== 'ppo' && c.loss_fn !== 'cispo') throw new Error(`loss_fn ${String(c.loss_fn)} is not supported (cispo, ppo)`);
  const loss = defaultPolicyLossConfig(ppo ? 'ppo' : 'cispo');
  const epsilon = num(c.epsilon);
  if (epsilon !== null) {
    loss.epsilon = epsilon;
    if (ppo) loss.epsilonHigh = epsilon; // PPO's epsilon_high defaults to epsilon
  }
  const epsilonHigh = num(c.epsilon_high);
  if (epsilonHigh !== null) loss.epsilonHigh = epsilonHigh;
  const level = c.importance_sampling_level ?? 'token';
  if (!['token', 'sequence', 'average', 'geometric_average'].includes(level as string)) {
    throw new Error(`importance_sampling_level ${String(level)} is not supported`);
  }
  loss.importanceSamplingLevel = level as ImportanceSamplingLevel;
  loss.truncatedImportanceSampling = num(c.truncated_importance_sampling);
  loss.maxNegativeAdvantageIsWeight = num(c.max_negative_advantage_importance_sampling_weight);
  loss.maskProbRatio = bool(c.mask_prob_ratio) ?? false;
  loss.kimiK2Tau = num(c.kimi_k2_tau);
  loss.klPenaltyCoef = num(c.kl_penalty_coef) ?? 0;

  const scaleRewards = bool(c.scale_rewards) ?? true;
  return {
    learningRate: num(c.learning_rate) ?? DEFAULT_RL_LEARNING_RATE,
    numTrajectoriesLrPower: num(c.num_trajectories_learning_rate_multiplier_power) ?? 0,
    loss,
    scaleRewards: scaleRewards && (bool(c.normalize_advantages) ?? scaleRewards),
    allowTrainingWithoutLogprobs: bool(c.allow_training_without_logprobs) ?? false,
    precalculateLogprobs: bool(c.precalculate_logprobs) ?? false,
    packedSequenceLength: num(c.packed_sequence_length) ?? DEFAULT_PACKED_SEQUENCE_LENGTH,
    advantageBalance: advantageBalanceOf(c.advantage_balance),
    scaleLearningRateByRewardStdDev: bool(c.scale_learning_rate_by_reward_std_dev) ?? false,
  };
}

function advantageBalanceOf(v: unknown): number {
  const b = num(v) ?? 0;
  if (b < -1 || b > 1) throw new Error(`advantage_balance ${b} is outside [-1, 1]`);
  return b;
}
