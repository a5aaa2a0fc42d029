// The settings of the RL policy loss: what ART's experimental_config chooses (src/protocol/rl-settings.ts parses
// it) and what the trainer's loss (worker/training/losses.ts) computes with. Part of a training task (one zod
// schema: src/protocol/training-task.ts), so the worker gets them parsed, never the raw config.
import { z } from 'zod';

export const ImportanceSamplingLevel = z.enum(['token', 'sequence', 'average', 'geometric_average']);
export type ImportanceSamplingLevel = z.infer<typeof ImportanceSamplingLevel>;

export const PolicyLossConfig = z.object({
  /** 'cispo': -sg(clip(ratio)) * A * logprob; 'ppo': -min(ratio * A, clip(ratio) * A). */
  lossFn: z.enum(['cispo', 'ppo']),
  /** Lower clip: ratio >= 1 - epsilon. */
  epsilon: z.number(),
  /** Upper clip: ratio <= 1 + epsilonHigh. */
  epsilonHigh: z.number(),
  importanceSamplingLevel: ImportanceSamplingLevel,
  /** Multiply each token's loss by sg(min(ratio, this)) when set. */
  truncatedImportanceSampling: z.number().nullable(),
  /** Cap the ratio of tokens with negative advantage. */
  maxNegativeAdvantageIsWeight: z.number().nullable(),
  /** Zero the ratio of tokens outside (1 - epsilon, 1 + epsilonHigh). */
  maskProbRatio: z.boolean(),
  /** Kimi K2 style: advantage -= tau * sg(new - old logprob). */
  kimiK2Tau: z.number().nullable(),
  /** Weight of the k3 KL estimate against the reference (base) model. */
  klPenaltyCoef: z.number(),
});
export type PolicyLossConfig = z.infer<typeof PolicyLossConfig>;

/** ART's defaults: CISPO clips the ratio to [0, 5]; PPO to [0.8, 1.2]. */
export function defaultPolicyLossConfig(lossFn: 'cispo' | 'ppo' = 'cispo'): PolicyLossConfig {
  const epsilon = lossFn === 'ppo' ? 0.2 : 1.0;
  return {
    lossFn,
    epsilon,
    epsilonHigh: lossFn === 'ppo' ? epsilon : 4.0,
    importanceSamplingLevel: 'token',
    truncatedImportanceSampling: null,
    maxNegativeAdvantageIsWeight: null,
    maskProbRatio: false,
    kimiK2Tau: null,
    klPenaltyCoef: 0,
  };
}
