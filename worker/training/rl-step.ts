// The parts of an RL job (loop.ts runRl) between its data and its optimizer steps: which sequences it trains and
// with what advantage, its learning rate, the KL reference's logprobs, one step's loss over a micro-batch, and the
// metrics a step reports.
import type * as tf from '@tensorflow/tfjs-core';
import { computeAdvantages } from './advantages.js';
import { trainableTokens, trainedPositions, validateSequence, type MicroBatch, type TrainSequence } from './data.js';
import { LoraAdapters } from './lora.js';
import { policyLoss } from './losses.js';
import type { RlData } from './rl-data.js';
import { logprobsAt, sequenceLogprobs, type TrainingModel } from './token-logprobs.js';
import type { CheckpointContents } from './checkpoint.js';
import { fitRewardStdDevLearningRate, type RewardStdDevPoint } from '../../src/domain/reward-std-lr.js';
import { balanceAdvantage, type RlSettings } from '../../src/protocol/rl-settings.js';

export interface RlTrainSequences {
  /** The sequences trained, each with its advantage (or per-token advantages and weights). */
  sequences: TrainSequence[];
  /** The trajectory each trained sequence belongs to (rl-data's numbering over all groups). */
  trajectoryOf: number[];
  /** Client-tokenized sequences (ART's N3 token matrices) with an advantage and a loss weight per token. */
  perToken: boolean;
  advantages: ReturnType<typeof computeAdvantages>;
}

/**
 * The sequences an RL job trains: group-relative advantages (after ART's advantage_balance), sequences with a
 * zero advantage or nothing to train dropped; or, with per-token advantages, every sequence that trains a token.
 */
export function rlTrainSequences(data: RlData, settings: RlSettings, vocabSize: number): RlTrainSequences {
  const advantages = computeAdvantages(data.groupRewards, { scaleRewards: settings.scaleRewards });
  const trajectoryAdvantage = advantages.groups.flatMap((g) => g.advantages).map((a) => balanceAdvantage(a, settings.advantageBalance));
  // Sequences made by the client (ART's N3 token matrices) carry an advantage and a loss weight per token: each
  // step's loss is then the weighted mean over its trained tokens (ART's "mean_active_token"), not per trajectory.
  const perToken = data.sequences.some((s) => s.tokenAdvantages);
  if (perToken && !data.sequences.every((s) => s.tokenAdvantages)) throw new Error('an RL job takes per-token advantages for every sequence or for none');
  const sequences: TrainSequence[] = [];
  const trajectoryOf: number[] = [];
  for (const s of data.sequences) {
    if (perToken) {
      if (trainableTokens(s) === 0) continue;
      validateSequence(s, vocabSize);
      sequences.push({ ids: s.ids, lossMask: s.lossMask, logprobs: s.logprobs, tokenAdvantages: s.tokenAdvantages, tokenWeights: s.tokenWeights });
      trajectoryOf.push(s.trajectory);
      continue;
    }
    const a = trajectoryAdvantage[s.trajectory];
    if (a === undefined) throw new Error(`sequence refers to trajectory ${s.trajectory}, but there are ${trajectoryAdvantage.length}`);
    if (a === 0 || trainableTokens(s) === 0) continue;
    validateSequence(s, vocabSize);
    sequences.push({ ids: s.ids, lossMask: s.lossMask, logprobs: s.logprobs, advantage: a });
    trajectoryOf.push(s.trajectory);
  }
  return { sequences, trajectoryOf, perToken, advantages };
}

/**
 * The job's learning rate: the configured one, scaled by the trend of the model's reward spread
 * (scale_learning_rate_by_reward_std_dev) and by num_trajectories ** num_trajectories_learning_rate_multiplier_power.
 */
export function rlLearningRate(settings: RlSettings, history: readonly RewardStdDevPoint[], numTrainableTrajectories: number, log?: (line: string) => void): number {
  const fit = settings.scaleLearningRateByRewardStdDev ? fitRewardStdDevLearningRate(history) : null;
  if (fit) {
    log?.(
      `scale_learning_rate_by_reward_std_dev: ${fit.steps} steps of history, slope ${fit.slope ?? 'n/a'}, ` +
        `intercept ${fit.intercept ?? 'n/a'}, learning rate × ${fit.multiplier}`,
    );
  }
  return settings.learningRate * (fit?.multiplier ?? 1) * Math.pow(Math.max(1, numTrainableTrajectories), settings.numTrajectoriesLrPower);
}

/**
 * Reference logprobs of the KL penalty: from the base (LoRA disabled, or the starting weights), or from an earlier
 * checkpoint's LoRA factors swapped in for that one pass.
 */
export function klReferenceLogprobs(model: TrainingModel, reference: CheckpointContents | null, sequences: TrainSequence[], budget: number): Float32Array[] {
  if (reference && (reference.kind !== 'lora' || !model.lora)) throw new Error('a KL reference checkpoint needs LoRA training and a LoRA checkpoint');
  const own = model.lora;
  if (reference?.kind === 'lora') model.lora = LoraAdapters.fromPeftTensors(model.config, reference.lora, reference.tensors);
  else if (own) own.enabled = false;
  try {
    return sequenceLogprobs(model, sequences, budget);
  } finally {
    if (reference?.kind === 'lora') {
      for (const v of model.lora!.variables()) v.dispose();
      model.lora = own;
    } else if (own) own.enabled = true;
  }
}

/** What one step's micro-batches add up to, for its metrics. */
export interface RlStepSums {
  policy: number;
  kl: number;
  entropy: number;
}

/**
 * The policy loss of one micro-batch of a step. Every trajectory weighs the same in a step (its tokens share
 * 1 / trajectoriesInStep), or with per-token advantages every trained token weighs its loss weight over the step's
 * trained tokens. Adds the micro-batch's policy loss, KL and entropy to `sums`.
 */
export function rlMicroBatchLoss(
  model: TrainingModel,
  mb: MicroBatch,
  step: { trainable: number; trajectoriesInStep: number; trajectoryTokens: Map<number, number> },
  job: { train: RlTrainSequences; settings: RlSettings; refLogprobs: Float32Array[] | null },
  sums: RlStepSums,
  /** A backward follows (the forward keeps what it needs); false when only the loss is measured. */
  training = true,
): tf.Scalar {
  const { sequences, trajectoryOf, perToken } = job.train;
  const at = trainedPositions(mb);
  const n = at.index.length;
  const weights = new Float32Array(n);
  const ref = job.refLogprobs ? new Float32Array(n) : undefined;
  for (let j = 0; j < n; j++) {
    const s = at.sequenceIndex[j];
    if (ref && job.refLogprobs) ref[j] = job.refLogprobs[s][at.positionInSequence[j]];
    weights[j] = perToken ? at.lossWeights[j] / step.trainable : 1 / (step.trajectoryTokens.get(trajectoryOf[s])! * step.trajectoriesInStep);
  }
  const logprobs = logprobsAt(model, mb, at, training, (entropy) => {
    for (let j = 0; j < n; j++) sums.entropy += entropy[j];
  });
  const parts = policyLoss(logprobs, {
    oldLogprobs: at.oldLogprobs,
    advantages: at.advantages,
    weights,
    sequenceIndex: at.sequenceIndex,
    numSequences: sequences.length,
    refLogprobs: ref,
  }, job.settings.loss);
  sums.policy += parts.policyLoss.dataSync()[0];
  sums.kl += parts.kl.dataSync()[0];
  return parts.loss;
}

/** The metrics every RL gradient_step reports about the job's data (rewards only where trajectory groups gave them). */
export function rlDataMetrics(data: RlData, train: RlTrainSequences): Record<string, number> {
  const adv = train.advantages;
  return {
    ...(train.perToken ? {} : { reward: adv.rewardMean, reward_std_dev: adv.rewardStdDev }),
    exception_rate: data.numExceptions / Math.max(1, data.numExceptions + data.numTrajectories),
    ...(train.perToken ? {} : { num_groups_submitted: adv.numGroupsSubmitted, num_groups_trainable: adv.numGroupsTrainable }),
    // The job's total (trajectories + exceptions), which is what ART's data/step_num_trajectories means (it renames this key onto
    // its own per-train() count); a step's trajectories would override it with one step's share.
    num_trajectories: data.numTrajectories + data.numExceptions,
  };
}
