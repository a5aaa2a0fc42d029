// ART's pydantic models of the native training-runs API, rewritten as zod schemas to check Hearth's answers:
// the client models of src/art/serverless/client.py @ 9fcd3583 (openai `BaseModel`: extra keys allowed) and the
// result contracts it validates with `model_validate` (art.training `Contract`: extra="forbid", frozen), including
// their validators (execution timeline, OperationRef's learner transition). docs/art.md says which fields come
// from which version of ART's contracts.
import { z } from 'zod';

const nonNeg = z.number().int().min(0);

export const NativeTrainingRun = z.object({
  run_id: z.string(),
  run_name: z.string(),
  spec: z.record(z.string(), z.unknown()),
  status: z.enum(['open', 'closing', 'closed', 'failed']),
  next_sequence_id: z.number().int(),
  projected_learner_version: z.number().int(),
  committed_learner_version: z.number().int(),
});

const datetime = z.iso.datetime({ offset: true });

const OperationKind = z.enum(['forward', 'forward_backward', 'optim_step', 'save_state', 'load_state', 'save_weights_for_sampler']);

export const NativeTrainingOperation = z
  .object({
    operation_id: z.string(),
    run_id: z.string(),
    request_id: z.string(),
    sequence_id: z.number().int(),
    kind: OperationKind,
    status: z.enum(['admitted', 'running', 'succeeded', 'failed', 'cancelled']),
    learner_parent_version: z.number().int(),
    reserved_output_learner_version: z.number().int().nullable(),
    admitted_at: datetime,
    execution_started_at: datetime.nullable(),
    execution_ended_at: datetime.nullable(),
    cancel_requested: z.boolean(),
    latest_event_cursor: z.number().int(),
    result_available: z.boolean(),
    result: z.record(z.string(), z.unknown()).nullable().optional(),
    error: z.record(z.string(), z.unknown()).nullable(),
  })
  .refine((o) => o.execution_started_at === null || o.execution_started_at >= o.admitted_at, 'operation execution starts before admission')
  .refine((o) => o.execution_ended_at === null || o.execution_ended_at >= (o.execution_started_at ?? o.admitted_at), 'operation execution ends before it starts')
  // native_training._operation_ref → OperationRef: transitions reserve exactly parent + 1, other kinds nothing.
  .refine((o) => {
    const transition = o.kind === 'optim_step' || o.kind === 'load_state';
    return transition ? o.reserved_output_learner_version === o.learner_parent_version + 1 : o.reserved_output_learner_version === null;
  }, 'learner transitions must reserve parent + 1; other operations must not reserve');

export const NativeTrainingResult = z.object({ operation_id: z.string(), kind: OperationKind, result: z.record(z.string(), z.unknown()) });
export const NativeTrainingResultRelease = z.object({ operation_id: z.string(), request_id: z.string(), released: z.literal(true) });

const CheckpointRef = z.strictObject({ run_id: z.string().min(1), learner_version: nonNeg, checkpoint_id: z.string().min(1) });

/** PackingOutcome (contracts @ 09a10aeb) with its count rule. */
const PackingOutcome = z
  .strictObject({
    packed_sequence_length: nonNeg,
    packed_sequences: nonNeg,
    target_packed_sequences: nonNeg,
    nominal_capacity_tokens: nonNeg,
    physical_tokens: nonNeg,
    non_padding_tokens: nonNeg,
    loss_bearing_tokens: nonNeg,
    trainable_assistant_tokens: nonNeg,
    policy_token_counts: z.array(z.unknown()).nullable(),
    group_shapes: z.array(z.unknown()),
  })
  .refine((p) => p.non_padding_tokens <= p.physical_tokens, 'non_padding_tokens cannot exceed physical_tokens');

/** ForwardBackwardResult as N2's backend reads it: packing, metrics, produced_gradient, packed_input_capture. */
export const ForwardBackwardResult = z
  .strictObject({
    operation_id: z.string().min(1),
    kind: z.literal('forward_backward'),
    packing: PackingOutcome,
    loss_fn_outputs: z.array(z.unknown()),
    metrics: z.record(z.string(), z.number()),
    produced_gradient: z.boolean(),
    packed_input_capture: z.null(),
  })
  .refine((r) => r.produced_gradient === r.packing.trainable_assistant_tokens > 0, 'gradient production must match loss-bearing tokens');

export const OptimStepResult = z.strictObject({
  operation_id: z.string().min(1),
  kind: z.literal('optim_step'),
  contributing_forward_backward_operation_ids: z.array(z.string()).min(1),
  checkpoint: CheckpointRef,
  metrics: z.record(z.string(), z.number()),
});

export const SamplerWeightsResult = z.strictObject({
  operation_id: z.string().min(1),
  kind: z.literal('save_sampler'),
  checkpoint: CheckpointRef,
  lora: z.string().min(1),
  training_session_id: z.string().min(1),
  generation_id: z.string().min(1),
  lora_bytes: z.number().int().positive(),
  publication_metrics: z.record(z.string(), z.number()),
});

/** ForwardResult: a forward_backward's measurement without its gradient (same packing and metrics, no produced_gradient). */
export const ForwardResult = z.strictObject({
  operation_id: z.string().min(1),
  kind: z.literal('forward'),
  packing: PackingOutcome,
  loss_fn_outputs: z.array(z.unknown()),
  metrics: z.record(z.string(), z.number()),
  packed_input_capture: z.null(),
});

/** SaveStateResult (contracts, index id 57407172440, the version SamplerWeightsResult above follows) with its kind. */
export const SaveStateResult = z.strictObject({
  operation_id: z.string().min(1),
  kind: z.literal('save_state'),
  checkpoint: CheckpointRef,
  lora: z.string().min(1),
  training_session_id: z.string().min(1),
  generation_id: z.string().min(1),
  lora_bytes: z.number().int().positive(),
  optimizer_state: z.string().min(1),
  optimizer_bytes: z.number().int().positive(),
  metrics: z.record(z.string(), z.number()),
});

export const LoadStateResult = z.strictObject({
  operation_id: z.string().min(1),
  kind: z.literal('load_state'),
  checkpoint: CheckpointRef,
  lora: z.string().min(1),
  training_session_id: z.string().min(1),
  generation_id: z.string().min(1),
  lora_bytes: z.number().int().positive(),
  optimizer_restored: z.boolean(),
});
