// ART's pydantic models of the native training-runs API in its N1 and N3 framings, rewritten as zod schemas to
// check Hearth's answers (docs/art.md "Framings"):
// - N1: src/art/serverless/client.py and native_training.py @ 235af098 (openai `BaseModel`: extra keys allowed),
//   whose RemoteTrainingOperation.result() validates `operation.result` against art.training's contracts — the
//   stored version with N1's TrainingRunSpec is contracts.py @ 76eaaea1 (`Contract`: extra="forbid");
// - N3: src/art/serverless/client.py @ 44cf4bbe ("frozen public wire", `_PublicWireModel`: extra="forbid"), whose
//   `_NativePublicWireAdapter` turns the public operation into N2's NativeTrainingOperation and the public result
//   summary into art.training's contracts @ 44cf4bbe; `n3ClientOperation` / `n3ClientResult` replay that adapter.
import { z } from 'zod';
import { NativeTrainingOperation } from './art-native-models.js';

const nonNeg = z.number().int().min(0);
const finiteMetrics = z.record(z.string(), z.number().refine(Number.isFinite, 'FiniteFloat')).default({});
const datetime = z.iso.datetime({ offset: true });

// ---- N1 ----

export const N1NativeTrainingRun = z.object({
  run_id: z.string(), run_name: z.string(), spec: z.record(z.string(), z.unknown()), status: z.enum(['open', 'closing', 'closed', 'failed']),
  next_sequence_id: z.number().int(), projected_learner_version: z.number().int(), committed_learner_version: z.number().int(),
});

export const N1NativeTrainingOperation = z.object({
  operation_id: z.string(),
  run_id: z.string(),
  request_id: z.string(),
  sequence_id: z.number().int(),
  kind: z.enum(['forward', 'forward_backward', 'optim_step', 'save_state', 'load_state', 'save_weights']),
  status: z.enum(['admitted', 'packing', 'ready', 'running', 'succeeded', 'failed', 'cancelled']),
  learner_parent_version: z.number().int(),
  reserved_output_learner_version: z.number().int().nullable(),
  contributing_operation_ids: z.array(z.string()),
  cancel_requested: z.boolean(),
  event_cursor: z.number().int(),
  result: z.record(z.string(), z.unknown()).nullable(),
  error: z.record(z.string(), z.unknown()).nullable(),
});

/** native_training._operation_ref (N1 maps kind save_weights → save_sampler) → OperationRef @ 76eaaea1. */
export const N1OperationRef = z
  .strictObject({
    run_id: z.string().min(1).max(255), operation_id: z.string().min(1).max(64), sequence_id: nonNeg, learner_parent_version: nonNeg,
    reserved_output_learner_version: z.number().int().min(1).nullable(),
    kind: z.enum(['forward', 'forward_backward', 'optim_step', 'save_sampler', 'save_state', 'load_state']),
  })
  .refine((r) => ['optim_step', 'load_state'].includes(r.kind) === (r.reserved_output_learner_version !== null), 'learner transitions must reserve an output version')
  .refine((r) => r.reserved_output_learner_version === null || r.reserved_output_learner_version === r.learner_parent_version + 1, 'learner transitions must advance exactly one version');

export const n1OperationRef = (o: z.output<typeof N1NativeTrainingOperation>) =>
  N1OperationRef.parse({
    run_id: o.run_id, operation_id: o.operation_id, sequence_id: o.sequence_id, learner_parent_version: o.learner_parent_version,
    reserved_output_learner_version: o.reserved_output_learner_version, kind: o.kind === 'save_weights' ? 'save_sampler' : o.kind,
  });

const CheckpointRef = z.strictObject({ run_id: z.string().min(1).max(255), learner_version: nonNeg, checkpoint_id: z.string().min(1).max(2048) });

const PackingOutcome76 = z
  .strictObject({
    packed_sequence_length: z.number().int().min(1), packed_sequences: nonNeg, target_packed_sequences: z.number().int().min(1),
    physical_tokens: nonNeg, non_padding_tokens: nonNeg, loss_bearing_tokens: nonNeg, trainable_assistant_tokens: nonNeg,
    group_shapes: z.array(z.unknown()).default([]),
  })
  .refine((p) => p.non_padding_tokens <= p.physical_tokens, 'non_padding_tokens cannot exceed physical_tokens')
  .refine((p) => (p.packed_sequences === 0) === (p.physical_tokens === 0), 'zero packed sequences and physical tokens must agree')
  .refine((p) => p.loss_bearing_tokens <= p.non_padding_tokens, 'loss_bearing_tokens cannot exceed non_padding_tokens');

const result76 = { operation_id: z.string().min(1).max(64), metrics: finiteMetrics };

export const N1ForwardBackwardResult = z.strictObject({
  ...result76, kind: z.literal('forward_backward').default('forward_backward'), packing: PackingOutcome76, token_logprobs: z.array(z.unknown()).default([]),
});
export const N1OptimStepResult = z.strictObject({
  ...result76, kind: z.literal('optim_step').default('optim_step'), contributing_forward_backward_operation_ids: z.array(z.string()).min(1), checkpoint: CheckpointRef,
});
export const N1SamplerWeightsResult = z.strictObject({
  ...result76, kind: z.literal('save_sampler').default('save_sampler'), checkpoint: CheckpointRef, lora: z.string().min(1).max(2048),
});

// ---- N3 ----

/**
 * art.training's `TokenLogprobs` (extra forbidden): `shape` [T] or [T, K ≥ 1], `data` the float32 little-endian values
 * as pydantic's base64 bytes, exactly 4 bytes per value.
 */
export const TokenLogprobs44 = z
  .strictObject({ shape: z.array(z.number().int().min(0)).min(1).max(2), data: z.string() })
  .refine((t) => t.shape.length === 1 || t.shape[1] >= 1, 'token logprob candidate width must be positive')
  .refine((t) => Buffer.from(t.data, 'base64').length === t.shape.reduce((a, n) => a * n, 1) * 4, 'token logprob buffer size differs from its shape');

/** A TokenLogprobs' values (ART's `to_list`). */
export function tokenLogprobValues(t: z.output<typeof TokenLogprobs44>): number[] {
  const bytes = Buffer.from(t.data, 'base64');
  return Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4));
}

export const N3NativeTrainingRun = N1NativeTrainingRun.extend({ run_name: z.string().nullable().optional() });

const N3Kind = z.enum(['forward', 'forward_backward', 'optim_step', 'save_state', 'load_state', 'save_weights_for_sampler']);

const PublicTrainingResult = z.strictObject({
  operation_id: z.string(),
  kind: N3Kind,
  metrics: finiteMetrics.optional(),
  packing: z
    .strictObject({
      packed_sequence_length: z.number().int().min(1), packed_sequences: nonNeg, target_packed_sequences: z.number().int().min(1),
      logical_tokens: nonNeg, physical_tokens: nonNeg, packed_capacity_tokens: nonNeg, padding_tokens: nonNeg,
    })
    .nullable()
    .optional(),
  training: z.unknown().optional(),
  loss: z.unknown().optional(),
  produced_gradient: z.boolean().nullable().optional(),
  token_logprobs: z.array(TokenLogprobs44).optional(),
  group_shapes: z.array(z.unknown()).optional(),
  packed_input: z.unknown().optional(),
  contributing_operation_ids: z.array(z.string()).nullable().optional(),
  checkpoint: z.strictObject({ checkpoint_id: z.string(), learner_version: nonNeg }).nullable().optional(),
  learner_version: nonNeg.nullable().optional(),
  target: z.enum(['active', 'saved_generation']).nullable().optional(),
  model_alias: z.string().nullable().optional(),
  generation_id: z.string().nullable().optional(),
  archive: z.unknown().optional(),
  optimizer_restored: z.boolean().nullable().optional(),
});

export const N3PublicTrainingOperation = z.strictObject({
  operation_id: z.string(),
  run_id: z.string(),
  request_id: z.string(),
  sequence_id: z.number().int(),
  kind: N3Kind,
  status: z.enum(['admitted', 'running', 'succeeded', 'failed', 'cancelled']),
  learner_parent_version: z.number().int(),
  reserved_output_learner_version: z.number().int().nullable(),
  admitted_at: datetime,
  started_at: datetime.nullable(),
  ended_at: datetime.nullable(),
  cancel_requested: z.boolean(),
  latest_event_cursor: z.number().int(),
  result_summary: PublicTrainingResult.nullable(),
  result_ref: z
    .strictObject({ result_id: z.string(), media_type: z.enum(['application/json', 'application/vnd.coreweave.training-result+msgpack; version=1']), size_bytes: z.number().int().min(1), expires_at: datetime })
    .nullable(),
  error: z.strictObject({ code: z.string() }).nullable(),
});

// art.training contracts @ 44cf4bbe, as the adapter validates the translated summaries.
const PackingOutcome44 = z
  .strictObject({
    packed_sequence_length: z.number().int().min(1), packed_sequences: nonNeg, target_packed_sequences: z.number().int().min(1),
    logical_tokens: nonNeg, physical_tokens: nonNeg, packed_capacity_tokens: nonNeg, padding_tokens: nonNeg, group_shapes: z.array(z.unknown()).default([]),
  })
  .refine((p) => p.packed_capacity_tokens === p.packed_sequences * p.packed_sequence_length, 'packed capacity does not match shape')
  .refine((p) => p.physical_tokens <= p.logical_tokens, 'physical tokens cannot exceed logical tokens')
  .refine((p) => p.physical_tokens <= p.packed_capacity_tokens, 'physical tokens cannot exceed packed capacity')
  .refine((p) => p.padding_tokens === p.packed_capacity_tokens - p.physical_tokens, 'padding tokens must equal capacity minus physical tokens')
  .refine((p) => (p.packed_sequences === 0) === (p.logical_tokens === 0), 'zero packed sequences and logical tokens must agree');

const result44 = { operation_id: z.string().min(1).max(64), metrics: finiteMetrics, usage: z.record(z.string(), z.unknown()).optional() };

export const N3ForwardBackwardResult = z
  .strictObject({
    ...result44,
    kind: z.literal('forward_backward').default('forward_backward'),
    packing: PackingOutcome44,
    packed_input_capture: z.null().default(null),
    token_logprobs: z.array(TokenLogprobs44).default([]),
    training: z.strictObject({ accepted_trainable_tokens: nonNeg, policy_token_counts: z.array(z.unknown()).nullable() }),
    loss: z.strictObject({
      contract_id: z.enum(['cross_entropy_v1', 'importance_sampling_v1', 'cispo_v1', 'dpo_v1']),
      value: z.number().refine(Number.isFinite, 'FiniteFloat'),
      reduction: z.literal('mean_active_token').default('mean_active_token'),
    }),
    produced_gradient: z.boolean().default(true),
  })
  .refine((r) => r.produced_gradient === r.training.accepted_trainable_tokens > 0, 'gradient production must match loss-bearing tokens');

export const N3OptimStepResult = z.strictObject({
  ...result44, kind: z.literal('optim_step').default('optim_step'), contributing_forward_backward_operation_ids: z.array(z.string()).min(1), checkpoint: CheckpointRef,
});

/** client.py's RemoteSamplerPublicationResult (OperationResult @ 44cf4bbe plus the public sampler identity). */
export const N3SamplerPublicationResult = z.strictObject({
  ...result44, kind: z.literal('save_sampler').default('save_sampler'), checkpoint: CheckpointRef, target: z.enum(['active', 'saved_generation']),
  model_alias: z.string().min(1).max(255), generation_id: z.string().min(1).max(255),
});

type Public = z.output<typeof N3PublicTrainingOperation>;
type PublicResult = NonNullable<Public['result_summary']>;

/** `_NativePublicWireAdapter._result_payload`: the summary (as sent: exclude_unset) → art.training's result contract. */
export function n3ClientResult(runId: string, sent: Record<string, unknown>): Record<string, unknown> {
  const summary = PublicTrainingResult.parse(sent) as PublicResult;
  const payload: Record<string, unknown> = structuredClone(sent);
  const kind = summary.kind;
  const checkpoint = () => {
    if (!payload.checkpoint || typeof payload.checkpoint !== 'object') throw new Error('public checkpoint result must be an object');
    return { run_id: runId, ...(payload.checkpoint as object) };
  };
  if (kind === 'forward' || kind === 'forward_backward') {
    const packing = payload.packing as Record<string, unknown> | undefined;
    if (!packing || typeof packing !== 'object') throw new Error('public forward result has no packing object');
    packing.group_shapes = payload.group_shapes ?? [];
    delete payload.group_shapes;
    if (payload.packed_input != null) throw new Error('Hearth sends no packed input');
    delete payload.packed_input;
    if (kind === 'forward_backward') return N3ForwardBackwardResult.parse(payload);
    return payload;
  }
  if (kind === 'optim_step') {
    payload.contributing_forward_backward_operation_ids = payload.contributing_operation_ids;
    delete payload.contributing_operation_ids;
    const lv = payload.learner_version;
    delete payload.learner_version;
    payload.checkpoint = checkpoint();
    if (lv !== (payload.checkpoint as { learner_version: number }).learner_version) throw new Error('public optimizer learner version changed');
    return N3OptimStepResult.parse(payload);
  }
  if (kind === 'save_weights_for_sampler') {
    const lv = payload.learner_version;
    delete payload.learner_version;
    payload.kind = 'save_sampler';
    payload.checkpoint = checkpoint();
    if (lv !== (payload.checkpoint as { learner_version: number }).learner_version) throw new Error('public sampler learner version changed');
    return N3SamplerPublicationResult.parse(payload);
  }
  throw new Error(`unsupported public training result ${kind}`);
}

/** `_NativePublicWireAdapter.operation`: the public operation → N2's NativeTrainingOperation (validated, timeline included). */
export function n3ClientOperation(sent: unknown) {
  const pub = N3PublicTrainingOperation.parse(sent);
  let result: Record<string, unknown> | null = null;
  if (pub.result_summary !== null) {
    if (pub.result_summary.kind !== pub.kind) throw new Error('public operation result kind changed');
    result = n3ClientResult(pub.run_id, (sent as { result_summary: Record<string, unknown> }).result_summary);
  }
  return NativeTrainingOperation.parse({
    operation_id: pub.operation_id, run_id: pub.run_id, request_id: pub.request_id, sequence_id: pub.sequence_id, kind: pub.kind,
    status: pub.status, learner_parent_version: pub.learner_parent_version, reserved_output_learner_version: pub.reserved_output_learner_version,
    admitted_at: pub.admitted_at, execution_started_at: pub.started_at, execution_ended_at: pub.ended_at, cancel_requested: pub.cancel_requested,
    latest_event_cursor: pub.latest_event_cursor, result_available: pub.result_summary !== null || pub.result_ref !== null, result,
    error: pub.error,
  });
}

/**
 * What N3's train_sft sends for one tokenized conversation (art/preprocessing/token_matrix.py @ 44cf4bbe,
 * token_matrix_batch_from_sft): `labels` is −100 except on trained tokens; the targets are the labels shifted by
 * one, the weights 1 where a target is trained, written as spans when that is shorter (`_coefficient_row`).
 */
export function artSftTokenMatrix(matrixId: string, tokens: number[], labels: number[]) {
  const targets = [...labels.slice(1), -100];
  const weights = targets.map((t) => (t !== -100 ? 1 : 0));
  const spans: { start: number; end: number; value: number[] }[] = [];
  for (let start = 0; start < weights.length; ) {
    let end = start + 1;
    while (end < weights.length && weights[end] === weights[start]) end++;
    if (weights[start] !== 0) spans.push({ start, end, value: [weights[start]] });
    start = end;
  }
  const values = spans.length * 3 + 1 < weights.length ? { encoding: 'spans', default: [0], spans } : { encoding: 'dense', data: weights };
  return {
    kind: 'matrix', matrix_id: matrixId, packing_affinity_id: null,
    rows: [
      { name: 'token_ids', dtype: 'int64', shape: [tokens.length], values: { encoding: 'dense', data: tokens } },
      { name: 'target_token_ids', dtype: 'int64', shape: [tokens.length, 1], values: { encoding: 'dense', data: targets.map((t) => (t === -100 ? 0 : t)) } },
      { name: 'loss_weights', dtype: 'float32', shape: [tokens.length, 1], values },
    ],
  };
}

/** ART's `_coefficient_row` (art/preprocessing/token_matrix.py @ 44cf4bbe): spans over nonzero runs when shorter, else dense. */
function artCoefficientRow(name: string, values: number[]) {
  const spans: { start: number; end: number; value: number[] }[] = [];
  for (let start = 0; start < values.length; ) {
    let end = start + 1;
    while (end < values.length && values[end] === values[start]) end++;
    if (values[start] !== 0) spans.push({ start, end, value: [values[start]] });
    start = end;
  }
  const encoded = spans.length * 3 + 1 < values.length ? { encoding: 'spans', default: [0], spans } : { encoding: 'dense', data: values };
  return { name, dtype: 'float32', shape: [values.length, 1], values: encoded };
}

/**
 * One RL matrix as ART's token_matrix_batch_from_art_rollouts lowers a tokenized rollout (@ 44cf4bbe): position t is
 * the target tokens[t + 1], active where assistantMask[t + 1]; advantage and weight on active positions, behaviour
 * logprob logprobs[t + 1]; policy_version spans (default -1) when versions are given.
 */
export function artRlTokenMatrix(
  matrixId: string, tokens: number[], assistantMask: number[], logprobs: number[], advantage: number,
  opts: { weight?: number; versions?: number[] } = {},
) {
  const active = [...assistantMask.slice(1), 0].map(Boolean);
  const rows: unknown[] = [
    { name: 'token_ids', dtype: 'int64', shape: [tokens.length], values: { encoding: 'dense', data: tokens } },
    { name: 'target_token_ids', dtype: 'int64', shape: [tokens.length, 1], values: { encoding: 'dense', data: [...tokens.slice(1), 0] } },
    artCoefficientRow('loss_weights', active.map((a) => (a ? (opts.weight ?? 1) : 0))),
    artCoefficientRow('advantages', active.map((a) => (a ? advantage : 0))),
    artCoefficientRow('behavior_logprobs', active.map((a, t) => (a ? logprobs[t + 1] : 0))),
  ];
  if (opts.versions) {
    const shifted = [...opts.versions.slice(1), -1];
    const spans: { start: number; end: number; value: number }[] = [];
    for (let start = 0; start < shifted.length; ) {
      let end = start + 1;
      while (end < shifted.length && shifted[end] === shifted[start]) end++;
      if (shifted[start] !== -1) spans.push({ start, end, value: shifted[start] });
      start = end;
    }
    rows.push({ name: 'policy_version', dtype: 'int64', shape: [tokens.length], values: { encoding: 'spans', default: -1, spans } });
  }
  return { kind: 'matrix', matrix_id: matrixId, packing_affinity_id: 'prompt-0', rows };
}
