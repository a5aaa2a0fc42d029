// /v1/system-check: each part of the installation, and 200 when what it has configured is healthy (503 naming the
// parts that are not). The parts: the database, the queue (the embedded one, or Redis), and the inference and the
// training workers. Worker kinds count only where the installation requires them (HEARTH_REQUIRED_WORKERS; by
// default the kinds HEARTH_WORKERS starts in embedded mode, and inference alone with Redis, where worker hosts join
// on their own): an inference-only cluster is healthy; a required kind with no live worker is not.
// The hosted service names its checks cpu_queue and gpu_queue; Hearth maps them to its two queues:
// cpu_queue = inference (chat completions), gpu_queue = training (docs/api.md explains). They are kept, with
// `success` true for a kind that is not required; `parts` and `failed` say the rest.
import type { Store } from '../store/sqlite/store.js';
import type { WorkerDirectory } from '../queue/port.js';
import type { WorkerKind } from '../protocol/messages.js';

export interface QueueCheckResult {
  success: boolean;
  duration: number;
  error: string | null;
  workers: number;
}

export interface PartCheck {
  ok: boolean;
  error: string | null;
}

export interface WorkersPart extends PartCheck {
  /** Whether this kind counts toward the verdict (HEARTH_REQUIRED_WORKERS). */
  required: boolean;
  live: number;
}

export type PartName = 'database' | 'queue' | 'inference_workers' | 'training_workers';

/** Which parts failed (pure): the database and the queue always count, a worker kind only when required. */
export function failedParts(parts: { database: PartCheck; queue: PartCheck; inference_workers: WorkersPart; training_workers: WorkersPart }): PartName[] {
  return (Object.keys(parts) as PartName[]).filter((name) => !parts[name].ok);
}

/** One kind's workers (pure): ok when not required, or at least one is live. */
export function workersPart(kind: WorkerKind, live: number, required: boolean): WorkersPart {
  const error = live > 0 ? null : `no ${kind} worker has sent a heartbeat recently${required ? '' : ' (not required: HEARTH_REQUIRED_WORKERS)'}`;
  return { ok: live > 0 || !required, required, live, error: live > 0 || required ? error : null };
}

export async function systemCheck(store: Store, directory: WorkerDirectory | null, required: readonly WorkerKind[]) {
  let database: PartCheck;
  try {
    database = store.ping() ? { ok: true, error: null } : { ok: false, error: 'the database did not answer' };
  } catch (err) {
    database = { ok: false, error: `the database: ${(err as Error).message}` };
  }
  if (!directory) {
    const none = { success: false, duration: 0, error: 'no queue is configured', workers: 0 };
    const parts = {
      database, queue: { ok: false, error: 'no queue is configured', duration: 0 },
      inference_workers: workersPart('inference', 0, true), training_workers: workersPart('training', 0, true),
    };
    return { ok: false, body: { api: true, database: database.ok, cpu_queue: none, gpu_queue: none, parts, failed: failedParts(parts) } };
  }
  // One queue serves both kinds: its health is asked per kind (the embedded queue answers per worker process).
  const [hInference, hTraining] = await Promise.all([directory.health('inference'), directory.health('training')]);
  const queueError = hInference.error ?? hTraining.error;
  const queue = { ok: hInference.ok && hTraining.ok, error: queueError, duration: Math.max(hInference.durationMs, hTraining.durationMs) / 1000 };
  const inference = workersPart('inference', directory.liveWorkers('inference').length, required.includes('inference'));
  const training = workersPart('training', directory.liveWorkers('training').length, required.includes('training'));
  const legacy = (h: { ok: boolean; error: string | null; durationMs: number }, w: WorkersPart): QueueCheckResult =>
    ({ success: h.ok && w.ok, duration: h.durationMs / 1000, error: h.error ?? (w.ok ? null : w.error), workers: w.live });
  const parts = { database, queue, inference_workers: inference, training_workers: training };
  const failed = failedParts(parts);
  const body = { api: true, database: database.ok, cpu_queue: legacy(hInference, inference), gpu_queue: legacy(hTraining, training), parts, failed };
  return { ok: failed.length === 0, body };
}
