// Wire shapes of the training API (W&B Serverless Training, shared/spec/wandb-serverless-training.openapi.json).
import { z } from 'zod';
import { PageQuery, paginated } from './common.js';
import { MAX_GENERATION_ID_LENGTH, MAX_PROJECT_AND_NAME_LENGTH } from '../domain/served-names.js';

const name = (what: string) =>
  z
    .string()
    .min(1)
    .max(128)
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, `${what} may contain letters, digits, '_', '.', '-' and must start with a letter or digit`);

export const ModelCreate = z
  .object({
    entity: z.string().nullish(),
    project: name('project'),
    name: name('name'),
    base_model: z.string().min(1).max(256),
    return_existing: z.boolean().default(false),
  })
  // Every served name `entity/project/name:stepN` must fit ART's 255-character generation_id (domain/served-names.ts).
  .refine((b) => b.project.length + b.name.length <= MAX_PROJECT_AND_NAME_LENGTH, {
    path: ['name'],
    message: `project and name together may have at most ${MAX_PROJECT_AND_NAME_LENGTH} characters, so that every served name entity/project/name:stepN fits the ${MAX_GENERATION_ID_LENGTH} characters of ART's generation_id`,
  })
  .meta({ id: 'ModelCreate' });

export const ModelResponse = z
  .object({
    id: z.uuid(),
    entity: z.string(),
    project: z.string(),
    name: z.string(),
    base_model: z.string(),
    run_id: z.string().nullable(),
  })
  .meta({ id: 'ModelResponse' });

export const DeleteModelResponse = z
  .object({ model_id: z.uuid(), deleted_checkpoints: z.number().int(), deleted_run: z.boolean() })
  .meta({ id: 'DeleteModelResponse' });

export const ModelIdParams = z.object({ model_id: z.string().max(128) });
export const JobIdParams = z.object({ training_job_id: z.string().max(128) });

export const CheckpointResponse = z
  .object({ id: z.uuid(), step: z.number().int(), metrics: z.record(z.string(), z.number()) })
  .meta({ id: 'CheckpointResponse' });
export const CheckpointPage = paginated(CheckpointResponse, 'PaginatedResponse_CheckpointResponse_');
export const CheckpointQuery = PageQuery.extend({ order: z.enum(['asc', 'desc']).default('asc') });

export const DeleteCheckpointsRequest = z
  .object({ steps: z.array(z.number().int()).max(100_000) })
  .meta({ id: 'DeleteCheckpointsRequest' });
export const DeleteCheckpointsResponse = z
  .object({ deleted_count: z.number().int(), not_found_steps: z.array(z.number().int()) })
  .meta({ id: 'DeleteCheckpointsResponse' });

// Trajectories as ART's `model_dump(mode="json")` produces them. Messages and Choices pass through unvalidated
// beyond being objects: the trainer interprets them (spec §3.1).
const JsonObject = z.record(z.string(), z.unknown());
const MetricValue = z.union([z.number(), z.boolean()]);

export const Trajectory = z
  .looseObject({
    messages_and_choices: z.array(JsonObject).default([]),
    tools: z.array(JsonObject).nullish(),
    additional_histories: z
      .array(z.looseObject({ messages_and_choices: z.array(JsonObject), tools: z.array(JsonObject).nullish() }))
      .default([]),
    reward: z.number().default(0),
    initial_policy_version: z.number().int().nullish(),
    final_policy_version: z.number().int().nullish(),
    metrics: z.record(z.string(), MetricValue).default({}),
    auto_metrics: z.record(z.string(), MetricValue).optional(),
    metadata: z.record(z.string(), z.unknown()).default({}),
    logs: z.array(z.string()).default([]),
  })
  .meta({ id: 'Trajectory' });

export const TrajectoryGroup = z
  .looseObject({
    trajectories: z.array(Trajectory),
    exceptions: z.array(z.looseObject({ type: z.string(), message: z.string(), traceback: z.string().optional() })).default([]),
    metadata: z.record(z.string(), z.unknown()).default({}),
    metrics: z.record(z.string(), MetricValue).default({}),
    logs: z.array(z.string()).default([]),
  })
  .meta({ id: 'TrajectoryGroup' });

export const LogRequest = z
  .object({ model_id: z.string().optional(), split: z.string().min(1).max(64), trajectory_groups: z.array(TrajectoryGroup) })
  .meta({ id: 'LogRequest' });

export const ExperimentalTrainingConfig = z
  .looseObject({
    learning_rate: z.number().positive().max(1).nullish(),
    loss_fn: z.enum(['cispo', 'ppo']).nullish(),
    ppo: z.boolean().nullish(),
    epsilon: z.number().nonnegative().nullish(),
    epsilon_high: z.number().nonnegative().nullish(),
    advantage_balance: z.number().min(-1).max(1).nullish(),
    scale_rewards: z.boolean().nullish(),
    normalize_advantages: z.boolean().nullish(),
    importance_sampling_level: z.enum(['token', 'sequence', 'average', 'geometric_average']).nullish(),
    max_negative_advantage_importance_sampling_weight: z.number().nullish(),
    mask_prob_ratio: z.boolean().nullish(),
    kimi_k2_tau: z.number().nullish(),
    precalculate_logprobs: z.boolean().nullish(),
    allow_training_without_logprobs: z.boolean().nullish(),
    plot_tensors: z.boolean().nullish(),
    truncated_importance_sampling: z.number().nullish(),
    scale_learning_rate_by_reward_std_dev: z.boolean().nullish(),
    logprob_calculation_chunk_size: z.number().int().positive().nullish(),
    packed_sequence_length: z.number().int().positive().nullish(),
    num_trajectories_learning_rate_multiplier_power: z.number().nullish(),
    kl_penalty_coef: z.number().nonnegative().nullish(),
    kl_penalty_source: z.enum(['current_learner', 'sample']).nullish(),
    kl_penalty_reference_step: z.number().int().nonnegative().nullish(),
    kl_penalty_step_lag: z.number().int().min(1).nullish(),
    kl_ref_adapter_path: z.string().nullish(),
  })
  .meta({ id: 'ExperimentalTrainingConfig' });

export const CreateTrainingJob = z
  .object({
    model_id: z.string().max(128),
    trajectory_groups: z.array(TrajectoryGroup).min(1),
    experimental_config: ExperimentalTrainingConfig.nullish(),
  })
  .meta({ id: 'CreateTrainingJob' });

export const SFTTrainingConfig = z
  .object({
    batch_size: z.union([z.number().int().min(1).max(4096), z.literal('auto')]).nullish(),
    learning_rate: z.union([z.number().positive().max(1), z.array(z.number().nonnegative().max(1)).min(1)]).nullish(),
    metric_logging: z.record(z.string(), z.unknown()).nullish(),
  })
  .meta({ id: 'SFTTrainingConfig' });

export const CreateSFTTrainingJob = z
  .object({
    model_id: z.string().max(128),
    training_data_url: z.string().min(1).max(2048),
    config: SFTTrainingConfig.nullish(),
    experimental_config: z.record(z.string(), z.unknown()).nullish(),
  })
  .meta({ id: 'CreateSFTTrainingJob' });

export const TrainingJobResponse = z.object({ id: z.uuid() }).meta({ id: 'TrainingJobResponse' });

export const TrainingJobStatus = z.enum(['queued', 'running', 'succeeded', 'failed', 'cancelled']);

/** GET of a job: the official `{id}` plus what users need to follow it (a superset, see docs/api.md). */
export const TrainingJobDetail = z
  .object({
    id: z.uuid(),
    status: TrainingJobStatus,
    kind: z.enum(['rl', 'sft']),
    model_id: z.string(),
    created_at: z.string(),
    started_at: z.string().nullable(),
    finished_at: z.string().nullable(),
    training_start: z.string().nullable(),
    training_end: z.string().nullable(),
    error_message: z.string().nullable(),
  })
  .meta({ id: 'TrainingJobDetail' });

export const TrainingJobEventType = z
  .enum(['training_started', 'gradient_step', 'training_ended', 'training_failed'])
  .meta({ id: 'TrainingJobEventType' });
export const TrainingJobEventResponse = z
  .object({ id: z.uuid(), type: TrainingJobEventType, data: z.record(z.string(), z.unknown()) })
  .meta({ id: 'TrainingJobEventResponse' });
export const EventPage = paginated(TrainingJobEventResponse, 'PaginatedResponse_TrainingJobEventResponse_');
export const EventQuery = PageQuery;

export const HealthResponse = z.object({ status: z.literal('ok') });
export const QueueCheck = z.object({ success: z.boolean(), duration: z.number(), error: z.string().nullable(), workers: z.number().int() });
const PartCheck = z.object({ ok: z.boolean(), error: z.string().nullable() });
const WorkersPart = PartCheck.extend({ required: z.boolean(), live: z.number().int() });
export const SystemCheckResponse = z.object({
  api: z.boolean(), database: z.boolean(), cpu_queue: QueueCheck, gpu_queue: QueueCheck,
  /** Each part; `failed` names the parts that make the answer 503 (docs/operations.md). */
  parts: z.object({ database: PartCheck, queue: PartCheck.extend({ duration: z.number() }), inference_workers: WorkersPart, training_workers: WorkersPart }),
  failed: z.array(z.enum(['database', 'queue', 'inference_workers', 'training_workers'])),
});


export type ModelCreateBody = z.infer<typeof ModelCreate>;
export type TrajectoryGroupT = z.infer<typeof TrajectoryGroup>;
export type ExperimentalTrainingConfigT = z.infer<typeof ExperimentalTrainingConfig>;
export type CreateTrainingJobBody = z.infer<typeof CreateTrainingJob>;
export type CreateSFTTrainingJobBody = z.infer<typeof CreateSFTTrainingJob>;
