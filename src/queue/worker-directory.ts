// Who is alive: the last heartbeat of every worker, whichever adapter carried it.
import type { WorkerInfo, WorkerKind } from './port.js';

export class WorkerRegistry {
  private readonly workers = new Map<string, WorkerInfo>();
  constructor(private readonly timeoutMs: number) {}

  update(info: WorkerInfo): void {
    this.workers.set(info.id, { ...info, lastSeenMs: Date.now() });
  }

  remove(id: string): void {
    this.workers.delete(id);
  }

  isLive(id: string, now = Date.now()): boolean {
    const w = this.workers.get(id);
    return !!w && now - w.lastSeenMs <= this.timeoutMs;
  }

  live(kind?: WorkerKind, now = Date.now()): WorkerInfo[] {
    return [...this.workers.values()].filter((w) => (!kind || w.kind === kind) && now - w.lastSeenMs <= this.timeoutMs);
  }

  /** Workers whose heartbeats stopped; forgotten once reported. */
  takeExpired(now = Date.now()): WorkerInfo[] {
    const gone = [...this.workers.values()].filter((w) => now - w.lastSeenMs > this.timeoutMs);
    for (const w of gone) this.workers.delete(w.id);
    return gone;
  }

  /** The live worker that reports `taskId` in flight, if any. */
  runnerOf(taskId: string, now = Date.now()): WorkerInfo | undefined {
    return this.live(undefined, now).find((w) => w.tasks.includes(taskId));
  }
}
