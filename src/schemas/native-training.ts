// Wire shapes of the native training-runs API (`/v1/training/runs…`) as ART's N2 client sends and reads them
// (src/art/serverless/client.py and native_training.py at 9fcd3583; docs/art.md "The native training-runs API").
import { z } from 'zod';

const id = z.string().min(1).max(255);

export const RunSpec = z
  .object({
    base_model: z.string().min(1).max(512),
    dtype: z.literal('bfloat16'),
    lora_rank: z.number().int().min(1).max(1024),
    lora_target_modules: z.array(z.string().min(1).max(255)).min(1).max(256),
    // N3's LoRA seed (ART's RunSpec.seed, `int | None`); a safe integer, since beyond 2^53 a JSON number is no longer
    // the integer sent (nor the spec echoed back). native-runs/framing.ts runLoraSeed says what it seeds.
    seed: z.number().int({ error: 'seed must be null or an integer of at most 2^53 in magnitude' }).nullish(),
  })
  // N1 adds `optimizer`: kept and echoed back with the rest, since ART compares the spec it sent by value.
  .catchall(z.unknown())
  .meta({ id: 'NativeTrainingRunSpec' });

export const ResolveRunBody = z
  .object({ request_id: id, run_name: z.string().min(1).max(255), spec: RunSpec })
  .catchall(z.unknown())
  .meta({ id: 'ResolveTrainingRun' });

export const NativeRunResponse = z
  .object({
    run_id: z.string(),
    run_name: z.string(),
    spec: z.record(z.string(), z.unknown()),
    status: z.enum(['open', 'closing', 'closed', 'failed']),
    next_sequence_id: z.number().int(),
    projected_learner_version: z.number().int(),
    committed_learner_version: z.number().int(),
  })
  .meta({ id: 'NativeTrainingRun' });

export const NativeRunDeletedResponse = z
  .object({
    run_id: z.string(),
    deleted: z.literal(true),
    deleted_learner_versions: z.number().int().describe('Learner versions (checkpoints of the run\'s internal learner) removed'),
    deleted_states: z.number().int().describe('States saved with save_state that were removed'),
  })
  .meta({ id: 'NativeTrainingRunDeleted' });

export const NativeOperationResponse = z
  .object({
    operation_id: z.string(),
    run_id: z.string(),
    request_id: z.string(),
    sequence_id: z.number().int(),
    kind: z.enum(['forward', 'forward_backward', 'optim_step', 'save_state', 'load_state', 'save_weights_for_sampler']),
    status: z.enum(['admitted', 'running', 'succeeded', 'failed', 'cancelled']),
    learner_parent_version: z.number().int(),
    reserved_output_learner_version: z.number().int().nullable(),
    admitted_at: z.string(),
    execution_started_at: z.string().nullable(),
    execution_ended_at: z.string().nullable(),
    cancel_requested: z.boolean(),
    latest_event_cursor: z.number().int(),
    result_available: z.boolean(),
    result: z.record(z.string(), z.unknown()).nullable().optional(),
    error: z.record(z.string(), z.unknown()).nullable(),
  })
  .meta({ id: 'NativeTrainingOperation' });

export const NativeResultResponse = z
  .object({ operation_id: z.string(), kind: z.string(), result: z.record(z.string(), z.unknown()) })
  .meta({ id: 'NativeTrainingResult' });

export const NativeResultReleaseResponse = z
  .object({ operation_id: z.string(), request_id: z.string(), released: z.literal(true) })
  .meta({ id: 'NativeTrainingResultRelease' });

const command = { request_id: id, sequence_id: z.number().int().min(0) };

/** ART's Trajectory as `model_dump(mode="json")` writes it; messages and Choices stay plain objects. */
const Trajectory = z
  .object({ messages_and_choices: z.array(z.record(z.string(), z.unknown())), tools: z.array(z.unknown()).nullish() })
  .catchall(z.unknown());

export const ForwardBackwardBody = z
  .object({
    ...command,
    batch: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('sft'), trajectories: z.array(Trajectory).min(1), assistant_turns: z.enum(['all', 'last']).default('all') }),
      // ART's RlTrajectoryBatch: TrajectoryGroupBundle bytes as base64 text (decoded by src/protocol/trajectory-bundle.ts).
      z.object({
        kind: z.literal('rl'),
        groups: z.array(z.strictObject({ header: z.string(), records: z.array(z.string()) })).min(1),
        min_source_version: z.number().int().min(0),
        max_source_version: z.number().int().min(0),
      }),
      // ART's TokenizedTrainingBatch (newer contracts): accepted here so that it gets the 501 that names why, not a 422.
      z.object({ kind: z.literal('tokenized') }).catchall(z.unknown()),
    ]),
    loss: z.object({
      name: z.string(),
      normalize_advantages: z.boolean().default(true),
      values: z.record(z.string(), z.union([z.number(), z.boolean(), z.string(), z.null()])).default({}),
    }),
    collect_packing_shapes: z.boolean().default(false),
    return_token_logprobs: z.boolean().default(true),
    retain_packed_input: z.boolean().default(false),
  })
  .meta({ id: 'NativeForwardBackward' });

export const OptimStepBody = z
  .object({
    ...command,
    optimizer: z.object({
      learning_rate: z.number().min(0),
      beta1: z.number().min(0).lt(1).default(0.9),
      beta2: z.number().min(0).lt(1).default(0.99),
      eps: z.number().gt(0).default(1e-13),
      weight_decay: z.number().min(0).default(0.1),
      grad_clip_norm: z.number().min(0).default(0.1),
    }),
  })
  .meta({ id: 'NativeOptimStep' });

export const SaveWeightsForSamplerBody = z
  .object({
    ...command,
    checkpoint_name: z.string().min(1).max(255),
    ttl_seconds: z.number().int().min(1).nullish(),
    publication: z.object({
      mode: z.enum(['none', 'versioned_lora', 'in_flight_lora', 'external_lora', 'merged_weights']),
      model_alias: z.string().min(1).max(255).nullish(),
    }),
  })
  .meta({ id: 'NativeSaveWeightsForSampler' });

/** ForwardRequest: a forward_backward's batch and loss, measured without a gradient. */
export const ForwardBody = ForwardBackwardBody.meta({ id: 'NativeForward' });

export const SaveStateBody = z
  .object({
    ...command,
    checkpoint_name: z.string().min(1).max(255),
    ttl_seconds: z.number().int().min(1).nullish(),
    overwrite: z.boolean().default(false),
  })
  .meta({ id: 'NativeSaveState' });

export const LoadStateBody = z
  .object({ ...command, checkpoint: z.string().min(1).max(2048), restore_optimizer: z.boolean().default(false) })
  .meta({ id: 'NativeLoadState' });

/** A command of another client framing whose fields Hearth does not read (native-framed-bodies.ts): its identity only. */
export const OtherCommandBody = z.object(command).catchall(z.unknown());

export const ReleaseResultBody = z.object({ request_id: id }).meta({ id: 'NativeReleaseResult' });

export const RunParams = z.object({ run_ref: z.string().max(300) });
export const RunCommandParams = z.object({ run_id: z.string().max(128), command: z.string().max(64) });
export const OperationParams = z.object({ run_id: z.string().max(128), operation_ref: z.string().max(300) });
export const OperationResultParams = z.object({ run_id: z.string().max(128), operation_id: z.string().max(128), result_ref: z.string().max(64) });

export type ResolveRunBodyT = z.output<typeof ResolveRunBody>;
export type ForwardBackwardBodyT = z.output<typeof ForwardBackwardBody>;
export type OptimStepBodyT = z.output<typeof OptimStepBody>;
export type SaveWeightsForSamplerBodyT = z.output<typeof SaveWeightsForSamplerBody>;
export type SaveStateBodyT = z.output<typeof SaveStateBody>;
export type LoadStateBodyT = z.output<typeof LoadStateBody>;
