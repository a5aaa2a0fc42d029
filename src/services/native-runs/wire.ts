// Pure pieces of the native training-runs API (no I/O): the wire shapes of runs, operations and results, and the
// mapping of ART's inputs (LoRA target names, trajectories) to what Hearth's trainer takes.
import type { NativeOperationRecord, NativeRunRecord } from '../../store/records.js';
import { invalid } from '../../errors/domain-errors.js';

export const TERMINAL_OPERATION_STATUSES: ReadonlySet<string> = new Set(['succeeded', 'failed', 'cancelled']);

/** Megatron LoRA target names (what ART's native backend sends) → the PEFT names Hearth's trainer uses. */
const MEGATRON_TARGETS: Record<string, string[]> = {
  linear_qkv: ['q_proj', 'k_proj', 'v_proj'],
  linear_proj: ['o_proj'],
  linear_fc1: ['gate_proj', 'up_proj'],
  linear_fc2: ['down_proj'],
};
const PEFT_TARGETS = new Set(['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']);

export function peftTargets(modules: string[]): string[] {
  const out = new Set<string>();
  for (const m of modules) {
    if (MEGATRON_TARGETS[m]) MEGATRON_TARGETS[m].forEach((t) => out.add(t));
    else if (PEFT_TARGETS.has(m)) out.add(m);
    else throw invalid(`LoRA target module "${m}" is not supported (supported: ${[...Object.keys(MEGATRON_TARGETS), ...PEFT_TARGETS].join(', ')})`);
  }
  return [...out];
}

export const runResponse = (r: NativeRunRecord) => ({
  run_id: r.id, run_name: r.runName, spec: r.spec, status: r.status, next_sequence_id: r.nextSequenceId,
  projected_learner_version: r.projectedLearnerVersion, committed_learner_version: r.committedLearnerVersion,
});

export const operationResponse = (o: NativeOperationRecord) => ({
  operation_id: o.id, run_id: o.runId, request_id: o.requestId, sequence_id: o.sequenceId, kind: o.kind, status: o.status,
  learner_parent_version: o.learnerParentVersion, reserved_output_learner_version: o.reservedOutputLearnerVersion,
  admitted_at: o.admittedAt, execution_started_at: o.executionStartedAt, execution_ended_at: o.executionEndedAt,
  cancel_requested: o.cancelRequested, latest_event_cursor: o.eventCursor,
  result_available: o.result !== null && !o.resultReleased, error: o.error,
});

/**
 * One SFT row per trajectory: its messages (a Choice becomes its assistant message) and tools. With
 * `assistantTurns: "last"` (ART's `last_assistant` mask) only the final assistant message is trained: the earlier
 * ones get `weight: 0` (the SFT JSONL's per-message convention, worker/training/sft-data.ts) and stay context.
 */
export function sftRow(
  trajectory: { messages_and_choices: Record<string, unknown>[]; tools?: unknown[] | null }, assistantTurns: 'all' | 'last' = 'all',
): Record<string, unknown> {
  const messages = trajectory.messages_and_choices.map((item) => ('message' in item && 'finish_reason' in item ? item.message : item) as Record<string, unknown>);
  const last = messages.findLastIndex((m) => m.role === 'assistant');
  const weighted = assistantTurns === 'all' ? messages : messages.map((m, i) => (m.role === 'assistant' && i !== last ? { ...m, weight: 0 } : m));
  return { messages: weighted, ...(trajectory.tools ? { tools: trajectory.tools } : {}) };
}

export function pick(metrics: Record<string, number>, keys: string[]): Record<string, number> {
  return Object.fromEntries(keys.filter((k) => typeof metrics[k] === 'number').map((k) => [k, metrics[k]]));
}

/** What a measuring job's step says of its batch's shape (ART's PackingOutcome, in Hearth's terms). */
export interface MeasuredPacking {
  /** Tokens of the longest packed sequence. */
  length: number;
  sequences: number;
  tokens: number;
  trainable: number;
}

/** A forward_backward's result (ForwardBackwardResult, docs/art.md) from its packing and the metrics it reports. */
export function measuredResult(op: NativeOperationRecord, p: MeasuredPacking, metrics: Record<string, number>): Record<string, unknown> {
  return {
    operation_id: op.id,
    kind: 'forward_backward',
    packing: {
      packed_sequence_length: p.length, packed_sequences: p.sequences, target_packed_sequences: p.sequences,
      nominal_capacity_tokens: p.length * p.sequences, physical_tokens: p.tokens, non_padding_tokens: p.tokens,
      loss_bearing_tokens: p.trainable, trainable_assistant_tokens: p.trainable, policy_token_counts: null, group_shapes: [],
    },
    loss_fn_outputs: [],
    metrics,
    produced_gradient: p.trainable > 0,
    packed_input_capture: null,
  };
}

/** An SFT forward_backward's result from its measuring job's one step: one packed sequence per trajectory. */
export function forwardBackwardResult(op: NativeOperationRecord, step: Record<string, number>): Record<string, unknown> {
  const packing = { length: step.max_sequence_tokens ?? 0, sequences: step.num_trajectories ?? 0, tokens: step.num_tokens ?? 0, trainable: step.num_trainable_tokens ?? 0 };
  return measuredResult(op, packing, pick(step, ['loss', 'num_tokens', 'num_trainable_tokens']));
}
