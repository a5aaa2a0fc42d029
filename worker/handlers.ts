// What a worker does with a task. The host (worker/host.ts) owns transport, heartbeats and cancellation;
// handlers own the work. Real handlers come from the inference and training engines.
import type { InferenceTask, TrainingTask } from '../src/protocol/messages.js';
import type { InferenceEvent } from '../src/protocol/inference-events.js';

export interface TrainingContext {
  /** Report an event (training_started, gradient_step, …) in order. */
  emit(type: 'training_started' | 'gradient_step', data: Record<string, unknown>): void;
  /** Report the finished checkpoint folder before returning; the API lists it before `training_ended`. */
  checkpoint(path: string): void;
  /** True once cancellation was asked; check between steps. */
  cancelled(): boolean;
  log(msg: string): void;
}

export interface InferenceContext {
  /**
   * Report one event of the answer (src/protocol/inference-events.ts) as the engine's adapter made it: chunks, then
   * one result or error, which ends the request (the host sends nothing of it after that).
   */
  emit(event: InferenceEvent): void;
  signal: AbortSignal;
}

export interface Handlers {
  training?: (task: TrainingTask, ctx: TrainingContext) => Promise<void>;
  /** Emits the request's events; resolves once it emitted its result or error, or throws (TaskError: shown to the client). */
  inference?: (task: InferenceTask, ctx: InferenceContext) => Promise<void>;
  /** Running totals sent with every heartbeat (inference: steps by batch size). */
  stats?: () => WorkerStats;
  /** Release models, threads, sessions. */
  close?: () => Promise<void>;
}

export interface WorkerStats {
  /** Number of engine steps per batch size ("8" → 120 steps of 8 sequences), since the worker started. */
  batchSizeCounts?: Record<string, number>;
  /** Prompt tokens each loaded model's engine gave its latest step with decoding rows (measured, or the fixed setting), by model. */
  prefillChunkTokens?: Record<string, number>;
  /** Base models whose engines this worker holds loaded (the console's Models page says where each is loaded). */
  loadedModels?: string[];
}

export class CancelledError extends Error {
  constructor() {
    super('cancelled');
  }
}

/** An error whose message and HTTP status may be shown to the client (bad parameters, unknown model, …). */
export class TaskError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** The request field at fault and a machine-readable code, when known (OpenAI's `param`, `code`). */
    readonly where: { param?: string; code?: string } = {},
  ) {
    super(message);
  }
}
