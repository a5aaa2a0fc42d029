// The answers of the native training-runs API in each client framing (docs/art.md "Framings"): runs, operations
// and results as N1 (client.py @ 235af098, results as art.training contracts @ 76eaaea1) and N3 (client.py @
// 44cf4bbe, "frozen public wire", results as art.training contracts @ 44cf4bbe) read them, from what the runs
// service stores (N2's shapes, native-runs/wire.ts). Pure: no I/O.
import type { NativeOperationRecord, NativeRunRecord } from '../../store/records.js';
import type { NativeWire } from '../../store/sqlite/native-run-wires-repo.js';
import { operationResponse, runResponse } from './wire.js';

type Json = Record<string, unknown>;

export function renderRun(wire: NativeWire, anonymous: boolean, run: NativeRunRecord): Json {
  const r = runResponse(run);
  return wire === 'n3' && anonymous ? { ...r, run_name: null } : r;
}

export function renderOperation(wire: NativeWire, op: NativeOperationRecord): Json {
  if (wire === 'n1') return n1Operation(op);
  if (wire === 'n3') return n3Operation(op);
  return operationResponse(op);
}

/** `GET …/operations/{id}/result`: N2's and N1's envelope, N3's bare result summary. */
export function renderResult(wire: NativeWire, op: NativeOperationRecord, result: Json): Json {
  if (wire === 'n3') return n3Summary(op, result);
  if (wire === 'n1') return { operation_id: op.id, kind: n1Kind(op.kind), result: n1Result(op, result) };
  return { operation_id: op.id, kind: op.kind, result };
}

const keptResult = (op: NativeOperationRecord): Json | null =>
  op.status === 'succeeded' && op.result !== null && !op.resultReleased ? op.result : null;

/** pydantic's FiniteFloat: NaN and infinities would fail the whole result. */
const finite = (m: unknown): Record<string, number> =>
  Object.fromEntries(Object.entries((m ?? {}) as Record<string, unknown>).filter(([, v]) => typeof v === 'number' && Number.isFinite(v))) as Record<string, number>;

interface StoredPacking {
  packed_sequence_length: number; packed_sequences: number; physical_tokens: number; non_padding_tokens: number;
  loss_bearing_tokens: number; trainable_assistant_tokens: number;
}

/** Hearth pads each sequence to the longest of its batch (no packing): one row per sequence, consistent counts. */
function rows(p: StoredPacking) {
  const tokens = p.physical_tokens;
  const sequences = tokens === 0 ? 0 : Math.max(1, p.packed_sequences);
  const length = Math.max(1, p.packed_sequence_length, sequences ? Math.ceil(tokens / sequences) : 1);
  return { length, sequences, tokens };
}

// ---- N1 ----

const n1Kind = (kind: string) => (kind === 'save_weights_for_sampler' ? 'save_weights' : kind);

function n1Operation(op: NativeOperationRecord): Json {
  const result = keptResult(op);
  const contributing = (op.result as { contributing_forward_backward_operation_ids?: string[] } | null)?.contributing_forward_backward_operation_ids ?? [];
  return {
    operation_id: op.id, run_id: op.runId, request_id: op.requestId, sequence_id: op.sequenceId, kind: n1Kind(op.kind), status: op.status,
    learner_parent_version: op.learnerParentVersion, reserved_output_learner_version: op.reservedOutputLearnerVersion,
    contributing_operation_ids: contributing, cancel_requested: op.cancelRequested, event_cursor: op.eventCursor,
    result: result === null ? null : n1Result(op, result), error: op.error,
  };
}

/** N1 validates `operation.result` itself against art.training's contracts (extra fields forbidden). */
function n1Result(op: NativeOperationRecord, r: Json): Json {
  if (op.kind === 'forward_backward' || op.kind === 'forward') {
    const p = r.packing as StoredPacking;
    const { length, sequences, tokens } = rows(p);
    return {
      operation_id: op.id, kind: op.kind, metrics: finite(r.metrics),
      packing: {
        packed_sequence_length: length, packed_sequences: sequences, target_packed_sequences: Math.max(1, sequences), physical_tokens: tokens,
        non_padding_tokens: tokens, loss_bearing_tokens: Math.min(p.loss_bearing_tokens, tokens), trainable_assistant_tokens: p.trainable_assistant_tokens,
        group_shapes: [],
      },
    };
  }
  if (op.kind === 'optim_step') {
    return { operation_id: op.id, kind: 'optim_step', metrics: finite(r.metrics), contributing_forward_backward_operation_ids: r.contributing_forward_backward_operation_ids, checkpoint: r.checkpoint };
  }
  if (op.kind === 'save_weights_for_sampler') {
    return { operation_id: op.id, kind: 'save_sampler', metrics: finite(r.publication_metrics), checkpoint: r.checkpoint, lora: r.lora };
  }
  return r;
}

// ---- N3 ----

function n3Operation(op: NativeOperationRecord): Json {
  const result = keptResult(op);
  return {
    operation_id: op.id, run_id: op.runId, request_id: op.requestId, sequence_id: op.sequenceId, kind: op.kind, status: op.status,
    learner_parent_version: op.learnerParentVersion, reserved_output_learner_version: op.reservedOutputLearnerVersion,
    admitted_at: op.admittedAt, started_at: op.executionStartedAt, ended_at: op.executionEndedAt, cancel_requested: op.cancelRequested,
    latest_event_cursor: op.eventCursor, result_summary: result === null ? null : n3Summary(op, result), result_ref: null,
    error: op.error === null ? null : { code: n3ErrorCode(op.error) },
  };
}

/** ART's loss contract of a measured batch: `<loss name>_v1` (cross_entropy_v1, cispo_v1, importance_sampling_v1). */
function lossContractId(op: NativeOperationRecord): string {
  const name = (op.command as { loss?: { name?: unknown } }).loss?.name;
  return `${typeof name === 'string' ? name : 'cross_entropy'}_v1`;
}

/** N3's error object holds only `code` (extra fields forbidden): Hearth's message goes there, so ART's exception shows it. */
function n3ErrorCode(error: Json): string {
  return typeof error.message === 'string' ? error.message : JSON.stringify(error);
}

/**
 * N3's `_PublicTrainingResult`: only the fields of the operation's kind are sent, since ART dumps it with
 * exclude_unset and validates the rest against art.training's contracts, where any other field is forbidden.
 */
function n3Summary(op: NativeOperationRecord, r: Json): Json {
  const common = { operation_id: op.id, kind: op.kind, metrics: finite(op.kind === 'save_weights_for_sampler' ? r.publication_metrics : r.metrics) };
  const checkpoint = r.checkpoint as { learner_version: number; checkpoint_id: string } | undefined;
  const publicCheckpoint = checkpoint ? { checkpoint_id: checkpoint.checkpoint_id, learner_version: checkpoint.learner_version } : undefined;
  if (op.kind === 'forward_backward' || op.kind === 'forward') {
    const p = r.packing as StoredPacking;
    const { length, sequences, tokens } = rows(p);
    const packing = {
      packed_sequence_length: length, packed_sequences: sequences, target_packed_sequences: Math.max(1, sequences), logical_tokens: tokens,
      physical_tokens: tokens, packed_capacity_tokens: sequences * length, padding_tokens: sequences * length - tokens,
    };
    // return_token_logprobs: one TokenLogprobs per matrix (native-runs/token-logprobs.ts); absent (the default) otherwise.
    const logprobs = Array.isArray(r.token_logprobs) ? { token_logprobs: r.token_logprobs } : {};
    if (op.kind === 'forward') return { ...common, packing, ...logprobs };
    const loss = (r.metrics as { loss?: unknown } | undefined)?.loss;
    return {
      ...common, packing,
      training: { accepted_trainable_tokens: p.trainable_assistant_tokens, policy_token_counts: null },
      // A batch without trainable tokens has no mean loss: 0, with produced_gradient false.
      loss: { contract_id: lossContractId(op), value: typeof loss === 'number' && Number.isFinite(loss) ? loss : 0, reduction: 'mean_active_token' },
      produced_gradient: p.trainable_assistant_tokens > 0,
      ...logprobs,
    };
  }
  if (op.kind === 'optim_step') {
    return { ...common, contributing_operation_ids: r.contributing_forward_backward_operation_ids, checkpoint: publicCheckpoint, learner_version: checkpoint?.learner_version };
  }
  if (op.kind === 'save_weights_for_sampler') {
    const publication = (op.command as { publication?: { mode?: string; model_alias?: string } }).publication ?? {};
    return {
      ...common, checkpoint: publicCheckpoint, learner_version: checkpoint?.learner_version,
      target: publication.mode === 'in_flight_lora' ? 'active' : 'saved_generation', model_alias: publication.model_alias,
      // ART's N3 backend returns generation_id as train()'s artifact_name: the served name, as N2's `lora`.
      generation_id: r.lora,
    };
  }
  return { ...common, ...(publicCheckpoint ? { checkpoint: publicCheckpoint } : {}) };
}
