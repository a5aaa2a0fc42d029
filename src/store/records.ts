// Plain records as the store hands them to services. Timestamps are ISO-8601 strings (UTC).

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

export interface TrainingJobRecord {
  id: string;
  entity: string;
  modelId: string;
  kind: JobKind;
  status: JobStatus;
  payload: unknown;
  dedupKey: string | null;
  errorMessage: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

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

export const nowIso = () => new Date().toISOString();
