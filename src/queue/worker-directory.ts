// Who is alive: the last heartbeat of every worker, whichever adapter carried it.
import type { WorkerInfo } from './port.js';
import type { WorkerKind } from '../protocol/messages.js';
import { longestBlockingMs } from '../protocol/blocking-announcements.js';

export class WorkerRegistry {
  private readonly workers = new Map<string, WorkerInfo>();
  /**
   * @param timeoutMs silence after which a worker is gone (HEARTH_HEARTBEAT_TIMEOUT)
   * @param loadTimeoutMs the same for a worker whose last heartbeat announced a model load (HEARTH_LOAD_TIMEOUT):
   *   a load blocks the worker's event loop, so it cannot beat until the load ends (worker/model-loads.ts)
   */
  constructor(
    private readonly timeoutMs: number,
    private readonly loadTimeoutMs = timeoutMs,
  ) {}

  update(info: WorkerInfo): void {
    this.workers.set(info.id, { ...info, lastSeenMs: Date.now() });
  }

  remove(id: string): void {
    this.workers.delete(id);
  }

  /** The last heartbeat of a worker still known (live, or expired and not yet taken). */
  get(id: string): WorkerInfo | undefined {
    return this.workers.get(id);
  }

  private alive(w: WorkerInfo, now: number): boolean {
    return now - w.lastSeenMs <= allowedSilenceMs(w, this.timeoutMs, this.loadTimeoutMs);
  }

  isLive(id: string, now = Date.now()): boolean {
    const w = this.workers.get(id);
    return !!w && this.alive(w, now);
  }

  live(kind?: WorkerKind, now = Date.now()): WorkerInfo[] {
    return [...this.workers.values()].filter((w) => (!kind || w.kind === kind) && this.alive(w, now));
  }

  /** Workers whose heartbeats stopped; forgotten once reported. */
  takeExpired(now = Date.now()): WorkerInfo[] {
    const gone = [...this.workers.values()].filter((w) => !this.alive(w, now));
    for (const w of gone) this.workers.delete(w.id);
    return gone;
  }

  /** The live worker that reports `taskId` in flight, if any. */
  runnerOf(taskId: string, now = Date.now()): WorkerInfo | undefined {
    return this.live(undefined, now).find((w) => w.tasks.includes(taskId));
  }
}

/**
 * How long a worker may stay silent after its last heartbeat: the heartbeat timeout; the load timeout while that
 * heartbeat announced a model load; for an announced training step, the time it was expected to take (at least the
 * heartbeat timeout), so a host lost mid-step is noticed after about one step, not after the load timeout. A worker
 * with a pulse thread (worker/pulse.ts) keeps beating through its announced stretches while they progress: the
 * heartbeat timeout, always.
 */
export function allowedSilenceMs(w: Pick<WorkerInfo, 'loading' | 'pulse'>, timeoutMs: number, loadTimeoutMs: number): number {
  if (w.pulse) return timeoutMs;
  return Math.max(timeoutMs, longestBlockingMs(w.loading ?? [], loadTimeoutMs));
}

/**
 * "loading model a" / "loading models a, b" / "running training step 3 of model a": what a worker's last heartbeat
 * said was blocking it, for error messages; null when nothing was.
 */
export function blockedBy(w: WorkerInfo | undefined): string | null {
  const loads = w?.loading ?? [];
  const models = loads.filter((l) => l.step === undefined).map((l) => l.model);
  const parts = [
    ...(models.length ? [`loading ${models.length === 1 ? 'model' : 'models'} ${models.join(', ')}`] : []),
    ...loads.filter((l) => l.step !== undefined).map((l) => `running training step ${l.step} of model ${l.model}`),
  ];
  return parts.length ? parts.join(' and ') : null;
}
