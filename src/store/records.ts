// Plain records as the store hands them to services. Timestamps are ISO-8601 strings (UTC).
import type { RlTrainingPayload, SftTrainingPayload } from '../protocol/training-task.js';

export interface ApiKeyRecord {
  id: string;
  prefix: string;
  entity: string;
  createdAt: string;
  revokedAt: string | null;
}

export interface ModelRecord {
  id: string;
  entity: string;
  project: string;
  name: string;
  baseModel: string;
  runId: string | null;
  createdAt: string;
}

export interface CheckpointRecord {
  id: string;
  modelId: string;
  step: number;
  metrics: Record<string, number>;
  path: string | null;
  createdAt: string;
}

export type JobKind = 'rl' | 'sft';
export type JobStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';
export const TERMINAL_STATUSES: readonly JobStatus[] = ['succeeded', 'failed', 'cancelled'];

interface TrainingJobFields {
  id: string;
  entity: string;
  modelId: string;
  status: JobStatus;
  dedupKey: string | null;
  errorMessage: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

/** A training job and what it trains on: the payload its task carries to the worker (src/protocol/training-task.ts). */
export type TrainingJobRecord = TrainingJobFields & ({ kind: 'rl'; payload: RlTrainingPayload } | { kind: 'sft'; payload: SftTrainingPayload });

export type TrainingEventType = 'training_started' | 'gradient_step' | 'training_ended' | 'training_failed';

export interface TrainingEventRecord {
  seq: number;
  id: string;
  jobId: string;
  type: TrainingEventType;
  data: Record<string, unknown>;
  createdAt: string;
}

export interface UsageRecord {
  entity: string;
  project: string;
  model: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
}

export type NativeRunStatus = 'open' | 'closing' | 'closed' | 'failed';

/** A native training run (`/v1/training/runs…`): one learner lineage per (entity, run_name). */
export interface NativeRunRecord {
  id: string;
  entity: string;
  runName: string;
  /** The wire spec as resolved (compared by value on every resolve). */
  spec: Record<string, unknown>;
  status: NativeRunStatus;
  /** The hidden model whose checkpoint N is learner version N. */
  learnerModelId: string;
  nextSequenceId: number;
  projectedLearnerVersion: number;
  committedLearnerVersion: number;
  createdAt: string;
}

export type NativeOperationKind = 'forward' | 'forward_backward' | 'optim_step' | 'save_state' | 'load_state' | 'save_weights_for_sampler';
export type NativeOperationStatus = 'admitted' | 'running' | 'succeeded' | 'failed' | 'cancelled';

export interface NativeOperationRecord {
  id: string;
  runId: string;
  requestId: string;
  /** sha256 of the command's canonical JSON: a replay must match it. */
  fingerprint: string;
  sequenceId: number;
  kind: NativeOperationKind;
  command: Record<string, unknown>;
  status: NativeOperationStatus;
  learnerParentVersion: number;
  reservedOutputLearnerVersion: number | null;
  admittedAt: string;
  executionStartedAt: string | null;
  executionEndedAt: string | null;
  cancelRequested: boolean;
  eventCursor: number;
  /** The training job that executes it (forward_backward, optim_step). */
  jobId: string | null;
  /** forward_backward: the optim_step that applied its gradient. */
  consumedBy: string | null;
  result: Record<string, unknown> | null;
  resultReleased: boolean;
  error: Record<string, unknown> | null;
}

export const nowIso = () => new Date().toISOString();
