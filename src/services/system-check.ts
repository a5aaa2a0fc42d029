// /v1/system-check: the store answers, each queue answers, and each kind of worker is alive.
// The hosted service names its checks cpu_queue and gpu_queue; Hearth maps them to its two queues:
// cpu_queue = inference (chat completions), gpu_queue = training (docs/api.md explains).
import type { Store } from '../store/sqlite/store.js';
import type { WorkerDirectory } from '../queue/port.js';
import type { WorkerKind } from '../protocol/messages.js';

export interface QueueCheckResult {
  success: boolean;
  duration: number;
  error: string | null;
  workers: number;
}

export async function systemCheck(store: Store, directory: WorkerDirectory | null) {
  let database = false;
  try {
    database = store.ping();
  } catch {
    database = false;
  }
  const check = async (kind: WorkerKind): Promise<QueueCheckResult> => {
    if (!directory) return { success: false, duration: 0, error: 'no queue is configured', workers: 0 };
    const h = await directory.health(kind);
    const workers = directory.liveWorkers(kind).length;
    const error = h.error ?? (workers === 0 ? `no ${kind} worker has sent a heartbeat recently` : null);
    return { success: h.ok && workers > 0, duration: h.durationMs / 1000, error, workers };
  };
  const [cpu, gpu] = await Promise.all([check('inference'), check('training')]);
  const body = { api: true, database, cpu_queue: cpu, gpu_queue: gpu };
  return { ok: database && cpu.success && gpu.success, body };
}
