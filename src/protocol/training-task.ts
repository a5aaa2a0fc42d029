// What a training job carries from the API to the training worker: one zod schema for the API (which stores it as
// the job's payload and builds the task), the native runs' executor (which builds payloads for its operations) and
// the worker (which runs it). The API validated the client's body before; these schemas give it one type on both
// sides and say which choices the API has already made (LoRA alpha, one optimizer step, the RL settings).
import { z } from 'zod';
import { CreateSFTTrainingJob, ExperimentalTrainingConfig, TrajectoryGroup } from './training.js';
import { RlSettings } from './rl-settings.js';
import { RlTokenSequence } from './token-sequences.js';

/** A fresh LoRA adapter: rank, scaling numerator (alpha) and the PEFT names of the projections it adapts. */
export const LoraRequest = z.object({
  rank: z.number().int().positive(),
  /** Absent in jobs stored before it travelled here: then loraAlpha's default. */
  alpha: z.number().positive().optional(),
  target_modules: z.array(z.string()).min(1),
  /** The seed of a fresh adapter's random A matrices (B starts at zero); absent: 0. A native N3 run's `spec.seed`. */
  seed: z.number().int().min(0).max(2 ** 32 - 1).optional(),
});
export type LoraRequest = z.infer<typeof LoraRequest>;

/** LoRA alpha for a rank: twice the rank, the scaling (alpha / rank = 2) ART's and PEFT's recipes use. */
export const defaultLoraAlpha = (rank: number): number => 2 * rank;

/** A requested adapter's alpha (jobs stored before alpha travelled here carry none: the default). */
export const loraAlpha = (lora: LoraRequest): number => lora.alpha ?? defaultLoraAlpha(lora.rank);

/** AdamW's settings of a native run's optim_step (its learning rate travels with the data); moments are carried. */
export const NativeOptimizer = z.object({
  beta1: z.number(),
  beta2: z.number(),
  eps: z.number(),
  weight_decay: z.number(),
  /** Global-norm clip; 0 disables. */
  grad_clip_norm: z.number(),
});
export type NativeOptimizer = z.infer<typeof NativeOptimizer>;

/** What a native run's operations add to a job (src/services/native-runs/executor.ts). */
const NativeJobParts = {
  /** forward / forward_backward: measure at the current weights; no optimizer step, no checkpoint. */
  forward_only: z.boolean().optional(),
  /**
   * With forward_only: also report the learner logprob of every trained target at the measured weights (the
   * gradient_step event's `token_logprobs`, src/protocol/token-logprobs.ts), for ART's `return_token_logprobs`.
   */
  return_token_logprobs: z.boolean().optional(),
  /** The run's adapter (fresh adapters only; a checkpoint's own config wins when continuing). */
  lora: LoraRequest.nullish(),
  /** optim_step: AdamW continues from the moments beside the checkpoint it starts from and writes its own. */
  optimizer: NativeOptimizer.nullish(),
  /**
   * One optimizer step over all the job's sequences (their gradients accumulated), as a native run's optim_step
   * applies its batch once; otherwise SFT makes batch_size batches and RL one step per packed sequence.
   */
  one_optimizer_step: z.boolean().optional(),
  /** The operations whose inputs this job trains on (native runs' bookkeeping, echoed back in their results). */
  native_operation_id: z.string().optional(),
  contributing_operation_ids: z.array(z.string()).optional(),
};

/** An RL job: the preview API's body (model_id, trajectory_groups, experimental_config), or a native run's. */
export const RlTrainingPayload = z.object({
  model_id: z.string().optional(),
  trajectory_groups: z.array(TrajectoryGroup),
  /** A native N3 run's sequences, tokenized by the client with per-token advantages: trained instead of the groups. */
  token_sequences: z.array(RlTokenSequence).optional(),
  experimental_config: ExperimentalTrainingConfig.nullish(),
  ...NativeJobParts,
});
export type RlTrainingPayload = z.infer<typeof RlTrainingPayload>;

/** An SFT job: the preview API's body with its data resolved to a file workers read, or a native run's. */
export const SftTrainingPayload = CreateSFTTrainingJob.partial({ model_id: true, training_data_url: true }).extend({
  /** The JSONL file of training rows (chat rows, or token_ids + loss_mask lines from a native run). */
  resolved_data_path: z.string(),
  ...NativeJobParts,
});
export type SftTrainingPayload = z.infer<typeof SftTrainingPayload>;

export type TrainingPayload = RlTrainingPayload | SftTrainingPayload;

const TaskCommon = {
  jobId: z.string(),
  entity: z.string(),
  modelId: z.string(),
  /** Base model id (`publisher/name`) and its folder under HEARTH_HOME/models. */
  baseModel: z.string(),
  baseModelDir: z.string().nullable(),
  /** Step the finished job's checkpoint gets; its folder; the checkpoint to continue from (null = base). */
  step: z.number().int(),
  outputDir: z.string(),
  initCheckpointDir: z.string().nullable(),
  home: z.string(),
  /** The id in the API host's `<home>/.hearth-home-id`: a worker that reads the same there shares its storage. */
  homeId: z.string().optional(),
  /** RL: the checkpoint folder the KL penalty compares against (null or absent = the base model). */
  klReferenceDir: z.string().nullable().optional(),
  /** RL with scale_learning_rate_by_reward_std_dev: the model's `train/reward_std_dev` by checkpoint step. */
  rewardStdDevHistory: z.array(z.object({ step: z.number(), reward_std_dev: z.number() })).optional(),
};

export const RlTrainingTask = z.object({
  kind: z.literal('rl'),
  ...TaskCommon,
  payload: RlTrainingPayload,
  /** experimental_config, parsed once by the API (src/protocol/rl-settings.ts). */
  rlSettings: RlSettings,
});

export const SftTrainingTask = z.object({ kind: z.literal('sft'), ...TaskCommon, payload: SftTrainingPayload });

export const TrainingTask = z.discriminatedUnion('kind', [RlTrainingTask, SftTrainingTask]);
export type TrainingTask = z.infer<typeof TrainingTask>;
