// Admission of a native run command (`POST /v1/training/runs/{id}/{kind}`): pure rules, no I/O.
//
// ART's RemoteTrainingClient retries POSTs (three times) and numbers commands with sequence_id, so a command is
// identified by its request_id: the same request_id with the same body is the same operation (answered again,
// applied once), with another body it is refused; a new command must carry exactly the run's next sequence_id.
import crypto from 'node:crypto';
import type { NativeOperationKind, NativeOperationRecord, NativeRunRecord } from '../../store/records.js';
import { stateRefusal } from './state.js';

/** sha256 of the body's JSON with object keys sorted: equal for a byte-different but same-valued retry. */
export function commandFingerprint(body: unknown): string {
  return crypto.createHash('sha256').update(canonicalJson(body)).digest('hex');
}

export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export type AdmissionRefusal = { status: 404 | 409 | 501; message: string; expectedSequenceId?: number };

export type Admission =
  | { type: 'replay'; op: NativeOperationRecord }
  | { type: 'admit'; learnerParentVersion: number; reservedOutputLearnerVersion: number | null }
  | { type: 'refuse'; refusal: AdmissionRefusal };

export interface CommandInput {
  kind: NativeOperationKind;
  requestId: string;
  sequenceId: number;
  fingerprint: string;
  /** forward_backward, forward: what its batch holds ('sft', 'rl', …). */
  batchKind?: string;
  /** save_state: the name and overwrite; load_state: the state it names (native-runs/state.ts). */
  state?: { name?: string; overwrite?: boolean; ref?: string };
  /** Why another client framing's command cannot be executed (native-runs/framing.ts), answered like the reasons below. */
  unsupported?: string;
}

/** Commands Hearth's trainer does not execute, and why (answered 501, nothing stored). */
export function unsupportedReason(input: CommandInput): string | null {
  if (input.unsupported) return input.unsupported;
  if ((input.kind === 'forward' || input.kind === 'forward_backward') && input.batchKind !== 'sft' && input.batchKind !== 'rl') {
    return `${input.kind} batches of kind ${JSON.stringify(input.batchKind)} are not implemented by this server (supported: sft, rl)`;
  }
  return null;
}

/** forward_backward operations since the run's last optim_step whose gradient an optim_step would apply. */
export function pendingGradients(ops: NativeOperationRecord[]): NativeOperationRecord[] {
  // A failed or cancelled optim_step applied nothing: the gradients before it are still pending. A load_state
  // drops them (they were measured at weights the learner no longer has).
  let lastOptim = -1;
  for (const op of ops) {
    if ((op.kind === 'optim_step' || op.kind === 'load_state') && op.status !== 'cancelled' && op.status !== 'failed') lastOptim = op.sequenceId;
  }
  return ops.filter(
    (op) => op.kind === 'forward_backward' && op.sequenceId > lastOptim && op.consumedBy === null && !op.cancelRequested && op.status !== 'failed' && op.status !== 'cancelled',
  );
}

export function admit(run: NativeRunRecord, ops: NativeOperationRecord[], input: CommandInput): Admission {
  const prior = ops.find((op) => op.requestId === input.requestId);
  if (prior) {
    if (prior.fingerprint === input.fingerprint) return { type: 'replay', op: prior };
    return refuse(409, `request_id ${input.requestId} was already used for another command (sequence_id ${prior.sequenceId}, ${prior.kind}); nothing was applied`);
  }
  if (run.status !== 'open') return refuse(409, `training run ${run.id} is ${run.status}; it takes no more commands`);
  if (input.sequenceId !== run.nextSequenceId) {
    const what = input.sequenceId > run.nextSequenceId ? 'skips ahead' : 'rewinds';
    return { type: 'refuse', refusal: { status: 409, message: `sequence_id ${input.sequenceId} ${what}: the run expects sequence_id ${run.nextSequenceId}`, expectedSequenceId: run.nextSequenceId } };
  }
  const unsupported = unsupportedReason(input);
  if (unsupported) return refuse(501, unsupported);
  const parent = run.projectedLearnerVersion;
  const stateRefused = stateRefusal(ops, input, parent);
  if (stateRefused) return { type: 'refuse', refusal: stateRefused };
  if (input.kind === 'load_state') return { type: 'admit', learnerParentVersion: parent, reservedOutputLearnerVersion: parent + 1 };
  if (input.kind === 'optim_step') {
    if (pendingGradients(ops).length === 0) {
      return refuse(409, `optim_step has no gradients to apply: no forward_backward since learner version ${parent} (or all of them failed or were cancelled)`);
    }
    return { type: 'admit', learnerParentVersion: parent, reservedOutputLearnerVersion: parent + 1 };
  }
  if (input.kind === 'save_weights_for_sampler' && parent === 0) {
    return refuse(409, 'save_weights_for_sampler needs a trained learner version: learner version 0 is the base model (run an optim_step first)');
  }
  return { type: 'admit', learnerParentVersion: parent, reservedOutputLearnerVersion: null };
}

function refuse(status: 404 | 409 | 501, message: string): Admission {
  return { type: 'refuse', refusal: { status, message } };
}
