// The training API's request schemas (src/protocol/training.ts) as a client meets them: what they accept, the
// defaults they fill in, what they refuse, and the component names the OpenAPI document publishes.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MAX_ENTITY_LENGTH, MAX_GENERATION_ID_LENGTH, MAX_PROJECT_AND_NAME_LENGTH, MAX_STEP_DIGITS, servedName } from '../../src/domain/served-names.js';
import {
  CheckpointPage, CheckpointQuery, CreateSFTTrainingJob, EventPage, CreateTrainingJob, DeleteCheckpointsRequest, ExperimentalTrainingConfig, JobIdParams,
  LogRequest, ModelCreate, ModelIdParams, SFTTrainingConfig, Trajectory, TrajectoryGroup, TrainingJobEventType, TrainingJobStatus,
  DeleteModelResponse, ModelResponse, CheckpointResponse, TrainingJobDetail, TrainingJobResponse, DeleteCheckpointsResponse,
  TrainingJobEventResponse, HealthResponse, QueueCheck, SystemCheckResponse,
} from '../../src/protocol/training.js';

const ok = (schema: z.ZodType, value: unknown) => schema.safeParse(value).success;
const uuid = '0b9f7c1e-8d6a-4c3b-9e2f-1a2b3c4d5e6f';

describe('ModelCreate', () => {
  const base = { project: 'proj-1', name: 'my.model_2', base_model: 'OpenPipe/Qwen3-14B-Instruct' };
  it('accepts a valid body and defaults return_existing to false', () => {
    expect(ModelCreate.parse(base)).toEqual({ ...base, return_existing: false });
    expect(ModelCreate.parse({ ...base, entity: null, return_existing: true }).return_existing).toBe(true);
  });
  it('names: 1–128 characters, letters/digits/_.- starting with a letter or digit, and says so', () => {
    expect(ok(ModelCreate, { ...base, name: '' })).toBe(false);
    expect(ok(ModelCreate, { ...base, name: 'a'.repeat(128) })).toBe(true);
    expect(ok(ModelCreate, { ...base, name: 'a'.repeat(129) })).toBe(false);
    expect(ok(ModelCreate, { ...base, name: '_leading' })).toBe(false);
    expect(ok(ModelCreate, { ...base, name: 'has space' })).toBe(false);
    expect(ok(ModelCreate, { ...base, project: 'x/y' })).toBe(false);
    const err = ModelCreate.safeParse({ ...base, project: '-p' }).error!;
    expect(err.issues[0].message).toBe("project may contain letters, digits, '_', '.', '-' and must start with a letter or digit");
    expect(ModelCreate.safeParse({ ...base, name: '.n' }).error!.issues[0].message).toMatch(/^name may contain/);
  });
  it("project + name: at most 174 characters together, so every served name entity/project/name:stepN fits ART's 255-character generation_id", () => {
    expect(MAX_PROJECT_AND_NAME_LENGTH).toBe(174);
    expect(ok(ModelCreate, { ...base, project: 'p'.repeat(46), name: 'n'.repeat(128) })).toBe(true);
    const over = ModelCreate.safeParse({ ...base, project: 'p'.repeat(47), name: 'n'.repeat(128) });
    expect(over.error!.issues[0]).toMatchObject({ path: ['name'], message: expect.stringMatching(/at most 174 characters.*255 characters of ART's generation_id/) });
    // The longest name Hearth accepts, with the longest entity and a 10-digit step, is exactly 255 characters.
    const longest = servedName('e'.repeat(MAX_ENTITY_LENGTH), 'p'.repeat(46), 'n'.repeat(128), 10 ** (MAX_STEP_DIGITS - 1) * 9);
    expect(longest.length).toBe(MAX_GENERATION_ID_LENGTH);
  });
  it('base_model: 1–256 characters; entity optional; return_existing must be a boolean', () => {
    expect(ok(ModelCreate, { ...base, base_model: '' })).toBe(false);
    expect(ok(ModelCreate, { ...base, base_model: 'b'.repeat(256) })).toBe(true);
    expect(ok(ModelCreate, { ...base, base_model: 'b'.repeat(257) })).toBe(false);
    expect(ok(ModelCreate, { ...base, entity: 'team' })).toBe(true);
    expect(ok(ModelCreate, { ...base, entity: 5 })).toBe(false);
    expect(ok(ModelCreate, { ...base, return_existing: 'yes' })).toBe(false);
  });
});

describe('ids, checkpoints and pages', () => {
  it('path ids are at most 128 characters', () => {
    expect(ok(ModelIdParams, { model_id: 'm'.repeat(128) })).toBe(true);
    expect(ok(ModelIdParams, { model_id: 'm'.repeat(129) })).toBe(false);
    expect(ok(JobIdParams, { training_job_id: 'j'.repeat(128) })).toBe(true);
    expect(ok(JobIdParams, { training_job_id: 'j'.repeat(129) })).toBe(false);
  });
  it('checkpoint deletion takes integer steps, at most 100,000', () => {
    expect(ok(DeleteCheckpointsRequest, { steps: [1, 2, 3] })).toBe(true);
    expect(ok(DeleteCheckpointsRequest, { steps: [1.5] })).toBe(false);
    expect(ok(DeleteCheckpointsRequest, { steps: Array.from({ length: 100_000 }, (_, i) => i) })).toBe(true);
    expect(ok(DeleteCheckpointsRequest, { steps: Array.from({ length: 100_001 }, (_, i) => i) })).toBe(false);
  });
  it('checkpoint listing orders ascending by default, asc or desc only', () => {
    expect(CheckpointQuery.parse({}).order).toBe('asc');
    expect(CheckpointQuery.parse({ order: 'desc' }).order).toBe('desc');
    expect(CheckpointQuery.parse({ order: 'asc' }).order).toBe('asc');
    expect(ok(CheckpointQuery, { order: 'newest' })).toBe(false);
  });
});

describe('trajectories', () => {
  it('a bare trajectory gets every default ART relies on', () => {
    expect(Trajectory.parse({})).toEqual({ messages_and_choices: [], additional_histories: [], reward: 0, metrics: {}, metadata: {}, logs: [] });
  });
  it('keeps unknown keys, types what it knows', () => {
    const t = Trajectory.parse({ reward: 1.5, extra: 'kept', metrics: { ok: true, score: 2 }, logs: ['a'], initial_policy_version: 3 });
    expect(t).toMatchObject({ reward: 1.5, extra: 'kept', metrics: { ok: true, score: 2 }, logs: ['a'], initial_policy_version: 3 });
    expect(ok(Trajectory, { reward: 'high' })).toBe(false);
    expect(ok(Trajectory, { metrics: { x: 'text' } })).toBe(false);
    expect(ok(Trajectory, { initial_policy_version: 1.5 })).toBe(false);
    expect(ok(Trajectory, { final_policy_version: 2.5 })).toBe(false);
    expect(ok(Trajectory, { messages_and_choices: ['not an object'] })).toBe(false);
    expect(ok(Trajectory, { tools: [{ type: 'function' }] })).toBe(true);
    expect(ok(Trajectory, { tools: 'none' })).toBe(false);
    expect(ok(Trajectory, { logs: [1] })).toBe(false);
    expect(ok(Trajectory, { metadata: [] })).toBe(false);
    expect(ok(Trajectory, { auto_metrics: { a: 'b' } })).toBe(false);
  });
  it('additional histories need their messages; their tools are optional', () => {
    expect(Trajectory.parse({ additional_histories: [{ messages_and_choices: [{ role: 'user', content: 'x' }], note: 1 }] }).additional_histories[0])
      .toEqual({ messages_and_choices: [{ role: 'user', content: 'x' }], note: 1 });
    expect(ok(Trajectory, { additional_histories: [{}] })).toBe(false);
    expect(ok(Trajectory, { additional_histories: [{ messages_and_choices: [], tools: 'x' }] })).toBe(false);
  });
  it('a group needs its trajectories and defaults the rest; exceptions need type and message', () => {
    expect(TrajectoryGroup.parse({ trajectories: [] })).toEqual({ trajectories: [], exceptions: [], metadata: {}, metrics: {}, logs: [] });
    expect(ok(TrajectoryGroup, {})).toBe(false);
    expect(ok(TrajectoryGroup, { trajectories: [], exceptions: [{ type: 'ValueError', message: 'bad' }] })).toBe(true);
    expect(ok(TrajectoryGroup, { trajectories: [], exceptions: [{ type: 'ValueError', message: 'bad', traceback: 'tb' }] })).toBe(true);
    expect(ok(TrajectoryGroup, { trajectories: [], exceptions: [{ type: 'ValueError' }] })).toBe(false);
    expect(ok(TrajectoryGroup, { trajectories: [], exceptions: [{ message: 'm' }] })).toBe(false);
    expect(ok(TrajectoryGroup, { trajectories: [], exceptions: [{ type: 'E', message: 'm', traceback: 3 }] })).toBe(false);
    expect(ok(TrajectoryGroup, { trajectories: [], metrics: { a: 'b' } })).toBe(false);
    expect(ok(TrajectoryGroup, { trajectories: [], logs: [2] })).toBe(false);
    expect(ok(TrajectoryGroup, { trajectories: [], metadata: 'm' })).toBe(false);
  });
  it('log requests name a split of 1–64 characters', () => {
    expect(ok(LogRequest, { split: 'val', trajectory_groups: [] })).toBe(true);
    expect(ok(LogRequest, { split: '', trajectory_groups: [] })).toBe(false);
    expect(ok(LogRequest, { split: 's'.repeat(64), trajectory_groups: [] })).toBe(true);
    expect(ok(LogRequest, { split: 's'.repeat(65), trajectory_groups: [] })).toBe(false);
    expect(ok(LogRequest, { split: 'val' })).toBe(false);
    expect(ok(LogRequest, { split: 'val', trajectory_groups: [], model_id: 7 })).toBe(false);
  });
});

describe('RL training jobs', () => {
  const group = { trajectories: [{ reward: 1 }] };
  it('need a model id of at most 128 characters and at least one group', () => {
    expect(ok(CreateTrainingJob, { model_id: 'm', trajectory_groups: [group] })).toBe(true);
    expect(ok(CreateTrainingJob, { model_id: 'm', trajectory_groups: [] })).toBe(false);
    expect(ok(CreateTrainingJob, { model_id: 'm'.repeat(129), trajectory_groups: [group] })).toBe(false);
    expect(ok(CreateTrainingJob, { model_id: 'm', trajectory_groups: [group], experimental_config: null })).toBe(true);
  });
  const cfg = (c: Record<string, unknown>) => ok(ExperimentalTrainingConfig, c);
  it('experimental_config: each option in its range, unknown keys kept for the trainer to refuse', () => {
    expect(ExperimentalTrainingConfig.parse({ future_option: 1 })).toEqual({ future_option: 1 });
    expect(cfg({ learning_rate: 1 })).toBe(true);
    expect(cfg({ learning_rate: 0 })).toBe(false);
    expect(cfg({ learning_rate: 1.01 })).toBe(false);
    expect(cfg({ loss_fn: 'cispo' }) && cfg({ loss_fn: 'ppo' })).toBe(true);
    expect(cfg({ loss_fn: 'grpo' })).toBe(false);
    expect(cfg({ epsilon: 0 }) && cfg({ epsilon_high: 0 })).toBe(true);
    expect(cfg({ epsilon: -0.1 })).toBe(false);
    expect(cfg({ epsilon_high: -0.1 })).toBe(false);
    expect(cfg({ advantage_balance: -1 }) && cfg({ advantage_balance: 1 })).toBe(true);
    expect(cfg({ advantage_balance: -1.01 })).toBe(false);
    expect(cfg({ advantage_balance: 1.01 })).toBe(false);
    for (const level of ['token', 'sequence', 'average', 'geometric_average']) expect(cfg({ importance_sampling_level: level })).toBe(true);
    expect(cfg({ importance_sampling_level: 'batch' })).toBe(false);
    expect(cfg({ logprob_calculation_chunk_size: 1 }) && cfg({ packed_sequence_length: 1 })).toBe(true);
    expect(cfg({ logprob_calculation_chunk_size: 0 })).toBe(false);
    expect(cfg({ logprob_calculation_chunk_size: 2.5 })).toBe(false);
    expect(cfg({ packed_sequence_length: 0 })).toBe(false);
    expect(cfg({ packed_sequence_length: 8.5 })).toBe(false);
    expect(cfg({ kl_penalty_coef: 0 })).toBe(true);
    expect(cfg({ kl_penalty_coef: -1 })).toBe(false);
    expect(cfg({ kl_penalty_source: 'current_learner' }) && cfg({ kl_penalty_source: 'sample' })).toBe(true);
    expect(cfg({ kl_penalty_source: 'reference' })).toBe(false);
    expect(cfg({ kl_penalty_reference_step: 0 })).toBe(true);
    expect(cfg({ kl_penalty_reference_step: -1 })).toBe(false);
    expect(cfg({ kl_penalty_reference_step: 1.5 })).toBe(false);
    expect(cfg({ kl_penalty_step_lag: 1 })).toBe(true);
    expect(cfg({ kl_penalty_step_lag: 0 })).toBe(false);
    expect(cfg({ kl_penalty_step_lag: 1.5 })).toBe(false);
    expect(cfg({ kl_ref_adapter_path: '/a' })).toBe(true);
    expect(cfg({ kl_ref_adapter_path: 1 })).toBe(false);
    for (const key of ['ppo', 'scale_rewards', 'normalize_advantages', 'mask_prob_ratio', 'precalculate_logprobs', 'allow_training_without_logprobs', 'plot_tensors', 'scale_learning_rate_by_reward_std_dev']) {
      expect(cfg({ [key]: true }), key).toBe(true);
      expect(cfg({ [key]: null }), key).toBe(true);
      expect(cfg({ [key]: 'true' }), key).toBe(false);
    }
    for (const key of ['max_negative_advantage_importance_sampling_weight', 'kimi_k2_tau', 'truncated_importance_sampling', 'num_trajectories_learning_rate_multiplier_power']) {
      expect(cfg({ [key]: -2.5 }), key).toBe(true);
      expect(cfg({ [key]: 'x' }), key).toBe(false);
    }
  });
});

describe('SFT training jobs', () => {
  const base = { model_id: 'm', training_data_url: 'wandb-artifact:///e/p/data:v0' };
  it('need a model id and a data URL of 1–2048 characters', () => {
    expect(ok(CreateSFTTrainingJob, base)).toBe(true);
    expect(ok(CreateSFTTrainingJob, { ...base, training_data_url: '' })).toBe(false);
    expect(ok(CreateSFTTrainingJob, { ...base, training_data_url: 'u'.repeat(2048) })).toBe(true);
    expect(ok(CreateSFTTrainingJob, { ...base, training_data_url: 'u'.repeat(2049) })).toBe(false);
    expect(ok(CreateSFTTrainingJob, { ...base, model_id: 'm'.repeat(129) })).toBe(false);
    expect(ok(CreateSFTTrainingJob, { ...base, experimental_config: { anything: 1 } })).toBe(true);
    expect(ok(CreateSFTTrainingJob, { ...base, experimental_config: [] })).toBe(false);
  });
  const sft = (c: Record<string, unknown>) => ok(SFTTrainingConfig, c);
  it('batch size 1–4096 or "auto"; learning rate in (0, 1] or a schedule of values in [0, 1]', () => {
    expect(sft({ batch_size: 1 }) && sft({ batch_size: 4096 }) && sft({ batch_size: 'auto' })).toBe(true);
    expect(sft({ batch_size: 0 })).toBe(false);
    expect(sft({ batch_size: 4097 })).toBe(false);
    expect(sft({ batch_size: 2.5 })).toBe(false);
    expect(sft({ batch_size: 'max' })).toBe(false);
    expect(sft({ learning_rate: 1 }) && sft({ learning_rate: [0, 1] })).toBe(true);
    expect(sft({ learning_rate: 0 })).toBe(false);
    expect(sft({ learning_rate: 1.5 })).toBe(false);
    expect(sft({ learning_rate: [] })).toBe(false);
    expect(sft({ learning_rate: [-0.1] })).toBe(false);
    expect(sft({ learning_rate: [1.1] })).toBe(false);
    expect(sft({ metric_logging: { every: 1 } })).toBe(true);
    expect(sft({ metric_logging: 'all' })).toBe(false);
  });
});

describe('responses and enums as the OpenAPI document names them', () => {
  it('job statuses and event types are exactly the contract\'s', () => {
    expect(TrainingJobStatus.options).toEqual(['queued', 'running', 'succeeded', 'failed', 'cancelled']);
    expect(TrainingJobEventType.options).toEqual(['training_started', 'gradient_step', 'training_ended', 'training_failed']);
  });
  it('component names', () => {
    const id = (s: z.ZodType) => (s.meta() as { id?: string } | undefined)?.id;
    expect([ModelCreate, ModelResponse, DeleteModelResponse, CheckpointResponse, DeleteCheckpointsRequest, DeleteCheckpointsResponse, Trajectory, TrajectoryGroup,
      LogRequest, ExperimentalTrainingConfig, CreateTrainingJob, SFTTrainingConfig, CreateSFTTrainingJob, TrainingJobResponse, TrainingJobDetail,
      TrainingJobEventType, TrainingJobEventResponse, CheckpointPage, EventPage].map(id)).toEqual(['ModelCreate', 'ModelResponse', 'DeleteModelResponse', 'CheckpointResponse',
      'DeleteCheckpointsRequest', 'DeleteCheckpointsResponse', 'Trajectory', 'TrajectoryGroup', 'LogRequest', 'ExperimentalTrainingConfig', 'CreateTrainingJob',
      'SFTTrainingConfig', 'CreateSFTTrainingJob', 'TrainingJobResponse', 'TrainingJobDetail', 'TrainingJobEventType', 'TrainingJobEventResponse',
      'PaginatedResponse_CheckpointResponse_', 'PaginatedResponse_TrainingJobEventResponse_']);
  });
  it('response shapes hold what the service sends and refuse what it must not', () => {
    expect(ok(ModelResponse, { id: uuid, entity: 'e', project: 'p', name: 'n', base_model: 'b', run_id: null })).toBe(true);
    expect(ok(ModelResponse, { id: 'not-a-uuid', entity: 'e', project: 'p', name: 'n', base_model: 'b', run_id: null })).toBe(false);
    expect(ok(DeleteModelResponse, { model_id: uuid, deleted_checkpoints: 2, deleted_run: true })).toBe(true);
    expect(ok(DeleteModelResponse, { model_id: uuid, deleted_checkpoints: 2.5, deleted_run: true })).toBe(false);
    expect(ok(CheckpointResponse, { id: uuid, step: 3, metrics: { loss: 1 } })).toBe(true);
    expect(ok(CheckpointResponse, { id: uuid, step: 3.5, metrics: {} })).toBe(false);
    expect(ok(DeleteCheckpointsResponse, { deleted_count: 1, not_found_steps: [4] })).toBe(true);
    expect(ok(DeleteCheckpointsResponse, { deleted_count: 1.5, not_found_steps: [] })).toBe(false);
    expect(ok(TrainingJobEventResponse, { id: uuid, type: 'gradient_step', data: { loss: 1 } })).toBe(true);
    expect(ok(TrainingJobEventResponse, { id: uuid, type: 'step', data: {} })).toBe(false);
    const detail = { id: uuid, status: 'running', kind: 'rl', model_id: 'm', created_at: 't', started_at: null, finished_at: null, training_start: null, training_end: null, error_message: null };
    expect(ok(TrainingJobDetail, detail)).toBe(true);
    expect(ok(TrainingJobDetail, { ...detail, kind: 'sft' })).toBe(true);
    expect(ok(TrainingJobDetail, { ...detail, kind: 'dpo' })).toBe(false);
    expect(ok(TrainingJobResponse, { id: uuid })).toBe(true);
    expect(ok(TrainingJobResponse, {})).toBe(false);
    expect(ok(HealthResponse, { status: 'ok' })).toBe(true);
    expect(ok(HealthResponse, { status: 'fine' })).toBe(false);
    const check = { success: true, duration: 0.1, error: null, workers: 1 };
    const part = { ok: true, error: null };
    const parts = { database: part, queue: { ...part, duration: 0.1 }, inference_workers: { ...part, required: true, live: 1 }, training_workers: { ...part, required: false, live: 0 } };
    expect(ok(SystemCheckResponse, { api: true, database: true, cpu_queue: check, gpu_queue: check, parts, failed: [] })).toBe(true);
    expect(ok(SystemCheckResponse, { api: true, database: true, cpu_queue: check, gpu_queue: check, parts, failed: ['redis'] })).toBe(false);
    // Every part can be named as failed, and every part must say how it is (workers also whether required, how many live).
    const answer = { api: true, database: true, cpu_queue: check, gpu_queue: check, parts };
    for (const name of ['database', 'queue', 'inference_workers', 'training_workers']) expect(ok(SystemCheckResponse, { ...answer, failed: [name] })).toBe(true);
    expect(ok(SystemCheckResponse, { ...answer, failed: [''] })).toBe(false);
    expect(ok(SystemCheckResponse, { ...answer, parts: { ...parts, database: {} }, failed: [] })).toBe(false);
    expect(ok(SystemCheckResponse, { ...answer, parts: { ...parts, queue: part }, failed: [] })).toBe(false);
    expect(ok(SystemCheckResponse, { ...answer, parts: { ...parts, inference_workers: part }, failed: [] })).toBe(false);
    expect(ok(SystemCheckResponse, { ...answer, parts: { ...parts, training_workers: undefined }, failed: [] })).toBe(false);
    expect(ok(SystemCheckResponse, { ...answer, parts: {}, failed: [] })).toBe(false);
    expect(ok(QueueCheck, { ...check, workers: 1.5 })).toBe(false);
    expect(ok(SystemCheckResponse, { api: true, database: true, cpu_queue: check })).toBe(false);
    expect(ok(SystemCheckResponse, {})).toBe(false);
  });
});
